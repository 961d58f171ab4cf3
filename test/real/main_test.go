package real

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

var (
	root           string // the repository
	cluster        *controlplane.ControlPlane
	kube           kubernetes.Interface
	handrollClient versioned.Interface
)

func TestMain(m *testing.M) {
	if os.Getenv("HANDROLL_REAL") != "1" {
		fmt.Println("test/real: skipped: run `make test-real` (it starts the local cluster with its real node)")
		os.Exit(0)
	}
	var err error
	if root, err = controlplane.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster, err = controlplane.Load(filepath.Join(root, ".local", "cluster", "state.json"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "test/real: no local cluster (make cluster-up REAL_NODE=true): %v\n", err)
		os.Exit(1)
	}
	if cluster.Node == nil {
		fmt.Fprintln(os.Stderr, "test/real: the local cluster has no real node: make cluster-down cluster-up REAL_NODE=true")
		os.Exit(1)
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 100, 200
	// The writers make hundreds of WebApps without resources on purpose.
	cfg.WarningHandler = rest.NoWarnings{}
	kube = kubernetes.NewForConfigOrDie(cfg)
	handrollClient = versioned.NewForConfigOrDie(cfg)
	code := m.Run()
	removeReleases()
	os.Exit(code)
}

// realNamespace creates a namespace whose pods all go to the real node: the
// API server's PodNodeSelector and PodTolerationRestriction admission read
// these annotations. labels are added (Pod Security, say).
func realNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	return createNamespace(t, prefix, labels, map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      controlplane.RealNodeLabel + "=true",
		"scheduler.alpha.kubernetes.io/defaultTolerations": fmt.Sprintf(`[{"key":%q,"operator":"Equal","value":"true","effect":"NoSchedule"}]`, controlplane.RealNodeTaint),
	})
}

// createNamespace creates a namespace named after prefix, deleted when t
// ends.
func createNamespace(t *testing.T, prefix string, labels, annotations map[string]string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels, Annotations: annotations},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// restricted is a container security context that Pod Security's
// restricted level admits.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// eventually polls cond every 200 ms until it holds or timeout (scaled by
// budget.Scale) passes.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	timeout = budget.Scale(timeout)
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil //nolint:nilerr // kept in last for the timeout's message; poll again
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

// podLog returns a container's log, read through the API server (and so
// the kubelet).
func podLog(ctx context.Context, ns, pod, container string) (string, error) {
	data, err := kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	return string(data), err
}

// makeTarget runs make in the repository, for the local cluster (no
// KUBECONFIG), and returns its output.
func makeTarget(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = root
	cmd.Env = withoutKubeconfig(os.Environ())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	t.Logf("make %s: %s", strings.Join(args, " "), time.Since(began).Round(100*time.Millisecond))
	return out.String()
}

func withoutKubeconfig(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "KUBECONFIG=") {
			out = append(out, e)
		}
	}
	return out
}
