package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns the registry every handroll metric goes into, with the
// Go runtime and process collectors. It replaces controller-runtime's global
// metrics.Registry; being passed around rather than global, tests can build
// as many as they like.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// MetricsHandler serves the registry in the Prometheus exposition format.
func MetricsHandler(r *prometheus.Registry) http.Handler {
	return promhttp.InstrumentMetricHandler(r, promhttp.HandlerFor(r, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.HTTPErrorOnError,
		Registry:          r,
		EnableOpenMetrics: true,
	}))
}
