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
	d := o.Deployment
	if d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	c := conditions{st: &st, generation: w.Generation, now: now}
	switch {
	case o.Conflict != "":
		c.refused(ReasonResourceConflict, o.Conflict+" exists and is not controlled by this WebApp; rename or delete it", d == nil)
	case o.ApplyFailed != "":
		c.refused(ReasonApplyFailed, o.ApplyFailed, d == nil)
	case d == nil:
		c.set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonPending, "the Deployment has not been created yet")
		c.set(handrollv1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, "creating the Deployment")
		c.set(handrollv1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		c.reconciling(ReasonPending, "creating the Deployment")
	default:
		desired := handrollv1.DefaultReplicas
		if w.Spec.Replicas != nil {
			desired = *w.Spec.Replicas
		}
		r := observeRollout(d, desired)
		c.rollout(r)
		c.ready(r, o.ServiceExists)
	}
	return st
}

// conditions sets a status's conditions, each at one generation and time.
type conditions struct {
	st         *handrollv1.WebAppStatus
	generation int64
	now        metav1.Time
}

func (c conditions) set(t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.st.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.generation, LastTransitionTime: c.now,
	})
}

// Reconciling and Stalled are abnormal-true: present only while True, as
// kstatus and Flux have them, so that a converged WebApp carries neither
// and an upgrade of the operator rewrites no converged status. At most one
// of them is True: kstatus reads the first it finds.

func (c conditions) stalled(reason, msg string) {
	meta.RemoveStatusCondition(&c.st.Conditions, handrollv1.ConditionReconciling)
	c.set(handrollv1.ConditionStalled, metav1.ConditionTrue, reason, msg)
}

func (c conditions) reconciling(reason, msg string) {
	meta.RemoveStatusCondition(&c.st.Conditions, handrollv1.ConditionStalled)
	c.set(handrollv1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
}

func (c conditions) settled() {
	meta.RemoveStatusCondition(&c.st.Conditions, handrollv1.ConditionReconciling)
	meta.RemoveStatusCondition(&c.st.Conditions, handrollv1.ConditionStalled)
}

// refused is a WebApp whose children cannot be applied (a name taken, an
// apply the API server refused): only a person can unblock it. Progressing
// is set only while there is no Deployment to report on.
func (c conditions) refused(reason, msg string, noDeployment bool) {
	c.set(handrollv1.ConditionReady, metav1.ConditionFalse, reason, msg)
	c.set(handrollv1.ConditionDegraded, metav1.ConditionTrue, reason, msg)
	if noDeployment {
		c.set(handrollv1.ConditionProgressing, metav1.ConditionFalse, reason, msg)
	}
	c.stalled(reason, msg)
}

// rolloutState is what a Deployment says of its rollout to desired
// replicas.
type rolloutState struct {
	d       *appsv1.Deployment
	desired int32
	// rolledOut: every replica updated and available, at d's generation.
	rolledOut bool
	// progressing and replicaFailure are d's conditions of those types.
	progressing, replicaFailure *appsv1.DeploymentCondition
	pastDeadline                bool // Progressing False, ProgressDeadlineExceeded
	podsRefused                 bool // ReplicaFailure True
}

func observeRollout(d *appsv1.Deployment, desired int32) rolloutState {
	r := rolloutState{
		d:       d,
		desired: desired,
		rolledOut: d.Status.ObservedGeneration >= d.Generation &&
			d.Status.UpdatedReplicas == desired &&
			d.Status.Replicas == desired &&
			d.Status.AvailableReplicas == desired,
		progressing:    deploymentCondition(d, appsv1.DeploymentProgressing),
		replicaFailure: deploymentCondition(d, appsv1.DeploymentReplicaFailure),
	}
	r.pastDeadline = r.progressing != nil && r.progressing.Status == corev1.ConditionFalse && r.progressing.Reason == ReasonProgressDeadlineExceeded
	r.podsRefused = r.replicaFailure != nil && r.replicaFailure.Status == corev1.ConditionTrue
	return r
}

// rollout sets Progressing, Degraded, and Reconciling or Stalled, from the
// Deployment's rollout.
func (c conditions) rollout(r rolloutState) {
	d := r.d
	switch {
	case r.pastDeadline:
		c.set(handrollv1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutFailed, r.progressing.Message)
		c.set(handrollv1.ConditionDegraded, metav1.ConditionTrue, ReasonRolloutFailed, r.progressing.Message)
		c.stalled(ReasonProgressDeadlineExceeded, r.progressing.Message)
	case r.podsRefused:
		// Pods refused (a quota, say) may still come once room is made;
		// past the progress deadline the case above takes over.
		c.set(handrollv1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, "rolling out")
		c.set(handrollv1.ConditionDegraded, metav1.ConditionTrue, ReasonRolloutFailed, r.replicaFailure.Message)
		c.reconciling(ReasonRollingOut, r.replicaFailure.Message)
	case r.rolledOut:
		c.set(handrollv1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete,
			fmt.Sprintf("%d of %d replicas updated and available", d.Status.AvailableReplicas, r.desired))
		c.set(handrollv1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		c.settled()
	default:
		msg := fmt.Sprintf("%d of %d replicas updated, %d available", d.Status.UpdatedReplicas, r.desired, d.Status.AvailableReplicas)
		c.set(handrollv1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, msg)
		c.set(handrollv1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "")
		c.reconciling(ReasonRollingOut, msg)
	}
}

// ready sets Ready, from the rollout and whether the Service exists.
func (c conditions) ready(r rolloutState, serviceExists bool) {
	d := r.d
	ready := fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, r.desired)
	switch {
	case !serviceExists:
		c.set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonPending, "the Service has not been created yet")
		if r.rolledOut {
			c.reconciling(ReasonPending, "the Service has not been created yet")
		}
	case r.rolledOut && d.Status.ReadyReplicas >= r.desired:
		c.set(handrollv1.ConditionReady, metav1.ConditionTrue, ReasonAvailable, ready)
	case r.pastDeadline:
		c.set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonRolloutFailed, ready)
	case !r.podsRefused && rollingOut(d, r.progressing, r.desired):
		c.set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonRollingOut, ready)
	default:
		c.set(handrollv1.ConditionReady, metav1.ConditionFalse, ReasonDeploymentNotReady, ready)
	}
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
