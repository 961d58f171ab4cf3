package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Request names the object to reconcile. It is an alias rather than a new
// type so that it stays a plain comparable struct: the workqueue uses it as a
// map key, which is how it de-duplicates.
type Request = types.NamespacedName

// Result tells the controller what to do after a Reconcile that returned no
// error.
type Result struct {
	// RequeueAfter, when positive, reconciles the same Request again after
	// this delay, for example to poll something that sends no events. It is
	// ignored when Reconcile returns an error: errors back off instead.
	RequeueAfter time.Duration
}

// Reconciler drives the object named by a Request towards its desired state.
// It is called with the key only: it reads the current object from a cache
// (which may have changed since the event) and must be idempotent.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// ReconcilerFunc lets a plain function be a Reconciler.
type ReconcilerFunc func(ctx context.Context, req Request) (Result, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// Options configure a Controller. Only Name is required.
type Options struct {
	// Name identifies the controller in logs, and is the "controller" label
	// of its metrics and the "name" of its workqueue. Keep it unique per
	// Registerer: two controllers of the same name would share series.
	Name string

	// MaxConcurrentReconciles is the number of workers. Different keys are
	// reconciled in parallel; one key never is. Default 1.
	MaxConcurrentReconciles int

	// Predicates are applied to every Watch, before its own: with --shards
	// on an API server that cannot narrow the caches, they keep a range's
	// controller to the objects of its range.
	Predicates []Predicate

	// Keep, when set, is asked of each key as a worker takes it: one it
	// refuses is dropped without a reconcile. With --shards a range's
	// controller keeps only its range's WebApps: the predicates cannot
	// always tell at the event (a referenced ConfigMap maps to WebApps of
	// any range), and a WebApp deleted and made again under its name may
	// now belong to another range.
	Keep func(Request) bool

	// RateLimiter decides how long a key waits before a retry after an
	// error. Default DefaultRateLimiter().
	RateLimiter workqueue.TypedRateLimiter[Request]

	// ReconciliationTimeout, when positive, is a deadline on the context of
	// each Reconcile call. Zero means no deadline.
	ReconciliationTimeout time.Duration

	// RecoverPanic turns a panic in Reconcile into an error (logged with its
	// stack and retried with backoff). Default true; false lets the panic
	// crash the process, after it has been counted.
	RecoverPanic *bool

	// ShutdownTimeout bounds how long Start waits, after its context ends,
	// for reconciles already running. Default 30s.
	ShutdownTimeout time.Duration

	// Registerer receives the controller's metrics and its workqueue's
	// metrics. Nil: the controller's metrics are not exported, and its
	// workqueue reports to client-go's process-global provider (see
	// RegisterWorkqueueMetrics).
	Registerer prometheus.Registerer

	// Journal, when set, records the start and end of every reconcile.
	Journal Journal

	// IsUnavailable tells a reconcile error that means the API server is
	// unavailable. While reconciles keep failing so, every worker pauses
	// before its next reconcile, for 250ms doubling up to 10s, until one
	// succeeds. Default APIUnavailable; a function that always returns
	// false leaves only the per-key backoff.
	IsUnavailable func(error) bool

	// Logger is the base logger; "controller"=Name is added. The zero
	// Logger means klog.Background(). (logr.Discard() is that zero Logger
	// too: to silence the controller, give it a logger that writes nowhere.)
	Logger klog.Logger
}

// DefaultRateLimiter is the backoff used when Options.RateLimiter is nil, the
// same as client-go's DefaultTypedControllerRateLimiter: the larger of a
// per-key exponential backoff (5ms, 10ms, 20ms, … up to 1000s) and an overall
// token bucket (10 retries per second, bursts of 100) shared by all keys.
//
// controller-runtime v0.25 uses the same limiter when its priority queue is
// turned off; with its default priority queue it keeps only the per-key part.
func DefaultRateLimiter() workqueue.TypedRateLimiter[Request] {
	return workqueue.DefaultTypedControllerRateLimiter[Request]()
}

// Controller connects informers to a Reconciler through a rate-limited
// workqueue with two priorities: live changes are reconciled before the
// initial list and resyncs (priorityqueue.go). Build it with New, add event
// sources with Watch, then run it with Start.
type Controller struct {
	name            string
	reconciler      Reconciler
	workers         int
	rateLimiter     workqueue.TypedRateLimiter[Request]
	timeout         time.Duration
	recoverPanic    bool
	shutdownTimeout time.Duration
	journal         Journal
	isUnavailable   func(error) bool
	unavailable     *unavailability
	logger          klog.Logger
	predicates      []Predicate // Options.Predicates, before each Watch's own
	keep            func(Request) bool
	metrics         *controllerMetrics
	// queueMetrics is nil when Options.Registerer is nil: the workqueue then
	// falls back to client-go's global provider.
	queueMetrics workqueue.MetricsProvider

	// mu guards the fields below, which Watch and Start share.
	mu      sync.Mutex
	started bool
	watches []watch // Watch calls, connected by Start
}

// watch is one Watch call, kept until Start connects it.
type watch struct {
	informer   cache.SharedInformer
	handler    Handler
	predicates []Predicate
}

// errReconciliationTimeout is the cause attached to the per-reconcile
// deadline, so that our deadline can be told apart from any other.
var errReconciliationTimeout = errors.New("reconciliation timeout")

// New checks opts, fills in defaults and registers the metrics. It starts
// nothing: no goroutine runs until Start.
func New(opts Options, r Reconciler) (*Controller, error) {
	if opts.Name == "" {
		return nil, errors.New("controller: Options.Name is required")
	}
	if r == nil {
		return nil, fmt.Errorf("controller %q: a Reconciler is required", opts.Name)
	}

	c := &Controller{
		name:            opts.Name,
		reconciler:      r,
		workers:         opts.MaxConcurrentReconciles,
		rateLimiter:     opts.RateLimiter,
		timeout:         opts.ReconciliationTimeout,
		recoverPanic:    opts.RecoverPanic == nil || *opts.RecoverPanic,
		shutdownTimeout: opts.ShutdownTimeout,
		journal:         opts.Journal,
		isUnavailable:   opts.IsUnavailable,
		logger:          opts.Logger,
		predicates:      slices.Clone(opts.Predicates),
		keep:            opts.Keep,
	}
	if c.isUnavailable == nil {
		c.isUnavailable = APIUnavailable
	}
	if c.workers <= 0 {
		c.workers = 1
	}
	if c.rateLimiter == nil {
		c.rateLimiter = DefaultRateLimiter()
	}
	if c.shutdownTimeout <= 0 {
		c.shutdownTimeout = 30 * time.Second
	}
	if c.logger.GetSink() == nil {
		c.logger = klog.Background()
	}
	c.logger = c.logger.WithValues("controller", c.name)
	c.unavailable = &unavailability{logger: c.logger}

	var err error
	if c.metrics, err = newControllerMetrics(opts.Registerer); err != nil {
		return nil, fmt.Errorf("controller %q: registering metrics: %w", c.name, err)
	}
	if opts.Registerer != nil {
		wq, err := newWorkqueueMetrics(opts.Registerer)
		if err != nil {
			return nil, fmt.Errorf("controller %q: registering workqueue metrics: %w", c.name, err)
		}
		c.queueMetrics = wq
	}
	return c, nil
}

// Name returns Options.Name.
func (c *Controller) Name() string { return c.name }

// Watch asks Start to connect informer to this controller: each event passes
// the predicates (all must agree), then h turns it into Requests. Handlers
// only enqueue; all work happens in Reconcile. Call Watch before Start.
func (c *Controller) Watch(informer cache.SharedInformer, h Handler, preds ...Predicate) error {
	if informer == nil || h == nil {
		return fmt.Errorf("controller %q: Watch needs an informer and a handler", c.name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("controller %q: Watch called after Start", c.name)
	}
	c.watches = append(c.watches, watch{informer: informer, handler: h, predicates: append(slices.Clone(c.predicates), preds...)})
	return nil
}

// ErrStillRunning is wrapped by Start's error when reconciles were still
// running after Options.ShutdownTimeout and did not return once their
// context was cancelled. One that ignores its context may still write:
// whoever holds a Lease for this controller must keep it, not release it,
// and exit (leader.ErrWorkStillRunning).
var ErrStillRunning = errors.New("reconciles still running after the shutdown timeout")

// Start runs the controller and blocks until ctx is done:
//
//  1. create the workqueue and connect every Watch to it;
//  2. wait until every function in synced reports true and every watched
//     informer has delivered its initial list to us (an error if ctx's
//     deadline passes first; nil if ctx is cancelled, a stop during
//     start-up), so that Reconcile never reads a half-filled cache;
//  3. start MaxConcurrentReconciles workers;
//  4. when ctx is done, disconnect the informers, stop taking new keys, and
//     wait for the reconciles already running.
//
// Those running reconciles are not cancelled by ctx: they keep a live
// context so that their writes complete. If they are still running after
// ShutdownTimeout, their context is cancelled and Start returns an error
// without waiting further. (controller-runtime instead hands Reconcile the
// Start context itself, so in-flight work sees cancellation at once.)
//
// A controller starts once; a second Start returns an error.
func (c *Controller) Start(ctx context.Context, synced ...cache.InformerSynced) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return fmt.Errorf("controller %q: Start called more than once", c.name)
	}
	c.started = true

	// Step 1. The queue is made here, not in New, because a workqueue starts
	// goroutines as soon as it exists: a controller that is built but never
	// started then leaks nothing. It is client-go's rate-limiting workqueue
	// with priorities (priorityqueue.go): live changes before the initial
	// list and resyncs.
	queue := newPriorityWorkqueue(c.name, c.rateLimiter, c.queueMetrics)
	watches := c.watches
	c.watches = nil
	c.mu.Unlock()

	logger := c.logger
	logger.Info("Starting controller")
	ctx = klog.NewContext(ctx, logger)

	// Whatever way Start returns, the informers stop feeding the queue and
	// the queue's goroutines end. Shutting a queue down twice is harmless.
	var connected []connection
	defer func() {
		disconnect(connected)
		queue.ShutDown()
	}()
	for _, w := range watches {
		reg, err := w.informer.AddEventHandler(&eventHandler{
			ctx: ctx, handler: w.handler, predicates: w.predicates, queue: queue, logger: logger,
		})
		if err != nil {
			return fmt.Errorf("controller %q: adding event handler: %w", c.name, err)
		}
		connected = append(connected, connection{informer: w.informer, registration: reg})
		// A registration has synced once the informer's initial list has
		// been delivered to this handler, which is later than the informer's
		// own HasSynced.
		synced = append(synced, reg.HasSynced)
	}

	// Step 2. Poll the functions until all are true. Every 10 ms, not
	// client-go's WaitForCacheSync 100 ms: after a failover the replayed
	// caches are usually complete within a few milliseconds, and the poll
	// interval is what a new leader waits before its first reconcile.
	logger.Info("Waiting for caches to sync")
	if !waitForSync(ctx, synced) {
		// A deadline on ctx bounds the sync: missing it is a failure. A
		// cancellation is a stop during start-up, which is not.
		if errors.Is(ctx.Err(), context.Canceled) {
			logger.Info("Stopped before the caches synced")
			return nil
		}
		return fmt.Errorf("controller %q: caches did not sync before the deadline: %w", c.name, ctx.Err())
	}

	// Step 3. Workers reconcile under workCtx: it carries ctx's values (the
	// logger) but not its cancellation, which is the shutdown signal; it is
	// cancelled only if the shutdown bound is hit.
	c.metrics.init(c.name, c.workers)
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var workers sync.WaitGroup
	logger.Info("Starting workers", "count", c.workers)
	for range c.workers {
		workers.Go(func() {
			for c.processNextWorkItem(ctx, workCtx, queue) {
			}
		})
	}

	// Step 4. Stop: no new events, no new keys, then wait (bounded) for the
	// reconciles in flight.
	<-ctx.Done()
	logger.Info("Stopping: waiting for in-flight reconciles", "timeout", c.shutdownTimeout)
	disconnect(connected)
	connected = nil
	queue.ShutDown() // wakes idle workers; busy ones see it after their reconcile
	return c.drain(logger, &workers, cancelWork)
}

