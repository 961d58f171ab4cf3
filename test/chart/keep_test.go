package chart

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// helmIn runs helm against cp in namespace ns and returns its combined
// output.
func helmIn(t *testing.T, cp *controlplane.ControlPlane, ns string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmPath(t), append(args, "--kubeconfig", cp.Kubeconfig, "--namespace", ns)...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustHelmIn(t *testing.T, cp *controlplane.ControlPlane, ns string, args ...string) string {
	t.Helper()
	out, err := helmIn(t, cp, ns, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// teamWebApp creates a WebApp in team-a and a Deployment it controls, as
// the operator makes it, and returns the Deployment.
func teamWebApp(t *testing.T, kube kubernetes.Interface, hc versioned.Interface) *appsv1.Deployment {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// No pod serves the webhooks here, and they fail closed: out of the way.
	for _, err := range []error{
		kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "handroll", metav1.DeleteOptions{}),
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "handroll", metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	var w *handrollv1.WebApp
	waitFor(t, "the WebApp kind served", func(ctx context.Context) (bool, error) {
		var err error
		w, err = hc.HandrollV1().WebApps("team-a").Create(ctx, &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: handrollv1.WebAppSpec{Image: "registry.invalid/shop:1"}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	labels := map[string]string{"app.kubernetes.io/name": "shop"}
	d, err := kube.AppsV1().Deployments("team-a").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: handrollv1.SchemeGroupVersion.String(), Kind: "WebApp", Name: w.Name, UID: w.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: w.Spec.Image}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkKept fails t unless WebApp team-a/shop is there, not being deleted,
// and its Deployment is d unchanged (same uid and generation).
func checkKept(t *testing.T, kube kubernetes.Interface, hc versioned.Interface, d *appsv1.Deployment, after string) {
	t.Helper()
	w, err := hc.HandrollV1().WebApps("team-a").Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil || w.DeletionTimestamp != nil {
		t.Errorf("after %s: WebApp team-a/shop: %v (deleting: %v); want it kept", after, err, err == nil && w.DeletionTimestamp != nil)
	}
	got, err := kube.AppsV1().Deployments("team-a").Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Errorf("after %s: Deployment team-a/shop: %v; want it kept", after, err)
		return
	}
	if got.UID != d.UID || got.Generation != d.Generation || got.DeletionTimestamp != nil {
		t.Errorf("after %s: Deployment team-a/shop uid %s generation %d deleting %v; want uid %s generation %d, untouched",
			after, got.UID, got.Generation, got.DeletionTimestamp != nil, d.UID, d.Generation)
	}
}

// TestHelmUninstallKeepsWebApps: helm uninstall with the chart's defaults
// deletes no WebApp and no child of one, runs no hook (so it cannot hang
// on one either), and the NOTES name what it keeps without suggesting a
// flag helm uninstall does not have.
func TestHelmUninstallKeepsWebApps(t *testing.T) {
	cp := startAPIServer(t)
	kube, hc := cp.KubeClient(t), cp.HandrollClient(t)
	const ns = "platform-a"
	notes := mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--create-namespace")
	if !strings.Contains(notes, "keeps every WebApp") {
		t.Errorf("the NOTES do not say that helm uninstall keeps the WebApps:\n%s", notes)
	}
	// helm uninstall has no --set: each one the NOTES suggest is an upgrade's.
	for i, rest := 0, notes; ; {
		j := strings.Index(rest, "--set")
		if j < 0 {
			break
		}
		i += j
		if !strings.Contains(notes[max(0, i-80):i], "helm upgrade") {
			t.Errorf("the NOTES suggest --set outside helm upgrade: %q", notes[max(0, i-80):min(len(notes), i+40)])
		}
		i += len("--set")
		rest = notes[i:]
	}
	d := teamWebApp(t, kube, hc)
	// No pod runs here: a hook Job would never end, and helm would wait.
	out, err := helmIn(t, cp, ns, "uninstall", "handroll", "--timeout", "30s")
	if err != nil {
		t.Fatalf("helm uninstall with the defaults: %v\n%s", err, out)
	}
	checkKept(t, kube, hc, d, "helm uninstall")
}

// TestUninstallElsewhereAdoptsKeptWebApps: after helm uninstall with the
// defaults, a release of another name in another namespace installs over
// the kept CRD (which still carries the first release's ownership) with
// plain helm install, points the CRD's conversion at its own namespace,
// touches no child of the kept WebApps, and owns the CRD from its first
// upgrade on.
func TestUninstallElsewhereAdoptsKeptWebApps(t *testing.T) {
	cp := startAPIServer(t)
	kube, hc := cp.KubeClient(t), cp.HandrollClient(t)
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	mustHelmIn(t, cp, "platform-a", "install", "handroll", "charts/handroll", "--create-namespace")
	d := teamWebApp(t, kube, hc)
	mustHelmIn(t, cp, "platform-a", "uninstall", "handroll", "--timeout", "30s")
	checkKept(t, kube, hc, d, "helm uninstall")

	mustHelmIn(t, cp, "platform-b", "install", "webapps", "charts/handroll", "--create-namespace")
	checkKept(t, kube, hc, d, "helm install elsewhere")
	crd, err := crds.Get(t.Context(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := crd.Spec.Conversion.Webhook.ClientConfig.Service.Namespace; got != "platform-b" {
		t.Errorf("after the install in platform-b, the CRD's conversion Service is in %q", got)
	}
	mustHelmIn(t, cp, "platform-b", "upgrade", "webapps", "charts/handroll")
	crd, err = crds.Get(t.Context(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := crd.Annotations; a["meta.helm.sh/release-namespace"] != "platform-b" || a["meta.helm.sh/release-name"] != "webapps" || a["helm.sh/resource-policy"] != "keep" {
		t.Errorf("after helm upgrade in platform-b, the CRD's annotations are %v; want release webapps in platform-b, kept", a)
	}
	if m := mustHelmIn(t, cp, "platform-b", "get", "manifest", "webapps"); !strings.Contains(m, "kind: CustomResourceDefinition") {
		t.Error("after helm upgrade, the release's manifest holds no CRD: upgrades would leave it behind")
	}
	checkKept(t, kube, hc, d, "helm upgrade elsewhere")
	// And back: uninstall, then the first release's name and namespace again.
	mustHelmIn(t, cp, "platform-b", "uninstall", "webapps", "--timeout", "30s")
	mustHelmIn(t, cp, "platform-a", "install", "handroll", "charts/handroll")
	checkKept(t, kube, hc, d, "helm install back in platform-a")
}

// clusterScopedOfChart returns, as "Kind name", the cluster-scoped objects
// the chart renders with set, hooks included, but the CRD.
func clusterScopedOfChart(t *testing.T, ns, set string) map[string]schema.GroupVersionResource {
	t.Helper()
	res := map[string]string{
		"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
		"ValidatingWebhookConfiguration": "validatingwebhookconfigurations", "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
	}
	out := map[string]schema.GroupVersionResource{}
	for _, o := range mustTemplate(t, ns, "--set", set) {
		kind := o["kind"].(string)
		if kind == "CustomResourceDefinition" || dig(o, "metadata", "namespace") != nil {
			continue
		}
		r, ok := res[kind]
		if !ok {
			t.Fatalf("a cluster-scoped %s the test does not know", kind)
		}
		gv, _ := schema.ParseGroupVersion(o["apiVersion"].(string))
		out[kind+" "+dig(o, "metadata", "name").(string)] = gv.WithResource(r)
	}
	return out
}

// TestUninstallLeavesNoClusterRoleOnAnyPath: with uninstall.deleteWebApps,
// whatever becomes of the hook Job — it succeeds, it fails, helm is
// interrupted or killed while it runs (a lost terminal or a killed CI
// runner gives helm no chance to clean up), or the hook is skipped with
// --no-hooks — once
// the release is gone no cluster-scoped object of the chart is left but
// the CRD; and the Job cannot hang helm (a deadline, no retry).
func TestUninstallLeavesNoClusterRoleOnAnyPath(t *testing.T) {
	cp := startAPIServer(t)
	kube := cp.KubeClient(t)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	const ns, set = "platform-ops", "uninstall.deleteWebApps=true"
	cluster := clusterScopedOfChart(t, ns, set)
	if _, ok := cluster["ClusterRole handroll-manager"]; !ok {
		t.Fatalf("the rendering has no ClusterRole handroll-manager: %v", cluster)
	}
	job := mustTemplate(t, ns, "--set", set)["Job "+ns+"/handroll-uninstall"]
	if dig(job, "spec", "activeDeadlineSeconds") == nil || dig(job, "spec", "backoffLimit") != float64(0) {
		t.Errorf("the hook Job: activeDeadlineSeconds %v, backoffLimit %v; want a deadline and no retry",
			dig(job, "spec", "activeDeadlineSeconds"), dig(job, "spec", "backoffLimit"))
	}
	checkNoneLeft := func(path string) {
		t.Helper()
		checkNoClusterScopedLeft(t, dyn, cluster, path)
	}
	uninstallWith := func(end func(*batchv1.Job, *exec.Cmd)) (string, error) {
		t.Helper()
		return helmUninstallWithHook(t, cp, kube, ns, end)
	}
	finish := func(succeeded bool) func(*batchv1.Job, *exec.Cmd) {
		return endHookJob(t, kube, ns, succeeded)
	}

	mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--create-namespace", "--set", set)
	if out, err := uninstallWith(finish(true)); err != nil {
		t.Fatalf("helm uninstall, the hook Job succeeding: %v\n%s", err, out)
	}
	checkNoneLeft("after the hook succeeded")

	mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--set", set)
	if out, err := uninstallWith(finish(false)); err == nil {
		t.Fatalf("helm uninstall succeeded with the hook Job failed:\n%s", out)
	}
	// The release is still there (the user fixes what held it, or skips the hook).
	mustHelmIn(t, cp, ns, "uninstall", "handroll", "--no-hooks")
	checkNoneLeft("after the hook failed, then helm uninstall --no-hooks")

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--set", set)
		_, _ = uninstallWith(func(_ *batchv1.Job, cmd *exec.Cmd) {
			_ = cmd.Process.Signal(sig)
			time.AfterFunc(budget.Scale(10*time.Second), func() { _ = cmd.Process.Kill() })
		})
		mustHelmIn(t, cp, ns, "uninstall", "handroll", "--no-hooks")
		checkNoneLeft("after helm got " + sig.String() + " while the hook ran, then helm uninstall --no-hooks")
	}

	mustHelmIn(t, cp, ns, "install", "handroll", "charts/handroll", "--set", set)
	mustHelmIn(t, cp, ns, "uninstall", "handroll", "--no-hooks")
	checkNoneLeft("after helm uninstall --no-hooks")
}

// checkNoClusterScopedLeft fails t for each object of cluster still in
// the cluster after path.
func checkNoClusterScopedLeft(t *testing.T, dyn dynamic.Interface, cluster map[string]schema.GroupVersionResource, path string) {
	t.Helper()
	for k, gvr := range cluster {
		_, name, _ := strings.Cut(k, " ")
		if _, err := dyn.Resource(gvr).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %s is left (%v)", path, k, err)
		}
	}
}

// helmUninstallWithHook starts helm uninstall, waits for its hook Job,
// lets end decide the Job's fate, and returns helm's outcome.
func helmUninstallWithHook(t *testing.T, cp *controlplane.ControlPlane, kube kubernetes.Interface, ns string, end func(*batchv1.Job, *exec.Cmd)) (string, error) {
	t.Helper()
	// A Job a failed uninstall left is not the one this run makes.
	var before types.UID
	if j, err := kube.BatchV1().Jobs(ns).Get(t.Context(), "handroll-uninstall", metav1.GetOptions{}); err == nil {
		before = j.UID
	}
	cmd := exec.Command(helmPath(t), "uninstall", "handroll", "--timeout", "2m", "--kubeconfig", cp.Kubeconfig, "--namespace", ns)
	cmd.Dir = repoRoot(t)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var j *batchv1.Job
	waitFor(t, "the hook Job", func(ctx context.Context) (bool, error) {
		var err error
		j, err = kube.BatchV1().Jobs(ns).Get(ctx, "handroll-uninstall", metav1.GetOptions{})
		return err == nil && j.UID != before, nil
	})
	end(j, cmd)
	err := cmd.Wait()
	return out.String(), err
}

// endHookJob returns an end for helmUninstallWithHook that writes what the
// job controller would for a Job that succeeded or failed.
func endHookJob(t *testing.T, kube kubernetes.Interface, ns string, succeeded bool) func(*batchv1.Job, *exec.Cmd) {
	t.Helper()
	return func(j *batchv1.Job, _ *exec.Cmd) {
		now := metav1.Now()
		j.Status.StartTime = &now
		if succeeded {
			j.Status.Succeeded, j.Status.CompletionTime = 1, &now
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			}
		}
		if _, err := kube.BatchV1().Jobs(ns).UpdateStatus(t.Context(), j, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("ending the hook Job: %v", err)
		}
	}
}
