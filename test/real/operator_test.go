package real

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollv1alpha1 "github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

const (
	operatorNamespace = "handroll-system"
	leaseName         = leader.DefaultLeaseName
	firstImage        = "localhost/handroll:real-1"
	secondImage       = "localhost/handroll:real-2"
	journalPath       = "/journal/reconcile.jsonl"
)

// TestOperatorInRealContainers deploys handroll with `make deploy` and
// checks, in order, what a user relies on when it runs in a cluster. The
// steps share one deployment, so each depends on the ones before it.
func TestOperatorInRealContainers(t *testing.T) {
	overlay := writeJournalOverlay(t)
	t.Cleanup(func() {
		if t.Failed() {
			dumpOperator(t)
		}
		out, err := runMake("undeploy", "KUSTOMIZE_DIR="+overlay, "IMG="+secondImage, "UNDEPLOY_DELETE_WEBAPPS=true")
		if err != nil {
			t.Errorf("make undeploy: %v\n%s", err, out)
			return
		}
		assertUninstalled(t)
	})
	journals := newJournalCollector()

	t.Run("deploy", func(t *testing.T) {
		makeTarget(t, "deploy", "IMG="+firstImage, "KUSTOMIZE_DIR="+overlay)
		journals.start()
	})
	t.Run("the node pulled the image from the local registry", func(t *testing.T) {
		checkPulled(t, firstImage)
	})
	t.Run("replicas run as real containers under restricted Pod Security", checkRestricted)
	t.Run("rest.InClusterConfig is the source", func(t *testing.T) {
		for _, p := range operatorPods(t, 2) {
			log, err := podLog(context.Background(), operatorNamespace, p.Name, "manager")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log, `"Using cluster"`) || !strings.Contains(log, `from="in-cluster service account"`) {
				t.Errorf("%s does not say it uses the in-cluster service account:\n%s", p.Name, firstLines(log, 10))
			}
		}
	})
	t.Run("one replica leads", func(t *testing.T) {
		holder := leaseHolder(t)
		pods := operatorPods(t, 2)
		leading := 0
		for _, p := range pods {
			if strings.HasPrefix(holder, p.Name+"_") {
				leading++
			}
		}
		if leading != 1 {
			t.Errorf("the Lease is held by %q, want one of %v", holder, podNames(pods))
		}
	})
	t.Run("webhooks and conversion through the handroll-webhook Service", func(t *testing.T) {
		checkWebhooks(t)
	})
	t.Run("metrics over HTTPS through the metrics Service, for an allowed token only", func(t *testing.T) {
		checkMetrics(t)
	})
	t.Run("a WebApp's pods run on the real node and serve their config", func(t *testing.T) {
		checkDemoWebApp(t)
	})
	t.Run("the kubelet's probes pass", func(t *testing.T) {
		checkProbes(t)
	})
	t.Run("a rolling update of the operator refuses no write and never overlaps", func(t *testing.T) {
		checkRollingUpdate(t, overlay, journals)
	})
	t.Run("a SIGKILLed leader is restarted and a standby leads", func(t *testing.T) {
		checkLeaderKilled(t)
	})
	t.Run("no two replicas ever reconciled at once", func(t *testing.T) {
		journals.stop()
		checkNoOverlap(t, journals.intervals(t))
	})
}

// checkRestricted: both replicas run as real containers, and Pod Security
// is enforced in their namespace: a privileged pod is refused.
func checkRestricted(t *testing.T) {
	for _, p := range operatorPods(t, 2) {
		checkRealContainer(t, p)
	}
	_, err := kube.CoreV1().Pods(operatorNamespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: demoImage,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		}}},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("a privileged pod in %s: %v, want Pod Security's restricted refusal", operatorNamespace, err)
	}
}

