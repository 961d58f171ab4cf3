package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func key(name string) Request { return Request{Namespace: "ns", Name: name} }

// handed is a key as a worker got it.
type handed struct {
	Req  Request
	Prio Priority
}

func newTestQueue(t *testing.T) *priorityWorkqueue {
	t.Helper()
	q := newPriorityWorkqueue("", newRecordingLimiter(), nil)
	t.Cleanup(q.ShutDown)
	return q
}

// next takes the next key, failing the test if none comes or the queue is
// shut down.
func next(t *testing.T, q *priorityWorkqueue) handed {
	t.Helper()
	ch := make(chan handed, 1)
	go func() {
		req, p, shutdown := q.GetWithPriority()
		if shutdown {
			close(ch)
			return
		}
		ch <- handed{req, p}
	}()
	select {
	case h, ok := <-ch:
		if !ok {
			t.Fatal("GetWithPriority: the queue is shut down")
		}
		return h
	case <-time.After(waitBound):
		t.Fatalf("no key ready within %s", waitBound)
		panic("unreachable")
	}
}

// drain takes n keys, marking each Done at once.
func drain(t *testing.T, q *priorityWorkqueue, n int) []handed {
	t.Helper()
	var out []handed
	for range n {
		h := next(t, q)
		q.Done(h.Req)
		out = append(out, h)
	}
	if l := q.Len(); l != 0 {
		t.Errorf("after %d keys, Len = %d, want 0", n, l)
	}
	return out
}

