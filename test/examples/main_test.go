// Package examples builds the example programs (examples/ in the main
// module, examples/ in the controller-runtime twin's module under
// hack/compare), runs them against a real etcd and kube-apiserver, and
// checks that each shows what it says it shows: from the programs' output
// and from the objects on the API server.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env)) }

// buildFlags are added to every go build; race_test.go adds -race, so that
// under go test -race the examples run with the race detector too.
var buildFlags []string

// waitLimit bounds every wait for a line; generous, because the tests
// assert what happens and measure durations separately.
const waitLimit = 30 * time.Second

// build builds the main package pkg of the module in dir (relative to the
// repository root) into t's temporary directory and returns the binary.
func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := append([]string{"-C", filepath.Join(root, dir), "build"}, buildFlags...)
	cmd := exec.Command("go", append(args, "-o", bin, pkg)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in %s: %v\n%s", pkg, dir, err, out)
	}
	return bin
}

// kubeconfig returns the path of an admin kubeconfig for the examples.
func kubeconfig(t *testing.T) string {
	return env.WriteKubeconfig(t, func(*clientcmdapi.Config) {})
}

// line is one line of a process's standard output and when it arrived.
type line struct {
	at   time.Time
	text string
}

// proc is a running example: its output is collected as it arrives.
type proc struct {
	name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	lines  []line
	stderr bytes.Buffer

	done chan struct{} // closed once the process has exited and its output is read
	err  error         // Wait's result, once done is closed
}

// start runs bin with args until the test ends; the output is logged then.
func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
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
			p.lines = append(p.lines, line{time.Now(), s.Text()})
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
		var out strings.Builder
		for _, l := range p.lines {
			out.WriteString(l.text + "\n")
		}
		t.Logf("%s: stdout:\n%s", name, out.String())
		if t.Failed() {
			t.Logf("%s: stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

// find returns the first line at index from or later that contains s.
func (p *proc) find(s string, from int) (int, line, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < len(p.lines); i++ {
		if strings.Contains(p.lines[i].text, s) {
			return i, p.lines[i], true
		}
	}
	return 0, line{}, false
}

// count counts the lines at index from or later that contain s.
func (p *proc) count(s string, from int) int {
	n := 0
	for i, _, ok := p.find(s, from); ok; i, _, ok = p.find(s, i+1) {
		n++
	}
	return n
}

// next is the index the next line will have.
func (p *proc) next() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// waitFor waits for a line at index from or later that contains s.
func (p *proc) waitFor(t *testing.T, s string, from int) (int, line) {
	t.Helper()
	deadline := time.Now().Add(budget.Scale(waitLimit))
	for {
		if i, l, ok := p.find(s, from); ok {
			return i, l
		}
		select {
		case <-p.done:
			if i, l, ok := p.find(s, from); ok {
				return i, l
			}
			t.Fatalf("%s exited (%v) without printing %q", p.name, p.err, s)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %s", p.name, s, budget.Scale(waitLimit))
		}
	}
}

// signal sends sig and returns when it was sent.
func (p *proc) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %s: %v", p.name, err)
	}
	return at
}

// wait waits for the process to exit and returns Wait's result.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(budget.Scale(waitLimit)):
		t.Fatalf("%s did not exit within %s", p.name, budget.Scale(waitLimit))
		return nil
	}
}

func getLease(t *testing.T, namespace, name string) *coordinationv1.Lease {
	t.Helper()
	ctx, cancel := budget.Context(t, context.Background(), 10*time.Second, "Lease "+namespace+"/"+name)
	defer cancel()
	l, err := env.KubeClient(t).CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return l
}
