package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// webhookMetrics are controller-runtime v0.25's webhook metrics
// (pkg/webhook/internal/metrics in its source): the same names, labels,
// help texts and buckets, so that its dashboards and alerts work unchanged.
// The webhook label is the request path, conversion's included. Each mux
// has its own, so that tests can build as many muxes as they like.
type webhookMetrics struct {
	latency  *prometheus.HistogramVec
	total    *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
}

func newWebhookMetrics() *webhookMetrics {
	return &webhookMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "controller_runtime_webhook_latency_seconds",
			Help:                            "Histogram of the latency of processing admission requests",
			Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"webhook"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_webhook_requests_total",
			Help: "Total number of admission requests by HTTP status code.",
		}, []string{"webhook", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_webhook_requests_in_flight",
			Help: "Current number of admission requests being served.",
		}, []string{"webhook"}),
	}
}

func (m *webhookMetrics) register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(m.latency), reg.Register(m.total), reg.Register(m.inFlight),
		reg.Register(admissionPanics), reg.Register(conversionPanics))
}

// The panics recovered in callReview and convertAll, as controller-runtime
// counts them (process-wide there too). They start at 0, so that an alert
// on their increase has a series to watch.
var (
	admissionPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "controller_runtime_webhook_panics_total",
		Help: "Total number of webhook panics",
	})
	conversionPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "controller_runtime_conversion_webhook_panics_total",
		Help: "Total number of conversion webhook panics",
	})
)

// instrument wraps h as controller-runtime's InstrumentedHook does: the
// in-flight gauge, the counter by status code and the latency. The series
// of the likeliest codes, 200 and 500, exist from the start, so that a rate
// of errors is 0 rather than absent before the first one.
func (m *webhookMetrics) instrument(path string, h http.Handler) http.Handler {
	lbl := prometheus.Labels{"webhook": path}
	cnt := m.total.MustCurryWith(lbl)
	cnt.WithLabelValues("200")
	cnt.WithLabelValues("500")
	return promhttp.InstrumentHandlerDuration(m.latency.MustCurryWith(lbl),
		promhttp.InstrumentHandlerCounter(cnt,
			promhttp.InstrumentHandlerInFlight(m.inFlight.With(lbl), h)))
}
