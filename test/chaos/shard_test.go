package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/operator"
)

// TestShardedReplicas: 600 WebApps in 30 namespaces, --shards=12, each
// range's caches narrowed by the API server's shardSelector, users
// updating the WebApps throughout. The replicas go 1 → 3 → 2 (SIGTERM) → 3 → 2
// (SIGKILL) → 3, then one is partitioned from the API server through its
// proxy and must exit before its ranges' Leases can be taken over.
// Afterwards every WebApp has converged exactly and the directory lists
// exactly the WebApps (the crash test's check), and the journals show no
// WebApp reconciled by two processes at overlapping times.
func TestShardedReplicas(t *testing.T) {
	const (
		namespaces   = 30
		perNamespace = 20
		shards       = 12
	)
	opNS := env.Namespace(t)
	var nss []string
	for i := range namespaces {
		ns := env.Namespace(t)
		nss = append(nss, ns)
		createWebApps(t, ns, fmt.Sprintf("s%02d-", i), perNamespace)
	}
	ctx := context.Background()
	journals := t.TempDir()

	stopUsers := editReplicas(t, 7, func(rng *rand.Rand) (string, string) {
		i := rng.IntN(namespaces)
		return nss[i], fmt.Sprintf("s%02d-%03d", i, rng.IntN(perNamespace))
	})
	defer stopUsers()

	var all []*shardReplica
	target := strings.TrimPrefix(env.Server, "https://")
	launch := func(name string) *shardReplica {
		r := &shardReplica{name: name, proxy: operator.NewProxy(t, target), journal: filepath.Join(journals, name+".jsonl")}
		r.op = operator.Start(t, proxiedKubeconfig(t, r.proxy),
			// Every namespace, not --namespaces: each range's caches are
			// narrowed by the API server's shardSelector.
			fmt.Sprintf("--shards=%d", shards),
			"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS,
			"--leader-elect-lease-duration="+partitionLease.String(),
			"--leader-elect-renew-deadline="+partitionRenew.String(),
			"--leader-elect-retry-period="+partitionRetry.String(),
			"--kube-api-qps=50", "--kube-api-burst=100",
			"--reconcile-journal="+r.journal)
		all = append(all, r)
		return r
	}
	// balanced waits until the live replicas hold every range, evenly.
	balanced := func(what string, live ...*shardReplica) {
		t.Helper()
		awaitBalanced(ctx, t, shards, what, live...)
	}

	a := launch("a")
	balanced("1 replica", a)
	b, c := launch("b"), launch("c")
	balanced("3 replicas (b and c joined)", a, b, c)

	if err := c.op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("c did not stop cleanly: %v", err)
	}
	balanced("2 replicas (c stopped with SIGTERM)", a, b)
	c2 := launch("c2")
	balanced("3 replicas (c2 joined)", a, b, c2)

	_ = b.op.Stop(t, syscall.SIGKILL, 10*time.Second)
	balanced("2 replicas (b killed with SIGKILL)", a, c2)
	b2 := launch("b2")
	balanced("3 replicas (b2 joined)", a, c2, b2)

	checkPartitionedReplicaExits(t, a)
	balanced("2 replicas (a partitioned)", c2, b2)
	a.proxy.Restore()
	a2 := launch("a2")
	balanced("3 replicas (a2 joined)", c2, b2, a2)

	stopUsers()
	awaitShardedExact(ctx, t, nss, opNS)
	checkNoWebAppOverlaps(t, all, nss)
}

// shardReplica is one process of TestShardedReplicas, reaching the API
// server through proxy.
type shardReplica struct {
	name    string
	proxy   *operator.Proxy
	op      *operator.Operator
	journal string
}

// rangesHeld is how many ranges r holds: -1 once it has exited.
func rangesHeld(t *testing.T, r *shardReplica) int {
	t.Helper()
	select {
	case <-r.op.Exited():
		return -1
	default:
	}
	f := r.op.Metrics(t)["handroll_shard_ranges_held"]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0
	}
	return int(f.GetMetric()[0].GetGauge().GetValue())
}

// awaitBalanced waits until the live replicas hold every one of the shards
// ranges, none more than ceil(shards / replicas), and returns how long
// that took.
func awaitBalanced(ctx context.Context, t *testing.T, shards int, what string, live ...*shardReplica) time.Duration {
	t.Helper()
	began := time.Now()
	limit := (shards + len(live) - 1) / len(live)
	var state []string
	if err := budget.Poll(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		state = state[:0]
		total, ok := 0, true
		for _, r := range live {
			h := rangesHeld(t, r)
			state = append(state, fmt.Sprintf("%s %d", r.name, h))
			total += h
			ok = ok && h >= 1 && h <= limit
		}
		return ok && total == shards, nil
	}); err != nil {
		t.Fatalf("%s: not balanced: %s", what, strings.Join(state, ", "))
	}
	d := time.Since(began)
	t.Logf("%s: balanced in %s (%s)", what, d.Round(time.Millisecond), strings.Join(state, ", "))
	return d
}

