package webapp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// TestAdminCleansUpWithTheOperatorScaledToZero installs the webhook
// configurations as manifests/webhook has them (failurePolicy Fail, calling
// the in-cluster Service), with no operator behind them: the operator
// scaled to zero. Every call fails, so whatever the API server sends to a
// webhook is refused. An admin must still be able to label a WebApp, remove
// a finalizer and delete one for good; a spec change, and setting the
// annotation reserved for conversion, stay refused (fail closed).
func TestAdminCleansUpWithTheOperatorScaledToZero(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	hc := handrollClient(t)
	webapps := hc.HandrollV1().WebApps(ns)

	// Admitted while the operator still ran; one of them carries the
	// operator's finalizer, the other a finalizer of some other controller.
	for name, finalizer := range map[string]string{"stuck": "handroll.dev/directory", "labelled": "example.com/backup"} {
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{finalizer}},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
	}
	configuration := "handroll-" + ns
	installWebhookConfigurations(t, configuration, ns)

	// The API server caches webhook configurations: wait until it calls
	// them. A spec change goes to the mutating webhook first. Each call
	// asks for another tag, so that it changes the spec even when an
	// earlier one got through.
	tag := 0
	changeSpec := func(ctx context.Context, name string) error {
		tag++
		patch := fmt.Sprintf(`{"spec":{"image":"nginx:1.%d"}}`, tag)
		_, err := webapps.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	var err error
	eventually(t, "a spec change is refused: the mutating webhook cannot be called", func(ctx context.Context) (bool, error) {
		err = changeSpec(ctx, "labelled")
		return err != nil && strings.Contains(err.Error(), "mwebapp.handroll.dev"), nil
	})

	// Metadata only: neither webhook is called.
	if _, err := webapps.Patch(ctx, "labelled", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"team":"payments"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("adding a label with the operator scaled to zero: %v", err)
	}
	if _, err := webapps.Patch(ctx, "labelled", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"owner":"ops"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("adding an annotation with the operator scaled to zero: %v", err)
	}
	if _, err := webapps.Patch(ctx, "labelled", types.JSONPatchType,
		[]byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"example.com/backup"},{"op":"remove","path":"/metadata/finalizers/0"}]`),
		metav1.PatchOptions{}); err != nil {
		t.Errorf("removing another controller's finalizer with the operator scaled to zero: %v", err)
	}
	if got, err := webapps.Get(ctx, "labelled", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if got.Labels["team"] != "payments" || len(got.Finalizers) != 0 {
		t.Errorf("after the metadata patches: labels %v, finalizers %v", got.Labels, got.Finalizers)
	}

	// Deleting: the DELETE marks the object, and removing the finalizer
	// its controller would have removed lets it go.
	if err := webapps.Delete(ctx, "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting a WebApp with a finalizer: %v", err)
	}
	if _, err := webapps.Patch(ctx, "stuck", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("removing the finalizer of a WebApp being deleted, with the operator scaled to zero: %v", err)
	}
	eventually(t, "the deleted WebApp is gone", func(ctx context.Context) (bool, error) {
		_, err := webapps.Get(ctx, "stuck", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	// Still fail closed where the webhooks decide: a spec change, and the
	// annotation only conversion may set, added without a spec change.
	if err := changeSpec(ctx, "labelled"); err == nil || !strings.Contains(err.Error(), "webapp.handroll.dev") {
		t.Errorf("a spec change with the operator scaled to zero: %v, want a refusal by a webhook", err)
	}
	reserved := []byte(`{"metadata":{"annotations":{"` + handrollv1.V1SpecAnnotation + `":"{}"}}}`)
	if _, err := webapps.Patch(ctx, "labelled", types.MergePatchType, reserved, metav1.PatchOptions{}); err == nil ||
		!strings.Contains(err.Error(), "vwebapp.handroll.dev") {
		t.Errorf("setting %s with the operator scaled to zero: %v, want a refusal by the validating webhook", handrollv1.V1SpecAnnotation, err)
	}

	// Without the mutating webhook, the validating one alone still sees
	// spec changes.
	if err := kubeClient(t).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, configuration, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a spec change is refused by the validating webhook alone", func(ctx context.Context) (bool, error) {
		err = changeSpec(ctx, "labelled")
		return err != nil && strings.Contains(err.Error(), "vwebapp.handroll.dev"), nil
	})
}
