package shard

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// TestShardedReplicasSplitTheWebApps: two handroll processes with
// --shards=4 split 8 or more namespaces' WebApps, each holding its
// ranges' Leases; when one stops, the other takes its ranges over and
// reconciles every WebApp; and no WebApp is ever reconciled by both at
// overlapping times.
func TestShardedReplicasSplitTheWebApps(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	splitTheWebApps(t, env)
}

// TestShardedReplicasWithoutTheGateFilterOnTheClient: the same on an API
// server that ignores shardSelector: each replica caches every range and
// each range's controller keeps to its own, with the same result.
func TestShardedReplicasWithoutTheGateFilterOnTheClient(t *testing.T) {
	cp := plainControlPlane(t)
	a, _ := splitTheWebApps(t, cp)
	if !strings.Contains(a.Log(), "filters on the client") {
		t.Errorf("the replica did not say it filters on the client")
	}
}

func splitTheWebApps(t *testing.T, env *controlplane.ControlPlane) (a, b *operator.Operator) {
	t.Helper()
	ctx := context.Background()
	kube := env.KubeClient(t)
	apps := env.HandrollClient(t)
	opNS := env.Namespace(t)
	namespaces := createWebAppsInEveryRange(ctx, t, env, apps)
	dir := t.TempDir()
	kubeconfig := env.WriteKubeconfig(t, func(*clientcmdapi.Config) {})
	// All namespaces, not --namespaces: the caches are narrowed by the
	// selector (or, without the gate, not at all).
	launch := func(name string) *operator.Operator {
		return operator.Start(t, kubeconfig, "--shards=4",
			"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS,
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
			"--reconcile-journal="+filepath.Join(dir, name+".jsonl"))
	}
	a, b = launch("a"), launch("b")

	eventually := func(what string, ok func() (bool, string)) {
		t.Helper()
		waitUntil(t, 90*time.Second, what, ok, func() string { return "" })
	}
	eventually("the ranges split 2 and 2", func() (bool, string) {
		ha, hb := rangesHeld(t, a), rangesHeld(t, b)
		return ha == 2 && hb == 2, fmt.Sprintf("a holds %d, b %d", ha, hb)
	})
	replicasAre := func(want int32) func() (bool, string) { return appsHaveReplicas(ctx, kube, namespaces, want) }
	eventually("every WebApp's Deployment exists", replicasAre(1))
	eventually("every child carries its owner's bucket, no pod template does", childrenCarryTheirBuckets(ctx, t, kube, apps, namespaces))
	// The ranges' electors answer /healthz, as the single leader's does.
	for _, o := range []*operator.Operator{a, b} {
		if code, body := o.Probe(t, "/healthz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]shard-leader-election ok") {
			t.Errorf("/healthz?verbose: %d\n%s\nwant 200 with the ranges' election checked", code, body)
		}
	}

	// a stops; b takes its ranges and reconciles what changes in them.
	if err := a.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("a did not stop cleanly: %v\n%s", err, a.Log())
	}
	aExited, _ := a.ExitedAt()
	eventually("b holds every range", func() (bool, string) {
		h := rangesHeld(t, b)
		return h == 4, fmt.Sprintf("b holds %d", h)
	})
	for _, ns := range namespaces {
		if _, err := apps.HandrollV1().WebApps(ns).Patch(ctx, "app", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually("every Deployment scaled by b", replicasAre(2))
	eventually("the directory lists every WebApp", directoryListsEveryApp(ctx, kube, opNS, namespaces))
	if err := b.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("b did not stop cleanly: %v", err)
	}
	bExited, _ := b.ExitedAt()

	checkNoReconcilesOverlap(t, dir, namespaces, map[string]time.Time{"a": aExited, "b": bExited})
	return a, b
}

