package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/klog/v2/textlogger"
)

var (
	reqA     = Request{Namespace: "ns", Name: "a"}
	reqB     = Request{Namespace: "ns", Name: "b"}
	reqC     = Request{Namespace: "ns", Name: "c"}
	sentinel = Request{Namespace: "ns", Name: "sentinel"}
)

// recorder is a Reconciler whose behaviour each test scripts per call. It
// records every call in order and reports it on calls.
type recorder struct {
	mu   sync.Mutex
	seen []Request
	// calls receives every Request, after fn has run.
	calls chan Request
	fn    func(ctx context.Context, req Request, n int) (Result, error)
}

func newRecorder(fn func(ctx context.Context, req Request, n int) (Result, error)) *recorder {
	if fn == nil {
		fn = func(context.Context, Request, int) (Result, error) { return Result{}, nil }
	}
	return &recorder{calls: make(chan Request, 1000), fn: fn}
}

// Reconcile calls fn with n, the number of earlier calls for req.
func (r *recorder) Reconcile(ctx context.Context, req Request) (Result, error) {
	r.mu.Lock()
	n := 0
	for _, s := range r.seen {
		if s == req {
			n++
		}
	}
	r.seen = append(r.seen, req)
	r.mu.Unlock()
	defer func() { r.calls <- req }()
	return r.fn(ctx, req, n)
}

func (r *recorder) count(req Request) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.seen {
		if s == req {
			n++
		}
	}
	return n
}

func (r *recorder) all() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.seen...)
}

func TestNewValidatesOptions(t *testing.T) {
	if _, err := New(Options{}, newRecorder(nil)); err == nil {
		t.Error("New without a Name: no error")
	}
	if _, err := New(Options{Name: "x"}, nil); err == nil {
		t.Error("New without a Reconciler: no error")
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(Options{Name: "defaults"}, newRecorder(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "defaults" {
		t.Errorf("Name() = %q", c.Name())
	}
	if c.workers != 1 {
		t.Errorf("workers = %d, want 1", c.workers)
	}
	if c.rateLimiter == nil {
		t.Error("no default rate limiter")
	}
	if !c.recoverPanic {
		t.Error("RecoverPanic does not default to true")
	}
	if c.shutdownTimeout != 30*time.Second {
		t.Errorf("shutdownTimeout = %s, want 30s", c.shutdownTimeout)
	}
	if c.timeout != 0 {
		t.Errorf("reconciliation timeout = %s, want none", c.timeout)
	}
}

func TestDefaultRateLimiter(t *testing.T) {
	rl := DefaultRateLimiter()

	// Per key: exponential from 5ms, reset by Forget, independent of other keys.
	for i, want := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		if got := rl.When(reqA); got != want {
			t.Errorf("failure %d of a: delay %s, want %s", i+1, got, want)
		}
	}
	if n := rl.NumRequeues(reqA); n != 3 {
		t.Errorf("NumRequeues(a) = %d, want 3", n)
	}
	if got := rl.When(reqB); got != 5*time.Millisecond {
		t.Errorf("first failure of b: delay %s, want 5ms", got)
	}
	rl.Forget(reqA)
	if got := rl.When(reqA); got != 5*time.Millisecond {
		t.Errorf("after Forget, failure of a: delay %s, want 5ms", got)
	}

	// Capped at 1000s.
	capped := DefaultRateLimiter()
	var last time.Duration
	for range 40 {
		last = capped.When(reqC)
	}
	if last != 1000*time.Second {
		t.Errorf("after 40 failures: delay %s, want the 1000s cap", last)
	}

	// Overall: a bucket of 100 tokens at 10/s. The first failures of 100
	// different keys use it up; the 101st key then waits for a token
	// (about 100ms), longer than its own 5ms.
	bucket := DefaultRateLimiter()
	for i := range 100 {
		bucket.When(Request{Name: fmt.Sprint(i)})
	}
	if got := bucket.When(Request{Name: "101st"}); got <= 5*time.Millisecond {
		t.Errorf("101st key's first failure: delay %s, want the token bucket's (> 5ms)", got)
	}
}

func TestSuccessForgetsKey(t *testing.T) {
	var hadDeadline atomic.Bool
	r := newRecorder(func(ctx context.Context, _ Request, _ int) (Result, error) {
		_, ok := ctx.Deadline()
		hadDeadline.Store(ok)
		return Result{}, nil
	})
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA) // before Start: kept until the queue exists
	h.start(t)
	receive(t, r.calls, "the reconcile")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	if when, forget := h.limiter.counts(reqA); when != 0 || forget != 1 {
		t.Errorf("rate limiter: When called %d times, Forget %d times; want 0 and 1", when, forget)
	}
	if hadDeadline.Load() {
		t.Error("Reconcile had a deadline though ReconciliationTimeout is 0")
	}
	name := h.c.Name()
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": "success"}); v != 1 {
		t.Errorf("reconcile_total{success} = %v, want 1", v)
	}
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": "error"}); v != 0 {
		t.Errorf("reconcile_total{error} = %v, want 0", v)
	}
}

