package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// The partition test's lease: short, so that a takeover takes seconds. The
// leader gives up at most retry period + renew deadline + the Lease request
// timeout (0.5 + 4 + 1 = 5.5 s) after the API server accepted its last
// renewal; a standby takes over no sooner than the lease duration (6 s)
// after it.
const (
	partitionLease = 6 * time.Second
	partitionRenew = 4 * time.Second
	partitionRetry = 500 * time.Millisecond
)

// TestPartitionsNeverOverlap runs three replicas, each reaching the API
// server through a TCP proxy of its own, while users keep updating WebApps.
// Six times, it cuts the leader's link (alternately dropping every byte and
// resetting every connection). The leader must stop, and exit, before its
// lease could expire; a standby takes over; a fresh replica replaces the
// cut one. Every reconcile of every replica is journalled (--reconcile-journal)
// with its start and end; afterwards no two replicas' reconciles may
// overlap in time, and every WebApp must have converged exactly.
func TestPartitionsNeverOverlap(t *testing.T) {
	const (
		partitions = 6
		n          = 60
	)
	opNS := env.Namespace(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	kube := env.KubeClient(t)
	journals := t.TempDir()
	createWebApps(t, ns, "p", n)

	// Users at work throughout: every WebApp keeps changing.
	stopUsers := editReplicas(t, 5, func(rng *rand.Rand) (string, string) {
		return ns, fmt.Sprintf("p%03d", rng.IntN(n))
	})
	defer stopUsers()

	lease, stopWatch := watchLease(ctx, kube, opNS)
	defer stopWatch()

	var all []*partitionReplica // every process started, for the journals
	launch := func(slot, generation int, p *operator.Proxy) *partitionReplica {
		r := &partitionReplica{slot: slot, generation: generation, proxy: p,
			journal: filepath.Join(journals, fmt.Sprintf("replica-%d-%d.jsonl", slot, generation))}
		r.op = operator.Launch(t, proxiedKubeconfig(t, p), "--operator-namespace="+opNS, "--namespaces="+ns,
			"--leader-elect-resource-namespace="+opNS,
			"--leader-elect-lease-duration="+partitionLease.String(),
			"--leader-elect-renew-deadline="+partitionRenew.String(),
			"--leader-elect-retry-period="+partitionRetry.String(),
			"--reconcile-journal="+r.journal)
		all = append(all, r)
		return r
	}
	target := strings.TrimPrefix(env.Server, "https://")
	replicas := make([]*partitionReplica, 3)
	for slot := range replicas {
		replicas[slot] = launch(slot, 0, operator.NewProxy(t, target))
	}

	for i := range partitions {
		led := awaitLeader(ctx, t, i, lease, replicas)

		how := operator.LinkBlackhole
		if i%2 == 1 {
			how = operator.LinkReset
		}
		cut := time.Now()
		led.proxy.Cut(how)
		exited, renewed := checkCutLeaderExits(t, i, led, lease)

		next := awaitTakeover(ctx, t, i, lease, led)
		t.Logf("partition %d (%s): the leader exited %s after the cut, %s before its lease could expire; %s leads",
			i+1, how, exited.Sub(cut).Round(time.Millisecond), renewed.Add(partitionLease).Sub(exited).Round(time.Millisecond), next)

		led.proxy.Restore()
		replicas[led.slot] = launch(led.slot, led.generation+1, led.proxy)
	}

	stopUsers()
	awaitExactAfterPartitions(ctx, t, ns, opNS)
	stopLeaderLast(t, replicas, lease.holder())
	checkNoOverlaps(t, all, partitions)
}

// partitionReplica is one process of TestPartitionsNeverOverlap: the
// generation-th to run in slot, reaching the API server through proxy.
type partitionReplica struct {
	slot, generation int
	proxy            *operator.Proxy
	op               *operator.Operator
	journal          string
	identity         string
}

// id is the replica's identity, as its journal's first entry names it;
// empty until it has one.
func (r *partitionReplica) id() string {
	if r.identity == "" {
		if entries, err := operator.ReadJournal(r.journal); err == nil && len(entries) > 0 {
			r.identity = entries[0].Replica
		}
	}
	return r.identity
}

// leaseView is the Lease as the API server holds it, watched directly (not
// through any proxy): its holder, and the last renewal the API server
// accepted from each holder.
type leaseView struct {
	mu        sync.Mutex
	lastRenew map[string]time.Time
	holderNow string
}

// watchLease reads opNS's leader Lease every 50 ms until stop is called.
func watchLease(ctx context.Context, kube kubernetes.Interface, opNS string) (lease *leaseView, stop func()) {
	v := &leaseView{lastRenew: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			l, err := kube.CoordinationV1().Leases(opNS).Get(ctx, leader.DefaultLeaseName, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
				continue
			}
			v.mu.Lock()
			v.holderNow = *l.Spec.HolderIdentity
			if r := l.Spec.RenewTime.Time; r.After(v.lastRenew[v.holderNow]) {
				v.lastRenew[v.holderNow] = r
			}
			v.mu.Unlock()
		}
	}()
	return v, func() { close(done) }
}