// drain waits for the workers to finish the reconciles in flight, at most
// the shutdown timeout; then it cancels their context and waits cancelWait
// more for them to return, before it gives up on them.
func (c *Controller) drain(logger klog.Logger, workers *sync.WaitGroup, cancelWork context.CancelFunc) error {
	defer c.queueStopped()
	finished := make(chan struct{})
	go func() {
		workers.Wait()
		close(finished)
	}()
	timer := time.NewTimer(c.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-finished:
		logger.Info("All workers finished")
		return nil
	case <-timer.C:
		cancelWork()
	}
	// A reconcile that honours its context returns at once now, and its
	// writes are over; one that does not may write later.
	select {
	case <-finished:
		return fmt.Errorf("controller %q: reconciles cancelled at the shutdown timeout of %s", c.name, c.shutdownTimeout)
	case <-time.After(cancelWait):
		return fmt.Errorf("controller %q: %w of %s, %s after their context was cancelled", c.name, ErrStillRunning, c.shutdownTimeout, cancelWait)
	}
}

// cancelWait is how long drain waits, after the shutdown timeout, for the
// reconciles whose context it cancelled to return.
const cancelWait = time.Second

// queueStopped zeroes the stopped queue's gauges in whichever provider it
// reported to (workqueueMetrics.stopped says why).
func (c *Controller) queueStopped() {
	m, _ := c.queueMetrics.(*workqueueMetrics)
	if m == nil {
		m = globalWorkqueueMetrics.Load()
	}
	if m != nil {
		m.stopped(c.name)
	}
}

