package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/pkg/shard"
)

func TestValidateShards(t *testing.T) {
	for _, tc := range []struct {
		shards  int
		elect   bool
		wantErr string // "" for none
	}{
		{0, true, ""},
		{0, false, ""},
		{12, true, ""},
		{maxShards, true, ""},
		{-1, true, "--shards=-1"},
		{maxShards + 1, true, "--shards=257"},
		{4, false, "needs --leader-elect"},
	} {
		o := options{shards: tc.shards, leader: leader.DefaultOptions()}
		o.leader.Enabled = tc.elect
		err := validateShards(o)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("--shards=%d, --leader-elect=%v: %v", tc.shards, tc.elect, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("--shards=%d, --leader-elect=%v: error %v, want one containing %q", tc.shards, tc.elect, err, tc.wantErr)
		}
	}
}

// TestValidateLeaseNames: a --leader-elect-resource-name that is a valid
// Lease name but cannot be the label value that marks the membership
// Leases (which the single leader lists too) is refused at start, naming
// the flag, instead of leaving a leader that reconciles nothing.
func TestValidateLeaseNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shards  int
		elect   bool
		wantErr string
	}{
		{"handroll-leader", 0, true, ""},
		{strings.Repeat("a", 63), 1024, true, ""},
		{strings.Repeat("a", 64), 0, true, "--leader-elect-resource-name"},
		{strings.Repeat("a", 64), 12, true, "at most 63 characters"},
		{"team.handroll-leader", 0, true, ""},
		// Not used for membership without leader election.
		{strings.Repeat("a", 64), 0, false, ""},
	} {
		o := options{shards: tc.shards, leader: leader.DefaultOptions()}
		o.leader.Enabled, o.leader.LeaseName = tc.elect, tc.name
		err := validateLeaseNames(o)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q, --shards=%d: %v", tc.name, tc.shards, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q, --shards=%d: error %v, want one containing %q", tc.name, tc.shards, err, tc.wantErr)
		}
	}
}

