package controlplane

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
)

// RunTests is a test package's TestMain body: it starts one control plane for
// the package, runs the tests, prints the components' logs if any test
// failed, and stops the control plane. It returns the exit code.
//
//	var env *controlplane.ControlPlane
//
//	func TestMain(m *testing.M) {
//		os.Exit(controlplane.RunTests(m, controlplane.Options{...}, &env))
//	}
func RunTests(m *testing.M, opts Options, env **ControlPlane) int {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "controlplane: -short: not starting a control plane; its tests skip")
		return m.Run()
	}
	if opts.Progress == nil {
		opts.Progress = os.Stderr
	}
	if len(opts.CRDDirs) == 0 {
		root, err := RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.CRDDirs = []string{filepath.Join(root, "manifests", "crd")}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cp, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		return 1
	}
	*env = cp

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\nSome tests failed; the control plane's logs end with:\n%s", cp.Logs(40))
	}
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// KubeClient returns an admin clientset for the control plane, failing t
// if it cannot be built.
func (cp *ControlPlane) KubeClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("building a clientset: %v", err)
	}
	return c
}

// HandrollClient returns an admin handroll clientset for the control plane.
func (cp *ControlPlane) HandrollClient(t testing.TB) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("building the handroll clientset: %v", err)
	}
	return c
}

// Namespace creates a fresh namespace for t and deletes it when t ends. It
// skips t when no control plane runs (go test -short).
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	if cp == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := cp.CreateNamespace(ctx, t.Name())
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		client, err := kubernetes.NewForConfig(cp.Config)
		if err == nil {
			_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	return ns
}
