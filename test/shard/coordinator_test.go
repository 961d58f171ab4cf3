package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
)

// record is one stretch of a range's work on one replica.
type record struct {
	replica    string
	start, end time.Time // end zero while running
}

type ledger struct {
	mu      sync.Mutex
	byRange map[int][]*record
	// slow, when set, is how long a range's work drains on a replica
	// ("replica/index"); 50 ms otherwise.
	slow map[string]time.Duration
}

func (l *ledger) work(replica string) func(ctx context.Context, r shard.Range) error {
	return func(ctx context.Context, r shard.Range) error {
		rec := &record{replica: replica, start: time.Now()}
		l.mu.Lock()
		l.byRange[r.Index] = append(l.byRange[r.Index], rec)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		drain, ok := l.slow[fmt.Sprintf("%s/%d", replica, r.Index)]
		l.mu.Unlock()
		if !ok {
			drain = 50 * time.Millisecond
		}
		time.Sleep(drain) // in-flight work draining
		l.mu.Lock()
		rec.end = time.Now()
		l.mu.Unlock()
		return nil
	}
}

// holders returns the replica running each range now ("" for none, "+" for
// more than one).
func (l *ledger) holders(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, n)
	for i := range n {
		for _, rec := range l.byRange[i] {
			if rec.end.IsZero() {
				if out[i] != "" {
					out[i] = "+"
				} else {
					out[i] = rec.replica
				}
			}
		}
	}
	return out
}

// overlaps reports every two stretches of one range on different replicas
// that overlap in time.
func (l *ledger) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, recs := range l.byRange {
		for a := range recs {
			for b := a + 1; b < len(recs); b++ {
				x, y := recs[a], recs[b]
				xEnd, yEnd := x.end, y.end
				if xEnd.IsZero() {
					xEnd = time.Now()
				}
				if yEnd.IsZero() {
					yEnd = time.Now()
				}
				if x.start.Before(yEnd) && y.start.Before(xEnd) {
					out = append(out, fmt.Sprintf("range %d: %s [%s, %s] and %s [%s, %s]", i, x.replica, x.start.Format("15:04:05.000"), xEnd.Format("15:04:05.000"), y.replica, y.start.Format("15:04:05.000"), yEnd.Format("15:04:05.000")))
				}
			}
		}
	}
	return out
}

