package controller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
)

// The backoff all workers share while the API server is unavailable: it
// doubles from unavailableBase to unavailableCap, so that an outage of any
// length costs a few requests per worker per cap, and a recovered API
// server waits at most unavailableCap for the next reconcile.
const (
	unavailableBase = 250 * time.Millisecond
	unavailableCap  = 10 * time.Second
)

// APIUnavailable reports whether err says that the API server itself could
// not be reached or could not serve the request, rather than that this
// request failed: a refused, reset, dropped or timed-out connection, or an
// answer of 429 (after client-go's own retries), 503, 504, or 500 from the
// API server's own machinery (etcd, a panic). It is the default
// Options.IsUnavailable.
//
// A 500 that a webhook caused is not the API server being down, and it is
// about one object or one kind: an admission webhook that fails (the API
// server answers 500 "failed calling webhook", see k8s.io/apiserver's
// webhook dispatchers), one that denies with code 500 ("admission webhook
// ... denied the request"), or a failing conversion webhook. Pausing every
// worker for it would let one namespace's broken webhook stall all the
// others; that reconcile fails and is retried with its own backoff instead.
func APIUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsInternalError(err) {
		return !causedByWebhook(err)
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// webhookFailures are what the API server's messages say when a webhook,
// not the API server, failed a request.
var webhookFailures = []string{
	"failed calling webhook",  // admission, call failed (failurePolicy Fail)
	"admission webhook ",      // admission, "... denied the request" with a 5xx code
	"conversion webhook for ", // conversion webhook failed
}

func causedByWebhook(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	msg := status.Status().Message
	for _, s := range webhookFailures {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// unavailability is the controller-wide backoff. Per-key backoff alone does
// not see an outage: every key fails on its own, and the workqueue's overall
// bucket lets the failures through at 10 a second for as long as the outage
// lasts. Here one failing reconcile pauses every worker, each further round
// of failures doubles the pause, and the first reconcile the API server
// answers ends it.
type unavailability struct {
	logger klog.Logger

	mu       sync.Mutex
	failures int       // consecutive rounds that failed
	until    time.Time // no reconcile starts before this
}

// failed records a reconcile that failed because the API server is
// unavailable. Failures of reconciles that were already in flight when the
// current pause began do not lengthen it: one round, one doubling.
func (u *unavailability) failed(started time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.until.IsZero() && started.Before(u.until) {
		return
	}
	d := min(unavailableBase<<min(u.failures, 16), unavailableCap)
	if u.failures == 0 {
		u.logger.Info("The API server is unavailable; every worker backs off", "first", d, "max", unavailableCap)
	}
	u.failures++
	u.until = time.Now().Add(d)
}

// answered records a reconcile the API server answered, ending the pause.
func (u *unavailability) answered() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failures > 0 {
		u.logger.Info("The API server answers again", "failedRounds", u.failures)
	}
	u.failures, u.until = 0, time.Time{}
}

// wait blocks until the pause is over; false if ctx ended first.
func (u *unavailability) wait(ctx context.Context) bool {
	for {
		u.mu.Lock()
		d := time.Until(u.until)
		u.mu.Unlock()
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
