package real

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// elsewhere is the namespace a user picks for the install.
const elsewhere = "ops-elsewhere"

// TestOperateAsUsersDo walks handroll's day-2 paths on the real node:
// installed into a namespace of the user's choice by an overlay that sets
// only that; a local run beside it on the same cluster; an uninstall that
// keeps the WebApps, taken over by an install elsewhere; an uninstall asked
// to delete them, which leaves nothing; and one after the operator is gone,
// from the one-file installer, which removes handroll's finalizer and
// stops on another tool's until the user forces it.
func TestOperateAsUsersDo(t *testing.T) {
	overlay := writeOverlay(t, "elsewhere", "namespace: "+elsewhere+"\nresources:\n- ../../../manifests/local\n")

	t.Run("installed into "+elsewhere+" by an overlay that sets only the namespace", func(t *testing.T) {
		makeTarget(t, "deploy", "IMG="+firstImage, "KUSTOMIZE_DIR="+overlay)
		checkInstalledIn(t, elsewhere)
		checkWebhooks(t)
	})
	t.Run("a local run beside it leaves admission and conversion to the cluster", func(t *testing.T) {
		checkLocalRunBeside(t, elsewhere)
	})
	t.Run("make undeploy keeps 20 WebApps in 3 namespaces, an install elsewhere takes them over, UNDEPLOY_DELETE_WEBAPPS=true removes them, then everything else", func(t *testing.T) {
		kept := createKeptWebApps(t)
		checkUndeployKeeps(t, overlay, kept.namespaces)
		checkInstallTakesOver(t, kept)
		out := makeTarget(t, "undeploy", "UNDEPLOY_DELETE_WEBAPPS=true")
		if strings.Contains(out, "removing their finalizers") {
			t.Errorf("with the operator running, make undeploy had to remove finalizers:\n%s", out)
		}
		assertNothingLeft(t, operatorNamespace)
	})
	t.Run("the installer, then make undeploy with the operator gone", checkUndeployWithTheOperatorGone)
}

// keptWebApps are the WebApps an uninstall is to keep: where they are,
// their directory keys, and their Deployments' uids and generations.
type keptWebApps struct {
	namespaces  []string
	keys        []string
	children    map[string]types.UID
	generations map[string]int64
}

// createKeptWebApps makes 20 WebApps in 3 namespaces and waits for the
// operator in elsewhere to list them and make their Deployments.
func createKeptWebApps(t *testing.T) keptWebApps {
	t.Helper()
	var namespaces []string
	for i := range 3 {
		ns := plainNamespace(t, fmt.Sprintf("uninstall-%d", i))
		namespaces = append(namespaces, ns)
	}
	var keys []string
	for i := range 20 {
		ns := namespaces[i%3]
		name := fmt.Sprintf("app-%02d", i)
		createWebApp(t, ns, name, nil)
		keys = append(keys, webapp.DirectoryKey(ns, name))
	}
	eventually(t, "the directory lists the 20 WebApps", 2*time.Minute, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(elsewhere).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, k := range keys {
			if _, ok := cm.Data[k]; !ok {
				return false, fmt.Errorf("no %s in %v", k, cm.Data)
			}
		}
		return true, nil
	})
	children := map[string]types.UID{}
	generations := map[string]int64{}
	for i := range 20 {
		ns, name := namespaces[i%3], fmt.Sprintf("app-%02d", i)
		eventually(t, "Deployment "+ns+"/"+name, 2*time.Minute, func(ctx context.Context) (bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not made yet: poll again until the timeout
			}
			children[ns+"/"+name], generations[ns+"/"+name] = d.UID, d.Generation
			return true, nil
		})
	}
	return keptWebApps{namespaces: namespaces, keys: keys, children: children, generations: generations}
}

// checkUndeployKeeps: by default make undeploy keeps the WebApps, their
// workloads and the CRD, and says so.
func checkUndeployKeeps(t *testing.T, overlay string, namespaces []string) {
	t.Helper()
	out := makeTarget(t, "undeploy", "KUSTOMIZE_DIR="+overlay)
	if !strings.Contains(out, "kept") {
		t.Errorf("make undeploy does not say what it kept:\n%s", out)
	}
	eventually(t, "the operator in "+elsewhere+" is gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, elsewhere, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	kept := 0
	for _, ns := range namespaces {
		list, err := handrollClient.HandrollV1().WebApps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("after make undeploy, listing the WebApps of %s: %v", ns, err)
		}
		kept += len(list.Items)
	}
	if kept != 20 {
		t.Fatalf("after make undeploy: %d WebApps, want the 20 kept", kept)
	}
}

