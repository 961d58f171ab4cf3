package webapp

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
)

// TestProgressOnly: replica counts and messages are progress; a
// condition's status, reason or generation, a new condition, the URL or
// the observed generation are not.
func TestProgressOnly(t *testing.T) {
	base := handrollv1.WebAppStatus{
		ObservedGeneration: 2, URL: "http://a.b.svc:80", Replicas: 3, ReadyReplicas: 1,
		Conditions: []metav1.Condition{
			{Type: handrollv1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonRollingOut, Message: "1 of 3 replicas ready", ObservedGeneration: 2},
			{Type: handrollv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonRollingOut, Message: "3 of 3 replicas updated, 1 available", ObservedGeneration: 2},
		},
	}
	for _, tc := range []struct {
		name   string
		change func(*handrollv1.WebAppStatus)
		want   bool
	}{
		{"the same", func(*handrollv1.WebAppStatus) {}, true},
		{"counts and messages", func(s *handrollv1.WebAppStatus) {
			s.ReadyReplicas = 2
			s.Conditions[0].Message = "2 of 3 replicas ready"
			s.Conditions[1].Message = "3 of 3 replicas updated, 2 available"
		}, true},
		{"Ready", func(s *handrollv1.WebAppStatus) {
			s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionTrue, ReasonAvailable
		}, false},
		{"a reason", func(s *handrollv1.WebAppStatus) { s.Conditions[0].Reason = ReasonDeploymentNotReady }, false},
		{"a condition's generation", func(s *handrollv1.WebAppStatus) { s.Conditions[1].ObservedGeneration = 3 }, false},
		{"a new condition", func(s *handrollv1.WebAppStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: handrollv1.ConditionReconciling, Status: metav1.ConditionTrue})
		}, false},
		{"the observed generation", func(s *handrollv1.WebAppStatus) { s.ObservedGeneration = 3 }, false},
		{"the URL", func(s *handrollv1.WebAppStatus) { s.URL = "" }, false},
	} {
		changed := *base.DeepCopy()
		tc.change(&changed)
		if got := ProgressOnly(base, changed); got != tc.want {
			t.Errorf("%s: ProgressOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProgressWritesHold: a progress write within the interval of the last
// write waits for the rest of it; after it, or with no write remembered,
// it goes at once; a change of condition never waits. What is remembered
// goes within two intervals.
func TestProgressWritesHold(t *testing.T) {
	p := &ProgressWrites{Interval: time.Second}
	key := types.NamespacedName{Namespace: "a", Name: "b"}
	cur := handrollv1.WebAppStatus{Replicas: 1}
	progress := handrollv1.WebAppStatus{Replicas: 2}
	ready := handrollv1.WebAppStatus{Replicas: 2, Conditions: []metav1.Condition{{Type: handrollv1.ConditionReady}}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	if d := p.Hold(key, cur, progress, t0); d != 0 {
		t.Errorf("no write remembered: held %s", d)
	}
	p.Wrote(key, t0)
	if d := p.Hold(key, cur, progress, t0.Add(300*time.Millisecond)); d != 700*time.Millisecond {
		t.Errorf("0.3 s after a write: held %s, want 700ms", d)
	}
	if d := p.Hold(key, cur, ready, t0.Add(300*time.Millisecond)); d != 0 {
		t.Errorf("a condition changes: held %s", d)
	}
	if d := p.Hold(key, cur, progress, t0.Add(time.Second)); d != 0 {
		t.Errorf("an interval after the write: held %s", d)
	}
	p.Hold(key, cur, progress, t0.Add(3*time.Second))
	if len(p.cur)+len(p.prev) != 0 {
		t.Errorf("3 intervals later: %d writes remembered", len(p.cur)+len(p.prev))
	}
	var none *ProgressWrites
	none.Wrote(key, t0)
	if d := none.Hold(key, cur, progress, t0); d != 0 {
		t.Errorf("nil: held %s", d)
	}
}

// TestReconcileHoldsProgressButNotReady: with Progress, a Deployment's
// report that only moves the counts, soon after the last status write,
// sends nothing and requeues the WebApp for the rest of the interval; the
// report that makes it Ready is written at once.
func TestReconcileHoldsProgressButNotReady(t *testing.T) {
	u := newUpToDate(t)
	u.r.Progress = &ProgressWrites{Interval: time.Minute}
	u.hr.PrependReactor("patch", "webapps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &handrollv1.WebApp{}, nil
	})
	report := func(rv string, st appsv1.DeploymentStatus) *appsv1.Deployment {
		t.Helper()
		d, err := u.r.Deployments.Deployments(u.req.Namespace).Get(u.req.Name)
		if err != nil {
			t.Fatal(err)
		}
		d.ResourceVersion, d.Status = rv, st
		stored, err := handrollcache.CompactChild(d.DeepCopy())
		if err == nil {
			err = u.deployments.Update(stored)
		}
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := u.r.Deployments.Deployments(u.req.Namespace).Get(u.req.Name)
	if err != nil {
		t.Fatal(err)
	}
	n := *d.Spec.Replicas

	// The WebApp shows a rollout under way, as written a moment ago.
	rolling := report("1002", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, UnavailableReplicas: n})
	w, err := u.r.WebApps.WebApps(u.req.Namespace).Get(u.req.Name)
	if err != nil {
		t.Fatal(err)
	}
	w = w.DeepCopy()
	w.ResourceVersion, w.Status = "1100", ComputeStatus(w, Observed{Deployment: rolling, ServiceExists: true}, u.r.Now())
	if err := u.webapps.Update(w); err != nil {
		t.Fatal(err)
	}
	u.r.Progress.Wrote(u.req, time.Now())

	// One pod of n is ready: counts and messages only.
	report("1003", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: n - 1})
	res, err := u.r.Reconcile(context.Background(), u.req)
	if err != nil {
		t.Fatal(err)
	}
	if a := u.hr.Actions(); len(a) != 0 {
		t.Errorf("progress within the interval: %d requests, the first %s", len(a), a[0].GetVerb())
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Errorf("progress held: requeued after %s, want within the interval", res.RequeueAfter)
	}

	report("1004", appsv1.DeploymentStatus{
		ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: ReasonNewReplicaSetAvailable}},
	})
	if res, err = u.r.Reconcile(context.Background(), u.req); err != nil {
		t.Fatal(err)
	}
	if a := u.hr.Actions(); len(a) != 1 || a[0].GetVerb() != "patch" || a[0].GetSubresource() != "status" {
		t.Errorf("Ready: requests %v, want one patch of the status", a)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("Ready written: requeued after %s", res.RequeueAfter)
	}
}