// connection is one event handler added to an informer by Start.
type connection struct {
	informer     cache.SharedInformer
	registration cache.ResourceEventHandlerRegistration
}

// disconnect removes Start's event handlers, so that a stopped controller
// leaves nothing behind on informers that other controllers keep using.
func disconnect(connected []connection) {
	for _, c := range connected {
		// The only error is an unknown registration, which cannot happen here.
		_ = c.informer.RemoveEventHandler(c.registration)
	}
}

// processNextWorkItem takes one key off the queue and reconciles it. It
// returns false when the worker should exit.
func (c *Controller) processNextWorkItem(stopCtx, workCtx context.Context, queue *priorityWorkqueue) bool {
	// Get blocks until a key is ready, the highest priority first. While this
	// worker holds the key, the queue hands it to no other worker; an Add
	// meanwhile only marks it dirty, and it is queued again at Done. That is
	// why one key is never reconciled twice at the same time.
	req, prio, shutdown := queue.GetWithPriority()
	if shutdown {
		return false
	}
	defer queue.Done(req)

	// After ShutDown, Get still hands out keys that were waiting. Once we
	// are stopping we leave them: they are not in-flight work.
	if stopCtx.Err() != nil {
		return false
	}
	if c.keep != nil && !c.keep(req) {
		queue.Forget(req)
		return true
	}

	// While the API server is unavailable, no worker starts a reconcile
	// before the shared pause is over. A stop during the pause leaves the
	// key, as above.
	if !c.unavailable.wait(stopCtx) {
		return false
	}

	active := c.metrics.activeWorkers.WithLabelValues(c.name)
	active.Inc()
	defer active.Dec()

	c.reconcileHandler(workCtx, queue, req, prio)
	return true
}

