package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{3, 2, "1.50"},
		{1, 3, "0.33"},
		{2, 3, "0.67"},
		{0, 5, "0.00"},
		{5, 0, "—"},
		{0, 0, "—"},
		{math.NaN(), 1, "—"},
		{1, math.NaN(), "—"},
	} {
		if got := ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tc.a, tc.b, got, tc.want)
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

// The table shows medians and their ratios, and says which measures do not
// apply to the floor and which contender did not run, rather than print a
// number for them.
func TestMarkdown(t *testing.T) {
	idle := func(v float64) *float64 { return &v }
	r := &Results{
		Contenders: []string{"handroll", "floor"},
		Config:     Config{WebApps: 100, Namespaces: 10, Rounds: 3, IdleSeconds: 30, QPS: 20, Burst: 30, Workers: 4},
		Converge: []ConvergeSample{
			{Contender: "handroll", Round: 1, ConvergeSeconds: 30, Requests: map[string]float64{"PATCH": 400}, IdleWrites: idle(0), IdleCPUSeconds: idle(0.1)},
			{Contender: "handroll", Round: 2, ConvergeSeconds: 10, Requests: map[string]float64{"PATCH": 400}, IdleWrites: idle(2), IdleCPUSeconds: idle(0.1)},
			{Contender: "handroll", Round: 3, ConvergeSeconds: 20, Requests: map[string]float64{"PATCH": 400}, IdleWrites: idle(0), IdleCPUSeconds: idle(0.1)},
			{Contender: "floor", Round: 1, ConvergeSeconds: 8, Requests: map[string]float64{"PATCH": 350}},
			{Contender: "floor", Round: 2, ConvergeSeconds: 10, Requests: map[string]float64{"PATCH": 350}},
			{Contender: "floor", Round: 3, ConvergeSeconds: 9, Requests: map[string]float64{"PATCH": 350}},
		},
	}
	md := r.markdown()
	for _, want := range []string{
		"| converge (N WebApps created → all converged) | 20.00 s | not run | 9.00 s | — | 2.22 |",
		"| API requests during converge: PATCH | 400 | not run | 350 | — | 1.14 |",
		"| idle writes (during -idle, nothing changing) | 0 | not run | " + floorIdle + " | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks the row\n%s\nin:\n%s", want, md)
		}
	}
	if strings.Contains(md, "## Failover") {
		t.Error("a failover table without failover samples")
	}

	r.Contenders = append(r.Contenders, "twin")
	for round, secs := range []float64{0.2, 0.1, 0.3} {
		r.Failover = append(r.Failover,
			FailoverSample{Variant: variantHandrollWarm, Signal: "SIGKILL", Round: round + 1, KillToWriteSeconds: 4 + secs, AcquireToWriteSeconds: secs},
			FailoverSample{Variant: variantTwin, Signal: "SIGKILL", Round: round + 1, KillToWriteSeconds: 4 + 2*secs, AcquireToWriteSeconds: 2 * secs})
	}
	md = r.markdown()
	for _, want := range []string{
		"| measure | handroll (warm standby, default) | twin (defaults) | handroll/twin |",
		"| SIGKILL: Lease acquired → first write | 200 ms | 400 ms | 0.50 |",
		"| SIGTERM: Lease acquired → first write | — | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks the row\n%s\nin:\n%s", want, md)
		}
	}
}

// -render rewrites the Markdown from the JSON alone.
func TestRerender(t *testing.T) {
	dir := t.TempDir()
	r := &Results{Contenders: []string{"floor"}, Config: Config{WebApps: 7, Rounds: 3}, ColdStart: []ColdStartSample{{Contender: "floor", Round: 1, Seconds: 0.05}}}
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "benchmarks.md")); err != nil {
		t.Fatal(err)
	}
	if err := rerender(filepath.Join(dir, "benchmarks.json")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != r.markdown() {
		t.Errorf("rerendered Markdown differs from the original:\n%s\nwant:\n%s", got, r.markdown())
	}
}