// checkNoOverlap: the journals of every replica process show no two
// reconciles at once, and more than one process (the leaders before and
// after the update and the kill).
func checkNoOverlap(t *testing.T, intervals []operator.ReconcileInterval) {
	t.Helper()
	replicas := map[string]bool{}
	for _, iv := range intervals {
		replicas[iv.Replica] = true
	}
	if overlaps := operator.Overlapping(intervals); len(overlaps) > 0 {
		t.Errorf("%d overlapping reconciles, the first: %s", len(overlaps), overlaps[0])
	}
	t.Logf("%d reconciles by %d replica processes, none overlapping", len(intervals), len(replicas))
	if len(replicas) < 2 {
		t.Errorf("the journals show %d replica processes, want the leaders before and after the update and the kill", len(replicas))
	}
}

// writeJournalOverlay writes a kustomization over manifests/local that adds
// the reconcile journal on an emptyDir, so the root filesystem stays
// read-only and the test can read it from the node.
func writeJournalOverlay(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(root, ".local", "test-real", "overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../../manifests/local
patches:
- path: journal.yaml
  target: {kind: Deployment, name: handroll}
`,
		"journal.yaml": `- op: add
  path: /spec/template/spec/containers/0/args/-
  value: --reconcile-journal=` + journalPath + `
- op: add
  path: /spec/template/spec/volumes
  value: [{name: journal, emptyDir: {}}]
- op: add
  path: /spec/template/spec/containers/0/volumeMounts
  value: [{name: journal, mountPath: /journal}]
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runMake(args ...string) (string, error) {
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = root
	cmd.Env = withoutKubeconfig(os.Environ())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// operatorPods waits until exactly n operator pods run, Ready, and returns
// them sorted by name.
func operatorPods(t *testing.T, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%d operator pods Running and Ready", n), 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=handroll"})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			if p.Status.Phase == corev1.PodRunning && podReady(&p) {
				pods = append(pods, p)
			}
		}
		return len(pods) == n && len(list.Items) == n, nil
	})
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// checkRealContainer checks one operator pod from the node's side: it runs
// on real-0 as a process of uid 65532 with a read-only root, and the only
// credential mounted is the projected ServiceAccount token.
func checkRealContainer(t *testing.T, p corev1.Pod) {
	t.Helper()
	if p.Spec.NodeName != controlplane.RealNodeName {
		t.Errorf("%s runs on %q, want %s", p.Name, p.Spec.NodeName, controlplane.RealNodeName)
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-"):
		case v.EmptyDir != nil && v.Name == "journal":
		default:
			t.Errorf("%s mounts volume %q; want only the projected ServiceAccount token (and the test's journal)", p.Name, v.Name)
		}
	}
	pid := containerPID(t, p, "manager")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "\nUid:\t65532\t65532\t65532\t65532\n") {
		t.Errorf("%s's process %d does not run as uid 65532:\n%s", p.Name, pid, status)
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
	if err != nil {
		t.Fatal(err)
	}
	var rootRO bool
	var secrets []string
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if f[1] == "/" {
			rootRO = slices.Contains(strings.Split(f[3], ","), "ro")
		}
		if strings.Contains(f[1], "secret") || strings.Contains(f[1], "token") {
			secrets = append(secrets, f[1])
		}
	}
	if !rootRO {
		t.Errorf("%s's root filesystem is not mounted read-only:\n%s", p.Name, mounts)
	}
	if len(secrets) != 1 || secrets[0] != "/var/run/secrets/kubernetes.io/serviceaccount" {
		t.Errorf("%s has credential mounts %v, want only /var/run/secrets/kubernetes.io/serviceaccount", p.Name, secrets)
	}
}

