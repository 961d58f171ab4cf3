package webapp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/admission"
	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestMalformedWebhookBodies sends the webhook server what no API server
// would: empty bodies, truncated JSON, the wrong review kind, 10 MiB. Each is
// answered with a 4xx and a message, and the process stays ready and keeps
// answering well-formed reviews.
func TestMalformedWebhookBodies(t *testing.T) {
	certDir := t.TempDir()
	caBundle, err := controlplane.WriteServingCertificate(certDir)
	if err != nil {
		t.Fatal(err)
	}
	port := operator.FreePort(t)
	op, _ := startOperator(t, fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+certDir)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatal("no CA in the bundle")
	}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	post := func(path string, body []byte) (int, string) {
		t.Helper()
		resp, err := client.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, path), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(msg)
	}

	valid := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` +
		`"kind":{"group":"handroll.dev","version":"v1","kind":"WebApp"},"operation":"CREATE",` +
		`"object":{"apiVersion":"handroll.dev/v1","kind":"WebApp","metadata":{"name":"a","namespace":"n"},"spec":{"image":"nginx:1.27"}}}}`
	huge := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`),
		bytes.Repeat([]byte("x"), 10<<20)...)
	huge = append(huge, `"}}`...)
	bodies := []struct {
		name string
		body []byte
		want int
	}{
		{"empty", nil, http.StatusBadRequest},
		{"white space", []byte("  \n"), http.StatusBadRequest},
		{"truncated", []byte(valid[:len(valid)/2]), http.StatusBadRequest},
		{"not an object", []byte(`[1,2,3]`), http.StatusBadRequest},
		{"a ConversionReview", []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u"}}`), http.StatusBadRequest},
		{"no request", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		{"10 MiB", huge, http.StatusRequestEntityTooLarge},
	}
	for _, path := range []string{admission.DefaulterPath, admission.ValidatorPath, "/convert"} {
		for _, b := range bodies {
			want := b.want
			if path == "/convert" && b.name == "a ConversionReview" {
				continue // well-formed there
			}
			code, msg := post(path, b.body)
			if code != want || strings.TrimSpace(msg) == "" {
				t.Errorf("%s, %s: %d %q, want %d with a message", path, b.name, code, msg, want)
			}
		}
	}
	code, msg := post(admission.ValidatorPath, []byte(valid))
	if code != http.StatusOK || !strings.Contains(msg, `"uid":"u1"`) {
		t.Errorf("a well-formed review after the bad ones: %d %s", code, msg)
	}
	if code, body := op.Readyz(t); code != http.StatusOK {
		t.Errorf("not ready after the bad requests: %d %s", code, body)
	}
}

// TestValuesAtTheirLimits: a WebApp with a 63-character name, 50 replicas
// and exactly 1 MiB of config passes the schema, CEL and the webhooks, and
// converges: the ConfigMap child holds the whole config.
func TestValuesAtTheirLimits(t *testing.T) {
	ns := env.Namespace(t)
	configuration := "handroll-" + ns
	installWebhookConfigurations(t, configuration, ns)
	args, url := webhookArgs(t, configuration)
	startOperator(t, args...)
	waitInjected(t, configuration, url)

	name := "a" + strings.Repeat("b", 61) + "c"
	key := "app.conf"
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: handrollv1.WebAppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To(handrollv1.MaxReplicas),
			Config:   map[string]string{key: strings.Repeat("x", handrollv1.MaxConfigBytes-len(key))},
		},
	}
	ctx := context.Background()
	hc := handrollClient(t)
	var createErr error
	eventually(t, "the WebApp at its limits is admitted", func(ctx context.Context) (bool, error) {
		_, createErr = hc.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{})
		return createErr == nil, nil
	})
	got := converged(t, ns, name)
	if ptr.Deref(got.Spec.Replicas, 0) != handrollv1.MaxReplicas {
		t.Errorf("replicas %v", got.Spec.Replicas)
	}
	d := getDeployment(t, ns, name)
	if ptr.Deref(d.Spec.Replicas, 0) != handrollv1.MaxReplicas {
		t.Errorf("the Deployment has %v replicas, want %d", d.Spec.Replicas, handrollv1.MaxReplicas)
	}
	cm, err := kubeClient(t).CoreV1().ConfigMaps(ns).Get(ctx, handrollv1.OwnedConfigMapName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap child of a 63-character WebApp: %v", err)
	}
	if len(cm.Data[key]) != handrollv1.MaxConfigBytes-len(key) {
		t.Errorf("the ConfigMap holds %d bytes of config, want %d", len(cm.Data[key]), handrollv1.MaxConfigBytes-len(key))
	}
	// One byte more is refused, naming the field.
	over := w.DeepCopy()
	over.Name = "over"
	over.Spec.Config[key] += "x"
	if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, over, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.config") {
		t.Errorf("1 MiB + 1 byte of config: %v, want a rejection naming spec.config", err)
	}

	if err := hc.HandrollV1().WebApps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the WebApp is gone", func(ctx context.Context) (bool, error) {
		l, err := hc.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}

