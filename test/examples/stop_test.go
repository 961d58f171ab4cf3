package examples

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The stop examples' settings: the grace period (the Manager's) or drain
// (handroll's controller) is short, and deaf outlives it by far.
const (
	stopGrace = 2 * time.Second
	deafFor   = 6 * time.Second
)

// TestStopWhenTheGracePeriodRunsOut: on the twin's Manager, the groups stop
// in order (Others before LeaderElection), Start returns once the grace
// period has run out with a runnable still running, the Lease is released
// then, and the other replica leads while the deaf runnable is still
// running: two leaders' work at once, until the old process exits.
func TestStopWhenTheGracePeriodRunsOut(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t)
	bin := build(t, "hack/compare", "./examples/stop")
	const lease = "stop-twin"
	args := func(id string) []string {
		return append(electionArgs(kc, ns, lease, id), "--grace", stopGrace.String(), "--deaf-for", deafFor.String(), "--tick", "250ms")
	}
	a := start(t, "a", bin, args("a")...)
	b := start(t, "b", bin, args("b")...)
	leader, standby := firstOf(t, a, b, "elected")
	leader.waitFor(t, " "+leader.name+": deaf: started", 0)

	from := leader.next()
	termAt := leader.signal(t, syscall.SIGTERM)
	others, _ := leader.waitFor(t, " every-replica: stopped", from)
	leaderGroup, _ := leader.waitFor(t, " polite: stopped", from)
	if others > leaderGroup {
		t.Errorf("polite (the LeaderElection group) stopped before every-replica (Others)")
	}
	leader.waitFor(t, " deaf: context cancelled", from)
	_, ret := leader.waitFor(t, " Start returned: ", from)
	if !strings.Contains(ret.text, "failed waiting for all runnables to end within grace period") {
		t.Errorf("Start returned %q, want the grace period's error", ret.text)
	}
	// A small margin for the clock readings of two processes' lines.
	if d := ret.at.Sub(termAt); d < stopGrace-100*time.Millisecond {
		t.Errorf("Start returned %s after SIGTERM, before the grace period of %s ran out", d, stopGrace)
	}
	_, elected := standby.waitFor(t, " "+standby.name+": elected", 0)
	t.Logf("Start returned %s after SIGTERM; %s led %s after SIGTERM", ret.at.Sub(termAt).Round(time.Millisecond), standby.name, elected.at.Sub(termAt).Round(time.Millisecond))
	// The Manager's identity (hostname_uuid) is not the --id: the line
	// ends with it, quoted, as the Lease holds it.
	identity := elected.text[strings.LastIndex(elected.text, " as ")+len(" as "):]

	leader.waitFor(t, " deaf: stopped", from)
	if err := leader.wait(t); err != nil {
		t.Errorf("%s: %v, want exit code 0 once deaf has stopped", leader.name, err)
	}
	// What was left running: deaf, writing as if it led, while the other
	// replica held the Lease.
	overlap := 0
	for i, l, ok := leader.find(" deaf: still running", from); ok; i, l, ok = leader.find(" deaf: still running", i+1) {
		if l.at.After(elected.at) && strings.HasSuffix(l.text, "Lease holder "+identity) {
			overlap++
		}
	}
	if overlap == 0 {
		t.Errorf("no line of %s's deaf runnable while %s held the Lease: the Lease was not released while it ran", leader.name, standby.name)
	}
	t.Logf("%s's deaf runnable said %d times that it ran while %s held the Lease", leader.name, overlap, standby.name)
}

// TestStopKeepsTheLeaseWhileAReconcileRuns: handroll's counterpart. The
// reconciles keep a live context through the drain, are cancelled at its
// end, and the one that goes on makes the controller's error wrap
// ErrStillRunning: the elector keeps the Lease, the leader exits at once,
// and the other replica leads only once the Lease has expired, never
// while the deaf reconcile runs.
func TestStopKeepsTheLeaseWhileAReconcileRuns(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t)
	client := env.KubeClient(t)
	for _, name := range []string{"polite", "deaf"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bin := build(t, ".", "./examples/stop")
	const lease = "stop-handroll"
	args := func(id string) []string {
		// deaf would outlive the Lease by far if the process stayed.
		return append(electionArgs(kc, ns, lease, id), "--shutdown-timeout", stopGrace.String(), "--deaf-for", (2 * leaseDuration).String(), "--tick", "250ms")
	}
	a := start(t, "a", bin, args("a")...)
	b := start(t, "b", bin, args("b")...)
	leader, standby := firstOf(t, a, b, "elected")
	leader.waitFor(t, " polite: reconciling", 0)
	leader.waitFor(t, " deaf: reconciling", 0)

	from := leader.next()
	termAt := leader.signal(t, syscall.SIGTERM)
	_, cancelled := leader.waitFor(t, " polite: context cancelled", from)
	if d := cancelled.at.Sub(termAt); d < stopGrace-100*time.Millisecond {
		t.Errorf("polite's context was cancelled %s after SIGTERM, within the drain of %s", d, stopGrace)
	}
	_, ret := leader.waitFor(t, " Run returned: ", from)
	if !strings.Contains(ret.text, "still running") {
		t.Errorf("Run returned %q, want the work still running", ret.text)
	}
	if err := leader.wait(t); err == nil {
		t.Errorf("%s exited with code 0 with a reconcile still running", leader.name)
	}
	exited := time.Now()
	if h := getLease(t, ns, lease).Spec.HolderIdentity; h == nil || *h != leader.name {
		t.Errorf("the Lease names %v once %s exited, want it kept by %s", h, leader.name, leader.name)
	}
	_, elected := standby.waitFor(t, " "+standby.name+": elected", 0)
	if !elected.at.After(exited) {
		t.Errorf("%s led before %s had exited", standby.name, leader.name)
	}
	t.Logf("%s exited %s after SIGTERM; %s led %s after SIGTERM", leader.name, exited.Sub(termAt).Round(time.Millisecond), standby.name, elected.at.Sub(termAt).Round(time.Millisecond))
	if _, l, ok := leader.find(`Lease holder "`+standby.name+`"`, from); ok {
		t.Errorf("%s's deaf reconcile ran while %s held the Lease: %q", leader.name, standby.name, l.text)
	}
}