// TestWaitForNoShardsGivesUpOnAPermanentError: a leader whose Role may not
// list Leases (an image bump without the RBAC) says why and gives up,
// rather than hold its Lease reconciling nothing; a transient error is
// retried.
func TestWaitForNoShardsGivesUpOnAPermanentError(t *testing.T) {
	o := options{leader: leader.DefaultOptions()}
	o.leader.LeaseNamespace, o.leader.RetryPeriod = "handroll-system", 10*time.Millisecond
	for _, tc := range []struct {
		name    string
		err     error
		wantErr string // "": retried until the context ends
	}{
		{"forbidden", apierrors.NewForbidden(coordinationv1.Resource("leases"), "", errors.New("RBAC: no list")), "list on leases"},
		{"unavailable", apierrors.NewServiceUnavailable("etcd is restarting"), ""},
	} {
		kube := fake.NewClientset()
		kube.PrependReactor("list", "leases", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := waitForNoShards(ctx, kube, o)
		cancel()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v; want it retried until the stop", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v; want an error that says %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestMembersRenewOnAClientOfTheirOwn: the membership's renewals do not
// wait in the controllers' rate limiter, and cannot hang without a timeout.
func TestMembersRenewOnAClientOfTheirOwn(t *testing.T) {
	shared := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 1, Burst: 1, RateLimiter: shared}
	o := options{shards: 4, leader: leader.DefaultOptions()}
	m, err := newMembers(cfg, o, "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	client, ok := m.Client.(*coordinationclient.CoordinationV1Client)
	if !ok {
		t.Fatalf("the membership client is a %T", m.Client)
	}
	rc, ok := client.RESTClient().(*rest.RESTClient)
	if !ok {
		t.Fatalf("its REST client is a %T", client.RESTClient())
	}
	if rc.GetRateLimiter() == shared {
		t.Error("the membership renews through the controllers' rate limiter")
	}
	if rc.Client.Timeout != o.leader.RequestTimeout() {
		t.Errorf("the membership's requests time out after %s, want %s", rc.Client.Timeout, o.leader.RequestTimeout())
	}
}

// unsyncedNames is a range's caches with the informers not yet synced.
type unsyncedNames []string

func (u *unsyncedNames) Unsynced() []string                 { return *u }
func (u *unsyncedNames) UnsyncedExceptConversion() []string { return *u }
func (u *unsyncedNames) AwaitingConversion() []string       { return nil }

// awaitingNames is caches whose unsynced informers (unsynced, and
// awaiting) include some that wait for the conversion webhook (awaiting).
type awaitingNames struct{ unsynced, awaiting []string }

func (a *awaitingNames) Unsynced() []string                 { return append(slices.Clone(a.unsynced), a.awaiting...) }
func (a *awaitingNames) UnsyncedExceptConversion() []string { return a.unsynced }
func (a *awaitingNames) AwaitingConversion() []string       { return a.awaiting }

// TestShardedReadyWhileAwaitingConversion: a sharded replica that serves
// the webhooks is ready while its caches, or its first ranges', wait only
// for the API server to reach the conversion webhook, says so in a report,
// and still waits for everything else; one that does not serve them
// waits for all.
func TestShardedReadyWhileAwaitingConversion(t *testing.T) {
	check := func(health *server.Health, path string) (int, string) {
		mux := http.NewServeMux()
		health.Register(mux)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	replica := &awaitingNames{awaiting: []string{"handroll.dev/v1 webapps (metadata) in all namespaces"}}
	rng := &awaitingNames{unsynced: []string{"v1 ConfigMaps"}, awaiting: []string{"handroll.dev/v1 WebApps in all namespaces"}}

	health := &server.Health{}
	held := &heldCaches{byRange: map[int]syncer{}, servesConversion: true}
	held.addChecks(health, replica)
	if code, body := check(health, "/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "informer-sync-conversion") || !strings.Contains(body, "webapps (metadata)") {
		t.Errorf("the replica's WebApps awaiting the conversion webhook: %d\n%s", code, body)
	}
	held.add(shard.Range{Index: 0, Count: 2}, rng)
	if code, body := check(health, "/readyz?verbose"); code == http.StatusOK || !strings.Contains(body, "range 0: v1 ConfigMaps") {
		t.Errorf("its first range's ConfigMaps not synced: %d, want not ready, naming them\n%s", code, body)
	}
	rng.unsynced = nil
	code, body := check(health, "/readyz?verbose")
	if code != http.StatusOK || !strings.Contains(body, "range 0: handroll.dev/v1 WebApps in all namespaces") {
		t.Errorf("its first range awaiting the conversion webhook alone: %d, want ready, reporting it\n%s", code, body)
	}

	health = &server.Health{}
	held = &heldCaches{byRange: map[int]syncer{}}
	held.addChecks(health, replica)
	if code, body := check(health, "/readyz?verbose"); code == http.StatusOK || strings.Contains(body, "informer-sync-conversion") {
		t.Errorf("without the webhooks, the replica's WebApps not synced: %d, want not ready\n%s", code, body)
	}
}

// TestRangesTakenOverKeepAReplicaReady: a replica's first ranges gate its
// readiness until they sync; ranges it takes over later (a replica died)
// never take it out of the webhook Service, and are still reported.
func TestRangesTakenOverKeepAReplicaReady(t *testing.T) {
	held := &heldCaches{byRange: map[int]syncer{}}
	if err := held.ready(); err != nil {
		t.Errorf("holding no range: %v", err)
	}
	first := &unsyncedNames{"webapps"}
	held.add(shard.Range{Index: 0, Count: 4}, first)
	if err := held.ready(); err == nil || !strings.Contains(err.Error(), "range 0: webapps") {
		t.Errorf("its first range not synced: %v, want not ready, naming it", err)
	}
	*first = nil
	if err := held.ready(); err != nil {
		t.Errorf("its first range synced: %v", err)
	}
	held.add(shard.Range{Index: 1, Count: 4}, &unsyncedNames{"deployments"})
	if err := held.ready(); err != nil {
		t.Errorf("a range taken over, not yet synced: %v, want still ready", err)
	}
	if got := held.unsynced(); !slices.Equal(got, []string{"range 1: deployments"}) {
		t.Errorf("reported unsynced = %q", got)
	}
}