// checkInstallTakesOver: an install into another namespace takes the kept
// WebApps over, changing no child.
func checkInstallTakesOver(t *testing.T, kept keptWebApps) {
	t.Helper()
	makeTarget(t, "deploy", "IMG="+firstImage)
	checkInstalledIn(t, operatorNamespace)
	eventually(t, "the new operator's directory lists the 20 WebApps", 2*time.Minute, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, webapp.DirectoryName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not written yet: poll again until the timeout
		}
		for _, k := range kept.keys {
			if _, ok := cm.Data[k]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	for key, uid := range kept.children {
		ns, name, _ := strings.Cut(key, "/")
		d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || d.UID != uid || d.Generation != kept.generations[key] {
			t.Errorf("Deployment %s changed when the install took its WebApp over: %v (uid %s, generation %d; was %s, %d)",
				key, err, d.UID, d.Generation, uid, kept.generations[key])
		}
	}
}

// checkUndeployWithTheOperatorGone: install.yaml, then make undeploy with
// the operator scaled to zero: handroll's own finalizer goes, another
// tool's stops the uninstall, naming it, until the user forces it.
func checkUndeployWithTheOperatorGone(t *testing.T) {
	installer := filepath.Join(root, ".local", "test-real", "install.yaml")
	makeTarget(t, "build-installer", "IMG="+firstImage, "KUSTOMIZE_DIR=manifests/local", "INSTALLER="+installer)
	kubectl(t, "apply", "--server-side", "-f", installer)
	kubectl(t, "-n", operatorNamespace, "rollout", "status", "deployment/handroll", "--timeout=180s")
	checkInstalledIn(t, operatorNamespace)
	ns := plainNamespace(t, "stranded")
	createWebApp(t, ns, "plain", nil)
	createWebApp(t, ns, "restored", nil)
	// Another tool's finalizer, which no handroll removes.
	createWebApp(t, ns, "foreign", []string{"example.com/keep"})
	kubectl(t, "-n", operatorNamespace, "scale", "deployment/handroll", "--replicas=0")
	eventually(t, "the operator's pods are gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=handroll"})
		return err == nil && len(pods.Items) == 0, err
	})
	// Restored from a backup of an older version, with the finalizer
	// it set, while no operator runs to strip it (a finalizer change
	// passes the webhooks' matchConditions).
	kubectl(t, "-n", ns, "patch", "webapps.handroll.dev", "restored", "--type=merge", "-p", `{"metadata":{"finalizers":["handroll.dev/directory"]}}`)
	// handroll's own finalizer goes; the other tool's stays, and the
	// uninstall stops, naming what holds what, before it removes
	// anything of the operator's.
	out, err := runMake("undeploy", "UNDEPLOY_DELETE_WEBAPPS=true")
	if err == nil {
		t.Errorf("make undeploy succeeded with a WebApp another tool holds:\n%s", out)
	}
	for _, want := range []string{ns + "/foreign (held by the finalizer(s) example.com/keep", "UNDEPLOY_FORCE_FINALIZERS"} {
		if !strings.Contains(out, want) {
			t.Errorf("make undeploy does not say %q:\n%s", want, out)
		}
	}
	t.Logf("make undeploy, the other tool's finalizer on: %v\n%s", err, out)
	for name, want := range map[string][]string{"plain": nil, "restored": nil, "foreign": {"example.com/keep"}} {
		w, err := handrollClient.HandrollV1().WebApps(ns).Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case want == nil && !apierrors.IsNotFound(err):
			t.Errorf("WebApp %s/%s is left: %v", ns, name, err)
		case want != nil && err != nil:
			t.Errorf("WebApp %s/%s: %v", ns, name, err)
		case want != nil && !slices.Equal(slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == metav1.FinalizerDeleteDependents }), want):
			t.Errorf("WebApp %s/%s has the finalizers %v, want %v", ns, name, w.Finalizers, want)
		}
	}
	if _, err := kube.AppsV1().Deployments(operatorNamespace).Get(context.Background(), "handroll", metav1.GetOptions{}); err != nil {
		t.Errorf("make undeploy removed the operator before the WebApps were gone: %v", err)
	}
	// The user decides to skip the other tool's clean-up.
	out = makeTarget(t, "undeploy", "UNDEPLOY_DELETE_WEBAPPS=true", "UNDEPLOY_FORCE_FINALIZERS=true")
	if !strings.Contains(out, "example.com/keep") {
		t.Errorf("make undeploy UNDEPLOY_FORCE_FINALIZERS=true does not name the finalizer it removed:\n%s", out)
	}
	assertNothingLeft(t, operatorNamespace)
}

