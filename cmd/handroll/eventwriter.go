package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"
)

// The event writer's bounds: how many series it remembers, and for how
// long a repeat still joins one (client-go's finishTime).
const (
	seriesCap    = 1024
	seriesWindow = 6 * time.Minute
	// A write that failed for want of the API server is tried again, as
	// client-go does: up to writeTries times, about writeRetry apart.
	writeTries = 12
	writeRetry = 10 * time.Second
)

// eventWriter writes the Events the recorder makes to the sink, in place
// of the broadcaster's StartRecordingToSink. Both fold a repeat of an Event
// (the same object, type, reason, action and reporter) into the first one's
// series. client-go keeps every Event it wrote for six to twelve minutes
// to do so, in a map that grows with the Events recorded: 6,000 of them,
// about 9 MiB of heap, once 3,000 new WebApps are Ready. This writer keeps
// only the name of each of the last seriesCap series, for seriesWindow.
//
// A repeat is written at once, as a patch of the series' count (the core
// Events' recorder, tools/record, does the same); client-go's events.k8s.io
// broadcaster defers all but the first repeat.
type eventWriter struct {
	sink  events.EventSink
	now   func() time.Time
	retry time.Duration

	mu     sync.Mutex
	series *lru.Cache // seriesKey → *series
}

// seriesKey is what makes two Events one series: client-go's getKey.
type seriesKey struct {
	typ, action, reason, controller, instance string
	regarding, related                        corev1.ObjectReference
}

// series is the Event a series was written as, and its count so far.
type series struct {
	namespace, name string
	count           int32
	last            time.Time
}

func newEventWriter(sink events.EventSink) *eventWriter {
	return &eventWriter{sink: sink, now: time.Now, retry: writeRetry, series: lru.New(seriesCap)}
}

// startEventWriter writes every Event broadcaster distributes until ctx is
// done. The broadcaster queues up to 1,000 Events for it, and drops Events
// past that rather than block a reconcile.
func startEventWriter(ctx context.Context, broadcaster events.EventBroadcaster, sink events.EventSink) error {
	w := newEventWriter(sink)
	stop, err := broadcaster.StartEventWatcher(func(obj runtime.Object) {
		if e, ok := obj.(*eventsv1.Event); ok {
			w.write(ctx, e)
		}
	})
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, stop)
	return nil
}

func keyOf(e *eventsv1.Event) seriesKey {
	k := seriesKey{typ: e.Type, action: e.Action, reason: e.Reason, controller: e.ReportingController, instance: e.ReportingInstance, regarding: e.Regarding}
	if e.Related != nil {
		k.related = *e.Related
	}
	return k
}

// write creates e, or, when e repeats an Event written within
// seriesWindow, counts it in that Event's series. e is the recorder's and
// seen by this watcher alone: it is written as it is.
func (w *eventWriter) write(ctx context.Context, e *eventsv1.Event) {
	key, now := keyOf(e), w.now()
	w.mu.Lock()
	s, repeat := w.lookup(key, now)
	if repeat {
		s.count++
		s.last = now
	} else {
		s = &series{namespace: e.Namespace, name: e.Name, count: 1, last: now}
		w.series.Add(key, s)
	}
	at := *s
	w.mu.Unlock()

	if !repeat {
		w.attempt(ctx, e, func() error { _, err := w.sink.Create(ctx, e); return err })
		return
	}
	w.attempt(ctx, e, func() error {
		err := w.patchSeries(ctx, at)
		if apierrors.IsNotFound(err) {
			// The Event is gone (deleted, or expired on the server, an
			// hour by default): write this one, counting on from there.
			e.Series = &eventsv1.EventSeries{Count: at.count, LastObservedTime: metav1.NewMicroTime(at.last)}
			if _, err = w.sink.Create(ctx, e); err == nil {
				w.renamed(key, e)
			}
		}
		return err
	})
}

// lookup returns key's series if it was last seen within seriesWindow.
func (w *eventWriter) lookup(key seriesKey, now time.Time) (*series, bool) {
	v, ok := w.series.Get(key)
	if !ok {
		return nil, false
	}
	s := v.(*series)
	return s, now.Sub(s.last) < seriesWindow
}

// renamed points key's series at e, written in place of an Event gone.
func (w *eventWriter) renamed(key seriesKey, e *eventsv1.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v, ok := w.series.Get(key); ok {
		s := v.(*series)
		s.namespace, s.name = e.Namespace, e.Name
	}
}

// patchSeries writes s's count and last observation to its Event, the
// patch client-go's broadcaster sends.
func (w *eventWriter) patchSeries(ctx context.Context, s series) error {
	patch, err := json.Marshal(map[string]any{"series": eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(s.last)}})
	if err != nil {
		return err
	}
	_, err = w.sink.Patch(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}, patch)
	return err
}

// attempt runs write until it succeeds, the API server refuses it (an
// answer that the same request will get again), ctx is done or it failed
// writeTries times.
func (w *eventWriter) attempt(ctx context.Context, e *eventsv1.Event, write func() error) {
	for try := 1; ; try++ {
		err := write()
		if err == nil {
			return
		}
		var status apierrors.APIStatus
		if refused := errors.As(err, &status); refused || try == writeTries {
			klog.ErrorS(err, "Unable to write event, dropping it", "object", klog.KRef(e.Regarding.Namespace, e.Regarding.Name), "reason", e.Reason, "tries", try)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(w.retry, 0.25)):
		}
	}
}