// Progress keys go before every high and low one, FIFO among themselves;
// a queued key raised to progress goes to the end of its lane.
func TestPriorityQueueHandsOutProgressFirst(t *testing.T) {
	q := newTestQueue(t)
	q.Add(key("h1"))
	q.AddWithPriority(key("l1"), PriorityLow)
	q.AddWithPriority(key("p1"), PriorityProgress)
	q.Add(key("h2"))
	q.AddWithPriority(key("p2"), PriorityProgress+50) // from PriorityProgress up: progress
	q.AddWithPriority(key("h1"), PriorityProgress)    // raised from high
	q.AddWithPriority(key("l1"), PriorityProgress)    // raised from low
	q.AddWithPriority(key("p1"), PriorityLow)         // never lowered
	if progress, high, low := q.store.depths(); progress != 4 || high != 1 || low != 0 {
		t.Errorf("depths = %d progress, %d high, %d low; want 4, 1, 0", progress, high, low)
	}
	want := []handed{
		{key("p1"), PriorityProgress}, {key("p2"), PriorityProgress}, {key("h1"), PriorityProgress}, {key("l1"), PriorityProgress},
		{key("h2"), PriorityHigh},
	}
	if diff := cmp.Diff(want, drain(t, q, len(want))); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPriorityQueueHandsOutHighBeforeLowFIFOWithin(t *testing.T) {
	q := newTestQueue(t)
	q.AddWithPriority(key("l1"), PriorityLow)
	q.Add(key("h1"))
	q.AddWithPriority(key("l2"), PriorityLow)
	q.AddWithPriority(key("h2"), PriorityHigh)
	q.AddWithPriority(key("l3"), PriorityLow)
	q.AddWithPriority(key("below"), -5) // below PriorityHigh: low
	q.AddWithPriority(key("above"), 7)  // above: high
	if _, high, low := q.store.depths(); high != 3 || low != 4 {
		t.Errorf("depths = %d high, %d low; want 3, 4", high, low)
	}
	want := []handed{
		{key("h1"), PriorityHigh}, {key("h2"), PriorityHigh}, {key("above"), PriorityHigh},
		{key("l1"), PriorityLow}, {key("l2"), PriorityLow}, {key("l3"), PriorityLow}, {key("below"), PriorityLow},
	}
	if diff := cmp.Diff(want, drain(t, q, len(want))); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPriorityQueueDeduplicatesKeepingTheHigherPriority(t *testing.T) {
	q := newTestQueue(t)
	q.Add(key("a"))
	q.AddWithPriority(key("b"), PriorityLow)
	q.AddWithPriority(key("a"), PriorityLow) // a low add of a key queued high
	q.AddWithPriority(key("b"), PriorityLow)
	q.AddWithPriority(key("b"), PriorityLow)
	q.Add(key("c"))
	q.Add(key("a")) // an equal one: a keeps its place, ahead of c
	if l := q.Len(); l != 3 {
		t.Errorf("Len = %d, want 3", l)
	}
	want := []handed{{key("a"), PriorityHigh}, {key("c"), PriorityHigh}, {key("b"), PriorityLow}}
	if diff := cmp.Diff(want, drain(t, q, 3)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPriorityQueueRaisesAQueuedLowKey(t *testing.T) {
	q := newTestQueue(t)
	for _, n := range []string{"a", "b", "c"} {
		q.AddWithPriority(key(n), PriorityLow)
	}
	q.Add(key("h"))
	q.Add(key("b")) // raised: to the end of the high keys, as in controller-runtime
	if _, high, low := q.store.depths(); high != 2 || low != 2 {
		t.Errorf("depths = %d high, %d low; want 2, 2", high, low)
	}
	want := []handed{{key("h"), PriorityHigh}, {key("b"), PriorityHigh}, {key("a"), PriorityLow}, {key("c"), PriorityLow}}
	if diff := cmp.Diff(want, drain(t, q, 4)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPriorityQueueKeyAddedWhileProcessing(t *testing.T) {
	q := newTestQueue(t)
	a, b := key("a"), key("b")
	q.AddWithPriority(a, PriorityLow)
	if got := next(t, q); got != (handed{a, PriorityLow}) {
		t.Fatalf("got %v, want a low", got)
	}
	// While a is processed it is held back, whatever its adds.
	q.AddWithPriority(a, PriorityLow)
	q.Add(a)
	q.AddWithPriority(a, PriorityLow)
	q.AddWithPriority(b, PriorityLow)
	if l := q.Len(); l != 1 {
		t.Errorf("Len = %d while a is processed, want 1 (b)", l)
	}
	if got := next(t, q); got != (handed{b, PriorityLow}) {
		t.Fatalf("got %v, want b: a is still being processed", got)
	}
	q.Done(b)
	// At Done it comes back at the highest priority it was added with.
	q.Done(a)
	if got := next(t, q); got != (handed{a, PriorityHigh}) {
		t.Fatalf("got %v, want a high", got)
	}
	// Added only low meanwhile, it comes back low.
	q.AddWithPriority(a, PriorityLow)
	q.Done(a)
	if got := next(t, q); got != (handed{a, PriorityLow}) {
		t.Fatalf("got %v, want a low", got)
	}
	q.Done(a)
	if l := q.Len(); l != 0 {
		t.Errorf("Len = %d, want 0", l)
	}
}

// TestPriorityQueueNeverHandsAKeyToTwoWorkers hammers the queue from many
// goroutines (run it with -race): adders at random priorities, and workers
// that, like the controller, retry some keys while they hold them. No key
// may be held by two workers at once, and once all is quiet the queue's
// bookkeeping must be empty.
func TestPriorityQueueNeverHandsAKeyToTwoWorkers(t *testing.T) {
	limiter := newRecordingLimiter()
	limiter.delay = 0 // retries come back at once, while the key is held
	metrics, err := newWorkqueueMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	q := newPriorityWorkqueue("hammer", limiter, metrics)
	defer q.ShutDown()

	run := &hammerRun{held: map[Request]bool{}, perPrio: map[Priority]int{}}
	run.retrying.Store(true)
	var wg sync.WaitGroup
	for range hammerWorkers {
		wg.Go(func() { run.work(q) })
	}
	addAtRandom(q)
	run.retrying.Store(false)

	waitForQuietQueue(t, q, run)
	checkQuietQueueStillLive(t, q, run)
	q.ShutDown()
	wg.Wait()

	checkHammerRun(t, q, run)
}

// The hammering: how many keys, workers and adders, and adds per adder.
const (
	hammerKeys    = 16
	hammerWorkers = 8
	hammerAdders  = 4
	hammerAdds    = 2000
)

// hammerRun is what the hammering workers saw, and whether they still retry.
type hammerRun struct {
	mu         sync.Mutex
	held       map[Request]bool
	violations []Request
	perPrio    map[Priority]int
	lowOnlyUp  []Request // low-only keys handed out high
	processed  atomic.Int64
	retrying   atomic.Bool
}

// work is one worker: it records each key it holds, and while retrying
// retries some of them, until the queue shuts down.
func (r *hammerRun) work(q *priorityWorkqueue) {
	for {
		req, p, shutdown := q.GetWithPriority()
		if shutdown {
			return
		}
		r.mu.Lock()
		if r.held[req] {
			r.violations = append(r.violations, req)
		}
		r.held[req] = true
		r.perPrio[p]++
		if n, _ := strconv.Atoi(req.Name); n < hammerKeys/2 && p != PriorityLow && r.retrying.Load() {
			r.lowOnlyUp = append(r.lowOnlyUp, req)
		}
		r.mu.Unlock()

		// Retries at the priority handed out, as the controller does:
		// at once, while the key is held; or, for the keys added at
		// random, also after a real delay. (A delayed add whose
		// priority an earlier one of the key took as it fired comes
		// back high: that race would trip the check on the low-only
		// keys.)
		if r.retrying.Load() {
			switch rand.IntN(8) {
			case 0:
				q.AddRateLimitedWithPriority(req, p)
			case 1:
				q.AddAfterWithPriority(req, 0, p)
			case 2:
				if n, _ := strconv.Atoi(req.Name); n >= hammerKeys/2 {
					q.AddAfterWithPriority(req, time.Duration(rand.IntN(1000))*time.Microsecond, p)
				}
			}
		}
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
		}

		r.mu.Lock()
		r.held[req] = false
		r.mu.Unlock()
		r.processed.Add(1)
		q.Done(req)
	}
}

// addAtRandom runs the adders and waits for them to finish.
func addAtRandom(q *priorityWorkqueue) {
	var addWG sync.WaitGroup
	for range hammerAdders {
		addWG.Go(func() {
			for range hammerAdds {
				// Half the keys are only ever added low. The others, added at
				// random, are nearly always raised before a worker takes them.
				i := rand.IntN(hammerKeys)
				switch req := key(fmt.Sprint(i)); {
				case i < hammerKeys/2 || rand.IntN(2) == 0:
					q.AddWithPriority(req, PriorityLow)
				case rand.IntN(4) == 0:
					q.AddWithPriority(req, PriorityProgress)
				default:
					q.Add(req)
				}
			}
		})
	}
	addWG.Wait()
}

// quiet reports whether nothing is ready, held or delayed.
func (r *hammerRun) quiet(q *priorityWorkqueue) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.held {
		if h {
			return false
		}
	}
	q.delayMu.Lock()
	defer q.delayMu.Unlock()
	return q.Len() == 0 && len(q.delayedAt) == 0
}

// waitForQuietQueue waits until the queue stays quiet for a while (the
// delays are under a millisecond).
func waitForQuietQueue(t *testing.T, q *priorityWorkqueue, r *hammerRun) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for stable := 0; stable < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the queue never went quiet")
		}
		if r.quiet(q) {
			stable++
		} else {
			stable = 0
		}
	}
}

// checkQuietQueueStillLive checks that every key added to the quiet queue
// is handed out, then waits for it to be quiet again.
func checkQuietQueueStillLive(t *testing.T, q *priorityWorkqueue, r *hammerRun) {
	t.Helper()
	before := r.processed.Load()
	for i := range hammerKeys {
		q.Add(key(fmt.Sprint(i)))
	}
	for deadline := time.Now().Add(waitBound); r.processed.Load() < before+hammerKeys; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processed %d of the %d keys added to the quiet queue", r.processed.Load()-before, hammerKeys)
		}
	}
	for !r.quiet(q) {
		time.Sleep(time.Millisecond)
	}
}