// holder is the Lease's holder as last seen.
func (v *leaseView) holder() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.holderNow
}

// renewedBy is the last renewal the API server accepted from identity.
func (v *leaseView) renewedBy(identity string) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastRenew[identity]
}

// awaitLeader returns, before partition i, the replica that holds the
// Lease, once it is reconciling.
func awaitLeader(ctx context.Context, t *testing.T, i int, lease *leaseView, replicas []*partitionReplica) *partitionReplica {
	t.Helper()
	var led *partitionReplica
	if err := budget.Poll(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		holder := lease.holder()
		for _, r := range replicas {
			if id := r.id(); id != "" && id == holder {
				entries, _ := operator.ReadJournal(r.journal)
				if len(entries) > 1 {
					led = r
					return true, nil
				}
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("partition %d: no replica leads and reconciles: %v", i+1, err)
	}
	return led
}

// checkCutLeaderExits checks that the leader cut off in partition i exits,
// saying it lost its lease, before its lease could expire. It returns when
// it exited and its last renewal.
func checkCutLeaderExits(t *testing.T, i int, led *partitionReplica, lease *leaseView) (exited, renewed time.Time) {
	t.Helper()
	select {
	case <-led.op.Exited():
	case <-time.After(budget.Scale(time.Minute)):
		t.Fatalf("partition %d: the cut leader (slot %d) did not exit within %s", i+1, led.slot, budget.Scale(time.Minute))
	}
	exited, _ = led.op.ExitedAt()
	if !strings.Contains(led.op.Log(), "Lost the leader lease") {
		t.Errorf("partition %d: the cut leader exited without saying it lost its lease", i+1)
	}
	renewed = lease.renewedBy(led.identity)
	if expires := renewed.Add(partitionLease); !exited.Before(expires) {
		t.Errorf("partition %d: the cut leader exited at %s, after its lease could expire (%s)",
			i+1, exited.Format(time.StampMicro), expires.Format(time.StampMicro))
	}
	return exited, renewed
}

// awaitTakeover returns the standby that took the Lease over from the
// leader cut off in partition i.
func awaitTakeover(ctx context.Context, t *testing.T, i int, lease *leaseView, led *partitionReplica) string {
	t.Helper()
	var next string
	if err := budget.Poll(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		next = lease.holder()
		return next != "" && next != led.identity, nil
	}); err != nil {
		t.Fatalf("partition %d: no standby took over: %v", i+1, err)
	}
	return next
}

// awaitExactAfterPartitions waits until check finds nothing amiss in ns.
func awaitExactAfterPartitions(ctx context.Context, t *testing.T, ns, opNS string) {
	t.Helper()
	if err := budget.Poll(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		problems, err := check(ctx, t, []string{ns}, opNS, map[string]bool{})
		if err != nil {
			return false, err
		}
		return len(problems) == 0, nil
	}); err != nil {
		problems, _ := check(ctx, t, []string{ns}, opNS, map[string]bool{})
		t.Fatalf("after the partitions the world is not exact: %v; %v", err, problems[:min(len(problems), 20)])
	}
}

