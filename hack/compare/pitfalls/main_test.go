// Package pitfalls shows controller-runtime's side of the pitfalls that
// docs/pitfalls.md answers for handroll: each test runs a Manager of
// controller-runtime v0.25.2 against the project's own control plane
// (test/controlplane) and shows what it does.
package pitfalls

import (
	"context"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	// Without a logger controller-runtime prints a warning and a stack
	// trace; the tests assert on errors and events, not on logs.
	ctrl.SetLogger(logr.Discard())
	os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env))
}

// waitLimit bounds every wait for something that must happen; generous,
// because the tests show what happens, not how fast on a loaded machine.
const waitLimit = 30 * time.Second

// config returns the admin rest.Config, skipping t under -short.
func config(t *testing.T) *rest.Config {
	t.Helper()
	if env == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	return rest.CopyConfig(env.Config)
}

// newManager builds a Manager that binds no port.
func newManager(t *testing.T, cfg *rest.Config, opts manager.Options) manager.Manager {
	t.Helper()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// running is a Manager started in a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// start runs mgr.Start until the returned stop is called or t ends.
func start(t *testing.T, mgr manager.Manager) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = mgr.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(waitLimit):
			t.Error("mgr.Start did not return after its context was cancelled")
		}
	})
	return r
}

// within fails t unless ch is closed within d.
func within(t *testing.T, d time.Duration, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// everyReplica is a Runnable that says it needs no leader election.
type everyReplica struct{ manager.RunnableFunc }

func (everyReplica) NeedLeaderElection() bool { return false }

// watchGate holds back the body of every watch response while it is shut:
// bytes read from a watch then reach the informer only once it opens, so a
// cache learns of no change meanwhile. Lists and writes pass.
type watchGate struct {
	mu   sync.Mutex
	shut chan struct{} // nil while open
}

// hold shuts the gate.
func (g *watchGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == nil {
		g.shut = make(chan struct{})
	}
}

// release opens the gate and lets what it held through.
func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *watchGate) wait() {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		<-shut
	}
}

// wrap is a rest.Config.WrapTransport.
func (g *watchGate) wrap(rt http.RoundTripper) http.RoundTripper {
	return gatedTransport{next: rt, gate: g}
}

type gatedTransport struct {
	next http.RoundTripper
	gate *watchGate
}

func (t gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" {
		resp.Body = gatedBody{ReadCloser: resp.Body, gate: t.gate}
	}
	return resp, err
}

type gatedBody struct {
	io.ReadCloser
	gate *watchGate
}

// Read waits after reading, so that bytes that arrive while the gate is
// shut are held even when the read began before.
func (b gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.gate.wait()
	return n, err
}
