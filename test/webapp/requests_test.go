package webapp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/operator"
)

// TestRequestsPerNewWebApp counts what the operator sends to converge new
// WebApps: no read goes to the API server (the foreign-object check answers
// from the caches), each child is applied once, the status is written once,
// the directory is written for a batch rather than per WebApp, one event
// names every child a reconcile created, and each is reconciled once: the
// watch events of its own writes (no controller-manager runs here to move
// the children on) start no second reconcile. The first status is written
// at once (the harness's --first-status-grace=0): with the grace, a WebApp
// whose Deployment never reports is reconciled again when it ends.
func TestRequestsPerNewWebApp(t *testing.T) {
	ns := env.Namespace(t)
	op, _ := startOperator(t, "--leader-elect=false", "--namespaces="+ns)
	before, served := quietRequests(t, op), apiServerWrites(t)
	reconcilesBefore := reconciles(t, op)

	const n = 20
	withConfig := createNumberedWebApps(t, ns, n)
	for i := range n {
		converged(t, ns, fmt.Sprintf("web-%d", i))
	}
	after, servedAfter := quietRequests(t, op), apiServerWrites(t)
	if got := reconciles(t, op) - reconcilesBefore; got != n {
		t.Errorf("%.0f reconciles of %d new WebApps, want one each", got, n)
	}

	delta := map[string]float64{}
	for m, v := range after {
		delta[m] = v - before[m]
	}
	events, eventWrites := handrollEventWrites(t, ns)
	children := float64(2*n + withConfig)
	nonEvent := operator.Writes(delta) - float64(eventWrites)
	byResource := map[string]float64{}
	for k, v := range servedAfter {
		if d := v - served[k]; d != 0 {
			byResource[k] = d
		}
	}
	t.Logf("%d WebApps: requests %v, %d events, %.0f non-event writes (%.2f per WebApp); the API server counted %v",
		n, delta, eventWrites, nonEvent, nonEvent/n, byResource)

	if g := delta[http.MethodGet]; g != 0 {
		t.Errorf("%.0f GETs for %d new WebApps: the caches should answer every read", g, n)
	}
	if eventWrites > n {
		t.Errorf("%d events for %d new WebApps: at most one each", eventWrites, n)
		for _, e := range events.Items {
			t.Logf("%s %s %s: %s (series %v)", e.Type, e.Reason, e.Regarding.Name, e.Note, e.Series)
		}
	}
	// Children once each, the status once each, and the directory at most
	// once per ten WebApps, plus one for the end of the burst.
	if limit := children + n + n/10 + 1; nonEvent > limit {
		t.Errorf("%.0f non-event writes for %d new WebApps (%v children): more than %v", nonEvent, n, children, limit)
	}
	for resource, limit := range map[string]float64{
		"deployments": n, "services": n, "webapps/status": n,
		"configmaps": float64(withConfig) + n/10 + 1, // the directory's writes too
	} {
		if got := byResource[resource]; got > limit {
			t.Errorf("the API server served %v writes of %s; want at most %v", got, resource, limit)
		}
	}
}

// quietRequests waits until the operator has sent no write and no GET for
// three seconds, and returns its request counts.
func quietRequests(t *testing.T, op *operator.Operator) map[string]float64 {
	t.Helper()
	var got map[string]float64
	eventually(t, "the operator settles", func(context.Context) (bool, error) {
		before := op.Requests(t)
		time.Sleep(3 * time.Second)
		got = op.Requests(t)
		return operator.Writes(got) == operator.Writes(before) && got[http.MethodGet] == before[http.MethodGet], nil
	})
	return got
}

// createNumberedWebApps creates the WebApps web-0 to web-(n-1) in ns, every
// other one with a config, and returns how many have one.
func createNumberedWebApps(t *testing.T, ns string, n int) (withConfig int) {
	t.Helper()
	for i := range n {
		w := &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns},
			Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
		}
		if i%2 == 0 {
			w.Spec.Config = map[string]string{"k": "v"}
			withConfig++
		}
		createWebApp(t, w)
	}
	return withConfig
}

// handrollEventWrites lists the events of ns and counts the writes handroll
// made for them: a create for each, a patch for each repeat of a series.
func handrollEventWrites(t *testing.T, ns string) (*eventsv1.EventList, int) {
	t.Helper()
	events, err := kubeClient(t).EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventWrites := 0
	for _, e := range events.Items {
		if e.ReportingController != "handroll" {
			// The API server records some of its own (its ClusterIP
			// repair loop, for one): not handroll's writes.
			t.Logf("not handroll's: %s %s %s/%s: %s", e.ReportingController, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
			continue
		}
		eventWrites++ // the create
		if e.Series != nil {
			eventWrites += int(e.Series.Count) - 1 // each repeat is a patch
		}
	}
	return events, eventWrites
}

// reconciles is the operator's count of the WebApp controller's reconciles.
func reconciles(t *testing.T, op *operator.Operator) float64 {
	t.Helper()
	total := 0.0
	for _, m := range op.Metrics(t)["controller_runtime_reconcile_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == "webapp" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// apiServerWrites reads the API server's own count of the writes it served
// (apiserver_request_total), by resource and subresource.
func apiServerWrites(t *testing.T) map[string]float64 {
	t.Helper()
	raw, err := kubeClient(t).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "CREATE", "UPDATE":
		default:
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out
}
