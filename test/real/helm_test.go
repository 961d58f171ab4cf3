package real

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/release"
)

// helmNamespace is the namespace a user picks for the chart: neither
// handroll-system nor anything the manifests name.
const (
	helmNamespace = "platform-ops"
	// Where the same release is installed again after helm uninstall.
	helmElsewhere = "platform-apps"
	helmImage     = "localhost/handroll:helm-1"
)

// TestHelmInstallUpgradeUninstall installs the latest release's chart and
// image (the latest before this tree, found in its history) with the real
// helm into a
// namespace of the user's choice, on the real node, from the local
// cluster's registry; upgrades it to this tree's chart and image with
// values changed while a WebApp runs and a writer keeps writing WebApps
// through the webhooks; uninstalls it, which keeps the WebApp running
// untouched; installs it into another namespace, which takes the WebApp
// over without changing it; and uninstalls that one with
// uninstall.deleteWebApps set by an upgrade, whose pre-delete hook deletes
// the WebApps first. It leaves the cluster as it found it: the kept CRD is
// deleted at the end.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	h := &helmRun{helm: os.Getenv("HELM")}
	if h.helm == "" {
		t.Fatal("HELM is not set: run make test-real, which builds helm")
	}
	h.latest = upgradedFrom(t)[0]
	if !h.latest.hasChart() {
		t.Fatalf("the latest release, %s (%s), has no chart to install", h.latest.Ref, h.latest.Commit[:12])
	}
	makeTarget(t, "local-push", "IMG="+helmImage)
	// A namespace made as a platform team makes one: restricted Pod Security.
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   helmNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanUpHelm(t, h.helm, helmNamespace, helmElsewhere) })
	h.values = writeHelmValues(t)

	// The README's helm install, on the local cluster as make cluster-up
	// leaves it: no CRD that helm would refuse to adopt.
	checkNoCRD(t)

	if !t.Run("helm install of "+h.latest.Ref+" into "+helmNamespace, func(t *testing.T) {
		runHelm(t, h.helm, "install", "handroll", filepath.Join(h.latest.Dir, "charts", "handroll"), "-n", helmNamespace, "-f", h.values,
			"--set", "manager.image.tag="+imageTag(h.latest.image))
		kubectl(t, "-n", helmNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
		checkInstalledIn(t, helmNamespace)
		checkPulled(t, h.latest.image)
	}) {
		return
	}

	// Made here, not in a subtest, whose end would delete it.
	h.app = realNamespace(t, "helm-apps", nil)
	if !t.Run("a WebApp converges on the real node", h.converge) {
		return
	}
	t.Run("helm upgrade to this release with values changed refuses no write and rolls the operator, not the WebApp's pods", h.upgrade)
	t.Run("helm uninstall keeps the WebApp, its children and its pods, and the CRD", h.uninstallKeeps)
	// A new install elsewhere, as a user moving the operator does.
	if !t.Run("an install into "+helmElsewhere+" takes the kept WebApp over and changes none of its children", h.installElsewhere) {
		return
	}
	t.Run("with uninstall.deleteWebApps set by an upgrade, helm uninstall deletes the WebApps first and leaves only the kept CRD", h.uninstallDeletes)
}

// helmRun is what the steps of TestHelmInstallUpgradeUninstall share: the
// helm binary, the release installed first, the values file, and the
// WebApp's namespace, children, pods and the WebApps the writer writes.
type helmRun struct {
	helm, values, app string
	latest            *releaseImage
	before            map[string]int64
	pods, written     []string
}

// converge makes a WebApp on the real node and the writer's WebApps, and
// records its children's generations and its pods.
func (h *helmRun) converge(t *testing.T) {
	eventually(t, "creating WebApp "+h.app+"/shop", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := handrollClient.HandrollV1().WebApps(h.app).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: "shop"},
			Spec:       handrollv1.WebAppSpec{Image: demoImage, Replicas: ptr.To[int32](2), Config: map[string]string{"greeting": "hello"}},
		}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
	h.written = release.CreateWritten(context.Background(), t, handrollClient, h.app, demoImage, 2)
	kubectl(t, "-n", h.app, "wait", "--for=condition=Ready", "webapp/shop", "--timeout=120s")
	h.before, h.pods = childGenerations(t, h.app, "shop"), webAppPods(t, h.app)
}

