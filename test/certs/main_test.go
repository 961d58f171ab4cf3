// Package certs tests pkg/certs against a real etcd and kube-apiserver:
// replicas agreeing on one Secret, the CA bundle injected into webhook
// configurations and a CRD, and rotations of the serving certificate and
// the CA while the API server calls a webhook served with them.
package certs

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	// Only the tests' own CRDs: what is under test is the injection, not
	// handroll's CRD.
	os.Exit(controlplane.RunTests(m, controlplane.Options{CRDDirs: []string{"testdata/crd"}}, &env))
}

// startManager starts a Manager with its own clients (one replica) on cfg,
// and stops it when t ends, waiting for Start to return.
func startManager(t *testing.T, cfg *rest.Config, opts certs.Options) *certs.Manager {
	t.Helper()
	m := newManager(t, cfg, opts)
	run(t, m)
	return m
}

func newManager(t *testing.T, cfg *rest.Config, opts certs.Options) *certs.Manager {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := certs.New(kube, dyn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// run starts m and returns a function that stops it and waits; t's cleanup
// calls it too.
func run(t *testing.T, m *certs.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Start returned %v", err)
				}
			case <-time.After(budget.Scale(30 * time.Second)):
				t.Errorf("Start did not return within %s of its context ending", budget.Scale(30*time.Second))
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond until it holds, failing t after timeout (scaled
// by budget.Scale) with desc and the last error cond returned.
func eventually(t *testing.T, timeout time.Duration, desc string, cond func(context.Context) (bool, error)) {
	t.Helper()
	timeout = budget.Scale(timeout)
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v (last error: %v)", desc, timeout, last)
	}
}

// requests counts a client's requests by method and path, for checking
// what a Manager wrote (and did not).
type requests struct {
	mu     sync.Mutex
	counts map[string]int
	// hold, when set, is called before a request is sent.
	hold func(*http.Request)
}

func (r *requests) key(method, path string) string { return method + " " + path }

// Count is how many method requests were sent to a path ending in suffix.
func (r *requests) Count(method, suffix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, c := range r.counts {
		if strings.HasPrefix(k, method+" ") && strings.HasSuffix(k, suffix) {
			n += c
		}
	}
	return n
}

// config returns a copy of cfg whose requests r counts.
func (r *requests) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if r.hold != nil {
				r.hold(req)
			}
			r.mu.Lock()
			if r.counts == nil {
				r.counts = map[string]int{}
			}
			r.counts[r.key(req.Method, req.URL.Path)]++
			r.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
