package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/test/budget"
)

// firstLeader waits until one of a and b leads and returns it first.
func firstLeader(t *testing.T, a, b *candidate) (leading, standby *candidate) {
	t.Helper()
	select {
	case <-a.Elected():
		leading, standby = a, b
	case <-b.Elected():
		leading, standby = b, a
	case <-time.After(budget.Scale(waitLimit)):
		t.Fatalf("no leader within %s", budget.Scale(waitLimit))
	}
	waitClosed(t, leading.work.started, "the leader's work started")
	return leading, standby
}

// Two replicas, one Lease: one leads; a graceful stop lets its work drain
// while it still holds the Lease, then releases it, and the standby takes
// over within about a retry period instead of a lease duration.
func TestOneLeaderAndHandoverOnGracefulStop(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "handover"
	const drain = 1500 * time.Millisecond
	a := startCandidate(t, env.Config, testOptions(ns, lease), newWork(drain))
	b := startCandidate(t, env.Config, testOptions(ns, lease), newWork(drain))
	if a.Identity() == b.Identity() {
		t.Fatalf("both candidates have the identity %q", a.Identity())
	}

	first, second := firstLeader(t, a, b)
	time.Sleep(4 * retryPeriod) // several rounds in which the standby could wrongly win
	if isClosed(second.Elected()) {
		t.Fatal("both candidates became leader")
	}
	if isClosed(second.work.started) {
		t.Fatal("the standby started the leader's work")
	}
	l := getLease(t, ns, lease)
	if got := holder(l); got != first.Identity() {
		t.Fatalf("Lease holderIdentity = %q, want the leader %q", got, first.Identity())
	}
	if v, ok := masterStatus(t, first.reg, lease); !ok || v != 1 {
		t.Errorf("leader_election_master_status{name=%q} on the leader = %v (found %v), want 1", lease, v, ok)
	}

	// Graceful stop.
	first.cancel()
	waitClosed(t, first.work.cancelled, "the leader's work was cancelled")
	time.Sleep(drain / 2)
	if isClosed(second.Elected()) {
		t.Fatal("the standby took over while the old leader's work was still draining")
	}
	if got := holder(getLease(t, ns, lease)); got != first.Identity() {
		t.Errorf("during the drain the Lease is held by %q, want still %q", got, first.Identity())
	}
	if err := first.wait(t); err != nil {
		t.Fatalf("Run after a graceful stop = %v, want nil", err)
	}
	if !isClosed(first.work.stopped) {
		t.Error("Run returned before the work had stopped")
	}
	// Released, not left to expire: the stopped leader no longer holds it.
	if got := holder(getLease(t, ns, lease)); got == first.Identity() {
		t.Errorf("after Run returned the Lease is still held by the stopped leader")
	}

	waitClosed(t, second.work.started, "the standby took over")
	takeover := second.work.startedAt.Sub(first.returned)
	t.Logf("handover after release: the standby led %s after the lease was released (%s after the stop, which drained for %s); retry period %s, lease duration %s",
		takeover.Round(time.Millisecond), second.work.startedAt.Sub(first.work.cancelledAt).Round(time.Millisecond), drain, retryPeriod, leaseDuration)
	if takeover >= leaseDuration {
		t.Errorf("the standby took %s to take over a released lease: as long as an expiry (%s)", takeover, leaseDuration)
	}
	l = getLease(t, ns, lease)
	if got := holder(l); got != second.Identity() {
		t.Errorf("Lease holderIdentity = %q, want the new leader %q", got, second.Identity())
	}
	if got := ptr.Deref(l.Spec.LeaseTransitions, -1); got != 1 {
		t.Errorf("Lease leaseTransitions = %d, want 1", got)
	}
}