// upgrade upgrades to this tree's chart with values changed while the
// writer writes: no write refused but as test/upgrade/supported excuses,
// the operator rolled, the WebApp's children and pods not.
func (h *helmRun) upgrade(t *testing.T) {
	operatorBefore := kubectl(t, "-n", helmNamespace, "get", "deployment/handroll", "-o", "jsonpath={.metadata.generation}")
	ctx, stopWriter := context.WithCancel(context.Background())
	defer stopWriter()
	w := &release.Writer{Client: handrollClient, NS: h.app, Names: h.written}
	writing := make(chan struct{})
	go func() { defer close(writing); w.Run(ctx, 20*time.Millisecond) }()

	began := time.Now()
	runHelm(t, h.helm, "upgrade", "handroll", filepath.Join(root, "charts", "handroll"), "-n", helmNamespace, "-f", h.values,
		"--set", "manager.logging.format=json", "--set", "manager.shards=0")
	kubectl(t, "-n", helmNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
	rolledOut := time.Now()
	if after := kubectl(t, "-n", helmNamespace, "get", "deployment/handroll", "-o", "jsonpath={.metadata.generation}"); after == operatorBefore {
		t.Errorf("the operator's Deployment is still at generation %s: the upgrade changed nothing", after)
	}
	args := kubectl(t, "-n", helmNamespace, "get", "deployment/handroll", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if !strings.Contains(args, "--logging-format=json") {
		t.Errorf("the upgraded operator runs with %s, want --logging-format=json", args)
	}
	checkInstalledIn(t, helmNamespace)
	checkPulled(t, helmImage)
	// The new replicas reconcile the WebApp again: nothing of it changes.
	eventuallyUpdate(t, h.app, "shop", func(w *handrollv1.WebApp) {
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		w.Annotations["test.handroll.dev/poke"] = time.Now().Format(time.RFC3339Nano)
	})
	if out, err := exec.Command(kubectlBin, "--kubeconfig="+filepath.Join(root, ".local", "kubeconfig"),
		"-n", h.app, "wait", "--for=condition=Ready", "webapp/shop", "--timeout=60s").CombinedOutput(); err != nil {
		t.Fatalf("the WebApp is not Ready after helm upgrade: %v\n%s\n%s", err, out,
			kubectl(t, "-n", h.app, "get", "webapp/shop", "deployment/shop", "-o", "yaml"))
	}
	time.Sleep(3 * time.Second)
	stopWriter()
	<-writing
	if after := childGenerations(t, h.app, "shop"); !mapsEqual(h.before, after) {
		t.Errorf("the WebApp's children changed across helm upgrade: %v, then %v", h.before, after)
	}
	if after := webAppPods(t, h.app); !slices.Equal(h.pods, after) {
		t.Errorf("the WebApp's pods were replaced across helm upgrade: %v, then %v", h.pods, after)
	}
	writes, conflicts, refused := w.Figures()
	excused := checkRefusedDuring(t, h.latest.Release, refused, began, rolledOut)
	t.Logf("helm upgrade from %s (%s): %d writes accepted, %d conflicts, %d refused (%d excused by test/upgrade/supported); rollout %s",
		h.latest.Ref, h.latest.Commit[:12], writes, conflicts, len(refused), excused, rolledOut.Sub(began).Round(100*time.Millisecond))
	if writes == 0 {
		t.Error("the writer wrote nothing during the upgrade")
	}
}

// uninstallKeeps: helm uninstall keeps the WebApp, its children, its pods
// and the CRD.
func (h *helmRun) uninstallKeeps(t *testing.T) {
	runHelm(t, h.helm, "uninstall", "handroll", "-n", helmNamespace, "--wait", "--timeout=3m")
	checkRuntimeLeftIn(t, helmNamespace)
	checkReleaseGone(t)
	if _, err := handrollClient.HandrollV1().WebApps(h.app).Get(context.Background(), "shop", metav1.GetOptions{}); err != nil {
		t.Errorf("the WebApp is not kept on helm uninstall: %v", err)
	}
	if after := childGenerations(t, h.app, "shop"); !mapsEqual(h.before, after) {
		t.Errorf("the WebApp's children changed across helm uninstall: %v, then %v", h.before, after)
	}
	if after := webAppPods(t, h.app); !slices.Equal(h.pods, after) {
		t.Errorf("the WebApp's pods were replaced across helm uninstall: %v, then %v", h.pods, after)
	}
	checkCRDKept(t)
}

// installElsewhere: an install into another namespace takes the kept
// WebApp over and changes none of its children.
func (h *helmRun) installElsewhere(t *testing.T) {
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   helmElsewhere,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runHelm(t, h.helm, "install", "handroll", filepath.Join(root, "charts", "handroll"), "-n", helmElsewhere, "-f", h.values)
	kubectl(t, "-n", helmElsewhere, "rollout", "status", "deployment/handroll", "--timeout=180s")
	checkInstalledIn(t, helmElsewhere)
	// The new replicas reconcile the WebApp: nothing of it changes.
	eventuallyUpdate(t, h.app, "shop", func(w *handrollv1.WebApp) {
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		w.Annotations["test.handroll.dev/poke"] = time.Now().Format(time.RFC3339Nano)
	})
	kubectl(t, "-n", h.app, "wait", "--for=condition=Ready", "webapp/shop", "--timeout=120s")
	eventually(t, "the new operator lists the WebApp in its directory", time.Minute, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(helmElsewhere).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		return err == nil && cm.Data[webapp.DirectoryKey(h.app, "shop")] != "", nil
	})
	time.Sleep(3 * time.Second)
	if after := childGenerations(t, h.app, "shop"); !mapsEqual(h.before, after) {
		t.Errorf("the WebApp's children changed when the install elsewhere took it over: %v, then %v", h.before, after)
	}
	if after := webAppPods(t, h.app); !slices.Equal(h.pods, after) {
		t.Errorf("the WebApp's pods were replaced when the install elsewhere took it over: %v, then %v", h.pods, after)
	}
}

// uninstallDeletes: with uninstall.deleteWebApps set by an upgrade, the
// pre-delete hook deletes the WebApps first; only the kept CRD is left.
func (h *helmRun) uninstallDeletes(t *testing.T) {
	runHelm(t, h.helm, "upgrade", "handroll", filepath.Join(root, "charts", "handroll"), "-n", helmElsewhere, "--reuse-values",
		"--set", "uninstall.deleteWebApps=true")
	kubectl(t, "-n", helmElsewhere, "rollout", "status", "deployment/handroll", "--timeout=180s")
	// The chart's pre-delete hook deletes the WebApps while the
	// operator runs, then what the operator made as it ran.
	runHelm(t, h.helm, "uninstall", "handroll", "-n", helmElsewhere, "--wait", "--timeout=3m")
	ctx := context.Background()
	if list, err := handrollClient.HandrollV1().WebApps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) > 0 {
		t.Errorf("WebApps left after helm uninstall: %d (%v)", len(list.Items), err)
	}
	eventually(t, "the WebApp's Deployment collected", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := kube.AppsV1().Deployments(h.app).Get(ctx, "shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	checkNothingLeftIn(t, helmElsewhere)
	checkReleaseGone(t)
	checkCRDKept(t)
}

// checkReleaseGone: no cluster-scoped object of the chart is left but the
// kept CRD: no webhook configuration, no ClusterRole.
func checkReleaseGone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, get := range []func() error{
		func() error {
			_, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("a webhook configuration handroll is left (%v)", err)
		}
	}
	roles, err := kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=Helm,app.kubernetes.io/name=handroll"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Items {
		t.Errorf("ClusterRole %s is left", r.Name)
	}
}

