package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/handroll/handroll/test/budget"
)

// These tests start and stop whole control planes; they are the harness's
// own proof that it cleans up. They need the binaries (make testbin).

func startForTest(t *testing.T, opts Options) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp, err := StartWithBudget(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return cp
}

func pidsOf(cp *ControlPlane) []int {
	var pids []int
	for _, p := range cp.Processes {
		pids = append(pids, p.PID)
	}
	return pids
}

// gone waits until every pid has exited and dir no longer exists.
func gone(t *testing.T, pids []int, dir string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(budget.Scale(within))
	for {
		var alive []int
		for _, pid := range pids {
			// A zombie answers kill(0); /proc tells it apart.
			if syscall.Kill(pid, 0) == nil && !isZombie(pid) {
				alive = append(alive, pid)
			}
		}
		_, statErr := os.Stat(dir)
		if len(alive) == 0 && os.IsNotExist(statErr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: processes still alive %v; directory %s exists: %v", within, alive, dir, statErr == nil)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestStartAndStop(t *testing.T) {
	cp := startForTest(t, Options{})
	up, down := cp.Running()
	if len(down) != 0 || strings.Join(up, ",") != "etcd,kube-apiserver" {
		t.Fatalf("running %v, not running %v; want etcd and kube-apiserver", up, down)
	}
	if err := cp.Ready(context.Background()); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	pids, dir := pidsOf(cp), cp.Dir
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	gone(t, pids, dir, 5*time.Second)
	if err := cp.Stop(); err != nil {
		t.Errorf("a second Stop failed: %v", err)
	}
}

// TestNothingLeftAfterAPanic runs a child test binary that starts a control
// plane and panics without stopping it; afterwards no component may run and
// the directory must be gone.
func TestNothingLeftAfterAPanic(t *testing.T) {
	if os.Getenv("HANDROLL_HARNESS_CHILD") == "panic" {
		cp, err := Start(context.Background(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"dir": cp.Dir, "pids": pidsOf(cp)})
		panic("a test panics with the control plane running")
	}
	if testing.Short() {
		t.Skip("starts a control plane")
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestNothingLeftAfterAPanic$", "-test.v")
	cmd.Env = append(os.Environ(), "HANDROLL_HARNESS_CHILD=panic")
	var childErr strings.Builder
	cmd.Stderr = &childErr // the panic is printed there
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var started struct {
		Dir  string `json:"dir"`
		PIDs []int  `json:"pids"`
	}
	var childOut strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		childOut.WriteString(line + "\n")
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &started) == nil {
			break
		}
	}
	for sc.Scan() {
		childOut.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	if len(started.PIDs) != 2 || started.Dir == "" {
		t.Fatalf("the child did not report a running control plane:\n%s", childOut.String())
	}
	if err == nil || !strings.Contains(childOut.String()+childErr.String(), "panic: a test panics") {
		t.Fatalf("the child did not panic (err %v):\n%s%s", err, childOut.String(), childErr.String())
	}
	gone(t, started.PIDs, started.Dir, 15*time.Second)
}

func TestStartupFailureNamesTheComponent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp, err := StartWithBudget(Options{APIServerArgs: []string{"--no-such-flag"}})
	if err == nil {
		_ = cp.Stop()
		t.Fatal("Start succeeded with an invalid kube-apiserver flag")
	}
	for _, want := range []string{"kube-apiserver exited", "kube-apiserver.log", "unknown flag: --no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}

// TestStopAndStartComponents: etcd and kube-apiserver can each be stopped
// and started again, with their data and ports, as the outage tests do.
func TestStopAndStartComponents(t *testing.T) {
	cp := startForTest(t, Options{})
	defer func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	ctx := context.Background()

	if err := cp.StopComponent("etcd", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cp.Ready(ctx); err == nil {
		t.Error("the API server reports ready with etcd stopped")
	}
	if err := cp.StartComponent(ctx, "etcd"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cp)

	if err := cp.StopComponent("kube-apiserver", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if up, down := cp.Running(); len(down) != 1 || down[0] != "kube-apiserver" {
		t.Errorf("running %v, stopped %v; want only kube-apiserver stopped", up, down)
	}
	if err := cp.StartComponent(ctx, "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cp)
	if err := cp.StartComponent(ctx, "kube-apiserver"); err == nil {
		t.Error("starting a running component succeeded")
	}
	if err := cp.StopComponent("no-such", time.Second); err == nil {
		t.Error("stopping an unknown component succeeded")
	}
}

func waitReady(t *testing.T, cp *ControlPlane) {
	t.Helper()
	deadline := time.Now().Add(budget.Scale(time.Minute))
	for {
		err := cp.Ready(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server is not ready a minute after the restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFakeNodesRenewTheirLeases: kwok renews each fake node's Lease, as a
// kubelet does. Its node stages write a node's status only every 10 to 20
// minutes, so without the Leases every node went NotReady once the
// controller-manager's grace period ran out, and the pods it then marked
// not ready stayed so.
func TestFakeNodesRenewTheirLeases(t *testing.T) {
	cp := startForTest(t, Options{Nodes: 1})
	defer func() { _ = cp.Stop() }()
	kube := cp.KubeClient(t)
	ctx := context.Background()
	renewals := map[string]bool{}
	deadline := time.Now().Add(budget.Scale(90 * time.Second))
	for len(renewals) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the fake node's Lease was renewed %d time(s) in %s, want 2", len(renewals), budget.Scale(90*time.Second))
		}
		lease, err := kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, "kwok-node-0", metav1.GetOptions{})
		if err == nil && lease.Spec.RenewTime != nil {
			renewals[lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)] = true
		}
		time.Sleep(time.Second)
	}
}
