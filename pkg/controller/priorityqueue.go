package controller

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Priority orders the keys waiting in a controller's queue: every key of a
// higher level is handed to a worker before any of a lower one, and keys of
// one level go in the order they were queued. There are three levels: a
// value below PriorityHigh counts as low, one from PriorityProgress up as
// progress, any other as high.
type Priority int

const (
	// PriorityLow is for events that only confirm what the cache already
	// held: the informer's initial list and resyncs. The value is
	// controller-runtime's handler.LowPriority.
	PriorityLow Priority = -100
	// PriorityHigh, the zero value, is for live changes. It is
	// controller-runtime's default priority.
	PriorityHigh Priority = 0
	// PriorityProgress is for a live change that moves work already begun
	// toward its end (a child's rollout reporting progress), so that it
	// does not wait behind new work: what a user waits for finishes first.
	// controller-runtime has no name for it; any priority above its
	// default does the same there.
	PriorityProgress Priority = 100
)

func (p Priority) String() string {
	switch p.level() {
	case levelLow:
		return "low"
	case levelProgress:
		return "progress"
	}
	return "high"
}

// The levels, lowest first: the index of each one's lane.
const (
	levelLow = iota
	levelHigh
	levelProgress
	levels
)

func (p Priority) level() int {
	switch {
	case p < PriorityHigh:
		return levelLow
	case p >= PriorityProgress:
		return levelProgress
	}
	return levelHigh
}

// normalized is the level's own value: the priority a key is handed out
// at.
func (p Priority) normalized() Priority {
	return [levels]Priority{PriorityLow, PriorityHigh, PriorityProgress}[p.level()]
}

// priorityWorkqueue is the controller's queue: client-go's workqueue with
// priorities. It is three client-go pieces, so that what they guarantee and
// the metrics they report are unchanged from the plain rate-limiting queue:
//
//   - a workqueue.Typed, whose dirty and processing sets de-duplicate keys
//     and never hand a key to a second worker before Done, and which reports
//     workqueue_depth, adds, queue and work durations and the unfinished-work
//     gauges;
//   - a priorityStore as its storage (TypedQueueConfig.Queue), which decides
//     the order of the keys that are ready;
//   - a delaying queue for AddAfter and AddRateLimited, which reports
//     workqueue_retries_total and, as before, keeps one waiting entry per
//     key (the earliest). Once the delay is over the key is added at the
//     highest priority it was delayed with.
type priorityWorkqueue struct {
	store   *priorityStore
	queue   *workqueue.Typed[Request]
	delayed workqueue.TypedDelayingInterface[Request]
	limiter workqueue.TypedRateLimiter[Request]

	delayMu sync.Mutex
	// delayedAt is the highest priority of each key waiting in delayed.
	delayedAt map[Request]Priority
}

var (
	_ workqueue.TypedRateLimitingInterface[Request] = &priorityWorkqueue{}
	_ PriorityQueue                                 = &priorityWorkqueue{}
)

// newPriorityWorkqueue builds the queue; a nil provider means client-go's
// global one, as for client-go's own constructors.
func newPriorityWorkqueue(name string, limiter workqueue.TypedRateLimiter[Request], provider workqueue.MetricsProvider) *priorityWorkqueue {
	q := &priorityWorkqueue{store: newPriorityStore(), limiter: limiter, delayedAt: map[Request]Priority{}}
	q.queue = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[Request]{
		Name: name, MetricsProvider: provider, Queue: q.store,
	})
	q.delayed = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[Request]{
		Name: name, MetricsProvider: provider, Queue: delayTarget{Typed: q.queue, q: q},
	})
	return q
}

// Add queues req at high priority.
func (q *priorityWorkqueue) Add(req Request) { q.AddWithPriority(req, PriorityHigh) }

// AddWithPriority queues req at p. A key already waiting keeps the higher of
// its priorities; raised, it goes to the end of the higher priority's keys.
// A key being processed is queued again at Done, at the highest priority it
// was added with meanwhile.
func (q *priorityWorkqueue) AddWithPriority(req Request, p Priority) {
	p = p.normalized()
	q.store.want(req, p)
	q.queue.Add(req)
	q.store.settle(req, p)
}

// AddAfter queues req at high priority once d has passed.
func (q *priorityWorkqueue) AddAfter(req Request, d time.Duration) {
	q.AddAfterWithPriority(req, d, PriorityHigh)
}

