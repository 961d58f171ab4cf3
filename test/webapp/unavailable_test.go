package webapp

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/controlplane"
)

// TestFailingWebhookPausesNoOtherNamespace: a third party's validating
// webhook that fails with 500 for Deployments in one namespace makes the
// API server answer 500 "failed calling webhook" there. That is not the API
// server being unavailable: the operator must not pause its workers, and
// WebApps in another namespace converge promptly.
func TestFailingWebhookPausesNoOtherNamespace(t *testing.T) {
	bad, good := env.Namespace(t), env.Namespace(t)
	ctx := context.Background()

	// The broken webhook, served on loopback.
	certDir := t.TempDir()
	caBundle, err := controlplane.WriteServingCertificate(certDir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "the third party's webhook is broken", http.StatusInternalServerError)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	name := "broken-" + bad
	ar := kubeClient(t).AdmissionregistrationV1()
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deployments.broken.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To(fmt.Sprintf("https://%s/validate", ln.Addr().(*net.TCPAddr).String())), CABundle: caBundle,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": bad}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](2),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	op, _ := startOperator(t, "--namespaces="+bad+","+good)
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "blocked", Namespace: bad},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	// Let its reconciles fail a few times: each failure of an unavailable
	// API server would double the pause of every worker.
	eventually(t, "the blocked WebApp's reconciles fail", func(context.Context) (bool, error) {
		return counter(op, t, "controller_runtime_reconcile_errors_total") >= 4, nil
	})

	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		createWebApp(t, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: good},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		})
		converged(t, good, name)
	}
	log := op.Log()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "every worker backs off") {
			t.Errorf("the operator paused every worker for a webhook's 500: %s", line)
		}
	}
	if !strings.Contains(log, "failed calling webhook") {
		t.Errorf("the operator's log does not show the webhook's failure; the test proves nothing")
	}
}
