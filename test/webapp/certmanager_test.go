package webapp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/scheme"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestCertManagerRBACIsEnough runs handroll as manifests/certmanager does:
// with the ServiceAccount, roles and bindings of manifests/default with
// that component, built by kubectl's kustomize, as its only credential, and
// its webhook and metrics certificates read from directories. The test
// plays cert-manager's cainjector: it writes the CA into the webhook
// configurations and the CRD's conversion webhook. The operator becomes
// ready, admits, converts and reconciles a WebApp, and serves a metrics
// scrape verified against the CA, and meets no forbidden request, though
// the roles grant nothing on Secrets, webhook configurations or CRDs.
func TestCertManagerRBACIsEnough(t *testing.T) {
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()

	rename := func(name string) string { return name + "-" + opNS }
	created := 0
	for _, obj := range certManagerRBAC(t) {
		if err := createMoved(ctx, t, obj, opNS, rename); err != nil {
			t.Fatal(err)
		}
		created++
	}
	if created < 5 {
		t.Fatalf("the build holds only %d RBAC objects", created)
	}
	tr, err := kube.CoreV1().ServiceAccounts(opNS).CreateToken(ctx, "handroll", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.WriteKubeconfig(t, controlplane.WithToken(tr.Status.Token))

	// The mounted Secrets, and the CA injected as the cainjector would.
	webhookDir, metricsDir := t.TempDir(), t.TempDir()
	webhookCA, err := controlplane.WriteServingCertificate(webhookDir)
	if err != nil {
		t.Fatal(err)
	}
	metricsCA, err := controlplane.WriteServingCertificate(metricsDir)
	if err != nil {
		t.Fatal(err)
	}
	port := operator.FreePort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	configuration := rename("handroll")
	installWebhookConfigurations(t, configuration, ns)
	injectCA(t, configuration, url, webhookCA)

	op := operator.Start(t, kubeconfig,
		"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS,
		"--leader-elect-resource-name="+rename("handroll-leader"),
		fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+webhookDir,
		"--metrics-secure", "--metrics-cert-dir="+metricsDir,
	)

	// Admitted through the webhooks (the API server retries until it has
	// read the configurations), defaulted, reconciled, read as v1alpha1.
	hc := handrollClient(t)
	eventually(t, "a WebApp is admitted through the webhooks", func(ctx context.Context) (bool, error) {
		_, err := hc.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27", Config: map[string]string{"k": "v"}},
		}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	converged(t, ns, "web")
	if _, err := hc.HandrollV1alpha1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("reading the WebApp as v1alpha1 through the conversion webhook: %v", err)
	}
	if n := webhookCalls(t, op, metricsCA); n["/mutate-handroll-dev-v1-webapp"] == 0 || n["/validate-handroll-dev-v1-webapp"] == 0 || n["/convert"] == 0 {
		t.Errorf("the webhooks answered %v; want the API server to have called each", n)
	}
	if err := hc.HandrollV1().WebApps(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the WebApp is deleted", func(ctx context.Context) (bool, error) {
		_, err := hc.HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if strings.Contains(strings.ToLower(op.Log()), "forbidden") {
		t.Errorf("the operator met a forbidden request with manifests/certmanager's RBAC:\n%s", op.Log())
	}
	if _, err := kube.CoreV1().Secrets(opNS).Get(ctx, "handroll-webhook-tls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the self-managed certificates' Secret: %v, want none", err)
	}
}

// certManagerRBAC builds manifests/default with manifests/certmanager and
// returns its ServiceAccounts, roles and bindings, having checked that no
// role grants anything on Secrets, or a write of the webhook
// configurations or the CRDs.
func certManagerRBAC(t *testing.T) []runtime.Object {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, "manifests", p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel("default") + "\ncomponents:\n- " + rel("certmanager") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(env.BinDir, "kubectl"), "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderr.Bytes())
	}
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	decoder := scheme.Codecs(s).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := utilyaml.ToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := utilyaml.Unmarshal(raw, &tm); err != nil || !slices.Contains([]string{"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}, tm.Kind) {
			continue
		}
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rules []rbacv1.PolicyRule
		switch o := obj.(type) {
		case *rbacv1.Role:
			rules = o.Rules
		case *rbacv1.ClusterRole:
			rules = o.Rules
		}
		for _, r := range rules {
			for _, res := range r.Resources {
				write := slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
				if res == "secrets" || res == "*" || write && slices.Contains([]string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "customresourcedefinitions"}, res) {
					t.Errorf("manifests/certmanager keeps a grant of %v on %s", r.Verbs, res)
				}
			}
		}
		objs = append(objs, obj)
	}
	return objs
}

// injectCA points the webhook configurations and the CRD's conversion
// webhook at url, trusting caPEM, as cert-manager's cainjector (and, for
// the URL, a Service in front of the pods) would; the CRD is put back when
// t ends.
func injectCA(t *testing.T, configuration, url string, caPEM []byte) {
	t.Helper()
	ctx := context.Background()
	ar := kubeClient(t).AdmissionregistrationV1()
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caPEM}
	}
	m, err := ar.MutatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = client(*m.Webhooks[i].ClientConfig.Service.Path)
	}
	if _, err := ar.MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v, err := ar.ValidatingWebhookConfigurations().Get(ctx, configuration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = client(*v.Webhooks[i].ClientConfig.Service.Path)
	}
	if _, err := ar.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	crds := apiextensionsclient.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	var before *apiextensionsv1.CustomResourceConversion
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, "webapps.handroll.dev", metav1.GetOptions{})
		if err != nil {
			return err
		}
		before = crd.Spec.Conversion.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url + "/convert"), CABundle: caPEM},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd, err := crds.Get(context.Background(), "webapps.handroll.dev", metav1.GetOptions{})
			if err != nil {
				return err
			}
			crd.Spec.Conversion = before
			_, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Errorf("restoring the CRD's conversion webhook: %v", err)
		}
	})
}

// webhookCalls scrapes /metrics as Prometheus does with the ServiceMonitor
// manifests/certmanager patches: verifying the server against caPEM, with
// the token of a ServiceAccount bound to the metrics reader role. It
// returns the webhooks' successful requests by path.
func webhookCalls(t *testing.T, op *operator.Operator, caPEM []byte) map[string]float64 {
	t.Helper()
	ns := env.Namespace(t)
	ctx := context.Background()
	kube := kubeClient(t)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "metrics-reader-" + ns
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	var families map[string]*dto.MetricFamily
	eventually(t, "a verified, authorized scrape", func(context.Context) (bool, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+op.MetricsAddr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := client.Do(req)
		if err != nil {
			return false, err // a failed verification does not get better
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil // the binding may not be seen yet
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err = parser.TextToMetricFamilies(resp.Body)
		return err == nil, err
	})
	out := map[string]float64{}
	for _, m := range families["controller_runtime_webhook_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["code"] == "200" {
			out[labels["webhook"]] += m.GetCounter().GetValue()
		}
	}
	return out
}