// TestKeepDropsRefusedKeys: a key Keep refuses is dropped as a worker
// takes it, with no reconcile and nothing counted, and forgotten by the
// rate limiter; the others are reconciled.
func TestKeepDropsRefusedKeys(t *testing.T) {
	r := newRecorder(func(context.Context, Request, int) (Result, error) { return Result{}, nil })
	var asked atomic.Int32
	h := newHarness(t, Options{Keep: func(req Request) bool {
		asked.Add(1)
		return req != reqA
	}}, r)
	h.enqueue(reqA)
	h.enqueue(reqB)
	h.start(t)
	if got := receive(t, r.calls, "the reconcile"); got != reqB {
		t.Errorf("reconciled %v, want %v", got, reqB)
	}
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n := r.count(reqA); n != 0 || asked.Load() != 2 {
		t.Errorf("the refused key was reconciled %d times; Keep asked %d times, want 0 and 2", n, asked.Load())
	}
	if _, forget := h.limiter.counts(reqA); forget != 1 {
		t.Errorf("the refused key was forgotten %d times, want 1", forget)
	}
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_total", map[string]string{"controller": h.c.Name(), "result": "success"}); v != 1 {
		t.Errorf("reconcile_total{success} = %v, want 1", v)
	}
}

func TestErrorRequeuesWithRateLimit(t *testing.T) {
	r := newRecorder(func(_ context.Context, _ Request, n int) (Result, error) {
		if n == 0 {
			return Result{}, errors.New("transient")
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "the failing reconcile")
	receive(t, r.calls, "the retry")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	// The error asked the limiter for a delay once; the success then forgot.
	if when, forget := h.limiter.counts(reqA); when != 1 || forget != 1 {
		t.Errorf("rate limiter: When called %d times, Forget %d times; want 1 and 1", when, forget)
	}
	name := h.c.Name()
	for result, want := range map[string]float64{"error": 1, "success": 1, "requeue_after": 0} {
		if v := metricValue(t, h.reg, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": result}); v != want {
			t.Errorf("reconcile_total{%s} = %v, want %v", result, v, want)
		}
	}
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_errors_total", map[string]string{"controller": name}); v != 1 {
		t.Errorf("reconcile_errors_total = %v, want 1", v)
	}
	if v := metricValue(t, h.reg, "workqueue_retries_total", map[string]string{"name": name, "controller": name}); v != 1 {
		t.Errorf("workqueue_retries_total = %v, want 1", v)
	}
}

func TestRequeueAfterForgetsAndAddsAfter(t *testing.T) {
	const after = 20 * time.Millisecond
	var returned, again time.Time
	r := newRecorder(func(_ context.Context, _ Request, n int) (Result, error) {
		if n == 0 {
			returned = time.Now()
			return Result{RequeueAfter: after}, nil
		}
		again = time.Now()
		return Result{}, nil
	})
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "the first reconcile")
	receive(t, r.calls, "the requeued reconcile")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	// RequeueAfter is not a failure: the backoff is reset, not used.
	if when, forget := h.limiter.counts(reqA); when != 0 || forget != 2 {
		t.Errorf("rate limiter: When called %d times, Forget %d times; want 0 and 2", when, forget)
	}
	if gap := again.Sub(returned); gap < after {
		t.Errorf("requeued after %s, before RequeueAfter (%s)", gap, after)
	}
	name := h.c.Name()
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": "requeue_after"}); v != 1 {
		t.Errorf("reconcile_total{requeue_after} = %v, want 1", v)
	}
	if v := metricValue(t, h.reg, "workqueue_retries_total", map[string]string{"name": name, "controller": name}); v != 1 {
		t.Errorf("workqueue_retries_total = %v, want 1 (AddAfter counts as a retry)", v)
	}
}

