package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/handroll/handroll/test/controlplane"
)

// TestManifestsDeploy applies manifests/default as a user would, with
// kubectl's kustomize, into a cluster that enforces Pod Security: the
// namespace is labelled restricted, so the operator's pods are admitted only
// if their spec complies; kwok then runs them and the Deployment becomes
// available.
func TestManifestsDeploy(t *testing.T) {
	if env == nil {
		t.Skip("needs the local cluster")
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(env.BinDir, "kubectl"), append([]string{"--kubeconfig=" + env.Kubeconfig}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	kubectl("apply", "--server-side", "--force-conflicts", "-k", "manifests/default")
	t.Cleanup(func() {
		_ = exec.Command(filepath.Join(env.BinDir, "kubectl"), "--kubeconfig="+env.Kubeconfig,
			"delete", "-k", filepath.Join(root, "manifests", "manager"), "--wait=false").Run()
	})

	c := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Get(ctx, "handroll-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace labels %v: the test proves nothing without the restricted profile", ns.Labels)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments("handroll-system").Get(ctx, "handroll", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.ReadyReplicas == 2, nil
	})
	if err != nil {
		evs, _ := c.EventsV1().Events("handroll-system").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning {
				t.Logf("event: %s %s: %s", e.Reason, e.Regarding.Name, e.Note)
			}
		}
		t.Fatalf("the operator's Deployment did not become available: %v", err)
	}
}
