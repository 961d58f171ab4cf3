package upgrade

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/shard"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
	"github.com/handroll/handroll/test/release"
)

// TestShardedUpgradeRollsNoPods upgrades sharded replicas of each release
// upgraded from (the latest before this tree, and the oldest supported),
// which split the WebApps by namespace, to this tree's, which
// split them by uid and label each child with its owner's bucket, as a
// rolling Deployment replaces its pods one by one. Nobody's pods roll: no
// Deployment's generation or pod template changes, no pod is replaced;
// every child gets its bucket label, on its own metadata only; the two
// splits never reconcile side by side (the old replicas let their ranges go
// when they see a member that splits otherwise, and the new ones take none
// while an old one is live); and every WebApp stays Ready.
func TestShardedUpgradeRollsNoPods(t *testing.T) {
	if env == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	for _, from := range releases {
		t.Run(from.Ref, func(t *testing.T) { shardedUpgradeRollsNoPods(t, from) })
	}
}

func shardedUpgradeRollsNoPods(t *testing.T, from *release.Release) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	oldBin, newBin := buildReleases(t, from)
	// The builds are not the upgrade's work: its budget starts after them.
	ctx, cancel := budget.Context(t, context.Background(), 10*time.Minute, "the sharded upgrade from "+from.Ref)
	defer cancel()

	kube, hc := env.KubeClient(t), env.HandrollClient(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ext := apiextensionsclient.NewForConfigOrDie(env.Config)
	opNS := namespace(ctx, t, "handroll-shards")
	// Namespaces numbered at the end: a release that splits by namespace
	// (v0.1.0) puts all of them in one range.
	namespaces := []string{namespace(ctx, t, "team-00"), namespace(ctx, t, "team-01")}
	certDir, caBundle, svc, url := newWebhookEndpoint(t)
	shards := []string{"--shards=4", "--leader-elect-resource-name=handroll-shards",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=500ms"}
	start := func(bin string) *replica { return startReplica(t, bin, opNS, certDir, svc, shards...) }

	// The cluster as the release leaves it, its webhooks served by
	// the replicas (and no longer by another test's).
	readManifests(t, from.Dir).applyCRDs(ctx, t, ext, url, caBundle)
	readManifests(t, from.Dir).applyWebhooks(ctx, t, kube, url, caBundle)
	old := []*replica{start(oldBin), start(oldBin)}
	names := createShardedWebApps(ctx, t, hc, kube, namespaces)
	deploymentsBefore, podsBefore := snapshotWorkloads(ctx, t, kube, dyn, namespaces)

	// The rollout: a new replica joins, an old one leaves, twice.
	current := readManifests(t, root)
	current.applyCRDs(ctx, t, ext, url, caBundle)
	current.applyWebhooks(ctx, t, kube, url, caBundle)
	var next []*replica
	for _, o := range old {
		next = append(next, start(newBin))
		svc.remove(o.addr)
		if err := o.op.Stop(t, syscall.SIGTERM, 45*time.Second); err != nil {
			t.Errorf("the release did not stop cleanly on SIGTERM: %v", err)
		}
	}

	awaitBucketLabels(ctx, t, hc, kube, namespaces, names, next[0])
	time.Sleep(settle)

	checkDeploymentsUnchanged(ctx, t, kube, deploymentsBefore)
	podsAfter := map[string]string{}
	for _, ns := range namespaces {
		for k, v := range uids(ctx, t, dyn, pods, ns) {
			podsAfter[ns+"/"+k] = v
		}
		waitConverged(ctx, t, hc, kube, ns, names[ns])
	}
	if !equality.Semantic.DeepEqual(podsBefore, podsAfter) {
		t.Errorf("pods replaced: before %v, after %v", podsBefore, podsAfter)
	}
	if both := oneWebAppAtOnce(t, namespaces, append(old, next...)); len(both) > 0 {
		t.Errorf("two replicas reconciled one WebApp at overlapping times:\n%s", strings.Join(both, "\n"))
	}
	t.Logf("sharded upgrade from %s (%s): %d WebApps in %v, %d pods kept, every child labelled with its bucket",
		from.Ref, from.Commit[:12], len(names[namespaces[0]])+len(names[namespaces[1]]), namespaces, len(podsAfter))
}

// createShardedWebApps creates 12 WebApps, alternately in the two
// namespaces, waits until they have converged, and returns their names by
// namespace.
func createShardedWebApps(ctx context.Context, t *testing.T, hc versioned.Interface, kube kubernetes.Interface, namespaces []string) map[string][]string {
	t.Helper()
	names := map[string][]string{}
	for i := range 12 {
		ns := namespaces[i%2]
		w := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%02d", i)},
			Spec: handrollv1.WebAppSpec{Image: image, Replicas: ptr.To[int32](1), Config: map[string]string{"n": fmt.Sprint(i)}}}
		if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names[ns] = append(names[ns], w.Name)
	}
	for _, ns := range namespaces {
		waitConverged(ctx, t, hc, kube, ns, names[ns])
	}
	return names
}

