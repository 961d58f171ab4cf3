package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Results is everything a run measured; benchmarks.json is this, and
// benchmarks.md is rendered from it.
type Results struct {
	Machine  Machine `json:"machine"`
	Command  string  `json:"command"`
	Started  string  `json:"started"`
	Duration string  `json:"duration"`
	Config   Config  `json:"config"`
	// Contenders are the contenders run, in table order.
	Contenders []string `json:"contenders"`
	// Notes say what was skipped and why.
	Notes []string `json:"notes,omitempty"`

	Converge  []ConvergeSample  `json:"converge"`
	ColdStart []ColdStartSample `json:"coldStart"`
	Failover  []FailoverSample  `json:"failover,omitempty"`
}

// Config is the run's parameters.
type Config struct {
	WebApps            int     `json:"webApps"`
	Namespaces         int     `json:"namespaces"`
	Rounds             int     `json:"rounds"`
	IdleSeconds        float64 `json:"idleSeconds"`
	QPS                float64 `json:"qps"`
	Burst              int     `json:"burst"`
	Workers            int     `json:"workers"`
	LeaseDuration      string  `json:"leaseDuration"`
	RenewDeadline      string  `json:"renewDeadline"`
	RetryPeriod        string  `json:"retryPeriod"`
	FailoverWebApps    int     `json:"failoverWebApps,omitempty"`
	FailoverNamespaces int     `json:"failoverNamespaces,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	MemoryGiB string `json:"memoryGiB"`
	Go        string `json:"go"`
	OS        string `json:"os"`
}

// ConvergeSample is one contender's converge, and for the operators idle,
// measurement in one round.
type ConvergeSample struct {
	Contender string `json:"contender"`
	Round     int    `json:"round"`
	// CreateSeconds is how long the bench took to create the N WebApps;
	// the converge clock starts when it is done.
	CreateSeconds   float64 `json:"createSeconds"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// Requests are the contender's API requests by HTTP method from just
	// before the first create until its counters settled after convergence.
	Requests map[string]float64 `json:"requests"`
	// CPUSeconds is the process's user + system time from its start to the
	// end of converge.
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSBytes is VmHWM just before the process was stopped.
	PeakRSSBytes int64 `json:"peakRSSBytes"`
	// Idle figures are nil for the floor, which has no loop to idle in.
	IdleRequests   map[string]float64 `json:"idleRequests,omitempty"`
	IdleWrites     *float64           `json:"idleWrites,omitempty"`
	IdleCPUSeconds *float64           `json:"idleCPUSeconds,omitempty"`
}

// ColdStartSample is the time from a contender's process start to the
// first write the bench saw from it, with N unconverged WebApps present.
type ColdStartSample struct {
	Contender string  `json:"contender"`
	Round     int     `json:"round"`
	Seconds   float64 `json:"seconds"`
}

// FailoverSample is one failover trial.
type FailoverSample struct {
	Variant string `json:"variant"`
	Signal  string `json:"signal"`
	Round   int    `json:"round"`
	// KillToWriteSeconds runs from the signal to the leader until the new
	// leader's first write for the changed WebApp.
	KillToWriteSeconds float64 `json:"killToWriteSeconds"`
	// AcquireToWriteSeconds runs from the Lease's acquireTime, as the new
	// leader wrote it, to that write.
	AcquireToWriteSeconds float64 `json:"acquireToWriteSeconds"`
}

var writeMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

func writes(requests map[string]float64) float64 {
	var n float64
	for _, m := range writeMethods {
		n += requests[m]
	}
	return n
}

func total(requests map[string]float64) float64 {
	var n float64
	for _, v := range requests {
		n += v
	}
	return n
}

// delta is after minus before, method by method.
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for m, v := range after {
		if d := v - before[m]; d != 0 {
			out[m] = d
		}
	}
	return out
}

// median of xs; NaN when there are none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// ratio formats a/b with two decimals; "—" when either is missing or b is
// zero (0/0 included: no ratio says anything there).
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}

// measure is one row of the main table.
type measure struct {
	name  string
	unit  string // formats the value
	floor string // when set, why the measure does not apply to the floor
	value func(r *Results, contender string) []float64
}

func convergeValues(f func(ConvergeSample) (float64, bool)) func(*Results, string) []float64 {
	return func(r *Results, contender string) []float64 {
		var out []float64
		for _, s := range r.Converge {
			if s.Contender != contender {
				continue
			}
			if v, ok := f(s); ok {
				out = append(out, v)
			}
		}
		return out
	}
}