// checkPartitionedReplicaExits cuts a off from the API server: it cannot
// renew its ranges, and must exit before a standby could take them over.
func checkPartitionedReplicaExits(t *testing.T, a *shardReplica) {
	t.Helper()
	cut := time.Now()
	a.proxy.Cut(operator.LinkBlackhole)
	select {
	case <-a.op.Exited():
	case <-time.After(budget.Scale(time.Minute)):
		t.Fatalf("the partitioned replica did not exit within %s", budget.Scale(time.Minute))
	}
	exited, _ := a.op.ExitedAt()
	if d := exited.Sub(cut); d >= partitionLease {
		t.Errorf("the partitioned replica exited %s after the cut, not before its Leases could expire (%s)", d, partitionLease)
	}
	t.Logf("the partitioned replica exited %s after the cut", exited.Sub(cut).Round(time.Millisecond))
}

// awaitShardedExact waits until check finds nothing amiss in nss.
func awaitShardedExact(ctx context.Context, t *testing.T, nss []string, opNS string) {
	t.Helper()
	err := budget.Poll(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		problems, err := check(ctx, t, nss, opNS, map[string]bool{})
		if err != nil {
			return false, err
		}
		if len(problems) > 0 {
			t.Logf("not yet: %d problems, first %s", len(problems), problems[0])
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		problems, _ := check(ctx, t, nss, opNS, map[string]bool{})
		t.Fatalf("the WebApps did not converge exactly: %v; %d problems: %v", err, len(problems), problems[:min(len(problems), 20)])
	}
}

// checkNoWebAppOverlaps checks, from every process's journal, that no two
// processes' reconciles of one WebApp in nss overlap. A process still
// running counts its open reconciles as running until now.
func checkNoWebAppOverlaps(t *testing.T, all []*shardReplica, nss []string) {
	t.Helper()
	byKey := map[string][]operator.ReconcileInterval{}
	var everything []controller.JournalEntry
	processes, reconciles := 0, 0
	for _, r := range all {
		exited, ok := r.op.ExitedAt()
		if !ok {
			exited = time.Now()
		}
		entries, err := operator.ReadJournal(r.journal)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > 0 {
			processes++
		}
		for _, iv := range operator.ReconcileIntervals(entries, exited) {
			// Earlier tests' WebApps, in their terminating namespaces, are
			// reconciled too (and fail there): ours only.
			if ns, _, _ := strings.Cut(iv.Key, "/"); !slices.Contains(nss, ns) {
				continue
			}
			byKey[iv.Key] = append(byKey[iv.Key], iv)
			reconciles++
		}
		everything = append(everything, entries...)
	}
	logHandovers(t, everything)
	var overlaps []string
	for _, ivs := range byKey {
		overlaps = append(overlaps, operator.Overlapping(ivs)...)
	}
	if len(overlaps) > 0 {
		t.Errorf("%d WebApps reconciled by two processes at overlapping times, first: %s", len(overlaps), overlaps[0])
	}
	t.Logf("%d reconciles of %d WebApps by %d processes, %d overlapping", reconciles, len(byKey), processes, len(overlaps))
}

// logHandovers measures, for each time a range's reconciles moved from one
// process to another, the time from the last reconcile's end on the old
// holder to the first reconcile's start on the new one: a graceful
// hand-over's drain and release, or a dead holder's Lease expiry, plus the
// new holder's list of the range.
func logHandovers(t *testing.T, entries []controller.JournalEntry) {
	t.Helper()
	slices.SortFunc(entries, func(a, b controller.JournalEntry) int { return a.Time.Compare(b.Time) })
	type last struct {
		replica string
		end     time.Time
	}
	byRange := map[string]last{}
	var gaps []time.Duration
	for _, e := range entries {
		if !strings.HasPrefix(e.Controller, webapp.ControllerName+"-") {
			continue // the directory's controllers too run per range
		}
		prev, seen := byRange[e.Controller]
		switch e.Event {
		case "start":
			if seen && prev.replica != e.Replica {
				gaps = append(gaps, e.Time.Sub(prev.end))
			}
			if !seen || prev.replica != e.Replica {
				byRange[e.Controller] = last{replica: e.Replica, end: e.Time}
			}
		case "end":
			if seen && prev.replica == e.Replica {
				byRange[e.Controller] = last{replica: e.Replica, end: e.Time}
			}
		}
	}
	if len(gaps) == 0 {
		t.Errorf("no range changed hands in the journals")
		return
	}
	slices.Sort(gaps)
	t.Logf("%d hand-overs, from the old holder's last reconcile to the new one's first: median %s, p90 %s, max %s",
		len(gaps), gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)*9/10].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
}

// editReplicas is users at work: every 50 ms until the returned function is
// called (which may be called again), it sets a random spec.replicas on the
// WebApp pick chooses, retrying conflicts.
func editReplicas(t *testing.T, seed uint64, pick func(*rand.Rand) (namespace, name string)) (stop func()) {
	t.Helper()
	ctx := context.Background()
	hc := env.HandrollClient(t)
	done := make(chan struct{})
	var users sync.WaitGroup
	users.Go(func() {
		rng := rand.New(rand.NewPCG(seed, seed+1))
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ns, name := pick(rng)
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				w, err := hc.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				w.Spec.Replicas = ptr.To(int32(rng.IntN(3)))
				_, err = hc.HandrollV1().WebApps(ns).Update(ctx, w, metav1.UpdateOptions{})
				return err
			})
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		users.Wait()
	}
}
