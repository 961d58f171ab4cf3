package webapp

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// Condition reasons, CamelCase as the API conventions ask.
const (
	ReasonAvailable          = "Available"
	ReasonDeploymentNotReady = "DeploymentNotReady"
	ReasonPending            = "Pending"
	ReasonResourceConflict   = "ResourceConflict"
	ReasonRollingOut         = "RollingOut"
	ReasonRolloutComplete    = "RolloutComplete"
	ReasonRolloutFailed      = "RolloutFailed"
	ReasonAsExpected         = "AsExpected"
	ReasonApplyFailed        = "ApplyFailed"
	// ReasonProgressDeadlineExceeded is the Deployment controller's reason
	// for a rollout past spec.progressDeadlineSeconds, kept for Stalled.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

// Observed is what the reconciler saw of a WebApp's children.
type Observed struct {
	// Deployment is the live Deployment, nil when it does not exist yet.
	Deployment *appsv1.Deployment
	// ServiceExists tells whether a Service this WebApp controls exists.
	// Only then is the WebApp advertised (status.url, the directory): a
	// Service of that name that it does not control is someone else's.
	ServiceExists bool
	// Conflict, when set, says which child name is taken by an object this
	// WebApp does not control.
	Conflict string
	// ApplyFailed, when set, is why the API server refused a child (for
	// example a nodePort another Service holds).
	ApplyFailed string
}

// ComputeStatus derives a WebApp's status from what was observed. It starts
// from the current conditions so that a condition whose status does not
// change keeps its lastTransitionTime; comparing the result with the current
// status with equality.Semantic then tells whether a write is needed.
//
// Besides Ready, Progressing and Degraded it sets the conditions kstatus
// reads (docs/gitops.md): Reconciling while the children are being created
// or rolled out, Stalled when only a person can unblock the WebApp.
func ComputeStatus(w *handrollv1.WebApp, o Observed, now metav1.Time) handrollv1.WebAppStatus {
	st := handrollv1.WebAppStatus{
		ObservedGeneration: w.Generation,
		Selector:           labels.SelectorFromSet(Selector(w)).String(),
		Conditions:         append([]metav1.Condition(nil), w.Status.Conditions...),
	}
	if o.ServiceExists {
		st.URL = URL(w)
	}
	desired := handrollv1.DefaultReplicas
	if w.Spec.Replicas != nil {
		desired = *w.Spec.Replicas
	}
	d := o.Deployment
	if d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
	}

	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		c := metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: w.Generation, LastTransitionTime: now}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	// Reconciling and Stalled are abnormal-true: present only while True,
	// as kstatus and Flux have them, so that a converged WebApp carries
	// neither and an upgrade of the operator rewrites no converged status.
	// At most one of them is True: kstatus reads the first it finds.
	stalled := func(reason, msg string) {
		meta.RemoveStatusCondition(&st.Conditions, handrollv1.ConditionReconciling)
		set(handrollv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	}
	reconciling := func(reason, msg string) {
		meta.RemoveStatusCondition(&st.Conditions, handrollv1.ConditionStalled)
		set(handrollv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	}
	settled := func() {
		meta.RemoveStatusCondition(&st.Conditions, handrollv1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, handrollv1.ConditionStalled)
	}

	if o.Conflict != "" {
		msg := o.Conflict + " exists and is not controlled by this WebApp; rename or delete it"
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonResourceConflict, msg)
		set(handrollv1.ConditionDegraded, metav1.ConditionTrue, ReasonResourceConflict, msg)
		if d == nil {
			set(handrollv1.ConditionProgressing, metav1.ConditionFalse, ReasonResourceConflict, msg)
		}
		stalled(ReasonResourceConflict, msg)
		return st
	}
	if o.ApplyFailed != "" {
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonApplyFailed, o.ApplyFailed)
		set(handrollv1.ConditionDegraded, metav1.ConditionTrue, ReasonApplyFailed, o.ApplyFailed)
		if d == nil {
			set(handrollv1.ConditionProgressing, metav1.ConditionFalse, ReasonApplyFailed, o.ApplyFailed)
		}
		stalled(ReasonApplyFailed, o.ApplyFailed)
		return st
	}
	if d == nil {
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonPending, "the Deployment has not been created yet")
		set(handrollv1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, "creating the Deployment")
		set(handrollv1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		reconciling(ReasonPending, "creating the Deployment")
		return st
	}

	rolledOut := d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == desired &&
		d.Status.Replicas == desired &&
		d.Status.AvailableReplicas == desired
	progressing := deploymentCondition(d, appsv1.DeploymentProgressing)
	pastDeadline := progressing != nil && progressing.Status == corev1.ConditionFalse && progressing.Reason == ReasonProgressDeadlineExceeded
	replicaFailure := deploymentCondition(d, appsv1.DeploymentReplicaFailure)
	podsRefused := replicaFailure != nil && replicaFailure.Status == corev1.ConditionTrue

	switch {
	case pastDeadline:
		set(handrollv1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutFailed, progressing.Message)
		set(handrollv1.ConditionDegraded, metav1.ConditionTrue, ReasonRolloutFailed, progressing.Message)
		stalled(ReasonProgressDeadlineExceeded, progressing.Message)
	case podsRefused:
		// Pods refused (a quota, say) may still come once room is made;
		// past the progress deadline the case above takes over.
		set(handrollv1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, "rolling out")
		set(handrollv1.ConditionDegraded, metav1.ConditionTrue, ReasonRolloutFailed, replicaFailure.Message)
		reconciling(ReasonRollingOut, replicaFailure.Message)
	case rolledOut:
		set(handrollv1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete,
			fmt.Sprintf("%d of %d replicas updated and available", d.Status.AvailableReplicas, desired))
		set(handrollv1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		settled()
	default:
		msg := fmt.Sprintf("%d of %d replicas updated, %d available", d.Status.UpdatedReplicas, desired, d.Status.AvailableReplicas)
		set(handrollv1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, msg)
		set(handrollv1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		reconciling(ReasonRollingOut, msg)
	}

	switch {
	case !o.ServiceExists:
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonPending, "the Service has not been created yet")
		if rolledOut {
			reconciling(ReasonPending, "the Service has not been created yet")
		}
	case rolledOut && d.Status.ReadyReplicas >= desired:
		set(handrollv1.ConditionReady, metav1.ConditionTrue, ReasonAvailable,
			fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, desired))
	case pastDeadline:
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonRolloutFailed,
			fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, desired))
	case !podsRefused && rollingOut(d, progressing, desired):
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonRollingOut,
			fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, desired))
	default:
		set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonDeploymentNotReady,
			fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, desired))
	}
	return st
}

// ReasonNewReplicaSetAvailable is the Deployment controller's reason for
// Progressing once a rollout is complete; it keeps it when pods are lost
// later.
const ReasonNewReplicaSetAvailable = "NewReplicaSetAvailable"

// rollingOut tells whether d's pods are being replaced, added or removed:
// a new WebApp, an update or a scale not yet done, as opposed to pods lost
// once it was (progressing is d's Progressing condition).
func rollingOut(d *appsv1.Deployment, progressing *appsv1.DeploymentCondition, desired int32) bool {
	return d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != desired || d.Status.Replicas != desired ||
		progressing == nil || progressing.Reason != ReasonNewReplicaSetAvailable
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}