// AddAfterWithPriority queues req at p once d has passed. Until then it is
// not in the queue: an Add meanwhile queues it at once, and the delayed add
// still comes, as with client-go's delaying queue. A key delayed twice is
// added once, at the earlier time and the higher priority.
func (q *priorityWorkqueue) AddAfterWithPriority(req Request, d time.Duration, p Priority) {
	q.delayMu.Lock()
	if old, ok := q.delayedAt[req]; !ok || p > old {
		q.delayedAt[req] = p
	}
	q.delayMu.Unlock()
	q.delayed.AddAfter(req, d)
}

// delayOver adds req, whose delay is over, at the priority it was delayed
// with. Without one it is high: the one case is a delayed add whose
// priority an earlier entry of the same key took as it fired (the two
// raced); falling back to high raises such a key, never lowers it.
func (q *priorityWorkqueue) delayOver(req Request) {
	q.delayMu.Lock()
	p, ok := q.delayedAt[req]
	delete(q.delayedAt, req)
	q.delayMu.Unlock()
	if !ok {
		p = PriorityHigh
	}
	q.AddWithPriority(req, p)
}

// AddRateLimited queues req at high priority after the rate limiter's delay.
func (q *priorityWorkqueue) AddRateLimited(req Request) {
	q.AddRateLimitedWithPriority(req, PriorityHigh)
}

// AddRateLimitedWithPriority queues req at p after the rate limiter's delay.
func (q *priorityWorkqueue) AddRateLimitedWithPriority(req Request, p Priority) {
	q.AddAfterWithPriority(req, q.limiter.When(req), p)
}

// Get is GetWithPriority without the priority.
func (q *priorityWorkqueue) Get() (Request, bool) {
	req, _, shutdown := q.GetWithPriority()
	return req, shutdown
}

// GetWithPriority blocks until a key is ready and returns it with the
// priority it was queued at. The caller must call Done with it.
func (q *priorityWorkqueue) GetWithPriority() (Request, Priority, bool) {
	req, shutdown := q.queue.Get()
	if shutdown {
		return req, PriorityHigh, true
	}
	// The key is ours until Done: no other Get can pop it in between.
	return req, q.store.taken(req), false
}

// Done marks req as processed; if it was added meanwhile, it is queued again.
func (q *priorityWorkqueue) Done(req Request) {
	q.queue.Done(req)
	q.store.done(req)
}

func (q *priorityWorkqueue) Len() int                    { return q.queue.Len() }
func (q *priorityWorkqueue) Forget(req Request)          { q.limiter.Forget(req) }
func (q *priorityWorkqueue) NumRequeues(req Request) int { return q.limiter.NumRequeues(req) }
func (q *priorityWorkqueue) ShuttingDown() bool          { return q.queue.ShuttingDown() }

// ShutDown stops taking keys and wakes idle workers. Get still hands out the
// keys that were ready, then reports shutdown. Delayed keys are dropped.
func (q *priorityWorkqueue) ShutDown() {
	// The delaying queue shuts the Typed queue down, then its own loop.
	q.delayed.ShutDown()
}

// ShutDownWithDrain is ShutDown, but returns only once every key handed out
// has been marked Done.
func (q *priorityWorkqueue) ShutDownWithDrain() {
	q.queue.ShutDownWithDrain()
	q.delayed.ShutDown()
}

// delayTarget is the queue the delaying queue adds to once a delay is over:
// the Typed queue, with Add going through delayOver for the priority.
type delayTarget struct {
	*workqueue.Typed[Request]
	q *priorityWorkqueue
}

func (t delayTarget) Add(req Request) { t.q.delayOver(req) }

// priorityStore keeps the keys that are ready, in a FIFO lane per level. It
// implements workqueue.Queue: the Typed queue calls Push, Touch, Pop and Len
// under its lock, and only as its dirty and processing sets allow, so the
// store never holds a key twice, nor one being processed.
//
// Those calls carry no priority, and the Typed queue's lock is not ours to
// take, so AddWithPriority brackets its Add: want before (Push and Touch
// apply the priorities of every add under way), settle after (for an add
// that found the key being processed, which Done will push). The priority
// of a turn in the queue is then never below that of an add it absorbed;
// when a worker takes the key during an add, that add may also raise the
// key's next turn.
type priorityStore struct {
	mu sync.Mutex // want, settle, done and taken run outside the Typed queue's lock

	lanes  [levels]list.List         // of *storeEntry, oldest first
	queued map[Request]*list.Element // the entry of each key in a lane

	// adding holds, per key, the AddWithPriority calls under way.
	adding map[Request]*adding
	// next is the priority for the next Push of a key that adds found
	// being processed.
	next map[Request]Priority
	// processing counts the Pops of a key not yet followed by done. It can
	// be 2 for a moment: done runs after the Typed queue's Done, which may
	// let another worker take the key first.
	processing map[Request]int
	// popped is the priority a key was handed out at, until GetWithPriority
	// collects it.
	popped map[Request]Priority
}

