package webapp

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// TestEveryMetricAppears: after one reconcile, /metrics carries the
// controller, workqueue, client-go, leader-election and process metrics,
// under the names controller-runtime uses.
func TestEveryMetricAppears(t *testing.T) {
	op, _ := startOperator(t)
	ns := env.Namespace(t)
	createWebApp(t, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	})
	converged(t, ns, "web")
	families := op.Metrics(t)
	for _, name := range []string{
		"controller_runtime_reconcile_total",
		"controller_runtime_reconcile_errors_total",
		"controller_runtime_terminal_reconcile_errors_total",
		"controller_runtime_reconcile_panics_total",
		"controller_runtime_reconcile_time_seconds",
		"controller_runtime_reconcile_timeouts_total",
		"controller_runtime_max_concurrent_reconciles",
		"controller_runtime_active_workers",
		"workqueue_depth",
		"workqueue_adds_total",
		"workqueue_queue_duration_seconds",
		"workqueue_work_duration_seconds",
		"workqueue_unfinished_work_seconds",
		"workqueue_longest_running_processor_seconds",
		"workqueue_retries_total",
		"rest_client_requests_total",
		"rest_client_request_duration_seconds",
		"leader_election_master_status",
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if _, ok := families[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
}

// TestSecureMetrics: with --metrics-secure, a scrape without a token is
// 401, with a token whose user RBAC does not allow get /metrics is 403,
// and with one it allows is 200.
func TestSecureMetrics(t *testing.T) {
	op, _ := startOperator(t, "--metrics-secure")
	ns := env.Namespace(t)
	kube := kubeClient(t)
	ctx := context.Background()

	token := func(sa string) string {
		t.Helper()
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	denied, allowed := token("stranger"), token("prometheus")
	role := "metrics-reader-" + ns
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The certificate is self-signed: this client checks authorization, not
	// the server's identity.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+op.MetricsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("scraping over HTTPS: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := scrape("not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a bad token: %d, want 401", code)
	}
	if code, body := scrape(denied); code != http.StatusForbidden || !strings.Contains(body, "stranger") {
		t.Errorf("a token without RBAC: %d %q, want 403 naming the user", code, body)
	}
	if code, body := scrape(allowed); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("an allowed token: %d, want 200 with metrics", code)
	}
	resp, err := http.Get("http://" + op.MetricsAddr + "/metrics")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served the metrics while --metrics-secure is on")
		}
	}
}

// TestBadLeaderFlagsFailFast: inconsistent durations stop the start with a
// message that names the flag, before anything runs.
func TestBadLeaderFlagsFailFast(t *testing.T) {
	env.Require(t)
	cmd := exec.Command(operator.Binary(t), "--kubeconfig="+env.Kubeconfig,
		"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=20s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(budget.Scale(30 * time.Second)):
		_ = cmd.Process.Kill()
		t.Fatal("handroll did not exit on inconsistent leader-election flags")
	}
	if err == nil {
		t.Fatalf("handroll exited 0 with a renew deadline above the lease duration:\n%s", out)
	}
	if !strings.Contains(string(out), "--leader-elect-renew-deadline") {
		t.Errorf("the error does not name the flag:\n%s", out)
	}
}
