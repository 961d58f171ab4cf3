package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/server"
)

// ErrLeaseLost is returned by Run when this replica stopped being the leader
// without being asked to: it could not renew the Lease within the renew
// deadline, or another replica holds it. The caller must exit non-zero at
// once, without waiting for the work to drain (see Run).
var ErrLeaseLost = errors.New("leader election lost")

// ErrCallbackReturned is returned by Run when onStartedLeading returned while
// this replica still led and Run's context was live: the leader's work ended
// on its own, so the Lease is released (a standby takes over) and the
// process should exit non-zero, as the Manager does when a runnable fails.
// Run joins it with the callback's error, if any.
var ErrCallbackReturned = errors.New("leader election: the leader's work returned while still leading")

// ErrWorkStillRunning, wrapped in the error onStartedLeading returns, says
// that some of the work it started is still running (a reconcile that
// outlived its drain timeout). Run then stops renewing but keeps the Lease,
// so that no standby leads until it expires, a lease duration after the
// last renewal; the caller must exit before that. controller-runtime
// releases the Lease in that case too (docs/manager.md).
var ErrWorkStillRunning = errors.New("leader election: the leader's work is still running")

// The Lease client's own limits. A Lease costs at most two requests (get,
// update) per retry period, far below this; what matters is that the bucket
// is not the one the controllers and informers drain.
const (
	leaseClientQPS   = 5
	leaseClientBurst = 10
)

// healthTolerance is how long past the lease duration the health check keeps
// passing while the leader has not renewed: the 20 s of kube-controller-manager
// and kube-scheduler. A healthy leader that cannot renew exits long before
// (Run returns ErrLeaseLost); the check catches a process too stuck to exit.
const healthTolerance = 20 * time.Second

// Elector runs client-go's LeaderElector on one Lease for one process. Build
// it with New; call Run once.
type Elector struct {
	opts    Options // resolved: LeaseNamespace and Identity set when Enabled
	config  *rest.Config
	lock    *resourcelock.LeaseLock
	health  *leaderelection.HealthzAdaptor
	elected chan struct{}
	started atomic.Bool
}

// New validates opts and prepares an Elector: its own rest.Config and Lease
// client, the identity and namespace, and the leader election metrics in reg
// (nil: not registered anywhere). It does not contact the API server. With
// opts.Enabled false, cfg may be nil.
func New(cfg *rest.Config, opts Options, reg prometheus.Registerer) (*Elector, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Elector{
		opts:    opts,
		health:  leaderelection.NewLeaderHealthzAdaptor(healthTolerance),
		elected: make(chan struct{}),
	}
	if !opts.Enabled {
		return e, nil
	}
	if cfg == nil {
		return nil, errors.New("leader election: no rest.Config")
	}
	if e.opts.LeaseNamespace == "" {
		e.opts.LeaseNamespace = DefaultNamespace()
	}
	if e.opts.Identity == "" {
		id, err := NewIdentity()
		if err != nil {
			return nil, err
		}
		e.opts.Identity = id
	}
	if err := registerMetrics(reg); err != nil {
		return nil, fmt.Errorf("registering the leader election metrics: %w", err)
	}

	e.config = ClientConfig(cfg, opts, "leader-election")
	client, err := coordinationv1.NewForConfig(e.config)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	e.lock = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.opts.LeaseNamespace, Name: e.opts.LeaseName},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.opts.Identity},
	}
	return e, nil
}

// ClientConfig is the rest.Config of a client that keeps Leases renewed:
// leader election's, and the shard membership's (user agent suffix agent).
// It is cfg with, so that the controllers' traffic cannot starve renewals:
//   - a client-side rate limiter of its own: a shared one, drained by a
//     burst of reconciles or an informer relist, would queue a renewal
//     behind them (RateLimiter is cleared: CopyConfig copies a shared one);
//   - a timeout of its own, Options.RequestTimeout (one retry period): one
//     hung request must not use up the whole deadline, and the answer to
//     the last renewal the API server accepted arrives at most that late,
//     which Validate counts in (the controllers may run with no timeout at
//     all, --kube-api-timeout=0);
//   - its own user agent (the caller's + "/" + agent), so its requests are
//     told apart in the API server's logs and audit.
func ClientConfig(cfg *rest.Config, opts Options, agent string) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c.UserAgent += "/" + agent
	c.RateLimiter = nil
	c.QPS = leaseClientQPS
	c.Burst = leaseClientBurst
	c.Timeout = opts.RequestTimeout()
	return c
}

