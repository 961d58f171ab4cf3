package controller

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The metrics below have controller-runtime v0.25's names, labels, help texts
// and buckets (pkg/internal/controller/metrics and pkg/internal/metrics in
// its source), so that dashboards and alerts written for it work unchanged.

// controllerMetrics are the reconcile loop's metrics, labelled by controller.
type controllerMetrics struct {
	reconcileTotal    *prometheus.CounterVec
	reconcileErrors   *prometheus.CounterVec
	terminalErrors    *prometheus.CounterVec
	reconcilePanics   *prometheus.CounterVec
	reconcileTime     *prometheus.HistogramVec
	reconcileTimeouts *prometheus.CounterVec
	maxConcurrent     *prometheus.GaugeVec
	activeWorkers     *prometheus.GaugeVec
}

// reconcileTimeBuckets are controller-runtime's buckets for
// controller_runtime_reconcile_time_seconds.
var reconcileTimeBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// newControllerMetrics creates the collectors and registers them with reg.
// With a nil reg they still count, but nobody can read them.
func newControllerMetrics(reg prometheus.Registerer) (*controllerMetrics, error) {
	controller := []string{"controller"}
	m := &controllerMetrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total",
			Help: "Total number of reconciliations per controller",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_errors_total",
			Help: "Total number of reconciliation errors per controller",
		}, controller),
		terminalErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_terminal_reconcile_errors_total",
			Help: "Total number of terminal reconciliation errors per controller",
		}, controller),
		reconcilePanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_panics_total",
			Help: "Total number of reconciliation panics per controller",
		}, controller),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "controller_runtime_reconcile_time_seconds",
			Help:                            "Length of time per reconciliation per controller",
			Buckets:                         reconcileTimeBuckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, controller),
		reconcileTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_timeouts_total",
			Help: "Total number of reconciliation timeouts per controller",
		}, controller),
		maxConcurrent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_max_concurrent_reconciles",
			Help: "Maximum number of concurrent reconciles per controller",
		}, controller),
		activeWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_active_workers",
			Help: "Number of currently used workers per controller",
		}, controller),
	}
	if reg == nil {
		return m, nil
	}
	err := errors.Join(
		register(reg, &m.reconcileTotal),
		register(reg, &m.reconcileErrors),
		register(reg, &m.terminalErrors),
		register(reg, &m.reconcilePanics),
		register(reg, &m.reconcileTime),
		register(reg, &m.reconcileTimeouts),
		register(reg, &m.maxConcurrent),
		register(reg, &m.activeWorkers),
	)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// init creates this controller's series at their starting values, so that
// they are exported (as zeros) before the first reconcile.
func (m *controllerMetrics) init(name string, workers int) {
	for _, result := range []string{labelError, labelRequeueAfter, labelRequeue, labelSuccess} {
		m.reconcileTotal.WithLabelValues(name, result).Add(0)
	}
	m.reconcileErrors.WithLabelValues(name).Add(0)
	m.terminalErrors.WithLabelValues(name).Add(0)
	m.reconcilePanics.WithLabelValues(name).Add(0)
	m.reconcileTimeouts.WithLabelValues(name).Add(0)
	m.maxConcurrent.WithLabelValues(name).Set(float64(workers))
	m.activeWorkers.WithLabelValues(name).Set(0)
}

// register registers *c with reg. If reg already holds an identical
// collector (another controller registered it), *c becomes that one, so that
// every controller of a registry shares the same metric families.
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		existing, ok := already.ExistingCollector.(C)
		if !ok {
			return err
		}
		*c = existing
		return nil
	}
	return err
}

