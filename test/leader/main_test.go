// Package leader tests pkg/leader against a real etcd and kube-apiserver:
// two electors on one Lease, a graceful handover, a lease left to expire, a
// lease lost to another holder or to an API server that stops answering, and
// the metric and health check; and, under them all, the compare-and-swap on
// the Lease's resourceVersion that lets only one of two candidates take it.
package leader

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env)) }

// Short durations keep the tests quick and still pass Validate (2 s + 0.5 s
// + a request timeout of 1 s < 4 s): a standby takes an unreleased lease
// over after 4 s, a released one within a retry period (0.5 s, jittered up
// to 1.1 s).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// waitLimit bounds every wait on the election; generous, because the tests
// assert what happens, not how fast on a loaded machine.
const waitLimit = 30 * time.Second

func testOptions(namespace, lease string) leader.Options {
	o := leader.DefaultOptions()
	o.LeaseName = lease
	o.LeaseNamespace = namespace
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = leaseDuration, renewDeadline, retryPeriod
	return o
}

// work is an onStartedLeading that records its life and takes drain to stop
// once its context ends, like controllers finishing in-flight reconciles.
type work struct {
	drain                       time.Duration
	started, cancelled, stopped chan struct{}
	startedAt, cancelledAt      time.Time // read after started, cancelled are closed
}

func newWork(drain time.Duration) *work {
	return &work{drain: drain, started: make(chan struct{}), cancelled: make(chan struct{}), stopped: make(chan struct{})}
}

func (w *work) run(ctx context.Context) error {
	w.startedAt = time.Now()
	close(w.started)
	<-ctx.Done()
	w.cancelledAt = time.Now()
	close(w.cancelled)
	time.Sleep(w.drain)
	close(w.stopped)
	return nil
}

// candidate is one replica: an Elector running in a goroutine.
type candidate struct {
	*leader.Elector
	reg    *prometheus.Registry
	work   *work
	cancel context.CancelFunc

	done     chan struct{}
	err      error     // Run's result, once done is closed
	returned time.Time // when Run returned
}

// startCandidate builds an Elector on cfg and runs it until the test ends or
// c.cancel is called.
func startCandidate(t *testing.T, cfg *rest.Config, opts leader.Options, w *work) *candidate {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := leader.New(cfg, opts, reg)
	if err != nil {
		t.Fatalf("leader.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{Elector: e, reg: reg, work: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = e.Run(ctx, w.run)
		c.returned = time.Now()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(budget.Scale(waitLimit)):
			t.Errorf("Run of %s did not return after its context was cancelled", e.Identity())
		}
	})
	return c
}

// wait returns Run's result, failing the test if Run does not return in time.
func (c *candidate) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(budget.Scale(waitLimit)):
		t.Fatalf("Run of %s did not return within %s", c.Identity(), budget.Scale(waitLimit))
		return nil
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(budget.Scale(waitLimit)):
		t.Fatalf("%s: not within %s", what, budget.Scale(waitLimit))
	}
}

func leaseClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getLease(t *testing.T, namespace, name string) *coordinationv1.Lease {
	t.Helper()
	ctx, cancel := budget.Context(t, context.Background(), 10*time.Second, "Lease "+namespace+"/"+name)
	defer cancel()
	l, err := leaseClient(t).CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// masterStatus reads leader_election_master_status{name=lease} from reg.
func masterStatus(t *testing.T, reg *prometheus.Registry, lease string) (value float64, found bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == lease {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// cutter is a transport that, once cut, holds every request until its
// context ends: an API server that stopped answering, the case the lease
// client's own timeout is for.
type cutter struct {
	cut *atomic.Bool
	rt  http.RoundTripper
}

func (c cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return c.rt.RoundTrip(req)
}

// cuttableConfig returns a copy of the admin config whose requests hang once
// cut is set. leader.New copies the config, wrapper included.
func cuttableConfig(cut *atomic.Bool) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutter{cut: cut, rt: rt} })
	return cfg
}