// checkInstalledIn: the operator's own objects are in ns, its serving
// certificate names the webhook Service there, and handroll-system (when
// ns is another) was not touched.
func checkInstalledIn(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "a replica in "+ns+" leads through a Lease in "+ns, 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=handroll"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(holder, p.Name+"_") {
				return true, nil
			}
		}
		return false, fmt.Errorf("holder %q", holder)
	})
	var secret *corev1.Secret
	eventually(t, "the certificate Secret is in "+ns, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		secret, err = kube.CoreV1().Secrets(ns).Get(ctx, "handroll-webhook-tls", metav1.GetOptions{})
		return err == nil, err
	})
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatalf("Secret %s/handroll-webhook-tls holds no certificate", ns)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if want := "handroll-webhook." + ns + ".svc"; !slices.Contains(cert.DNSNames, want) {
		t.Errorf("the serving certificate names %v, want %s among them", cert.DNSNames, want)
	}
	if ns != operatorNamespace {
		// The local cluster makes handroll-system for make run; nothing of
		// this install may be written there.
		if _, err := kube.CoordinationV1().Leases(operatorNamespace).Get(ctx, leaseName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Lease %s/%s exists (%v): an install into %s must not write there", operatorNamespace, leaseName, err, ns)
		}
		if _, err := kube.CoreV1().Secrets(operatorNamespace).Get(ctx, "handroll-webhook-tls", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Secret %s/handroll-webhook-tls exists (%v): an install into %s must not write there", operatorNamespace, err, ns)
		}
		if _, err := kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, webapp.DirectoryName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a ConfigMap %s/%s exists (%v): an install into %s must not write there", operatorNamespace, webapp.DirectoryName, err, ns)
		}
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Webhooks {
		if s := w.ClientConfig.Service; s == nil || s.Namespace != ns || w.ClientConfig.URL != nil {
			t.Errorf("webhook %s calls %+v / %v, want the Service in %s", w.Name, s, w.ClientConfig.URL, ns)
		}
	}
}

// checkLocalRunBeside runs `make run` against the cluster handroll is
// deployed in, as a developer does against a shared cluster, while a
// writer creates and changes WebApps before, during and after it.
func checkLocalRunBeside(t *testing.T, ns string) {
	// make run builds bin/handroll first; built here, the build is not
	// part of the wait for the local run's caches below.
	makeTarget(t, "build")
	ctx := context.Background()
	before, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := leaseHolderIn(t, ns)
	w := startWriter(t, plainNamespace(t, "beside"))
	time.Sleep(3 * time.Second)

	var ports [2]int
	for i := range ports {
		if ports[i], err = controlplane.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("make", "--no-print-directory", "run",
		"KUBECONFIG="+filepath.Join(root, ".local", "kubeconfig"),
		fmt.Sprintf("RUN_FLAGS=--metrics-bind-address=127.0.0.1:%d --health-probe-bind-address=127.0.0.1:%d", ports[0], ports[1]),
		"ARGS=--operator-namespace="+ns)
	cmd.Dir = root
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, stopped as a terminal's Ctrl-C stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	eventually(t, "the local run has synced its caches", 2*time.Minute, func(context.Context) (bool, error) {
		return strings.Contains(log.String(), "Caches synced"), nil
	})
	// While it runs: admission and conversion still work, through the
	// cluster's replicas.
	checkWebhooks(t)
	time.Sleep(5 * time.Second)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Logf("the local run exited after Ctrl-C: %v", err)
		}
	case <-time.After(budget.Scale(time.Minute)):
		t.Fatalf("the local run did not stop within %s of Ctrl-C:\n%s", budget.Scale(time.Minute), lastLines(log.String(), 40))
	}
	time.Sleep(3 * time.Second)
	checkWebhooks(t)
	writes, refused, errs := w.stop()
	t.Logf("the writer made %d writes before, during and after the local run; %d refused", writes, refused)
	if refused > 0 {
		t.Errorf("%d of %d writes were refused, the first: %v", refused, writes, errs[0])
	}

	local := log.String()
	if !strings.Contains(local, "Not serving the webhooks: running outside the cluster without --webhook-url") {
		t.Errorf("the local run does not say it serves no webhooks:\n%s", firstLines(local, 40))
	}
	if strings.Contains(local, "Became the leader") {
		t.Errorf("the local run took the lead from the cluster's replicas:\n%s", local)
	}
	if got := leaseHolderIn(t, ns); got != holder {
		t.Errorf("the Lease went from %s to %s during the local run", holder, got)
	}
	after, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the local run changed the ValidatingWebhookConfiguration (resourceVersion %s → %s): %+v",
			before.ResourceVersion, after.ResourceVersion, after.Webhooks[0].ClientConfig)
	}
}

