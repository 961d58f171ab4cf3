package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// proc is one running contender process.
type proc struct {
	name        string
	cmd         *exec.Cmd
	logPath     string
	metricsAddr string
	healthAddr  string
	started     time.Time
	exited      chan struct{}
	waitErr     error
}

// launch starts bin with args plus free loopback addresses for its metrics
// and health servers; its output goes to a file in logDir.
func launch(name, bin string, args []string, logDir string) (*proc, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	healthAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp(logDir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	p := &proc{
		name:        name,
		logPath:     logFile.Name(),
		metricsAddr: metricsAddr,
		healthAddr:  healthAddr,
		exited:      make(chan struct{}),
	}
	p.cmd = exec.Command(bin, append([]string{
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + healthAddr,
	}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// Every contender is a Go program: the runtime's own trace of each
	// collection (one line on stderr) says what it found live.
	p.cmd.Env = append(os.Environ(), "GODEBUG="+withGCTrace(os.Getenv("GODEBUG")))
	// A contender must not outlive a bench that crashed.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p.started = time.Now()
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// freeAddr is a loopback address free now, for a contender to bind a
// moment later. Its port is below the kernel's ephemeral range when it
// can be: a port the kernel hands out for ":0" is also one it may hand an
// outgoing connection as its source port in between, which a failover
// trial once lost to (bind: address already in use).
func freeAddr() (string, error) {
	low := ephemeralLow()
	for range 64 {
		if low <= minPort {
			break
		}
		port := minPort + rand.IntN(low-minPort)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			addr := l.Addr().String()
			l.Close()
			return addr, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// minPort is the lowest port freeAddr picks: above the well-known and
// the most common registered ones.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default 32768 when it cannot be read).
func ephemeralLow() int {
	return parseEphemeralLow(readFileOrEmpty("/proc/sys/net/ipv4/ip_local_port_range"))
}

func parseEphemeralLow(s string) int {
	if f := strings.Fields(s); len(f) == 2 {
		if low, err := strconv.Atoi(f[0]); err == nil && low > 0 {
			return low
		}
	}
	return 32768
}

func readFileOrEmpty(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(data)
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// failed describes an unexpected exit, with the end of the log.
func (p *proc) failed() error {
	return fmt.Errorf("%s exited: %w; last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tail(p.logPath, 20))
}

// waitReady polls /readyz until it answers 200 and returns when it did.
// It polls often: start-up to ready is a measure, of a few hundred ms.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if !p.running() {
			return time.Time{}, p.failed()
		}
		if resp, err := client.Get("http://" + p.healthAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s not ready after %s; last lines of %s:\n%s", p.name, timeout, p.logPath, tail(p.logPath, 20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// requests scrapes rest_client_requests_total and sums it by HTTP method:
// the requests the process made to the API server, counted on its side.
func (p *proc) requests() (map[string]float64, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", p.name, resp.Status)
	}
	return requestsByMethod(resp.Body)
}

func requestsByMethod(r io.Reader) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	// Before its first request, a process has no sample, and so no family.
	out := map[string]float64{}
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" {
				out[strings.ToUpper(l.GetValue())] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// usage reads the process's peak resident set (VmHWM) and the CPU time it
// has used (utime + stime).
func (p *proc) usage() (peakRSS int64, cpu float64, err error) {
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	if peakRSS, err = parseVmHWM(string(status)); err != nil {
		return 0, 0, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	cpu, err = parseCPUSeconds(string(stat))
	return peakRSS, cpu, err
}

// parseVmHWM returns the VmHWM line of /proc/<pid>/status in bytes.
func parseVmHWM(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb * 1024, nil
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
}

// withGCTrace adds gctrace=1 to a GODEBUG value.
func withGCTrace(godebug string) string {
	if godebug == "" {
		return "gctrace=1"
	}
	return godebug + ",gctrace=1"
}

// liveHeap returns the heap the process's last garbage collection so far
// found live, in bytes, from the gctrace lines of its log (the "C" of
// "A->B->C MB"), or false when it has collected nothing yet. The runtime
// writes it in whole MB: a resolution of 1 MiB.
func (p *proc) liveHeap() (int64, bool) {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0, false
	}
	return lastLiveHeap(string(data))
}

// lastLiveHeap parses the last gctrace line of log.
func lastLiveHeap(log string) (int64, bool) {
	var live int64
	found := false
	for line := range strings.Lines(log) {
		if !isGCTrace(line) {
			continue
		}
		m := gcTraceHeap.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		mb, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			continue
		}
		live, found = mb<<20, true
	}
	return live, found
}

// isGCTrace tells a line of the runtime's gctrace.
func isGCTrace(line string) bool {
	return strings.HasPrefix(line, "gc ") && gcTraceHeap.MatchString(line)
}

// gcTraceHeap matches the heap sizes of a gctrace line: "12->13->7 MB,".
var gcTraceHeap = regexp.MustCompile(`, \d+->\d+->(\d+) MB,`)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times. The kernel
// fixes it at 100 for user space on every architecture Go supports on Linux
// (sysconf(_SC_CLK_TCK) would need cgo to ask).
const clockTicks = 100

// parseCPUSeconds returns utime + stime from /proc/<pid>/stat in seconds.
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseCPUSeconds(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/<pid>/stat")
	}
	// After ')' come field 3 (state) onwards; utime and stime are fields 14
	// and 15.
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/<pid>/stat: %w", err)
		}
		ticks += n
	}
	return float64(ticks) / clockTicks, nil
}

// stop sends sig and waits up to grace for the process to exit, then kills
// it. It reports an exit that was neither clean nor caused by sig.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	if !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	return p.waitExit(sig, grace)
}

// waitExit waits up to grace for the process, already sent sig, to exit,
// then kills it; it reports errors as stop does.
func (p *proc) waitExit(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not exit within %s of %s; killed", p.name, grace, sig)
	}
	var exit *exec.ExitError
	if errors.As(p.waitErr, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == sig {
			return nil
		}
	}
	if p.waitErr != nil {
		return p.failed()
	}
	return nil
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		if isGCTrace(s.Text()) {
			continue // the runtime's, not the contender's: no help in a failure
		}
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// builder builds the contenders, once each, into dir.
type builder struct {
	root string // the repository
	dir  string
}

// build runs go build for pkg in moduleDir (relative to the repository)
// and returns the binary's path.
func (b builder) build(ctx context.Context, name, moduleDir, pkg string) (string, error) {
	out := filepath.Join(b.dir, name)
	cmd := exec.CommandContext(ctx, "go", "-C", filepath.Join(b.root, moduleDir), "build", "-o", out, pkg)
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, moduleDir, err, output)
	}
	return out, nil
}