// snapshotWorkloads returns the Deployments and the pods' UIDs in
// namespaces, each by namespace/name, as they are before the upgrade.
func snapshotWorkloads(ctx context.Context, t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, namespaces []string) (map[string]appsv1.Deployment, map[string]string) {
	t.Helper()
	deploymentsBefore, podsBefore := map[string]appsv1.Deployment{}, map[string]string{}
	for _, ns := range namespaces {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Items {
			deploymentsBefore[ns+"/"+d.Name] = d
		}
		for k, v := range uids(ctx, t, dyn, pods, ns) {
			podsBefore[ns+"/"+k] = v
		}
	}
	return deploymentsBefore, podsBefore
}

// awaitBucketLabels waits until every child of the WebApps names is
// labelled with its owner's bucket by the new replicas; on failure it
// shows the log of one of them, labeller.
func awaitBucketLabels(ctx context.Context, t *testing.T, hc versioned.Interface, kube kubernetes.Interface, namespaces []string, names map[string][]string, labeller *replica) {
	t.Helper()
	var why string
	err := budget.Poll(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		why = ""
		for _, ns := range namespaces {
			for _, name := range names[ns] {
				w, err := hc.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				want := shard.Bucket(w.UID)
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				s, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, handrollv1.OwnedConfigMapName(name), metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				for kind, labels := range map[string]map[string]string{"Deployment": d.Labels, "Service": s.Labels, "ConfigMap": cm.Labels} {
					if got := labels[shard.BucketLabel]; got != want {
						why = fmt.Sprintf("%s %s/%s: bucket %q, want %q", kind, ns, name, got, want)
						return false, nil
					}
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the children were not labelled with their owner's bucket: %v; %s\n%s", err, why, labeller.op.Log())
	}
}

// checkDeploymentsUnchanged fails t for every Deployment of
// deploymentsBefore whose generation or pod template has changed since.
func checkDeploymentsUnchanged(ctx context.Context, t *testing.T, kube kubernetes.Interface, deploymentsBefore map[string]appsv1.Deployment) {
	t.Helper()
	for key, before := range deploymentsBefore {
		ns, name, _ := strings.Cut(key, "/")
		after, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.Generation != before.Generation || !equality.Semantic.DeepEqual(after.Spec.Template, before.Spec.Template) {
			t.Errorf("Deployment %s: generation %d → %d, pod template (-before +after):\n%s",
				key, before.Generation, after.Generation, cmp.Diff(before.Spec.Template, after.Spec.Template))
		}
	}
}

// oneWebAppAtOnce returns the reconciles of a WebApp in namespaces by two
// replicas at overlapping times. Sharded replicas reconcile side by side,
// each its own WebApps, and each range writes its directory entries
// beside the others': one WebApp's reconciles are what must not overlap.
func oneWebAppAtOnce(t *testing.T, namespaces []string, replicas []*replica) []string {
	t.Helper()
	byKey := map[string][]operator.ReconcileInterval{}
	for _, iv := range reconciles(t, replicas...) {
		if ns, _, _ := strings.Cut(iv.Key, "/"); slices.Contains(namespaces, ns) {
			byKey[iv.Key] = append(byKey[iv.Key], iv)
		}
	}
	var out []string
	for _, ivs := range byKey {
		out = append(out, operator.Overlapping(ivs)...)
	}
	return out
}
