package controlplane

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
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

	cp, err := StartWithBudget(opts)
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

// StartBudget bounds the start of a control plane for tests (scaled by
// budget.Scale): etcd, the API server, the controllers and kwok on a busy
// 2-core machine, CRDs installed. It is the start's own, never a test's:
// what a test waits for after it has its own budget.
const StartBudget = 10 * time.Minute

// StartWithBudget starts a control plane for tests: it first finds the
// binaries, which on a fresh checkout builds them (many minutes, with
// progress on stderr) with no deadline, then gives the start StartBudget.
func StartWithBudget(opts Options) (*ControlPlane, error) {
	bins, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	opts.BinDir = bins.dir
	ctx, cancel := budget.Context(nil, context.Background(), StartBudget, "the control plane to start")
	defer cancel()
	cp, err := Start(ctx, opts)
	return cp, budget.Err(ctx, err)
}

// StartForTest starts a control plane for t alone, as StartWithBudget
// does, and stops it when t ends; t's own budget starts after it. It
// skips t under -short.
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	cp, err := StartWithBudget(opts)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

// Require skips t when no control plane runs (go test -short): a test
// that needs one and asks for nothing else through it says so first.
func (cp *ControlPlane) Require(t testing.TB) {
	t.Helper()
	if cp == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
}

// KubeClient returns an admin clientset for the control plane, failing t
// if it cannot be built; it skips t when no control plane runs.
func (cp *ControlPlane) KubeClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	cp.Require(t)
	c, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("building a clientset: %v", err)
	}
	return c
}

// HandrollClient returns an admin handroll clientset for the control
// plane; it skips t when no control plane runs.
func (cp *ControlPlane) HandrollClient(t testing.TB) versioned.Interface {
	t.Helper()
	cp.Require(t)
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
	cp.Require(t)
	ctx, cancel := budget.Context(t, context.Background(), time.Minute, "a namespace for "+t.Name())
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

// WriteKubeconfig writes the admin kubeconfig, changed by edit, to a file
// in t's temporary directory and returns its path: for a process that must
// run as another user, or reach the API server another way.
func (cp *ControlPlane) WriteKubeconfig(t testing.TB, edit func(*clientcmdapi.Config)) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// WithToken is an edit for WriteKubeconfig: every user authenticates with
// token.
func WithToken(token string) func(*clientcmdapi.Config) {
	return func(cfg *clientcmdapi.Config) {
		for _, auth := range cfg.AuthInfos {
			auth.Token = token
		}
	}
}

// HostAddress is an address of this machine that an EndpointSlice may hold
// (not loopback, which the API server refuses there) and at which a
// process serving on every interface answers the API server. A machine
// without one skips t.
func HostAddress(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine for an EndpointSlice")
	return ""
}
