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

	// The Lease as the API server holds it, watched directly (not through
	// any proxy): the last renewal the API server accepted from each holder.
	var (
		leaseMu    sync.Mutex
		lastRenew  = map[string]time.Time{}
		holderNow  string
		leaseWatch = make(chan struct{})
	)
	go func() {
		for {
			select {
			case <-leaseWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
			l, err := kube.CoordinationV1().Leases(opNS).Get(ctx, leader.DefaultLeaseName, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
				continue
			}
			leaseMu.Lock()
			holderNow = *l.Spec.HolderIdentity
			if r := l.Spec.RenewTime.Time; r.After(lastRenew[holderNow]) {
				lastRenew[holderNow] = r
			}
			leaseMu.Unlock()
		}
	}()
	defer close(leaseWatch)

	type replica struct {
		slot, generation int
		proxy            *operator.Proxy
		op               *operator.Operator
		journal          string
		identity         string
	}
	var all []*replica // every process started, for the journals
	launch := func(slot, generation int, p *operator.Proxy) *replica {
		r := &replica{slot: slot, generation: generation, proxy: p,
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
	replicas := make([]*replica, 3)
	for slot := range replicas {
		replicas[slot] = launch(slot, 0, operator.NewProxy(t, target))
	}
	identityOf := func(r *replica) string {
		if r.identity == "" {
			if entries, err := operator.ReadJournal(r.journal); err == nil && len(entries) > 0 {
				r.identity = entries[0].Replica
			}
		}
		return r.identity
	}

	for i := range partitions {
		// The leader, once it is reconciling.
		var led *replica
		if err := budget.Poll(ctx, 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			leaseMu.Lock()
			holder := holderNow
			leaseMu.Unlock()
			for _, r := range replicas {
				if id := identityOf(r); id != "" && id == holder {
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

		how := operator.LinkBlackhole
		if i%2 == 1 {
			how = operator.LinkReset
		}
		cut := time.Now()
		led.proxy.Cut(how)
		select {
		case <-led.op.Exited():
		case <-time.After(budget.Scale(time.Minute)):
			t.Fatalf("partition %d: the cut leader (slot %d) did not exit within %s", i+1, led.slot, budget.Scale(time.Minute))
		}
		exited, _ := led.op.ExitedAt()
		if !strings.Contains(led.op.Log(), "Lost the leader lease") {
			t.Errorf("partition %d: the cut leader exited without saying it lost its lease", i+1)
		}
		leaseMu.Lock()
		renewed := lastRenew[led.identity]
		leaseMu.Unlock()
		if expires := renewed.Add(partitionLease); !exited.Before(expires) {
			t.Errorf("partition %d: the cut leader exited at %s, after its lease could expire (%s)",
				i+1, exited.Format(time.StampMicro), expires.Format(time.StampMicro))
		}

		// A standby takes over.
		var next string
		if err := budget.Poll(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			leaseMu.Lock()
			defer leaseMu.Unlock()
			next = holderNow
			return next != "" && next != led.identity, nil
		}); err != nil {
			t.Fatalf("partition %d: no standby took over: %v", i+1, err)
		}
		t.Logf("partition %d (%s): the leader exited %s after the cut, %s before its lease could expire; %s leads",
			i+1, how, exited.Sub(cut).Round(time.Millisecond), renewed.Add(partitionLease).Sub(exited).Round(time.Millisecond), next)

		led.proxy.Restore()
		replicas[led.slot] = launch(led.slot, led.generation+1, led.proxy)
	}

	stopUsers()
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
	// Standbys first, then the leader, so that no replica takes over at
	// the end only to be stopped.
	leaseMu.Lock()
	holder := holderNow
	leaseMu.Unlock()
	sort.SliceStable(replicas, func(a, b int) bool { return identityOf(replicas[b]) == holder })
	for _, r := range replicas {
		if err := r.op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
			t.Errorf("slot %d: a graceful stop ended with %v", r.slot, err)
		}
	}

	// The proof: no two replicas' reconciles overlap.
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