// lockedBuffer is written by the process's output copiers while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func leaseHolderIn(t *testing.T, ns string) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// assertNothingLeft: after an uninstall nothing of handroll's is in the
// cluster, and no namespace hangs in Terminating.
func assertNothingLeft(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s is left (%v)", ns, err)
	}
	namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range namespaces.Items {
		if n.Status.Phase == corev1.NamespaceTerminating {
			t.Errorf("namespace %s is stuck in Terminating: %+v", n.Name, n.Status.Conditions)
		}
	}
	if _, err := handrollClient.HandrollV1().WebApps("").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("WebApps are still served (%v): the CRD is left", err)
	}
	if out := kubectl(t, "get", "crd", "--ignore-not-found", "-o", "name", "webapps.handroll.dev"); out != "" {
		t.Errorf("the CRD is left: %s", out)
	}
	for _, kind := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "clusterroles", "clusterrolebindings"} {
		for _, name := range strings.Fields(kubectl(t, "get", kind, "-o", "name")) {
			base := name[strings.Index(name, "/")+1:]
			if base == "handroll" || strings.HasPrefix(base, "handroll-") || strings.HasPrefix(base, "webapp-") {
				t.Errorf("%s is left", name)
			}
		}
	}
	leases, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + leaseName})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		t.Errorf("the Lease %s/%s is left", l.Namespace, l.Name)
	}
	secrets, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=handroll-webhook-tls"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("the Secret %s/%s is left", s.Namespace, s.Name)
	}
	eventually(t, "no ConfigMap, Deployment or Service of a WebApp is left", 2*time.Minute, func(ctx context.Context) (bool, error) {
		sel := metav1.ListOptions{LabelSelector: webapp.LabelManagedBy + "=" + webapp.ManagedBy}
		cms, err := kube.CoreV1().ConfigMaps("").List(ctx, sel)
		if err != nil {
			return false, err
		}
		deps, err := kube.AppsV1().Deployments("").List(ctx, sel)
		if err != nil {
			return false, err
		}
		svcs, err := kube.CoreV1().Services("").List(ctx, sel)
		if err != nil {
			return false, err
		}
		if n := len(cms.Items) + len(deps.Items) + len(svcs.Items); n > 0 {
			return false, fmt.Errorf("%d ConfigMaps, %d Deployments, %d Services left", len(cms.Items), len(deps.Items), len(svcs.Items))
		}
		return true, nil
	})
}

// writeOverlay writes a kustomization under .local/test-real/NAME.
func writeOverlay(t *testing.T, name, body string) string {
	t.Helper()
	dir := filepath.Join(root, ".local", "test-real", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + body
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plainNamespace is a namespace whose WebApps run no pods (replicas 0).
func plainNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return createNamespace(t, prefix, nil, nil)
}

// createWebApp creates a WebApp of no replicas, once the webhooks admit it.
func createWebApp(t *testing.T, ns, name string, finalizers []string) {
	t.Helper()
	eventually(t, "creating WebApp "+ns+"/"+name, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := handrollClient.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
			Spec:       handrollv1.WebAppSpec{Image: demoImage, Replicas: ptr.To[int32](0)},
		}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
}

var (
	kubectlOnce sync.Once
	kubectlBin  string
	kubectlErr  error
)

// kubectl runs the control plane's kubectl against the local cluster and
// returns its trimmed output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectlPath(t), append([]string{"--kubeconfig=" + filepath.Join(root, ".local", "kubeconfig")}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// kubectlPath is the control plane's kubectl.
func kubectlPath(t *testing.T) string {
	t.Helper()
	kubectlOnce.Do(func() {
		out, err := exec.Command(filepath.Join(root, "hack", "testbin.sh"), "path").Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil {
			kubectlErr = fmt.Errorf("hack/testbin.sh path: %w", err)
			return
		}
		kubectlBin = filepath.Join(lines[len(lines)-1], "kubectl")
	})
	if kubectlErr != nil {
		t.Fatal(kubectlErr)
	}
	return kubectlBin
}
