package shard

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestRangesKeepToThemselvesWhenTheServerStopsFiltering: a replica starts
// on an API server that applies shardSelector, so it caches each range
// apart and trusts the server to narrow them; then the API server is
// restarted without the feature gate (an HA control plane upgraded one
// server at a time, say), so every range's cache fills with every WebApp.
// No range's controller may reconcile a WebApp outside its range.
func TestRangesKeepToThemselvesWhenTheServerStopsFiltering(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cp := controlplane.StartForTest(t, controlplane.Options{APIServerArgs: []string{gate}, CRDDirs: []string{filepath.Join(root, "manifests", "crd")}})
	ctx, cancel := budget.Context(t, context.Background(), 8*time.Minute, "the ranges to keep to themselves")
	defer cancel()
	kube, apps := cp.KubeClient(t), cp.HandrollClient(t)
	opNS := cp.Namespace(t)
	var namespaces []string
	uids := map[string]types.UID{} // by key
	for range 8 {
		ns := cp.Namespace(t)
		namespaces = append(namespaces, ns)
		app := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: handrollv1.WebAppSpec{Image: "nginx:1.27"}}
		created, err := apps.HandrollV1().WebApps(ns).Create(ctx, app, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[ns+"/app"] = created.UID
	}
	journal := filepath.Join(t.TempDir(), "journal.jsonl")
	// Lease timings that outlast the API server's restart.
	op := operator.Start(t, cp.WriteKubeconfig(t, func(*clientcmdapi.Config) {}), "--shards=2",
		"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS,
		"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s", "--leader-elect-retry-period=2s",
		"--reconcile-journal="+journal)
	replicasAre := func(want int32) func() (bool, string) { return appsHaveReplicas(ctx, kube, namespaces, want) }
	eventually := func(what string, ok func() (bool, string)) {
		t.Helper()
		waitUntil(t, 2*time.Minute, what, ok, op.Log)
	}
	eventually("every WebApp's Deployment exists", replicasAre(1))
	if strings.Contains(op.Log(), "filters on the client") {
		t.Fatal("the replica filters on the client from the start: the API server was to apply shardSelector")
	}

	// The API server comes back without the gate: shardSelector ignored.
	restartAPIServerWithoutGate(ctx, t, cp)
	for _, ns := range namespaces {
		eventually("patching "+ns+"/app", func() (bool, string) {
			_, err := apps.HandrollV1().WebApps(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	eventually("every Deployment scaled", replicasAre(2))
	time.Sleep(3 * time.Second) // the reconciles the patches cause, in every range that sees them
	if err := op.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("the replica did not stop cleanly: %v", err)
	}

	checkReconcilesInTheirRanges(t, journal, uids)
}

// restartAPIServerWithoutGate restarts cp's API server without the
// feature gate, so that it ignores shardSelector.
func restartAPIServerWithoutGate(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	if err := cp.StopComponent("kube-apiserver", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cp.EditComponentArgs("kube-apiserver", func(args []string) []string {
		return slices.DeleteFunc(args, func(a string) bool { return a == gate })
	}); err != nil {
		t.Fatal(err)
	}
	if err := cp.StartComponent(ctx, "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
}

// checkReconcilesInTheirRanges checks, from the journal, that each of the
// WebApps of uids (by key) was reconciled only by its own range's
// controller, and at least one was reconciled.
func checkReconcilesInTheirRanges(t *testing.T, journal string, uids map[string]types.UID) {
	t.Helper()
	entries, err := operator.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	var outside []string
	reconciles := 0
	for _, e := range entries {
		uid, ours := uids[e.Key]
		if e.Event != "start" || !ours || !strings.HasPrefix(e.Controller, webapp.ControllerName+"-") {
			continue
		}
		reconciles++
		var i, n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(e.Controller, webapp.ControllerName+"-"), "%d-of-%d", &i, &n); err != nil {
			t.Fatalf("controller %q: %v", e.Controller, err)
		}
		if shard.Of(uid, n) != i {
			outside = append(outside, fmt.Sprintf("%s reconciled %s, of range %d", e.Controller, e.Key, shard.Of(uid, n)))
		}
	}
	if reconciles == 0 {
		t.Fatal("the journal holds no reconcile of the test's WebApps")
	}
	if len(outside) > 0 {
		t.Errorf("%d of %d reconciles were outside their controller's range once the API server stopped filtering:\n%s",
			len(outside), reconciles, strings.Join(outside, "\n"))
	}
}
