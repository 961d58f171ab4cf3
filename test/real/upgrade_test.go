package real

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// upgradeWebApps is how many WebApps each upgrade starts with.
const upgradeWebApps = 4

// TestUpgradeFromReleases installs each release an upgrade starts from (the
// latest before this tree, and the oldest supported) as users install it,
// on the real node, with its own image, fills it with WebApps, and
// upgrades it to this tree: with install.yaml, `kubectl apply
// --server-side` of this tree's file after the release's own (make
// build-installer in its worktree); with helm, `helm upgrade` to this
// tree's chart from the oldest release's (TestHelmInstallUpgradeUninstall
// upgrades from the latest's). No child Deployment may change (generation
// or pod template), no child be written, no pod be replaced.
func TestUpgradeFromReleases(t *testing.T) {
	from := upgradedFrom(t)
	makeTarget(t, "local-push", "IMG="+helmImage)
	head := installer(t, root, helmImage)
	_, err := kube.CoreV1().Namespaces().Get(context.Background(), operatorNamespace, metav1.GetOptions{})
	hadNamespace := err == nil
	for _, r := range from {
		t.Run("install.yaml from "+r.Ref, func(t *testing.T) { upgradeInstaller(t, r, head) })
	}
	if hadNamespace { // as make cluster-up left it, for make run
		_, _ = kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{})
	}
	for _, r := range from[1:] {
		t.Run("helm from "+r.Ref, func(t *testing.T) {
			if !r.hasChart() {
				t.Skipf("%s (%s) has no chart: no helm install of it to upgrade", r.Ref, r.Commit[:12])
			}
			upgradeHelm(t, r)
		})
	}
}

// upgradeInstaller applies the release's install.yaml, then head's, as
// docs/upgrade.md says: server-side, the objects the new file no longer
// has deleted.
func upgradeInstaller(t *testing.T, r *releaseImage, head string) {
	checkNoCRD(t)
	old := installer(t, r.Dir, r.image)
	placeOnRealNode(t, operatorNamespace)
	t.Cleanup(func() { uninstallInstaller(t, head) })
	kubectl(t, "apply", "--server-side", "-f", old)
	kubectl(t, "-n", operatorNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
	checkInstalledIn(t, operatorNamespace)
	checkOperatorImage(t, operatorNamespace, r.image)
	checkPulled(t, r.image)
	ns, before := fillWebApps(t)

	began := time.Now()
	kubectl(t, "apply", "--server-side", "-f", head)
	for _, o := range prunable(t, old, head) {
		kubectl(t, "delete", "--ignore-not-found", o)
	}
	kubectl(t, "-n", operatorNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
	checkInstalledIn(t, operatorNamespace)
	checkOperatorImage(t, operatorNamespace, helmImage)
	checkPulled(t, helmImage)
	checkChildrenKept(t, ns, before, fmt.Sprintf("install.yaml from %s (%s)", r.Ref, r.Commit[:12]), time.Since(began))
}

// upgradeHelm installs the release's chart with its image into
// helmNamespace, then upgrades it to this tree's chart and image.
func upgradeHelm(t *testing.T, r *releaseImage) {
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM is not set: run make test-real, which builds helm")
	}
	checkNoCRD(t)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   helmNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	values := writeHelmValues(t)
	var ns string
	t.Cleanup(func() {
		if ns != "" {
			deleteWebApps(t, ns)
		}
		cleanUpHelm(t, helm, helmNamespace)
	})
	runHelm(t, helm, "install", "handroll", r.Dir+"/charts/handroll", "-n", helmNamespace, "-f", values,
		"--set", "manager.image.tag="+imageTag(r.image))
	kubectl(t, "-n", helmNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
	checkInstalledIn(t, helmNamespace)
	checkOperatorImage(t, helmNamespace, r.image)
	var before children
	ns, before = fillWebApps(t)

	began := time.Now()
	runHelm(t, helm, "upgrade", "handroll", root+"/charts/handroll", "-n", helmNamespace, "-f", values)
	kubectl(t, "-n", helmNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
	checkInstalledIn(t, helmNamespace)
	checkOperatorImage(t, helmNamespace, helmImage)
	checkPulled(t, helmImage)
	checkChildrenKept(t, ns, before, fmt.Sprintf("helm from %s (%s)", r.Ref, r.Commit[:12]), time.Since(began))
}

// checkOperatorImage: every running pod of the operator in ns runs image,
// the rollout to it over.
func checkOperatorImage(t *testing.T, ns, image string) {
	t.Helper()
	eventually(t, "the operator's pods in "+ns+" all run "+image, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=handroll"})
		if err != nil {
			return false, err
		}
		var running []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running = append(running, p.Name+" "+p.Spec.Containers[0].Image)
			}
		}
		if len(running) == 0 || slices.ContainsFunc(running, func(s string) bool { return !strings.HasSuffix(s, " "+image) }) {
			return false, fmt.Errorf("running: %v", running)
		}
		return true, nil
	})
}

