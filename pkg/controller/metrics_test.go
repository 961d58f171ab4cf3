package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
)

// TestMetricNamesLabelsAndValues checks the exported text of the counters
// and gauges against controller-runtime's names, help texts and labels,
// after a known run: a succeeds; b fails once, then succeeds.
func TestMetricNamesLabelsAndValues(t *testing.T) {
	r := newRecorder(func(_ context.Context, req Request, n int) (Result, error) {
		if req == reqB && n == 0 {
			return Result{}, errors.New("transient")
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{Name: "metrics-test"}, r)
	h.enqueue(reqA)
	h.enqueue(reqB)
	h.start(t)
	for range 3 {
		receive(t, r.calls, "a reconcile")
	}
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(wantCountersAndGauges),
		"controller_runtime_active_workers",
		"controller_runtime_max_concurrent_reconciles",
		"controller_runtime_reconcile_errors_total",
		"controller_runtime_reconcile_panics_total",
		"controller_runtime_reconcile_timeouts_total",
		"controller_runtime_reconcile_total",
		"controller_runtime_terminal_reconcile_errors_total",
		"workqueue_adds_total",
		"workqueue_depth",
		"workqueue_retries_total",
	); err != nil {
		t.Error(err)
	}

	checkTimedMetrics(t, h.reg)
	checkFamiliesAreControllerRuntimes(t, h.reg)
}

// wantCountersAndGauges is the exported text of the counters and gauges
// after TestMetricNamesLabelsAndValues's run.
const wantCountersAndGauges = `
# HELP controller_runtime_active_workers Number of currently used workers per controller
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="metrics-test"} 0
# HELP controller_runtime_max_concurrent_reconciles Maximum number of concurrent reconciles per controller
# TYPE controller_runtime_max_concurrent_reconciles gauge
controller_runtime_max_concurrent_reconciles{controller="metrics-test"} 1
# HELP controller_runtime_reconcile_errors_total Total number of reconciliation errors per controller
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller="metrics-test"} 1
# HELP controller_runtime_reconcile_panics_total Total number of reconciliation panics per controller
# TYPE controller_runtime_reconcile_panics_total counter
controller_runtime_reconcile_panics_total{controller="metrics-test"} 0
# HELP controller_runtime_reconcile_timeouts_total Total number of reconciliation timeouts per controller
# TYPE controller_runtime_reconcile_timeouts_total counter
controller_runtime_reconcile_timeouts_total{controller="metrics-test"} 0
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="metrics-test",result="error"} 1
controller_runtime_reconcile_total{controller="metrics-test",result="requeue"} 0
controller_runtime_reconcile_total{controller="metrics-test",result="requeue_after"} 0
controller_runtime_reconcile_total{controller="metrics-test",result="success"} 2
# HELP controller_runtime_terminal_reconcile_errors_total Total number of terminal reconciliation errors per controller
# TYPE controller_runtime_terminal_reconcile_errors_total counter
controller_runtime_terminal_reconcile_errors_total{controller="metrics-test"} 0
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="metrics-test",name="metrics-test"} 3
# HELP workqueue_depth Current depth of workqueue by workqueue and priority
# TYPE workqueue_depth gauge
workqueue_depth{controller="metrics-test",name="metrics-test",priority=""} 0
# HELP workqueue_retries_total Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="metrics-test",name="metrics-test"} 1
`

// checkTimedMetrics checks the histograms and the time gauges: the values
// depend on timing, so only the names, labels and sample counts are checked.
func checkTimedMetrics(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	ctrl := map[string]string{"controller": "metrics-test"}
	queue := map[string]string{"controller": "metrics-test", "name": "metrics-test"}
	for name, labels := range map[string]map[string]string{
		"controller_runtime_reconcile_time_seconds": ctrl,
		"workqueue_queue_duration_seconds":          queue,
		"workqueue_work_duration_seconds":           queue,
	} {
		if n := metricValue(t, reg, name, labels); n != 3 {
			t.Errorf("%s has %v samples, want 3", name, n)
		}
	}
	metricValue(t, reg, "workqueue_unfinished_work_seconds", queue)
	metricValue(t, reg, "workqueue_longest_running_processor_seconds", queue)
}

// checkFamiliesAreControllerRuntimes checks that every family this package
// exports is one of controller-runtime's.
func checkFamiliesAreControllerRuntimes(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	wantNames := []string{
		"controller_runtime_active_workers",
		"controller_runtime_max_concurrent_reconciles",
		"controller_runtime_reconcile_errors_total",
		"controller_runtime_reconcile_panics_total",
		"controller_runtime_reconcile_time_seconds",
		"controller_runtime_reconcile_timeouts_total",
		"controller_runtime_reconcile_total",
		"controller_runtime_terminal_reconcile_errors_total",
		"workqueue_adds_total",
		"workqueue_depth",
		"workqueue_longest_running_processor_seconds",
		"workqueue_queue_duration_seconds",
		"workqueue_retries_total",
		"workqueue_unfinished_work_seconds",
		"workqueue_work_duration_seconds",
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("families = %v\nwant %v", names, wantNames)
	}
}

func TestReconcileTimeBucketsAreControllerRuntimes(t *testing.T) {
	h := newHarness(t, Options{}, newRecorder(nil))
	h.c.metrics.reconcileTime.WithLabelValues(h.c.Name()).Observe(0.001)
	families, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, f := range families {
		if f.GetName() == "controller_runtime_reconcile_time_seconds" {
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
		}
	}
	// Copied from controller-runtime v0.25 pkg/internal/controller/metrics.
	want := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
		1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}
	if !slices.Equal(got, want) {
		t.Errorf("buckets = %v\nwant %v", got, want)
	}
}

func TestControllersShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	one := newHarness(t, Options{Name: "one", Registerer: reg}, newRecorder(nil))
	r := newRecorder(nil)
	two := newHarness(t, Options{Name: "two", Registerer: reg}, r)

	two.enqueue(reqA)
	two.start(t)
	receive(t, r.calls, "a reconcile of two")
	if err := two.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	one.start(t)
	if err := one.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	for name, want := range map[string]float64{"one": 0, "two": 1} {
		if v := metricValue(t, reg, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": "success"}); v != want {
			t.Errorf("reconcile_total{controller=%s,success} = %v, want %v", name, v, want)
		}
		if v := metricValue(t, reg, "workqueue_adds_total", map[string]string{"controller": name, "name": name}); v != want {
			t.Errorf("workqueue_adds_total{%s} = %v, want %v", name, v, want)
		}
	}
}

func TestNewFailsOnConflictingCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Same name, other labels: not ours, and cannot be shared.
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_total", Help: "Total number of reconciliations per controller",
	}, []string{"controller"}))
	if _, err := New(Options{Name: "x", Registerer: reg}, newRecorder(nil)); err == nil {
		t.Error("New registered next to a conflicting collector: no error")
	}
}

// globalWorkqueueRegistry is the registry given to RegisterWorkqueueMetrics.
// client-go's provider is process-global and set once, so the test binary
// registers once, whichever test (or repetition, with -count) comes first.
var globalWorkqueueRegistry = sync.OnceValue(func() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	RegisterWorkqueueMetrics(reg)
	return reg
})

// runs numbers the runs of TestRegisterWorkqueueMetrics, so that with -count
// each run's queues have names of their own in the shared registry.
var runs atomic.Int32

func TestRegisterWorkqueueMetrics(t *testing.T) {
	global := globalWorkqueueRegistry()
	ignored := prometheus.NewRegistry()
	RegisterWorkqueueMetrics(ignored)
	run := fmt.Sprint(runs.Add(1))

	// Any named workqueue without its own provider now reports to global.
	plain := "plain-queue-" + run
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: plain})
	q.Add("x")
	q.ShutDown()
	if v := metricValue(t, global, "workqueue_adds_total", map[string]string{"name": plain, "controller": plain}); v != 1 {
		t.Errorf("workqueue_adds_total{%s} = %v, want 1", plain, v)
	}
	if families, err := ignored.Gather(); err != nil || len(families) != 0 {
		t.Errorf("second RegisterWorkqueueMetrics registered %d families (err %v), want none", len(families), err)
	}

	// So does the queue of a controller built without a Registerer.
	name := "no-registerer-" + run
	r := newRecorder(nil)
	c, err := New(Options{Name: name, RateLimiter: newRecordingLimiter(), Logger: quietLogger}, r)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{c: c, src: watchSource(t, c)}
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "a reconcile")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if v := metricValue(t, global, "workqueue_adds_total", map[string]string{"name": name, "controller": name}); v != 1 {
		t.Errorf("workqueue_adds_total{%s} = %v, want 1", name, v)
	}

	// And a controller may use the same registry as its Registerer: the
	// collectors are shared, not registered twice.
	if _, err := New(Options{Name: "same-registry-" + run, Registerer: global}, newRecorder(nil)); err != nil {
		t.Errorf("New with the global provider's registry: %v", err)
	}
}

// TestStoppedControllerQueueMetricsReadZero: keys still queued when a
// controller stops (a range handed over) leave no depth behind, and its
// in-flight gauges read zero: on a replica that no longer runs it, the
// standard alerts on a backed-up or stuck queue must not fire for ever.
func TestStoppedControllerQueueMetricsReadZero(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	r := newRecorder(func(_ context.Context, req Request, _ int) (Result, error) {
		if req == reqA {
			close(started)
			<-release
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{Name: "webapp-0-of-3", MaxConcurrentReconciles: 1}, r)
	h.enqueue(reqA)
	h.start(t)
	<-started
	// b and c wait behind a, and are left in the queue by the stop.
	h.enqueue(reqB)
	h.enqueue(reqC)
	labels := map[string]string{"name": "webapp-0-of-3", "controller": "webapp-0-of-3"}
	if v := metricValue(t, h.reg, "workqueue_depth", map[string]string{"name": "webapp-0-of-3", "controller": "webapp-0-of-3", "priority": ""}); v != 2 {
		t.Fatalf("workqueue_depth while a runs = %v, want 2", v)
	}
	h.cancel()
	close(release)
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if v := metricValue(t, h.reg, "workqueue_depth", map[string]string{"name": "webapp-0-of-3", "controller": "webapp-0-of-3", "priority": ""}); v != 0 {
		t.Errorf("workqueue_depth of the stopped controller = %v, want 0", v)
	}
	for _, name := range []string{"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		if v := metricValue(t, h.reg, name, labels); v != 0 {
			t.Errorf("%s of the stopped controller = %v, want 0", name, v)
		}
	}
}
