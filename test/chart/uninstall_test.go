package chart

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// foreignFinalizer and policyFinalizer stand for a backup tool's and a
// policy tool's own finalizers.
const (
	foreignFinalizer = "backup.example.com/protect"
	policyFinalizer  = "policy.example.com/hold"
	// drainFinalizer keeps a child of a WebApp from going at once, as a
	// volume's protection or a load balancer's clean-up would.
	drainFinalizer = "drain.example.com/wait"
)

// TestUninstallCommand runs `handroll uninstall`, what the chart's
// pre-delete hook Job runs, against a real API server with what an
// operator leaves as it runs, and with the WebApp of a cluster where a
// backup tool also puts finalizers: it removes handroll's own finalizer
// and no other, fails naming the WebApp and its holder, touches nothing
// of the operator's until the WebApps are gone, and then deletes exactly
// what the operator made; --force-finalizers removes the others'
// finalizers too, when the user says so. A WebApp is gone only with its
// children: the CRD, deleted next, must outlive them, or the garbage
// collector can no longer prove their owner absent and keeps them.
func TestUninstallCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	// The controllers, for the garbage collector. The control plane's
	// start and handroll's build are not this test's work: its budget
	// starts after them.
	cp := controlplane.StartForTest(t, controlplane.Options{Controllers: true, CRDDirs: []string{filepath.Join(repoRoot(t), "manifests", "crd")}})
	kube, hc := cp.KubeClient(t), cp.HandrollClient(t)
	bin := operator.Handroll(t)
	ctx, cancel := budget.Context(t, t.Context(), 4*time.Minute, "the uninstall scenario")
	defer cancel()

	const opNS = "platform-ops"
	createHeldWebApps(ctx, t, kube, hc, opNS)
	waitForGarbageCollector(ctx, t, hc, kube)
	// What the operator made as it ran, beside what it did not make.
	ours := []string{"Lease handroll-leader", "Lease handroll-leader-shard-0-of-3", "Lease handroll-leader-member-00000000000000ab",
		"ConfigMap webapp-directory", "ConfigMap webapp-directory-1", "Secret handroll-webhook-tls", "ConfigMap handroll-ca"}
	theirs := []string{"Lease other-leader", "Lease handroll-leaderboard", "ConfigMap webapp-directory-notes", "ConfigMap settings", "ConfigMap corp-ca"}
	for _, o := range append(slices.Clone(ours), theirs...) {
		createRuntimeObject(ctx, t, kube, opNS, o)
	}
	if _, err := kube.AppsV1().Deployments(opNS).Create(ctx, operatorDeployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	uninstall := func(flags ...string) (string, error) {
		args := append([]string{"uninstall", "--kubeconfig=" + cp.Kubeconfig, "--operator-namespace=" + opNS, "--delete-webapps", "--timeout=5s"}, flags...)
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := uninstall()
	checkHeldFailure(t, out, err)
	checkOnlyTheFreeWebAppsGone(ctx, t, kube, hc, opNS, ours)

	// The backup tool finishes, and removes its finalizer; the retried
	// uninstall still stops on the policy tool's, which nobody removes.
	releaseBackupAndChild(ctx, t, kube, hc)
	if out, err := uninstall(); err == nil || strings.Contains(out, "backed-up") || strings.Contains(out, "draining") || !strings.Contains(out, "team-b/guarded") {
		t.Errorf("with only the policy tool's finalizer left: %v, want a failure naming team-b/guarded alone:\n%s", err, out)
	}
	checkRuntimeObjects(ctx, t, kube, opNS, ours, true)
	// The user decides its clean-up may be skipped.
	out, err = uninstall("--force-finalizers")
	if err != nil {
		t.Fatalf("handroll uninstall --force-finalizers: %v\n%s", err, out)
	}
	if !strings.Contains(out, "removed the finalizer(s) "+policyFinalizer+" from WebApp team-b/guarded") {
		t.Errorf("--force-finalizers does not say which finalizer it removed from which WebApp:\n%s", out)
	}
	t.Logf("forced, once the backup tool is done:\n%s", out)
	checkOperatorsOwnGone(ctx, t, kube, hc, opNS, ours, theirs)

	// A user's own Secret of that name (the existing-Secret mode) stays,
	// and so does a ConfigMap of the CA's name that pkg/certs did not make.
	createRuntimeObject(ctx, t, kube, opNS, "Secret handroll-webhook-tls user")
	createRuntimeObject(ctx, t, kube, opNS, "ConfigMap handroll-ca user")
	if out, err := uninstall(); err != nil {
		t.Fatalf("handroll uninstall, a second time: %v\n%s", err, out)
	}
	checkRuntimeObjects(ctx, t, kube, opNS, []string{"Secret handroll-webhook-tls", "ConfigMap handroll-ca"}, true)
}

// createHeldWebApps creates opNS and the teams' namespaces, and in them
// WebApps with children, some held by another tool's finalizer or with a
// child held by one.
func createHeldWebApps(ctx context.Context, t *testing.T, kube kubernetes.Interface, hc versioned.Interface, opNS string) {
	t.Helper()
	for _, ns := range []string{opNS, "team-a", "team-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ ns, name, finalizer, childFinalizer string }{
		{"team-a", "shop", "", ""},
		{"team-a", "legacy", webapp.LegacyFinalizerDirectory, ""},
		{"team-a", "draining", "", drainFinalizer},
		{"team-b", "backed-up", foreignFinalizer, ""},
		{"team-b", "guarded", policyFinalizer, ""},
	} {
		obj := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: w.name}, Spec: handrollv1.WebAppSpec{Image: "registry.invalid/app:1"}}
		if w.finalizer != "" {
			obj.Finalizers = []string{w.finalizer}
		}
		created, err := hc.HandrollV1().WebApps(w.ns).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		createChild(ctx, t, kube, created, w.childFinalizer)
	}
}

