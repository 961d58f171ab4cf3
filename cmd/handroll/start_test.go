package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
)

// stopRecorder is a stopper whose phases record that they ran; each phase
// in block hangs until the test ends.
type stopRecorder struct {
	mu     sync.Mutex
	phases []string
	block  map[string]bool
	done   chan struct{}
}

func (r *stopRecorder) phase(name string) {
	r.mu.Lock()
	r.phases = append(r.phases, name)
	r.mu.Unlock()
	if r.block[name] {
		<-r.done
	}
}

func (r *stopRecorder) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.phases...)
}

func newStopper(t *testing.T, timeout time.Duration, electionResult error, block ...string) (stopper, *stopRecorder) {
	r := &stopRecorder{block: map[string]bool{}, done: make(chan struct{})}
	for _, b := range block {
		r.block[b] = true
	}
	t.Cleanup(func() { close(r.done) })
	election := make(chan error, 1)
	return stopper{
		timeout: timeout,
		stopRun: func() {
			r.phase("stopRun")
			// The controllers drain for a moment, then Run returns.
			time.AfterFunc(50*time.Millisecond, func() { election <- electionResult })
		},
		election:    election,
		flushEvents: func(time.Duration) { r.phase("events") },
		stopCaches:  func() { r.phase("caches") },
		stopServers: func() error { r.phase("servers"); return nil },
	}, r
}

// A Lease lost while the controllers drain ends the stop at once: no Event
// is flushed, nothing is waited for, though the servers would take the
// whole shutdown timeout.
func TestStopEndsAtOnceOnALostLease(t *testing.T) {
	lost := fmt.Errorf("%w: lease ns/handroll-leader not renewed by me", leader.ErrLeaseLost)
	st, r := newStopper(t, time.Minute, lost, "events", "servers")
	returned := make(chan error, 1)
	go func() { returned <- st.stop(nil) }()
	select {
	case err := <-returned:
		if !errors.Is(err, leader.ErrLeaseLost) || !strings.Contains(err.Error(), "step 11") {
			t.Errorf("stop = %v, want the lost lease, from step 11", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("stop did not return after the lease was lost; it ran %v", r.ran())
	}
	if got := r.ran(); len(got) != 1 {
		t.Errorf("after the lease was lost the stop went on with %v; want only stopRun", got[1:])
	}
}

// TestAnUnfencedStopEndsAtOnce: the stop rule (leader.Unfenced). A stop
// whose Lease no longer fences the work, lost or kept for a reconcile still
// running, ends once the election returns: no Event is flushed and nothing
// is waited for, though the servers would take the whole timeout. Any
// other stop runs every phase, in order.
func TestAnUnfencedStopEndsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		election error
		unfenced bool
	}{
		{"the Lease lost", fmt.Errorf("%w: lease ns/handroll-leader not renewed by me", leader.ErrLeaseLost), true},
		{"a reconcile still running", fmt.Errorf("%w: a reconcile", leader.ErrWorkStillRunning), true},
		{"the controllers failed", errors.New("the directory controller failed"), false},
		{"a graceful stop", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := leader.Unfenced(c.election); got != c.unfenced {
				t.Fatalf("leader.Unfenced = %t, want %t", got, c.unfenced)
			}
			var block []string
			if c.unfenced {
				block = []string{"events", "servers"}
			}
			st, r := newStopper(t, time.Minute, c.election, block...)
			returned := make(chan error, 1)
			go func() { returned <- st.stop(nil) }()
			var err error
			select {
			case err = <-returned:
			case <-time.After(10 * time.Second):
				t.Fatalf("stop did not return; it ran %v", r.ran())
			}
			if c.election != nil && !errors.Is(err, c.election) || c.election == nil && err != nil {
				t.Errorf("stop = %v, want %v", err, c.election)
			}
			want := "stopRun,events,caches,servers"
			if c.unfenced {
				want = "stopRun"
			}
			if got := strings.Join(r.ran(), ","); got != want {
				t.Errorf("phases %s, want %s", got, want)
			}
		})
	}
}

// TestAnUnfencedElectionEndStopsAtOnce: the same rule when the election
// ends first, before any signal: the controllers stopped on their own and
// Run returned. Unfenced, the process stops without a phase; otherwise
// every phase runs, in order.
func TestAnUnfencedElectionEndStopsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		election error
		unfenced bool
	}{
		{"the Lease lost", fmt.Errorf("%w: lease ns/handroll-leader not renewed by me", leader.ErrLeaseLost), true},
		{"a reconcile still running", fmt.Errorf("%w: a reconcile", leader.ErrWorkStillRunning), true},
		{"the controllers failed", errors.New("the directory controller failed"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var block []string
			if c.unfenced {
				block = []string{"events", "servers"}
			}
			st, r := newStopper(t, time.Minute, nil, block...)
			ended := make(chan error, 1)
			ended <- c.election
			st.election = ended
			returned := make(chan error, 1)
			go func() {
				returned <- st.waitThenStop(context.Background(), nil, "leader election", "the controllers")
			}()
			var err error
			select {
			case err = <-returned:
			case <-time.After(10 * time.Second):
				t.Fatalf("the stop did not return; it ran %v", r.ran())
			}
			if !errors.Is(err, c.election) {
				t.Errorf("waitThenStop = %v, want %v", err, c.election)
			}
			want := "stopRun,events,caches,servers"
			if c.unfenced {
				want = ""
			}
			if got := strings.Join(r.ran(), ","); got != want {
				t.Errorf("phases %q, want %q", got, want)
			}
		})
	}
}

