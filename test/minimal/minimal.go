// Package minimal runs the two minimal programs through one scenario:
// examples/minimal (handroll's packages) from the main module's test, and
// hack/compare/examples/minimal (controller-runtime's Manager) from the
// twin module's. Each builds its program once in TestMain, starts a control
// plane, and calls Scenario: both must reconcile a WebApp, see a
// Deployment it controls, hold the Lease while they run, and on SIGTERM
// release it and exit 0.
package minimal

import (
	"bufio"
	"context"
	"flag"
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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/controlplane"
)

// LeaseName is the Lease both programs elect a leader on.
const LeaseName = "minimal-example"

// waitLimit bounds every wait of the scenario: the program's start (its
// caches, the first election), a reconcile, its graceful stop. Generous,
// because the scenario shows what happens, not how fast on a loaded
// machine. It never covers a build or the control plane's start.
const waitLimit = 60 * time.Second

// RunTests is a minimal program's TestMain: it builds the program in the
// current directory once, before any test and its deadlines (not under
// -short), then runs the tests with a control plane in *env.
func RunTests(m *testing.M, env **controlplane.ControlPlane, bin *string) int {
	flag.Parse()
	if !testing.Short() {
		built, cleanup, err := Build(".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		*bin = built
	}
	return controlplane.RunTests(m, controlplane.Options{}, env)
}

// Build builds the main package in dir into a new temporary directory and
// returns the binary and a function that removes the directory. Call it
// from TestMain, where no test's deadline runs.
func Build(dir string) (bin string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "minimal-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	bin = filepath.Join(tmp, "minimal")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("go build in %s: %w\n%s", dir, err, out)
	}
	return bin, cleanup, nil
}

// Scenario runs bin, a minimal program, against env: a WebApp created
// after the start is reconciled, a Deployment it controls is counted
// (Owns: the Deployment's event reaches its owner), the Lease is held
// while the program runs, and SIGTERM makes it release the Lease and exit
// 0.
func Scenario(t *testing.T, env *controlplane.ControlPlane, bin string) {
	ns := env.Namespace(t)
	kubeconfig := env.WriteKubeconfig(t, func(*clientcmdapi.Config) {})
	kube := env.KubeClient(t)
	ctx := context.Background()

	p := start(t, bin, "--kubeconfig", kubeconfig, "--lease-namespace", ns, "--metrics-bind-address", "127.0.0.1:0")
	holder := waitHolder(t, env, ns, func(h string) bool { return h != "" })
	t.Logf("the Lease %s/%s is held by %q", ns, LeaseName, holder)

	app, err := env.HandrollClient(t).HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1.27"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, fmt.Sprintf("reconciled WebApp %s/demo: image nginx:1.27, 0 owned Deployment(s)", ns))

	// A Deployment the WebApp controls: only its event can bring the count
	// to 1, through the owner reference.
	labels := map[string]string{"app": "demo"}
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: handrollv1.SchemeGroupVersion.String(), Kind: "WebApp",
			Name: app.Name, UID: app.UID, Controller: ptr.To(true),
		}}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: app.Spec.Image}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, fmt.Sprintf("reconciled WebApp %s/demo: image nginx:1.27, 1 owned Deployment(s)", ns))

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(waitLimit):
		t.Fatalf("no exit within %s of SIGTERM", waitLimit)
	}
	if p.err != nil {
		t.Fatalf("after SIGTERM: %v, want exit status 0", p.err)
	}
	// Released on the graceful stop, not left to expire.
	waitHolder(t, env, ns, func(h string) bool { return h == "" })
}

// waitHolder waits until the Lease's holderIdentity satisfies ok, and
// returns it.
func waitHolder(t *testing.T, env *controlplane.ControlPlane, ns string, ok func(string) bool) string {
	t.Helper()
	kube := env.KubeClient(t)
	deadline := time.Now().Add(waitLimit)
	var last string
	for time.Now().Before(deadline) {
		l, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), LeaseName, metav1.GetOptions{})
		if err == nil {
			last = ptr.Deref(l.Spec.HolderIdentity, "")
			if ok(last) {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the Lease %s/%s: holder %q after %s", ns, LeaseName, last, waitLimit)
	return ""
}

// proc is the running program; its standard output is kept line by line.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and its output is read
	err  error         // Wait's result, once done is closed

	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
}

// start runs bin until t ends; its output is logged then.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = lockedWriter{p}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, s.Text())
			p.mu.Unlock()
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Logf("stdout:\n%s", strings.Join(p.lines, "\n"))
		t.Logf("stderr:\n%s", p.stderr.String())
	})
	return p
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

// waitFor waits for a line of standard output equal to want.
func (p *proc) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		p.mu.Lock()
		found := slices.Contains(p.lines, want)
		p.mu.Unlock()
		if found {
			return
		}
		select {
		case <-p.done:
			p.mu.Lock()
			defer p.mu.Unlock()
			if !slices.Contains(p.lines, want) {
				t.Fatalf("exited (%v) without printing %q", p.err, want)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q within %s", want, waitLimit)
		}
	}
}