// Label values of controller_runtime_reconcile_total{result}, as in
// controller-runtime.
const (
	labelSuccess      = "success"
	labelError        = "error"
	labelRequeueAfter = "requeue_after"
	// labelRequeue counts controller-runtime's deprecated Result.Requeue,
	// which Result does not have: the series is created at 0 and stays there,
	// so that dashboards summing over all results keep working.
	labelRequeue = "requeue"
)

// reconcileHandler calls the Reconciler for req, which was queued at prio,
// and acts on the outcome. A retry or a RequeueAfter keeps prio, as in
// controller-runtime: an initial-list key that fails retries behind live
// changes, and a live change that fails does not wait behind the backlog.
func (c *Controller) reconcileHandler(ctx context.Context, queue *priorityWorkqueue, req Request, prio Priority) {
	start := time.Now()
	defer func() {
		c.metrics.reconcileTime.WithLabelValues(c.name).Observe(time.Since(start).Seconds())
	}()

	// Every log line of this reconcile, ours and the Reconciler's (through
	// klog.FromContext), names the object and a unique reconcile ID.
	logger := c.logger.WithValues("object", klog.KRef(req.Namespace, req.Name), "reconcileID", uuid.NewUUID())
	ctx = klog.NewContext(ctx, logger)

	var end func(error)
	if c.journal != nil {
		end = c.journal.Begin(c.name, req)
	}
	result, err := c.reconcile(ctx, req)
	if end != nil {
		end(err)
	}
	if err != nil && c.isUnavailable(err) {
		c.unavailable.failed(start)
	} else {
		c.unavailable.answered()
	}
	switch {
	case err != nil:
		if IsTerminal(err) {
			// Retrying cannot help. Forget also drops the key's backoff,
			// which would otherwise be kept for as long as the process runs.
			c.metrics.terminalErrors.WithLabelValues(c.name).Inc()
			queue.Forget(req)
		} else {
			// Retry after the rate limiter's delay, which grows with every
			// consecutive failure of this key.
			queue.AddRateLimitedWithPriority(req, prio)
		}
		c.metrics.reconcileErrors.WithLabelValues(c.name).Inc()
		c.metrics.reconcileTotal.WithLabelValues(c.name, labelError).Inc()
		if result.RequeueAfter > 0 {
			logger.Info("Warning: Reconcile returned both an error and RequeueAfter; RequeueAfter is ignored")
		}
		logger.Error(err, "Reconciler error")
	case result.RequeueAfter > 0:
		// Success, with a request to look again later: reset the backoff,
		// then add the key back once the delay has passed.
		queue.Forget(req)
		queue.AddAfterWithPriority(req, result.RequeueAfter, prio)
		c.metrics.reconcileTotal.WithLabelValues(c.name, labelRequeueAfter).Inc()
		logger.V(5).Info("Reconcile done, requeueing", "after", result.RequeueAfter)
	default:
		// Success: reset the backoff. The key comes back only with a new event.
		queue.Forget(req)
		c.metrics.reconcileTotal.WithLabelValues(c.name, labelSuccess).Inc()
		logger.V(5).Info("Reconcile successful")
	}
}

