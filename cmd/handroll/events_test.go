package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type slowSink struct{ done atomic.Int32 }

func (s *slowSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	time.Sleep(300 * time.Millisecond)
	s.done.Add(1)
	return e, nil
}
func (s *slowSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}
func (s *slowSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return e, nil
}

func TestFlushWaitsForEventsInFlight(t *testing.T) {
	inner := &slowSink{}
	s := &flushingSink{EventSink: inner}
	for range 3 {
		go func() {
			_, _ = s.Create(context.Background(), &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}})
		}()
	}
	time.Sleep(20 * time.Millisecond) // the requests have begun
	if !s.Flush(50*time.Millisecond, 5*time.Second) {
		t.Fatal("Flush timed out")
	}
	if got := inner.done.Load(); got != 3 {
		t.Errorf("Flush returned with %d of 3 events written", got)
	}

	stuck := &flushingSink{EventSink: inner}
	stuck.begin() // a request that never ends
	if stuck.Flush(10*time.Millisecond, 100*time.Millisecond) {
		t.Error("Flush reported quiet with a request in flight")
	}
}