// checkHammerRun checks what the workers saw, and that the queue's
// bookkeeping is empty.
func checkHammerRun(t *testing.T, q *priorityWorkqueue, r *hammerRun) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Errorf("keys handed to a second worker while held: %v", r.violations)
	}
	if r.perPrio[PriorityProgress] == 0 || r.perPrio[PriorityHigh] == 0 || r.perPrio[PriorityLow] == 0 {
		t.Errorf("keys handed out per priority: %v; want all three", r.perPrio)
	}
	if len(r.lowOnlyUp) > 0 {
		t.Errorf("keys only ever added low were handed out high: %v", r.lowOnlyUp)
	}
	s := q.store
	s.mu.Lock()
	defer s.mu.Unlock()
	lanes := []int{s.lanes[levelLow].Len(), s.lanes[levelHigh].Len(), s.lanes[levelProgress].Len()}
	if len(s.queued) != 0 || len(s.adding) != 0 || len(s.next) != 0 || len(s.processing) != 0 || len(s.popped) != 0 ||
		slices.ContainsFunc(lanes, func(n int) bool { return n != 0 }) {
		t.Errorf("store not empty when quiet: queued %v, adding %v, next %v, processing %v, popped %v, lanes (low, high, progress) %v",
			s.queued, s.adding, s.next, s.processing, s.popped, lanes)
	}
}

