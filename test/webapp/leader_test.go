package webapp

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/operator"
)

// gauge reads one series of a gauge family, 0 when absent.
func gauge(op *operator.Operator, t *testing.T, name string) float64 {
	t.Helper()
	if f, ok := op.Metrics(t)[name]; ok {
		for _, m := range f.GetMetric() {
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// leaderOf waits until exactly one of ops reports leading and returns it.
func leaderOf(t *testing.T, ops []*operator.Operator) *operator.Operator {
	t.Helper()
	var leader *operator.Operator
	eventually(t, "exactly one replica leads", func(ctx context.Context) (bool, error) {
		leader = nil
		for _, op := range ops {
			if gauge(op, t, "leader_election_master_status") == 1 {
				if leader != nil {
					return false, fmt.Errorf("two replicas report leading")
				}
				leader = op
			}
		}
		return leader != nil, nil
	})
	return leader
}

// TestOneOfThreeReplicasReconciles runs three operators on one Lease: one
// leads and reconciles, the others keep warm caches and do not; stopping the
// leader (SIGTERM) hands over within about a retry period, killing it
// (SIGKILL) within a lease duration; each new leader reconciles at once.
func TestOneOfThreeReplicasReconciles(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	args := []string{
		"--operator-namespace=" + opNS,
		"--leader-elect-resource-namespace=" + opNS,
		"--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=2s",
		"--leader-elect-retry-period=500ms",
	}
	var ops []*operator.Operator
	for range 3 {
		ops = append(ops, operator.Start(t, env.Kubeconfig, args...))
	}
	first := leaderOf(t, ops)

	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	converged(t, ns, "one")
	for _, op := range ops {
		reconciles := counter(op, t, "controller_runtime_reconcile_total")
		if op == first && reconciles == 0 {
			t.Error("the leader reconciled nothing")
		}
		if op != first && reconciles != 0 {
			t.Errorf("a standby reconciled %v times", reconciles)
		}
	}
	lease, err := kubeClient(t).CoordinationV1().Leases(opNS).Get(context.Background(), "handroll-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the Lease names %s", *lease.Spec.HolderIdentity)

	// Graceful stop: the leader releases the Lease once its work drained.
	stopped := time.Now()
	if err := first.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("the leader's graceful stop: %v", err)
	}
	exited := time.Since(stopped)
	rest := []*operator.Operator{}
	for _, op := range ops {
		if op != first {
			rest = append(rest, op)
		}
	}
	second := leaderOf(t, rest)
	t.Logf("SIGTERM: leader exited after %s; a standby led %s after the signal", exited.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))

	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	converged(t, ns, "two")

	// A crash: the Lease is not released and must expire.
	killed := time.Now()
	_ = second.Stop(t, syscall.SIGKILL, 10*time.Second)
	var third *operator.Operator
	for _, op := range rest {
		if op != second {
			third = op
		}
	}
	leaderOf(t, []*operator.Operator{third})
	t.Logf("SIGKILL: the last standby led %s after the kill (lease duration 4s)", time.Since(killed).Round(time.Millisecond))

	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "three", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	converged(t, ns, "three")
}

// TestColdStandby: with --leader-elect-warm-standby=false a standby is ready
// without caches (it serves webhooks, it can take over) and lists nothing
// until it leads; after the leader stops it fills its caches and reconciles.
func TestColdStandby(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	args := []string{
		"--operator-namespace=" + opNS,
		"--leader-elect-resource-namespace=" + opNS,
		"--leader-elect-lease-duration=4s",
		"--leader-elect-renew-deadline=2s",
		"--leader-elect-retry-period=500ms",
		"--leader-elect-warm-standby=false",
	}
	ops := []*operator.Operator{operator.Start(t, env.Kubeconfig, args...), operator.Start(t, env.Kubeconfig, args...)}
	first := leaderOf(t, ops)
	standby := ops[0]
	if standby == first {
		standby = ops[1]
	}
	if code, body := standby.Readyz(t); code != 200 {
		t.Errorf("a cold standby is not ready: %d %s", code, body)
	}
	if strings.Contains(standby.Log(), "Caches synced") {
		t.Errorf("a cold standby filled its caches before leading:\n%s", standby.Log())
	}

	if err := first.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Errorf("the leader's graceful stop: %v", err)
	}
	leaderOf(t, []*operator.Operator{standby})
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "cold", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	converged(t, ns, "cold")
	if !strings.Contains(standby.Log(), "Caches synced") {
		t.Errorf("the new leader never reported its caches synced:\n%s", standby.Log())
	}
}

// TestGracefulShutdownUnderLoad: SIGTERM while 60 WebApps converge. The
// operator finishes the reconciles in flight, flushes its events, releases
// the Lease and exits 0 within --graceful-shutdown-timeout; what it had not
// reached is left for the next leader, which converges everything.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	args := []string{
		"--operator-namespace=" + opNS,
		"--leader-elect-resource-namespace=" + opNS,
		"--graceful-shutdown-timeout=20s",
		// Slow enough that convergence is still under way at the signal.
		"--kube-api-qps=10", "--kube-api-burst=10",
	}
	op := operator.Start(t, env.Kubeconfig, args...)
	leaderOf(t, []*operator.Operator{op})
	const n = 60
	for i := range n {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%02d", i), Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
	}
	convergedCount := func(ctx context.Context) int {
		l, err := handrollClient(t).HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0
		}
		c := 0
		for _, w := range l.Items {
			if w.Status.ObservedGeneration == w.Generation {
				c++
			}
		}
		return c
	}
	eventually(t, "some WebApps converge", func(ctx context.Context) (bool, error) {
		return convergedCount(ctx) >= 3, nil
	})
	before := convergedCount(context.Background())
	if before == n {
		t.Fatal("everything converged before the signal: the test shows nothing")
	}

	if err := op.Stop(t, syscall.SIGTERM, 25*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM under load: %v\n%s", err, op.Log())
	}
	log := op.Log()
	for _, want := range []string{"All workers finished", "Released the lease"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	if strings.Contains(log, "Some events may not have been written") {
		t.Error("events were left unwritten at the stop")
	}
	lease, err := kubeClient(t).CoordinationV1().Leases(opNS).Get(context.Background(), "handroll-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease still names %q after a graceful stop", *h)
	}
	t.Logf("%d of %d WebApps had converged at the signal", before, n)

	next := operator.Start(t, env.Kubeconfig, args[:3]...)
	leaderOf(t, []*operator.Operator{next})
	for i := range n {
		converged(t, ns, fmt.Sprintf("w%02d", i))
	}
	for i := range n {
		if err := handrollClient(t).HandrollV1().WebApps(ns).Delete(context.Background(), fmt.Sprintf("w%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	eventually(t, "the WebApps are gone", func(ctx context.Context) (bool, error) {
		l, err := handrollClient(t).HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}
