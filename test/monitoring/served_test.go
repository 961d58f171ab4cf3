package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// TestDashboardMetricsAreServed runs the operator with its webhooks and
// self-managed certificates, makes it reconcile a WebApp, admit it and
// convert it, then scrapes /metrics: every metric every dashboard queries
// must be there. It also shows, on a copy of a dashboard changed in
// memory, that a panel naming a metric handroll does not serve fails.
func TestDashboardMetricsAreServed(t *testing.T) {
	_, _, families := servingOperator(t)
	var all []query
	for file, data := range readDashboards(t) {
		all = append(all, parseDashboard(t, file, data).queries(file)...)
	}
	for _, msg := range unserved(all, families) {
		t.Error(msg)
	}
	if t.Failed() {
		var names []string
		for n := range families {
			names = append(names, n)
		}
		t.Logf("served: %s", strings.Join(names, " "))
	}

	// The check itself: a dashboard with a made-up metric, in a panel
	// nested in a collapsed row, and with a _bucket of a counter, fails.
	for file, data := range readDashboards(t) {
		bad := withPanels(t, data, map[string]any{
			"type": "row", "title": "Collapsed", "collapsed": true, "id": 9001,
			"panels": []any{
				map[string]any{"type": "timeseries", "title": "Made up", "id": 9002, "targets": []any{
					map[string]any{"refId": "A", "expr": `sum(rate(handroll_made_up_metric_total{job=~"$job"}[5m]))`},
				}},
				map[string]any{"type": "timeseries", "title": "Not a histogram", "id": 9003, "targets": []any{
					map[string]any{"refId": "A", "expr": `histogram_quantile(0.9, sum by (le) (rate(controller_runtime_reconcile_total_bucket[5m])))`},
				}},
			},
		})
		got := strings.Join(unserved(parseDashboard(t, file, bad).queries(file), families), "\n")
		for _, want := range []string{
			`panel "Made up": handroll_made_up_metric_total is not served`,
			`panel "Not a histogram": controller_runtime_reconcile_total_bucket is not served`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("%s with made-up metrics: the check does not report %q; it reports:\n%s", file, want, got)
			}
		}
		break
	}
}

// withPanels returns the dashboard JSON data with the panels added.
func withPanels(t *testing.T, data []byte, panels ...any) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	existing, _ := d["panels"].([]any)
	d["panels"] = append(existing, panels...)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func webhookRequests(families map[string]*dto.MetricFamily, path, code string) float64 {
	var n float64
	for _, m := range families["controller_runtime_webhook_requests_total"].GetMetric() {
		if label(m, "webhook") == path && label(m, "code") == code {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

func certificateLabels(families map[string]*dto.MetricFamily) string {
	var out []string
	for _, m := range families["handroll_webhook_certificate_expiry_timestamp_seconds"].GetMetric() {
		if m.GetGauge().GetValue() > float64(time.Now().Unix()) {
			out = append(out, label(m, "certificate"))
		}
	}
	return strings.Join(out, ",")
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// poll fails t when cond is not met within timeout, scaled by budget.Scale.
func poll(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	timeout = budget.Scale(timeout)
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// installWebhookConfigurations creates the webhook configurations of
// manifests/webhook, which point at the in-cluster Service (the operator
// redirects them to --webhook-url), and returns their name; they are
// deleted when t ends. This package's
// control plane is its own, so they apply to every namespace.
func installWebhookConfigurations(t *testing.T) string {
	t.Helper()
	mutating, validating := operator.ManifestWebhookConfigurations(t)
	if mutating.Name != validating.Name {
		t.Fatalf("manifests/webhook: want a mutating and a validating configuration of one name, got %s and %s", mutating.Name, validating.Name)
	}
	ar := env.KubeClient(t).AdmissionregistrationV1()
	ctx := context.Background()
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted after the operator has stopped (cleanups run last first), so
	// that the next test can install them again.
	t.Cleanup(func() {
		_ = ar.MutatingWebhookConfigurations().Delete(context.Background(), mutating.Name, metav1.DeleteOptions{})
		_ = ar.ValidatingWebhookConfigurations().Delete(context.Background(), validating.Name, metav1.DeleteOptions{})
	})
	return mutating.Name
}

// servingOperator runs the operator with its webhooks and self-managed
// certificates, makes it reconcile a WebApp, admit it and convert it, and
// returns it, its namespace and a scrape in which every webhook has
// answered and both certificates are reported.
func servingOperator(t *testing.T) (*operator.Operator, string, map[string]*dto.MetricFamily) {
	t.Helper()
	ns := env.Namespace(t)
	opNS := env.Namespace(t)
	configuration := installWebhookConfigurations(t)
	port := operator.FreePort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	op := operator.Start(t, env.Kubeconfig,
		"--operator-namespace="+opNS,
		"--leader-elect-resource-namespace="+opNS,
		fmt.Sprintf("--webhook-port=%d", port),
		"--webhook-url="+url,
		"--webhook-configuration-name="+configuration,
		"--conversion-crd=webapps.handroll.dev",
	)
	// Until the operator has injected its CA bundle and URL, the API server
	// cannot call the webhooks, and refuses WebApps (failurePolicy Fail).
	hc := env.HandrollClient(t)
	poll(t, "a WebApp is admitted through the webhooks", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := hc.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		}, metav1.CreateOptions{})
		return err == nil, nil
	})
	poll(t, "the WebApp is reconciled", 30*time.Second, func(ctx context.Context) (bool, error) {
		w, err := hc.HandrollV1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && w.Status.ObservedGeneration == w.Generation, nil
	})
	// Stored as v1, read as v1alpha1: the conversion webhook converts it.
	poll(t, "the WebApp is read as v1alpha1", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := hc.HandrollV1alpha1().WebApps(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil, nil
	})

	var families map[string]*dto.MetricFamily
	poll(t, "/metrics counts the admission and conversion requests", 30*time.Second, func(context.Context) (bool, error) {
		families = op.Metrics(t)
		for _, path := range []string{"/mutate-handroll-dev-v1-webapp", "/validate-handroll-dev-v1-webapp", "/convert"} {
			if webhookRequests(families, path, "200") == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if got := certificateLabels(families); got != "ca,serving" {
		t.Errorf("the certificate expiry metric has certificates %q, want ca,serving", got)
	}
	return op, opNS, families
}