// checkHeldFailure checks that the first uninstall fails, naming each
// WebApp still held and what holds it.
func checkHeldFailure(t *testing.T, out string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("handroll uninstall succeeded with a WebApp a backup tool holds:\n%s", out)
	}
	// A WebApp is not gone while a child is left: the CRD must outlive
	// them all.
	for _, want := range []string{"team-b/backed-up (held by the finalizer(s) " + foreignFinalizer, "team-b/guarded (held by the finalizer(s) " + policyFinalizer, "--force-finalizers",
		"team-a/draining (waiting for the garbage collector to delete its children: ConfigMap draining-child, held by the finalizer(s) " + drainFinalizer} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q:\n%s", want, out)
		}
	}
	// The pass the timeout cut short is no failure of the API server's.
	if strings.Contains(out, "the last attempt failed") {
		t.Errorf("the failure blames the pass the timeout cut short:\n%s", out)
	}
	t.Logf("with the backup tool's finalizer on: %v\n%s", err, out)
}

// checkOnlyTheFreeWebAppsGone checks, after the failed uninstall, that the
// held WebApps keep the other tools' finalizers, that only the WebApps
// nothing held are gone, and that nothing of the operator's was touched.
func checkOnlyTheFreeWebAppsGone(ctx context.Context, t *testing.T, kube kubernetes.Interface, hc versioned.Interface, opNS string, ours []string) {
	t.Helper()
	held, err := hc.HandrollV1().WebApps("team-b").Get(ctx, "backed-up", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The garbage collector's foregroundDeletion may still be on it.
	if held.DeletionTimestamp == nil || !slices.Equal(slices.DeleteFunc(held.Finalizers, func(f string) bool { return f == metav1.FinalizerDeleteDependents }), []string{foreignFinalizer}) {
		t.Errorf("the held WebApp: deleting %v, finalizers %v; want deleting, the backup tool's finalizer kept", held.DeletionTimestamp != nil, held.Finalizers)
	}
	for _, ns := range []string{"team-a"} {
		list, err := hc.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range list.Items {
			if w.Name != "draining" {
				t.Errorf("WebApp %s/%s is left (finalizers %v)", ns, w.Name, w.Finalizers)
			}
		}
		checkChildren(ctx, t, kube, ns, "draining-child")
	}
	checkRuntimeObjects(ctx, t, kube, opNS, ours, true) // nothing of the operator's touched yet
	if d, err := kube.AppsV1().Deployments(opNS).Get(ctx, "handroll", metav1.GetOptions{}); err != nil || ptr.Deref(d.Spec.Replicas, 1) != 2 {
		t.Errorf("the operator was scaled before the WebApps were gone: %v", err)
	}
}

// releaseBackupAndChild removes the backup tool's finalizer from its
// WebApp and the drain finalizer from the child it held.
func releaseBackupAndChild(ctx context.Context, t *testing.T, kube kubernetes.Interface, hc versioned.Interface) {
	t.Helper()
	patch := []byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"` + foreignFinalizer + `"},{"op":"remove","path":"/metadata/finalizers/0"}]`)
	if _, err := hc.HandrollV1().WebApps("team-b").Patch(ctx, "backed-up", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("team-a").Patch(ctx, "draining-child", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkOperatorsOwnGone checks, after the forced uninstall, that no
// WebApp or child is left, the operator is scaled to 0, and what it made
// is gone while what it did not make stays.
func checkOperatorsOwnGone(ctx context.Context, t *testing.T, kube kubernetes.Interface, hc versioned.Interface, opNS string, ours, theirs []string) {
	t.Helper()
	if list, err := hc.HandrollV1().WebApps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) > 0 {
		t.Errorf("WebApps left: %v (%v)", list, err)
	}
	checkChildren(ctx, t, kube, "team-a")
	checkChildren(ctx, t, kube, "team-b")
	if d, err := kube.AppsV1().Deployments(opNS).Get(ctx, "handroll", metav1.GetOptions{}); err != nil || ptr.Deref(d.Spec.Replicas, 1) != 0 {
		t.Errorf("the operator's Deployment is not scaled to 0: %v", err)
	}
	checkRuntimeObjects(ctx, t, kube, opNS, ours, false)
	checkRuntimeObjects(ctx, t, kube, opNS, theirs, true)
}

// createChild creates a ConfigMap owned by w as the operator owns its
// children (blockOwnerDeletion, so that a foreground deletion of w waits
// for it), with finalizer if not empty.
func createChild(ctx context.Context, t *testing.T, kube kubernetes.Interface, w *handrollv1.WebApp, finalizer string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:   w.Name + "-child",
		Labels: map[string]string{webapp.LabelManagedBy: webapp.ManagedBy},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: handrollv1.SchemeGroupVersion.String(), Kind: "WebApp", Name: w.Name, UID: w.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}}
	if finalizer != "" {
		cm.Finalizers = []string{finalizer}
	}
	if _, err := kube.CoreV1().ConfigMaps(w.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkChildren fails t unless the children of WebApps in ns are want.
func checkChildren(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string, want ...string) {
	t.Helper()
	list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: webapp.LabelManagedBy + "=" + webapp.ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cm := range list.Items {
		got = append(got, cm.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("children of WebApps in %s: %v, want %v", ns, got, want)
	}
}

// waitForGarbageCollector waits until the garbage collector watches
// WebApps (it finds a new kind at its next discovery, up to 30 s after
// the CRD): a probe WebApp deleted in the foreground goes with its child.
func waitForGarbageCollector(ctx context.Context, t *testing.T, hc versioned.Interface, kube kubernetes.Interface) {
	t.Helper()
	probe, err := hc.HandrollV1().WebApps("default").Create(ctx, &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "gc-probe"}, Spec: handrollv1.WebAppSpec{Image: "registry.invalid/app:1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createChild(ctx, t, kube, probe, "")
	if err := hc.HandrollV1().WebApps("default").Delete(ctx, probe.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	err = budget.Poll(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := hc.HandrollV1().WebApps("default").Get(ctx, probe.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the garbage collector did not take the probe WebApp's child: %v", err)
	}
}

// createRuntimeObject creates "Kind name" in ns as the operator makes it
// (a Secret, or the ConfigMap handroll-ca, with pkg/certs' labels) or, with
// a third word, as a user would.
func createRuntimeObject(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, what string) {
	t.Helper()
	f := strings.Fields(what)
	kind, name, byUser := f[0], f[1], len(f) > 2
	var err error
	switch kind {
	case "Lease":
		_, err = kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	case "ConfigMap":
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if name == "handroll-ca" && !byUser {
			cm.Labels = certs.CAConfigMapLabels()
		}
		_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	case "Secret":
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: certs.SecretLabels()}}
		if byUser {
			s.Labels = map[string]string{"team": "platform"}
		}
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
	default:
		t.Fatalf("no such kind: %s", what)
	}
	if err != nil {
		t.Fatalf("creating %s: %v", what, err)
	}
}

// checkRuntimeObjects fails t for each "Kind name" of objs in ns that is
// not present (want) or not gone (!want).
func checkRuntimeObjects(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string, objs []string, want bool) {
	t.Helper()
	for _, what := range objs {
		kind, name, _ := strings.Cut(what, " ")
		var err error
		switch kind {
		case "Lease":
			_, err = kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		case "ConfigMap":
			_, err = kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		case "Secret":
			_, err = kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case want && err != nil:
			t.Errorf("%s: %v; want it kept", what, err)
		case !want && !apierrors.IsNotFound(err):
			t.Errorf("%s: %v; want it deleted", what, err)
		}
	}
}

// operatorDeployment is the operator's Deployment as the chart names it;
// no pod runs here (no node), as after the operator's own stop.
func operatorDeployment() *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "handroll"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "handroll"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "handroll:test"}}},
			},
		},
	}
}

func runUninstall(ctx context.Context, bin, kubeconfig string, flags ...string) (string, error) {
	args := append([]string{"uninstall", "--kubeconfig=" + kubeconfig}, flags...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// TestUninstallCommandKeepsWebApps: `handroll uninstall` with no flag
// deletes no WebApp, and says in one line what it kept.
func TestUninstallCommandKeepsWebApps(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{CRDDirs: []string{filepath.Join(repoRoot(t), "manifests", "crd")}})
	bin := operator.Handroll(t)
	hc := cp.HandrollClient(t)
	if _, err := hc.HandrollV1().WebApps("default").Create(t.Context(), &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: handrollv1.WebAppSpec{Image: "registry.invalid/app:1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := runUninstall(t.Context(), bin, cp.Kubeconfig, "--operator-namespace=handroll-system", "--timeout=5s")
	if err != nil {
		t.Fatalf("handroll uninstall: %v\n%s", err, out)
	}
	if w, err := hc.HandrollV1().WebApps("default").Get(t.Context(), "shop", metav1.GetOptions{}); err != nil || w.DeletionTimestamp != nil {
		t.Errorf("handroll uninstall with no flag deleted WebApp default/shop: %v\n%s", err, out)
	}
	if !strings.Contains(out, "uninstall: kept 1 WebApp(s)") {
		t.Errorf("handroll uninstall does not say what it kept:\n%s", out)
	}
}

// TestUninstallWithoutTheCRDSucceeds: with no WebApp CRD (crd.enable=false
// and the CRD removed, or a second uninstall), there is no WebApp to
// delete: handroll uninstall --delete-webapps succeeds and says so.
func TestUninstallWithoutTheCRDSucceeds(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	bin := operator.Handroll(t)
	out, err := runUninstall(t.Context(), bin, cp.Kubeconfig, "--operator-namespace=handroll-system", "--delete-webapps", "--timeout=5s")
	if err != nil {
		t.Fatalf("handroll uninstall --delete-webapps without the CRD: %v\n%s", err, out)
	}
	if !strings.Contains(out, "no WebApp CRD") {
		t.Errorf("handroll uninstall does not say that there is no WebApp CRD:\n%s", out)
	}
}

// TestTimeoutNamesWhatHoldsTheWebApp: a WebApp that the garbage collector's
// foregroundDeletion holds while a child of its own waits for its
// finalizer is named with that child and its finalizer, and the advice to
// force other controllers' finalizers, which would not help, is not given.
func TestTimeoutNamesWhatHoldsTheWebApp(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{Controllers: true, CRDDirs: []string{filepath.Join(repoRoot(t), "manifests", "crd")}})
	kube, hc := cp.KubeClient(t), cp.HandrollClient(t)
	bin := operator.Handroll(t)
	ctx, cancel := budget.Context(t, t.Context(), 4*time.Minute, "uninstall to name what holds the WebApp")
	defer cancel()
	created, err := hc.HandrollV1().WebApps("default").Create(ctx, &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "draining"}, Spec: handrollv1.WebAppSpec{Image: "registry.invalid/app:1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createChild(ctx, t, kube, created, drainFinalizer)
	waitForGarbageCollector(ctx, t, hc, kube)
	out, err := runUninstall(ctx, bin, cp.Kubeconfig, "--operator-namespace=handroll-system", "--deployment=", "--delete-webapps", "--timeout=5s")
	if err == nil {
		t.Fatalf("handroll uninstall succeeded with a child held:\n%s", out)
	}
	if strings.Contains(out, "--force-finalizers") {
		t.Errorf("the failure advises --force-finalizers, which removes no child's finalizer:\n%s", out)
	}
	if want := "default/draining (waiting for the garbage collector to delete its children: ConfigMap draining-child, held by the finalizer(s) " + drainFinalizer + ")"; !strings.Contains(out, want) {
		t.Errorf("the failure does not say %q:\n%s", want, out)
	}
}
