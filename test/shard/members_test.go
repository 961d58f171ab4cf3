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
		deadline := time.Now().Add(30 * time.Second)
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

// TestMembersDropTheLeasesOfReplicasLongGone: a membership Lease not renewed
// for far longer than the duration (a replica replaced in a rollout) is
// deleted by Live; a recent one is kept.
func TestMembersDropTheLeasesOfReplicasLongGone(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client := env.KubeClient(t)
	ctx := context.Background()
	lease := func(name, holder string, renewed time.Time) {
		t.Helper()
		seconds := int32(3)
		at := metav1.NewMicroTime(renewed)
		if _, err := client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shard.MemberLabel: "handroll-leader"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &at},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease("handroll-leader-member-old", "old_1", time.Now().Add(-time.Hour))
	lease("handroll-leader-member-recent", "recent_1", time.Now())
	m := &shard.Members{Client: client.CoordinationV1(), Namespace: ns, Group: "handroll-leader", Identity: "me", Duration: 3 * time.Second}
	live, err := m.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live, []string{"recent_1"}) {
		t.Errorf("live members %v, want the recent one alone", live)
	}
	if _, err := client.CoordinationV1().Leases(ns).Get(ctx, "handroll-leader-member-old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease of a member gone an hour is still there (%v)", err)
	}
	if _, err := client.CoordinationV1().Leases(ns).Get(ctx, "handroll-leader-member-recent", metav1.GetOptions{}); err != nil {
		t.Errorf("the recent member's Lease: %v", err)
	}
}