// placeOnRealNode makes ns, where install.yaml puts the operator, send its
// pods to the real node (the PodNodeSelector and PodTolerationRestriction
// admission read these annotations): install.yaml is applied as it is, and
// the local cluster's other nodes run no container.
func placeOnRealNode(t *testing.T, ns string) {
	t.Helper()
	annotations := map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      "handroll.dev/real-node=true",
		"scheduler.alpha.kubernetes.io/defaultTolerations": `[{"key":"handroll.dev/real-node","operator":"Equal","value":"true","effect":"NoSchedule"}]`,
	}
	eventually(t, "namespace "+ns+" sends its pods to the real node", 3*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: annotations}}, metav1.CreateOptions{})
			return err == nil, err
		case err != nil:
			return false, err
		case n.DeletionTimestamp != nil:
			return false, nil // an earlier uninstall's
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		maps.Copy(n.Annotations, annotations)
		_, err = kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, err
	})
}

// uninstallInstaller deletes what head installs, once the WebApps are gone
// (while the operator runs, which lets their finalizers go), and waits
// until its namespace is.
func uninstallInstaller(t *testing.T, head string) {
	list, err := handrollClient.HandrollV1().WebApps(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, w := range list.Items {
			deleteWebApps(t, w.Namespace)
		}
	}
	kubectl(t, "delete", "--ignore-not-found", "--wait=true", "--timeout=180s", "-f", head)
	eventually(t, "namespace "+operatorNamespace+" is gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func deleteWebApps(t *testing.T, ns string) {
	t.Helper()
	if err := handrollClient.HandrollV1().WebApps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting the WebApps of %s: %v", ns, err)
		return
	}
	eventually(t, "the WebApps of "+ns+" are gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := handrollClient.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
}

// prunable returns, as kind/name for kubectl delete (with -n when
// namespaced), the objects of the old install.yaml that the new one no
// longer has: server-side apply of the new file leaves them as they are.
func prunable(t *testing.T, oldFile, newFile string) []string {
	t.Helper()
	old, cur := objectsOf(t, oldFile), objectsOf(t, newFile)
	var out []string
	for _, o := range slices.Sorted(maps.Keys(old)) {
		if !cur[o] {
			out = append(out, o)
		}
	}
	if len(out) > 0 {
		t.Logf("pruned what the new install.yaml no longer has: %v", out)
	}
	return out
}

// objectsOf lists the objects of a multi-document YAML file as
// "kind/name" or "kind/name -n namespace".
func objectsOf(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]bool{}
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var o struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := dec.Decode(&o); err != nil {
			break // io.EOF, or a document kubectl would refuse as well
		}
		if o.Kind == "" {
			continue
		}
		key := o.Kind + "/" + o.Metadata.Name
		if o.Metadata.Namespace != "" {
			key += " -n " + o.Metadata.Namespace
		}
		out[key] = true
	}
	return out
}

// children is what a write to the WebApps' children changes: each
// Deployment's generation, pod template and metadata, each Service's and
// ConfigMap's resourceVersion, and the pods.
type children struct {
	deployments map[string]string
	versions    map[string]string
	pods        []string
}