// TestAFirstStatusThatOnlySaysUnderWayWaitsForTheGrace: a new WebApp's first
// status waits out the rest of the grace from its creation while all it
// says is that the rollout is under way; one that says more, a later
// status, a WebApp older than the grace or created "in the future" (the
// clocks skewed) wait for nothing.
func TestAFirstStatusThatOnlySaysUnderWayWaitsForTheGrace(t *testing.T) {
	p := &ProgressWrites{Interval: time.Second, FirstGrace: 3 * time.Second}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: ReasonRollingOut}
	}
	underWay := handrollv1.WebAppStatus{Conditions: []metav1.Condition{
		cond(handrollv1.ConditionReady, metav1.ConditionFalse),
		cond(handrollv1.ConditionProgressing, metav1.ConditionTrue),
		cond(handrollv1.ConditionDegraded, metav1.ConditionFalse),
		cond(handrollv1.ConditionReconciling, metav1.ConditionTrue),
	}}
	with := func(c metav1.Condition) handrollv1.WebAppStatus {
		s := *underWay.DeepCopy()
		meta.SetStatusCondition(&s.Conditions, c)
		return s
	}
	none := handrollv1.WebAppStatus{}
	for _, tc := range []struct {
		name            string
		current, status handrollv1.WebAppStatus
		age             time.Duration
		want            time.Duration
	}{
		{"under way, 1 s old", none, underWay, time.Second, 2 * time.Second},
		{"under way, just created", none, underWay, 0, 3 * time.Second},
		{"under way, as old as the grace", none, underWay, 3 * time.Second, 0},
		{"under way, created 1 s in our future", none, underWay, -time.Second, 0},
		{"Ready", none, with(cond(handrollv1.ConditionReady, metav1.ConditionTrue)), time.Second, 0},
		{"Stalled", none, with(cond(handrollv1.ConditionStalled, metav1.ConditionTrue)), time.Second, 0},
		{"Degraded", none, with(cond(handrollv1.ConditionDegraded, metav1.ConditionTrue)), time.Second, 0},
		{"not Reconciling", none, with(cond(handrollv1.ConditionReconciling, metav1.ConditionFalse)), time.Second, 0},
		{"a status already written", underWay, with(metav1.Condition{Type: handrollv1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPending}), time.Second, 0},
	} {
		if got := p.HoldFirst(created, tc.current, tc.status, created.Add(tc.age)); got != tc.want {
			t.Errorf("%s: held %s, want %s", tc.name, got, tc.want)
		}
	}
	var nilHolds *ProgressWrites
	if d := nilHolds.HoldFirst(created, none, underWay, created); d != 0 {
		t.Errorf("nil: held %s", d)
	}
	if d := (&ProgressWrites{Interval: time.Second}).HoldFirst(created, none, underWay, created); d != 0 {
		t.Errorf("no grace: held %s", d)
	}
}

