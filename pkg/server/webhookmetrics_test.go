package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestWebhookMetricsCountEveryAnswer: every request to a registered path,
// admission or conversion, is counted by status code and timed, the
// guard's and the review's refusals and a recovered panic included; a
// request to an unknown path is not.
func TestWebhookMetricsCountEveryAnswer(t *testing.T) {
	mux := NewWebhookMux()
	reg := prometheus.NewPedanticRegistry()
	if err := mux.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	const admit, convert, broken = "/mutate-handroll-dev-v1-webapp", "/convert", "/validate-panics"
	mux.Handle(admit, ServeAdmission(allowNamed))
	mux.Handle(convert, ServeConversion(runtime.NewScheme()))
	mux.Handle(broken, ServeAdmission(func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { panic("boom") }))

	// Before any request, as controller-runtime: 200 and 500 at zero for
	// every path, nothing in flight.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(webhookMetricsAtZero),
		"controller_runtime_webhook_requests_total", "controller_runtime_webhook_requests_in_flight"); err != nil {
		t.Error(err)
	}

	conversion := conversionReviewBody(t)
	serve := func(method, path, contentType string, body io.Reader, length int64) int {
		req := httptest.NewRequest(method, path, body)
		req.Header.Set("Content-Type", contentType)
		if length >= 0 {
			req.ContentLength = length
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code
	}
	const ctJSON = "application/json"
	for _, c := range []struct {
		method, path, contentType string
		body                      []byte
		length                    int64
		want                      int
	}{
		{http.MethodPost, admit, ctJSON, reviewBody(t, "a"), -1, http.StatusOK},
		{http.MethodPost, admit, ctJSON, reviewBody(t, "b"), -1, http.StatusOK},
		{http.MethodGet, admit, ctJSON, nil, -1, http.StatusMethodNotAllowed},
		{http.MethodPost, admit, "text/plain", reviewBody(t, "c"), -1, http.StatusUnsupportedMediaType},
		{http.MethodPost, admit, ctJSON, []byte("{}"), MaxWebhookRequestBytes + 1, http.StatusRequestEntityTooLarge},
		{http.MethodPost, admit, ctJSON, []byte(`{"kind":"Nope"}`), -1, http.StatusBadRequest},
		{http.MethodPost, convert, ctJSON, conversion, -1, http.StatusOK},
		{http.MethodPost, convert, ctJSON, []byte("not json"), -1, http.StatusBadRequest},
		{http.MethodPost, broken, ctJSON, reviewBody(t, "d"), -1, http.StatusInternalServerError},
		{http.MethodPost, "/unknown", ctJSON, reviewBody(t, "e"), -1, http.StatusNotFound},
	} {
		if got := serve(c.method, c.path, c.contentType, bytes.NewReader(c.body), c.length); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
	// The panic is counted as controller-runtime counts it, process-wide.
	panicsBefore := testutil.ToFloat64(admissionPanics)
	if got := serve(http.MethodPost, broken, ctJSON, bytes.NewReader(reviewBody(t, "p")), -1); got != http.StatusInternalServerError {
		t.Errorf("a panicking review: %d, want 500", got)
	}
	if got := testutil.ToFloat64(admissionPanics) - panicsBefore; got != 1 {
		t.Errorf("controller_runtime_webhook_panics_total rose by %v for one panic, want 1", got)
	}
	// A body that grows past the limit while it is read, with no
	// Content-Length to refuse it by, is a 413 too.
	if got := serve(http.MethodPost, admit, ctJSON, io.MultiReader(strings.NewReader(`{"a":"`), strings.NewReader(strings.Repeat("x", MaxWebhookRequestBytes))), -1); got != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body without Content-Length: %d, want 413", got)
	}

	checkWebhookRequestCounts(t, mux, reg, admit, convert, broken)
}