func TestPriorityQueueDelayedAddsKeepTheirPriority(t *testing.T) {
	q := newTestQueue(t)
	limiter := q.limiter.(*recordingLimiter)

	q.AddAfterWithPriority(key("a"), 5*time.Millisecond, PriorityLow)
	if got := next(t, q); got != (handed{key("a"), PriorityLow}) {
		t.Errorf("AddAfterWithPriority low: got %v", got)
	}
	q.Done(key("a"))

	q.AddRateLimitedWithPriority(key("b"), PriorityLow)
	if got := next(t, q); got != (handed{key("b"), PriorityLow}) {
		t.Errorf("AddRateLimitedWithPriority low: got %v", got)
	}
	q.Done(key("b"))
	if when, _ := limiter.counts(key("b")); when != 1 {
		t.Errorf("the rate limiter was asked %d times for b, want 1", when)
	}

	// The plain methods are high, as in controller-runtime.
	q.AddRateLimited(key("c"))
	q.AddAfter(key("d"), 0) // no delay: queued at once
	if got := drain(t, q, 2); !cmp.Equal(got, []handed{{key("d"), PriorityHigh}, {key("c"), PriorityHigh}}) &&
		!cmp.Equal(got, []handed{{key("c"), PriorityHigh}, {key("d"), PriorityHigh}}) {
		t.Errorf("AddRateLimited, AddAfter: got %v, want c and d high", got)
	}

	// A key delayed twice comes once: at the earlier time, at the higher
	// priority.
	q.AddAfterWithPriority(key("e"), 30*time.Millisecond, PriorityHigh)
	q.AddAfterWithPriority(key("e"), 5*time.Millisecond, PriorityLow)
	if got := next(t, q); got != (handed{key("e"), PriorityHigh}) {
		t.Errorf("delayed twice: got %v, want e high", got)
	}
	q.Done(key("e"))
	time.Sleep(60 * time.Millisecond)
	if l := q.Len(); l != 0 {
		t.Errorf("Len = %d after the later delay of e, want 0: it was merged", l)
	}

	// A high retry overtakes a low backlog.
	for _, n := range []string{"x1", "x2", "x3"} {
		q.AddWithPriority(key(n), PriorityLow)
	}
	q.AddRateLimitedWithPriority(key("y"), PriorityHigh)
	for deadline := time.Now().Add(waitBound); q.Len() < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the retry of y never arrived")
		}
	}
	if got := next(t, q); got != (handed{key("y"), PriorityHigh}) {
		t.Errorf("high retry behind a low backlog: got %v first, want y", got)
	}
	q.Done(key("y"))
	drain(t, q, 3)
}