// Identity is the holderIdentity this replica writes into the Lease (empty
// when leader election is disabled).
func (e *Elector) Identity() string { return e.opts.Identity }

// Elected is closed when this replica becomes the leader, just before
// onStartedLeading is called (at once when leader election is disabled); it
// replaces mgr.Elected(). It is never closed on a replica that stops before
// leading.
func (e *Elector) Elected() <-chan struct{} { return e.elected }

// HealthCheck is a liveness check, named "leader-election", built on
// client-go's HealthzAdaptor: it fails when this replica leads but has not
// renewed the Lease for the lease duration plus 20 s, that is when the
// process should have exited on a lost lease and did not. Standbys, and a
// process whose Run has not started, pass.
func (e *Elector) HealthCheck() server.Check {
	return server.Check{Name: "leader-election", Check: func(r *http.Request) error { return e.health.Check(r) }}
}

// Run takes part in the election until ctx ends or leadership is lost. It
// may be called once.
//
// When this replica wins, Elected is closed and onStartedLeading runs with a
// context that ends when ctx ends or leadership is lost. onStartedLeading
// must block until the work it started has stopped: the Lease is released
// only after it returns, so a standby never runs while this replica's writes
// are in flight. Its error is returned by Run (so the caller shares no
// variable with the callback's goroutine).
//
// Run returns:
//   - after ctx ends, the error onStartedLeading returned (nil if it did not
//     run): it has returned, and the Lease was released if
//     Options.ReleaseOnCancel (a failed release is logged; the standby then
//     waits out the lease duration), unless that error wraps
//     ErrWorkStillRunning: then the Lease is kept until it expires, and
//     the caller must exit at once;
//   - ErrLeaseLost (wrapped) as soon as the leader fails to renew, even
//     while onStartedLeading is still running. Nothing can fence the
//     controllers' in-flight writes, so the caller must exit non-zero
//     immediately rather than wait for them: a standby may take the Lease
//     over one lease duration after the last renewal;
//   - ErrCallbackReturned, joined with onStartedLeading's error, when it
//     returned while ctx was live and the Lease held (the Lease is released
//     first, or kept as above).
//
// With leader election disabled, Run closes Elected and calls
// onStartedLeading(ctx) at once, then returns as above.
func (e *Elector) Run(ctx context.Context, onStartedLeading func(ctx context.Context) error) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("leader election: Run called twice")
	}
	if !e.opts.Enabled {
		close(e.elected)
		err := onStartedLeading(ctx)
		if ctx.Err() == nil {
			return errors.Join(ErrCallbackReturned, err)
		}
		return err
	}

	logger := klog.FromContext(ctx).WithValues("lease", e.lock.Describe(), "identity", e.opts.Identity)
	// The elector runs on a context of its own, cancelled only by us: while
	// the work drains after ctx ends, the leader must go on renewing.
	// context.WithoutCancel keeps ctx's values (the logger).
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()

	t := &term{workEnded: make(chan workResult, 1)}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		LeaseDuration: e.opts.LeaseDuration,
		RenewDeadline: e.opts.RenewDeadline,
		RetryPeriod:   e.opts.RetryPeriod,
		Name:          e.opts.LeaseName,
		// We release the Lease ourselves (release, below) instead of
		// client-go's ReleaseOnCancel. client-go also tries to release after
		// a failed renewal and calls OnStoppedLeading only when that try
		// ends, which against a hung API server takes up to another request
		// timeout: too late to exit before a standby takes over. Without it,
		// LeaderElector.Run returns as soon as renewal gives up.
		ReleaseOnCancel: false,
		Callbacks:       e.callbacks(ctx, logger, t, onStartedLeading),
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err) // Validate should have caught it
	}
	e.health.SetLeaderElection(le)

	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.Run(electorCtx)
	}()
	workErr, err := e.end(ctx, logger, t, electorDone)
	if err != nil {
		return err
	}
	e.stop(logger, stopElector, electorDone, workErr)
	return workErr
}

// term is one Run's state, shared between Run and the goroutine client-go
// runs OnStartedLeading in.
type term struct {
	mu       sync.Mutex
	stopping bool // ctx ended: work that has not started must not start
	working  bool // onStartedLeading was called
	// workEnded receives, when onStartedLeading returns, its error and
	// whether leadership had ended by then.
	workEnded chan workResult
}