// webhookMetricsAtZero is the metrics' text before any request, as
// controller-runtime's: 200 and 500 at zero for every path, nothing in
// flight.
const webhookMetricsAtZero = `
# HELP controller_runtime_webhook_requests_in_flight Current number of admission requests being served.
# TYPE controller_runtime_webhook_requests_in_flight gauge
controller_runtime_webhook_requests_in_flight{webhook="/convert"} 0
controller_runtime_webhook_requests_in_flight{webhook="/mutate-handroll-dev-v1-webapp"} 0
controller_runtime_webhook_requests_in_flight{webhook="/validate-panics"} 0
# HELP controller_runtime_webhook_requests_total Total number of admission requests by HTTP status code.
# TYPE controller_runtime_webhook_requests_total counter
controller_runtime_webhook_requests_total{code="200",webhook="/convert"} 0
controller_runtime_webhook_requests_total{code="200",webhook="/mutate-handroll-dev-v1-webapp"} 0
controller_runtime_webhook_requests_total{code="200",webhook="/validate-panics"} 0
controller_runtime_webhook_requests_total{code="500",webhook="/convert"} 0
controller_runtime_webhook_requests_total{code="500",webhook="/mutate-handroll-dev-v1-webapp"} 0
controller_runtime_webhook_requests_total{code="500",webhook="/validate-panics"} 0
`

// conversionReviewBody is a ConversionReview of no objects.
func conversionReviewBody(t *testing.T) []byte {
	t.Helper()
	conversion, err := json.Marshal(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"request": map[string]any{"uid": "u", "desiredAPIVersion": "handroll.dev/v1", "objects": []any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return conversion
}

// checkWebhookRequestCounts checks the requests counted and timed per path
// and status code after TestWebhookMetricsCountEveryAnswer's requests.
func checkWebhookRequestCounts(t *testing.T, mux *WebhookMux, reg prometheus.Gatherer, admit, convert, broken string) {
	t.Helper()
	for _, c := range []struct {
		path, code string
		want       float64
	}{
		{admit, "200", 2}, {admit, "405", 1}, {admit, "415", 1}, {admit, "413", 2}, {admit, "400", 1}, {admit, "500", 0},
		{convert, "200", 1}, {convert, "400", 1}, {convert, "500", 0},
		{broken, "500", 2}, {broken, "200", 0},
	} {
		if got := testutil.ToFloat64(mux.metrics.total.WithLabelValues(c.path, c.code)); got != c.want {
			t.Errorf("requests_total{webhook=%q,code=%q} = %v, want %v", c.path, c.code, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(mux.metrics.total); n != 11 {
		t.Errorf("%d requests_total series, want 11 (the unknown path must add none)", n)
	}
	for path, want := range map[string]uint64{admit: 7, convert: 2, broken: 2} {
		if got := histogramCount(t, reg, "controller_runtime_webhook_latency_seconds", path); got != want {
			t.Errorf("latency_seconds{webhook=%q} has %d observations, want %d", path, got, want)
		}
	}
}

// TestWebhookMetricsInFlight: the gauge counts the requests being served.
func TestWebhookMetricsInFlight(t *testing.T) {
	mux := NewWebhookMux()
	entered, release := make(chan struct{}), make(chan struct{})
	mux.Handle("/slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	done := make(chan struct{})
	for range 2 {
		go func() {
			req := httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			mux.ServeHTTP(httptest.NewRecorder(), req)
			done <- struct{}{}
		}()
	}
	<-entered
	<-entered
	gauge := mux.metrics.inFlight.WithLabelValues("/slow")
	if got := testutil.ToFloat64(gauge); got != 2 {
		t.Errorf("in flight while two requests are served: %v, want 2", got)
	}
	close(release)
	<-done
	<-done
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("in flight after both: %v, want 0", got)
	}
}

// TestWebhookMetricsBuckets: the latency histogram has controller-runtime's
// buckets, 10 ns to 1000 s by factors of 10.
func TestWebhookMetricsBuckets(t *testing.T) {
	mux := NewWebhookMux()
	reg := prometheus.NewPedanticRegistry()
	if err := mux.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mux.metrics.latency.WithLabelValues("/x").Observe(0.001)
	h := histogram(t, reg, "controller_runtime_webhook_latency_seconds", "/x")
	var got []float64
	for _, b := range h.GetBucket() {
		got = append(got, b.GetUpperBound())
	}
	want := prometheus.ExponentialBuckets(10e-9, 10, 12)
	if len(got) != len(want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("buckets %v, want %v", got, want)
		}
	}
	if err := mux.RegisterMetrics(reg); err == nil {
		t.Error("registering the same metrics twice in one registry did not fail")
	}
}

func histogramCount(t *testing.T, reg prometheus.Gatherer, name, webhook string) uint64 {
	t.Helper()
	h := histogram(t, reg, name, webhook)
	if h == nil {
		return 0
	}
	return h.GetSampleCount()
}

func histogram(t *testing.T, reg prometheus.Gatherer, name, webhook string) *dto.Histogram {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == webhook {
					return m.GetHistogram()
				}
			}
		}
	}
	return nil
}