// containerPID finds the host pid of a pod's container through the node's
// runtime.
func containerPID(t *testing.T, p corev1.Pod, container string) int {
	t.Helper()
	id := containerID(t, p, container)
	out, err := exec.Command("ctr", "--address", controlplane.ContainerdAddress, "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == id {
			var pid int
			if _, err := fmt.Sscan(f[1], &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("the runtime has no task for %s's container %s:\n%s", p.Name, id, out)
	return 0
}

func containerID(t *testing.T, p corev1.Pod, container string) string {
	t.Helper()
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	t.Fatalf("%s has no status for container %s", p.Name, container)
	return ""
}

func leaseHolder(t *testing.T) string {
	t.Helper()
	return waitLeaseHolder(t, "the Lease has a holder", func(string) bool { return true })
}

// waitLeaseHolder waits until the Lease has a holder that ok accepts.
func waitLeaseHolder(t *testing.T, what string, ok func(holder string) bool) string {
	t.Helper()
	var holder string
	eventually(t, what, 60*time.Second, func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases(operatorNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return holder != "" && ok(holder), nil
	})
	return holder
}

func getLease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(operatorNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkWebhooks: with no --webhook-url, the API server reaches the
// webhooks through the handroll-webhook Service, trusting the certificate
// the operator made for itself.
func checkWebhooks(t *testing.T) {
	ns := realNamespace(t, "webhooks", nil)
	ctx := context.Background()
	var err error
	eventually(t, "the validating webhook refuses a reserved env name", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err = handrollClient.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: "reserved"},
			Spec:       handrollv1.WebAppSpec{Image: demoImage, Env: []corev1.EnvVar{{Name: "HANDROLL_MODE", Value: "x"}}},
		}, metav1.CreateOptions{})
		if err == nil {
			_ = handrollClient.HandrollV1().WebApps(ns).Delete(ctx, "reserved", metav1.DeleteOptions{})
		}
		return err != nil && strings.Contains(err.Error(), "denied the request"), nil
	})
	if !strings.Contains(err.Error(), "vwebapp.handroll.dev") || !strings.Contains(err.Error(), "spec.env[0].name") {
		t.Errorf("the refusal does not name the webhook and the field: %v", err)
	}

	// Written as v1alpha1, read as v1 and back: the conversion webhook.
	_, err = handrollClient.HandrollV1alpha1().WebApps(ns).Create(ctx, &handrollv1alpha1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "old"},
		Spec:       handrollv1alpha1.WebAppSpec{Image: demoImage, Size: ptr.To[int32](0)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a v1alpha1 WebApp: %v", err)
	}
	v1, err := handrollClient.HandrollV1().WebApps(ns).Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading it as v1: %v", err)
	}
	if v1.Spec.Image != demoImage || ptr.Deref(v1.Spec.Replicas, -1) != 0 {
		t.Errorf("read as v1: image %q replicas %v, want %q and 0", v1.Spec.Image, v1.Spec.Replicas, demoImage)
	}
	old, err := handrollClient.HandrollV1alpha1().WebApps(ns).Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading it back as v1alpha1: %v", err)
	}
	if ptr.Deref(old.Spec.Size, -1) != 0 {
		t.Errorf("read back as v1alpha1: size %v, want 0", old.Spec.Size)
	}
}