func TestPriorityQueueShutDown(t *testing.T) {
	t.Run("ready keys are still handed out, in order", func(t *testing.T) {
		q := newTestQueue(t)
		q.AddWithPriority(key("a"), PriorityLow)
		q.Add(key("b"))
		q.ShutDown()
		q.Add(key("c"))
		q.AddAfter(key("d"), 0)
		q.AddRateLimited(key("e"))
		if !q.ShuttingDown() {
			t.Error("ShuttingDown = false after ShutDown")
		}
		want := []handed{{key("b"), PriorityHigh}, {key("a"), PriorityLow}}
		if diff := cmp.Diff(want, drain(t, q, 2)); diff != "" {
			t.Errorf("after ShutDown (-want +got):\n%s", diff)
		}
		if _, _, shutdown := q.GetWithPriority(); !shutdown {
			t.Error("Get after the last ready key: shutdown = false")
		}
		q.ShutDown() // twice is harmless
	})

	t.Run("an idle Get wakes up", func(t *testing.T) {
		q := newTestQueue(t)
		done := make(chan bool)
		go func() {
			_, _, shutdown := q.GetWithPriority()
			done <- shutdown
		}()
		time.Sleep(10 * time.Millisecond)
		q.ShutDown()
		if !receive(t, done, "the blocked Get") {
			t.Error("blocked Get returned shutdown = false")
		}
	})

	t.Run("ShutDownWithDrain waits for the keys handed out", func(t *testing.T) {
		q := newTestQueue(t)
		q.Add(key("a"))
		a := next(t, q)
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		select {
		case <-drained:
			t.Fatal("ShutDownWithDrain returned while a was being processed")
		case <-time.After(50 * time.Millisecond):
		}
		q.Add(key("b")) // ignored: shutting down
		q.Done(a.Req)
		receive(t, drained, "ShutDownWithDrain")
		if _, _, shutdown := q.GetWithPriority(); !shutdown {
			t.Error("Get after the drain: shutdown = false")
		}
	})
}

// TestPriorityQueueMetricsMatchClientGos runs one script on the priority
// queue and on client-go's rate-limiting queue, each with its own registry,
// and compares every workqueue metric.
func TestPriorityQueueMetricsMatchClientGos(t *testing.T) {
	script := func(q workqueue.TypedRateLimitingInterface[Request], addLow func(Request)) {
		getDone := func() Request {
			req, _ := q.Get()
			q.Done(req)
			return req
		}
		addLow(key("a"))
		addLow(key("b"))
		q.Add(key("c"))
		addLow(key("a")) // de-duplicated
		q.Add(key("b"))  // de-duplicated (raised, for ours)
		req, _ := q.Get()
		addLow(req) // while processing
		q.Add(req)
		q.Done(req)
		for q.Len() > 0 {
			getDone()
		}
		q.AddAfter(key("d"), 0)
		q.AddRateLimited(key("e"))
		q.AddAfter(key("f"), time.Millisecond)
		for deadline := time.Now().Add(waitBound); q.Len() < 3 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		for q.Len() > 0 {
			getDone()
		}
		q.ShutDown()
		addLow(key("left")) // ignored
	}

	const name = "same"
	theirs, ours := prometheus.NewRegistry(), prometheus.NewRegistry()
	theirMetrics, err := newWorkqueueMetrics(theirs)
	if err != nil {
		t.Fatal(err)
	}
	ourMetrics, err := newWorkqueueMetrics(ours)
	if err != nil {
		t.Fatal(err)
	}
	cg := workqueue.NewTypedRateLimitingQueueWithConfig[Request](newRecordingLimiter(),
		workqueue.TypedRateLimitingQueueConfig[Request]{Name: name, MetricsProvider: theirMetrics})
	script(cg, cg.Add)
	pq := newPriorityWorkqueue(name, newRecordingLimiter(), ourMetrics)
	script(pq, func(req Request) { pq.AddWithPriority(req, PriorityLow) })

	labels := map[string]string{"name": name, "controller": name}
	depth := map[string]string{"name": name, "controller": name, "priority": ""}
	for metric, l := range map[string]map[string]string{
		"workqueue_adds_total":             labels,
		"workqueue_depth":                  depth,
		"workqueue_retries_total":          labels,
		"workqueue_queue_duration_seconds": labels,
		"workqueue_work_duration_seconds":  labels,
	} {
		want, got := metricValue(t, theirs, metric, l), metricValue(t, ours, metric, l)
		if got != want {
			t.Errorf("%s = %v, client-go's queue: %v", metric, got, want)
		}
	}
	metricValue(t, ours, "workqueue_unfinished_work_seconds", labels)
	metricValue(t, ours, "workqueue_longest_running_processor_seconds", labels)
	if v := metricValue(t, ours, "workqueue_adds_total", labels); v != 7 {
		t.Errorf("adds = %v, want 7 (a, b, c, the add while processing, d, e, f; none after the shutdown)", v)
	}
	if v := metricValue(t, ours, "workqueue_depth", depth); v != 0 {
		t.Errorf("depth = %v, want 0", v)
	}
}

