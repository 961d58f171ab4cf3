package integration

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
)

// statusApply is s as an apply configuration of the WebApp name in ns.
func statusApply(name, ns string, s handrollv1.WebAppStatus) *handrollac.WebAppApplyConfiguration {
	status := handrollac.WebAppStatus().WithObservedGeneration(s.ObservedGeneration).
		WithReplicas(s.Replicas).WithReadyReplicas(s.ReadyReplicas).WithSelector(s.Selector).WithURL(s.URL)
	for _, c := range s.Conditions {
		status.WithConditions(metav1ac.Condition().WithType(c.Type).WithStatus(c.Status).
			WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime).
			WithReason(c.Reason).WithMessage(c.Message))
	}
	return handrollac.WebApp(name, ns).WithStatus(status)
}

// TestApplyStatus: webapp.ApplyStatus, the reconciler's status write, which
// leaves the API server's answer undecoded, writes the status as the typed
// client's ApplyStatus would (server-side apply to /status, as handroll's
// field manager), and still returns the API server's refusals as their
// errors: a status the schema rejects, a WebApp that is gone.
func TestApplyStatus(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)
	webapps := client.HandrollV1().WebApps(ns)
	rest := client.HandrollV1().RESTClient()
	ctx := testContext(t)

	if _, err := webapps.Create(ctx, newWebApp("applied"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating: %v", err)
	}
	want := sampleStatus("applied", 1, 2, 1)
	if err := webapp.ApplyStatus(ctx, rest, statusApply("applied", ns, want)); err != nil {
		t.Fatalf("ApplyStatus: %v", err)
	}
	got, err := webapps.Get(ctx, "applied", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if !equality.Semantic.DeepEqual(got.Status, want) {
		t.Fatalf("status after ApplyStatus:\n got  %s\n want %s", asJSON(got.Status), asJSON(want))
	}
	var owned bool
	for _, f := range got.ManagedFields {
		owned = owned || (f.Manager == webapp.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply && f.Subresource == "status")
	}
	if !owned {
		t.Errorf("no Apply entry of %q on status in managedFields: %s", webapp.FieldManager, asJSON(got.ManagedFields))
	}

	invalid := sampleStatus("applied", 1, 2, 1)
	invalid.Conditions[0].Status = "Maybe"
	err = webapp.ApplyStatus(ctx, rest, statusApply("applied", ns, invalid))
	if !apierrors.IsInvalid(err) {
		t.Errorf("ApplyStatus of a condition with status Maybe: %v, want the API server's Invalid", err)
	}

	err = webapp.ApplyStatus(ctx, rest, statusApply("gone", ns, want))
	if !apierrors.IsNotFound(err) {
		t.Errorf("ApplyStatus of a WebApp that does not exist: %v, want NotFound", err)
	}
}