func TestErrorWithRequeueAfterBacksOff(t *testing.T) {
	r := newRecorder(func(_ context.Context, _ Request, n int) (Result, error) {
		if n == 0 {
			return Result{RequeueAfter: time.Hour}, errors.New("transient")
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "the failing reconcile")
	// Were RequeueAfter honoured, the retry would come in an hour.
	receive(t, r.calls, "the retry, after the backoff rather than RequeueAfter")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if when, _ := h.limiter.counts(reqA); when != 1 {
		t.Errorf("rate limiter: When called %d times, want 1", when)
	}
}

func TestTerminalErrorIsNotRequeued(t *testing.T) {
	r := newRecorder(func(context.Context, Request, int) (Result, error) {
		return Result{}, fmt.Errorf("reconciling: %w", TerminalError(errors.New("invalid spec")))
	})
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "the reconcile")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	// A requeue would have asked the limiter for a delay.
	if when, forget := h.limiter.counts(reqA); when != 0 || forget != 1 {
		t.Errorf("rate limiter: When called %d times, Forget %d times; want 0 and 1", when, forget)
	}
	name := h.c.Name()
	for metric, want := range map[string]float64{
		"controller_runtime_terminal_reconcile_errors_total": 1,
		"controller_runtime_reconcile_errors_total":          1,
		"workqueue_retries_total":                            0,
	} {
		labels := map[string]string{"controller": name}
		if strings.HasPrefix(metric, "workqueue_") {
			labels["name"] = name
		}
		if v := metricValue(t, h.reg, metric, labels); v != want {
			t.Errorf("%s = %v, want %v", metric, v, want)
		}
	}
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_total", map[string]string{"controller": name, "result": "error"}); v != 1 {
		t.Errorf("reconcile_total{error} = %v, want 1", v)
	}
}

func TestPanicIsRecoveredLoggedAndRetried(t *testing.T) {
	var log syncBuffer
	r := newRecorder(func(_ context.Context, _ Request, n int) (Result, error) {
		if n == 0 {
			panic("kaboom")
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{Logger: textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&log)))}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "the panicking reconcile")
	receive(t, r.calls, "the retry")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	if when, _ := h.limiter.counts(reqA); when != 1 {
		t.Errorf("rate limiter: When called %d times, want 1 (a panic is retried with backoff)", when)
	}
	name := h.c.Name()
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_panics_total", map[string]string{"controller": name}); v != 1 {
		t.Errorf("reconcile_panics_total = %v, want 1", v)
	}
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_errors_total", map[string]string{"controller": name}); v != 1 {
		t.Errorf("reconcile_errors_total = %v, want 1", v)
	}
	// The log line has the panic value and the stack down to the panic,
	// which is in this file.
	out := log.String()
	for _, want := range []string{"Observed a panic in reconciler", "kaboom", "goroutine ", "controller_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not contain %q:\n%s", want, out)
		}
	}
}