// TestReconcileWritesANewWebAppsFirstStatusOnceReady: with a grace, the
// reconcile that creates a new WebApp's children sends no status and
// requeues the WebApp within the grace; when its Deployment is ready, one
// status write says Ready; without a grace, the first reconcile writes.
func TestReconcileWritesANewWebAppsFirstStatusOnceReady(t *testing.T) {
	for _, grace := range []time.Duration{time.Minute, 0} {
		u := newUpToDate(t)
		u.r.Progress = &ProgressWrites{Interval: time.Second, FirstGrace: grace}
		u.hr.PrependReactor("patch", "webapps", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, &handrollv1.WebApp{}, nil
		})
		w, err := u.r.WebApps.WebApps(u.req.Namespace).Get(u.req.Name)
		if err != nil {
			t.Fatal(err)
		}
		w = w.DeepCopy()
		w.CreationTimestamp = metav1.Now()
		w.Status = handrollv1.WebAppStatus{} // as the CRD's default leaves it
		if err := u.webapps.Update(w); err != nil {
			t.Fatal(err)
		}
		d, err := u.r.Deployments.Deployments(u.req.Namespace).Get(u.req.Name)
		if err != nil {
			t.Fatal(err)
		}
		n := *d.Spec.Replicas
		setDeploymentStatus(t, u, "1002", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, UnavailableReplicas: n})
		res, err := u.r.Reconcile(context.Background(), u.req)
		if err != nil {
			t.Fatal(err)
		}
		statusWrites := func() (n int) {
			for _, a := range u.hr.Actions() {
				if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
					n++
				}
			}
			return n
		}
		if grace == 0 {
			if n := statusWrites(); n != 1 || res.RequeueAfter != 0 {
				t.Errorf("no grace: %d status writes, requeued after %s; want the status written at once", n, res.RequeueAfter)
			}
			continue
		}
		if n := statusWrites(); n != 0 || res.RequeueAfter <= 0 || res.RequeueAfter > grace {
			t.Errorf("under way within the grace: %d status writes, requeued after %s; want none, requeued within %s", n, res.RequeueAfter, grace)
		}
		setDeploymentStatus(t, u, "1003", appsv1.DeploymentStatus{
			ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: ReasonNewReplicaSetAvailable}},
		})
		if res, err = u.r.Reconcile(context.Background(), u.req); err != nil {
			t.Fatal(err)
		}
		if n := statusWrites(); n != 1 || res.RequeueAfter != 0 {
			t.Errorf("Ready within the grace: %d status writes, requeued after %s; want one", n, res.RequeueAfter)
		}
	}
}

// setDeploymentStatus replaces the cached Deployment's status, as a report
// of the Deployment controller would.
func setDeploymentStatus(t *testing.T, u *upToDate, rv string, st appsv1.DeploymentStatus) {
	t.Helper()
	d, err := u.r.Deployments.Deployments(u.req.Namespace).Get(u.req.Name)
	if err != nil {
		t.Fatal(err)
	}
	d = d.DeepCopy()
	d.ResourceVersion, d.Status = rv, st
	stored, err := handrollcache.CompactChild(d)
	if err == nil {
		err = u.deployments.Update(stored)
	}
	if err != nil {
		t.Fatal(err)
	}
}