// priorityRecorder is a PriorityQueue that records every add.
type priorityRecorder struct {
	mu   sync.Mutex
	adds []handed
}

func (q *priorityRecorder) Add(req Request) {
	q.AddWithPriority(req, PriorityHigh)
}

func (q *priorityRecorder) AddWithPriority(req Request, p Priority) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.adds = append(q.adds, handed{req, p})
}

func (q *priorityRecorder) take() []handed {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.adds
	q.adds = nil
	return out
}

// lowFanOut queues its object high and a related key low, whatever the event.
type lowFanOut struct{}

func (lowFanOut) Create(_ context.Context, obj metav1.Object, q Queue) {
	q.Add(keyOf(obj))
	q.(PriorityQueue).AddWithPriority(Request{Namespace: obj.GetNamespace(), Name: "related"}, PriorityLow)
}
func (h lowFanOut) Update(ctx context.Context, _, n metav1.Object, q Queue) { h.Create(ctx, n, q) }
func (h lowFanOut) Delete(ctx context.Context, obj metav1.Object, q Queue)  { h.Create(ctx, obj, q) }

func TestEventHandlerQueuesAtTheEventsPriority(t *testing.T) {
	withRV := func(rv string) func(*corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) { cm.ResourceVersion = rv }
	}
	owned := ownedBy(ref("handroll.dev/v1", "WebApp", "owner", true))
	cm := func(rv string) *corev1.ConfigMap { return configMap("ns", "cm", withRV(rv), owned) }
	events := []struct {
		name string
		fire func(e *eventHandler)
		prio Priority
	}{
		{"initial list", func(e *eventHandler) { e.OnAdd(cm("1"), true) }, PriorityLow},
		{"create", func(e *eventHandler) { e.OnAdd(cm("1"), false) }, PriorityHigh},
		{"resync", func(e *eventHandler) { e.OnUpdate(cm("1"), cm("1")) }, PriorityLow},
		{"update", func(e *eventHandler) { e.OnUpdate(cm("1"), cm("2")) }, PriorityHigh},
		{"update without resourceVersions", func(e *eventHandler) { e.OnUpdate(cm(""), cm("")) }, PriorityHigh},
		{"delete", func(e *eventHandler) { e.OnDelete(cm("2")) }, PriorityHigh},
		{"tombstone", func(e *eventHandler) {
			e.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/cm", Obj: cm("2")})
		}, PriorityHigh},
	}
	handlers := []struct {
		name    string
		handler Handler
		want    string // every key queued; an update may queue it twice
	}{
		{"EnqueueObject", EnqueueObject(), "cm"},
		{"EnqueueOwner", EnqueueOwner(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, true), "owner"},
		{"EnqueueMapped", EnqueueMapped(func(_ context.Context, obj metav1.Object) []Request {
			return []Request{{Namespace: obj.GetNamespace(), Name: "mapped-from-" + obj.GetName()}}
		}), "mapped-from-cm"},
	}
	for _, h := range handlers {
		for _, ev := range events {
			t.Run(h.name+"/"+ev.name, func(t *testing.T) {
				q := &priorityRecorder{}
				ev.fire(newEventHandler(h.handler, q))
				got := q.take()
				if len(got) == 0 {
					t.Fatal("nothing queued")
				}
				for _, a := range got {
					if a != (handed{key(h.want), ev.prio}) {
						t.Errorf("queued %v, want %s at %v", a, h.want, ev.prio)
					}
				}
			})
		}
	}

	t.Run("WithProgressPriority raises live updates where progress holds, and only those", func(t *testing.T) {
		withGen := func(rv string, gen int64) *corev1.ConfigMap {
			c := cm(rv)
			c.Generation = gen
			return c
		}
		h := WithProgressPriority(EnqueueObject(), func(o, n metav1.Object) bool { return o.GetGeneration() == n.GetGeneration() })
		for _, tc := range []struct {
			name     string
			old, new *corev1.ConfigMap
			want     Priority
		}{
			{"progress", withGen("1", 3), withGen("2", 3), PriorityProgress},
			{"no progress", withGen("1", 3), withGen("2", 4), PriorityHigh},
			{"resync", withGen("1", 3), withGen("1", 3), PriorityLow},
		} {
			q := &priorityRecorder{}
			newEventHandler(h, q).OnUpdate(tc.old, tc.new)
			if got := q.take(); !cmp.Equal(got, []handed{{key("cm"), tc.want}}) {
				t.Errorf("%s: queued %v, want cm at %v", tc.name, got, tc.want)
			}
		}
		q := &priorityRecorder{}
		newEventHandler(h, q).OnAdd(withGen("1", 3), false)
		if got := q.take(); !cmp.Equal(got, []handed{{key("cm"), PriorityHigh}}) {
			t.Errorf("create: queued %v, want cm at %v", got, PriorityHigh)
		}
	})

	t.Run("a Handler may set the priority itself", func(t *testing.T) {
		q := &priorityRecorder{}
		newEventHandler(lowFanOut{}, q).OnUpdate(cm("1"), cm("2"))
		want := []handed{{key("cm"), PriorityHigh}, {key("related"), PriorityLow}}
		if diff := cmp.Diff(want, q.take()); diff != "" {
			t.Errorf("queued (-want +got):\n%s", diff)
		}
	})
}

