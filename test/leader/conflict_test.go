package leader

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/handroll/handroll/test/budget"
)

// TestOfTwoLeaseUpdatesAtOneResourceVersionOnlyOneWins is the rule that
// keeps two candidates from both leading: client-go's LeaseLock.Update
// sends the Lease as last read, resourceVersion included, and the API
// server applies an update only at the current resourceVersion. Two
// candidates that read the Lease at one version and both write it (each
// taking it over, as LeaderElector.tryAcquireOrRenew does once it has seen
// the Lease expire or released) race: exactly one write is applied, the
// other is refused with 409 Conflict, and the Lease names the winner. The
// loser's next try reads the winner's renewal and waits.
//
// The locks are built as pkg/leader's New builds its own (elector.go).
func TestOfTwoLeaseUpdatesAtOneResourceVersionOnlyOneWins(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lease = "compare-and-swap"
	ctx, cancel := budget.Context(t, context.Background(), waitLimit, "ten rounds of two Lease updates at one resourceVersion")
	defer cancel()
	client := leaseClient(t).CoordinationV1()
	lock := func(id string) *resourcelock.LeaseLock {
		return &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lease},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
	}
	a, b := lock("a"), lock("b")
	// A released Lease: no holder, as Elector.release leaves it.
	now := metav1.NewTime(time.Now())
	if err := a.Create(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}

	const rounds = 10
	wins := map[string]int{}
	for round := range rounds {
		// Both read the Lease: each lock keeps the copy it read, with its
		// resourceVersion, for Update.
		before := getLease(t, ns, lease).ResourceVersion
		for _, l := range []*resourcelock.LeaseLock{a, b} {
			if _, _, err := l.Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Both write at once.
		var errs [2]error
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for i, l := range []*resourcelock.LeaseLock{a, b} {
			wg.Go(func() {
				<-begin
				at := metav1.NewTime(time.Now())
				errs[i] = l.Update(ctx, resourcelock.LeaderElectionRecord{
					HolderIdentity: l.Identity(), LeaseDurationSeconds: 15, AcquireTime: at, RenewTime: at,
				})
			})
		}
		close(begin)
		wg.Wait()

		winner, loserErr := "a", errs[1]
		switch {
		case errs[0] == nil && errs[1] == nil:
			t.Fatalf("round %d: both updates at resourceVersion %s were applied", round, before)
		case errs[0] != nil && errs[1] != nil:
			t.Fatalf("round %d: both updates failed: %v; %v", round, errs[0], errs[1])
		case errs[0] != nil:
			winner, loserErr = "b", errs[0]
		}
		var refused *apierrors.StatusError
		if !errors.As(loserErr, &refused) || refused.ErrStatus.Code != http.StatusConflict || !apierrors.IsConflict(loserErr) {
			t.Fatalf("round %d: the loser's update failed with %v, want 409 Conflict", round, loserErr)
		}
		l := getLease(t, ns, lease)
		if got := holder(l); got != winner {
			t.Fatalf("round %d: the Lease is held by %q, want the winner %q", round, got, winner)
		}
		if l.ResourceVersion == before {
			t.Fatalf("round %d: the winner's update left resourceVersion %s", round, before)
		}
		wins[winner]++
	}
	t.Logf("%d rounds, each one update applied and one refused with 409: a won %d, b won %d", rounds, wins["a"], wins["b"])
}