// checkMetrics scrapes /metrics through the metrics Service's address, as
// a Prometheus in the cluster would, verifying the server against the CA
// ConfigMap, with a token RBAC allows and with one it does not.
func checkMetrics(t *testing.T) {
	ctx := context.Background()
	ns := realNamespace(t, "scraper", nil)
	for _, name := range []string{"allowed", "denied"} {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "handroll-metrics-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "handroll-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "allowed", Namespace: ns}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})

	svc, err := kube.CoreV1().Services(operatorNamespace).Get(ctx, "handroll-metrics", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	// As the ServiceMonitor does: trust only the CA the operator publishes
	// (--metrics-ca-configmap), for the Service's name.
	published, err := kube.CoreV1().ConfigMaps(operatorNamespace).Get(ctx, "handroll-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CA the operator publishes for scrapers: %v", err)
	}
	trusted := x509.NewCertPool()
	if !trusted.AppendCertsFromPEM([]byte(published.Data["ca.crt"])) {
		t.Fatalf("ConfigMap %s/handroll-ca holds no certificate in ca.crt", operatorNamespace)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: trusted, ServerName: "handroll-metrics." + operatorNamespace + ".svc", MinVersion: tls.VersionTLS12,
	}}}
	scrape := func(sa string) (int, string) {
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// kube-proxy programs a Service's endpoints a moment after the pods
	// turn Ready.
	eventually(t, "the metrics Service routes", 30*time.Second, func(ctx context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return true, nil
	})
	// The Go runtime's soft memory limit is 90% of the container's.
	dep, err := kube.AppsV1().Deployments(operatorNamespace).Get(ctx, "handroll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limit := dep.Spec.Template.Spec.Containers[0].Resources.Limits.Memory()
	wantSoft := float64(int64(float64(limit.Value()) * 0.9))
	// Each replica answers; the Service picks one per connection, so ask a
	// few times.
	for range 4 {
		if _, body := scrape("allowed"); gauge(body, "go_gc_gomemlimit_bytes") != wantSoft {
			t.Errorf("go_gc_gomemlimit_bytes %v, want %v: 90%% of the container's limit, %s", gauge(body, "go_gc_gomemlimit_bytes"), wantSoft, limit)
		}
		// A standby runs no controller, and so has no workqueue series
		// yet; both replicas make requests and take part in the election.
		if code, body := scrape("allowed"); code != http.StatusOK || !strings.Contains(body, "\nrest_client_requests_total{") || !strings.Contains(body, "\nleader_election_master_status{") {
			t.Errorf("an allowed token: HTTP %d, want 200 with handroll's rest-client and leader-election metrics:\n%s", code, firstLines(body, 5))
		}
		if code, body := scrape("denied"); code != http.StatusForbidden {
			t.Errorf("a token RBAC does not allow: HTTP %d, want 403: %s", code, firstLines(body, 5))
		}
	}
}

// checkDemoWebApp: a WebApp of the demo image, its pods on the real node,
// reached through its Service; a change of spec.config rolls the pods and
// the new value is served.
func checkDemoWebApp(t *testing.T) {
	ctx := context.Background()
	ns := realNamespace(t, "demo", nil)
	app, err := handrollClient.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: handrollv1.WebAppSpec{
			Image:    demoImage,
			Replicas: ptr.To[int32](2),
			Config:   map[string]string{"greeting": "hello"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitServed(t, ns, app.Name, "greeting=hello")
	before := webAppPods(t, ns)

	eventuallyUpdate(t, ns, app.Name, func(w *handrollv1.WebApp) { w.Spec.Config["greeting"] = "bonjour" })
	waitServed(t, ns, app.Name, "greeting=bonjour")
	eventually(t, "the old pods are replaced", 2*time.Minute, func(ctx context.Context) (bool, error) {
		after := webAppPodObjects(t, ns)
		for _, p := range after {
			if slices.Contains(before, p.Name) || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return len(after) == 2, nil
	})
}

// waitServed waits until the WebApp is Ready and its Service serves want.
func waitServed(t *testing.T, ns, name, want string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	var body string
	eventually(t, fmt.Sprintf("%s/%s serves %q through its Service", ns, name, want), 3*time.Minute, func(ctx context.Context) (bool, error) {
		svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		resp, err := client.Get(fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		body = string(data)
		// Until every pod is replaced, the Service may pick an old one.
		return resp.StatusCode == http.StatusOK && strings.Contains(body, want), nil
	})
	eventually(t, fmt.Sprintf("every pod of %s/%s runs on %s", ns, name, controlplane.RealNodeName), 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods := webAppPodObjects(t, ns)
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
			if p.Spec.NodeName != controlplane.RealNodeName {
				return false, fmt.Errorf("%s runs on %q", p.Name, p.Spec.NodeName)
			}
		}
		return len(pods) > 0, nil
	})
}

func webAppPodObjects(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

func webAppPods(t *testing.T, ns string) []string { return podNames(webAppPodObjects(t, ns)) }

func eventuallyUpdate(t *testing.T, ns, name string, change func(*handrollv1.WebApp)) {
	t.Helper()
	eventually(t, "updating "+ns+"/"+name, 30*time.Second, func(ctx context.Context) (bool, error) {
		w, err := handrollClient.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(w)
		_, err = handrollClient.HandrollV1().WebApps(ns).Update(ctx, w, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// checkRollingUpdate rolls the operator to a new image tag while a writer
// creates and updates WebApps every 100 ms.
func checkRollingUpdate(t *testing.T, overlay string, journals *journalCollector) {
	ns := realNamespace(t, "rollout", nil)
	oldPods := operatorPods(t, 2)
	oldLeader := leaseHolder(t)

	w := startWriter(t, ns)

	began := time.Now()
	makeTarget(t, "deploy", "IMG="+secondImage, "KUSTOMIZE_DIR="+overlay)
	newPods := operatorPods(t, 2)
	for _, p := range newPods {
		if p.Spec.Containers[0].Image != secondImage {
			t.Errorf("%s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, secondImage)
		}
		if slices.Contains(podNames(oldPods), p.Name) {
			t.Errorf("%s is an old pod", p.Name)
		}
	}
	newLeader := leaseHolder(t)
	time.Sleep(2 * time.Second) // the writer goes on past the rollout
	writes, refused, errs := w.stop()
	t.Logf("rollout %s → %s in %s: %d writes, %d refused by the webhooks; leader %s → %s",
		firstImage, secondImage, time.Since(began).Round(100*time.Millisecond), writes, refused, oldLeader, newLeader)
	if refused > 0 {
		t.Errorf("%d of %d writes were refused by the webhooks during the rollout; the first: %v", refused, writes, errs[0])
	}
	if writes < 20 {
		t.Errorf("only %d writes during the rollout", writes)
	}

	// The old leader's SIGTERM, as the runtime timestamped its log line.
	sigterm, ok := journals.logged(strings.SplitN(oldLeader, "_", 2)[0], "Received a signal")
	if !ok {
		t.Fatalf("the old leader %s never logged its SIGTERM", oldLeader)
	}
	first, ok := journals.firstStartAfter(t, newLeader, sigterm)
	if !ok {
		t.Fatalf("the new leader %s recorded no reconcile after the old leader's SIGTERM", newLeader)
	}
	t.Logf("handover: %s from the old leader's SIGTERM to the new leader's first reconcile", first.Sub(sigterm).Round(time.Millisecond))

	// Every WebApp the writer made converges on the new leader.
	waitConverged(t, ns, w.names())
}

// checkLeaderKilled SIGKILLs the leader's container through the node's
// runtime: the kubelet restarts it, and a standby leads within the lease
// timings.
func checkLeaderKilled(t *testing.T) {
	ns := realNamespace(t, "kill", nil)
	holder := leaseHolder(t)
	var victim corev1.Pod
	for _, p := range operatorPods(t, 2) {
		if strings.HasPrefix(holder, p.Name+"_") {
			victim = p
		}
	}
	if victim.Name == "" {
		t.Fatalf("no pod holds the Lease (%s)", holder)
	}
	restarts := victim.Status.ContainerStatuses[0].RestartCount
	id := containerID(t, victim, "manager")
	killed := time.Now()
	if out, err := exec.Command("ctr", "--address", controlplane.ContainerdAddress, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput(); err != nil {
		t.Fatalf("ctr tasks kill: %v: %s", err, out)
	}
	// Written while no replica leads: none may be lost. Until the kubelet
	// sees the container gone and the endpoints drop it, the API server
	// may still call the webhooks at the dead address: such a write fails
	// loudly, and is retried as a user would.
	names := []string{}
	refused := 0
	for i := range 3 {
		name := fmt.Sprintf("during-kill-%d", i)
		eventually(t, "creating "+name, 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := handrollClient.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       handrollv1.WebAppSpec{Image: demoImage, Replicas: ptr.To[int32](0)},
			}, metav1.CreateOptions{})
			if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
				refused++
				return false, nil
			}
			return err == nil, err
		})
		names = append(names, name)
	}
	t.Logf("%d writes were refused while the killed replica's address was still an endpoint (%s after the kill)", refused, time.Since(killed).Round(time.Millisecond))

	newHolder := waitLeaseHolder(t, "another replica process takes the Lease", func(h string) bool { return h != holder })
	took := time.Since(killed)
	l := getLease(t)
	// The lease expires a lease duration after the standby last saw it
	// renewed, which it sees only at its own retries (client-go jitters
	// them up to 2.2 retry periods apart); it takes the lease at the next.
	retry := leader.DefaultOptions().RetryPeriod
	bound := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 15))*time.Second + 2*time.Duration(2.2*float64(retry)) + time.Second
	t.Logf("leader %s SIGKILLed; %s leads %s later (lease %ds)", holder, newHolder, took.Round(100*time.Millisecond), ptr.Deref(l.Spec.LeaseDurationSeconds, 0))
	if took > bound {
		t.Errorf("a standby led %s after the kill, want within the lease timings (%s)", took, bound)
	}
	eventually(t, "the kubelet restarts the killed container", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(operatorNamespace).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := p.Status.ContainerStatuses[0]
		return s.RestartCount > restarts && s.Ready, nil
	})
	waitConverged(t, ns, names)
}

// checkProbes reads the kubelet's own probe counters (its /metrics/probes,
// through the API server): each replica's liveness and readiness probes
// ran and passed, liveness never failed, and no container restarted.
// Readiness may fail in the first moment of a container, before it listens.
func checkProbes(t *testing.T) {
	t.Helper()
	for _, p := range operatorPods(t, 2) {
		var counts map[string]float64
		eventually(t, "the kubelet probed "+p.Name+" successfully", 60*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			if counts, err = probeCounts(ctx, p.Name); err != nil {
				return false, err
			}
			return counts["Liveness/successful"] > 0 && counts["Readiness/successful"] > 0, nil
		})
		if counts["Liveness/failed"] > 0 || counts["Liveness/unknown"] > 0 {
			t.Errorf("%s's liveness probe did not pass every time: %v", p.Name, counts)
		}
		if r := p.Status.ContainerStatuses[0].RestartCount; r != 0 {
			t.Errorf("%s restarted %d times", p.Name, r)
		}
		t.Logf("%s: probes %v", p.Name, counts)
	}
}

// probeCounts is prober_probe_total for pod's manager container, by
// probe_type/result.
func probeCounts(ctx context.Context, pod string) (map[string]float64, error) {
	data, err := kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", controlplane.RealNodeName, "proxy", "metrics", "probes").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "prober_probe_total{") || !strings.Contains(line, `pod="`+pod+`"`) || !strings.Contains(line, `container="manager"`) {
			continue
		}
		label := func(name string) string {
			_, rest, _ := strings.Cut(line, name+`="`)
			v, _, _ := strings.Cut(rest, `"`)
			return v
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
			counts[label("probe_type")+"/"+label("result")] += v
		}
	}
	return counts, nil
}

// waitConverged waits until each named WebApp has its Deployment and is
// observed at its generation.
func waitConverged(t *testing.T, ns string, names []string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d WebApps in %s converge", len(names), ns), 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			w, err := handrollClient.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if w.Status.ObservedGeneration != w.Generation {
				return false, nil
			}
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if ptr.Deref(d.Spec.Replicas, -1) != ptr.Deref(w.Spec.Replicas, 1) {
				return false, nil
			}
		}
		return true, nil
	})
}

