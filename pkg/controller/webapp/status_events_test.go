package webapp

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// TestReadinessEvents walks a WebApp of 2 replicas through what its
// Deployment reports and collects the Ready and NotReady events: a rollout
// (the first one, an update, a scale) is none; a loss is a Warning, and
// its end an event.
func TestReadinessEvents(t *testing.T) {
	// dep is what the Deployment reports; done, that its rollout is
	// complete (its controller's Progressing reason).
	dep := func(gen, obs int64, replicas, updated, available int32, done bool) Observed {
		progress := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}
		if done {
			progress.Reason = ReasonNewReplicaSetAvailable
		}
		return Observed{ServiceExists: true, Deployment: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Status: appsv1.DeploymentStatus{ObservedGeneration: obs, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: available, AvailableReplicas: available,
				Conditions: []appsv1.DeploymentCondition{progress}},
		}}
	}
	deadline := func(o Observed) Observed {
		o.Deployment.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: ReasonProgressDeadlineExceeded}}
		return o
	}
	var (
		created  = Observed{}
		rolling  = dep(1, 1, 2, 2, 0, false)
		ready    = dep(1, 1, 2, 2, 2, true)
		podLost  = dep(1, 1, 2, 2, 1, true)
		updating = dep(2, 2, 3, 1, 2, false)
		updated  = dep(2, 2, 2, 2, 2, true)
		stalled  = deadline(dep(2, 2, 3, 1, 2, false))
		conflict = Observed{Conflict: "Service ns/shop"}
	)
	cases := []struct {
		name  string
		steps []Observed
		want  []string
	}{
		{"a new WebApp", []Observed{created, rolling, ready}, nil},
		{"an update", []Observed{ready, updating, updated}, nil},
		{"a pod lost and replaced", []Observed{ready, podLost, ready}, []string{"Warning NotReady", "Normal Ready"}},
		{"an update past its deadline, then fixed", []Observed{ready, updating, stalled, updated}, []string{"Warning NotReady", "Normal Ready"}},
		{"a name taken on creation, then freed", []Observed{conflict, rolling, ready}, nil},
		{"a name taken later, then freed", []Observed{ready, conflict, ready}, []string{"Warning NotReady", "Normal Ready"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := testWebApp()
			w.Spec.Replicas = ptr.To[int32](2)
			var got []string
			for _, o := range tc.steps {
				st := ComputeStatus(w, o, metav1.Now())
				if typ, reason, _, ok := ReadinessEvent(w.Status.Conditions, st.Conditions); ok {
					got = append(got, typ+" "+reason)
				}
				w.Status = st
			}
			if !meta.IsStatusConditionTrue(w.Status.Conditions, handrollv1.ConditionReady) {
				t.Fatalf("the last step is not Ready: %+v", w.Status.Conditions)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}