// workqueueMetrics implements client-go's workqueue.MetricsProvider with
// controller-runtime's workqueue metrics. The workqueue calls it once per
// queue, with the queue's name, which is the controller's name; like
// controller-runtime, we put that name in both the "name" and "controller"
// labels, and leave "priority" empty: the depth is one series per queue,
// whatever the priority of the keys in it (priorityqueue.go).
type workqueueMetrics struct {
	depth                   *prometheus.GaugeVec
	adds                    *prometheus.CounterVec
	latency                 *prometheus.HistogramVec
	workDuration            *prometheus.HistogramVec
	unfinished              *prometheus.GaugeVec
	longestRunningProcessor *prometheus.GaugeVec
	retries                 *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = &workqueueMetrics{}

func newWorkqueueMetrics(reg prometheus.Registerer) (*workqueueMetrics, error) {
	labels := []string{"name", "controller"}
	m := &workqueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue",
			Name:      "depth",
			Help:      "Current depth of workqueue by workqueue and priority",
		}, []string{"name", "controller", "priority"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue",
			Name:      "adds_total",
			Help:      "Total number of adds handled by workqueue",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem:                       "workqueue",
			Name:                            "queue_duration_seconds",
			Help:                            "How long in seconds an item stays in workqueue before being requested",
			Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem:                       "workqueue",
			Name:                            "work_duration_seconds",
			Help:                            "How long in seconds processing an item from workqueue takes.",
			Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, labels),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue",
			Name:      "unfinished_work_seconds",
			Help: "How many seconds of work has been done that " +
				"is in progress and hasn't been observed by work_duration. Large " +
				"values indicate stuck threads. One can deduce the number of stuck " +
				"threads by observing the rate at which this increases.",
		}, labels),
		longestRunningProcessor: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue",
			Name:      "longest_running_processor_seconds",
			Help: "How many seconds has the longest running " +
				"processor for workqueue been running.",
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue",
			Name:      "retries_total",
			Help:      "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
		}, labels),
	}
	err := errors.Join(
		register(reg, &m.depth),
		register(reg, &m.adds),
		register(reg, &m.latency),
		register(reg, &m.workDuration),
		register(reg, &m.unfinished),
		register(reg, &m.longestRunningProcessor),
		register(reg, &m.retries),
	)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *workqueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name, name, "")
}

func (m *workqueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name, name)
}

func (m *workqueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name, name)
}

func (m *workqueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name, name)
}

func (m *workqueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name, name)
}

func (m *workqueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunningProcessor.WithLabelValues(name, name)
}

func (m *workqueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name, name)
}

// stopped zeroes the gauges of queue name once its controller has stopped:
// client-go leaves them as they last were, keys left in the queue included,
// and controller-runtime's standard alerts on a backed-up or stuck queue
// would fire for ever on a replica that no longer runs it (a shard range
// handed over). Zero, not deleted, so that a dashboard sees the queue empty.
func (m *workqueueMetrics) stopped(name string) {
	m.depth.WithLabelValues(name, name, "").Set(0)
	m.unfinished.WithLabelValues(name, name).Set(0)
	m.longestRunningProcessor.WithLabelValues(name, name).Set(0)
}

var (
	registerWorkqueueMetricsOnce sync.Once
	// globalWorkqueueMetrics is client-go's process-wide provider, once
	// RegisterWorkqueueMetrics has set it.
	globalWorkqueueMetrics atomic.Pointer[workqueueMetrics]
)

// RegisterWorkqueueMetrics registers the workqueue metrics with reg and makes
// them client-go's process-global workqueue metrics provider, as
// controller-runtime does at init. It reaches every named workqueue created
// afterwards without its own provider: queues of controllers built with a nil
// Options.Registerer, and any other in the process. (A controller with a
// Registerer gives its queue its own provider and does not need this.)
//
// client-go honours only the first workqueue.SetProvider call in a process,
// so only the first call of this function does anything. It panics if reg
// holds different collectors under these names, as MustRegister would.
func RegisterWorkqueueMetrics(reg prometheus.Registerer) {
	registerWorkqueueMetricsOnce.Do(func() {
		m, err := newWorkqueueMetrics(reg)
		if err != nil {
			panic(err)
		}
		workqueue.SetProvider(m)
		globalWorkqueueMetrics.Store(m)
	})
}
