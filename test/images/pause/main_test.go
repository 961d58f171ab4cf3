package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handroll/handroll/test/budget"
)

// build compiles this package into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestExitsZeroOnSignal(t *testing.T) {
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // let it install its handlers
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("after %v: %v, want exit code 0", sig, err)
		}
	}
}

// TestReapsChildren gives pause children, as a pod's PID 1 is given orphans:
// a shell starts two short sleeps and then execs pause, which inherits
// them. Once they have ended, none may be left a zombie.
func TestReapsChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	bin := build(t)
	cmd := exec.Command("sh", "-c", `sleep 0.5 & sleep 0.7 & exec "$0"`, bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
		_ = cmd.Wait()                          // killed by the signal: an error by design
	}()
	pid := cmd.Process.Pid

	// First the shell must have started both sleeps and become pause, then
	// both sleeps must end and be reaped.
	deadline := time.Now().Add(budget.Scale(5 * time.Second))
	for {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if children, _ := childrenOf(t, pid); exe == bin && children == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not start two sleeps and exec pause within %s", budget.Scale(5*time.Second))
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(budget.Scale(5 * time.Second))
	for {
		children, zombies := childrenOf(t, pid)
		if children == 0 {
			return // both ended and were reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause (pid %d) still has %d children, %d of them zombies", pid, children, zombies)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// childrenOf counts the processes whose parent is pid, and the zombies
// among them.
func childrenOf(t *testing.T, pid int) (children, zombies int) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it ended meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		children++
		if fields[0] == "Z" {
			zombies++
		}
	}
	return children, zombies
}
