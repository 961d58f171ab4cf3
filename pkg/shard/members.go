package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// MemberLabel marks a membership Lease; its value is the group's name, so
// that two installs in one namespace do not count each other.
const MemberLabel = "handroll.dev/shard-member"

// SplitAnnotation on a membership Lease says how its replica splits the
// WebApps (Split). Replicas that split differently hold
// different Leases for the same WebApps, so no range Lease could keep two
// of them from reconciling one WebApp: the Coordinator takes no range while
// it sees a member that splits otherwise.
const SplitAnnotation = "handroll.dev/shard-split"

// Split is the SplitAnnotation of replicas with n ranges: "12/uid", the
// count and the field hashed. Replicas of earlier versions hashed the
// namespace and wrote the count alone: they split otherwise, so a rollout
// from them hands over as a change of --shards does.
func Split(n int) string { return strconv.Itoa(n) + "/uid" }

// Members announces this replica in a Lease of its own and tells which
// replicas are live. A member is live while its Lease keeps being renewed:
// liveness is judged, as client-go's election judges a leader, by when this
// replica last saw the renewal change, never by comparing clocks. A wrong
// answer costs balance, never safety: each range's own Lease fences it.
type Members struct {
	Client    coordinationclient.LeasesGetter
	Namespace string
	// Group names the set of replicas: "handroll-leader", say.
	Group    string
	Identity string
	// Duration is how long a member stays live after its last renewal is
	// seen; it renews every Duration/3.
	Duration time.Duration
	// Split is written in SplitAnnotation (see there).
	Split string
	// SingleLeader, when set, names the Lease of one leader reconciling
	// every WebApp (handroll without --shards): while it is held, its
	// holder counts as a member that splits otherwise.
	SingleLeader string
	// StaleAfter overrides staleAfter's default (tests).
	StaleAfter time.Duration

	mu       sync.Mutex
	observed map[string]observation
}

type observation struct {
	renew string // the Lease's renewTime as last seen
	at    time.Time
}

// leaseName is the membership Lease of identity. The identity itself is
// the holder: it need not be a valid object name (hostname_uuid is not).
func (m *Members) leaseName(identity string) string { return MemberLease(m.Group, identity) }

// MemberLease is the membership Lease of identity in group.
func MemberLease(group, identity string) string {
	return fmt.Sprintf("%s-member-%016x", group, Hash(identity))
}

// Run renews this replica's Lease until ctx ends, then deletes it, so that
// the others rebalance at once rather than after Duration. A renewal that
// fails is retried at the next tick; Run returns only when ctx ends.
func (m *Members) Run(ctx context.Context) error {
	if m.Duration <= 0 || m.Identity == "" || m.Group == "" {
		return errors.New("shard.Members needs a Group, an Identity and a Duration")
	}
	tick := time.NewTicker(m.Duration / 3)
	defer tick.Stop()
	for {
		_ = m.Announce(ctx) // the next tick retries; Live judges by what it sees
		select {
		case <-ctx.Done():
			// A fresh context: ctx has ended, and the Lease must still go.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.Duration/3)
			defer cancel()
			err := m.Client.Leases(m.Namespace).Delete(dctx, m.leaseName(m.Identity), metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
			return err
		case <-tick.C:
		}
	}
}

// Announce creates or renews this replica's Lease once.
func (m *Members) Announce(ctx context.Context) error {
	leases := m.Client.Leases(m.Namespace)
	now := metav1.NewMicroTime(time.Now())
	seconds := int32((m.Duration + time.Second - 1) / time.Second)
	name := m.leaseName(m.Identity)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{MemberLabel: m.Group},
				Annotations: map[string]string{SplitAnnotation: m.Split},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &m.Identity, LeaseDurationSeconds: &seconds,
				AcquireTime: &now, RenewTime: &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	l.Spec.LeaseDurationSeconds = &seconds
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[SplitAnnotation] = m.Split
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// staleAfter is how long this replica must see a member's Lease unchanged
// before it deletes it: a replica killed for good (a pod replaced in a
// rollout) leaves one behind each time. Judged by this replica's own
// observations, never by the renewTime the writer's clock wrote, so a
// member whose clock is off is neither dropped nor deleted while it
// renews. A Lease first seen already abandoned waits the whole time.
func (m *Members) staleAfter() time.Duration {
	if m.StaleAfter > 0 {
		return m.StaleAfter
	}
	return max(10*m.Duration, 5*time.Minute)
}

// Live lists the membership Leases and returns the identities of the live
// members, sorted; this replica is among them once its Lease exists. It
// deletes the Leases it has seen unchanged for longer than staleAfter.
func (m *Members) Live(ctx context.Context) ([]string, error) {
	live, _, err := m.live(ctx)
	return live, err
}

// OtherSplits returns the live members that split the WebApps otherwise
// than Split, and the single leader (SingleLeader) if it is held.
func (m *Members) OtherSplits(ctx context.Context) ([]string, error) {
	_, other, err := m.live(ctx)
	return other, err
}

// live is Live, and the identities of the live members whose split is not
// this replica's.
func (m *Members) live(ctx context.Context) (live, otherSplit []string, err error) {
	list, err := m.Client.Leases(m.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{MemberLabel: m.Group}).String(),
	})
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observed == nil {
		m.observed = map[string]observation{}
	}
	seen := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
			continue
		}
		id := *l.Spec.HolderIdentity
		seen[id] = true
		fresh := m.renewedWithin(id, l.Spec.RenewTime, now)
		if now.Sub(m.observed[id].at) > m.staleAfter() {
			// Seen unchanged for that long. Only the version seen: a
			// renewal since then keeps it.
			rv := l.ResourceVersion
			_ = m.Client.Leases(m.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			delete(m.observed, id)
			continue
		}
		if fresh {
			live = append(live, id)
			if l.Annotations[SplitAnnotation] != m.Split {
				otherSplit = append(otherSplit, id)
			}
		}
	}
	if m.SingleLeader != "" {
		l, err := m.Client.Leases(m.Namespace).Get(ctx, m.SingleLeader, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, err
		case l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && l.Spec.RenewTime != nil:
			// Judged as the members are, by when its renewal last changed;
			// a released Lease has no holder.
			key := "lease " + l.Name
			seen[key] = true
			if m.renewedWithin(key, l.Spec.RenewTime, now) {
				otherSplit = append(otherSplit, "the single leader "+*l.Spec.HolderIdentity+" (Lease "+l.Name+")")
			}
		}
	}
	for id := range m.observed {
		if !seen[id] {
			delete(m.observed, id)
		}
	}
	slices.Sort(live)
	slices.Sort(otherSplit)
	return live, otherSplit, nil
}

// renewedWithin records renewTime as key's latest and reports whether this
// replica saw it change within Duration before now. m.mu is held.
func (m *Members) renewedWithin(key string, renewTime *metav1.MicroTime, now time.Time) bool {
	renew := renewTime.UTC().Format(time.RFC3339Nano)
	o, ok := m.observed[key]
	if !ok || o.renew != renew {
		o = observation{renew: renew, at: now}
		m.observed[key] = o
	}
	return now.Sub(o.at) < m.Duration
}