// TestWebhookRejections: what neither the schema nor CEL can check, the
// validating webhook refuses through the API server, naming the field. With
// test/integration's schema and CEL cases, these make the full list of
// invalid WebApps. Then explicit invalid values the schema refuses (port 0,
// an empty service type): the mutating webhook must not turn them into
// defaults first.
func TestWebhookRejections(t *testing.T) {
	ns := env.Namespace(t)
	configuration := "handroll-" + ns
	installWebhookConfigurations(t, configuration, ns)
	args, url := webhookArgs(t, configuration)
	startOperator(t, args...)
	waitInjected(t, configuration, url)

	hc := handrollClient(t)
	for i, tc := range webhookRejections() {
		t.Run(tc.name, func(t *testing.T) {
			w := &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d", i), Namespace: ns},
				Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
			}
			tc.mutate(w)
			var err error
			eventually(t, "a rejection", func(ctx context.Context) (bool, error) {
				var created *handrollv1.WebApp
				created, err = hc.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{})
				if err == nil {
					// The API server had not seen the webhook yet: undo, retry.
					_ = hc.HandrollV1().WebApps(ns).Delete(ctx, created.Name, metav1.DeleteOptions{})
					return false, nil
				}
				return true, nil
			})
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("rejected without naming %s: %v", tc.field, err)
			}
		})
	}

	// Explicit invalid values that the Go types, with omitempty, cannot
	// send: the mutating webhook must leave them for the schema to refuse,
	// not replace them with the default a left-out field gets.
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for i, tc := range explicitInvalidValues {
		t.Run(tc.name, func(t *testing.T) {
			var obj unstructured.Unstructured
			doc := fmt.Sprintf(`{"apiVersion":%q,"kind":"WebApp","metadata":{"name":"raw-%d"},"spec":%s}`, tc.apiVersion, i, tc.spec)
			if err := json.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			gv, err := schema.ParseGroupVersion(tc.apiVersion)
			if err != nil {
				t.Fatal(err)
			}
			webapps := dyn.Resource(gv.WithResource(handrollv1.WebAppResource)).Namespace(ns)
			// The webhook configurations are in place (the cases above
			// were refused by them), so an accepted object is the defect,
			// not a race.
			created, err := webapps.Create(context.Background(), &obj, metav1.CreateOptions{})
			if err == nil {
				spec, _, _ := unstructured.NestedMap(created.Object, "spec")
				_ = webapps.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
				t.Fatalf("%s was accepted, stored as %v; want a refusal naming %s", tc.spec, spec, tc.field)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("rejected without naming %s: %v", tc.field, err)
			}
		})
	}
}

// webhookRejection is a WebApp only the validating webhook refuses: mutate
// makes it from a valid one, and the refusal must name field.
type webhookRejection struct {
	name   string
	mutate func(*handrollv1.WebApp)
	field  string
}

// webhookRejections are the invalid WebApps that neither the schema nor CEL
// can check.
func webhookRejections() []webhookRejection {
	half := strings.Repeat("x", handrollv1.MaxConfigBytes/2)
	return []webhookRejection{
		{"reserved env prefix", func(w *handrollv1.WebApp) { w.Spec.Env = []corev1.EnvVar{{Name: "HANDROLL_URL", Value: "x"}} }, "spec.env[0].name"},
		{"env name starting with a digit", func(w *handrollv1.WebApp) { w.Spec.Env = []corev1.EnvVar{{Name: "1VAR", Value: "x"}} }, "spec.env[0].name"},
		{"env name with =", func(w *handrollv1.WebApp) { w.Spec.Env = []corev1.EnvVar{{Name: "A=B", Value: "x"}} }, "spec.env[0].name"},
		{"env value and valueFrom", func(w *handrollv1.WebApp) {
			w.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "spec.env[0].valueFrom"},
		{"image with upper case", func(w *handrollv1.WebApp) { w.Spec.Image = "Nginx" }, "spec.image"},
		{"image with an empty tag", func(w *handrollv1.WebApp) { w.Spec.Image = "nginx:" }, "spec.image"},
		{"image with a short digest", func(w *handrollv1.WebApp) { w.Spec.Image = "nginx@sha256:abc" }, "spec.image"},
		{"image with an empty path component", func(w *handrollv1.WebApp) { w.Spec.Image = "registry.example/a//b" }, "spec.image"},
		{"image with a 129-character tag", func(w *handrollv1.WebApp) { w.Spec.Image = "nginx:" + strings.Repeat("t", 129) }, "spec.image"},
		{"config over 1 MiB in total", func(w *handrollv1.WebApp) { w.Spec.Config = map[string]string{"a": half, "b": half} }, "spec.config"},
		{"the conversion annotation on v1", func(w *handrollv1.WebApp) {
			w.Annotations = map[string]string{handrollv1.V1SpecAnnotation: "{}"}
		}, "metadata.annotations[handroll.dev/v1-spec]"},
	}
}

// explicitInvalidValues are WebApps, as JSON, with explicit invalid values
// that the Go types, with omitempty, cannot send, and the field the
// schema's refusal must name.
var explicitInvalidValues = []struct {
	name, apiVersion, spec, field string
}{
	{"port 0", "handroll.dev/v1", `{"image":"nginx:1.27","port":0}`, "spec.port"},
	{"service port 0", "handroll.dev/v1", `{"image":"nginx:1.27","service":{"port":0}}`, "spec.service.port"},
	{"service type empty", "handroll.dev/v1", `{"image":"nginx:1.27","service":{"type":""}}`, "spec.service.type"},
	{"v1alpha1 containerPort 0", "handroll.dev/v1alpha1", `{"image":"nginx:1.27","containerPort":0}`, "spec.containerPort"},
}
