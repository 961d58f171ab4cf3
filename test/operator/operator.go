// Package operator runs bin/handroll as a separate process for tests, as a
// user runs it: built from this checkout, pointed at a kubeconfig, probed
// through its health endpoint and read through its metrics endpoint.
package operator

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

var (
	buildOnce sync.Once
	own       string
	ownDir    string // the temporary directory own was built in, if any
	buildErr  error
)

// BuiltVar names a handroll binary built from this tree before the tests,
// as make test does, so that no package builds its own.
const BuiltVar = "HANDROLL_TEST_BINARY"

// Replaced reports whether HANDROLL_OPERATOR_BINARY names another build
// of the operator (see Binary): a scenario then checks behaviour, not
// handroll's own wording.
func Replaced() bool { return os.Getenv("HANDROLL_OPERATOR_BINARY") != "" }

// BuildBeforeTests builds cmd/handroll, unless HANDROLL_TEST_BINARY names
// it built already, and exits the test binary if it cannot. Call it first
// in TestMain: a build, cold or on a busy machine, takes minutes that no
// test's budget should pay. Under -short, or with HANDROLL_OPERATOR_BINARY
// set, it does nothing. Call the function it returns before the test
// binary exits: it removes the build, which is some 50 MB.
func BuildBeforeTests() (remove func()) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() || Replaced() {
		return func() {}
	}
	if build(); buildErr != nil {
		fmt.Fprintln(os.Stderr, buildErr)
		os.Exit(1)
	}
	return func() {
		if ownDir != "" {
			_ = os.RemoveAll(ownDir)
		}
	}
}

func build() {
	buildOnce.Do(func() {
		if path := os.Getenv(BuiltVar); path != "" {
			own = path
			if _, err := os.Stat(path); err != nil {
				buildErr = fmt.Errorf("%s: %w", BuiltVar, err)
			}
			return
		}
		root, err := controlplane.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "handroll-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		own, ownDir = filepath.Join(dir, "handroll"), dir
		cmd := exec.Command("go", "build", "-o", own, "./cmd/handroll")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/handroll: %w\n%s", err, out)
			_ = os.RemoveAll(dir)
			ownDir = ""
		}
	})
}

// Handroll returns the path of handroll built from this tree (see
// BuildBeforeTests), for what only handroll has, such as its uninstall
// command.
func Handroll(t testing.TB) string {
	t.Helper()
	build()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return own
}

// Binary returns the operator the tests run: handroll built from this
// tree (see Handroll).
//
// When the environment variable HANDROLL_OPERATOR_BINARY is set, Binary
// returns that executable instead, so that the same scenarios run against
// another build of the operator, such as the controller-runtime twin
// (hack/compare/test-twin.sh). Give an absolute path: go test runs each
// package in its own directory.
func Binary(t testing.TB) string {
	t.Helper()
	if path := os.Getenv("HANDROLL_OPERATOR_BINARY"); path != "" {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("HANDROLL_OPERATOR_BINARY: %v", err)
		}
		return path
	}
	return Handroll(t)
}

// Operator is a running handroll process.
type Operator struct {
	cmd         *exec.Cmd
	log         *syncBuffer
	MetricsAddr string
	HealthAddr  string
	exited      chan struct{}
	exitedAt    time.Time // when Wait returned; set before exited is closed
	waitErr     error
}

// Exited is closed once the process has exited.
func (o *Operator) Exited() <-chan struct{} { return o.exited }

// ExitedAt returns when the process was seen to exit, an upper bound of its
// last instruction; ok is false while it runs.
func (o *Operator) ExitedAt() (at time.Time, ok bool) {
	select {
	case <-o.exited:
		return o.exitedAt, true
	default:
		return time.Time{}, false
	}
}

// PID is the process's id.
func (o *Operator) PID() int { return o.cmd.Process.Pid }

// Start runs handroll against kubeconfig with args added to the flags that
// bind its servers to free loopback ports, and waits until /readyz passes.
// The process is stopped when t ends, and its log printed if t failed.
func Start(t testing.TB, kubeconfig string, args ...string) *Operator {
	t.Helper()
	o := Launch(t, kubeconfig, args...)
	o.WaitReady(t, time.Minute)
	return o
}

// Launch is Start without waiting for readiness.
//
// Unless args set --first-status-grace, a new WebApp's status is written at
// once (--first-status-grace=0): the tests' Deployments are mostly never
// ready (no controller-manager runs), and the grace would add its 3 s to
// every wait for a first status. The tests of the grace set it.
//
// Unless args set a --webhook-* flag, the webhooks are off (--webhook-port=0):
// self-managed certificates write a Secret and the cluster-wide webhook
// configurations and CRD, which tests sharing a control plane must opt into.
func Launch(t testing.TB, kubeconfig string, args ...string) *Operator {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--first-status-grace") }) {
		args = append([]string{"--first-status-grace=0"}, args...)
	}
	return LaunchBinary(t, Binary(t), kubeconfig, args...)
}