func checkCRDKept(t *testing.T) {
	t.Helper()
	if out := kubectl(t, "get", "crd", "webapps.handroll.dev", "-o", "name"); out != "customresourcedefinition.apiextensions.k8s.io/webapps.handroll.dev" {
		t.Errorf("the CRD is not kept on uninstall: %q", out)
	}
}

// checkNothingLeftIn waits until nothing of handroll's is left in ns (a
// pod may still be terminating when helm returns): no pod, Job, Lease,
// ServiceAccount but the default one, ConfigMap but the cluster's root CA,
// or Secret.
func checkNothingLeftIn(t *testing.T, ns string) {
	checkLeftIn(t, ns, func(string) bool { return false })
}

// checkRuntimeLeftIn is checkNothingLeftIn after a helm uninstall that ran
// no hook: what the operator made as it ran (its Leases, its directory,
// its certificate Secret, the CA it publishes) may stay, as
// docs/uninstall.md says.
func checkRuntimeLeftIn(t *testing.T, ns string) {
	checkLeftIn(t, ns, func(what string) bool {
		return strings.HasPrefix(what, "Lease "+leaseName) || strings.HasPrefix(what, "ConfigMap "+webapp.DirectoryName) ||
			what == "Secret handroll-webhook-tls" || what == "ConfigMap handroll-ca"
	})
}