// Without ReleaseOnCancel (or after a kill) the Lease stays held, and the
// standby waits for it to expire. The measured time is the contrast to the
// handover above.
func TestLeaseExpiresWithoutRelease(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "expiry"
	opts := testOptions(ns, lease)
	opts.ReleaseOnCancel = false
	a := startCandidate(t, env.Config, opts, newWork(0))
	b := startCandidate(t, env.Config, opts, newWork(0))
	first, second := firstLeader(t, a, b)

	first.cancel()
	if err := first.wait(t); err != nil {
		t.Fatalf("Run after a graceful stop = %v, want nil", err)
	}
	if got := holder(getLease(t, ns, lease)); got != first.Identity() && !isClosed(second.Elected()) {
		t.Errorf("Lease holderIdentity = %q right after the stop, want still %q (not released)", got, first.Identity())
	}
	waitClosed(t, second.work.started, "the standby took over the expired lease")
	t.Logf("takeover by expiry: the standby led %s after the old leader stopped without releasing; lease duration %s",
		second.work.startedAt.Sub(first.returned).Round(time.Millisecond), leaseDuration)
}

// Another holder overwrites the Lease: the leader cannot renew, and Run
// returns ErrLeaseLost by itself, before its context is cancelled; the work's
// context ends and the metric drops to 0.
func TestLeaseLostToAnotherHolder(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "overwritten"
	a := startCandidate(t, env.Config, testOptions(ns, lease), newWork(time.Hour)) // never drains: Run must not wait for it
	waitClosed(t, a.Elected(), "became the leader")
	waitClosed(t, a.work.started, "the work started")
	if v, ok := masterStatus(t, a.reg, lease); !ok || v != 1 {
		t.Fatalf("leader_election_master_status{name=%q} = %v (found %v), want 1", lease, v, ok)
	}

	leases := leaseClient(t).CoordinationV1().Leases(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("usurper")
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("overwriting the Lease: %v", err)
	}
	overwritten := time.Now()

	if err := a.wait(t); !errors.Is(err, leader.ErrLeaseLost) {
		t.Fatalf("Run = %v, want ErrLeaseLost", err)
	}
	t.Logf("lost to another holder: Run returned ErrLeaseLost %s after the overwrite; renew deadline %s",
		a.returned.Sub(overwritten).Round(time.Millisecond), renewDeadline)
	waitClosed(t, a.work.cancelled, "the work's context ended")
	if isClosed(a.work.stopped) {
		t.Error("the work stopped: Run waited for it")
	}
	if v, ok := masterStatus(t, a.reg, lease); !ok || v != 0 {
		t.Errorf("leader_election_master_status{name=%q} after losing = %v (found %v), want 0", lease, v, ok)
	}
	if got := holder(getLease(t, ns, lease)); got != "usurper" {
		t.Errorf("Lease holderIdentity = %q, want usurper: a lost lease is not touched", got)
	}
}

// The API server stops answering the leader (its requests hang): the lease
// client's own timeout ends each renewal attempt, Run returns ErrLeaseLost
// once the renew deadline passes, and that is before the standby, which
// still reaches the API server, takes the expired Lease over: never two
// leaders at once.
func TestLeaseLostWhenTheAPIServerStopsAnswering(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "unreachable"
	var cut atomic.Bool
	a := startCandidate(t, cuttableConfig(&cut), testOptions(ns, lease), newWork(time.Hour))
	waitClosed(t, a.work.started, "the first candidate became the leader")
	b := startCandidate(t, env.Config, testOptions(ns, lease), newWork(0))
	time.Sleep(2 * retryPeriod) // b has seen the Lease renewed
	if isClosed(b.Elected()) {
		t.Fatal("both candidates became leader")
	}

	cut.Store(true)
	cutAt := time.Now()
	if err := a.wait(t); !errors.Is(err, leader.ErrLeaseLost) {
		t.Fatalf("Run = %v, want ErrLeaseLost", err)
	}
	waitClosed(t, a.work.cancelled, "the work's context ended")

	waitClosed(t, b.work.started, "the standby took over")
	t.Logf("API server unreachable: the leader gave up %s after the cut, the standby led %s after the cut; retry period + renew deadline %s, lease duration %s",
		a.returned.Sub(cutAt).Round(time.Millisecond), b.work.startedAt.Sub(cutAt).Round(time.Millisecond), retryPeriod+renewDeadline, leaseDuration)
	if !a.returned.Before(b.work.startedAt) {
		t.Errorf("the standby led at %s, before the old leader gave up at %s: two leaders",
			b.work.startedAt.Format(time.StampMilli), a.returned.Format(time.StampMilli))
	}
}