// createWebAppsInEveryRange creates at least 8 WebApps, one a namespace,
// and one in each of the 4 ranges: their uids, so their ranges, are the
// server's draw, and a replica whose two ranges held none would have
// nothing to reconcile (1 in 256 with 8 alone). It returns the namespaces.
func createWebAppsInEveryRange(ctx context.Context, t *testing.T, env *controlplane.ControlPlane, apps versioned.Interface) []string {
	t.Helper()
	var namespaces []string
	covered := map[int]bool{}
	for len(namespaces) < 8 || len(covered) < 4 {
		if len(namespaces) == 64 {
			t.Fatalf("64 WebApps fall in only %d of the 4 ranges", len(covered))
		}
		ns := env.Namespace(t)
		namespaces = append(namespaces, ns)
		app := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: handrollv1.WebAppSpec{Image: "nginx:1.27"}}
		created, err := apps.HandrollV1().WebApps(ns).Create(ctx, app, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		covered[shard.Of(created.UID, 4)] = true
	}
	return namespaces
}

// rangesHeld is o's handroll_shard_ranges_held, or -1 if it has none.
func rangesHeld(t *testing.T, o *operator.Operator) int {
	t.Helper()
	f := o.Metrics(t)["handroll_shard_ranges_held"]
	if f == nil || len(f.GetMetric()) == 0 {
		return -1
	}
	return int(f.GetMetric()[0].GetGauge().GetValue())
}