// reconcile calls the Reconciler with the two guards around it: the
// per-reconcile deadline and panic recovery.
func (c *Controller) reconcile(ctx context.Context, req Request) (result Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.metrics.reconcilePanics.WithLabelValues(c.name).Inc()
			if !c.recoverPanic {
				panic(r)
			}
			// Without the stack a recovered panic is nearly impossible to
			// find, so it goes into the log line.
			klog.FromContext(ctx).Error(nil, "Observed a panic in reconciler", "panic", r, "stacktrace", string(debug.Stack()))
			err = fmt.Errorf("panic: %v [recovered]", r)
		}
	}()

	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout, errReconciliationTimeout)
		defer cancel()
	}

	result, err = c.reconciler.Reconcile(ctx, req)

	// Count a timeout only if our own deadline fired, not if the parent
	// context was cancelled (as at the shutdown bound). The result is then
	// handled as returned; a Reconciler that honours its context returns
	// the context's error, which is retried with backoff.
	if c.timeout > 0 && ctx.Err() == context.DeadlineExceeded && errors.Is(context.Cause(ctx), errReconciliationTimeout) {
		c.metrics.reconcileTimeouts.WithLabelValues(c.name).Inc()
	}
	return result, err
}

// waitForSync reports whether every function in synced returned true before
// ctx ended.
func waitForSync(ctx context.Context, synced []cache.InformerSynced) bool {
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}
