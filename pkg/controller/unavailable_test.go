package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAPIUnavailable(t *testing.T) {
	refused := fmt.Errorf("adding finalizer: %w", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/x",
		Err: fmt.Errorf("dial tcp: %w", os.NewSyscallError("connect", syscall.ECONNREFUSED))})
	gr := schema.GroupResource{Group: "handroll.dev", Resource: "webapps"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused, wrapped", refused, true},
		{"connection reset", os.NewSyscallError("read", syscall.ECONNRESET), true},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), true},
		{"503", apierrors.NewServiceUnavailable("etcd is down"), true},
		{"429", fmt.Errorf("apply: %w", apierrors.NewTooManyRequests("slow down", 1)), true},
		{"500 from the API server", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), true},
		{"500 from the API server, wrapped", fmt.Errorf("Deployment ns/w: %w", apierrors.NewInternalError(errors.New("boom"))), true},
		// The API server's answer when an admission webhook fails closed
		// (k8s.io/apiserver validating and mutating dispatchers).
		{"500, a webhook failed", fmt.Errorf("Deployment ns/w: %w", apierrors.NewInternalError(errors.New(
			`failed calling webhook "deny.example.com": failed to call webhook: an error on the server ("boom") has prevented the request from succeeding`))), false},
		// An admission webhook that denies with code 500 (ToStatusErr).
		{"500, a webhook denied", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: `admission webhook "deny.example.com" denied the request: internal`}}, false},
		{"500, a conversion webhook failed", apierrors.NewInternalError(errors.New(
			`conversion webhook for handroll.dev/v1alpha1, Kind=WebApp failed: Post "https://x": connection refused`)), false},
		{"504", apierrors.NewTimeoutError("slow", 1), true},
		{"409", apierrors.NewConflict(gr, "w", errors.New("changed")), false},
		{"404", apierrors.NewNotFound(gr, "w"), false},
		{"403", apierrors.NewForbidden(gr, "w", errors.New("no")), false},
		{"422", apierrors.NewInvalid(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, "w", nil), false},
		{"plain", errors.New("the spec names a missing ConfigMap"), false},
	}
	for _, tc := range cases {
		if got := APIUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: APIUnavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestUnavailabilityBackoff(t *testing.T) {
	u := &unavailability{logger: quietLogger}
	pause := func() time.Duration { u.mu.Lock(); defer u.mu.Unlock(); return time.Until(u.until) }

	u.failed(time.Now())
	if p := pause(); p <= 0 || p > unavailableBase {
		t.Fatalf("first failure: pause %s, want (0, %s]", p, unavailableBase)
	}
	// Reconciles in flight when the pause began fail too: same round.
	inFlight := time.Now().Add(-time.Second)
	u.failed(inFlight)
	u.failed(inFlight)
	if u.failures != 1 {
		t.Errorf("three failures of one round counted as %d rounds", u.failures)
	}
	// Each later round doubles, up to the cap.
	for range 10 {
		u.mu.Lock()
		u.until = time.Now().Add(-time.Millisecond) // the pause is over
		u.mu.Unlock()
		u.failed(time.Now())
	}
	if p := pause(); p <= unavailableCap/2 || p > unavailableCap {
		t.Errorf("after 11 rounds: pause %s, want the cap %s", p, unavailableCap)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if u.wait(ctx) {
		t.Error("wait returned true for an ended context during a pause")
	}
	u.answered()
	if p := pause(); p > 0 || u.failures != 0 {
		t.Errorf("after an answer: pause %s, %d failed rounds; want none", p, u.failures)
	}
	if !u.wait(ctx) {
		t.Error("wait without a pause returned false")
	}
}

// TestUnavailableAPIServerPausesEveryWorker: one key failing with a refused
// connection holds back another key's reconcile, on another worker, until
// the pause is over; a success ends the pause.
func TestUnavailableAPIServerPausesEveryWorker(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	var (
		mu       sync.Mutex
		failedAt time.Time
		startedB = make(chan time.Time, 1)
	)
	h := newHarness(t, Options{MaxConcurrentReconciles: 2}, ReconcilerFunc(func(_ context.Context, req Request) (Result, error) {
		switch req.Name {
		case "a":
			mu.Lock()
			defer mu.Unlock()
			if failedAt.IsZero() {
				failedAt = time.Now()
				return Result{}, refused
			}
			return Result{}, nil
		default:
			startedB <- time.Now()
			return Result{}, nil
		}
	}))
	h.enqueue(Request{Name: "a"})
	h.start(t)
	// b is queued once a has failed: a worker is free, but must wait.
	for {
		mu.Lock()
		done := !failedAt.IsZero()
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	h.enqueue(Request{Name: "b"})
	at := receive(t, startedB, "b's reconcile")
	mu.Lock()
	waited := at.Sub(failedAt)
	mu.Unlock()
	if waited < unavailableBase {
		t.Errorf("b started %s after a failed unavailable; the pause is %s", waited, unavailableBase)
	}
}

func TestFileJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := OpenJournal(path, "replica-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	end := j.Begin("webapp", Request{Namespace: "ns", Name: "a"})
	end2 := j.Begin("webapp", Request{Namespace: "ns", Name: "b"})
	end(nil)
	end2(errors.New("boom"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []JournalEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, e)
	}
	want := []struct {
		event, key, err string
		id              uint64
	}{{"open", "", "", 0}, {"start", "ns/a", "", 1}, {"start", "ns/b", "", 2}, {"end", "ns/a", "", 1}, {"end", "ns/b", "boom", 2}}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Event != w.event || g.Key != w.key || g.Error != w.err || g.ID != w.id || g.Replica != "replica-1" || g.Time.IsZero() {
			t.Errorf("line %d = %+v, want %+v from replica-1", i, g, w)
		}
		if i > 0 && g.Time.Before(got[i-1].Time) {
			t.Errorf("line %d is earlier than line %d", i, i-1)
		}
	}
}
