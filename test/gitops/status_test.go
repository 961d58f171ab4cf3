package gitops

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/handroll/handroll/pkg/controller/webapp"
)

// deployment is a Deployment as the Deployment controller reports it.
func deployment(generation, observed int64, replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: generation},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: available, AvailableReplicas: available, UnavailableReplicas: replicas - available,
			Conditions: conds,
		},
	}
}

func deploymentCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

var (
	available   = deploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.")
	unavailable = deploymentCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
	progressed  = deploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", `ReplicaSet "shop-5d8c7b" has successfully progressed.`)
	progressing = deploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", `ReplicaSet "shop-6f9d4c" is progressing.`)
	timedOut    = deploymentCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", `ReplicaSet "shop-6f9d4c" has timed out progressing.`)
	quota       = deploymentCondition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate",
		`pods "shop-6f9d4c-x7k2p" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=4, limited: pods=4`)
)

// toolCase is one state of a WebApp and how each tool must read it.
type toolCase struct {
	name     string
	replicas int32
	// observed is what the last reconcile saw, written as handroll writes
	// it; nil: no reconcile has written a status.
	observed *webapp.Observed
	// specChanged edits the spec after that status was written, so the
	// status describes the previous generation.
	specChanged bool
	// then, when set, is a second reconcile's view after specChanged.
	then *webapp.Observed

	kstatus status.Status
	argo    string
}

var toolCases = []toolCase{
	{name: "unobserved", replicas: 2,
		kstatus: status.InProgressStatus, argo: "Progressing"},
	{name: "creating the children", replicas: 2, observed: &webapp.Observed{},
		kstatus: status.InProgressStatus, argo: "Progressing"},
	{name: "rolling out", replicas: 2, observed: &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 2, 2, 0, unavailable, progressing)},
		kstatus: status.InProgressStatus, argo: "Progressing"},
	{name: "converged", replicas: 2, observed: &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 2, 2, 2, available, progressed)},
		kstatus: status.CurrentStatus, argo: "Healthy"},
	{name: "scaled to zero", replicas: 0, observed: &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 0, 0, 0, available, progressed)},
		kstatus: status.CurrentStatus, argo: "Healthy"},
	{name: "spec changed, not yet observed", replicas: 2,
		observed:    &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 2, 2, 2, available, progressed)},
		specChanged: true,
		kstatus:     status.InProgressStatus, argo: "Progressing"},
	{name: "spec changed, rollout under way", replicas: 2,
		observed:    &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 2, 2, 2, available, progressed)},
		specChanged: true,
		then:        &webapp.Observed{ServiceExists: true, Deployment: deployment(2, 2, 3, 1, 2, available, progressing)},
		kstatus:     status.InProgressStatus, argo: "Progressing"},
	{name: "pods refused, within the deadline", replicas: 5,
		observed: &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 4, 4, 4, available, progressing, quota)},
		kstatus:  status.InProgressStatus, argo: "Progressing"},
	{name: "a name taken by a foreign object", replicas: 2, observed: &webapp.Observed{Conflict: "Service %s/%s"},
		kstatus: status.FailedStatus, argo: "Degraded"},
	{name: "an apply the API server refuses", replicas: 2, observed: &webapp.Observed{
		ServiceExists: true, Deployment: deployment(1, 1, 2, 2, 2, available, progressed),
		ApplyFailed: `Service %s/%s: Service "shop" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated`},
		kstatus: status.FailedStatus, argo: "Degraded"},
	{name: "a rollout past its progress deadline", replicas: 2,
		observed: &webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 3, 1, 2, unavailable, timedOut)},
		kstatus:  status.FailedStatus, argo: "Degraded"},
}

// TestToolsReadTheStatus: for each state a WebApp can be in, the status
// handroll writes, as the API server then serves it, reads the same to
// kstatus and to Argo CD's health check.
func TestToolsReadTheStatus(t *testing.T) {
	ns := env.Namespace(t)
	hc := env.HandrollClient(t).HandrollV1().WebApps(ns)
	script := healthScript(t)
	for i, tc := range toolCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			name := fmt.Sprintf("app-%d", i)
			w := newWebApp(name)
			w.Spec.Replicas = ptr.To(tc.replicas)
			if _, err := hc.Create(ctx, w, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.observed != nil {
				writeStatus(ctx, t, ns, name, named(*tc.observed, ns, name))
			}
			if tc.specChanged {
				patch := []byte(`{"spec":{"image":"nginx:1.28"}}`)
				if _, err := hc.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.then != nil {
				writeStatus(ctx, t, ns, name, named(*tc.then, ns, name))
			}

			u := readAsTools(ctx, t, webAppsV1, ns, name)
			res := kstatus(t, u)
			if res.Status != tc.kstatus {
				t.Errorf("kstatus: %s (%s), want %s; status %s", res.Status, res.Message, tc.kstatus, asJSON(u.Object["status"]))
			}
			health, msg := argoHealth(t, script, u)
			if health != tc.argo {
				t.Errorf("Argo CD: %s (%s), want %s; status %s", health, msg, tc.argo, asJSON(u.Object["status"]))
			}
			if msg == "" {
				t.Error("Argo CD: no message")
			}
			t.Logf("kstatus %s (%s); Argo CD %s (%s)", res.Status, res.Message, health, msg)
		})
	}
}

// named fills the namespace and name into the case's messages.
func named(o webapp.Observed, ns, name string) webapp.Observed {
	if o.Conflict != "" {
		o.Conflict = fmt.Sprintf(o.Conflict, ns, name)
	}
	if o.ApplyFailed != "" {
		o.ApplyFailed = fmt.Sprintf(o.ApplyFailed, ns, name)
	}
	return o
}

// TestDeletingWebAppIsTerminating: a WebApp held by a finalizer after its
// deletion reads as Terminating to kstatus and Progressing to Argo CD,
// whatever its conditions still say.
func TestDeletingWebAppIsTerminating(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testContext(t)
	hc := env.HandrollClient(t).HandrollV1().WebApps(ns)
	w := newWebApp("going")
	w.Finalizers = []string{"gitops.test.handroll.dev/hold"}
	if _, err := hc.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := hc.Patch(context.Background(), "going", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("releasing the finalizer: %v", err)
		}
	})
	writeStatus(ctx, t, ns, "going", webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 1, 1, 1, available, progressed)})
	if err := hc.Delete(ctx, "going", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	u := readAsTools(ctx, t, webAppsV1, ns, "going")
	if u.GetDeletionTimestamp() == nil {
		t.Fatal("the WebApp has no deletionTimestamp: the finalizer did not hold it")
	}
	if res := kstatus(t, u); res.Status != status.TerminatingStatus {
		t.Errorf("kstatus: %s (%s), want Terminating", res.Status, res.Message)
	}
	if health, msg := argoHealth(t, healthScript(t), u); health != "Progressing" {
		t.Errorf("Argo CD: %s (%s), want Progressing", health, msg)
	}
}
