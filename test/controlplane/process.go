package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one component of the control plane: a binary, its log file and,
// while it runs, its pid. A process started by this package is waited for
// through exec.Cmd; one found in a state file (a detached cluster started by
// an earlier command) is watched through its pid.
type Process struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	LogPath string `json:"log"`

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait's result, valid after exited is closed

	// How it was started, for StartComponent: the same binary, flags, data
	// and ports. Unset on a process found through Load.
	bin    string
	args   []string
	detach bool
	ready  func(context.Context) error
}

// startProcess starts bin with args, sending its output to dir/name.log.
// Detached processes get their own session, so they outlive the caller (for
// `make cluster-up`); otherwise the kernel kills them when the caller dies.
func startProcess(name, bin string, args []string, logDir, pidDir string, detach bool) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// If the test binary dies (a panic, a timeout), the kernel kills
		// the component; the watchdog then removes what is left on disk.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if pidDir != "" {
		if err := os.WriteFile(filepath.Join(pidDir, name), []byte(strconv.Itoa(p.PID)), 0o644); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Running tells whether the process is alive.
func (p *Process) Running() bool {
	if p.cmd != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	return p.PID > 0 && syscall.Kill(p.PID, 0) == nil
}

// exitError describes how a process that should be running ended, with the
// end of its log.
func (p *Process) exitError() error {
	how := "exited"
	if p.cmd != nil {
		select {
		case <-p.exited:
			if p.err != nil {
				how = "exited: " + p.err.Error()
			}
		default:
		}
	}
	return fmt.Errorf("%s %s; last lines of %s:\n%s", p.Name, how, p.LogPath, p.tail(30))
}

// stop sends SIGTERM and, if the process is still alive after grace, SIGKILL
// (a kube-apiserver whose etcd is gone can ignore SIGTERM).
func (p *Process) stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if p.waitExit(grace) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.waitExit(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) is still running after SIGKILL", p.Name, p.PID)
}

func (p *Process) waitExit(d time.Duration) bool {
	if p.cmd != nil {
		select {
		case <-p.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if syscall.Kill(p.PID, 0) != nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return syscall.Kill(p.PID, 0) != nil
}

// tail returns the last n lines of the process's log.
func (p *Process) tail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.ReplaceAll(string(bytes.Join(lines, []byte("\n"))), "\n", "\n    ")
}

// watchdogScript runs beside a test's control plane. When the process that
// started the control plane is gone without calling Stop (a panic, a killed
// test binary), it kills every component whose pid is in pids/ and removes
// the control plane's directory. Stop kills the watchdog first.
const watchdogScript = `
parent=$1; dir=$2
while kill -0 "$parent" 2>/dev/null; do sleep 0.5; done
for f in "$dir"/pids/*; do
  [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
done
sleep 0.5
rm -rf "$dir"
`

func startWatchdog(dir string) (*Process, error) {
	cmd := exec.Command("sh", "-c", watchdogScript, "watchdog", strconv.Itoa(os.Getpid()), dir)
	// Its own session: it must survive the death of the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the cleanup watchdog: %w", err)
	}
	p := &Process{Name: "watchdog", PID: cmd.Process.Pid, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}
