package monitoring

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestMetricsVerifiedWithThePublishedCA scrapes /metrics as the
// ServiceMonitor of manifests/monitoring does: the operator runs as
// manifests/default runs it (--metrics-secure, --metrics-ca-configmap), the
// scraper trusts only the CA read from that ConfigMap through the API, for
// the metrics Service's name, and sends the token of the ServiceAccount
// the component's reader binding names. That scrape succeeds; without the
// token it is refused (401), with a token RBAC does not allow it is
// refused (403); a client trusting another CA, or expecting the webhook
// Service's name, fails the handshake.
func TestMetricsVerifiedWithThePublishedCA(t *testing.T) {
	opNS := env.Namespace(t)
	port := operator.FreePort(t)
	op := operator.Start(t, env.Kubeconfig,
		"--operator-namespace="+opNS,
		"--leader-elect-resource-namespace="+opNS,
		"--metrics-secure",
		"--metrics-ca-configmap=handroll-ca",
		fmt.Sprintf("--webhook-port=%d", port),
		fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port),
		// The CA is published; the cluster's webhook configurations and
		// the CRD, which other tests here inject into, are left alone.
		"--webhook-configuration-name=",
		"--conversion-crd=",
	)
	kube := env.KubeClient(t)

	var published *corev1.ConfigMap
	poll(t, "the operator publishes its CA in ConfigMap handroll-ca", 30*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(opNS).Get(ctx, "handroll-ca", metav1.GetOptions{})
		published = cm
		return err == nil && cm.Data["ca.crt"] != "", nil
	})
	if strings.Contains(published.Data["ca.crt"], "PRIVATE KEY") || len(published.Data) != 1 {
		t.Fatalf("ConfigMap handroll-ca holds %d keys, a private key %v; want ca.crt alone, certificates only",
			len(published.Data), strings.Contains(published.Data["ca.crt"], "PRIVATE KEY"))
	}
	trusted := x509.NewCertPool()
	if !trusted.AppendCertsFromPEM([]byte(published.Data["ca.crt"])) {
		t.Fatal("ConfigMap handroll-ca: no certificate in ca.crt")
	}

	allowed := scraperToken(t, opNS)
	serverName := "handroll-metrics." + opNS + ".svc"
	scraper := scrapeWith(op.MetricsAddr, trusted, serverName)
	var code int
	var body string
	var err error
	// The first certificate is issued once the Secret exists; until then
	// handshakes fail.
	poll(t, "a scrape verified against the published CA succeeds", 30*time.Second, func(context.Context) (bool, error) {
		code, body, err = scraper(allowed)
		return err == nil && code == http.StatusOK, nil
	})
	if !strings.Contains(body, "go_goroutines") {
		t.Errorf("the verified scrape returned no metrics:\n%.300s", body)
	}
	for _, name := range []string{"handroll-metrics", "handroll-metrics." + opNS + ".svc.cluster.local"} {
		if code, _, err := scrapeWith(op.MetricsAddr, trusted, name)(allowed); err != nil || code != http.StatusOK {
			t.Errorf("verified as %s: %d %v; the certificate must hold the Service's names", name, code, err)
		}
	}

	if code, _, err := scraper(""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("a verified scrape without a token: %d %v, want 401", code, err)
	}
	stranger := serviceAccountToken(t, opNS, "stranger")
	if code, _, err := scraper(stranger); err != nil || code != http.StatusForbidden {
		t.Errorf("a verified scrape with a token RBAC does not allow: %d %v, want 403", code, err)
	}

	other, err := controlplane.WriteServingCertificate(t.TempDir(), serverName)
	if err != nil {
		t.Fatal(err)
	}
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(other)
	var unknown x509.UnknownAuthorityError
	if _, _, err := scrapeWith(op.MetricsAddr, otherPool, serverName)(allowed); !errors.As(err, &unknown) {
		t.Errorf("a client trusting another CA: %v; want the handshake to fail on an unknown authority", err)
	}
	var wrongName x509.HostnameError
	if _, _, err := scrapeWith(op.MetricsAddr, trusted, "handroll-webhook."+opNS+".svc")(allowed); !errors.As(err, &wrongName) {
		t.Errorf("a client expecting the webhook Service: %v; want the handshake to fail on the name", err)
	}
}

// scrapeWith returns a scrape of https://addr/metrics that trusts only
// pool and checks the name serverName, as Prometheus with tlsConfig.ca and
// serverName: status, body, or the error of a handshake that failed.
func scrapeWith(addr string, pool *x509.CertPool, serverName string) func(token string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	return func(token string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
}

// scraperToken sets up manifests/monitoring's scraper in ns as kustomize
// would (its ServiceAccount, and the binding to manifests/rbac's
// metrics-reader ClusterRole, subjects in ns) and returns a token of it.
// A TokenRequest stands in for the token Secret, which only
// kube-controller-manager fills.
func scraperToken(t *testing.T, ns string) string {
	t.Helper()
	var (
		sa      corev1.ServiceAccount
		binding rbacv1.ClusterRoleBinding
		role    rbacv1.ClusterRole
	)
	readManifest(t, "manifests/monitoring/scraper.yaml", &sa)
	readManifest(t, "manifests/monitoring/metrics_reader_binding.yaml", &binding)
	readManifest(t, "manifests/rbac/metrics_reader_role.yaml", &role)
	kube := env.KubeClient(t)
	ctx := context.Background()
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	for i := range binding.Subjects {
		binding.Subjects[i].Namespace = ns
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name || binding.RoleRef.Name != role.Name {
		t.Fatalf("manifests/monitoring binds %v to %s; want its scraper %s to %s", binding.Subjects, binding.RoleRef.Name, sa.Name, role.Name)
	}
	return serviceAccountToken(t, ns, sa.Name)
}

// serviceAccountToken creates ServiceAccount name in ns and returns a
// token of it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	kube := env.KubeClient(t)
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// readManifest decodes the first document of the repository file path
// into out.
func readManifest(t *testing.T, path string, out any) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n---\n")
	if err := yaml.Unmarshal([]byte(first), out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
