package gitops

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/test/budget"
)

// kubectl runs the control plane's kubectl against its API server.
func kubectl(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if env == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(env.BinDir, "kubectl"), append([]string{"--kubeconfig=" + env.Kubeconfig}, args...)...)
	return cmd
}

// TestKubectlWaitForReady: `kubectl wait --for=condition=Ready` returns
// once handroll reports the WebApp Ready for its current generation, and
// not before: not while it rolls out, and not on a Ready=True left from the
// generation before a spec change.
func TestKubectlWaitForReady(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testContext(t)
	hc := env.HandrollClient(t).HandrollV1().WebApps(ns)
	w := newWebApp("waited")
	w.Spec.Replicas = ptr.To[int32](2)
	if _, err := hc.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writeStatus(ctx, t, ns, "waited", webapp.Observed{ServiceExists: true, Deployment: deployment(1, 1, 2, 2, 2, available, progressed)})
	patch := []byte(`{"spec":{"image":"nginx:1.28"}}`)
	if _, err := hc.Patch(ctx, "waited", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// Ready=True of generation 1 while the WebApp is at generation 2: kubectl
	// compares the condition's observedGeneration and keeps waiting.
	out, err := kubectl(ctx, t, "wait", "--for=condition=Ready", "webapp/waited", "-n", ns, "--timeout=2s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "timed out") {
		t.Fatalf("kubectl wait on a Ready of the previous generation: %v\n%s", err, out)
	}

	var stdout, stderr bytes.Buffer
	wait := kubectl(ctx, t, "wait", "--for=condition=Ready", "webapp/waited", "-n", ns, "--timeout=25s")
	wait.Stdout, wait.Stderr = &stdout, &stderr
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait.Wait() }()

	writeStatus(ctx, t, ns, "waited", webapp.Observed{ServiceExists: true, Deployment: deployment(2, 2, 3, 1, 2, available, progressing)})
	select {
	case err := <-done:
		t.Fatalf("kubectl wait returned while the rollout is under way: %v\n%s%s", err, stdout.String(), stderr.String())
	case <-time.After(time.Second):
	}

	writeStatus(ctx, t, ns, "waited", webapp.Observed{ServiceExists: true, Deployment: deployment(2, 2, 2, 2, 2, available, progressed)})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kubectl wait: %v\n%s%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(budget.Scale(20 * time.Second)):
		t.Fatal("kubectl wait did not return once the WebApp was Ready")
	}
	if got := strings.TrimSpace(stdout.String()); got != "webapp.handroll.dev/waited condition met" {
		t.Errorf("kubectl wait printed %q", got)
	}
}