func TestPanicPropagatesWhenRecoverPanicIsFalse(t *testing.T) {
	panicky := ReconcilerFunc(func(context.Context, Request) (Result, error) { panic("kaboom") })

	// Default: the panic becomes an error.
	h := newHarness(t, Options{}, panicky)
	if _, err := h.c.reconcile(context.Background(), reqA); err == nil || !strings.Contains(err.Error(), "kaboom") {
		t.Errorf("with RecoverPanic unset: err = %v, want the recovered panic", err)
	}

	off := false
	h = newHarness(t, Options{RecoverPanic: &off}, panicky)
	recovered := func() (r any) {
		defer func() { r = recover() }()
		_, _ = h.c.reconcile(context.Background(), reqA)
		return nil
	}()
	if recovered != "kaboom" {
		t.Errorf("with RecoverPanic false: recovered %v, want the reconciler's panic", recovered)
	}
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_panics_total", map[string]string{"controller": h.c.Name()}); v != 1 {
		t.Errorf("reconcile_panics_total = %v, want 1 (counted before re-panicking)", v)
	}
}

func TestReconciliationTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	var hadDeadline atomic.Bool
	var deadlineIn atomic.Int64
	r := newRecorder(func(ctx context.Context, _ Request, n int) (Result, error) {
		if n == 0 {
			d, ok := ctx.Deadline()
			hadDeadline.Store(ok)
			deadlineIn.Store(int64(time.Until(d)))
			<-ctx.Done() // a reconcile that takes too long
			return Result{}, ctx.Err()
		}
		return Result{}, nil // well within the deadline
	})
	h := newHarness(t, Options{ReconciliationTimeout: timeout}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "the reconcile that times out")
	receive(t, r.calls, "the retry")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	if d := time.Duration(deadlineIn.Load()); !hadDeadline.Load() || d > timeout {
		t.Errorf("Reconcile's context: deadline %v, %s away; want one at most %s away", hadDeadline.Load(), d, timeout)
	}
	name := h.c.Name()
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_timeouts_total", map[string]string{"controller": name}); v != 1 {
		t.Errorf("reconcile_timeouts_total = %v, want 1", v)
	}
	if when, _ := h.limiter.counts(reqA); when != 1 {
		t.Errorf("rate limiter: When called %d times, want 1 (a timed-out reconcile is retried with backoff)", when)
	}
}