func checkLeftIn(t *testing.T, ns string, allowed func(what string) bool) {
	t.Helper()
	var left []string
	eventually(t, "nothing of handroll's left in "+ns, time.Minute, func(ctx context.Context) (bool, error) {
		left = left[:0]
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			left = append(left, "Pod "+p.Name)
		}
		jobs, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, j := range jobs.Items {
			left = append(left, "Job "+j.Name)
		}
		leases, err := kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			left = append(left, "Lease "+l.Name)
		}
		sas, err := kube.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, sa := range sas.Items {
			if sa.Name != "default" {
				left = append(left, "ServiceAccount "+sa.Name)
			}
		}
		cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, cm := range cms.Items {
			if cm.Name != "kube-root-ca.crt" {
				left = append(left, "ConfigMap "+cm.Name)
			}
		}
		secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range secrets.Items {
			left = append(left, "Secret "+s.Name)
		}
		left = slices.DeleteFunc(left, allowed)
		if len(left) > 0 {
			return false, fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return true, nil
	})
}

// checkRefusedDuring fails t for every refused write, but for those
// test/upgrade/supported excuses for the release upgraded from: a webhook
// call that found its connection closed by that release's stopping pods,
// while the upgrade rolled out. It returns how many it excused.
func checkRefusedDuring(t *testing.T, from *release.Release, refused []release.Refusal, began, rolledOut time.Time) int {
	t.Helper()
	excused := 0
	var failed []string
	for _, r := range refused {
		if from.Allows(release.AllowClosedOnStop) && r.ClosedConnection() && !r.At.Before(began) && r.At.Before(rolledOut.Add(time.Second)) {
			excused++
			t.Logf("refused while %s's pods stopped, excused by test/upgrade/supported (%s): %s", from.Ref, release.AllowClosedOnStop, r)
			continue
		}
		failed = append(failed, r.String())
	}
	if len(failed) > 0 {
		t.Errorf("%d writes were refused during helm upgrade:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	return excused
}

func imageTag(img string) string { return img[strings.LastIndex(img, ":")+1:] }

// writeHelmValues writes the values a user of the local cluster gives: the
// image from its registry, the operator on the real node.
func writeHelmValues(t *testing.T) string {
	t.Helper()
	name, tag, _ := strings.Cut(helmImage, ":")
	return writeNodeValues(t, fmt.Sprintf(`  image:
    repository: %s
    tag: %q
    pullPolicy: Always
`, name, tag))
}

// writeNodeValues writes values that put the operator on the real node,
// with more of manager's values (indented under it) if given.
func writeNodeValues(t *testing.T, manager string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	body := fmt.Sprintf(`manager:
%s  nodeSelector:
    %s: "true"
  tolerations:
  - key: %s
    operator: Equal
    value: "true"
    effect: NoSchedule
`, manager, controlplane.RealNodeLabel, controlplane.RealNodeTaint)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runHelm(t *testing.T, helm string, args ...string) string {
	t.Helper()
	cmd := exec.Command(helm, append(args, "--kubeconfig", filepath.Join(root, ".local", "kubeconfig"))...)
	cmd.Env = withoutKubeconfig(os.Environ())
	began := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("helm %s: %s", args[0], time.Since(began).Round(100*time.Millisecond))
	return string(out)
}

// childGenerations maps each child of WebApp name in ns to its
// metadata.generation (its Deployment) or resourceVersion (its Service and
// ConfigMap), so that any write to one shows.
func childGenerations(t *testing.T, ns, name string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	got := map[string]int64{}
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got["Deployment "+d.Name+" generation"] = d.Generation
	svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got["Service "+svc.Name], _ = parseInt(svc.ResourceVersion)
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got["ConfigMap "+cm.Name], _ = parseInt(cm.ResourceVersion)
	return got
}

func parseInt(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// cleanUpHelm removes whatever the test left: the release, the namespace
// and the kept CRD, which names this namespace's webhook Service for
// conversion; the local cluster has no CRD of its own.
func cleanUpHelm(t *testing.T, helm string, namespaces ...string) {
	for _, ns := range namespaces {
		if t.Failed() {
			pods, _ := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			for _, p := range pods.Items {
				t.Logf("pod %s/%s: %s %+v", ns, p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			}
		}
		cmd := exec.Command(helm, "uninstall", "handroll", "-n", ns, "--ignore-not-found", "--wait", "--timeout=2m",
			"--kubeconfig", filepath.Join(root, ".local", "kubeconfig"))
		cmd.Env = withoutKubeconfig(os.Environ())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm uninstall -n %s: %v\n%s", ns, err, out)
		}
	}
	ctx := context.Background()
	for _, ns := range namespaces {
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	kubectl(t, "delete", "crd", "webapps.handroll.dev", "--ignore-not-found", "--wait=true", "--timeout=120s")
	for _, ns := range namespaces {
		eventually(t, "namespace "+ns+" is gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}