// fillWebApps creates upgradeWebApps WebApps on the real node, waits until
// they are Ready and nothing of theirs changes any more, and returns their
// namespace and children.
func fillWebApps(t *testing.T) (string, children) {
	t.Helper()
	ns := realNamespace(t, "upgrade-apps", nil)
	for i := range upgradeWebApps {
		w := &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i)},
			Spec: handrollv1.WebAppSpec{Image: demoImage, Replicas: ptr.To(int32(i%2 + 1)),
				Config: map[string]string{"greeting": fmt.Sprint("hello ", i)}},
		}
		eventually(t, "creating WebApp "+ns+"/"+w.Name, time.Minute, func(ctx context.Context) (bool, error) {
			_, err := handrollClient.HandrollV1().WebApps(ns).Create(ctx, w, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), err
		})
	}
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "webapp", "--all", "--timeout=180s")
	var last children
	eventually(t, "the WebApps' children in "+ns+" settle", time.Minute, func(context.Context) (bool, error) {
		now := childrenOf(t, ns)
		settled := last.equal(now)
		last = now
		if !settled {
			time.Sleep(2 * time.Second)
		}
		return settled, nil
	})
	return ns, last
}

func childrenOf(t *testing.T, ns string) children {
	t.Helper()
	ctx := context.Background()
	c := children{deployments: map[string]string{}, versions: map[string]string{}, pods: webAppPods(t, ns)}
	ds, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		template, err := json.Marshal(d.Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		c.deployments[d.Name] = fmt.Sprintf("generation %d, pod template %x, labels %v, annotations %v",
			d.Generation, sha256.Sum256(template), d.Labels, d.Annotations)
	}
	svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		c.versions["Service "+s.Name] = s.ResourceVersion
	}
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			c.versions["ConfigMap "+cm.Name] = cm.ResourceVersion
		}
	}
	return c
}

func (c children) equal(o children) bool {
	return maps.Equal(c.deployments, o.deployments) && maps.Equal(c.versions, o.versions) && slices.Equal(c.pods, o.pods)
}

// checkChildrenKept has the upgraded operator reconcile every WebApp in ns
// again (a poke to each), and fails t for each Deployment changed, each
// child written and each pod replaced since before.
func checkChildrenKept(t *testing.T, ns string, before children, what string, took time.Duration) {
	t.Helper()
	for i := range upgradeWebApps {
		eventuallyUpdate(t, ns, fmt.Sprintf("app-%d", i), func(w *handrollv1.WebApp) {
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			w.Annotations["test.handroll.dev/poke"] = time.Now().Format(time.RFC3339Nano)
		})
	}
	kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "webapp", "--all", "--timeout=120s")
	time.Sleep(3 * time.Second)
	after := childrenOf(t, ns)
	var changed, written []string
	for _, name := range slices.Sorted(maps.Keys(before.deployments)) {
		if b, a := before.deployments[name], after.deployments[name]; a != b {
			changed = append(changed, fmt.Sprintf("Deployment %s: %s\n  → %s", name, b, a))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before.versions)) {
		if b, a := before.versions[name], after.versions[name]; a != b {
			written = append(written, fmt.Sprintf("%s: resourceVersion %s → %s", name, b, a))
		}
	}
	if len(after.deployments) != len(before.deployments) || len(after.versions) != len(before.versions) {
		t.Errorf("children created or deleted: %d Deployments and %d others before, %d and %d after",
			len(before.deployments), len(before.versions), len(after.deployments), len(after.versions))
	}
	if len(changed) > 0 {
		t.Errorf("%d Deployments changed across the upgrade:\n%s", len(changed), strings.Join(changed, "\n"))
	}
	if len(written) > 0 {
		t.Errorf("%d children written across the upgrade:\n%s", len(written), strings.Join(written, "\n"))
	}
	if !slices.Equal(before.pods, after.pods) {
		t.Errorf("pods replaced across the upgrade: %v, then %v", before.pods, after.pods)
	}
	kept := 0
	for _, p := range before.pods {
		if slices.Contains(after.pods, p) {
			kept++
		}
	}
	t.Logf("%s to this tree: %d WebApps, %d Deployments changed, %d children written, %d of %d pods kept; upgrade and rollout %s",
		what, upgradeWebApps, len(changed), len(written), kept, len(before.pods), took.Round(100*time.Millisecond))
}
