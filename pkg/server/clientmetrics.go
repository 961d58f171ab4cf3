package server

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go reports every request it makes through the hooks in
// k8s.io/client-go/tools/metrics, which do nothing until a program installs
// an adapter. These are the names kube-controller-manager and
// controller-runtime export, so the same dashboards read them.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests to the API server, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds, partitioned by verb and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
	}, []string{"verb", "host"})
	rateLimiterDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Time requests waited in client-go's client-side rate limiter (--kube-api-qps, --kube-api-burst), partitioned by verb and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
	}, []string{"verb", "host"})
	requestRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_request_retries_total",
		Help: "Number of request retries (after a 429 or a retryable error), partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})

	registerClientMetricsOnce sync.Once
)

// RegisterClientGoMetrics installs the adapter and registers its metrics in
// reg. client-go accepts one adapter per process, so only the first call has
// any effect.
func RegisterClientGoMetrics(reg prometheus.Registerer) {
	registerClientMetricsOnce.Do(func() {
		reg.MustRegister(requestsTotal, requestDuration, rateLimiterDuration, requestRetries)
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:      resultAdapter{requestsTotal},
			RequestLatency:     latencyAdapter{requestDuration},
			RateLimiterLatency: latencyAdapter{rateLimiterDuration},
			RequestRetry:       retryAdapter{requestRetries},
		})
	})
}

type resultAdapter struct{ m *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.m.WithLabelValues(code, method, host).Inc()
}

type latencyAdapter struct{ m *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	a.m.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type retryAdapter struct{ m *prometheus.CounterVec }

func (a retryAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	a.m.WithLabelValues(code, method, host).Inc()
}