// LaunchBinary is Launch with another build of the operator, such as that
// of a release an upgrade starts from: the same flags, the same log and the
// same stop when t ends.
func LaunchBinary(t testing.TB, path, kubeconfig string, args ...string) *Operator {
	t.Helper()
	webhooks := false
	for _, a := range args {
		webhooks = webhooks || strings.HasPrefix(a, "--webhook-")
	}
	if !webhooks {
		args = append([]string{"--webhook-port=0"}, args...)
	}
	return launch(t, func(o *Operator) *exec.Cmd {
		return exec.Command(path, append(append([]string{"--kubeconfig=" + kubeconfig}, o.flags()...), args...)...)
	})
}

// flags bind the servers to the free loopback ports chosen for o.
func (o *Operator) flags() []string {
	return []string{
		"--metrics-bind-address=" + o.MetricsAddr,
		"--health-probe-bind-address=" + o.HealthAddr,
		"-v=2",
	}
}

// launch starts the command command makes for o, logs it into o and stops
// it when t ends.
func launch(t testing.TB, command func(*Operator) *exec.Cmd) *Operator {
	t.Helper()
	o := &Operator{
		log:         &syncBuffer{},
		MetricsAddr: freeAddr(t),
		HealthAddr:  freeAddr(t),
		exited:      make(chan struct{}),
	}
	o.cmd = command(o)
	o.cmd.Stdout = o.log
	o.cmd.Stderr = o.log
	// The operator must not outlive a crashed test binary.
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		o.waitErr = o.cmd.Wait()
		o.exitedAt = time.Now()
		close(o.exited)
	}()
	t.Cleanup(func() {
		// Gracefully, so that it releases its lease for the next test's
		// operator; killed if it does not stop in time.
		select {
		case <-o.exited:
		default:
			_ = o.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-o.exited:
			case <-time.After(budget.Scale(15 * time.Second)):
				_ = o.cmd.Process.Kill()
				<-o.exited
			}
		}
		if t.Failed() {
			t.Logf("handroll log:\n%s", o.Log())
		}
	})

	return o
}

// Readyz GETs /readyz?verbose and returns the status code and body.
func (o *Operator) Readyz(t testing.TB) (int, string) {
	t.Helper()
	return o.Probe(t, "/readyz?verbose")
}

// Probe GETs path (such as /readyz/api-server) from the health server and
// returns the status code and body; code 0 and the error when it could not
// ask.
func (o *Operator) Probe(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + o.HealthAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// WaitReady waits until /readyz passes, failing t if the process exits or
// the timeout (scaled by budget.Scale) passes first.
func (o *Operator) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	timeout = budget.Scale(timeout)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-o.exited:
			return false, fmt.Errorf("handroll exited: %w", o.waitErr)
		default:
		}
		resp, err := http.Get("http://" + o.HealthAddr + "/readyz")
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: poll again until the timeout
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("handroll not ready within %s: %v\n%s", timeout, err, o.Log())
	}
}

// Log returns what the process printed so far.
func (o *Operator) Log() string { return o.log.String() }

// Stop sends sig and waits up to within (scaled by budget.Scale) for the
// process to exit; it returns the exit error (nil for exit code 0).
func (o *Operator) Stop(t testing.TB, sig syscall.Signal, within time.Duration) error {
	t.Helper()
	within = budget.Scale(within)
	_ = o.cmd.Process.Signal(sig)
	select {
	case <-o.exited:
		return o.waitErr
	case <-time.After(within):
		t.Fatalf("handroll did not exit within %s of %s", within, sig)
		return nil
	}
}

// Metrics scrapes /metrics and returns the families by name.
func (o *Operator) Metrics(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + o.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("scraping metrics: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing metrics: %v", err)
	}
	return families
}

// Requests sums rest_client_requests_total by HTTP method: the requests
// handroll made to the API server, counted on its side.
func (o *Operator) Requests(t testing.TB) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	if f, ok := o.Metrics(t)["rest_client_requests_total"]; ok {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" {
					out[strings.ToUpper(l.GetValue())] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// Writes is the number of requests the operator's controller made that
// change something: POST, PATCH and DELETE. GET (with LIST and WATCH) reads;
// PUT is left out because only leader election uses it, to renew its Lease
// every retry period — the controller writes with server-side apply and
// merge patches (PATCH), creates (POST) and deletes.
func Writes(requests map[string]float64) float64 {
	return requests[http.MethodPost] + requests[http.MethodPatch] + requests[http.MethodDelete]
}

// FreePort returns a loopback TCP port free at the time of the call, for
// --webhook-port and a matching --webhook-url.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func freeAddr(t testing.TB) string {
	t.Helper()
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