// writer creates a WebApp and updates an earlier one, alternately, every
// 100 ms, and counts the writes the webhooks refused.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	created []string
	writes  atomic.Int64
	refused atomic.Int64
	errs    []error
}

func startWriter(t *testing.T, ns string) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var err error
			w.mu.Lock()
			n := len(w.created)
			w.mu.Unlock()
			if i%2 == 0 || n == 0 {
				name := fmt.Sprintf("w-%03d", i)
				_, err = handrollClient.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       handrollv1.WebAppSpec{Image: demoImage, Replicas: ptr.To[int32](0), Config: map[string]string{"n": "0"}},
				}, metav1.CreateOptions{})
				if err == nil {
					w.mu.Lock()
					w.created = append(w.created, name)
					w.mu.Unlock()
				}
			} else {
				w.mu.Lock()
				name := w.created[i%n]
				w.mu.Unlock()
				var app *handrollv1.WebApp
				if app, err = handrollClient.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
					app.Spec.Config["n"] = fmt.Sprint(i)
					_, err = handrollClient.HandrollV1().WebApps(ns).Update(ctx, app, metav1.UpdateOptions{})
				}
			}
			if ctx.Err() != nil {
				return
			}
			w.writes.Add(1)
			if err != nil && !apierrors.IsConflict(err) {
				w.refused.Add(1)
				w.mu.Lock()
				w.errs = append(w.errs, err)
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *writer) stop() (writes, refused int64, errs []error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes.Load(), w.refused.Load(), w.errs
}

