package webapp

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/budget"
)

// TestANewWebAppsFirstStatusWaitsForItsRollout: a new WebApp whose
// Deployment is ready within the grace gets one status write, Ready; one
// whose Deployment never reports (no controller-manager runs here) gets
// its first status, under way, no sooner than the grace after its
// creation. The statuses are counted from a watch of the WebApp.
func TestANewWebAppsFirstStatusWaitsForItsRollout(t *testing.T) {
	ns := env.Namespace(t)
	grace := webapp.DefaultFirstStatusGrace
	startOperator(t, "--leader-elect=false", "--namespaces="+ns, "--first-status-grace="+grace.String())

	statuses := watchStatuses(t, ns, "quick")
	quick := createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "quick", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	var readied time.Time
	eventually(t, "the Deployment of quick exists, to report it ready", func(ctx context.Context) (bool, error) {
		d, err := kubeClient(t).AppsV1().Deployments(ns).Get(ctx, "quick", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: webapp.ReasonNewReplicaSetAvailable},
			},
		}
		if _, err := kubeClient(t).AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		readied = time.Now()
		return true, nil
	})
	first, ok := <-statuses
	if !ok {
		t.Fatal("quick: the watch ended before its first status")
	}
	if !meta.IsStatusConditionTrue(first.Conditions, handrollv1.ConditionReady) {
		t.Fatalf("quick: first status %v, want Ready", first.Conditions)
	}
	// Whether the report came within the grace is read on this machine's
	// clock, to the second of the creation's timestamp; a busy machine
	// may miss it, and then two writes are right.
	if in := readied.Sub(quick.CreationTimestamp.Time); in < grace-time.Second {
		select {
		case more, ok := <-statuses:
			if !ok {
				break
			}
			t.Errorf("quick, ready %s after its creation: a second status %v, want one write", in.Round(time.Millisecond), more.Conditions)
		case <-time.After(2 * grace):
		}
	} else {
		t.Logf("quick was reported ready %s after its creation, past the grace: not counted", in)
	}

	slow := createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	w := converged(t, ns, "slow")
	c := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReconciling)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("slow: first status %v, want Reconciling", w.Status.Conditions)
	}
	// Both timestamps are whole seconds.
	if after := c.LastTransitionTime.Sub(slow.CreationTimestamp.Time); after < grace-time.Second {
		t.Errorf("slow: first status written %s after the creation, want no sooner than the grace, %s", after, grace)
	}
}

// watchStatuses sends each status of WebApp ns/name that a watch sees
// differ from the one before (each a status write: handroll writes only a
// changed status), until the test ends.
func watchStatuses(t *testing.T, ns, name string) <-chan handrollv1.WebAppStatus {
	t.Helper()
	ctx, cancel := budget.Context(t, context.Background(), 2*time.Minute, "the statuses of WebApp "+name)
	t.Cleanup(cancel)
	w, err := handrollClient(t).HandrollV1().WebApps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan handrollv1.WebAppStatus, 16)
	go func() {
		defer close(out)
		defer w.Stop()
		var last handrollv1.WebAppStatus // empty, as the CRD's default leaves a new one
		for e := range w.ResultChan() {
			if e.Type != watch.Added && e.Type != watch.Modified {
				continue
			}
			st := e.Object.(*handrollv1.WebApp).Status
			if equality.Semantic.DeepEqual(st, last) {
				continue // not a status write
			}
			last = *st.DeepCopy()
			out <- st
		}
	}()
	return out
}