func requestsRow(method string) measure {
	return measure{
		name: "API requests during converge: " + method, unit: "count",
		value: convergeValues(func(s ConvergeSample) (float64, bool) { return s.Requests[method], true }),
	}
}

const floorIdle = "n/a: writes once and has no loop"

var measures = []measure{
	{name: "converge (N WebApps created → all converged)", unit: "s",
		value: convergeValues(func(s ConvergeSample) (float64, bool) { return s.ConvergeSeconds, true })},
	{name: "API requests during converge: total", unit: "count",
		value: convergeValues(func(s ConvergeSample) (float64, bool) { return total(s.Requests), true })},
	{name: "API requests during converge: writes (POST+PUT+PATCH+DELETE)", unit: "count",
		value: convergeValues(func(s ConvergeSample) (float64, bool) { return writes(s.Requests), true })},
	requestsRow("GET"), requestsRow("POST"), requestsRow("PUT"), requestsRow("PATCH"), requestsRow("DELETE"),
	{name: "CPU time, process start → converged", unit: "s",
		value: convergeValues(func(s ConvergeSample) (float64, bool) { return s.CPUSeconds, true })},
	{name: "peak RSS (VmHWM)", unit: "MiB",
		value: convergeValues(func(s ConvergeSample) (float64, bool) { return float64(s.PeakRSSBytes) / (1 << 20), true })},
	{name: "cold start → first write", unit: "s",
		value: func(r *Results, contender string) []float64 {
			var out []float64
			for _, s := range r.ColdStart {
				if s.Contender == contender {
					out = append(out, s.Seconds)
				}
			}
			return out
		}},
	{name: "idle writes (during -idle, nothing changing)", unit: "count", floor: floorIdle,
		value: convergeValues(func(s ConvergeSample) (float64, bool) {
			if s.IdleWrites == nil {
				return 0, false
			}
			return *s.IdleWrites, true
		})},
	{name: "idle CPU time", unit: "s", floor: floorIdle,
		value: convergeValues(func(s ConvergeSample) (float64, bool) {
			if s.IdleCPUSeconds == nil {
				return 0, false
			}
			return *s.IdleCPUSeconds, true
		})},
}

