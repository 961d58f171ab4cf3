package integration

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// sampleStatus is a status as the reconciler would write it for a WebApp
// named name with readyReplicas of replicas ready.
func sampleStatus(name string, generation int64, replicas, readyReplicas int32) handrollv1.WebAppStatus {
	return handrollv1.WebAppStatus{
		ObservedGeneration: generation,
		Replicas:           replicas,
		ReadyReplicas:      readyReplicas,
		Selector:           "app.kubernetes.io/name=" + name,
		URL:                "http://" + name + ".example.svc:80",
		Conditions: []metav1.Condition{{
			Type:               handrollv1.ConditionReady,
			Status:             metav1.ConditionTrue,
			ObservedGeneration: generation,
			// The API serialises times to the second.
			LastTransitionTime: metav1.NewTime(time.Now().UTC().Truncate(time.Second)),
			Reason:             "AllReplicasReady",
			Message:            "every replica is ready",
		}},
	}
}

// TestStatusSubresource checks the split that the status subresource makes:
// the main resource ignores status, /status ignores spec, and only a spec
// change bumps metadata.generation. The reconciler relies on all three: it
// writes status without racing users' spec edits, and compares
// observedGeneration with generation to know whether it is up to date.
func TestStatusSubresource(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)
	webapps := client.HandrollV1().WebApps(ns)
	ctx := testContext(t)

	created, err := webapps.Create(ctx, newWebApp("status"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating: %v", err)
	}
	if created.Generation != 1 {
		t.Fatalf("generation after create = %d, want 1", created.Generation)
	}

	// An Update of the main resource that carries a status: the status is
	// dropped and, since the spec did not change, generation stays.
	withStatus := created.DeepCopy()
	withStatus.Status = sampleStatus("status", 1, 1, 1)
	updated, err := webapps.Update(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating the main resource: %v", err)
	}
	if !equality.Semantic.DeepEqual(updated.Status, handrollv1.WebAppStatus{}) {
		t.Fatalf("Update of the main resource wrote status %s; want it ignored", asJSON(updated.Status))
	}
	if updated.Generation != 1 {
		t.Fatalf("generation after a status-only Update = %d, want 1", updated.Generation)
	}

	// UpdateStatus writes every status field.
	want := sampleStatus("status", 1, 1, 1)
	toWrite := updated.DeepCopy()
	toWrite.Status = want
	// A spec change sent to /status must be ignored.
	toWrite.Spec.Replicas = ptr.To[int32](7)
	if _, err := webapps.UpdateStatus(ctx, toWrite, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating status: %v", err)
	}
	got, err := webapps.Get(ctx, "status", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if !equality.Semantic.DeepEqual(got.Status, want) {
		t.Fatalf("status after UpdateStatus:\n got  %s\n want %s", asJSON(got.Status), asJSON(want))
	}
	if !equality.Semantic.DeepEqual(got.Spec, created.Spec) {
		t.Fatalf("UpdateStatus changed the spec:\n got  %s\n want %s", asJSON(got.Spec), asJSON(created.Spec))
	}
	if got.Generation != 1 {
		t.Fatalf("generation after UpdateStatus = %d, want 1", got.Generation)
	}

	// A spec change through the main resource bumps generation and keeps
	// the status written above.
	got.Spec.Replicas = ptr.To[int32](2)
	scaled, err := webapps.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating the spec: %v", err)
	}
	if scaled.Generation != 2 {
		t.Fatalf("generation after a spec change = %d, want 2", scaled.Generation)
	}
	if !equality.Semantic.DeepEqual(scaled.Status, want) {
		t.Fatalf("a spec Update changed the status:\n got  %s\n want %s", asJSON(scaled.Status), asJSON(want))
	}
}

// TestScaleSubresource checks /scale, which `kubectl scale` and a
// HorizontalPodAutoscaler use: it maps to .spec.replicas, .status.replicas
// and .status.selector, and the schema's bounds still apply through it.
func TestScaleSubresource(t *testing.T) {
	ns := env.Namespace(t)
	client := handrollClient(t)
	webapps := client.HandrollV1().WebApps(ns)
	ctx := testContext(t)

	w := newWebApp("scaled")
	w.Spec.Replicas = ptr.To[int32](3)
	created, err := webapps.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating: %v", err)
	}
	// Status replicas deliberately differ from spec replicas, so that a
	// scale that read the wrong path would show it.
	created.Status = sampleStatus("scaled", 1, 2, 2)
	if _, err := webapps.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating status: %v", err)
	}

	scale, err := webapps.GetScale(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 2 || scale.Status.Selector != "app.kubernetes.io/name=scaled" {
		t.Fatalf("scale = spec.replicas %d, status.replicas %d, status.selector %q; want 3, 2, %q",
			scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector, "app.kubernetes.io/name=scaled")
	}

	scale.Spec.Replicas = 7
	if _, err := webapps.UpdateScale(ctx, "scaled", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scaling to 7: %v", err)
	}
	got, err := webapps.Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 7 {
		t.Fatalf("spec.replicas after scaling to 7 = %s, want 7", asJSON(got.Spec.Replicas))
	}
	if got.Generation != 2 {
		t.Fatalf("generation after scaling = %d, want 2 (a scale is a spec change)", got.Generation)
	}

	// Above the schema's maximum: refused, and the WebApp keeps 7.
	scale, err = webapps.GetScale(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	scale.Spec.Replicas = 51
	_, err = webapps.UpdateScale(ctx, "scaled", scale, metav1.UpdateOptions{})
	assertInvalid(t, err, "spec.replicas", "less than or equal to 50")
	got, err = webapps.Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 7 {
		t.Fatalf("spec.replicas after a refused scale to 51 = %s, want 7", asJSON(got.Spec.Replicas))
	}
}
