package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
// benchmarks.md and benchmarks-scale.svg are rendered from it.
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
	// Phases are the plan's steps, each with its estimate and its time.
	Phases []Phase `json:"phases,omitempty"`

	Converge  []ConvergeSample  `json:"converge"`
	ColdStart []ColdStartSample `json:"coldStart"`
	Backlog   []BacklogSample   `json:"backlog,omitempty"`
	Failover  []FailoverSample  `json:"failover,omitempty"`
}

// Config is the run's parameters.
type Config struct {
	Sizes   []int    `json:"sizes"`
	Regimes []Regime `json:"regimes"`
	// Cells are the sizes and regimes of the per-size measurements, and
	// IdleCells those of them that measured idle.
	Cells                  []Cell  `json:"cells"`
	IdleCells              []Cell  `json:"idleCells,omitempty"`
	NamespacesMax          int     `json:"namespacesMax"`
	Rounds                 int     `json:"rounds"`
	IdleSeconds            float64 `json:"idleSeconds"`
	ColdStartWindowSeconds float64 `json:"coldStartWindowSeconds"`
	Workers                int     `json:"workers"`
	// FakeNodes is how many kwok nodes ran, with kube-controller-manager
	// and the scheduler; 0: the API server ran alone.
	FakeNodes int `json:"fakeNodes,omitempty"`
	// DisabledControllers are kube-controller-manager's controllers that
	// did not run.
	DisabledControllers []string `json:"disabledControllers,omitempty"`
	// ReadyzEveryInformer: every contender's /readyz waits for each
	// informer its controllers read. Before, the twin's waited only for
	// those its Manager held when asked.
	ReadyzEveryInformer bool `json:"readyzEveryInformer,omitempty"`

	Unrelated               int   `json:"unrelated,omitempty"`
	UnrelatedNamespaces     int   `json:"unrelatedNamespaces,omitempty"`
	UnrelatedConfigMapBytes int   `json:"unrelatedConfigMapBytes,omitempty"`
	UnrelatedCell           *Cell `json:"unrelatedCell,omitempty"`
	// UnrelatedKubectlApply: the unrelated ConfigMaps were made with
	// kubectl apply, so each carried its last-applied annotation. Before,
	// the bench created them with its own client, without it.
	UnrelatedKubectlApply bool `json:"unrelatedKubectlApply,omitempty"`

	BacklogWebApps      int     `json:"backlogWebApps,omitempty"`
	BacklogCells        []Cell  `json:"backlogCells,omitempty"`
	Edits               int     `json:"edits,omitempty"`
	EditIntervalSeconds float64 `json:"editIntervalSeconds,omitempty"`

	LeaseDuration      string  `json:"leaseDuration"`
	RenewDeadline      string  `json:"renewDeadline"`
	RetryPeriod        string  `json:"retryPeriod"`
	FailoverWebApps    int     `json:"failoverWebApps,omitempty"`
	FailoverNamespaces int     `json:"failoverNamespaces,omitempty"`
	FailoverRegime     *Regime `json:"failoverRegime,omitempty"`

	// One size and one regime, as runs wrote them before -n took a list;
	// read by migrate.
	WebApps    int     `json:"webApps,omitempty"`
	Namespaces int     `json:"namespaces,omitempty"`
	QPS        float64 `json:"qps,omitempty"`
	Burst      int     `json:"burst,omitempty"`
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
	Cell
	// Unrelated is how many unrelated objects of each kind were present:
	// 0 in the per-size measurements.
	Unrelated int `json:"unrelated,omitempty"`
	// ReadySeconds runs from the process's start to /readyz answering 200,
	// on a cluster without WebApps.
	ReadySeconds float64 `json:"readySeconds"`
	// CreateSeconds is how long the bench took to create the N WebApps;
	// ConvergeSeconds runs from the last create to the last WebApp
	// applied (the report charges every contender the creates as well).
	CreateSeconds   float64 `json:"createSeconds"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// ReadyAllSeconds runs from the last create to the last WebApp Ready,
	// and ReadyLag is the operator's own share of that wait: for each
	// WebApp, from its Deployment reporting every replica ready to its
	// status saying Ready. Only where the cluster's controllers ran, for
	// an operator.
	ReadyAllSeconds float64    `json:"readyAllSeconds,omitempty"`
	ReadyLag        *Quantiles `json:"readyLag,omitempty"`
	// NotReady is how many WebApps were not Ready when the wait for Ready
	// gave up (readyTimeout); the Ready figures are then not measured.
	NotReady int `json:"notReady,omitempty"`
	// Requests are the contender's API requests by HTTP method from just
	// before the first create until its counters settled after convergence.
	Requests map[string]float64 `json:"requests"`
	// EventWrites are the API server's writes to events over the same span.
	EventWrites float64 `json:"eventWrites"`
	// CPUSeconds is the process's user + system time from its start to the
	// end of converge.
	CPUSeconds float64 `json:"cpuSeconds"`
	// ConvergedPeakRSSBytes is VmHWM when the counters settled;
	// PeakRSSBytes just before the process was stopped (after idle).
	ConvergedPeakRSSBytes int64 `json:"convergedPeakRSSBytes"`
	PeakRSSBytes          int64 `json:"peakRSSBytes"`
	// ConvergedLiveHeapBytes is the heap the process's last garbage
	// collection before the counters settled found live (gctrace); 0 when
	// not measured.
	ConvergedLiveHeapBytes int64 `json:"convergedLiveHeapBytes,omitempty"`
	// APIServerCPUSeconds and EtcdCPUSeconds are the CPU time (utime +
	// stime) kube-apiserver and etcd used from just before the first
	// create to the last WebApp applied; nil when not measured.
	APIServerCPUSeconds *float64 `json:"apiServerCPUSeconds,omitempty"`
	EtcdCPUSeconds      *float64 `json:"etcdCPUSeconds,omitempty"`
	// Idle figures are nil for the floor, which has no loop to idle in.
	IdleRequests   map[string]float64 `json:"idleRequests,omitempty"`
	IdleWrites     *float64           `json:"idleWrites,omitempty"`
	IdleCPUSeconds *float64           `json:"idleCPUSeconds,omitempty"`
}

// applied is the time from the first create to the last WebApp applied:
// every contender is charged the creates, the floor (which starts once
// they are done) as much as the operators (which reconcile during them).
func (s ConvergeSample) applied() float64 { return s.CreateSeconds + s.ConvergeSeconds }

// readyAll is the time from the first create to the last WebApp Ready; 0
// where it was not measured.
func (s ConvergeSample) readyAll() (float64, bool) {
	return s.CreateSeconds + s.ReadyAllSeconds, s.ReadyAllSeconds > 0
}

// serverCPU is the API server's and etcd's CPU time over the converge,
// where it was measured.
func (s ConvergeSample) serverCPU() (float64, bool) {
	if s.APIServerCPUSeconds == nil || s.EtcdCPUSeconds == nil {
		return 0, false
	}
	return *s.APIServerCPUSeconds + *s.EtcdCPUSeconds, true
}

// ColdStartSample is an operator restarted on the N WebApps it had just
// converged.
type ColdStartSample struct {
	Contender string `json:"contender"`
	Round     int    `json:"round"`
	Cell
	// ReadySeconds runs from the process's start to /readyz.
	ReadySeconds float64 `json:"readySeconds"`
	// Writes (POST+PUT+PATCH+DELETE) from the start to /readyz, and in the
	// WindowSeconds after it.
	WritesBeforeReady float64 `json:"writesBeforeReady"`
	WritesAfterReady  float64 `json:"writesAfterReady"`
	WindowSeconds     float64 `json:"windowSeconds"`
}

// BacklogSample is one operator started on N WebApps created while it was
// stopped, with user edits made once it was ready.
type BacklogSample struct {
	Contender string `json:"contender"`
	Round     int    `json:"round"`
	Cell
	ReadySeconds float64 `json:"readySeconds"`
	// FirstWriteSeconds runs from the process's start to its first write
	// the bench saw.
	FirstWriteSeconds float64 `json:"firstWriteSeconds"`
	// EditSeconds runs, per edit, from the edit's response to the bench
	// seeing the WebApp's Deployment with the new spec.replicas.
	EditSeconds []float64 `json:"editSeconds"`
	// DrainSeconds runs from /readyz to every WebApp converged, edits
	// included.
	DrainSeconds float64 `json:"drainSeconds"`
	// Requests and EventWrites are since the process started.
	Requests     map[string]float64 `json:"requests"`
	EventWrites  float64            `json:"eventWrites"`
	CPUSeconds   float64            `json:"cpuSeconds"`
	PeakRSSBytes int64              `json:"peakRSSBytes"`
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

// percentile of xs by nearest rank: the smallest value with at least p% of
// xs at or below it, so always one of xs; NaN when there are none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// maxRatio is the largest quotient the report prints: beyond it the
// denominator is near 0 beside the numerator, and its noise (a slope of
// 0.0 KiB give or take 0.3), not a cost, would set the figure.
const maxRatio = 20

// ratio is a/b, or why the report shows none: "—" when either is missing
// or both are 0, "n/a" and the reason when b, the figure of den, is
// negative or near 0 beside a.
func ratio(a, b float64, den string) (float64, string) {
	switch {
	case math.IsNaN(a) || math.IsNaN(b) || (a == 0 && b == 0):
		return math.NaN(), "—"
	case b < 0:
		return math.NaN(), "n/a: " + den + " < 0"
	case b == 0 || math.Abs(a) > maxRatio*b:
		return math.NaN(), "n/a: " + den + " ≈ 0"
	}
	return a / b, ""
}

// sample is one figure of a contender and the round it was measured in;
// round 0 is a figure pooled over rounds (a percentile of every edit).
type sample struct {
	round int
	v     float64
}

// figures are the values of ss.
func figures(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = s.v
	}
	return out
}

// pairedRatios are of/to round by round: the two contenders ran in turn
// within each round, on the same cluster, so the round's own ratio takes
// out what drifted between rounds, which a ratio of medians keeps. why,
// when not empty, is what the report shows instead: "n/a: unpaired" when
// the two do not have the same rounds, or ratio's reason for a round
// (n/a before "—").
func pairedRatios(of, to []sample, den string) (qs []float64, why string) {
	if len(of) == 0 || len(to) == 0 {
		return nil, "—"
	}
	pairs, ok := pairByRound(of, to)
	if !ok {
		return nil, "n/a: unpaired"
	}
	for _, pair := range pairs {
		q, reason := ratio(pair[0], pair[1], den)
		switch {
		case strings.HasPrefix(reason, "n/a"):
			return nil, reason
		case reason != "":
			why = reason
		}
		qs = append(qs, q)
	}
	if why != "" {
		return nil, why
	}
	return qs, ""
}

// pairByRound pairs a's and b's samples of the same round; false unless
// both have one sample in each of the same rounds.
func pairByRound(a, b []sample) ([][2]float64, bool) {
	byRound := map[int]float64{}
	for _, s := range b {
		if _, dup := byRound[s.round]; dup {
			return nil, false
		}
		byRound[s.round] = s.v
	}
	if len(a) != len(byRound) {
		return nil, false
	}
	var out [][2]float64
	seen := map[int]bool{}
	for _, s := range a {
		v, ok := byRound[s.round]
		if !ok || seen[s.round] {
			return nil, false
		}
		seen[s.round] = true
		out = append(out, [2]float64{s.v, v})
	}
	return out, true
}

// pairedRatio formats pairedRatios: the median of the per-round ratios,
// with their min–max where they differ.
func pairedRatio(of, to []sample, den string) string {
	qs, why := pairedRatios(of, to, den)
	if why != "" {
		return why
	}
	return withSpread(qs, unitRatio)
}

// Units of format.
const (
	unitSeconds   = "s"
	unitCount     = "count"
	unitMiB       = "MiB"
	unitPerApp    = "perApp"    // a count divided by N
	unitCPUPerApp = "cpuPerApp" // seconds divided by N, shown in ms
	unitDeltaS    = "+s"        // a signed difference of seconds
	unitDeltaMiB  = "+MiB"      // a signed difference of MiB
	unitKiB       = "KiB"       // bytes, shown in KiB
	unitRatio     = "ratio"     // a quotient, two decimals
	unitTimes     = "×"         // a quotient against a goal, as 1.20×
)

func format(v float64, unit string) string {
	if math.IsNaN(v) {
		return "—"
	}
	switch unit {
	case unitCount:
		if v == math.Trunc(v) {
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
		return strconv.FormatFloat(v, 'f', 1, 64)
	case unitPerApp:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case unitCPUPerApp:
		return strconv.FormatFloat(v*1000, 'f', 1, 64) + " ms"
	case unitMiB:
		return strconv.FormatFloat(v, 'f', 1, 64) + " MiB"
	case unitSeconds:
		return formatSeconds(v)
	case unitDeltaS:
		return sign(v, formatSeconds(math.Abs(v)))
	case unitDeltaMiB:
		return sign(v, strconv.FormatFloat(math.Abs(v), 'f', 1, 64)+" MiB")
	case unitKiB:
		return strconv.FormatFloat(v/1024, 'f', 1, 64) + " KiB"
	case unitRatio:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case unitTimes:
		return strconv.FormatFloat(v, 'f', 2, 64) + "×"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// withSpread formats the median of vs, and their min–max when there are
// several and they differ.
func withSpread(vs []float64, unit string) string {
	m := format(median(vs), unit)
	if len(vs) < 2 {
		return m
	}
	lo, hi := format(slices.Min(vs), unit), format(slices.Max(vs), unit)
	if lo == hi {
		return m
	}
	return m + " (" + lo + "–" + hi + ")"
}

// sign puts v's sign before abs, v's magnitude as printed; none when that
// reads as zero.
func sign(v float64, abs string) string {
	switch {
	case strings.Trim(abs, "0. msMiB") == "":
		return abs
	case v < 0:
		return "−" + abs
	}
	return "+" + abs
}

func formatSeconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v < 1:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + " ms"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " s"
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// columns are the contenders in table order, with their titles.
var columns = []struct{ name, contender string }{
	{"handroll", contenderHandroll},
	{"twin", contenderTwin},
	{"twin-tuned (`--tuned`)", contenderTwinTuned},
	{"floor", contenderFloor},
}

// ratios are the ratio columns of the per-size and backlog tables.
var ratios = []struct{ name, of, to string }{
	{"handroll/twin", contenderHandroll, contenderTwin},
	{"handroll/twin-tuned", contenderHandroll, contenderTwinTuned},
	{"handroll/floor", contenderHandroll, contenderFloor},
}

// row is one line of a contenders × measure table: values returns the
// samples of one contender, whose median the cell shows (none: "—", or
// none when it is set); na, when it has the contender, says why the
// measure does not apply to it.
type row struct {
	name   string
	unit   string
	na     map[string]string
	none   string
	values func(contender string) []sample
}

const (
	floorNoLoop    = "n/a: writes once and has no loop"
	floorNoRestart = "n/a: no informers, rewrites every WebApp at each start"
)

var (
	floorNA      = map[string]string{contenderFloor: floorNoLoop}
	floorNoReady = map[string]string{contenderFloor: "n/a: writes one status and watches nothing"}
)

// table writes rows as a Markdown table with the contenders that the
// results hold, then the ratio columns whose contenders ran, less those to
// the contenders in noRatio.
func (r *Results) table(p func(string, ...any), rows []row, withRatios bool, noRatio ...string) {
	ran := func(c string) bool { return slices.Contains(r.Contenders, c) }
	var rs []struct{ name, of, to string }
	if withRatios {
		for _, x := range ratios {
			if ran(x.of) && ran(x.to) && !slices.Contains(noRatio, x.to) {
				rs = append(rs, x)
			}
		}
	}
	p("| measure |")
	for _, c := range columns {
		p(" %s |", c.name)
	}
	for _, x := range rs {
		p(" %s |", x.name)
	}
	p("\n|---|%s%s\n", strings.Repeat("---:|", len(columns)), strings.Repeat("---:|", len(rs)))
	for _, m := range rows {
		samples := map[string][]sample{}
		p("| %s |", m.name)
		for _, c := range columns {
			switch {
			case !ran(c.contender):
				p(" not run |")
			case m.na[c.contender] != "":
				p(" %s |", m.na[c.contender])
			default:
				samples[c.contender] = m.values(c.contender)
				p(" %s |", m.cell(samples[c.contender]))
			}
		}
		for _, x := range rs {
			p(" %s |", pairedRatio(samples[x.of], samples[x.to], x.to))
		}
		p("\n")
	}
	p("\n")
}

// cell is the median of vs with their spread, or m.none for no samples.
func (m row) cell(vs []sample) string {
	if len(vs) == 0 && m.none != "" {
		return m.none
	}
	return withSpread(figures(vs), m.unit)
}

// largestTwo are the two largest sizes of regime g; ok is false with fewer
// than two.
func (r *Results) largestTwo(g Regime) (n1, n2 int, ok bool) {
	var sizes []int
	for _, c := range r.cells() {
		if c.Regime == g {
			sizes = append(sizes, c.N)
		}
	}
	if len(sizes) < 2 {
		return 0, 0, false
	}
	slices.Sort(sizes)
	return sizes[len(sizes)-2], sizes[len(sizes)-1], true
}

// acrossSizes pairs, round by round, a contender's figure f at n1 with
// its figure at n2, and makes one sample of each pair with combine.
func (r *Results) acrossSizes(g Regime, n1, n2 int, f func(ConvergeSample) (float64, bool), combine func(at1, at2 float64) float64) func(string) []sample {
	return func(contender string) []sample {
		var out []sample
		for _, b := range r.converges(Cell{N: n2, Regime: g}, contender, false) {
			for _, a := range r.converges(Cell{N: n1, Regime: g}, contender, false) {
				va, okA := f(a)
				vb, okB := f(b)
				if a.Round == b.Round && okA && okB {
					if v := combine(va, vb); !math.IsNaN(v) {
						out = append(out, sample{b.Round, v})
					}
				}
			}
		}
		return out
	}
}

// The figures the slopes and the projection follow.
var (
	convergedPeakRSS  = always(func(s ConvergeSample) float64 { return float64(s.ConvergedPeakRSSBytes) })
	convergedLiveHeap = func(s ConvergeSample) (float64, bool) {
		return float64(s.ConvergedLiveHeapBytes), s.ConvergedLiveHeapBytes > 0
	}
	convergeCPU = always(func(s ConvergeSample) float64 { return s.CPUSeconds })
)

// slopeRows are the marginal costs per WebApp between the two largest
// sizes of regime g, paired by round; none with fewer than two sizes.
func (r *Results) slopeRows(g Regime) (n1, n2 int, rows []row) {
	n1, n2, ok := r.largestTwo(g)
	if !ok {
		return 0, 0, nil
	}
	slope := func(f func(ConvergeSample) (float64, bool)) func(string) []sample {
		return r.acrossSizes(g, n1, n2, f, func(at1, at2 float64) float64 { return (at2 - at1) / float64(n2-n1) })
	}
	rows = []row{
		{name: "peak RSS (VmHWM) once converged, per WebApp more", unit: unitKiB, values: slope(convergedPeakRSS)},
		{name: "live heap once converged (gctrace), per WebApp more", unit: unitKiB, values: slope(convergedLiveHeap)},
		{name: "CPU (process start → converged), per WebApp more", unit: unitCPUPerApp, values: slope(convergeCPU)},
	}
	return n1, n2, rows
}

// The projection: each contender's cost at projectedN WebApps, along the
// line through its figures at the two largest sizes measured.
const (
	projectedN = 100000
	// replicaMemoryLimitBytes is the chart's default limits.memory
	// (charts/handroll/values.yaml): where one replica's peak RSS would
	// reach it, the WebApps need shards or the replica a higher limit.
	replicaMemoryLimitBytes = 256 << 20
)

// projectionRows are each contender's figures at projectedN, extrapolated
// round by round, and the N at which its peak RSS would reach
// replicaMemoryLimitBytes; none with fewer than two sizes.
func (r *Results) projectionRows(g Regime) (n1, n2 int, rows []row) {
	n1, n2, ok := r.largestTwo(g)
	if !ok {
		return 0, 0, nil
	}
	// at is f's line at projectedN, divided by unit (1 << 20: MiB).
	at := func(f func(ConvergeSample) (float64, bool), unit float64) func(string) []sample {
		return r.acrossSizes(g, n1, n2, f, func(at1, at2 float64) float64 {
			return (at2 + (at2-at1)/float64(n2-n1)*float64(projectedN-n2)) / unit
		})
	}
	applied := always(ConvergeSample.applied)
	limitAt := r.acrossSizes(g, n1, n2, convergedPeakRSS, func(at1, at2 float64) float64 {
		if at2 <= at1 {
			return math.NaN() // flat: no N reaches the limit
		}
		n := float64(n2) + (replicaMemoryLimitBytes-at2)/((at2-at1)/float64(n2-n1))
		return math.Round(n/100) * 100 // a projection: no finer than this
	})
	rows = []row{
		{name: fmt.Sprintf("peak RSS (VmHWM) once converged, at N = %d", projectedN), unit: unitMiB, values: at(convergedPeakRSS, 1<<20)},
		{name: fmt.Sprintf("live heap once converged (gctrace), at N = %d", projectedN), unit: unitMiB, values: at(convergedLiveHeap, 1<<20)},
		{name: fmt.Sprintf("CPU (process start → converged), at N = %d", projectedN), unit: unitSeconds, values: at(convergeCPU, 1)},
		{name: fmt.Sprintf("applied: first create → every WebApp's children and status written, at N = %d", projectedN), unit: unitSeconds, values: at(applied, 1)},
		{name: fmt.Sprintf("its client's rate limit alone, at N = %d: N × requests per WebApp at N = %d ÷ %g QPS", projectedN, n2, g.QPS), unit: unitSeconds,
			values: convergeValues(r, Cell{N: n2, Regime: g}, false, always(func(s ConvergeSample) float64 {
				return total(s.Requests) / float64(n2) * projectedN / g.QPS
			}))},
		{name: fmt.Sprintf("N at which peak RSS reaches %d MiB, the chart's memory limit", replicaMemoryLimitBytes>>20), unit: unitCount,
			none: "never: flat", na: map[string]string{contenderFloor: "n/a: caches nothing"}, values: limitAt},
	}
	return n1, n2, rows
}

// converges returns the per-size converge samples of contender in cell,
// or with unrelated objects present those of the unrelated scenario.
func (r *Results) converges(cell Cell, contender string, unrelated bool) []ConvergeSample {
	var out []ConvergeSample
	for _, s := range r.Converge {
		if s.Contender == contender && s.Cell == cell && (s.Unrelated > 0) == unrelated {
			out = append(out, s)
		}
	}
	return out
}

func convergeValues(r *Results, cell Cell, unrelated bool, f func(ConvergeSample) (float64, bool)) func(string) []sample {
	return func(contender string) []sample {
		var out []sample
		for _, s := range r.converges(cell, contender, unrelated) {
			if v, ok := f(s); ok {
				out = append(out, sample{s.Round, v})
			}
		}
		return out
	}
}

func coldValues(r *Results, cell Cell, f func(ColdStartSample) float64) func(string) []sample {
	return func(contender string) []sample {
		var out []sample
		for _, s := range r.ColdStart {
			if s.Contender == contender && s.Cell == cell {
				out = append(out, sample{s.Round, f(s)})
			}
		}
		return out
	}
}

// perApp divides a count of s by its N.
func perApp(f func(ConvergeSample) float64) func(ConvergeSample) (float64, bool) {
	return func(s ConvergeSample) (float64, bool) { return f(s) / float64(s.N), true }
}

// perAppIf divides a figure of s, where it was measured, by its N.
func perAppIf(f func(ConvergeSample) (float64, bool)) func(ConvergeSample) (float64, bool) {
	return func(s ConvergeSample) (float64, bool) {
		v, ok := f(s)
		return v / float64(s.N), ok
	}
}

func always(f func(ConvergeSample) float64) func(ConvergeSample) (float64, bool) {
	return func(s ConvergeSample) (float64, bool) { return f(s), true }
}

// cellRows are the rows of one per-size table.
func (r *Results) cellRows(cell Cell) []row {
	cv := func(f func(ConvergeSample) (float64, bool)) func(string) []sample {
		return convergeValues(r, cell, false, f)
	}
	noRestart := map[string]string{contenderFloor: floorNoRestart}
	window := time.Duration(r.Config.ColdStartWindowSeconds * float64(time.Second))
	idle := time.Duration(r.Config.IdleSeconds * float64(time.Second))
	rows := []row{
		{name: "applied: first create → every WebApp's children and status written", unit: unitSeconds,
			values: cv(always(ConvergeSample.applied))},
		{name: "requests per WebApp: total", unit: unitPerApp,
			values: cv(perApp(func(s ConvergeSample) float64 { return total(s.Requests) }))},
		{name: "requests per WebApp: non-event (total − events)", unit: unitPerApp,
			values: cv(perApp(func(s ConvergeSample) float64 { return total(s.Requests) - s.EventWrites }))},
		{name: "requests per WebApp: non-event writes", unit: unitPerApp,
			values: cv(perApp(func(s ConvergeSample) float64 { return writes(s.Requests) - s.EventWrites }))},
		{name: "requests per WebApp: events", unit: unitPerApp,
			values: cv(perApp(func(s ConvergeSample) float64 { return s.EventWrites }))},
		{name: "requests per WebApp: GET (GET, LIST, WATCH)", unit: unitPerApp,
			values: cv(perApp(func(s ConvergeSample) float64 { return s.Requests["GET"] }))},
		{name: "CPU per WebApp (process start → converged, ÷ N)", unit: unitCPUPerApp,
			values: cv(perApp(func(s ConvergeSample) float64 { return s.CPUSeconds }))},
		{name: "API server + etcd CPU per WebApp (first create → applied, ÷ N)", unit: unitCPUPerApp, none: "not measured",
			values: cv(perAppIf(ConvergeSample.serverCPU))},
		{name: "peak RSS (VmHWM) once converged", unit: unitMiB,
			values: cv(always(func(s ConvergeSample) float64 { return mib(s.ConvergedPeakRSSBytes) }))},
		{name: "start-up, no WebApps: process start → /readyz", unit: unitSeconds,
			values: cv(always(func(s ConvergeSample) float64 { return s.ReadySeconds }))},
	}
	// Ready where the cluster's controllers ran.
	if slices.ContainsFunc(r.Converge, func(s ConvergeSample) bool { return s.Cell == cell && s.ReadyLag != nil }) {
		rows = slices.Insert(rows, 1, readyRows(cv)...)
	}
	// The live heap where it was measured (samples of older runs have none),
	// beside the peak RSS.
	if slices.ContainsFunc(r.Converge, func(s ConvergeSample) bool { return s.Cell == cell && s.ConvergedLiveHeapBytes > 0 }) {
		at := slices.IndexFunc(rows, func(w row) bool { return strings.HasPrefix(w.name, "peak RSS") }) + 1
		rows = slices.Insert(rows, at, liveHeapRows(cv)...)
	}
	// Cold start and idle only where they were measured.
	if slices.ContainsFunc(r.ColdStart, func(s ColdStartSample) bool { return s.Cell == cell }) {
		rows = append(rows, []row{
			{name: "cold start, N converged WebApps: process start → /readyz", unit: unitSeconds, na: noRestart,
				values: coldValues(r, cell, func(s ColdStartSample) float64 { return s.ReadySeconds })},
			{name: "cold start: writes, process start → /readyz", unit: unitCount, na: noRestart,
				values: coldValues(r, cell, func(s ColdStartSample) float64 { return s.WritesBeforeReady })},
			{name: fmt.Sprintf("cold start: writes in the %s after /readyz", window), unit: unitCount, na: noRestart,
				values: coldValues(r, cell, func(s ColdStartSample) float64 { return s.WritesAfterReady })},
		}...)
	}
	if !slices.ContainsFunc(r.Converge, func(s ConvergeSample) bool { return s.Cell == cell && s.Unrelated == 0 && s.IdleWrites != nil }) {
		return rows
	}
	return append(rows, idleRows(cv, idle)...)
}

// idleRows are the writes and CPU of an operator idle for idle.
func idleRows(cv cellValues, idle time.Duration) []row {
	given := func(f func(ConvergeSample) *float64) func(ConvergeSample) (float64, bool) {
		return func(s ConvergeSample) (float64, bool) {
			if v := f(s); v != nil {
				return *v, true
			}
			return 0, false
		}
	}
	return []row{
		{name: fmt.Sprintf("idle writes (%s, nothing changing)", idle), unit: unitCount, na: floorNA,
			values: cv(given(func(s ConvergeSample) *float64 { return s.IdleWrites }))},
		{name: "idle CPU time", unit: unitSeconds, na: floorNA,
			values: cv(given(func(s ConvergeSample) *float64 { return s.IdleCPUSeconds }))},
	}
}

// cellValues gives a row the samples of one cell's figure.
type cellValues = func(f func(ConvergeSample) (float64, bool)) func(string) []sample

// readyRows are the time to Ready and the operator's share of it.
func readyRows(cv cellValues) []row {
	lag := func(q func(*Quantiles) float64) func(ConvergeSample) (float64, bool) {
		return func(s ConvergeSample) (float64, bool) {
			if s.ReadyLag == nil {
				return 0, false
			}
			return q(s.ReadyLag), true
		}
	}
	return []row{
		{name: "Ready: first create → every WebApp's status Ready, every replica ready", unit: unitSeconds, na: floorNoReady,
			values: cv(ConvergeSample.readyAll)},
		{name: "the operator's share of Ready: Deployment all ready → status Ready, p50", unit: unitSeconds, na: floorNoReady,
			values: cv(lag(func(q *Quantiles) float64 { return q.P50 }))},
		{name: "the operator's share of Ready: p99", unit: unitSeconds, na: floorNoReady,
			values: cv(lag(func(q *Quantiles) float64 { return q.P99 }))},
	}
}

// liveHeapRows are the live heap as gctrace gives it, in whole MB, and
// per WebApp in KiB.
func liveHeapRows(cv cellValues) []row {
	live := func(s ConvergeSample) (float64, bool) {
		return float64(s.ConvergedLiveHeapBytes), s.ConvergedLiveHeapBytes > 0
	}
	return []row{
		{name: "live heap once converged (what the last GC found live: gctrace, whole MB)", unit: unitMiB,
			values: cv(func(s ConvergeSample) (float64, bool) { v, ok := live(s); return v / (1 << 20), ok })},
		{name: "live heap per WebApp (÷ N)", unit: unitKiB, values: cv(perAppIf(live))},
	}
}

// cells are the per-size cells that have samples, in the plan's order.
func (r *Results) cells() []Cell {
	var out []Cell
	add := func(c Cell) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, c := range r.Config.Cells {
		if slices.ContainsFunc(r.Converge, func(s ConvergeSample) bool { return s.Cell == c && s.Unrelated == 0 }) {
			add(c)
		}
	}
	for _, s := range r.Converge {
		if s.Unrelated == 0 {
			add(s.Cell)
		}
	}
	return out
}

// regimesOf are the distinct regimes of cells, in order.
func regimesOf(cells []Cell) []Regime {
	var out []Regime
	for _, c := range cells {
		if !slices.Contains(out, c.Regime) {
			out = append(out, c.Regime)
		}
	}
	return out
}

// plotRegime is the regime the plot shows: of those with per-size samples,
// the one with the highest QPS.
func (r *Results) plotRegime() (Regime, bool) {
	regimes := regimesOf(r.cells())
	if len(regimes) == 0 {
		return Regime{}, false
	}
	best := regimes[0]
	for _, g := range regimes[1:] {
		if g.QPS >= best.QPS {
			best = g
		}
	}
	return best, true
}

// ratiosNote says how the ratio columns are made.
var ratiosNote = fmt.Sprintf("Each ratio is paired: the two contenders' figures of the same round divided, then the median of those "+
	"per-round ratios with their min–max (n/a: unpaired where the two do not have the same rounds). A ratio whose "+
	"denominator is negative, or near 0 beside the numerator (the ratio would pass %d), is n/a: the denominator's noise, "+
	"not a cost, would set it.", maxRatio)

// samplesNote says how many samples each figure is.
func (r *Results) samplesNote() string {
	if r.Config.Rounds <= 1 {
		return "each figure is one sample (one round)"
	}
	return fmt.Sprintf("each figure is the median of %d samples, one per round, with their min–max where they differ", r.Config.Rounds)
}

// backlogCells are the cells with live-edit samples, in order.
func (r *Results) backlogCells() []Cell {
	var out []Cell
	for _, s := range r.Backlog {
		if !slices.Contains(out, s.Cell) {
			out = append(out, s.Cell)
		}
	}
	return out
}

// edits pools the edit latencies of contender in cell over its rounds.
func (r *Results) edits(c Cell, contender string) []float64 {
	var out []float64
	for _, s := range r.Backlog {
		if s.Cell == c && s.Contender == contender {
			out = append(out, s.EditSeconds...)
		}
	}
	return out
}

// markdown renders the results.
func (r *Results) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Benchmarks: handroll, its controller-runtime twin, and the floor\n\n")
	p("Written by `hack/bench`; every figure below comes from one run, with the contenders\n")
	p("alternating on the same control plane. Do not edit by hand: run it again.\n\n")
	r.machineSection(p)
	r.goalsAndScale(p)
	r.perSize(p, r.cells())
	r.scenarios(p)
	r.planAndTime(p)
	p("## How each figure is measured\n\n")
	for _, line := range methodology(r) {
		p("- %s\n", line)
	}
	return b.String()
}

// machineSection is the machine, the run and its notes.
func (r *Results) machineSection(p func(string, ...any)) {
	p("## Machine and run\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s × %d |\n", r.Machine.CPU, r.Machine.CPUs)
	p("| memory | %s GiB |\n", r.Machine.MemoryGiB)
	p("| Go | %s |\n", r.Machine.Go)
	p("| OS | %s |\n", r.Machine.OS)
	p("| command | `%s` |\n", r.Command)
	p("| started, took | %s, %s |\n", r.Started, r.Duration)
	p("| sizes (N) | %s WebApps, in at most %d namespaces, every other one with `spec.config` (so a ConfigMap child too) |\n", joinInts(r.Config.Sizes), r.Config.NamespacesMax)
	var regimes []string
	for _, g := range r.Config.Regimes {
		regimes = append(regimes, g.Title())
	}
	p("| client regimes | %s (`--kube-api-qps`, `--kube-api-burst`); %d workers; the same for every contender |\n", strings.Join(regimes, "; "), r.Config.Workers)
	p("| samples | %s; all samples in `benchmarks.json` |\n", r.samplesNote())
	p("| plan | %s |\n", r.planSummary())
	p("\n")
	for _, n := range r.Notes {
		p("- %s\n", n)
	}
	if len(r.Notes) > 0 {
		p("\n")
	}

}

// goalsAndScale is handroll's goals, the plot of cost against N and the cost per WebApp more.
func (r *Results) goalsAndScale(p func(string, ...any)) {
	if goals := r.goals(); len(goals) > 0 {
		p("## Goals\n\n")
		p("handroll's targets, against this run's figures.\n\n")
		p("| goal | handroll | met |\n|---|---:|:---:|\n")
		for _, g := range goals {
			p("| %s | %s | %s |\n", g[0], g[1], g[2])
		}
		p("\n")
	}

	if g, ok := r.plotRegime(); ok {
		if _, ok := r.scaleSVG(); ok {
			p("## How cost grows with N\n\n")
			p("At %s; the per-size tables below hold every figure.\n\n", g.Title())
			p("![%s](%s)\n\n", scaleSVGAlt, scaleSVGName)
		}
		if n1, n2, rows := r.slopeRows(g); len(rows) > 0 {
			p("### Per WebApp more: from N = %d to %d\n\n", n1, n2)
			p("The marginal cost of a WebApp: for each round, (the figure at N = %d − at N = %d) / %d; the median over rounds, with the min–max. "+
				"What the process costs at no WebApps (its binary, informers, servers) drops out. %s\n\n", n2, n1, n2-n1, ratiosNote)
			r.table(p, rows, true)
		}
		r.projection(p, g)
	}

}

// projection is the table of projectionRows, where the largest size run
// is below projectedN.
func (r *Results) projection(p func(string, ...any), g Regime) {
	n1, n2, rows := r.projectionRows(g)
	if len(rows) == 0 || n2 >= projectedN {
		return
	}
	p("### Projected to N = %d\n\n", projectedN)
	p("Beyond the largest size run: for each round, the line through a contender's figures at N = %d and %d, read at N = %d; the median over rounds, with the min–max. "+
		"A projection, not a measurement: it assumes each WebApp more costs what one did between those sizes, and that the API server and etcd keep up. %s\n\n",
		n1, n2, projectedN, ratiosNote)
	r.table(p, rows, true)
	p("Where one replica stops being enough: memory first, where its peak RSS reaches the chart's limit (`resources.limits.memory`, %d MiB) at the N of the last row. "+
		"Past it, raise the limit, or split the WebApps over replicas with `--shards` ([sharding.md](sharding.md)): with the API server's ShardedListAndWatch feature gate each replica "+
		"lists, watches and caches only its ranges' WebApps and children, so its memory and CPU fall with the number of replicas (without the gate, "+
		"each still receives every object and filters on the client: the work is split, the watch traffic is not). The client's rate limit bounds time: converging N new WebApps at once, after a restore, "+
		"takes at least the figure in the row above it, whatever the CPU, unless `--kube-api-qps` is raised or the WebApps are sharded.\n\n", replicaMemoryLimitBytes>>20)
}

// perSize is a table per size, per regime.
func (r *Results) perSize(p func(string, ...any), cells []Cell) {
	for _, g := range regimesOf(cells) {
		p("## Per size: %s\n\n", g.Title())
		p("%s. %s\n\n", capitalize(r.samplesNote()), ratiosNote)
		for _, c := range cells {
			if c.Regime != g {
				continue
			}
			p("### N = %d (%s)\n\n", c.N, g.Title())
			r.table(p, r.cellRows(c), true)
		}
	}

}

// unrelatedApplied says how the unrelated ConfigMaps were made, when by
// kubectl apply.
func (r *Results) unrelatedApplied() string {
	if !r.Config.UnrelatedKubectlApply {
		return ""
	}
	return " made with `kubectl apply` (so each also holds its data again, in its last-applied annotation)"
}

// scenarios is the unrelated objects, the live edits and the failovers.
func (r *Results) scenarios(p func(string, ...any)) {
	if c := r.Config.UnrelatedCell; c != nil {
		p("## Unrelated objects\n\n")
		p("%d ConfigMaps of %d KiB%s, %d Deployments and %d Services in %d namespaces without WebApps; %s. "+
			"Without them: the per-size measurement of the same size and regime.\n\n",
			r.Config.Unrelated, r.Config.UnrelatedConfigMapBytes>>10, r.unrelatedApplied(), r.Config.Unrelated, r.Config.Unrelated, r.Config.UnrelatedNamespaces, c)
		r.table(p, r.unrelatedRows(*c), false)
	}

	for _, c := range r.backlogCells() {
		p("## Live edits while a backlog drains: %s\n\n", c)
		p("%d WebApps created while the contender was stopped; once it is ready, %d edits of `spec.replicas`, each to a different WebApp, %s apart. "+
			"Edit latencies are pooled over rounds (%d per contender); percentiles by nearest rank.\n\n",
			c.N, r.Config.Edits, formatSeconds(r.Config.EditIntervalSeconds), r.Config.Edits*max(r.Config.Rounds, 1))
		r.table(p, r.backlogRows(c), true, contenderFloor)
	}

	if len(r.Failover) > 0 {
		r.failoverTable(p)
	}

}

// planAndTime is each phase's estimate beside what it took.
func (r *Results) planAndTime(p func(string, ...any)) {
	if len(r.Phases) > 0 {
		p("## Plan and time\n\n")
		p("Each phase's estimate (the cost model in `hack/bench/plan.go`, fitted to a quiet machine, printed when the run starts) and what it took.\n\n")
		p("| phase | estimated | took |\n|---|---:|---:|\n")
		var est, took float64
		for _, ph := range r.Phases {
			est += ph.EstimatedSeconds
			took += ph.Seconds
			p("| %s | %s | %s |\n", ph.Name, elapsed(seconds(ph.EstimatedSeconds)), elapsed(seconds(ph.Seconds)))
		}
		p("| all | %s | %s |\n\n", elapsed(seconds(est)), elapsed(seconds(took)))
	}

}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}

// planSummary says which measurement ran at which sizes and regimes.
func (r *Results) planSummary() string {
	var parts []string
	for _, g := range regimesOf(r.Config.Cells) {
		var sizes []int
		for _, c := range r.Config.Cells {
			if c.Regime == g {
				sizes = append(sizes, c.N)
			}
		}
		parts = append(parts, fmt.Sprintf("%s at N = %s", g.Title(), joinInts(sizes)))
	}
	out := "per-size measurements: " + strings.Join(parts, "; ")
	if len(r.Config.IdleCells) > 0 {
		var idle []string
		for _, c := range r.Config.IdleCells {
			idle = append(idle, fmt.Sprintf("N = %d (%s)", c.N, c.Title()))
		}
		out += "; idle at " + strings.Join(idle, " and ")
	}
	if c := r.Config.UnrelatedCell; c != nil {
		out += fmt.Sprintf("; unrelated objects: %s", c)
	}
	for _, c := range r.Config.BacklogCells {
		out += fmt.Sprintf("; live edits: %s", c)
	}
	if r.Config.FailoverRegime != nil {
		out += fmt.Sprintf("; failover: %s", Cell{N: r.Config.FailoverWebApps, Regime: *r.Config.FailoverRegime})
	}
	return out
}

func (r *Results) unrelatedRows(c Cell) []row {
	with := func(f func(ConvergeSample) float64) func(string) []sample {
		return convergeValues(r, c, true, always(f))
	}
	without := func(f func(ConvergeSample) float64) func(string) []sample {
		return convergeValues(r, c, false, always(f))
	}
	// The difference of the medians: one figure, of no round.
	growth := func(f func(ConvergeSample) float64) func(string) []sample {
		return func(contender string) []sample {
			d := median(figures(with(f)(contender))) - median(figures(without(f)(contender)))
			if math.IsNaN(d) {
				return nil
			}
			return []sample{{0, d}}
		}
	}
	ready := func(s ConvergeSample) float64 { return s.ReadySeconds }
	rss := func(s ConvergeSample) float64 { return mib(s.ConvergedPeakRSSBytes) }
	conv := ConvergeSample.applied
	return []row{
		{name: "start-up: process start → /readyz, without", unit: unitSeconds, values: without(ready)},
		{name: "start-up: process start → /readyz, with", unit: unitSeconds, values: with(ready)},
		{name: "start-up: growth", unit: unitDeltaS, values: growth(ready)},
		{name: "peak RSS (VmHWM) once converged, without", unit: unitMiB, values: without(rss)},
		{name: "peak RSS (VmHWM) once converged, with", unit: unitMiB, values: with(rss)},
		{name: "peak RSS: growth", unit: unitDeltaMiB, values: growth(rss)},
		{name: "applied, without", unit: unitSeconds, values: without(conv)},
		{name: "applied, with", unit: unitSeconds, values: with(conv)},
	}
}

func (r *Results) backlogRows(c Cell) []row {
	values := func(f func(BacklogSample) float64) func(string) []sample {
		return func(contender string) []sample {
			var out []sample
			for _, s := range r.Backlog {
				if s.Cell == c && s.Contender == contender {
					out = append(out, sample{s.Round, f(s)})
				}
			}
			return out
		}
	}
	// Pooled over rounds: one figure, which pairs with the other's pooled.
	pct := func(p float64) func(string) []sample {
		return func(contender string) []sample {
			v := percentile(r.edits(c, contender), p)
			if math.IsNaN(v) {
				return nil
			}
			return []sample{{0, v}}
		}
	}
	return []row{
		{name: "edit → Deployment with the new `spec.replicas`: p50", unit: unitSeconds, na: floorNA, values: pct(percentileLow)},
		{name: "edit → Deployment with the new `spec.replicas`: p99", unit: unitSeconds, na: floorNA, values: pct(percentileHigh)},
		{name: "edit → Deployment with the new `spec.replicas`: max", unit: unitSeconds, na: floorNA, values: pct(100)},
		{name: "backlog drained: /readyz → all N converged", unit: unitSeconds, na: floorNA, values: values(func(s BacklogSample) float64 { return s.DrainSeconds })},
		{name: "process start → /readyz", unit: unitSeconds, na: floorNA, values: values(func(s BacklogSample) float64 { return s.ReadySeconds })},
		{name: "process start → first write", unit: unitSeconds, na: floorNA, values: values(func(s BacklogSample) float64 { return s.FirstWriteSeconds })},
		{name: "requests per WebApp: total", unit: unitPerApp, na: floorNA, values: values(func(s BacklogSample) float64 { return total(s.Requests) / float64(s.N) })},
		{name: "peak RSS (VmHWM)", unit: unitMiB, na: floorNA, values: values(func(s BacklogSample) float64 { return mib(s.PeakRSSBytes) })},
	}
}

func (r *Results) failoverTable(p func(string, ...any)) {
	variants := r.failoverVariants()
	var rs []struct{ name, of, to string }
	for _, x := range []struct{ name, of, to string }{
		{"handroll/twin", variantHandrollWarm, variantTwin},
		{"handroll/twin-tuned", variantHandrollWarm, variantTwinTuned},
	} {
		if slices.Contains(variants, x.of) && slices.Contains(variants, x.to) {
			rs = append(rs, x)
		}
	}
	p("## Failover\n\n")
	p("Two replicas with leader election; the leader is stopped by the signal shown, one\n")
	p("WebApp's `spec.replicas` is changed at once, and the clock stops at the new leader's\n")
	p("first write for it. The floor has no leader election: n/a.\n\n")
	p("| measure |")
	for _, v := range variants {
		p(" %s |", variantTitle(v))
	}
	for _, x := range rs {
		p(" %s |", x.name)
	}
	p("\n|---|%s%s\n", strings.Repeat("---:|", len(variants)), strings.Repeat("---:|", len(rs)))
	for _, sig := range []string{"SIGKILL", "SIGTERM"} {
		for _, row := range []struct {
			name string
			f    func(FailoverSample) float64
		}{
			{"leader stopped → first write", func(s FailoverSample) float64 { return s.KillToWriteSeconds }},
			{"Lease acquired → first write", func(s FailoverSample) float64 { return s.AcquireToWriteSeconds }},
		} {
			p("| %s: %s |", sig, row.name)
			samples := map[string][]sample{}
			for _, v := range variants {
				for _, s := range r.Failover {
					if s.Variant == v && s.Signal == sig {
						samples[v] = append(samples[v], sample{s.Round, row.f(s)})
					}
				}
				p(" %s |", format(median(figures(samples[v])), unitSeconds))
			}
			for _, x := range rs {
				p(" %s |", pairedRatio(samples[x.of], samples[x.to], x.to))
			}
			p("\n")
		}
	}
	p("\n")
}

func (r *Results) failoverVariants() []string {
	var out []string
	for _, v := range []string{variantHandrollWarm, variantHandrollCold, variantTwin, variantTwinTuned} {
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
		return "twin"
	case variantTwinTuned:
		return "twin-tuned (`--tuned`: EnableWarmup)"
	}
	return v
}

// clusterNote says what ran beside the API server and what converged
// means there.
func clusterNote(fakeNodes int, disabled []string) string {
	applied := "a WebApp is **applied** when `status.observedGeneration` equals `metadata.generation` and its Deployment, " +
		"Service and (with `spec.config`) ConfigMap exist"
	watched := " The bench observes this through informers (watches) on the WebApps and on the children labelled " +
		"`app.kubernetes.io/managed-by=handroll`, not by polling."
	if fakeNodes == 0 {
		return "One local control plane (etcd and kube-apiserver from `test/controlplane`, no controller-manager, so no pods: " +
			applied + "; nothing more can become true)." + watched
	}
	return fmt.Sprintf("One local control plane from `test/controlplane`, as the local cluster runs it: etcd, kube-apiserver, "+
		"kube-controller-manager and kube-scheduler (both with `%s`: at their defaults, QPS 20 and 50, they and not the contenders "+
		"would set the time to Ready) and kwok with %d fake nodes of %d pods, which kwok reports Running and Ready at once; "+
		"they share the 2 cores with the contender, as a cluster's own controllers would%s. Each WebApp has one replica, so a "+
		"ReplicaSet and a pod. Two points per WebApp: "+applied+" (the operator's own work, timed for every contender); "+
		"and it is **Ready** when its status's `Ready` condition is True for its generation, which needs every replica ready "+
		"(kube-controller-manager's and kwok's work first, timed for the operators: the floor writes one status and watches nothing). "+
		"**The operator's share of Ready** is, for each WebApp, the time from the bench seeing its Deployment report every replica "+
		"of its generation ready to the bench seeing its status say Ready: the operator's reaction to the event it waits for, "+
		"not kube-controller-manager's from the pod to the Deployment. The wait for Ready gives up after %s: a sample in which some "+
		"WebApps were not Ready by then (the JSON's `notReady`; on 2 cores a fake node's heartbeat can be late enough for "+
		"kube-controller-manager to mark its pods not ready, and kwok does not mark them ready again) has no Ready figures. **Events** are then counted from the API server's list of "+
		"those regarding a WebApp (the cluster's controllers write their own about Deployments, ReplicaSets and pods; every "+
		"contender's are about WebApps).", strings.Join(clusterControllerArgs, " "), fakeNodes, podsPerFakeNode, withoutControllers(disabled), readyTimeout) + watched
}

// withoutControllers says which of kube-controller-manager's controllers
// did not run, and why.
func withoutControllers(disabled []string) string {
	if len(disabled) == 0 {
		return ""
	}
	return fmt.Sprintf(", but for %s (`--controllers=*,-…`): no contender reads the Endpoints and EndpointSlices they write, "+
		"several per WebApp as its pod starts, on the contenders' cores",
		"`"+strings.Join(disabled, "`, `")+"`")
}

// startUpNote says what /readyz waited for in the run.
func startUpNote(everyInformer bool) string {
	const start = "**Start-up** is process start → `/readyz` answering 200 (polled every 20 ms), each contender's own check: handroll's passes once " +
		"its caches have synced; "
	if everyInformer {
		return start + "the twin's once each informer its controllers read has synced (it asks for each by name, `GetInformer`, before " +
			"its controllers make them)."
	}
	return start + "the twin's waits for the informers the Manager holds when asked, and those of its controllers' watches are " +
		"added only after the Manager has started, so it can pass before they have listed (its start-up can leave their LIST out)."
}

func methodology(r *Results) []string {
	return append(runMethodology(r), scenarioMethodology(r)...)
}

// runMethodology is how the run and the per-size figures are measured.
func runMethodology(r *Results) []string {
	idle := seconds(r.Config.IdleSeconds)
	window := seconds(r.Config.ColdStartWindowSeconds)
	return []string{
		clusterNote(r.Config.FakeNodes, r.Config.DisabledControllers),
		"**Contenders**: handroll; the twin (`hack/compare`, handroll's operator on controller-runtime), its caches configured as the kubebuilder book teaches; " +
			"twin-tuned, the same binary with `--tuned`, which turns on every controller-runtime option matching handroll's design " +
			"(metadata-only ConfigMap watch, `ByObject` label selectors, `DefaultTransform`, `EnableWarmup`, `DisableCompression`; `hack/compare/README.md`); " +
			"both twins make more requests than handroll by their own design, not by controller-runtime's defaults: an event for each child " +
			"they apply (handroll writes one per new WebApp) and a live GET for a child missing from their cache before they create it " +
			"(so that a foreign object of that name is a conflict), which `--tuned` leaves as they are; " +
			"and the floor (`hack/bench/floor`), which lists the WebApps once and server-side-applies each one's children and status, nothing more.",
		"**Compression**: handroll asks the API server for no gzip (`--kube-api-compression=false`, as kube-controller-manager and kube-scheduler do), and so does twin-tuned; " +
			"the twin and the floor take client-go's default. The API server then gzips the twin's watch streams (an informer's watch is a watch-list, gzipped from its start to its end) " +
			"and the floor's one list of the WebApps, and both ends pay for it in CPU on the same 2 cores.",
		"**What the floor does and does not do.** It is charged for what convergence cannot do without: one list of the WebApps, " +
			"each one's children built by handroll's own functions and server-side-applied once, and one status write per WebApp, " +
			"through the same QPS, burst and workers, its clock started at the first create like every contender's. " +
			"It does not watch anything: no informers, so no cache memory, no decoding of the children's events, no drift repaired, " +
			"no Ready (its status is written once, before any pod runs); and it has no retries, events, directory, leader election or webhooks. " +
			"It is the least work that leaves every WebApp applied, not an operator: what separates an operator from it is the cost of noticing change and staying correct.",
		"Each contender is built once (`go build`) and runs as its own process with an admin kubeconfig, " +
			"`--webhook-port=0`, and metrics and health on free loopback ports. Every measurement uses fresh namespaces, " +
			"and the WebApps and children in them (finalizers dropped first) and every directory ConfigMap (those labelled " +
			"`app.kubernetes.io/name=webapp-directory`, `app.kubernetes.io/managed-by=handroll` in the operator's namespace) are deleted afterwards, so each " +
			"contender starts from the same empty cluster; events are left to the API server's TTL, as no contender watches them. Contenders alternate within each size; the order rotates by size and by round. " +
			"Before the first measurement the floor converges a few WebApps, unmeasured, so that nobody pays for the API server's first " +
			"writes of each kind (the CRD's validation rules compiled, server-side apply set up).",
		"**Plan**: the default is QPS 200 alone, at every size, 3 rounds, with handroll, both twins and the floor (`-plan` prints its estimate). With the cluster's controllers " +
			"each WebApp also costs a ReplicaSet and a pod, made ready and then deleted, on the same 2 cores: a pace no contender beats, " +
			fmt.Sprintf("which the cost model puts at %s WebApps/s to converge and %s/s to wipe. ", strconv.FormatFloat(estClusterRate, 'g', -1, 64), strconv.FormatFloat(estClusterWipeRate, 'g', -1, 64)) +
			"Of several regimes (`-regimes`), the full cross product of sizes and regimes does not fit (3000 WebApps × about 10 requests at " +
			"QPS 20 is 25 minutes for one contender), so a regime runs every size only if it has the highest QPS, where the API server " +
			"and the CPU set the pace; any other regime runs at the smallest size (`-regimes QPS/BURST@N+N` overrides this). " +
			"The scenarios run in the highest-QPS regime. This run: " + r.planSummary() + ". The bench prints the plan and " +
			"its estimated time first, and each phase's time as it ends (the **Plan and time** table).",
		"**Samples**: " + r.samplesNote() + ", for every table; the edit latencies of a contender are pooled over rounds.",
		"`--kube-api-qps`, `--kube-api-burst` and `--max-concurrent-reconciles` are the same for every contender, but how much the " +
			"first two throttle depends on how many client-side rate limiters a program builds from them: client-go gives each " +
			"REST client its own token bucket unless `rest.Config.RateLimiter` is set. handroll, the floor and the twin set one for " +
			"the process (`hack/compare/README.md` says why the twin does), so each regime is the whole process's budget, with one " +
			"difference: **handroll's events have a bucket of their own** (`cmd/handroll` `withOwnBucket`, as kube-scheduler's do), " +
			"while the twin's events share its one bucket and the floor writes none. handroll writes one event per new WebApp and the " +
			"twin about 2.5, so at a QPS that throttles, the twin's converge is charged for its events and handroll's is not.",
		startUpNote(r.Config.ReadyzEveryInformer),
		"**Converge**: the contender starts and passes `/readyz` (the time is the **start-up, no WebApps** row); " +
			"then the bench creates the N WebApps as fast as it can with its own client; the clock runs from the first create " +
			"to the event that made the last WebApp applied (or Ready), for every contender. The operators reconcile while the bench " +
			"is still creating; the floor, which lists once, is sent SIGUSR1 when creation is done, and the creates' time is charged " +
			"to it as to them (the JSON keeps it apart: `createSeconds`, and `convergeSeconds` from the last create).",
		"**Requests per WebApp**: the contender's `rest_client_requests_total` summed by `method` (client-go's metric, registered by " +
			"handroll, by controller-runtime in the twin, and by the floor through `pkg/server.RegisterClientGoMetrics`), scraped just " +
			"before the first create and again once the contender's counters have not moved for 2 s after convergence, so that trailing " +
			"writes (the directory entry, events) count as converge, not idle; divided by N. GET includes LIST and WATCH. That metric has " +
			"only method, code and host, so **events** are counted at the API server: the delta of its `apiserver_request_total` over " +
			"`resource=\"events\"` (core and `events.k8s.io` alike) and the verbs POST, PUT, PATCH and APPLY, scraped at the same two moments; " +
			"one contender runs at a time and the bench writes no events, so the delta is the contender's, once the events the API server " +
			"writes itself are taken off (its Service IP and port repair loops now and then report a bench Service as `ClusterIPNotAllocated` " +
			"or its leftover IPAddress as `IPAddressNotAllocated`; the bench lists them by `reportingComponent`, and counts a repeat's PATCH " +
			"from `series.count`). **Non-event** is the total minus " +
			"events; **non-event writes** are POST+PUT+PATCH+DELETE minus events.",
		"**Leader election is off** (`--leader-elect=false`) for converge, idle, cold start and the scenarios, so Lease renewals, which go " +
			"through the same client-go metrics, are not counted.",
		"**CPU per WebApp**: utime + stime from `/proc/<pid>/stat`, read once the request counters have settled after convergence (so it " +
			"includes start-up), divided by N. **Peak RSS**: `VmHWM` from `/proc/<pid>/status`, read at the same moment, so before idle " +
			"wherever idle is measured (the JSON also has it just before the process is stopped, as `peakRSSBytes`)." + r.liveHeapNote(),
		serverCPUNote,
		fmt.Sprintf("**Idle**: at the largest size of each regime (where idle writes, if any, would be most; idling at every size would cost "+
			"minutes the hour does not have), after converge, %s with nothing changing; writes are POST+PUT+PATCH+DELETE from the metrics delta. "+
			"The floor writes what convergence needs once and then does nothing, so idle does not apply to it.", idle),
		fmt.Sprintf("**Cold start**: after converge (and idle, where measured) the operator is stopped (SIGTERM) and started again on the N WebApps it converged, "+
			"children and directory in place: the time from the process's start to `/readyz` answering 200 (polled every 20 ms), the writes "+
			"it made until then, and those in the %s after it (from its own counters; none are needed, so the goal is 0). The floor has no "+
			"cache to fill and applies every WebApp again at each start by design: n/a.", window),
	}
}