func (w *writer) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.created)
}

// assertUninstalled: after make undeploy, nothing of handroll's is left:
// no pod, Lease, Secret or webhook configuration.
func assertUninstalled(t *testing.T) {
	ctx := context.Background()
	eventually(t, "the operator's namespace is gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, operatorNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=handroll"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("%d operator pods are left", len(pods.Items))
	}
	leases, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + leaseName})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) > 0 {
		t.Errorf("the Lease %s/%s is left", leases.Items[0].Namespace, leases.Items[0].Name)
	}
	secrets, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=handroll-webhook-tls"})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("the Secret %s/%s is left", secrets.Items[0].Namespace, secrets.Items[0].Name)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the MutatingWebhookConfiguration handroll is left (%v)", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "handroll", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ValidatingWebhookConfiguration handroll is left (%v)", err)
	}
}

// dumpOperator logs what a failed run needs: the operator pods and the end
// of their logs.
func dumpOperator(t *testing.T) {
	ctx := context.Background()
	list, err := kube.CoreV1().Pods(operatorNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing operator pods: %v", err)
		return
	}
	for _, p := range list.Items {
		t.Logf("pod %s on %s: phase %s, conditions %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		log, _ := podLog(ctx, operatorNamespace, p.Name, "manager")
		t.Logf("log of %s (end):\n%s", p.Name, lastLines(log, 30))
	}
}

// gauge is the value of the unlabelled series name in a scrape, NaN when
// it has none.
func gauge(body, name string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return math.NaN()
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkPulled checks that the real node's containerd pulled image
// (localhost/NAME:TAG) from the local registry, where make deploy pushed
// it: the registry's log holds containerd's GET of that manifest. Nothing
// imports the operator's image any more, so a pod running it proves the
// pull as well; the log says where it came from.
func checkPulled(t *testing.T, image string) {
	t.Helper()
	if cluster.Node.Registry == "" {
		t.Fatal("the real node runs no registry (make cluster-down cluster-up REAL_NODE=true)")
	}
	ref := strings.TrimPrefix(image, "localhost/")
	name, tag, _ := strings.Cut(ref, ":")
	data, err := os.ReadFile(filepath.Join(cluster.Node.Dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	// containerd resolves the tag (HEAD, or GET) before it fetches by digest.
	resolved := false
	for _, method := range []string{"HEAD", "GET"} {
		resolved = resolved || strings.Contains(string(data), fmt.Sprintf("%s /v2/%s/manifests/%s 200 \"containerd/", method, name, tag))
	}
	if !resolved {
		t.Errorf("the registry at %s resolved no %s:%s for containerd; its log:\n%s", cluster.Node.Registry, name, tag, data)
	}
	// A push came first, through the registry's API, not the node's.
	if !strings.Contains(string(data), fmt.Sprintf("PUT /v2/%s/manifests/%s 201", name, tag)) {
		t.Errorf("the registry's log has no push of %s:\n%s", image, data)
	}
}