// childrenCarryTheirBuckets tells whether every WebApp's Deployment and
// Service carry the WebApp's bucket, and if not, why; it fails t if a pod
// template carries it.
func childrenCarryTheirBuckets(ctx context.Context, t *testing.T, kube kubernetes.Interface, apps versioned.Interface, namespaces []string) func() (bool, string) {
	return func() (bool, string) {
		for _, ns := range namespaces {
			w, err := apps.HandrollV1().WebApps(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			svc, err := kube.CoreV1().Services(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			want := shard.Bucket(w.UID)
			if d.Labels[shard.BucketLabel] != want || svc.Labels[shard.BucketLabel] != want {
				return false, fmt.Sprintf("%s: Deployment's bucket %q, Service's %q, want %q", ns, d.Labels[shard.BucketLabel], svc.Labels[shard.BucketLabel], want)
			}
			if b, on := d.Spec.Template.Labels[shard.BucketLabel]; on {
				t.Fatalf("%s: the pod template carries the bucket %q: its pods would roll", ns, b)
			}
		}
		return true, ""
	}
}

// directoryListsEveryApp tells whether the directory in opNS lists the
// WebApp "app" of every namespace, and if not, why.
func directoryListsEveryApp(ctx context.Context, kube kubernetes.Interface, opNS string, namespaces []string) func() (bool, string) {
	return func() (bool, string) {
		for _, ns := range namespaces {
			url, found, err := webapp.LookupDirectory(ctx, kube, opNS, ns, "app")
			if err != nil || !found || url == "" {
				return false, fmt.Sprintf("%s/app: %q, %v, %v", ns, url, found, err)
			}
		}
		return true, ""
	}
}

// checkNoReconcilesOverlap checks, from the replicas' journals in dir,
// that both replicas reconciled every WebApp of namespaces, and that per
// WebApp no two replicas' reconciles overlap.
func checkNoReconcilesOverlap(t *testing.T, dir string, namespaces []string, exitedAt map[string]time.Time) {
	t.Helper()
	byKey := map[string][]operator.ReconcileInterval{}
	replicas := map[string]bool{}
	for name, exited := range exitedAt {
		entries, err := operator.ReadJournal(filepath.Join(dir, name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, iv := range operator.ReconcileIntervals(entries, exited) {
			// Other tests' WebApps are in the cluster too: ours only.
			if ns, _, _ := strings.Cut(iv.Key, "/"); !slices.Contains(namespaces, ns) {
				continue
			}
			byKey[iv.Key] = append(byKey[iv.Key], iv)
			replicas[iv.Replica] = true
		}
	}
	if len(byKey) != len(namespaces) || len(replicas) != 2 {
		t.Fatalf("the journals hold reconciles of %d WebApps by %d replicas, want %d by 2", len(byKey), len(replicas), len(namespaces))
	}
	for key, ivs := range byKey {
		if o := operator.Overlapping(ivs); len(o) > 0 {
			t.Errorf("%s reconciled by two replicas at once:\n%s", key, strings.Join(o, "\n"))
		}
	}
}

// TestSingleLeaderAndShardsNeverRunTogether: one leader without --shards
// and replicas with it hold different Leases for the same WebApps. A
// sharded replica takes no range while the single leader's Lease is held,
// and a single leader reconciles nothing while sharded replicas are live.
func TestSingleLeaderAndShardsNeverRunTogether(t *testing.T) {
	if env == nil {
		t.Skip("needs the control plane")
	}
	ctx := context.Background()
	kube := env.KubeClient(t)
	apps := env.HandrollClient(t)
	opNS, ns := env.Namespace(t), env.Namespace(t)
	app := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: handrollv1.WebAppSpec{Image: "nginx:1.27"}}
	if _, err := apps.HandrollV1().WebApps(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := env.WriteKubeconfig(t, func(*clientcmdapi.Config) {})
	launch := func(name string, extra ...string) *operator.Operator {
		return operator.Start(t, kubeconfig, append([]string{"--namespaces=" + ns,
			"--operator-namespace=" + opNS, "--leader-elect-resource-namespace=" + opNS,
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
			"--reconcile-journal=" + filepath.Join(dir, name+".jsonl")}, extra...)...)
	}
	reconciles := func(name string) int {
		entries, _ := operator.ReadJournal(filepath.Join(dir, name+".jsonl"))
		return len(entries)
	}
	held := func(o *operator.Operator) int {
		f := o.Metrics(t)["handroll_shard_ranges_held"]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0
		}
		return int(f.GetMetric()[0].GetGauge().GetValue())
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(budget.Scale(60 * time.Second))
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, budget.Scale(time.Minute))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	scale := func(n int32) {
		t.Helper()
		if _, err := apps.HandrollV1().WebApps(ns).Patch(ctx, "app", types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scaledTo := func(n int32) func() bool {
		return func() bool {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			return err == nil && *d.Spec.Replicas == n
		}
	}

	single := launch("single")
	waitFor("the single leader reconciles", scaledTo(1))
	sharded := launch("sharded", "--shards=4")
	time.Sleep(3 * time.Second)
	if h := held(sharded); h != 0 {
		t.Fatalf("the sharded replica holds %d ranges beside a single leader", h)
	}
	if err := single.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor("the sharded replica takes every range once the single leader is gone", func() bool { return held(sharded) == 4 })
	scale(2)
	waitFor("the sharded replica reconciles", scaledTo(2))

	late := launch("late")
	waitFor("the new single leader says it waits", func() bool { return strings.Contains(late.Log(), "Replicas with --shards are live") })
	before := reconciles("late")
	scale(3)
	time.Sleep(3 * time.Second)
	if n := reconciles("late"); n != before {
		t.Errorf("the single leader reconciled beside a sharded replica (%d journal lines, then %d)", before, n)
	}
	if err := sharded.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor("the single leader reconciles once the sharded replica is gone", scaledTo(3))
}

// appsHaveReplicas tells whether the Deployment "app" of every namespace
// exists with want replicas, and if not, why.
func appsHaveReplicas(ctx context.Context, kube kubernetes.Interface, namespaces []string, want int32) func() (bool, string) {
	return func() (bool, string) {
		for _, ns := range namespaces {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, ns + ": no Deployment"
			}
			if err != nil {
				return false, err.Error()
			}
			if got := *d.Spec.Replicas; got != want {
				return false, fmt.Sprintf("%s: %d replicas", ns, got)
			}
		}
		return true, ""
	}
}

// waitUntil polls ok every 200 ms until it holds, or fails t after timeout
// with what, ok's last state and detail().
func waitUntil(t *testing.T, timeout time.Duration, what string, ok func() (bool, string), detail func() string) {
	t.Helper()
	deadline := time.Now().Add(budget.Scale(timeout))
	for {
		done, state := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s\n%s", what, state, detail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