// onStartedLeading returning on its own while leading is a failure: Run
// releases the Lease and returns ErrCallbackReturned.
func TestCallbackReturningReleasesTheLease(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "callback-returned"
	e, err := leader.New(env.Config, testOptions(ns, lease), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := budget.Context(t, context.Background(), waitLimit, "Run to return once its callback has")
	defer cancel()
	if err := e.Run(ctx, func(context.Context) error { return nil }); !errors.Is(err, leader.ErrCallbackReturned) {
		t.Fatalf("Run = %v, want ErrCallbackReturned", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context timed out")
	}
	if got := holder(getLease(t, ns, lease)); got != "" {
		t.Errorf("Lease holderIdentity = %q, want empty (released)", got)
	}
}

// A graceful stop whose work is still running (a reconcile deaf to its
// cancelled context) keeps the Lease, held and unrenewed, so that no
// standby leads before it expires; work that stopped releases it.
func TestWorkStillRunningKeepsTheLease(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	for _, c := range []struct {
		lease   string
		workErr error
		kept    bool
	}{
		{"work-still-running", fmt.Errorf("%w: a reconcile", leader.ErrWorkStillRunning), true},
		{"work-stopped", errors.New("a reconcile was cancelled"), false},
	} {
		opts := testOptions(ns, c.lease)
		e, err := leader.New(env.Config, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		err = e.Run(ctx, func(leading context.Context) error {
			cancel() // the stop begins as soon as it leads
			<-leading.Done()
			return c.workErr
		})
		if !errors.Is(err, c.workErr) {
			t.Errorf("%s: Run = %v, want the work's error", c.lease, err)
		}
		want := ""
		if c.kept {
			want = e.Identity()
		}
		if got := holder(getLease(t, ns, c.lease)); got != want {
			t.Errorf("%s: Lease holderIdentity = %q after Run returned, want %q", c.lease, got, want)
		}
	}
}

// The health check, served by pkg/server, passes while the leader leads and
// renews, for longer than a lease duration.
func TestHealthCheckPassesWhileLeading(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "health"
	a := startCandidate(t, env.Config, testOptions(ns, lease), newWork(0))
	health := &server.Health{}
	health.AddLivenessCheck(a.HealthCheck())
	mux := http.NewServeMux()
	health.Register(mux)
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz?verbose", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := probe(); code != http.StatusOK {
		t.Errorf("before Run has led: /healthz = %d %q", code, body)
	}
	waitClosed(t, a.work.started, "became the leader")

	renewed := getLease(t, ns, lease).Spec.RenewTime.Time
	for end := time.Now().Add(leaseDuration + time.Second); time.Now().Before(end); time.Sleep(retryPeriod) {
		if code, body := probe(); code != http.StatusOK {
			t.Fatalf("while leading: /healthz = %d %q", code, body)
		}
	}
	if now := getLease(t, ns, lease).Spec.RenewTime.Time; !now.After(renewed.Add(leaseDuration / 2)) {
		t.Errorf("renewTime moved from %s to %s: the leader did not keep renewing", renewed, now)
	}
	if _, body := probe(); !strings.Contains(body, "[+]leader-election ok") {
		t.Errorf("/healthz?verbose = %q, want the leader-election check listed", body)
	}
}
