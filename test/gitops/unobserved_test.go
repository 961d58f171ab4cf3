package gitops

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/test/budget"
)

// TestUnobservedWebAppReadsInProgress: a WebApp no replica of handroll has
// observed reads as in progress however a tool reads it: the create's
// response, a get, a list, a watch event, a read as v1alpha1 (through
// handroll's conversion webhook), and its scale subresource still answers.
// The API server drops the status of a new object; without the CRD's
// default (status.observedGeneration 0) kstatus would read the WebApp,
// status-less, as Current.
func TestUnobservedWebAppReadsInProgress(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testContext(t)
	serveConversion(t)
	webapps := dynamicClient(t).Resource(webAppsV1).Namespace(ns)
	script := healthScript(t)

	w, err := webapps.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// As a GitOps tool applies it: a manifest with no status, or even one
	// that claims to be done, which the API server ignores.
	manifest := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "handroll.dev/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": "fresh"},
		"spec":     map[string]any{"image": "nginx:1.27"},
		"status":   map[string]any{"observedGeneration": int64(1)},
	}}
	created, err := webapps.Create(ctx, manifest, metav1.CreateOptions{FieldManager: "flux"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := webapps.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("listing: %v, %d items", err, len(list.Items))
	}
	var event *unstructured.Unstructured
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Added {
			t.Fatalf("watch event %s %v", e.Type, e.Object)
		}
		event = e.Object.(*unstructured.Unstructured)
	case <-ctx.Done():
		t.Fatal("no watch event for the new WebApp")
	}

	reads := map[string]*unstructured.Unstructured{
		"the create's response": created,
		"a get":                 readAsTools(ctx, t, webAppsV1, ns, "fresh"),
		"a list":                &list.Items[0],
		"a watch event":         event,
		"a get as v1alpha1":     readConverted(ctx, t, ns, "fresh"),
	}
	for how, u := range reads {
		observed, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if err != nil || !found || observed != 0 || u.GetGeneration() != 1 {
			t.Errorf("%s: generation %d, status %s; want status.observedGeneration 0", how, u.GetGeneration(), asJSON(u.Object["status"]))
		}
		if res := kstatus(t, u); res.Status != status.InProgressStatus {
			t.Errorf("%s: kstatus %s (%s), want InProgress", how, res.Status, res.Message)
		}
		if health, msg := argoHealth(t, script, u); health != "Progressing" {
			t.Errorf("%s: Argo CD %s (%s), want Progressing", how, health, msg)
		}
	}

	// The typed client reads the default as the zero status it is, and the
	// scale subresource, whose status paths are not there yet, answers.
	typed, err := env.HandrollClient(t).HandrollV1().WebApps(ns).Get(ctx, "fresh", metav1.GetOptions{})
	if err != nil || typed.Status.ObservedGeneration != 0 || len(typed.Status.Conditions) != 0 {
		t.Errorf("typed get: %v, status %s", err, asJSON(typed.Status))
	}
	scale, err := env.HandrollClient(t).HandrollV1().WebApps(ns).GetScale(ctx, "fresh", metav1.GetOptions{})
	if err != nil || scale.Spec.Replicas != 1 || scale.Status.Replicas != 0 {
		t.Errorf("scale of an unobserved WebApp: %v, %s", err, asJSON(scale))
	}
}

// serveConversion serves handroll's conversion webhook from this process
// and points the CRD at it until t ends, so that v1alpha1 reads convert as
// they do in a cluster.
func serveConversion(t *testing.T) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := server.NewWebhookMux()
	mux.Handle("/convert", server.ServeConversion(s))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	var before *apiextensionsv1.CustomResourceConversion
	setConversion := func(c func() *apiextensionsv1.CustomResourceConversion) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := crds.Get(context.Background(), "webapps.handroll.dev", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if before == nil {
				before = crd.Spec.Conversion.DeepCopy()
			}
			crd.Spec.Conversion = c()
			_, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{})
			return err
		})
	}
	url := srv.URL + "/convert"
	err = setConversion(func() *apiextensionsv1.CustomResourceConversion {
		return &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	})
	if err != nil {
		t.Fatalf("pointing the CRD's conversion webhook at this process: %v", err)
	}
	t.Cleanup(func() {
		if err := setConversion(func() *apiextensionsv1.CustomResourceConversion { return before }); err != nil {
			t.Errorf("restoring the CRD's conversion webhook: %v", err)
		}
	})
}

// readConverted reads the WebApp as v1alpha1, waiting until the API server
// has taken serveConversion's webhook.
func readConverted(ctx context.Context, t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	var lastErr error
	err := budget.Poll(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		u, lastErr = dynamicClient(t).Resource(webAppsV1alpha1).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("reading %s/%s as v1alpha1: %v", ns, name, lastErr)
	}
	return u
}
