package main

import (
	"context"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// flushingSink wraps the events sink so that a graceful stop can wait for
// the Events already recorded to reach the API server. client-go's
// broadcaster hands each Event to the sink on a goroutine of its own and
// offers no way to wait for them: Shutdown only stops taking new ones.
type flushingSink struct {
	events.EventSink

	mu       sync.Mutex
	inflight int
	last     time.Time // when the last sink request began
}

func (s *flushingSink) begin() {
	s.mu.Lock()
	s.inflight++
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *flushingSink) end() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
}

func (s *flushingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin()
	defer s.end()
	return s.EventSink.Create(ctx, e)
}

func (s *flushingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.begin()
	defer s.end()
	return s.EventSink.Update(ctx, e)
}

func (s *flushingSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	s.begin()
	defer s.end()
	return s.EventSink.Patch(ctx, old, data)
}

// Flush waits, after the broadcaster's Shutdown, until no request is in
// flight and none has begun for quiet (the broadcaster starts a request for
// each queued Event within moments), or until timeout. It reports whether
// the sink went quiet.
func (s *flushingSink) Flush(quiet, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		idle := s.inflight == 0 && time.Since(s.last) >= quiet
		s.mu.Unlock()
		if idle {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