func format(v float64, unit string) string {
	if math.IsNaN(v) {
		return "—"
	}
	switch unit {
	case "count":
		if v == math.Trunc(v) {
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
		return strconv.FormatFloat(v, 'f', 1, 64)
	case "MiB":
		return strconv.FormatFloat(v, 'f', 1, 64) + " MiB"
	case "s":
		return formatSeconds(v)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func formatSeconds(v float64) string {
	switch {
	case v < 1:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + " ms"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " s"
}

// column names in table order, with the contender each reads.
var columns = []struct{ name, contender string }{
	{"handroll", "handroll"},
	{"twin (controller-runtime)", "twin"},
	{"floor", "floor"},
}

// markdown renders the results.
func (r *Results) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	ran := func(c string) bool { return slices.Contains(r.Contenders, c) }

	p("# Benchmarks: handroll, its controller-runtime twin, and the floor\n\n")
	p("Written by `hack/bench`; every figure below comes from one run, with the three\n")
	p("contenders alternating on the same control plane. Do not edit by hand: run it again.\n\n")
	p("## Machine and run\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s × %d |\n", r.Machine.CPU, r.Machine.CPUs)
	p("| memory | %s GiB |\n", r.Machine.MemoryGiB)
	p("| Go | %s |\n", r.Machine.Go)
	p("| OS | %s |\n", r.Machine.OS)
	p("| command | `%s` |\n", r.Command)
	p("| started, took | %s, %s |\n", r.Started, r.Duration)
	p("| WebApps (N) | %d in %d namespaces, every other one with `spec.config` (so a ConfigMap child too) |\n", r.Config.WebApps, r.Config.Namespaces)
	p("| rounds | %d; each cell is the median over rounds, all samples in `benchmarks.json` |\n", r.Config.Rounds)
	p("| client limits, workers | QPS %g, burst %d, %d workers, the same for every contender |\n", r.Config.QPS, r.Config.Burst, r.Config.Workers)
	p("\n")
	for _, n := range r.Notes {
		p("- %s\n", n)
	}
	if len(r.Notes) > 0 {
		p("\n")
	}

	p("## Converge, requests, resources, cold start, idle\n\n")
	p("| measure |")
	for _, c := range columns {
		p(" %s |", c.name)
	}
	p(" handroll/twin | handroll/floor |\n|---|")
	for range columns {
		p("---:|")
	}
	p("---:|---:|\n")
	for _, m := range measures {
		med := map[string]float64{}
		p("| %s |", m.name)
		for _, c := range columns {
			switch {
			case !ran(c.contender):
				med[c.contender] = math.NaN()
				p(" not run |")
			case c.contender == "floor" && m.floor != "":
				med[c.contender] = math.NaN()
				p(" %s |", m.floor)
			default:
				med[c.contender] = median(m.value(r, c.contender))
				p(" %s |", format(med[c.contender], m.unit))
			}
		}
		p(" %s | %s |\n", ratio(med["handroll"], med["twin"]), ratio(med["handroll"], med["floor"]))
	}
	p("\n")

	if len(r.Failover) > 0 {
		variants := r.failoverVariants()
		p("## Failover\n\n")
		p("Two replicas with leader election; the leader is stopped by the signal shown, one\n")
		p("WebApp's `spec.replicas` is changed at once, and the clock stops at the new leader's\n")
		p("first write for it. The floor has no leader election: n/a.\n\n")
		p("| measure |")
		for _, v := range variants {
			p(" %s |", variantTitle(v))
		}
		if slices.Contains(variants, variantHandrollWarm) && slices.Contains(variants, variantTwin) {
			p(" handroll/twin |")
		}
		p("\n|---|")
		for range variants {
			p("---:|")
		}
		if slices.Contains(variants, variantHandrollWarm) && slices.Contains(variants, variantTwin) {
			p("---:|")
		}
		p("\n")
		for _, sig := range []string{"SIGKILL", "SIGTERM"} {
			for _, row := range []struct {
				name string
				f    func(FailoverSample) float64
			}{
				{"leader stopped → first write", func(s FailoverSample) float64 { return s.KillToWriteSeconds }},
				{"Lease acquired → first write", func(s FailoverSample) float64 { return s.AcquireToWriteSeconds }},
			} {
				p("| %s: %s |", sig, row.name)
				med := map[string]float64{}
				for _, v := range variants {
					var xs []float64
					for _, s := range r.Failover {
						if s.Variant == v && s.Signal == sig {
							xs = append(xs, row.f(s))
						}
					}
					med[v] = median(xs)
					p(" %s |", format(med[v], "s"))
				}
				if slices.Contains(variants, variantHandrollWarm) && slices.Contains(variants, variantTwin) {
					p(" %s |", ratio(med[variantHandrollWarm], med[variantTwin]))
				}
				p("\n")
			}
		}
		p("\n")
	}

	p("## How each figure is measured\n\n")
	for _, line := range methodology(r) {
		p("- %s\n", line)
	}
	return b.String()
}

func (r *Results) failoverVariants() []string {
	var out []string
	for _, v := range []string{variantHandrollWarm, variantHandrollCold, variantTwin} {
		if slices.ContainsFunc(r.Failover, func(s FailoverSample) bool { return s.Variant == v }) {
			out = append(out, v)
		}
	}
	return out
}

func variantTitle(v string) string {
	switch v {
	case variantHandrollWarm:
		return "handroll (warm standby, default)"
	case variantHandrollCold:
		return "handroll (`--leader-elect-warm-standby=false`)"
	case variantTwin:
		return "twin (defaults)"
	}
	return v
}

func methodology(r *Results) []string {
	return []string{
		"One local control plane (etcd and kube-apiserver from `test/controlplane`, no controller-manager, so no pods: " +
			"a WebApp has **converged** when `status.observedGeneration` equals `metadata.generation` and its Deployment, " +
			"Service and (with `spec.config`) ConfigMap exist). The bench observes this through informers (watches), not by polling.",
		"Each contender is built once (`go build`) and runs as its own process with an admin kubeconfig, " +
			"`--webhook-port=0`, and metrics and health on free loopback ports. Every measurement uses fresh namespaces, " +
			"and everything in them (finalizers dropped first) and the directory ConfigMap are deleted afterwards, so each " +
			"contender starts from the same empty cluster. Contenders alternate within each round; the order rotates by round. " +
			"Before the first round the floor converges a few WebApps, unmeasured, so that nobody pays for the API server's first " +
			"writes of each kind (the CRD's validation rules compiled, server-side apply set up).",
		"`--kube-api-qps`, `--kube-api-burst` and `--max-concurrent-reconciles` are the same for every contender, but how much the " +
			"first two throttle depends on how many client-side rate limiters a program builds from them: client-go gives each " +
			"REST client its own token bucket unless `rest.Config.RateLimiter` is set. A generated clientset shares one bucket " +
			"among its groups (handroll and the floor have two clientsets, Kubernetes and handroll); controller-runtime's client " +
			"builds a REST client, and so a bucket, per GroupVersionKind. The same flags therefore throttle the contenders differently.",
		"**Converge**: the contender starts and passes `/readyz` (handroll: caches synced); then the bench creates the N WebApps " +
			"as fast as it can with its own client; the clock runs from the last create's response to the event that made the " +
			"last WebApp converge. The contender reconciles while the bench is still creating (a head start of the creation " +
			"time, in the JSON as `createSeconds`); the floor, which lists once, is sent SIGUSR1 when creation is done.",
		"**API requests**: `rest_client_requests_total` summed by `method` (client-go's metric, registered by handroll, by " +
			"controller-runtime in the twin, and by the floor through `pkg/server.RegisterClientGoMetrics`), scraped just before " +
			"the first create and again once the contender's counters have not moved for 2 s after convergence, so that trailing " +
			"writes (the directory entry, events) count as converge, not idle. GET includes LIST and WATCH.",
		"**Leader election is off** (`--leader-elect=false`) for converge, idle and cold start, so Lease renewals, which go " +
			"through the same client-go metrics, are not counted.",
		"**CPU time**: utime + stime from `/proc/<pid>/stat`, read once the request counters have settled after convergence (it includes start-up). **Peak RSS**: " +
			"`VmHWM` from `/proc/<pid>/status`, read just before the process is stopped.",
		fmt.Sprintf("**Idle**: after converge, %s with nothing changing; writes are POST+PUT+PATCH+DELETE from the metrics delta. "+
			"The floor writes what convergence needs once and then does nothing, so idle does not apply to it.", time.Duration(r.Config.IdleSeconds*float64(time.Second))),
		"**Cold start**: the N WebApps are created while no contender runs; the clock runs from the process's start to the " +
			"first write the bench sees from it (a child created or a WebApp updated).",
		fmt.Sprintf("**Failover**: %d WebApps in a namespace of their own per operator (handroll's two variants share one), the replicas started with `--namespaces` set to it, and short Lease timings for every contender: "+
			"`--leader-elect-lease-duration=%s --leader-elect-renew-deadline=%s --leader-elect-retry-period=%s`. Replica A starts and "+
			"takes the Lease, then replica B; once everything has converged and B is ready, A gets SIGKILL (one trial) or SIGTERM "+
			"(another) and the bench at once changes one WebApp's `spec.replicas`, without waiting for A to exit. The first write is the first of the "+
			"Deployment's new `spec.replicas` or a status for the new generation; the Lease's `acquireTime` is the new leader's own. "+
			"A write seen before that `acquireTime` was the old leader's, on its way out: such a trial is run again.",
			r.Config.FailoverWebApps, r.Config.LeaseDuration, r.Config.RenewDeadline, r.Config.RetryPeriod),
	}
}

// write stores benchmarks.json and benchmarks.md in dir.
func (r *Results) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "benchmarks.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(r.markdown()), 0o644)
}

// rerender rewrites benchmarks.md from the benchmarks.json at path, for
// when the report's wording changes but the figures need not.
func rerender(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(filepath.Join(filepath.Dir(path), "benchmarks.md"), []byte(r.markdown()), 0o644)
}

// describeMachine reads the CPU, memory and kernel from /proc.
func describeMachine() Machine {
	m := Machine{CPU: "unknown", CPUs: runtime.NumCPU(), MemoryGiB: "unknown", Go: runtime.Version(), OS: runtime.GOOS}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		m.CPU = cpuModel(f)
		f.Close()
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, ok := memTotalKB(string(data)); ok {
			m.MemoryGiB = strconv.FormatFloat(float64(kb)/(1<<20), 'f', 1, 64)
		}
	}
	ostype, _ := os.ReadFile("/proc/sys/kernel/ostype")
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if len(ostype) > 0 {
		m.OS = strings.TrimSpace(string(ostype)) + " " + strings.TrimSpace(string(release))
	}
	m.OS += " " + runtime.GOARCH
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(cpuinfo io.Reader) string {
	s := bufio.NewScanner(cpuinfo)
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

func memTotalKB(meminfo string) (int64, bool) {
	for line := range strings.Lines(meminfo) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				n, err := strconv.ParseInt(fields[0], 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}