func TestKeyAddedManyTimesWhileQueuedReconcilesOnce(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	r := newRecorder(func(_ context.Context, req Request, _ int) (Result, error) {
		if req == reqB {
			close(started)
			<-release
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{MaxConcurrentReconciles: 1}, r)
	h.enqueue(reqB)
	h.start(t)
	<-started
	// The only worker is busy with b: a waits in the queue while it is added
	// again and again.
	for range 100 {
		h.enqueue(reqA)
	}
	h.enqueue(sentinel)
	close(release)
	// The queue is first in, first out and there is one worker: once the
	// sentinel is reconciled, every copy of a queued before it has been too.
	for receive(t, r.calls, "the sentinel") != sentinel {
	}
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n := r.count(reqA); n != 1 {
		t.Errorf("a reconciled %d times, want 1", n)
	}
	name := h.c.Name()
	if v := metricValue(t, h.reg, "workqueue_adds_total", map[string]string{"name": name, "controller": name}); v != 3 {
		t.Errorf("workqueue_adds_total = %v, want 3 (b, a once, sentinel)", v)
	}
}

func TestKeyAddedWhileProcessingIsReconciledAgainNotConcurrently(t *testing.T) {
	var inFlight, maxInFlight atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	r := newRecorder(func(_ context.Context, req Request, n int) (Result, error) {
		if req != reqA {
			return Result{}, nil
		}
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		if n == 0 {
			close(started)
			<-release
		}
		return Result{}, nil
	})
	// Idle workers are available: only the queue can keep a second a out.
	h := newHarness(t, Options{MaxConcurrentReconciles: 4}, r)
	h.enqueue(reqA)
	h.start(t)
	<-started
	h.enqueue(reqA) // while a is being reconciled
	h.enqueue(sentinel)
	// Had the second a been handed out, it would have been handed out before
	// the sentinel.
	for receive(t, r.calls, "the sentinel") != sentinel {
	}
	if n := r.count(reqA); n != 1 {
		t.Fatalf("a reconciled %d times while its first reconcile was running, want 1", n)
	}
	close(release)
	receive(t, r.calls, "the first reconcile of a")
	receive(t, r.calls, "the second reconcile of a")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n := r.count(reqA); n != 2 {
		t.Errorf("a reconciled %d times, want 2", n)
	}
	if m := maxInFlight.Load(); m != 1 {
		t.Errorf("a was reconciled %d times at once, want 1", m)
	}
}

func TestWorkersRunDifferentKeysInParallelUpToMax(t *testing.T) {
	var inFlight, maxInFlight atomic.Int32
	started, release := make(chan Request, 3), make(chan struct{})
	r := newRecorder(func(_ context.Context, req Request, _ int) (Result, error) {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		started <- req
		<-release
		return Result{}, nil
	})
	h := newHarness(t, Options{MaxConcurrentReconciles: 2}, r)
	h.enqueue(reqA)
	h.enqueue(reqB)
	h.enqueue(reqC)
	h.start(t)
	receive(t, started, "the first reconcile")
	receive(t, started, "the second reconcile, running alongside the first")

	name := h.c.Name()
	if v := metricValue(t, h.reg, "controller_runtime_active_workers", map[string]string{"controller": name}); v != 2 {
		t.Errorf("active_workers = %v while two reconciles run, want 2", v)
	}
	if v := metricValue(t, h.reg, "controller_runtime_max_concurrent_reconciles", map[string]string{"controller": name}); v != 2 {
		t.Errorf("max_concurrent_reconciles = %v, want 2", v)
	}
	close(release)
	receive(t, started, "the third reconcile")
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if m := maxInFlight.Load(); m != 2 {
		t.Errorf("at most %d reconciles ran at once, want 2", m)
	}
	if v := metricValue(t, h.reg, "controller_runtime_active_workers", map[string]string{"controller": name}); v != 0 {
		t.Errorf("active_workers = %v after stop, want 0", v)
	}
}

func TestStartWaitsForCacheSync(t *testing.T) {
	var synced, reconciledBeforeSync atomic.Bool
	r := newRecorder(func(context.Context, Request, int) (Result, error) {
		if !synced.Load() {
			reconciledBeforeSync.Store(true)
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	h.start(t, synced.Load)
	time.AfterFunc(100*time.Millisecond, func() { synced.Store(true) })
	receive(t, r.calls, "the reconcile after the cache synced")
	if reconciledBeforeSync.Load() {
		t.Error("Reconcile ran before the cache had synced")
	}
}

func TestStartFailsIfCachesNeverSync(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newRecorder(nil)
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := h.c.Start(ctx, func() bool { return false })
	if err == nil {
		t.Fatal("Start returned nil though the cache never synced")
	}
	if n := len(r.all()); n != 0 {
		t.Errorf("%d reconciles ran without a synced cache", n)
	}
}

func TestStopBeforeCachesSyncIsNoError(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newRecorder(nil)
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := h.c.Start(ctx, func() bool { return false }); err != nil {
		t.Fatalf("a stop while waiting for the caches: %v", err)
	}
	if n := len(r.all()); n != 0 {
		t.Errorf("%d reconciles ran without a synced cache", n)
	}
}

func TestStartTwiceFails(t *testing.T) {
	r := newRecorder(nil)
	h := newHarness(t, Options{}, r)
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "a reconcile, so Start is running")
	if err := h.c.Start(context.Background()); err == nil {
		t.Error("second Start while running: no error")
	}
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := h.c.Start(context.Background()); err == nil {
		t.Error("Start after a Start returned: no error")
	}
}

func TestShutdownLetsInFlightReconcileFinish(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started, release := make(chan struct{}), make(chan struct{})
	var ctxErrAtEnd atomic.Value
	r := newRecorder(func(ctx context.Context, req Request, _ int) (Result, error) {
		if req == reqA {
			close(started)
			<-release
			ctxErrAtEnd.Store(fmt.Sprint(ctx.Err()))
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{MaxConcurrentReconciles: 1}, r)
	h.enqueue(reqA)
	h.start(t)
	<-started
	// b and c are queued behind a: they are not in flight.
	h.enqueue(reqB)
	h.enqueue(reqC)
	h.cancel()

	select {
	case err := <-h.done:
		t.Fatalf("Start returned (%v) while a reconcile was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}

	if got := ctxErrAtEnd.Load(); got != "<nil>" {
		t.Errorf("in-flight Reconcile's context error at shutdown = %v, want none", got)
	}
	if got := r.all(); len(got) != 1 || got[0] != reqA {
		t.Errorf("reconciled %v, want only the in-flight a", got)
	}
	if when, forget := h.limiter.counts(reqA); when != 0 || forget != 1 {
		t.Errorf("in-flight reconcile was not finished normally: When %d, Forget %d; want 0 and 1", when, forget)
	}
}

func TestShutdownTimeoutCancelsAndReturnsError(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	started := make(chan struct{})
	ctxErr := make(chan error, 1)
	r := newRecorder(func(ctx context.Context, _ Request, _ int) (Result, error) {
		close(started)
		<-ctx.Done() // stuck until cancelled
		ctxErr <- ctx.Err()
		return Result{}, ctx.Err()
	})
	h := newHarness(t, Options{ShutdownTimeout: 100 * time.Millisecond, ReconciliationTimeout: time.Hour}, r)
	h.enqueue(reqA)
	h.start(t)
	<-started
	err := h.stop(t)
	if err == nil || !strings.Contains(err.Error(), "shutdown timeout") {
		t.Fatalf("Start returned %v, want the shutdown timeout error", err)
	}
	if got := receive(t, ctxErr, "the stuck reconcile to see its context cancelled"); !errors.Is(got, context.Canceled) {
		t.Errorf("stuck reconcile's context error = %v, want context.Canceled", got)
	}
	receive(t, r.calls, "the stuck reconcile to return")
	if errors.Is(err, ErrStillRunning) {
		t.Errorf("Start returned %v: the reconcile returned once cancelled, so nothing is still running", err)
	}
	// Cancellation at the shutdown bound is not a reconcile timeout.
	if v := metricValue(t, h.reg, "controller_runtime_reconcile_timeouts_total", map[string]string{"controller": h.c.Name()}); v != 0 {
		t.Errorf("reconcile_timeouts_total = %v, want 0", v)
	}
}

// TestReconcileIgnoringItsContextIsStillRunning: a reconcile that goes on
// after its context is cancelled at the shutdown timeout is reported as
// still running, so that the Lease its writes depend on is kept.
func TestReconcileIgnoringItsContextIsStillRunning(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	r := newRecorder(func(ctx context.Context, _ Request, _ int) (Result, error) {
		close(started)
		<-release // deaf to ctx
		return Result{}, nil
	})
	h := newHarness(t, Options{ShutdownTimeout: 100 * time.Millisecond, ReconciliationTimeout: time.Hour}, r)
	h.enqueue(reqA)
	h.start(t)
	<-started
	// Start returns while the reconcile still runs: it is released only
	// after.
	err := h.stop(t)
	if !errors.Is(err, ErrStillRunning) {
		t.Errorf("Start returned %v, want ErrStillRunning", err)
	}
	close(release)
	receive(t, r.calls, "the deaf reconcile to return")
}

func TestWatchArgumentsAndTiming(t *testing.T) {
	r := newRecorder(nil)
	h := newHarness(t, Options{}, r)
	inf := newConfigMapInformer(t)
	if err := h.c.Watch(nil, EnqueueObject()); err == nil {
		t.Error("Watch with a nil informer: no error")
	}
	if err := h.c.Watch(inf, nil); err == nil {
		t.Error("Watch with a nil handler: no error")
	}
	h.enqueue(reqA)
	h.start(t)
	receive(t, r.calls, "a reconcile, so Start is running")
	// Start has taken the list of watches: a later one would never be
	// connected, so Watch refuses it.
	if err := h.c.Watch(inf, EnqueueObject()); err == nil {
		t.Error("Watch after Start: no error")
	}
}
