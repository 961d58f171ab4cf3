package webapp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// warnings collects the API server's warning headers.
type warnings struct {
	mu  sync.Mutex
	all []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, text)
}

// TestAPIServerCallsTheWebhooks registers handroll's admission webhooks with
// the real API server, pointed at the operator process, and shows that the
// API server rejects what only the webhook checks (a reserved env name, an
// image reference the schema's pattern lets through) with the webhook's
// message, and relays its warnings.
func TestAPIServerCallsTheWebhooks(t *testing.T) {
	ns := env.Namespace(t)
	certDir := t.TempDir()
	caBundle, err := controlplane.WriteServingCertificate(certDir)
	if err != nil {
		t.Fatal(err)
	}
	port := operator.FreePort(t)
	startOperator(t, fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+certDir)
	registerWebhooks(t, ns, port, caBundle)

	w := &warnings{}
	hc := warningClient(t, w)

	// The API server caches webhook configurations briefly: retry until the
	// webhook answers.
	checkReservedEnvRejected(t, hc, ns)

	// "Nginx" passes the schema's no-white-space pattern; the webhook parses
	// the reference and rejects the upper-case repository.
	checkUpperCaseImageRejected(t, hc, ns)

	// Allowed, with warnings: no tag, no resources.
	checkUntaggedAllowedWithWarning(t, hc, ns, w)
}

// registerWebhooks registers the operator's webhooks, served at port with
// caBundle, for WebApps of namespace ns only, and unregisters them when t
// ends.
func registerWebhooks(t *testing.T, ns string, port int, caBundle []byte) {
	t.Helper()
	// Only this test's namespace goes through the webhooks.
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"handroll.dev"}, APIVersions: []string{"v1"}, Resources: []string{"webapps"},
		},
	}}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, path)), CABundle: caBundle}
	}
	ctx := context.Background()
	name := "handroll-" + ns
	ar := kubeClient(t).AdmissionregistrationV1()
	// Which requests reach the webhooks is the manifests' choice.
	mutating, validating := operator.ManifestWebhookConfigurations(t)
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "default.webapps.handroll.dev", ClientConfig: client("/mutate-handroll-dev-v1-webapp"), Rules: rules,
			NamespaceSelector: selector, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConditions: mutating.Webhooks[0].MatchConditions,
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.webapps.handroll.dev", ClientConfig: client("/validate-handroll-dev-v1-webapp"), Rules: rules,
			NamespaceSelector: selector, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConditions: validating.Webhooks[0].MatchConditions,
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// warningClient is a client whose API server warnings w collects.
func warningClient(t *testing.T, w *warnings) versioned.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	hc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// checkReservedEnvRejected checks that a WebApp with a reserved env name is
// refused with the message of the validating webhook, naming the field.
func checkReservedEnvRejected(t *testing.T, hc versioned.Interface, ns string) {
	t.Helper()
	reserved := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "reserved", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Env: []corev1.EnvVar{{Name: "HANDROLL_MODE", Value: "x"}}},
	}
	var createErr error
	eventually(t, "the validating webhook rejects a reserved env name", func(ctx context.Context) (bool, error) {
		_, createErr = hc.HandrollV1().WebApps(ns).Create(ctx, reserved, metav1.CreateOptions{})
		if createErr == nil {
			_ = hc.HandrollV1().WebApps(ns).Delete(ctx, "reserved", metav1.DeleteOptions{})
			return false, nil
		}
		return strings.Contains(createErr.Error(), "reserved"), nil
	})
	if !strings.Contains(createErr.Error(), "spec.env[0].name") || !strings.Contains(createErr.Error(), "validate.webapps.handroll.dev") {
		t.Errorf("the rejection does not name the field and the webhook: %v", createErr)
	}
}

// checkUpperCaseImageRejected checks that the image "Nginx" is refused at
// spec.image.
func checkUpperCaseImageRejected(t *testing.T, hc versioned.Interface, ns string) {
	t.Helper()
	_, err := hc.HandrollV1().WebApps(ns).Create(context.Background(), &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "badimage", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "Nginx"},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.image") {
		t.Errorf("an upper-case image reference: %v, want a rejection at spec.image", err)
	}
}

// checkUntaggedAllowedWithWarning checks that a WebApp with an untagged
// image is stored, and that w received a warning about its image.
func checkUntaggedAllowedWithWarning(t *testing.T, hc versioned.Interface, ns string, w *warnings) {
	t.Helper()
	ctx := context.Background()
	if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "untagged", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a valid WebApp was rejected: %v", err)
	}
	w.mu.Lock()
	got := strings.Join(w.all, "\n")
	w.mu.Unlock()
	if !strings.Contains(got, "spec.image") {
		t.Errorf("no warning about the untagged image; warnings:\n%s", got)
	}
	if _, err := hc.HandrollV1().WebApps(ns).Get(ctx, "untagged", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("the allowed WebApp was not stored")
	}
}