// callbacks are client-go's callbacks for one Run: the work starts on
// leading, unless ctx has ended, and its end is sent to t.workEnded.
func (e *Elector) callbacks(ctx context.Context, logger klog.Logger, t *term, onStartedLeading func(context.Context) error) leaderelection.LeaderCallbacks {
	return leaderelection.LeaderCallbacks{
		// leading ends when renewal gives up or the elector's context
		// ends. It runs in a goroutine of client-go's.
		OnStartedLeading: func(leading context.Context) {
			t.mu.Lock()
			if t.stopping {
				t.mu.Unlock()
				return
			}
			t.working = true
			t.mu.Unlock()
			logger.Info("Became the leader")
			close(e.elected)
			workCtx, cancel := context.WithCancel(leading)
			stopOnCtx := context.AfterFunc(ctx, cancel)
			err := onStartedLeading(workCtx)
			stopOnCtx()
			cancel()
			t.workEnded <- workResult{err: err, leadershipEnded: leading.Err() != nil}
		},
		// Called on every exit of LeaderElector.Run, lost lease or graceful
		// stop alike, even if this replica never led. Run tells them apart:
		// the elector stops on its own (its context still live) only when
		// renewal failed.
		OnStoppedLeading: func() {},
		OnNewLeader: func(identity string) {
			if identity != e.opts.Identity {
				logger.Info("Observed a new leader", "leader", identity)
			}
		},
	}
}

// end waits for the term to end: ctx ending (then for the work, if it
// started), the work returning, or the elector stopping on its own. It
// returns the work's error, joined with ErrCallbackReturned when it
// returned while leading; or, in err, ErrLeaseLost when leadership was
// lost, for Run to return at once without releasing anything.
func (e *Elector) end(ctx context.Context, logger klog.Logger, t *term, electorDone <-chan struct{}) (workErr, err error) {
	lost := func() error {
		logger.Error(nil, "Lost the leader lease; stopping at once")
		return fmt.Errorf("%w: lease %s not renewed by %s", ErrLeaseLost, e.lock.Describe(), e.opts.Identity)
	}
	select {
	case <-electorDone:
		return nil, lost()
	case work := <-t.workEnded:
		if ctx.Err() == nil {
			if work.leadershipEnded {
				return nil, lost()
			}
			logger.Error(work.err, "The leader's work returned while still leading")
			return errors.Join(ErrCallbackReturned, work.err), nil
		}
		// ctx ended and the work has already stopped: a graceful stop.
		return work.err, nil
	case <-ctx.Done():
		t.mu.Lock()
		t.stopping = true
		wasWorking := t.working
		t.mu.Unlock()
		if !wasWorking {
			return nil, nil
		}
		logger.Info("Stopping: waiting for the leader's work to end before releasing the lease")
		select {
		case work := <-t.workEnded:
			return work.err, nil
		case <-electorDone:
			return nil, lost() // lost while draining
		}
	}
}

// workResult is how onStartedLeading ended.
type workResult struct {
	err             error
	leadershipEnded bool
}

// stop ends the elector and, with ReleaseOnCancel, releases the Lease,
// unless workErr says that some of the work is still running.
func (e *Elector) stop(logger klog.Logger, stopElector context.CancelFunc, electorDone <-chan struct{}, workErr error) {
	stopElector()
	<-electorDone
	// The elector no longer renews: a stopped process is not an unhealthy
	// leader.
	e.health.SetLeaderElection(nil)
	leaderGauge.WithLabelValues(e.opts.LeaseName).Set(0)
	if !e.opts.ReleaseOnCancel {
		return
	}
	if errors.Is(workErr, ErrWorkStillRunning) {
		logger.Error(workErr, "Keeping the lease: the leader's work has not stopped; a standby takes over when it expires")
		return
	}
	released, err := e.release()
	switch {
	case err != nil:
		logger.Error(err, "Could not release the lease; a standby takes over when it expires")
	case released:
		logger.Info("Released the lease")
	}
}

// release empties the Lease if this replica holds it, as client-go's
// LeaderElector.release does: no holder and a one-second duration, so a
// standby acquires it at its next retry. It runs after the elector stopped,
// so nothing else uses the lock. A conflict (a renewal cancelled on the
// client that the server still applied) is retried on a fresh read.
func (e *Elector) release() (released bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.RenewDeadline)
	defer cancel()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		released = false
		record, _, err := e.lock.Get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if record.HolderIdentity != e.opts.Identity {
			return nil // never acquired, or already taken over
		}
		now := metav1.NewTime(time.Now())
		if err := e.lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaseDurationSeconds: 1,
			LeaderTransitions:    record.LeaderTransitions,
			AcquireTime:          now,
			RenewTime:            now,
		}); err != nil {
			return err
		}
		released = true
		return nil
	})
	return released, err
}