// TestCoordinatorsSplitAndHandOverRanges: 12 ranges, replicas joining one
// by one, then one leaving gracefully. Every range ends up run by exactly
// one replica, no replica runs more than ceil(12 / replicas), and no range
// ever runs on two replicas at overlapping times.
func TestCoordinatorsSplitAndHandOverRanges(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	l := &ledger{byRange: map[int][]*record{}}
	opts := leader.DefaultOptions()
	opts.LeaseNamespace = ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 2*time.Second, 500*time.Millisecond

	type replica struct {
		cancel context.CancelFunc
		done   chan struct{}
		err    *error // Run's result, once done is closed
	}
	start := func(id string) replica {
		c := newCoordinator(client, ns, id, n, opts, l.work(id))
		ctx, cancel := context.WithCancel(context.Background())
		r := replica{cancel: cancel, done: make(chan struct{}), err: new(error)}
		go func() { defer close(r.done); *r.err = c.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			select {
			case <-r.done:
			case <-time.After(budget.Scale(30 * time.Second)):
				t.Errorf("%s: Run did not return after its context ended", id)
			}
		})
		return r
	}
	balanced := func(what string, replicas ...string) {
		t.Helper()
		limit := (n + len(replicas) - 1) / len(replicas)
		deadline := time.Now().Add(budget.Scale(60 * time.Second))
		for {
			hs := l.holders(n)
			count := map[string]int{}
			ok := true
			for _, h := range hs {
				count[h]++
				if h == "" || h == "+" {
					ok = false
				}
			}
			for _, id := range replicas {
				if count[id] > limit || count[id] == 0 {
					ok = false
				}
			}
			if ok && len(count) == len(replicas) {
				t.Logf("%s: %v", what, hs)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: ranges run by %v, want each of %v on at most %d", what, hs, replicas, limit)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	a := start("replica-a")
	balanced("one replica", "replica-a")
	began := time.Now()
	start("replica-b")
	balanced("two replicas", "replica-a", "replica-b")
	t.Logf("balanced over two replicas %s after the second started", time.Since(began).Round(time.Millisecond))
	start("replica-c")
	balanced("three replicas", "replica-a", "replica-b", "replica-c")

	// a leaves gracefully: its ranges go to the others.
	began = time.Now()
	a.cancel()
	<-a.done
	if *a.err != nil {
		t.Fatalf("a's Run: %v", *a.err)
	}
	balanced("after a left", "replica-b", "replica-c")
	t.Logf("balanced over two replicas %s after a stopped", time.Since(began).Round(time.Millisecond))

	if o := l.overlaps(); len(o) > 0 {
		t.Errorf("ranges ran on two replicas at once:\n%v", o)
	}
}

// TestStoppingReplicaHandsOverEachRangeOnceDrained: a replica stopping
// gracefully hands over each range as soon as that range's own work has
// drained, not once its slowest range has: the others take its drained
// ranges while one of them still drains, and no range runs twice at once.
func TestStoppingReplicaHandsOverEachRangeOnceDrained(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client := env.KubeClient(t)
	const n = 4
	opts := leader.DefaultOptions()
	opts.LeaseNamespace = ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 2*time.Second, 300*time.Millisecond
	l := &ledger{byRange: map[int][]*record{}, slow: map[string]time.Duration{}}
	run := func(id string) (stop context.CancelFunc, done chan struct{}) {
		c := newCoordinator(client, ns, id, n, opts, l.work(id))
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return cancel, done
	}
	waitFor := func(what string, timeout time.Duration, ok func([]string) bool) []string {
		t.Helper()
		deadline := time.Now().Add(budget.Scale(timeout))
		for {
			hs := l.holders(n)
			if ok(hs) {
				return hs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; ranges run by %v", what, timeout, hs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	count := func(hs []string, id string) int {
		k := 0
		for _, h := range hs {
			if h == id {
				k++
			}
		}
		return k
	}
	stopA, doneA := run("replica-a")
	run("replica-b")
	hs := waitFor("two replicas with two ranges each", time.Minute, func(hs []string) bool {
		return count(hs, "replica-a") == 2 && count(hs, "replica-b") == 2
	})
	var aRanges []int
	for i, h := range hs {
		if h == "replica-a" {
			aRanges = append(aRanges, i)
		}
	}
	slow, quick := aRanges[0], aRanges[1]
	const slowDrain = 8 * time.Second
	l.mu.Lock()
	l.slow[fmt.Sprintf("replica-a/%d", slow)] = slowDrain
	l.mu.Unlock()

	began := time.Now()
	stopA()
	waitFor(fmt.Sprintf("b runs range %d, which a drained at once", quick), slowDrain, func(hs []string) bool { return hs[quick] == "replica-b" })
	took := time.Since(began)
	if hs := l.holders(n); hs[slow] != "replica-a" {
		t.Errorf("range %d is run by %q, want a, still draining it", slow, hs[slow])
	}
	t.Logf("b took range %d %s after a began to stop, while a still drained range %d", quick, took.Round(time.Millisecond), slow)
	<-doneA
	waitFor("b runs every range once a is gone", 30*time.Second, func(hs []string) bool { return count(hs, "replica-b") == n })
	if o := l.overlaps(); len(o) > 0 {
		t.Errorf("ranges ran on two replicas at once:\n%v", o)
	}
}

// newCoordinator is replica id's Coordinator of n ranges, its Leases in ns,
// with the tests' short intervals.
func newCoordinator(client kubernetes.Interface, ns, id string, n int, opts leader.Options, work func(context.Context, shard.Range) error) *shard.Coordinator {
	ranges, _ := shard.Ranges(n)
	return &shard.Coordinator{
		Ranges:   ranges,
		Members:  &shard.Members{Client: client.CoordinationV1(), Namespace: ns, Group: "handroll-leader", Identity: id, Duration: 3 * time.Second, Split: strconv.Itoa(n)},
		Election: opts,
		NewElector: func(o leader.Options) (*leader.Elector, error) {
			return leader.New(env.Config, o, prometheus.NewRegistry())
		},
		Work:     work,
		Interval: 300 * time.Millisecond,
	}
}

// TestLedgerFindsOverlaps: the overlap check above is able to fail.
func TestLedgerFindsOverlaps(t *testing.T) {
	t0 := time.Now()
	l := &ledger{byRange: map[int][]*record{
		0: {{replica: "a", start: t0, end: t0.Add(time.Second)}, {replica: "b", start: t0.Add(time.Second + time.Millisecond)}},
		1: {{replica: "a", start: t0, end: t0.Add(time.Second)}, {replica: "b", start: t0.Add(999 * time.Millisecond), end: t0.Add(2 * time.Second)}},
	}}
	if o := l.overlaps(); len(o) != 1 || !strings.HasPrefix(o[0], "range 1:") {
		t.Errorf("overlaps = %q, want range 1's alone", o)
	}
}

// TestCoordinatorsWithAnotherSplitHoldNothing: replicas that split the
// WebApps differently (12 ranges and 8) hold different Leases for the same
// WebApps, so neither may hold any range while it sees the other; once
// the other is gone, the ranges are taken again.
func TestCoordinatorsWithAnotherSplitHoldNothing(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ns := env.Namespace(t)
	client := env.KubeClient(t)
	opts := leader.DefaultOptions()
	opts.LeaseNamespace = ns
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 2*time.Second, 500*time.Millisecond
	run := func(id string, n int, l *ledger) (stop func()) {
		c := newCoordinator(client, ns, id, n, opts, l.work(id))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		return stop
	}
	count := func(l *ledger, n int, id string) int {
		k := 0
		for _, h := range l.holders(n) {
			if h == id {
				k++
			}
		}
		return k
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(budget.Scale(30 * time.Second))
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, budget.Scale(30*time.Second))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	twelve := &ledger{byRange: map[int][]*record{}}
	eight := &ledger{byRange: map[int][]*record{}}
	run("replica-a", 12, twelve)
	waitFor("a holds its 12 ranges", func() bool { return count(twelve, 12, "replica-a") == 12 })

	stopX := run("replica-x", 8, eight)
	waitFor("a lets go of every range", func() bool { return count(twelve, 12, "replica-a") == 0 })
	// x never takes any while a is live: it saw a's split at once.
	time.Sleep(time.Second)
	if k := count(eight, 8, "replica-x"); k != 0 || len(eight.byRange) != 0 {
		t.Errorf("x, splitting 8 ways, ran %d ranges (%d ever) beside a, splitting 12 ways", k, len(eight.byRange))
	}

	stopX()
	waitFor("a takes its ranges again once x is gone", func() bool { return count(twelve, 12, "replica-a") == 12 })
}