// A graceful stop runs every phase, in order, after the controllers.
func TestStopInOrder(t *testing.T) {
	st, r := newStopper(t, time.Minute, nil)
	if err := st.stop(nil); err != nil {
		t.Fatalf("stop = %v", err)
	}
	if got, want := strings.Join(r.ran(), ","), "stopRun,events,caches,servers"; got != want {
		t.Errorf("phases %s, want %s", got, want)
	}
}

// The stop ends at the shutdown timeout, naming what did not stop.
func TestStopTimesOut(t *testing.T) {
	st, _ := newStopper(t, 300*time.Millisecond, nil, "servers")
	err := st.stop(nil)
	if err == nil || !strings.Contains(err.Error(), "step 12, stop: the events, informers and servers did not stop within --graceful-shutdown-timeout=300ms") {
		t.Errorf("stop = %v, want the timeout", err)
	}
}

// The controllers drain within the shutdown timeout less a margin, so that
// the Lease's release and the events' flush still fit.
func TestDrainLeavesRoomForTheRelease(t *testing.T) {
	for shutdown, want := range map[time.Duration]time.Duration{
		30 * time.Second: 25 * time.Second,
		8 * time.Second:  6 * time.Second,
		time.Second:      750 * time.Millisecond,
	} {
		if got := drainTimeout(shutdown); got != want {
			t.Errorf("drainTimeout(%s) = %s, want %s", shutdown, got, want)
		}
	}
}

// runControllers returns when every controller has stopped; one failing
// stops the others, and its error is returned.
func TestRunControllersStopsTogether(t *testing.T) {
	failed := errors.New("the directory controller failed")
	other := make(chan error, 1)
	err := runControllers(t.Context(),
		func(ctx context.Context) error { <-ctx.Done(); other <- ctx.Err(); return nil },
		func(context.Context) error { return failed },
	)
	if !errors.Is(err, failed) {
		t.Errorf("runControllers = %v, want the failure", err)
	}
	select {
	case err := <-other:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the other controller saw %v, want its context canceled", err)
		}
	default:
		t.Error("the other controller was not stopped and waited for")
	}
}

// Defect: the secure metrics' TokenReview and SubjectAccessReview shared the
// controllers' rate limiter, so scrapes failed exactly under load. With the
// controllers' bucket empty for the next hour, an authenticated scrape
// still succeeds.
func TestSecureMetricsHaveTheirOwnBudget(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			io.WriteString(w, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":true,"user":{"username":"prometheus"}}}`)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			io.WriteString(w, `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	// The controllers' bucket: one token, refilled once every 1000 s, spent.
	drained := flowcontrol.NewTokenBucketRateLimiter(0.001, 1)
	drained.Accept()
	cfg := &rest.Config{Host: api.URL, QPS: 0.001, Burst: 1, RateLimiter: drained,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

	handler, tlsConfig, _, err := metricsHandler(cfg, server.NewRegistry(), true, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tlsConfig == nil {
		t.Fatal("secure metrics without TLS")
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Authorization", "Bearer a-token")
	req.TLS = &tls.ConnectionState{}
	handler.ServeHTTP(rec, req) // the reviews are bounded by server.ReviewTimeout
	if rec.Code != http.StatusOK {
		t.Errorf("scrape with the controllers' rate limit spent: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
}

// Defect: /readyz had only its ping check from the moment the servers were
// up (step 6) until step 8 added informer-sync, so a probe in between
// passed: a restart over 3,000 WebApps was measured ready after 90 ms.
// Once the servers serve, /readyz fails on informer-sync until the caches
// exist and have synced.
// servedProcess is a process through step 6, its servers serving, with
// the flags args besides metrics off and health on a free port, and a
// verbose /readyz asked of its health checks.
func servedProcess(t *testing.T, args ...string) (p *process, readyz func() (int, string)) {
	t.Helper()
	fs := pflag.NewFlagSet("handroll", pflag.ContinueOnError)
	o := options{leader: leader.DefaultOptions()}
	o.addFlags(fs)
	o.leader.AddFlags(fs)
	if err := fs.Parse(append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0"}, args...)); err != nil {
		t.Fatal(err)
	}
	p = &process{o: o, cfg: &rest.Config{Host: "https://127.0.0.1:1"}}
	if err := p.serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.srvs.stop() })
	mux := http.NewServeMux()
	p.health.Register(mux)
	return p, func() (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz?verbose", nil))
		return rec.Code, rec.Body.String()
	}
}

func TestReadyzFailsUntilTheCachesExist(t *testing.T) {
	p, readyz := servedProcess(t, "--webhook-port=0")
	if code, body := readyz(); code != http.StatusInternalServerError || !strings.Contains(body, "[-]informer-sync failed") {
		t.Fatalf("/readyz before any cache exists: %d\n%s", code, body)
	}

	// Step 8's check takes the place of the stand-in: one informer-sync.
	synced := false
	p.health.SetReadinessCheck(server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		if !synced {
			return errors.New("not synced: WebApps")
		}
		return nil
	}})
	if code, body := readyz(); code != http.StatusInternalServerError || strings.Count(body, "]informer-sync") != 1 {
		t.Fatalf("/readyz while the caches fill: %d\n%s", code, body)
	}
	synced = true
	if code, body := readyz(); code != http.StatusOK || strings.Count(body, "]informer-sync") != 1 {
		t.Fatalf("/readyz once synced: %d\n%s", code, body)
	}
}
