package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/textlogger"
)

// TestMain fails the package's tests if any goroutine started by them is
// still running at the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// wait bounds every wait for an event; tests never assert on speed.
const waitBound = 10 * time.Second

// quietLogger writes nowhere. (logr.Discard() cannot be used: it is the zero
// Logger, which Options reads as "use the default".)
var quietLogger = textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(io.Discard)))

// recordingLimiter is a rate limiter with a fixed short delay that records
// how often the controller asked it for a delay (AddRateLimited) and told it
// to forget a key (Forget).
type recordingLimiter struct {
	delay time.Duration

	mu     sync.Mutex
	when   map[Request]int
	forget map[Request]int
}

func newRecordingLimiter() *recordingLimiter {
	return &recordingLimiter{delay: time.Millisecond, when: map[Request]int{}, forget: map[Request]int{}}
}

func (l *recordingLimiter) When(req Request) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.when[req]++
	return l.delay
}

func (l *recordingLimiter) Forget(req Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget[req]++
}

func (l *recordingLimiter) NumRequeues(req Request) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.when[req]
}

// counts returns how many times req was rate-limited and forgotten.
func (l *recordingLimiter) counts(req Request) (when, forget int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.when[req], l.forget[req]
}

// source stands in for an informer: tests hand requests to a controller
// through it as Add events, the only way requests reach a controller.
// Requests added before Start connects it arrive with the initial list, as
// an informer's existing objects do; after Start has disconnected it they
// are dropped.
type source struct {
	cache.SharedInformer // nil: Start calls only the two methods below

	mu      sync.Mutex
	handler cache.ResourceEventHandler
	removed bool
	pending []Request
}

// watchSource connects a new source to c with EnqueueObject.
func watchSource(t *testing.T, c *Controller) *source {
	t.Helper()
	s := &source{}
	if err := c.Watch(s, EnqueueObject()); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return s
}

func (s *source) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
	for _, req := range s.pending {
		h.OnAdd(objectFor(req), true)
	}
	s.pending = nil
	return syncedRegistration{}, nil
}

func (s *source) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler, s.removed = nil, true
	return nil
}

// add delivers an Add event for the object req names.
func (s *source) add(req Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.handler != nil:
		s.handler.OnAdd(objectFor(req), false)
	case !s.removed:
		s.pending = append(s.pending, req)
	}
}

func objectFor(req Request) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
}

// syncedRegistration has delivered its initial list: source delivers it
// inside AddEventHandler.
type syncedRegistration struct {
	cache.ResourceEventHandlerRegistration // nil: only HasSynced is called
}

func (syncedRegistration) HasSynced() bool { return true }

// harness is a controller under test with what the tests look at.
type harness struct {
	c       *Controller
	src     *source // enqueue's way in
	reg     *prometheus.Registry
	limiter *recordingLimiter
	cancel  context.CancelFunc
	done    chan error

	stopOnce sync.Once
	stopErr  error
}

// newHarness builds a controller named after the test, with a fresh
// registry, a recording limiter and a silent logger unless opts sets them.
func newHarness(t *testing.T, opts Options, r Reconciler) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry(), limiter: newRecordingLimiter()}
	if opts.Name == "" {
		opts.Name = strings.ReplaceAll(t.Name(), "/", "_")
	}
	if opts.Registerer == nil {
		opts.Registerer = h.reg
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = h.limiter
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = quietLogger
	}
	c, err := New(opts, r)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.c = c
	h.src = watchSource(t, c)
	return h
}

// enqueue hands req to the controller as an informer event would.
func (h *harness) enqueue(req Request) { h.src.add(req) }

// start runs Start in a goroutine; the test's cleanup stops it.
func (h *harness) start(t *testing.T, synced ...cache.InformerSynced) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.c.Start(ctx, synced...) }()
	// A test that expects an error from Start calls stop and checks it.
	t.Cleanup(func() { _ = h.stop(t) })
}

// stop cancels Start's context and returns what Start returned.
func (h *harness) stop(t *testing.T) error {
	t.Helper()
	h.stopOnce.Do(func() {
		h.cancel()
		select {
		case h.stopErr = <-h.done:
		case <-time.After(waitBound):
			t.Fatalf("Start did not return within %s of its context ending", waitBound)
		}
	})
	return h.stopErr
}

// receive waits for the next value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitBound):
		t.Fatalf("timed out after %s waiting for %s", waitBound, what)
		panic("unreachable")
	}
}

// metricValue gathers reg and returns the value of the series of family
// name whose labels are exactly labels: the counter or gauge value, or a
// histogram's sample count. It fails the test if there is no such series.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var seen []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			seen = append(seen, fmt.Sprint(got))
			if !sameLabels(got, labels) {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	sort.Strings(seen)
	t.Fatalf("no series %s%v; series of that name: %v", name, labels, seen)
	return 0
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// syncBuffer is a bytes.Buffer that a logger may write from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
