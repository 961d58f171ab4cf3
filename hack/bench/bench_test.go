package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{2, 2, 9}, 2},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !cmp.Equal(in, tc.in) {
			t.Errorf("median reordered its argument: %v, was %v", tc.in, in)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

// A ratio is a number only where its denominator says something: never
// for a negative one, or one near 0 beside the numerator, where noise
// would set it (the floor's RSS slope of 0.0 KiB gave 430.29, and of
// -0.5 KiB gave -10.00).
func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{3, 2, "1.50"},
		{1, 3, "0.33"},
		{2, 3, "0.67"},
		{0, 5, "0.00"},
		{-1, 4, "-0.25"},
		{20, 1, "20.00"},
		{12.0, 0.0279, "n/a: floor ≈ 0"},
		{5.1, -0.51, "n/a: floor < 0"},
		{5, 0, "n/a: floor ≈ 0"},
		{0, 0, "—"},
		{math.NaN(), 1, "—"},
		{1, math.NaN(), "—"},
	} {
		got := func() string {
			q, why := ratio(tc.a, tc.b, "floor")
			if why != "" {
				return why
			}
			return format(q, unitRatio)
		}()
		if got != tc.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// Ratios pair the contenders' samples round by round and show the median
// of the per-round ratios with their spread, not a ratio of medians; they
// say so where the rounds do not pair.
func TestPairedRatio(t *testing.T) {
	rounds := func(vs ...float64) []sample {
		out := make([]sample, len(vs))
		for i, v := range vs {
			out[i] = sample{i + 1, v}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		of, to   []sample
		want     string
		wantQ    []float64
		wantWhy  string
		noRatios bool
	}{
		// Medians 9.2 and 3.8 would give 2.42; the rounds give 2.30, 2.38, 2.80.
		{name: "paired", of: rounds(9.2, 8.4, 11.2), to: rounds(4.0, 3.5294, 4.0), want: "2.38 (2.30–2.80)"},
		{name: "in any order", of: []sample{{3, 11.2}, {1, 9.2}, {2, 8.4}}, to: rounds(4.0, 3.5294, 4.0), want: "2.38 (2.30–2.80)"},
		{name: "the same in every round", of: rounds(2, 4), to: rounds(1, 2), want: "2.00"},
		{name: "pooled", of: []sample{{0, 0.4}}, to: []sample{{0, 0.8}}, want: "0.50"},
		{name: "a round missing", of: rounds(1, 2, 3), to: rounds(1, 2), want: "n/a: unpaired"},
		{name: "other rounds", of: []sample{{1, 1}, {2, 1}}, to: []sample{{1, 1}, {3, 1}}, want: "n/a: unpaired"},
		{name: "a round twice", of: []sample{{1, 1}, {1, 1}}, to: []sample{{1, 1}, {2, 1}}, want: "n/a: unpaired"},
		{name: "one round negative", of: rounds(12, 12.1, 11.6), to: rounds(-0.3, 0.2, 0.0), want: "n/a: floor < 0"},
		{name: "the slope near 0", of: rounds(12, 12.1, 11.6), to: rounds(0.2, 0.3, 0.01), want: "n/a: floor ≈ 0"},
		{name: "both 0", of: rounds(0, 0), to: rounds(0, 0), want: "—"},
		{name: "none", of: rounds(1), to: nil, want: "—"},
	} {
		if got := pairedRatio(tc.of, tc.to, "floor"); got != tc.want {
			t.Errorf("%s: pairedRatio = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v          float64
		unit, want string
	}{
		{0.0421, "s", "42 ms"},
		{12.345, "s", "12.35 s"},
		{312.04, "s", "312.0 s"},
		{4000, "count", "4000"},
		{2.5, "count", "2.5"},
		{37.26, "MiB", "37.3 MiB"},
		{math.NaN(), "s", "—"},
		{4.567, unitPerApp, "4.57"},
		{0.0123, unitCPUPerApp, "12.3 ms"},
		{-1.25, unitDeltaMiB, "−1.2 MiB"},
		{0.3, unitDeltaS, "+300 ms"},
		{-0.0004, unitDeltaS, "0 ms"},
		{-0.01, unitDeltaMiB, "0.0 MiB"},
		{12, unitDeltaMiB, "+12.0 MiB"},
	} {
		if got := format(tc.v, tc.unit); got != tc.want {
			t.Errorf("format(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\thandroll\nVmPeak:\t 1300000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40000 kB\n"
	got, err := parseVmHWM(status)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(51234 * 1024); got != want {
		t.Errorf("parseVmHWM = %d, want %d", got, want)
	}
	if _, err := parseVmHWM("Name:\tx\nVmRSS:\t1 kB\n"); err == nil {
		t.Error("parseVmHWM without VmHWM: no error")
	}
	if _, err := parseVmHWM("VmHWM:\t12 MB\n"); err == nil {
		t.Error("parseVmHWM with an unknown unit: no error")
	}
}

func TestParseCPUSeconds(t *testing.T) {
	// The command name may hold spaces and parentheses; utime (250) and
	// stime (75) are fields 14 and 15.
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 2000000 3000 18446744073709551615\n"
	got, err := parseCPUSeconds(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.25; got != want {
		t.Errorf("parseCPUSeconds = %v, want %v", got, want)
	}
	if _, err := parseCPUSeconds("4242 (x) S 1 2"); err == nil {
		t.Error("parseCPUSeconds of a short line: no error")
	}
}

func TestRequestsByMethod(t *testing.T) {
	metrics := `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 10
rest_client_requests_total{code="404",host="127.0.0.1:6443",method="GET"} 2
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 5
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="patch"} 7
# TYPE other_total counter
other_total 99
`
	got, err := requestsByMethod(strings.NewReader(metrics))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"GET": 12, "POST": 5, "PATCH": 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requestsByMethod (-want +got):\n%s", diff)
	}
	if writes(got) != 12 || total(got) != 24 {
		t.Errorf("writes = %v, total = %v; want 12, 24", writes(got), total(got))
	}
	// No request made yet: no sample.
	got, err = requestsByMethod(strings.NewReader("other_total 1\n"))
	if err != nil || len(got) != 0 {
		t.Errorf("requestsByMethod before any request = %v, %v; want none", got, err)
	}
}

func TestDelta(t *testing.T) {
	got := delta(map[string]float64{"GET": 10, "PUT": 3}, map[string]float64{"GET": 15, "PUT": 3, "POST": 2})
	if diff := cmp.Diff(map[string]float64{"GET": 5, "POST": 2}, got); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
}

func TestRotate(t *testing.T) {
	xs := []string{"handroll", "twin", "floor"}
	for k, want := range [][]string{
		{"handroll", "twin", "floor"},
		{"twin", "floor", "handroll"},
		{"floor", "handroll", "twin"},
		{"handroll", "twin", "floor"},
	} {
		if got := rotate(xs, k); !cmp.Equal(got, want) {
			t.Errorf("rotate(%v, %d) = %v, want %v", xs, k, got, want)
		}
	}
	if got := rotate(xs, 1); &got[0] == &xs[1] {
		t.Error("rotate shares its argument's array")
	}
}

func TestMachineParsing(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
	if got, want := cpuModel(strings.NewReader(cpuinfo)), "Intel(R) Xeon(R) CPU @ 2.20GHz"; got != want {
		t.Errorf("cpuModel = %q, want %q", got, want)
	}
	if got := cpuModel(strings.NewReader("processor\t: 0\nHardware\t: x\n")); got != "unknown" {
		t.Errorf("cpuModel without a model name = %q, want unknown", got)
	}
	if kb, ok := memTotalKB("MemTotal:        8039452 kB\nMemFree:  1 kB\n"); !ok || kb != 8039452 {
		t.Errorf("memTotalKB = %d, %v; want 8039452, true", kb, ok)
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"-n", "100", "-contenders", "handroll,floor", "-out", "my dir"})
	want := `go run ./hack/bench -n 100 -contenders handroll,floor -out "my dir"`
	if got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]float64, 50)
	for i := range xs {
		xs[i] = float64(50 - i) // 50 … 1, unsorted
	}
	for _, tc := range []struct{ p, want float64 }{{50, 25}, {99, 50}, {100, 50}, {1, 1}, {0, 1}} {
		if got := percentile(xs, tc.p); got != tc.want {
			t.Errorf("percentile(1…50, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if xs[0] != 50 {
		t.Error("percentile reordered its argument")
	}
	if got := percentile([]float64{0.3}, 99); got != 0.3 {
		t.Errorf("percentile of one = %v", got)
	}
	if got := percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("percentile(nil) = %v, want NaN", got)
	}
}

// The edits reach over the whole backlog, each to a different WebApp.
func TestEditIndex(t *testing.T) {
	for _, tc := range []struct{ k, n int }{{50, 3000}, {10, 60}, {7, 7}, {1, 5}} {
		seen := map[int]bool{}
		for j := range tc.k {
			i := editIndex(j, tc.k, tc.n)
			if i < 0 || i >= tc.n || seen[i] {
				t.Fatalf("editIndex(%d, %d, %d) = %d: out of range or repeated", j, tc.k, tc.n, i)
			}
			seen[i] = true
		}
	}
	if first, last := editIndex(0, 50, 3000), editIndex(49, 50, 3000); first != 30 || last != 2970 {
		t.Errorf("edits of 3000 run from %d to %d, want 30 to 2970", first, last)
	}
}

func TestParseSizesAndRegimes(t *testing.T) {
	sizes, err := parseSizes("3000, 300,1000", ",")
	if err != nil || !cmp.Equal(sizes, []int{300, 1000, 3000}) {
		t.Errorf("parseSizes = %v, %v; want 300, 1000, 3000 in order", sizes, err)
	}
	for _, bad := range []string{"", "0", "-5", "300,300", "x"} {
		if _, err := parseSizes(bad, ","); err == nil {
			t.Errorf("parseSizes(%q): no error", bad)
		}
	}
	specs, err := parseRegimes("20/30@300+100,200/300,0.5/1")
	if err != nil {
		t.Fatal(err)
	}
	want := []regimeSpec{{Regime: Regime{20, 30}, sizes: []int{100, 300}}, {Regime: Regime{200, 300}}, {Regime: Regime{0.5, 1}}}
	if diff := cmp.Diff(want, specs, cmp.AllowUnexported(regimeSpec{})); diff != "" {
		t.Errorf("parseRegimes (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"20", "20/", "/30", "0/30", "20/0", "20/30,20/30", "20/30@", "20/30@0", "x/y", "Inf/3"} {
		if _, err := parseRegimes(bad); err == nil {
			t.Errorf("parseRegimes(%q): no error", bad)
		}
	}
	if got := (Regime{0.5, 1}).String(); got != "0.5/1" {
		t.Errorf("Regime.String = %q", got)
	}
}

func TestParseFlags(t *testing.T) {
	o, _, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(o.sizes, []int{300, 1000, 3000}) || o.rounds != 3 || o.unrelated != 400 || o.backlogN != 300 || o.failoverN != 300 || o.edits != 50 || o.idle != 20*time.Second || o.coldWindow != 8*time.Second {
		t.Errorf("defaults: sizes %v, rounds %d, unrelated %d, backlog %d, failover %d, edits %d", o.sizes, o.rounds, o.unrelated, o.backlogN, o.failoverN, o.edits)
	}
	if !cmp.Equal(o.contenders, []string{"handroll", "twin", "twin-tuned", "floor"}) || o.explicitContenders {
		t.Errorf("default contenders %v, explicit %v", o.contenders, o.explicitContenders)
	}

	// The Makefile's example, and -qps/-burst as a shorthand for one regime.
	o, _, err = parseFlags([]string{"-n", "300", "-rounds", "3", "-qps", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]regimeSpec{{Regime: Regime{50, 30}}}, o.regimes, cmp.AllowUnexported(regimeSpec{})); diff != "" || o.backlogN != 300 || o.rounds != 3 {
		t.Errorf("-qps 50: regimes (-want +got) %s, backlog %d, rounds %d", diff, o.backlogN, o.rounds)
	}

	o, _, err = parseFlags([]string{"-quick", "-n", "30,60", "-idle", "2s", "-contenders", "handroll,twin-tuned"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.idle != 2*time.Second || o.coldWindow != 3*time.Second || o.edits != 10 || !o.explicitContenders {
		t.Errorf("-quick: idle %s (given), window %s, edits %d, explicit %v", o.idle, o.coldWindow, o.edits, o.explicitContenders)
	}

	for _, bad := range [][]string{
		{"-qps", "20", "-regimes", "20/30"},
		{"-n", "0"},
		{"-rounds", "0"},
		{"-contenders", "handroll,kopf"},
		{"-contenders", "twin,twin"},
		{"-backlog-n", "5", "-edits", "6"},
		{"-backlog-regimes", "20/30@300"},
		{"-unrelated", "-1"},
		{"extra"},
	} {
		if _, _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): no error", bad)
		}
	}
	if _, render, err := parseFlags([]string{"-render", "docs/benchmarks.json"}, io.Discard); err != nil || render != "docs/benchmarks.json" {
		t.Errorf("-render: %q, %v", render, err)
	}
}

// The default plan: every size at QPS 200, 3 rounds, the scenarios at QPS
// 200, all four contenders. With the cluster's controllers running, its
// estimate is about two hours on 2 cores; the bound here keeps the plan
// from growing further.
func TestDefaultPlan(t *testing.T) {
	o, _, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := o.plan()
	slow, fast := Regime{20, 30}, Regime{200, 300}
	want := Plan{
		Cells:     []Cell{{300, fast}, {1000, fast}, {3000, fast}},
		IdleCells: []Cell{{3000, fast}},
		Unrelated: &Cell{300, fast},
		Backlog:   []Cell{{300, fast}},
		Failover:  &Cell{300, fast},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("default plan (-want +got):\n%s", diff)
	}
	phases := o.phases(p, o.contenders)
	var kinds []string
	for _, ph := range phases {
		kinds = append(kinds, ph.Kind)
		if ph.EstimatedSeconds <= 0 {
			t.Errorf("phase %q has no estimate", ph.Name)
		}
	}
	wantKinds := []string{phaseBuild, phaseSetup, phaseUnrelated, phaseCell, phaseCell, phaseCell, phaseBacklog, phaseFailover}
	if !cmp.Equal(kinds, wantKinds) {
		t.Errorf("phases %v, want %v", kinds, wantKinds)
	}
	if est := totalEstimate(phases); est > 2*time.Hour || est < 30*time.Minute {
		t.Errorf("the default plan is estimated at %s: it must fit in 2 hours", est)
	}

	// '@' overrides the rule; without operators there is no failover phase.
	o.regimes, _ = parseRegimes("20/30@300+1000,200/300@1000")
	o.unrelated, o.backlogN, o.skipFailover = 0, 0, true
	p = o.plan()
	if want := []Cell{{300, slow}, {1000, slow}, {1000, fast}}; !cmp.Equal(p.Cells, want) || !cmp.Equal(p.IdleCells, []Cell{{1000, slow}, {1000, fast}}) ||
		p.Unrelated != nil || p.Backlog != nil || p.Failover != nil {
		t.Errorf("plan with @ and no scenarios = %+v", p)
	}
	o.skipFailover = false
	p = o.plan()
	for _, ph := range o.phases(p, []string{"floor"}) {
		if ph.Kind == phaseFailover || ph.Kind == phaseBacklog {
			t.Errorf("a %s phase without operators", ph.Kind)
		}
	}
}

func TestEventWritesFrom(t *testing.T) {
	metrics := `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="PATCH",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="DELETECOLLECTION",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="LIST",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 100
`
	got, err := eventWritesFrom(strings.NewReader(metrics))
	if err != nil || got != 45 {
		t.Errorf("eventWritesFrom = %v, %v; want 45", got, err)
	}
	if _, err := eventWritesFrom(strings.NewReader("other_total 1\n")); err == nil {
		t.Error("eventWritesFrom without apiserver_request_total: no error")
	}
}

// testResults is a small run: two sizes at QPS 200, one at QPS 20, the
// unrelated and backlog scenarios, failover; the twins did not run.
func testResults() *Results {
	f := func(v float64) *float64 { return &v }
	slow, fast := Regime{20, 30}, Regime{200, 300}
	r := &Results{
		Contenders: []string{"handroll", "floor"},
		Config: Config{
			Sizes: []int{100, 1000}, Regimes: []Regime{slow, fast}, Cells: []Cell{{100, slow}, {100, fast}, {1000, fast}}, IdleCells: []Cell{{100, slow}, {1000, fast}},
			NamespacesMax: 10, Rounds: 3, IdleSeconds: 30, ColdStartWindowSeconds: 10, Workers: 4,
			Unrelated: 2000, UnrelatedNamespaces: 20, UnrelatedConfigMapBytes: 64 << 10, UnrelatedCell: &Cell{100, fast}, UnrelatedKubectlApply: true,
			BacklogWebApps: 1000, BacklogCells: []Cell{{1000, fast}}, Edits: 4, EditIntervalSeconds: 0.15,
		},
	}
	for round, secs := range []float64{30, 10, 20} {
		for _, c := range r.Config.Cells {
			n := float64(c.N)
			idle, idleCPU := f(0), f(0.1)
			if !slices.Contains(r.Config.IdleCells, c) {
				idle, idleCPU = nil, nil
			}
			r.Converge = append(r.Converge,
				ConvergeSample{Contender: "handroll", Round: round + 1, Cell: c, ConvergeSeconds: secs * n / 100, ReadySeconds: 0.2,
					ReadyAllSeconds: secs*n/100 + 5, ReadyLag: &Quantiles{P50: 0.05 * float64(round+1), P99: 0.2, N: c.N},
					Requests: map[string]float64{"PATCH": 4 * n, "POST": n, "GET": n}, EventWrites: n, CPUSeconds: 0.01 * n,
					PeakRSSBytes: int64(40+n/100) << 20, ConvergedPeakRSSBytes: int64(39+n/100) << 20, IdleWrites: idle, IdleCPUSeconds: idleCPU},
				// The floor starts once the creates are done: they are
				// charged to it.
				ConvergeSample{Contender: "floor", Round: round + 1, Cell: c, CreateSeconds: n / 100, ConvergeSeconds: 9 * n / 100, ReadySeconds: 0.01,
					Requests: map[string]float64{"PATCH": 3.5 * n}, CPUSeconds: 0.003 * n, PeakRSSBytes: 30 << 20, ConvergedPeakRSSBytes: 30 << 20})
			r.ColdStart = append(r.ColdStart, ColdStartSample{Contender: "handroll", Round: round + 1, Cell: c, ReadySeconds: 0.3, WindowSeconds: 10})
		}
		u := *r.Config.UnrelatedCell
		r.Converge = append(r.Converge,
			ConvergeSample{Contender: "handroll", Round: round + 1, Cell: u, Unrelated: 2000, ConvergeSeconds: 12, ReadySeconds: 0.5,
				Requests: map[string]float64{"PATCH": 400}, PeakRSSBytes: 45 << 20, ConvergedPeakRSSBytes: 43 << 20},
			ConvergeSample{Contender: "floor", Round: round + 1, Cell: u, Unrelated: 2000, ConvergeSeconds: 9, ReadySeconds: 0.01,
				Requests: map[string]float64{"PATCH": 350}, PeakRSSBytes: 30 << 20, ConvergedPeakRSSBytes: 30 << 20})
		r.Backlog = append(r.Backlog, BacklogSample{Contender: "handroll", Round: round + 1, Cell: Cell{1000, fast},
			EditSeconds: []float64{0.1 * float64(round+1), 0.2, 0.3, 0.4}, DrainSeconds: 60, ReadySeconds: 0.4, FirstWriteSeconds: 0.5,
			Requests: map[string]float64{"PATCH": 5000}, PeakRSSBytes: 60 << 20})
	}
	return r
}

// The tables show medians and the ratios paired by round, and say which
// measures do not apply to the floor and which contender did not run,
// rather than print a number for them.
func TestMarkdown(t *testing.T) {
	r := testResults()
	md := r.markdown()
	for _, want := range []string{
		"| measure | handroll | twin | twin-tuned (`--tuned`) | floor | handroll/floor |",
		"### N = 1000 (QPS 200, burst 300)",
		// The median, and the spread when the rounds differ; the ratio is
		// each round's, 1, 3 and 2 (the ratio of medians would be 2.00 too, but
		// without the spread).
		"| applied: first create → every WebApp's children and status written | 200.0 s (100.0 s–300.0 s) | not run | not run | 100.0 s | 2.00 (1.00–3.00) |",
		"| Ready: first create → every WebApp's status Ready, every replica ready | 205.0 s (105.0 s–305.0 s) | not run | not run | " + floorNoReady[contenderFloor] + " | — |",
		"| the operator's share of Ready: Deployment all ready → status Ready, p50 | 100 ms (50 ms–150 ms) | not run | not run |",
		"| the operator's share of Ready: p99 | 200 ms | not run | not run |",
		"| requests per WebApp: total | 6.00 | not run | not run | 3.50 | 1.71 |",
		"| requests per WebApp: non-event (total − events) | 5.00 | not run | not run | 3.50 | 1.43 |",
		"| requests per WebApp: non-event writes | 4.00 | not run | not run | 3.50 | 1.14 |",
		"| requests per WebApp: events | 1.00 | not run | not run | 0.00 | n/a: floor ≈ 0 |",
		"| CPU per WebApp (process start → converged, ÷ N) | 10.0 ms | not run | not run | 3.0 ms | 3.33 |",
		"| cold start: writes in the 10s after /readyz | 0 | not run | not run | " + floorNoRestart + " | — |",
		"| idle writes (30s, nothing changing) | 0 | not run | not run | " + floorNoLoop + " | — |",
		"| ≤ 3.6 non-event requests per new WebApp at N = 1000 (QPS 200, burst 300) | 5.00 | **no** |",
		"| ≤ 1 event per new WebApp at N = 1000 (QPS 200, burst 300) | 1.00 | yes |",
		// The marginal cost: (49 − 40 MiB) / 900, and 10 ms against 3 ms.
		"### Per WebApp more: from N = 100 to 1000",
		"| peak RSS (VmHWM) once converged, per WebApp more | 10.2 KiB | not run | not run | 0.0 KiB | n/a: floor ≈ 0 |",
		"| peak RSS ≤ 15 KiB per WebApp more, from N = 100 to 1000 (QPS 200, burst 300) | 10.2 KiB | yes |",
		"| live heap ≤ 6 KiB per WebApp more, from N = 100 to 1000 (QPS 200, burst 300) | not measured | — |",
		"| CPU per WebApp more ≤ 1.3× the floor's, from N = 100 to 1000 (QPS 200, burst 300) | 3.33×; 10.0 ms against 3.0 ms | **no** |",
		// Sizes and figures the run does not have.
		"| CPU to converge (process start → converged), handroll ÷ floor ≤ 1.3× at N = 10000 (QPS 200, burst 300) | not run | — |",
		"| API server + etcd CPU per WebApp, handroll ÷ floor ≤ 1.2× at N = 1000 (QPS 200, burst 300) | not measured | — |",
		"| API server + etcd CPU per WebApp (first create → applied, ÷ N) | not measured | not run | not run | not measured | — |",
		"| CPU per WebApp at N = 10000 ÷ at N = 1000 ≤ 1.15 (QPS 200, burst 300) | not run | — |",
		"| cold start to /readyz ≤ 3.00 s at N = 10000 (QPS 200, burst 300) | not run | — |",
		"| 0 idle writes, every size and regime | 0 in all 6 samples | yes |",
		"| peak RSS (VmHWM) once converged | 49.0 MiB | not run | not run | 30.0 MiB | 1.63 |",
		"idle at N = 100 (QPS 20, burst 30) and N = 1000 (QPS 200, burst 300)",
		"| peak RSS grows ≤ 5 MiB with 2000 unrelated objects of each kind, ConfigMaps of 64 KiB made with `kubectl apply` (so each also holds its data again, in its last-applied annotation) (N = 100 at QPS 200, burst 300) | +3.0 MiB | yes |",
		"| peak RSS: growth | +3.0 MiB | not run | not run | 0.0 MiB |",
		"| start-up: growth | +300 ms | not run | not run | 0 ms |",
		// Pooled over rounds: 0.1 … 0.4 and 0.2, 0.3.
		// No ratio to the floor, which has no loop to edit against.
		"| edit → Deployment with the new `spec.replicas`: p50 | 300 ms | not run | not run | " + floorNoLoop + " |\n",
		"| edit → Deployment with the new `spec.replicas`: p99 | 400 ms | not run | not run |",
		"| p99 edit → Deployment ≤ 1.00 s while a backlog of N = 1000 at QPS 200, burst 300 drains | 400 ms | yes |",
		"each figure is the median of 3 samples, one per round",
		"![" + scaleSVGAlt + "](" + scaleSVGName + ")",
		"## Per size: QPS 20, burst 30",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks\n%s\nin:\n%s", want, md)
		}
	}
	if strings.Contains(md, "## Failover") {
		t.Error("a failover table without failover samples")
	}
	// Idle rows only where idle was measured.
	if fast100 := md[strings.Index(md, "### N = 100 (QPS 200"):strings.Index(md, "### N = 1000 (QPS 200")]; strings.Contains(fast100, "idle writes") {
		t.Errorf("idle rows at a size without idle:\n%s", fast100)
	}
	// The per-size tables leave the unrelated scenario's samples out.
	if strings.Contains(md, "| applied: first create → every WebApp's children and status written | 12.00 s") {
		t.Error("an unrelated-objects sample in a per-size table")
	}

	r.Contenders = append(r.Contenders, "twin", "twin-tuned")
	for round, secs := range []float64{0.2, 0.1, 0.3} {
		r.Failover = append(r.Failover,
			FailoverSample{Variant: variantHandrollWarm, Signal: "SIGKILL", Round: round + 1, KillToWriteSeconds: 4 + secs, AcquireToWriteSeconds: secs},
			FailoverSample{Variant: variantTwin, Signal: "SIGKILL", Round: round + 1, KillToWriteSeconds: 4 + 2*secs, AcquireToWriteSeconds: 2 * secs},
			FailoverSample{Variant: variantTwinTuned, Signal: "SIGKILL", Round: round + 1, KillToWriteSeconds: 4 + 4*secs, AcquireToWriteSeconds: 4 * secs})
	}
	r.Backlog = append(r.Backlog, BacklogSample{Contender: "twin", Round: 1, Cell: r.Config.BacklogCells[0], EditSeconds: []float64{0.2, 0.3}})
	md = r.markdown()
	for _, want := range []string{
		"| measure | handroll (warm standby, default) | twin | twin-tuned (`--tuned`: EnableWarmup) | handroll/twin | handroll/twin-tuned |",
		"| SIGKILL: Lease acquired → first write | 200 ms | 400 ms | 800 ms | 0.50 | 0.25 |",
		"| SIGTERM: Lease acquired → first write | — | — | — |",
		"| … and ≤ the twin's p99 (300 ms) | 400 ms | **no** |",
		"| applied: first create → every WebApp's children and status written | 200.0 s (100.0 s–300.0 s) | — | — | 100.0 s | — | — | 2.00 (1.00–3.00) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks\n%s\nin:\n%s", want, md)
		}
	}
}

// The plot is well-formed SVG with one line per contender in each panel,
// on a logarithmic axis for sizes a decade apart.
func TestScaleSVG(t *testing.T) {
	r := testResults()
	svg, ok := r.scaleSVG()
	if !ok {
		t.Fatal("no plot")
	}
	d := xml.NewDecoder(strings.NewReader(svg))
	elements := map[string]int{}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			elements[se.Name.Local]++
		}
	}
	// Two contenders × two panels; 2 sizes × 2 × 2 markers plus 2 in the legend.
	if elements["polyline"] != 4 || elements["circle"] != 10 {
		t.Errorf("%d polylines, %d circles; want 4, 10:\n%s", elements["polyline"], elements["circle"], svg)
	}
	for _, want := range []string{"WebApps (N), logarithmic", "QPS 200, burst 300", "handroll, N = 1000: 200.0 s", "floor, N = 100: 30.0 MiB"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	if again, _ := r.scaleSVG(); again != svg {
		t.Error("the SVG differs between two renderings")
	}
	if _, ok := (&Results{}).scaleSVG(); ok {
		t.Error("a plot without samples")
	}
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct{ hi, step, top float64 }{
		{200, 50, 200}, {73, 20, 80}, {9, 2, 10}, {0.42, 0.1, 0.5}, {0, 1, 1},
	} {
		if step, top := niceAxis(tc.hi); math.Abs(step-tc.step) > 1e-9 || math.Abs(top-tc.top) > 1e-9 {
			t.Errorf("niceAxis(%v) = %v, %v; want %v, %v", tc.hi, step, top, tc.step, tc.top)
		}
	}
	if got := tickLabel(0.30000000000000004, 0.1); got != "0.3" {
		t.Errorf("tickLabel = %q", got)
	}
}

// -render rewrites the Markdown and the plot from the JSON alone.
func TestRerender(t *testing.T) {
	dir := t.TempDir()
	r := testResults()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"benchmarks.md", scaleSVGName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rerender(filepath.Join(dir, "benchmarks.json")); err != nil {
		t.Fatal(err)
	}
	svg, _ := r.scaleSVG()
	for name, want := range map[string]string{"benchmarks.md": r.markdown(), scaleSVGName: svg} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("rerendered %s differs from the original:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

// A benchmarks.json from before -n took a list renders as its one size
// and regime.
func TestRerenderLegacy(t *testing.T) {
	dir := t.TempDir()
	legacy := `{"config": {"webApps": 300, "namespaces": 10, "rounds": 3, "qps": 20, "burst": 30, "workers": 4, "failoverWebApps": 300},
	  "contenders": ["handroll"],
	  "converge": [{"contender": "handroll", "round": 1, "convergeSeconds": 110, "requests": {"PATCH": 1650}, "peakRSSBytes": 52428800}],
	  "coldStart": [{"contender": "handroll", "round": 1, "seconds": 0.19}],
	  "failover": [{"variant": "twin", "signal": "SIGKILL", "round": 1, "killToWriteSeconds": 4.8, "acquireToWriteSeconds": 0.4}]}`
	path := filepath.Join(dir, "benchmarks.json")
	if err := os.WriteFile(path, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rerender(path); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### N = 300 (QPS 20, burst 30)", "| applied: first create → every WebApp's children and status written | 110.0 s |", "no longer shows", "at QPS 20, burst 30",
		// Not measured then.
		"| requests per WebApp: events | — |", "| start-up, no WebApps: process start → /readyz | — |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the legacy Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "cold start, N converged") {
		t.Error("cold-start rows for a run that measured cold start otherwise")
	}
	if _, err := os.Stat(filepath.Join(dir, scaleSVGName)); err != nil {
		t.Errorf("no plot for a legacy run: %v", err)
	}
}

func TestWritesOf(t *testing.T) {
	for _, tc := range []struct {
		e    corev1.Event
		want float64
	}{
		{corev1.Event{}, 1},
		{corev1.Event{Count: 1}, 1},
		{corev1.Event{Count: 3}, 3},
		{corev1.Event{Series: &corev1.EventSeries{Count: 2}}, 2},
	} {
		if got := writesOf(&tc.e); got != tc.want {
			t.Errorf("writesOf(count %d, series %v) = %v, want %v", tc.e.Count, tc.e.Series, got, tc.want)
		}
	}
}

// The live heap is the last collection's, as the runtime's gctrace line
// writes it; a log without one has none.
func TestLastLiveHeap(t *testing.T) {
	log := "I1204 starting\n" +
		"gc 1 @0.012s 2%: 0.010+1.2+0.003 ms clock, 0.021+0.4/0.9/0+0.007 ms cpu, 3->3->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"I1204 synced\n" +
		"gc 73 @203.613s 0%: 1.1+40+0.006 ms clock, 2.2+10/21/45+0.013 ms cpu, 82->82->45 MB, 84 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"I1204 idle\n"
	if got, ok := lastLiveHeap(log); !ok || got != 45<<20 {
		t.Errorf("lastLiveHeap = %d, %v; want %d, true", got, ok, 45<<20)
	}
	if _, ok := lastLiveHeap("I1204 starting\ngc is not a trace line\n"); ok {
		t.Error("a log without a gctrace line gave a live heap")
	}
	if got := withGCTrace("madvdontneed=1"); got != "madvdontneed=1,gctrace=1" {
		t.Errorf("withGCTrace kept %q", got)
	}
}

// The live heap row stands beside the peak RSS where a run measured it,
// and nowhere in a report of samples without it.
func TestLiveHeapRow(t *testing.T) {
	r := testResults()
	const name = "| live heap once converged (what the last GC found live: gctrace, whole MB) |"
	if md := r.markdown(); strings.Contains(md, name) || strings.Contains(md, "**Live heap**") {
		t.Errorf("a report without live heap samples has the row %s, or says how it was measured", name)
	}
	for i := range r.Converge {
		r.Converge[i].ConvergedLiveHeapBytes = int64(10+r.Converge[i].N/100) << 20
	}
	md := r.markdown()
	want := "| peak RSS (VmHWM) once converged | 49.0 MiB | not run | not run | 30.0 MiB | 1.63 |\n" +
		name + " 20.0 MiB | not run | not run | 20.0 MiB | 1.00 |\n" +
		"| live heap per WebApp (÷ N) | 20.5 KiB | not run | not run | 20.5 KiB | 1.00 |"
	if !strings.Contains(md, want) || !strings.Contains(md, "**Live heap**: every contender runs with `GODEBUG=gctrace=1`") {
		t.Errorf("no live heap row after the peak RSS, or no word of how it is measured, in:\n%s", md)
	}
}

// The 10k variant runs every contender, the floor too, at every size: the
// goals at 10000 are ratios to the floor.
func TestTenThousandPlan(t *testing.T) {
	o, _, err := parseFlags([]string{"-n", "1000,3000,10000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fast := Regime{200, 300}
	if p := o.plan(); !cmp.Equal(p.Cells, []Cell{{1000, fast}, {3000, fast}, {10000, fast}}) || !slices.Contains(o.contenders, contenderFloor) {
		t.Errorf("-n 1000,3000,10000: cells %v, contenders %v", p.Cells, o.contenders)
	}
}

// A run at 1000 and 10000 WebApps has every goal at 10000: the floor's
// ratios at each size, paired by round, the CPU per WebApp's growth, the
// live heap per WebApp and the cold start; the API server's and etcd's CPU
// per WebApp has a row and a ratio where it was measured.
func TestLargeNGoals(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	g := Regime{200, 300}
	r := &Results{Contenders: []string{"handroll", "floor"}, Config: Config{Sizes: []int{1000, 10000}, Regimes: []Regime{g},
		Cells: []Cell{{1000, g}, {10000, g}}, Rounds: 3}}
	// CPU per WebApp in each round: handroll's 10% more at 10000.
	handroll, floor := map[int][]float64{1000: {8, 9, 10}, 10000: {8.8, 9.9, 11}}, []float64{4, 10, 5}
	for round := 1; round <= 3; round++ {
		for _, c := range r.Config.Cells {
			n, k := float64(c.N), float64(round)
			r.Converge = append(r.Converge,
				ConvergeSample{Contender: "handroll", Round: round, Cell: c, CPUSeconds: n * handroll[c.N][round-1] / 1000,
					ConvergedLiveHeapBytes: int64(n) * 2560, APIServerCPUSeconds: f(0.005 * n * k), EtcdCPUSeconds: f(0.001 * n * k)},
				ConvergeSample{Contender: "floor", Round: round, Cell: c, CPUSeconds: n * floor[round-1] / 1000,
					APIServerCPUSeconds: f(0.004 * n * k), EtcdCPUSeconds: f(0.001 * n * k)})
		}
		r.ColdStart = append(r.ColdStart, ColdStartSample{Contender: "handroll", Round: round, Cell: Cell{10000, g}, ReadySeconds: 2 + 0.5*float64(round)})
	}
	md := r.markdown()
	for _, want := range []string{
		// Rounds 8/4, 9/10, 10/5: a ratio of medians would say 1.80.
		"| CPU to converge (process start → converged), handroll ÷ floor ≤ 1.3× at N = 1000 (QPS 200, burst 300) | 2.00× (0.90×–2.00×) | **no** |",
		"| CPU per WebApp (process start → converged, ÷ N) | 9.0 ms (8.0 ms–10.0 ms) | not run | not run | 5.0 ms (4.0 ms–10.0 ms) | 2.00 (0.90–2.00) |",
		"| CPU to converge (process start → converged), handroll ÷ floor ≤ 1.3× at N = 3000 (QPS 200, burst 300) | not run | — |",
		"| API server + etcd CPU per WebApp, handroll ÷ floor ≤ 1.2× at N = 10000 (QPS 200, burst 300) | 1.20× | yes |",
		"| CPU per WebApp at N = 10000 ÷ at N = 1000 ≤ 1.15 (QPS 200, burst 300) | 1.10× | yes |",
		"| live heap per WebApp (gctrace's whole MB ÷ N) ≤ 3 KiB at N = 10000 (QPS 200, burst 300) | 2.5 KiB | yes |",
		"| cold start to /readyz ≤ 3.00 s at N = 10000 (QPS 200, burst 300) | 3.00 s (2.50 s–3.50 s) | yes |",
		"| API server + etcd CPU per WebApp (first create → applied, ÷ N) | 12.0 ms (6.0 ms–18.0 ms) | not run | not run | 10.0 ms (5.0 ms–15.0 ms) | 1.20 |",
		"**API server + etcd CPU per WebApp**",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks\n%s\nin:\n%s", want, md)
		}
	}

	// A round the floor lacks: its ratios are unpaired, never a number.
	r.Converge = slices.DeleteFunc(r.Converge, func(s ConvergeSample) bool { return s.Contender == "floor" && s.Round == 3 && s.N == 1000 })
	md = r.markdown()
	for _, want := range []string{
		"| CPU to converge (process start → converged), handroll ÷ floor ≤ 1.3× at N = 1000 (QPS 200, burst 300) | n/a: unpaired | — |",
		"| CPU per WebApp (process start → converged, ÷ N) | 9.0 ms (8.0 ms–10.0 ms) | not run | not run | 7.0 ms (4.0 ms–10.0 ms) | n/a: unpaired |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks\n%s\nin:\n%s", want, md)
		}
	}
}

// The tracker counts a WebApp Ready only once its status says so for its
// generation, and times the operator's share from its Deployment's report
// of every replica ready; a Ready seen first (two watches) counts 0.
func TestTrackerReady(t *testing.T) {
	tr := newTracker()
	tr.begin([]string{"bench-a"}, 2)
	webApp := func(name string, ready bool) *handrollv1.WebApp {
		w := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-a", Name: name, Generation: 1, ResourceVersion: "1"}}
		w.Status.ObservedGeneration = 1
		if ready {
			w.ResourceVersion = "2"
			w.Status.Conditions = []metav1.Condition{{Type: handrollv1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}}
		}
		return w
	}
	deployment := func(name string, ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-a", Name: name, Generation: 1},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: ready, ReadyReplicas: ready}}
	}
	service := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-a", Name: name}}
	}
	for _, name := range []string{"one", "two"} {
		tr.onWebApp(webApp(name, false), false, true)
		tr.onDeployment(deployment(name, 0), false, true)
		tr.onService(service(name), false, true)
	}
	if r, _ := tr.snapshot(); r.converged != 2 || r.ready != 0 {
		t.Fatalf("applied, no pod ready: %d converged, %d ready; want 2, 0", r.converged, r.ready)
	}
	tr.onDeployment(deployment("one", 1), false, false)
	time.Sleep(20 * time.Millisecond)
	tr.onWebApp(webApp("one", true), false, false)
	tr.onWebApp(webApp("two", true), false, false) // before its Deployment's event
	r, _ := tr.snapshot()
	if r.ready != 2 || len(r.readyLags) != 1 {
		t.Fatalf("%d ready, %d lags; want 2 ready, 1 lag until the second's pods are seen ready", r.ready, len(r.readyLags))
	}
	tr.onDeployment(deployment("two", 1), false, false)
	r, _ = tr.snapshot()
	if r.ready != 2 || r.readyAt.IsZero() || len(r.readyLags) != 2 {
		t.Fatalf("ready %d at %v, lags %v; want 2, a time, 2 lags", r.ready, r.readyAt, r.readyLags)
	}
	if r.readyLags[0] < 20*time.Millisecond || r.readyLags[1] != 0 {
		t.Errorf("lags %v: want the first at least 20ms, the second 0", r.readyLags)
	}
}

// A DeleteCollection that ran out of time is called again, a bounded
// number of times; a refusal is not.
func TestUntilDone(t *testing.T) {
	calls := 0
	timeout := apierrors.NewTimeoutError("the server was unable to return a response in the time allotted", 0)
	err := untilDone(context.Background(), func() error {
		calls++
		switch calls {
		case 1:
			return timeout
		case 2:
			return apierrors.NewServerTimeout(schema.GroupResource{Resource: "webapps"}, "delete", 1)
		case 3:
			return errors.New("stream error: stream ID 24855; INTERNAL_ERROR; received from peer")
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Errorf("untilDone: %v after %d calls, want nil after 4", err, calls)
	}
	calls = 0
	if err := untilDone(context.Background(), func() error { calls++; return timeout }); !apierrors.IsTimeout(err) || calls != deleteTries {
		t.Errorf("untilDone: %v after %d calls, want the timeout after %d", err, calls, deleteTries)
	}
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "webapps"}, "", errors.New("no"))
	calls = 0
	if err := untilDone(context.Background(), func() error { calls++; return refused }); !apierrors.IsForbidden(err) || calls != 1 {
		t.Errorf("untilDone: %v after %d calls, want the refusal after 1", err, calls)
	}
}

// The report names the controllers the cluster ran without, and says
// nothing of them for a run that had them all.
func TestClusterNoteDisabledControllers(t *testing.T) {
	if note := clusterNote(5, nil); strings.Contains(note, "--controllers") {
		t.Errorf("a run with every controller says some were off:\n%s", note)
	}
	note := clusterNote(5, clusterDisabledControllers)
	for _, want := range []string{"`endpoints-controller`, `endpointslice-controller`, `endpointslice-mirroring-controller`", "no contender reads"} {
		if !strings.Contains(note, want) {
			t.Errorf("the cluster note lacks %q:\n%s", want, note)
		}
	}
}

// TestFreeAddrAvoidsTheEphemeralRange: the addresses given to contenders
// are outside the range the kernel picks outgoing connections' source
// ports from, so that none is taken between the pick and the bind.
func TestFreeAddrAvoidsTheEphemeralRange(t *testing.T) {
	for in, want := range map[string]int{"32768\t60999\n": 32768, "40000 50000": 40000, "": 32768, "junk": 32768} {
		if got := parseEphemeralLow(in); got != want {
			t.Errorf("parseEphemeralLow(%q) = %d, want %d", in, got, want)
		}
	}
	low := ephemeralLow()
	for range 20 {
		addr, err := freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(port); low > minPort && (p < minPort || p >= low) {
			t.Errorf("freeAddr = %s, want a port in [%d, %d)", addr, minPort, low)
		}
	}
}

// TestSavePartialKeepsWhatWasMeasured: a run that fails in its last
// scenario still leaves its samples and a report that says it is
// incomplete (here the committed run, cut before its failover trials and
// its last converge samples).
func TestSavePartialKeepsWhatWasMeasured(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmarks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	r.migrate()
	r.Failover, r.Backlog = nil, nil
	r.Converge = r.Converge[:len(r.Converge)-2]
	kept := len(r.Converge)
	b := &bench{began: time.Now().Add(-time.Hour), res: &r}
	dir := t.TempDir()
	b.savePartial(dir, nil, errors.New("failover, handroll-warm-standby, SIGTERM, round 1: exited"))

	data, err = os.ReadFile(filepath.Join(dir, "benchmarks.json"))
	if err != nil {
		t.Fatalf("no benchmarks.json saved: %v", err)
	}
	var saved Results
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Fatal(err)
	}
	if len(saved.Converge) != kept {
		t.Errorf("saved %d converge samples, want %d", len(saved.Converge), kept)
	}
	md, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Incomplete: the run stopped with an error after 1:00:00") || !strings.Contains(string(md), "SIGTERM, round 1: exited") {
		t.Errorf("the report does not say it is incomplete, nor why")
	}

	empty := t.TempDir()
	(&bench{began: time.Now(), res: &Results{}}).savePartial(empty, nil, errors.New("build failed"))
	if _, err := os.Stat(filepath.Join(empty, "benchmarks.json")); !os.IsNotExist(err) {
		t.Errorf("a run that measured nothing saved a report: %v", err)
	}
}