// stopLeaderLast stops the standbys first, then the leader (holder), so
// that no replica takes over at the end only to be stopped.
func stopLeaderLast(t *testing.T, replicas []*partitionReplica, holder string) {
	t.Helper()
	sort.SliceStable(replicas, func(a, b int) bool { return replicas[b].id() == holder })
	for _, r := range replicas {
		if err := r.op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
			t.Errorf("slot %d: a graceful stop ended with %v", r.slot, err)
		}
	}
}

// checkNoOverlaps is the proof: no two replicas' reconciles, from every
// process's journal, overlap, and every partition handed over to another.
func checkNoOverlaps(t *testing.T, all []*partitionReplica, partitions int) {
	t.Helper()
	var intervals []operator.ReconcileInterval
	for _, r := range all {
		entries, err := operator.ReadJournal(r.journal)
		if err != nil {
			t.Fatal(err)
		}
		exited, _ := r.op.ExitedAt()
		intervals = append(intervals, operator.ReconcileIntervals(entries, exited)...)
	}
	processes := map[string]bool{}
	for _, iv := range intervals {
		processes[iv.Replica] = true
	}
	if len(processes) < partitions+1 {
		t.Errorf("only %d replicas reconciled across %d partitions; every partition should hand over to another", len(processes), partitions)
	}
	overlaps := operator.Overlapping(intervals)
	for _, o := range overlaps[:min(len(overlaps), 10)] {
		t.Errorf("overlap: %s", o)
	}
	t.Logf("%d partitions survived: %d reconciles by %d replica processes, %d overlapping",
		partitions, len(intervals), len(processes), len(overlaps))
}

// proxiedKubeconfig is the admin kubeconfig with the server replaced by p.
func proxiedKubeconfig(t *testing.T, p *operator.Proxy) string {
	return env.WriteKubeconfig(t, func(cfg *clientcmdapi.Config) {
		for _, c := range cfg.Clusters {
			c.Server = "https://" + p.Addr()
		}
	})
}

// TestOverlapCheck: the check that TestPartitionsNeverOverlap relies on
// finds an overlap between replicas, and only between replicas.
func TestOverlapCheck(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	sameReplica := []operator.ReconcileInterval{
		{Replica: "a", Key: "k1", Start: at(0), End: at(10)},
		{Replica: "a", Key: "k2", Start: at(5), End: at(20)}, // one replica's workers run in parallel
		{Replica: "b", Key: "k1", Start: at(21), End: at(30)},
	}
	if o := operator.Overlapping(sameReplica); len(o) != 0 {
		t.Errorf("no overlap between replicas, yet: %v", o)
	}
	entries := []controller.JournalEntry{
		{Event: "open", Replica: "a", Time: at(0)},
		{Event: "start", Replica: "a", ID: 1, Key: "k1", Time: at(1)},
		{Event: "end", Replica: "a", ID: 1, Key: "k1", Time: at(2)},
		{Event: "start", Replica: "a", ID: 2, Key: "k2", Time: at(3)}, // cut short by the exit at 50
	}
	cut := append(operator.ReconcileIntervals(entries, at(50)), operator.ReconcileInterval{Replica: "b", Key: "k3", Start: at(40), End: at(60)})
	o := operator.Overlapping(cut)
	if len(o) != 1 || !strings.Contains(o[0], "k3") || !strings.Contains(o[0], "cut short true") {
		t.Errorf("a reconcile started while another replica's was cut short by its exit: got %v, want that one overlap", o)
	}
}