// TestRetryKeepsThePriorityOfTheReconcile: a failing initial-list key is
// retried low, behind the rest of the list; a failing live key is retried
// high, ahead of it.
func TestRetryKeepsThePriorityOfTheReconcile(t *testing.T) {
	live := key("live")
	bStarted, release := make(chan struct{}), make(chan struct{})
	r := newRecorder(func(_ context.Context, req Request, n int) (Result, error) {
		switch {
		case n > 0:
		case req == reqA:
			return Result{}, errors.New("the initial-list key fails once")
		case req == reqB:
			close(bStarted)
			<-release
		case req == live:
			return Result{}, errors.New("the live key fails once")
		}
		return Result{}, nil
	})
	limiter := newRecordingLimiter()
	limiter.delay = 0 // the retry is queued before Done: the order is fixed
	h := newHarness(t, Options{MaxConcurrentReconciles: 1, RateLimiter: limiter}, r)
	for _, req := range []Request{reqA, reqB, reqC} {
		h.enqueue(req) // the initial list
	}
	h.start(t)
	receive(t, bStarted, "the reconcile of b")
	h.enqueue(live)
	close(release)

	var got []Request
	for range 6 {
		got = append(got, receive(t, r.calls, "a reconcile"))
	}
	want := []Request{reqA, reqB, live, live, reqC, reqA}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reconciles (-want +got):\n%s", diff)
	}
}

