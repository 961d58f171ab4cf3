package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// recordingSink records what the writer sends; fail, when set, answers a
// request instead of the server.
type recordingSink struct {
	writes []string
	fail   func(op string, e *eventsv1.Event) error
}

func (s *recordingSink) answer(op string, e *eventsv1.Event, detail string) (*eventsv1.Event, error) {
	if s.fail != nil {
		if err := s.fail(op, e); err != nil {
			s.writes = append(s.writes, op+" "+e.Name+" failed")
			return nil, err
		}
	}
	s.writes = append(s.writes, op+" "+e.Name+detail)
	return e, nil
}

func (s *recordingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	detail := ""
	if e.Series != nil {
		detail = fmt.Sprintf(" series %d", e.Series.Count)
	}
	return s.answer("create", e, detail)
}

func (s *recordingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.answer("update", e, "")
}

func (s *recordingSink) Patch(_ context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	var p struct {
		Series eventsv1.EventSeries `json:"series"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	return s.answer("patch", e, fmt.Sprintf(" series %d", p.Series.Count))
}

func event(name, regarding, reason string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "ns", Name: name},
		Regarding:           corev1.ObjectReference{Kind: "WebApp", Namespace: "ns", Name: regarding},
		Type:                corev1.EventTypeWarning,
		Reason:              reason,
		Action:              "Reconcile",
		ReportingController: "handroll",
		Note:                "note of " + name,
	}
}

func equalWrites(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writes\n got %q\nwant %q", got, want)
	}
}

// A repeat joins the first Event's series, as client-go's broadcaster
// folds it; another reason, another object or a repeat past the window
// is an Event of its own.
func TestEventWriterFoldsRepeatsIntoASeries(t *testing.T) {
	sink := &recordingSink{}
	w := newEventWriter(sink)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return clock }
	ctx := context.Background()

	w.write(ctx, event("a.1", "a", "Conflict"))
	w.write(ctx, event("a.2", "a", "Conflict"))
	w.write(ctx, event("b.1", "b", "Conflict"))
	w.write(ctx, event("a.3", "a", "NotReady"))
	clock = clock.Add(seriesWindow - time.Second)
	w.write(ctx, event("a.4", "a", "Conflict"))
	clock = clock.Add(seriesWindow)
	w.write(ctx, event("a.5", "a", "Conflict"))
	equalWrites(t, sink.writes,
		"create a.1", "patch a.1 series 2", "create b.1", "create a.3", "patch a.1 series 3", "create a.5")
}

// The writer remembers seriesCap series: what it forgot is written anew.
func TestEventWriterIsBounded(t *testing.T) {
	sink := &recordingSink{}
	w := newEventWriter(sink)
	ctx := context.Background()
	for i := range seriesCap + 1 {
		w.write(ctx, event(fmt.Sprintf("w%d.1", i), fmt.Sprintf("w%d", i), "Created"))
	}
	if got := w.series.Len(); got != seriesCap {
		t.Errorf("%d series remembered, want %d", got, seriesCap)
	}
	sink.writes = nil
	w.write(ctx, event("w0.2", "w0", "Created"))                                                   // forgotten: the oldest
	w.write(ctx, event(fmt.Sprintf("w%d.2", seriesCap), fmt.Sprintf("w%d", seriesCap), "Created")) // remembered
	equalWrites(t, sink.writes, "create w0.2", fmt.Sprintf("patch w%d.1 series 2", seriesCap))
}

// A series whose Event is gone goes on in a new Event; a refusal is not
// tried again, a failure to reach the server is.
func TestEventWriterFailures(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "a.1")
	unreachable := errors.New("connection refused")
	failures := map[string]error{"patch a.1": gone, "create b.1": unreachable, "create c.1": apierrors.NewBadRequest("no")}
	sink := &recordingSink{fail: func(op string, e *eventsv1.Event) error {
		err := failures[op+" "+e.Name]
		delete(failures, op+" "+e.Name) // once
		return err
	}}
	w := newEventWriter(sink)
	w.retry = time.Millisecond
	ctx := context.Background()

	w.write(ctx, event("a.1", "a", "Conflict"))
	w.write(ctx, event("a.2", "a", "Conflict"))
	w.write(ctx, event("a.3", "a", "Conflict"))
	w.write(ctx, event("b.1", "b", "Conflict"))
	w.write(ctx, event("c.1", "c", "Conflict"))
	equalWrites(t, sink.writes,
		"create a.1", "patch a.1 failed", "create a.2 series 2", "patch a.2 series 3",
		"create b.1 failed", "create b.1",
		"create c.1 failed")
}
