package shard

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
)

// TestMembersJoinLeaveAndExpire: two replicas announce themselves and each
// sees both; one that stops gracefully is gone at once (its Lease deleted);
// one that stops renewing without a word (SIGKILL) is gone once Duration
// has passed since its last renewal was seen, and not before.
func TestMembersJoinLeaveAndExpire(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const duration = 3 * time.Second
	member := func(id string) *shard.Members {
		return &shard.Members{Client: client.CoordinationV1(), Namespace: ns, Group: "handroll-leader", Identity: id, Duration: duration}
	}
	a, b, c := member("host-a_1"), member("host-b_2"), member("host-c_3")
	run := func(m *shard.Members) (stop func(), done chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		return cancel, done
	}
	stopA, doneA := run(a)
	stopB, doneB := run(b)
	defer stopA()
	defer stopB()

	waitLive := func(what string, want ...string) time.Time {
		t.Helper()
		deadline := time.Now().Add(budget.Scale(30 * time.Second))
		for {
			live, err := a.Live(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(live, want) {
				return time.Now()
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: live members %v, want %v", what, live, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitLive("both joined", "host-a_1", "host-b_2")

	// Graceful leave: the Lease is deleted, the member gone at the next look.
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b's Run: %v", err)
	}
	if live, _ := a.Live(context.Background()); !slices.Equal(live, []string{"host-a_1"}) {
		t.Errorf("right after b left gracefully, live members are %v", live)
	}

	// A member killed without a word: c announces itself once and never
	// renews. It is live until Duration has passed since a saw that
	// renewal, which was after announced, and gone soon after.
	announced := time.Now()
	if err := c.Announce(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitLive("c joined", "host-a_1", "host-c_3")
	gone := waitLive("c expired", "host-a_1")
	if d := gone.Sub(announced); d < duration || d > duration+5*time.Second {
		t.Errorf("c was dropped %s after its only renewal; want %s and a little more", d, duration)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Errorf("a's Run: %v", err)
	}
}

// TestMembersDropTheLeasesOfReplicasLongGone: a membership Lease nobody
// renews any more (a replica replaced in a rollout, its renewTime an hour
// old) is deleted by Live once this replica has seen it unchanged for
// StaleAfter, not at first sight, where the renewTime is the writer's
// clock; a renewed one is kept.
func TestMembersDropTheLeasesOfReplicasLongGone(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client := env.KubeClient(t)
	ctx := context.Background()
	leases := client.CoordinationV1().Leases(ns)
	lease := func(name, holder string, renewed time.Time) {
		t.Helper()
		seconds := int32(3)
		at := metav1.NewMicroTime(renewed)
		if _, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shard.MemberLabel: "handroll-leader"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &at},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	renew := func(name string) {
		t.Helper()
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		at := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &at
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease("handroll-leader-member-old", "old_1", time.Now().Add(-time.Hour))
	lease("handroll-leader-member-recent", "recent_1", time.Now())
	const staleAfter = 2 * time.Second
	m := &shard.Members{Client: client.CoordinationV1(), Namespace: ns, Group: "handroll-leader", Identity: "me",
		Duration: time.Second, StaleAfter: staleAfter}
	if _, err := m.Live(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "handroll-leader-member-old", metav1.GetOptions{}); err != nil {
		t.Errorf("the old Lease was deleted at first sight (%v): its renewTime is the writer's clock", err)
	}
	for end := time.Now().Add(staleAfter + time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		renew("handroll-leader-member-recent")
		if _, err := m.Live(ctx); err != nil {
			t.Fatal(err)
		}
	}
	live, err := m.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live, []string{"recent_1"}) {
		t.Errorf("live members %v, want the renewed one alone", live)
	}
	if _, err := leases.Get(ctx, "handroll-leader-member-old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease seen unchanged for %s is still there (%v)", staleAfter, err)
	}
	if _, err := leases.Get(ctx, "handroll-leader-member-recent", metav1.GetOptions{}); err != nil {
		t.Errorf("the renewed member's Lease: %v", err)
	}
}

// TestMembersJudgeLivenessByRenewalsNotClocks: a member whose clock is ten
// minutes behind the observer's renews its Lease every half second. It is
// live, and its Lease is kept, for as long as it renews; once it stops, it
// leaves the live members after Duration, and its Lease is deleted only
// once the observer has seen it unchanged for StaleAfter.
func TestMembersJudgeLivenessByRenewalsNotClocks(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client := env.KubeClient(t)
	ctx := context.Background()
	const skew = 10 * time.Minute
	holder, seconds := "skewed_1", int32(2)
	renewed := metav1.NewMicroTime(time.Now().Add(-skew))
	leases := client.CoordinationV1().Leases(ns)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "handroll-leader-member-skewed", Labels: map[string]string{shard.MemberLabel: "handroll-leader"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &renewed},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const duration, staleAfter = 2 * time.Second, 4 * time.Second
	m := &shard.Members{Client: client.CoordinationV1(), Namespace: ns, Group: "handroll-leader", Identity: "me",
		Duration: duration, StaleAfter: staleAfter}

	// Renewing, with its clock behind: live at every look.
	for i := range 12 {
		live, err := m.Live(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(live, []string{holder}) {
			t.Fatalf("look %d, while the skewed member renews: live members %v, want [%s]", i, live, holder)
		}
		time.Sleep(500 * time.Millisecond)
		l, err := leases.Get(ctx, "handroll-leader-member-skewed", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("look %d: the renewing member's Lease: %v", i, err)
		}
		renewed = metav1.NewMicroTime(time.Now().Add(-skew))
		l.Spec.RenewTime = &renewed
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Stopped: gone from the live members after Duration, its Lease kept
	// until it has been seen unchanged for StaleAfter.
	stopped := time.Now()
	for {
		live, err := m.Live(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, getErr := leases.Get(ctx, "handroll-leader-member-skewed", metav1.GetOptions{})
		since := time.Since(stopped)
		switch {
		case apierrors.IsNotFound(getErr) && since < staleAfter:
			t.Fatalf("the stopped member's Lease was deleted %s after its last renewal; want no sooner than %s", since.Round(time.Millisecond), staleAfter)
		case apierrors.IsNotFound(getErr):
			if len(live) > 0 {
				t.Errorf("with its Lease deleted, live members %v", live)
			}
			return
		case getErr != nil:
			t.Fatal(getErr)
		case since > staleAfter+5*time.Second:
			t.Fatalf("the stopped member's Lease is still there %s after its last renewal", since.Round(time.Millisecond))
		case since > duration+time.Second && len(live) > 0:
			t.Fatalf("%s after the skewed member stopped renewing, live members %v", since.Round(time.Millisecond), live)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