// TestRequeueAfterKeepsThePriorityOfTheReconcile: an initial-list key that
// asks to be requeued comes back low, behind a live key queued after it.
func TestRequeueAfterKeepsThePriorityOfTheReconcile(t *testing.T) {
	live := key("live")
	bStarted, release := make(chan struct{}), make(chan struct{})
	r := newRecorder(func(_ context.Context, req Request, n int) (Result, error) {
		switch {
		case n > 0:
		case req == reqA:
			return Result{RequeueAfter: time.Millisecond}, nil
		case req == reqB:
			close(bStarted)
			<-release
		}
		return Result{}, nil
	})
	h := newHarness(t, Options{MaxConcurrentReconciles: 1}, r)
	for _, req := range []Request{reqA, reqB, reqC} {
		h.enqueue(req)
	}
	h.start(t)
	receive(t, bStarted, "the reconcile of b")
	// Wait for a's requeue: c and a are then queued.
	name := h.c.Name()
	depth := map[string]string{"name": name, "controller": name, "priority": ""}
	for deadline := time.Now().Add(waitBound); metricValue(t, h.reg, "workqueue_depth", depth) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a was never requeued")
		}
	}
	h.enqueue(live)
	close(release)

	var got []Request
	for range 5 {
		got = append(got, receive(t, r.calls, "a reconcile"))
	}
	want := []Request{reqA, reqB, live, reqC, reqA}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reconciles (-want +got):\n%s", diff)
	}
}

// deliveryInformer reports each live event once the controller's handler has
// queued it.
type deliveryInformer struct {
	cache.SharedIndexInformer
	delivered chan string
}

func (i *deliveryInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(deliveryHandler{h, i.delivered})
}

type deliveryHandler struct {
	cache.ResourceEventHandler
	delivered chan string
}

func (h deliveryHandler) OnAdd(obj any, isInInitialList bool) {
	h.ResourceEventHandler.OnAdd(obj, isInInitialList)
	if !isInInitialList {
		h.delivered <- "add " + obj.(metav1.Object).GetName()
	}
}

func (h deliveryHandler) OnUpdate(oldObj, newObj any) {
	h.ResourceEventHandler.OnUpdate(oldObj, newObj)
	h.delivered <- "update " + newObj.(metav1.Object).GetName()
}

// TestLiveChangesOvertakeTheInitialListBacklog runs a controller with one
// slow worker over a real informer whose initial list holds 2,000 objects:
// an update of one still waiting in that backlog, and a new object, are
// reconciled next, long before the backlog drains.
func TestLiveChangesOvertakeTheInitialListBacklog(t *testing.T) {
	const backlog = 2000
	ctx := context.Background()
	objs := make([]runtime.Object, 0, backlog)
	for i := range backlog {
		objs = append(objs, configMap("ns", fmt.Sprintf("cm-%04d", i)))
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := &deliveryInformer{SharedIndexInformer: factory.Core().V1().ConfigMaps().Informer(), delivered: make(chan string, 10)}

	first, release := make(chan Request, 1), make(chan struct{})
	var calls atomic.Int32
	r := newRecorder(func(_ context.Context, req Request, _ int) (Result, error) {
		if calls.Add(1) == 1 {
			first <- req
			<-release
		}
		time.Sleep(time.Millisecond) // slow: the backlog alone takes seconds
		return Result{}, nil
	})
	h := newHarness(t, Options{MaxConcurrentReconciles: 1}, r)
	if err := h.c.Watch(informer, EnqueueObject()); err != nil {
		t.Fatal(err)
	}
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	defer func() {
		close(stopInformers)
		factory.Shutdown()
	}()
	h.start(t, informer.HasSynced)

	busy := receive(t, first, "the first reconcile of the initial list")
	target := "cm-1999"
	if busy.Name == target {
		target = "cm-1998"
	}
	cms := client.CoreV1().ConfigMaps("ns")
	cm, err := cms.Get(ctx, target, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"edited": "by a user"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, configMap("ns", "created-live"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	receive(t, informer.delivered, "the update in the queue")
	receive(t, informer.delivered, "the create in the queue")
	close(release)

	var got []Request
	for range 3 {
		got = append(got, receive(t, r.calls, "a reconcile"))
	}
	want := []Request{busy, key(target), key("created-live")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first reconciles (-want +got):\n%s", diff)
	}
	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n := len(r.all()); n >= backlog {
		t.Errorf("%d reconciles before the stop: the backlog drained first", n)
	}
}
