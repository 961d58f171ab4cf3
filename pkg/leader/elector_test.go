package leader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestDisabledRunStartsAtOnce(t *testing.T) {
	o := DefaultOptions()
	o.Enabled = false
	e, err := New(nil, o, nil) // no API server needed
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	called := make(chan struct{})
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(ctx, func(ctx context.Context) error {
			close(called)
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("onStartedLeading was not called")
	}
	select {
	case <-e.Elected():
	default:
		t.Error("Elected() is not closed while the work runs")
	}
	if err := e.HealthCheck().Check(nil); err != nil {
		t.Errorf("health check: %v", err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if err := e.Run(t.Context(), func(context.Context) error { return nil }); err == nil {
		t.Error("second Run = nil, want an error")
	}
}

func TestDisabledRunCallbackReturningEarly(t *testing.T) {
	o := DefaultOptions()
	o.Enabled = false
	e, err := New(nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the controller failed")
	err = e.Run(t.Context(), func(context.Context) error { return failed })
	if !errors.Is(err, ErrCallbackReturned) || !errors.Is(err, failed) {
		t.Errorf("Run = %v, want ErrCallbackReturned and the callback's error", err)
	}
}

// The callback's error after a stop is Run's result.
func TestDisabledRunReturnsCallbackError(t *testing.T) {
	o := DefaultOptions()
	o.Enabled = false
	e, err := New(nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	failed := errors.New("drain timed out")
	err = e.Run(ctx, func(ctx context.Context) error { cancel(); return failed })
	if !errors.Is(err, failed) || errors.Is(err, ErrCallbackReturned) {
		t.Errorf("Run = %v, want only the callback's error", err)
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	o := DefaultOptions()
	o.RenewDeadline = o.LeaseDuration
	_, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, o, nil)
	if err == nil || !strings.Contains(err.Error(), "--leader-elect-renew-deadline") {
		t.Errorf("New = %v, want the Validate error", err)
	}
}

// The elector's rest.Config is a copy with its own limits; the caller's is
// untouched.
func TestNewUsesItsOwnRestConfig(t *testing.T) {
	shared := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 1, Burst: 1, RateLimiter: shared, UserAgent: "handroll/v1"}
	o := DefaultOptions()
	o.LeaseNamespace = "ops"
	reg := prometheus.NewRegistry()
	e, err := New(cfg, o, reg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != 0 || cfg.QPS != 1 || cfg.RateLimiter != shared || cfg.UserAgent != "handroll/v1" {
		t.Errorf("the caller's rest.Config changed: %+v", cfg)
	}
	lc := e.config
	if lc == cfg {
		t.Fatal("the elector shares the caller's rest.Config")
	}
	if lc.RateLimiter != nil || lc.QPS != leaseClientQPS || lc.Burst != leaseClientBurst {
		t.Errorf("rate limits: limiter %v, QPS %v, burst %d; want their own", lc.RateLimiter, lc.QPS, lc.Burst)
	}
	if lc.Timeout != 2*time.Second || lc.Timeout != o.RequestTimeout() {
		t.Errorf("timeout = %s, want the retry period, 2s", lc.Timeout)
	}
	if lc.UserAgent != "handroll/v1/leader-election" {
		t.Errorf("user agent = %q", lc.UserAgent)
	}
	if e.Identity() == "" || e.lock.LeaseMeta.Namespace != "ops" {
		t.Errorf("identity %q, namespace %q", e.Identity(), e.lock.LeaseMeta.Namespace)
	}
	if got := e.HealthCheck().Name; got != "leader-election" {
		t.Errorf("health check name = %q", got)
	}

	// A second elector may register the same process-global metrics in the
	// same registry.
	if _, err := New(cfg, o, reg); err != nil {
		t.Errorf("second New on one registry: %v", err)
	}
}

func TestNewFillsInNamespaceAndKeepsIdentity(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "from-env")
	o := DefaultOptions()
	o.Identity = "me"
	e, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Identity() != "me" {
		t.Errorf("identity = %q, want me", e.Identity())
	}
	if ns := e.lock.LeaseMeta.Namespace; ns != DefaultNamespace() {
		t.Errorf("namespace = %q, want %q", ns, DefaultNamespace())
	}
}