type storeEntry struct {
	req      Request
	priority Priority
}

type adding struct {
	calls    int
	priority Priority // the highest of the calls
}

var _ workqueue.Queue[Request] = &priorityStore{}

func newPriorityStore() *priorityStore {
	return &priorityStore{
		queued:     map[Request]*list.Element{},
		adding:     map[Request]*adding{},
		next:       map[Request]Priority{},
		processing: map[Request]int{},
		popped:     map[Request]Priority{},
	}
}

// want registers an add of req at p that is about to reach the Typed queue.
func (s *priorityStore) want(req Request, p Priority) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.adding[req]
	if a == nil {
		a = &adding{priority: p}
		s.adding[req] = a
	}
	a.calls++
	a.priority = max(a.priority, p)
}

// settle ends an add of req at p that has reached the Typed queue. If the
// key is queued, its entry is raised to p. If it is being processed, the add
// may have found it so (or a worker may have taken it since), and p is kept
// for the Push at Done; done drops it if there is none. Otherwise the add
// was served already, or dropped at shutdown.
func (s *priorityStore) settle(req Request, p Priority) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.adding[req]
	if a.calls--; a.calls == 0 {
		delete(s.adding, req)
	}
	if el, ok := s.queued[req]; ok {
		s.raise(el, p)
		return
	}
	if s.processing[req] == 0 {
		return
	}
	if old, ok := s.next[req]; !ok || p > old {
		s.next[req] = p
	}
}

// done is called after the Typed queue's Done: a Push at Done has used next,
// so what is left was for a turn the worker already had.
func (s *priorityStore) done(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.processing[req]--; s.processing[req] > 0 {
		return
	}
	delete(s.processing, req)
	delete(s.next, req)
}

func (s *priorityStore) lane(p Priority) *list.List { return &s.lanes[p.level()] }

// raise moves a queued entry to the end of p's lane if p is higher, as
// controller-runtime's priority queue does; an equal or lower p leaves it
// where it is.
func (s *priorityStore) raise(el *list.Element, p Priority) {
	e := el.Value.(*storeEntry)
	if p <= e.priority {
		return
	}
	s.lane(e.priority).Remove(el)
	e.priority = p
	s.queued[e.req] = s.lane(p).PushBack(e)
}

// Push queues a key that was not queued, at the end of its priority's lane:
// the highest of the adds under way and of those kept for it in next.
func (s *priorityStore) Push(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, known := PriorityLow, false
	if a := s.adding[req]; a != nil {
		p, known = max(p, a.priority), true
	}
	if n, ok := s.next[req]; ok {
		p, known = max(p, n), true
		delete(s.next, req)
	}
	if !known {
		// Not expected: every add is under way or kept in next until its
		// Push. Should it happen, better a key raised than one lowered.
		p = PriorityHigh
	}
	s.queued[req] = s.lane(p).PushBack(&storeEntry{req: req, priority: p})
}

// Touch is called when a queued key is added again.
func (s *priorityStore) Touch(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, el := s.adding[req], s.queued[req]; a != nil && el != nil {
		s.raise(el, a.priority)
	}
}

// Pop takes the oldest key of the highest non-empty lane. The Typed queue
// calls it only when Len is positive.
func (s *priorityStore) Pop() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.lanes[levels-1]
	for i := levels - 2; l.Len() == 0 && i >= 0; i-- {
		l = &s.lanes[i]
	}
	e := l.Remove(l.Front()).(*storeEntry)
	delete(s.queued, e.req)
	s.processing[e.req]++
	s.popped[e.req] = e.priority
	return e.req
}

func (s *priorityStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.lanes {
		n += s.lanes[i].Len()
	}
	return n
}

// taken returns and forgets the priority req was popped at.
func (s *priorityStore) taken(req Request) Priority {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.popped[req]
	if !ok {
		return PriorityHigh
	}
	delete(s.popped, req)
	return p
}

// depths returns how many keys are ready at each level.
func (s *priorityStore) depths() (progress, high, low int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lanes[levelProgress].Len(), s.lanes[levelHigh].Len(), s.lanes[levelLow].Len()
}