// The projection to projectedN follows, round by round, the line through
// each contender's figures at the two largest sizes, and says at which N
// handroll's peak RSS would reach the chart's memory limit.
func TestProjectionFollowsTheLineThroughTheTwoLargestSizes(t *testing.T) {
	g := Regime{200, 300}
	r := &Results{Contenders: []string{"handroll", "floor"}, Config: Config{Sizes: []int{1000, 10000}, Regimes: []Regime{g},
		Cells: []Cell{{1000, g}, {10000, g}}, Rounds: 3}}
	for round := 1; round <= 3; round++ {
		for _, c := range r.Config.Cells {
			n := float64(c.N)
			// handroll: 40 MiB, and 10, 11, 12 KiB per WebApp in rounds 1 to 3;
			// the floor: a flat 30 MiB.
			r.Converge = append(r.Converge,
				ConvergeSample{Contender: "handroll", Round: round, Cell: c, ConvergedPeakRSSBytes: 40<<20 + int64(n)*int64(9+round)<<10,
					CPUSeconds: n * 0.001, Requests: map[string]float64{"POST": 4 * n, "GET": n}},
				ConvergeSample{Contender: "floor", Round: round, Cell: c, ConvergedPeakRSSBytes: 30 << 20,
					CPUSeconds: n * 0.0005, Requests: map[string]float64{"POST": 3 * n}})
		}
	}
	md := r.markdown()
	for _, want := range []string{
		"### Projected to N = 100000",
		// 40 MiB + 100000 × 11 KiB; 10 and 12 KiB in the other rounds.
		"| peak RSS (VmHWM) once converged, at N = 100000 | 1114.2 MiB (1016.6 MiB–1211.9 MiB) | not run | not run | 30.0 MiB |",
		"| CPU (process start → converged), at N = 100000 | 100.0 s | not run | not run | 50.00 s | 2.00 |",
		// 5 and 3 requests per WebApp × 100000 ÷ 200 QPS.
		"| its client's rate limit alone, at N = 100000: N × requests per WebApp at N = 10000 ÷ 200 QPS | 2500.0 s | not run | not run | 1500.0 s | 1.67 |",
		// (256 − 40) MiB ÷ 11 KiB = 20107.6, to the hundred; 18432 and 22118.4.
		"| N at which peak RSS reaches 256 MiB, the chart's memory limit | 20100 (18400–22100) | not run | not run | n/a: caches nothing |",
		// 40 MiB + 10000 × 11 KiB; 10 and 12 KiB in the other rounds.
		"| peak RSS once converged ≤ 250 MiB at N = 10000 (QPS 200, burst 300) | 147.4 MiB (137.7 MiB–157.2 MiB) | yes |",
		"| peak RSS once converged ≤ 90 MiB at N = 3000 (QPS 200, burst 300) | not run | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks\n%s\nin:\n%s", want, md)
		}
	}

	// Measured at or beyond projectedN: nothing to project.
	for i := range r.Converge {
		if r.Converge[i].N == 10000 {
			r.Converge[i].N = projectedN
		}
	}
	r.Config.Sizes, r.Config.Cells = []int{1000, projectedN}, []Cell{{1000, g}, {projectedN, g}}
	if md := r.markdown(); strings.Contains(md, "### Projected") {
		t.Errorf("a run at N = %d projects to it:\n%s", projectedN, md)
	}
}