// scenarioMethodology is how each scenario the run had is measured, and
// the plot drawn.
func scenarioMethodology(r *Results) []string {
	var lines []string
	if c := r.Config.UnrelatedCell; c != nil {
		made := "with its own client (QPS 2000, 16 requests in flight)"
		if r.Config.UnrelatedKubectlApply {
			made = "the ConfigMaps with the control plane's `kubectl apply`, one List per namespace, so that each carries the last-applied " +
				"annotation (a second copy of its data) as a user's would; the rest with its own client (QPS 2000, 16 requests in flight)"
		}
		lines = append(lines, fmt.Sprintf("**Unrelated objects**: before this scenario, the bench creates %d ConfigMaps with %d KiB of data each, "+
			"%d Deployments and %d Services (ClusterIP) in %d namespaces that hold no WebApps, %s, "+
			"none labelled as handroll's; then each contender converges %s as in the per-size converge, without idle or "+
			"cold start; then the objects are deleted, before any other measurement. Start-up is process start → `/readyz`; peak RSS here is "+
			"`VmHWM` read when the request counters settled after convergence, in both runs. Without them: the per-size converge of the same "+
			"size and regime; growth is the difference of the medians.",
			r.Config.Unrelated, r.Config.UnrelatedConfigMapBytes>>10, r.Config.Unrelated, r.Config.Unrelated, r.Config.UnrelatedNamespaces, made, c))
	}
	if len(r.Config.BacklogCells) > 0 {
		lines = append(lines, fmt.Sprintf("**Live edits while a backlog drains**: the %d WebApps are created while no contender runs, and the bench waits "+
			"until its informer holds them all; then the operator starts, and as soon as `/readyz` answers the bench makes %d edits, %s apart, "+
			"each setting `spec.replicas` from 1 to %d on a different WebApp, spread evenly over the backlog (the middle of each of %d equal "+
			"slices in creation order). Each edit's latency runs from its PATCH's response to the event in which the bench's informer sees that "+
			"WebApp's Deployment with the new `spec.replicas` (whether it was created with it or updated to it). The drain runs from `/readyz` "+
			"to every WebApp converged, edits included. The floor has no loop to edit against: n/a. Not run at QPS 20 by default: "+
			"draining 3000 WebApps there takes about 25 minutes per contender (`-backlog-regimes` adds it).",
			r.Config.BacklogWebApps, r.Config.Edits, formatSeconds(r.Config.EditIntervalSeconds), editReplicas, r.Config.Edits))
	}
	if r.Config.FailoverWebApps > 0 {
		regime := "the same regime"
		if g := r.Config.FailoverRegime; g != nil {
			regime = g.Title()
		}
		lines = append(lines, fmt.Sprintf("**Failover**: %d WebApps in a namespace of their own per operator (handroll's two variants share one), at %s, "+
			"the replicas started with `--namespaces` set to it, and short Lease timings for every contender: "+
			"`--leader-elect-lease-duration=%s --leader-elect-renew-deadline=%s --leader-elect-retry-period=%s`. Replica A starts and "+
			"takes the Lease, then replica B; once everything has converged and B is ready, A gets SIGKILL (one trial) or SIGTERM "+
			"(another) and the bench at once changes one WebApp's `spec.replicas`, without waiting for A to exit. The first write is the first of the "+
			"Deployment's new `spec.replicas` or a status for the new generation; the Lease's `acquireTime` is the new leader's own. "+
			"A write seen before that `acquireTime` was the old leader's, on its way out: such a trial is run again. "+
			"twin-tuned's standby starts its controllers' watches before it leads (`EnableWarmup`); without it, a controller-runtime "+
			"standby starts them once it leads.",
			r.Config.FailoverWebApps, regime, r.Config.LeaseDuration, r.Config.RenewDeadline, r.Config.RetryPeriod))
	}
	if _, ok := r.scaleSVG(); ok {
		lines = append(lines, "**Plot** (`"+scaleSVGName+"`): the medians of the converge and peak RSS rows of the per-size tables in the "+
			"highest-QPS regime, against N on a logarithmic axis when the sizes span a factor of 4 or more.")
	}
	return lines
}

