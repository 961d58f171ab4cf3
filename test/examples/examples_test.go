package examples

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/handroll/handroll/test/budget"
)

// The informer example's annotation and hash, computed here independently.
const annotation = "examples.handroll.dev/data-sha256"

func dataHash(data map[string]string) string {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// waitAnnotated waits until the ConfigMap carries the hash of its data.
func waitAnnotated(t *testing.T, client kubernetes.Interface, ns, name string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	deadline := time.Now().Add(budget.Scale(waitLimit))
	for time.Now().Before(deadline) {
		var err error
		cm, err = client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Annotations[annotation] == dataHash(cm.Data) {
			return cm
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("ConfigMap %s/%s: annotation %s is %q, want %q (the hash of %v)", ns, name, annotation, cm.Annotations[annotation], dataHash(cm.Data), cm.Data)
	return nil
}

// TestInformerWorkqueue: objects present before the start and created
// after it are annotated; a burst of updates to one ConfigMap takes fewer
// reconciles than updates; SIGTERM stops the workers and the process cleanly.
func TestInformerWorkqueue(t *testing.T) {
	ns := env.Namespace(t)
	client := env.KubeClient(t)
	ctx := context.Background()
	bin := build(t, ".", "./examples/informer-workqueue")
	create := func(name string, data map[string]string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	create("before", map[string]string{"a": "1"})
	// Each reconcile pretends to work for 500ms: the burst below (20 quick
	// writes) arrives while the first of its reconciles still runs.
	p := start(t, "informer-workqueue", bin, "--kubeconfig", kubeconfig(t), "--namespace", ns, "--workers", "2", "--work", "500ms")
	p.waitFor(t, "informer synced", 0)
	create("after", map[string]string{"b": "2"})
	waitAnnotated(t, client, ns, "before")
	waitAnnotated(t, client, ns, "after")

	key := ns + "/burst"
	create("burst", map[string]string{"n": "start"})
	waitAnnotated(t, client, ns, "burst")
	p.waitFor(t, key+": up to date", 0) // the reconcile its own write caused
	from := p.next()
	const updates = 20
	for i := range updates {
		// The controller writes the annotation meanwhile: retry conflicts.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "burst", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data["n"] = fmt.Sprint(i)
			_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if cm := waitAnnotated(t, client, ns, "burst"); cm.Data["n"] != fmt.Sprint(updates-1) {
		t.Fatalf("data n = %q, want the last update's %d", cm.Data["n"], updates-1)
	}
	// Count once the key is idle: no reconcile of it for 3 reconcile times,
	// so reconciles still queued (were the queue not to coalesce) are counted.
	reconciling := "reconciling " + key + " "
	for seen := -1; seen != p.count(reconciling, from); {
		seen = p.count(reconciling, from)
		time.Sleep(1500 * time.Millisecond)
	}
	reconciles := p.count(reconciling, from)
	t.Logf("%d updates of %s: %d reconciles", updates, key, reconciles)
	if reconciles >= updates {
		t.Errorf("%d updates of one ConfigMap took %d reconciles; the queue should hold a key once, however often it is added", updates, reconciles)
	}

	if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, "after", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, ns+"/after: deleted, nothing to do", 0)

	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Errorf("after SIGTERM: %v, want a clean exit", err)
	}
	p.waitFor(t, "stopped", 0)
}

// Leader election timings for the leader-election and runnable examples:
// a lease long enough that "well before it expires" has a wide margin.
const (
	leaseDuration = 10 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// handoverLimit bounds a handover after SIGTERM: a released Lease is
	// taken within a retry period (jittered up to 1.1s); an unreleased one
	// only after leaseDuration.
	handoverLimit = leaseDuration / 2
)

func electionArgs(kubeconfig, ns, lease, id string) []string {
	return []string{"--kubeconfig", kubeconfig, "--namespace", ns, "--lease", lease, "--id", id,
		"--lease-duration", leaseDuration.String(), "--renew-deadline", "5s", "--retry-period", retryPeriod.String()}
}

// firstOf waits until one of a and b prints s (prefixed with its own name)
// and returns that one first.
func firstOf(t *testing.T, a, b *proc, s string) (*proc, *proc) {
	t.Helper()
	deadline := time.Now().Add(budget.Scale(waitLimit))
	for time.Now().Before(deadline) {
		if _, _, ok := a.find(" "+a.name+": "+s, 0); ok {
			return a, b
		}
		if _, _, ok := b.find(" "+b.name+": "+s, 0); ok {
			return b, a
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("neither %s nor %s printed %q within %s", a.name, b.name, s, budget.Scale(waitLimit))
	return nil, nil
}

// TestLeaderElection: of two candidates exactly one leads; after SIGTERM
// the other takes the released Lease well before it would have expired;
// after SIGKILL it takes it only once a lease duration has passed since
// the last renewal.
func TestLeaderElection(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t)
	bin := build(t, ".", "./examples/leader-election")
	const lease = "example"
	a := start(t, "a", bin, electionArgs(kc, ns, lease, "a")...)
	b := start(t, "b", bin, electionArgs(kc, ns, lease, "b")...)

	leader, standby := firstOf(t, a, b, "leading")
	standby.waitFor(t, " "+standby.name+": standby: leader is "+leader.name, 0)
	if h := getLease(t, ns, lease).Spec.HolderIdentity; h == nil || *h != leader.name {
		t.Fatalf("Lease holder %v, want %s", h, leader.name)
	}
	time.Sleep(4 * retryPeriod) // several tries of the standby's
	if _, l, ok := standby.find(" "+standby.name+": leading", 0); ok {
		t.Fatalf("both lead: %s printed %q", standby.name, l.text)
	}

	// SIGTERM: the leader releases the Lease on its way out.
	termAt := leader.signal(t, syscall.SIGTERM)
	_, took := standby.waitFor(t, " "+standby.name+": leading", 0)
	t.Logf("after SIGTERM to %s, %s led in %s", leader.name, standby.name, took.at.Sub(termAt))
	if d := took.at.Sub(termAt); d >= handoverLimit {
		t.Errorf("%s took the Lease %s after SIGTERM to %s, want under %s: was the Lease not released?", standby.name, d, leader.name, handoverLimit)
	}
	if err := leader.wait(t); err != nil {
		t.Errorf("%s after SIGTERM: %v, want a clean exit", leader.name, err)
	}
	leader.waitFor(t, " "+leader.name+": stopped leading", 0)

	// SIGKILL: nobody releases the Lease; the standby must wait it out.
	newLeader := standby
	standby = start(t, leader.name, bin, electionArgs(kc, ns, lease, leader.name)...)
	standby.waitFor(t, " "+standby.name+": standby: leader is "+newLeader.name, 0)
	killAt := newLeader.signal(t, syscall.SIGKILL)
	_ = newLeader.wait(t) // "signal: killed"
	// Its last renewal; one still in flight at the kill would only be later.
	last := getLease(t, ns, lease)
	_, took = standby.waitFor(t, " "+standby.name+": leading", 0)
	now := getLease(t, ns, lease)
	if h := now.Spec.HolderIdentity; h == nil || *h != standby.name || now.Spec.AcquireTime == nil || last.Spec.RenewTime == nil {
		t.Fatalf("Lease after the takeover: %+v, want held by %s with an acquire time", now.Spec, standby.name)
	}
	gap := now.Spec.AcquireTime.Sub(last.Spec.RenewTime.Time)
	t.Logf("after SIGKILL to %s, %s led in %s; %s after the last renewal", newLeader.name, standby.name, took.at.Sub(killAt), gap)
	// A small margin for the microsecond precision of the Lease's times.
	if gap < leaseDuration-100*time.Millisecond {
		t.Errorf("%s took the Lease %s after %s's last renewal, want at least the lease duration %s", standby.name, gap, newLeader.name, leaseDuration)
	}
}

// TestRunnableNeedLeaderElection: on the twin's Manager the plain
// RunnableFunc runs only on the replica holding the Lease, the one whose
// NeedLeaderElection is false on both; SIGTERM to the leader moves the
// plain one to the other replica.
func TestRunnableNeedLeaderElection(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t)
	bin := build(t, "hack/compare", "./examples/runnable")
	const lease = "runnable"
	args := func(id string) []string { return append(electionArgs(kc, ns, lease, id), "--tick", "1s") }
	a := start(t, "a", bin, args("a")...)
	b := start(t, "b", bin, args("b")...)

	a.waitFor(t, " a: every-replica: started", 0)
	b.waitFor(t, " b: every-replica: started", 0)
	leader, standby := firstOf(t, a, b, "leader-only: started")
	leader.waitFor(t, " "+leader.name+": elected", 0)
	time.Sleep(4 * retryPeriod) // several tries of the standby's
	for _, s := range []string{"leader-only: started", "elected"} {
		if _, l, ok := standby.find(" "+standby.name+": "+s, 0); ok {
			t.Fatalf("the standby %s printed %q while %s held the Lease", standby.name, l.text, leader.name)
		}
	}

	termAt := leader.signal(t, syscall.SIGTERM)
	standby.waitFor(t, " "+standby.name+": elected", 0)
	_, l := standby.waitFor(t, " "+standby.name+": leader-only: started", 0)
	t.Logf("after SIGTERM to %s, %s ran leader-only in %s", leader.name, standby.name, l.at.Sub(termAt))
	if d := l.at.Sub(termAt); d >= handoverLimit {
		t.Errorf("%s started leader-only %s after SIGTERM to %s, want under %s: was the Lease not released?", standby.name, d, leader.name, handoverLimit)
	}
	if err := leader.wait(t); err != nil {
		t.Errorf("%s after SIGTERM: %v, want a clean exit", leader.name, err)
	}
	leader.waitFor(t, " "+leader.name+": leader-only: stopped", 0)
	if n := standby.count(" "+standby.name+": every-replica: started", 0); n != 1 {
		t.Errorf("%s started every-replica %d times, want once: it does not depend on the Lease", standby.name, n)
	}
}