// migrate fills in what a benchmarks.json from before -n took a list
// lacks: its one size and regime.
func (r *Results) migrate() {
	c := &r.Config
	if len(c.Cells) > 0 || c.WebApps == 0 {
		return
	}
	cell := Cell{N: c.WebApps, Regime: Regime{QPS: c.QPS, Burst: c.Burst}}
	c.Sizes, c.Regimes, c.Cells, c.NamespacesMax = []int{cell.N}, []Regime{cell.Regime}, []Cell{cell}, c.Namespaces
	if c.FailoverWebApps > 0 {
		c.FailoverRegime = &cell.Regime
	}
	c.IdleCells = c.Cells
	for i := range r.Converge {
		s := &r.Converge[i]
		if s.N == 0 {
			s.Cell = cell
		}
		if s.ConvergedPeakRSSBytes == 0 {
			s.ConvergedPeakRSSBytes = s.PeakRSSBytes
		}
		// Not measured then: NaN renders as "—" (and -render writes no JSON).
		s.EventWrites, s.ReadySeconds = math.NaN(), math.NaN()
	}
	// Its cold start was the first write with a backlog, not a restart.
	if len(r.ColdStart) > 0 {
		r.ColdStart = nil
		r.Notes = append(r.Notes, "This run measured cold start as process start → first write with N unconverged WebApps, which the report no longer shows.")
	}
}

// write stores benchmarks.json, benchmarks.md and the plot in dir.
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
	return r.render(dir)
}

// render writes benchmarks.md and the plot (or removes a stale plot when
// there is nothing to draw).
func (r *Results) render(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	svgPath := filepath.Join(dir, scaleSVGName)
	svg, ok := r.scaleSVG()
	if !ok {
		if err := os.Remove(svgPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(svgPath, []byte(svg), 0o644)
}

// rerender rewrites benchmarks.md and the plot from the benchmarks.json at
// path, for when the report's wording changes but the figures need not.
func rerender(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r.migrate()
	return r.render(filepath.Dir(path))
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

// liveHeapNote says how the live heap is measured, when this run did.
func (r *Results) liveHeapNote() string {
	if !slices.ContainsFunc(r.Converge, func(s ConvergeSample) bool { return s.ConvergedLiveHeapBytes > 0 }) {
		return ""
	}
	return " **Live heap**: every contender runs with `GODEBUG=gctrace=1`, and the figure is what its last collection before that " +
		"moment found live (the third number of the runtime's `A->B->C MB`); the rest of the peak RSS is garbage the " +
		"GC allowed between collections (GOGC 100: up to the live heap again) and the runtime's own. The runtime prints it in " +
		"whole MB, rounded down, so the figure may be up to 1 MiB low, and the KiB per WebApp are that figure divided: under " +
		"0.1 KiB low at N = 10000, ±0.5 KiB in a slope over 2000 WebApps. No finer source is common to every contender: the runtime's " +
		"`/gc/heap/live:bytes` is in none of their `/metrics` (client_golang's Go collector leaves it out by default), and " +
		"`go_memstats_heap_alloc_bytes` counts garbage not yet freed as well."
}

// serverCPUNote says how the API server's and etcd's CPU is measured.
const serverCPUNote = "**API server + etcd CPU per WebApp**: utime + stime of the control plane's kube-apiserver and etcd " +
	"processes, from `/proc/<pid>/stat`, read just before the first create and again as soon as the last WebApp is applied " +
	"(before the operators' wait for Ready), divided by N: the same span for every contender. It holds more than the " +
	"contender's requests: the bench's creates and its informers' watch events, and, with the cluster's controllers, their " +
	"work on the Deployments, ReplicaSets and pods in that span, much the same for every contender, so the ratio between " +
	"contenders understates the difference their requests make. The contender's start-up (its first lists and watches) is " +
	"before the span. Samples from before it was measured show not measured."
