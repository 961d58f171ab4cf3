package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Regime is the client limits every contender of a measurement gets:
// --kube-api-qps and --kube-api-burst.
type Regime struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

func (r Regime) String() string {
	return strconv.FormatFloat(r.QPS, 'g', -1, 64) + "/" + strconv.Itoa(r.Burst)
}

// Title is how the report names the regime.
func (r Regime) Title() string {
	return fmt.Sprintf("QPS %s, burst %d", strconv.FormatFloat(r.QPS, 'g', -1, 64), r.Burst)
}

// Cell is one size in one regime.
type Cell struct {
	N int `json:"n"`
	Regime
}

func (c Cell) String() string { return fmt.Sprintf("N = %d at %s", c.N, c.Title()) }

// regimeSpec is one entry of -regimes: a regime and, after '@', the sizes
// it runs at (none: the default rule of plan).
type regimeSpec struct {
	Regime
	sizes []int
}

// parseSizes parses a comma-separated list of sizes into ascending order.
func parseSizes(s, sep string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, sep) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("size %q: want a positive integer", f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("size %d given twice", n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// parseRegimes parses "QPS/BURST[@N+N...],...", such as "20/30@300,200/300".
func parseRegimes(s string) ([]regimeSpec, error) {
	var out []regimeSpec
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		limits, sizes, hasSizes := strings.Cut(f, "@")
		q, b, ok := strings.Cut(limits, "/")
		qps, qErr := strconv.ParseFloat(q, 64)
		burst, bErr := strconv.Atoi(b)
		if !ok || qErr != nil || bErr != nil || qps <= 0 || math.IsInf(qps, 0) || burst < 1 {
			return nil, fmt.Errorf("regime %q: want QPS/BURST, both positive, such as 20/30", f)
		}
		spec := regimeSpec{Regime: Regime{QPS: qps, Burst: burst}}
		if hasSizes {
			var err error
			if spec.sizes, err = parseSizes(sizes, "+"); err != nil {
				return nil, fmt.Errorf("regime %q: %w", f, err)
			}
		}
		if slices.ContainsFunc(out, func(o regimeSpec) bool { return o.Regime == spec.Regime }) {
			return nil, fmt.Errorf("regime %s given twice", spec.Regime)
		}
		out = append(out, spec)
	}
	return out, nil
}

// scaleRegime is the regime with the highest QPS (the last of equals): the
// one in which the API server and the CPU, not the client's limits, set
// the pace, so the one that runs every size.
func scaleRegime(specs []regimeSpec) Regime {
	best := specs[0].Regime
	for _, s := range specs[1:] {
		if s.QPS >= best.QPS {
			best = s.Regime
		}
	}
	return best
}

// Plan is which measurement runs at which size and regime.
type Plan struct {
	// Cells get the per-size measurements: converge and cold start.
	Cells []Cell
	// IdleCells, the largest size of each regime, get idle as well: idle
	// writes, if any, grow with N, and 30 s at every size would cost
	// minutes the budget does not have.
	IdleCells []Cell
	// Unrelated is where the unrelated-objects scenario runs; nil: skipped.
	Unrelated *Cell
	// Backlog cells get the live-edits scenario.
	Backlog []Cell
	// Failover is where the failover trials run; nil: skipped.
	Failover *Cell
}

// plan applies the default rule: a regime given without '@' runs every -n
// if it is the scale regime, else only the smallest -n (at QPS 20, 3000
// WebApps alone would take about 25 minutes per contender). The scenarios
// run in the scale regime: unrelated objects at its smallest size, failover
// at -failover-n, the backlog at -backlog-n (in -backlog-regimes if given).
func (o *options) plan() Plan {
	scale := scaleRegime(o.regimes)
	var p Plan
	for _, spec := range o.regimes {
		sizes := spec.sizes
		if sizes == nil {
			sizes = o.sizes[:1]
			if spec.Regime == scale {
				sizes = o.sizes
			}
		}
		for _, n := range sizes {
			p.Cells = append(p.Cells, Cell{N: n, Regime: spec.Regime})
		}
		p.IdleCells = append(p.IdleCells, Cell{N: sizes[len(sizes)-1], Regime: spec.Regime})
	}
	if o.unrelated > 0 {
		smallest := 0
		for _, c := range p.Cells {
			if c.Regime == scale && (smallest == 0 || c.N < smallest) {
				smallest = c.N
			}
		}
		if smallest == 0 {
			smallest = o.sizes[0]
		}
		p.Unrelated = &Cell{N: smallest, Regime: scale}
	}
	if o.backlogN > 0 {
		regimes := o.backlogRegimes
		if len(regimes) == 0 {
			regimes = []Regime{scale}
		}
		for _, r := range regimes {
			p.Backlog = append(p.Backlog, Cell{N: o.backlogN, Regime: r})
		}
	}
	if !o.skipFailover {
		p.Failover = &Cell{N: o.failoverN, Regime: scale}
	}
	return p
}

// Phase kinds, in the order they run.
const (
	phaseBuild     = "build"
	phaseSetup     = "setup"
	phaseUnrelated = "unrelated"
	phaseCell      = "cell"
	phaseBacklog   = "backlog"
	phaseFailover  = "failover"
	phaseSharding  = "sharding"
)

// Phase is one step of a run, with the cost model's estimate and, once
// run, what it took.
type Phase struct {
	Kind             string  `json:"kind"`
	Name             string  `json:"name"`
	Cell             *Cell   `json:"cell,omitempty"`
	EstimatedSeconds float64 `json:"estimatedSeconds"`
	Seconds          float64 `json:"seconds,omitempty"`
}

// The cost model of the estimate, fitted to runs on 2 shared cores (N =
// 300 to 3000 at QPS 200, the API server the limit from about 1000 on). It
// is rough on purpose: it is there to tell whether a plan fits, and each
// phase's real time is printed and kept beside it to refit it.
var estRequests = map[string]float64{ // requests per WebApp to converge
	contenderHandroll:  5,
	contenderTwin:      9,
	contenderTwinTuned: 9.5,
	contenderFloor:     3.5,
}

const (
	estServerRate    = 130.0 // requests/s the local API server gives one client, at most
	estCreateRate    = 200.0 // WebApps/s the bench creates
	estWipeRate      = 70.0  // WebApps/s the bench deletes, children included
	estUnrelatedRate = 110.0 // unrelated objects/s the bench creates or deletes
	estStart         = 4 * time.Second
	estColdStart     = 4 * time.Second // to /readyz over 3000 converged WebApps
	estBuild         = 45 * time.Second
	estSetup         = 15 * time.Second
	estFailoverTrial = 6 * time.Second
	// With the cluster's controllers (-controllers) each WebApp also costs a
	// ReplicaSet and a pod, scheduled, started by kwok and reported ready,
	// then deleted again in the wipe, all on the same cores: the cluster
	// sets a pace no contender beats. Fitted to one round at N = 1000 and
	// 3000 without the endpoints controllers: 13 WebApps/s to converge at
	// 3000 (the floor 14.6, the twin 12.7; 17 to 18 at 1000), and 60/s to
	// wipe.
	estClusterRate     = 13.0
	estClusterWipeRate = 60.0
)

// estModel is the cost model of one plan.
type estModel struct{ controllers bool }

func perSecond(n float64, rate float64) time.Duration {
	return time.Duration(n / rate * float64(time.Second))
}

// times is n × d.
func times(n int, d time.Duration) time.Duration { return time.Duration(n) * d }

// converge is the time a contender takes to converge c.N WebApps: its
// requests at what the API server gives it, or the cluster's own pace.
func (m estModel) converge(contender string, c Cell) time.Duration {
	d := perSecond(float64(c.N)*estRequests[contender], min(c.QPS, estServerRate))
	if m.controllers {
		d = max(d, perSecond(float64(c.N), estClusterRate))
	}
	return d
}

// measurement is what one converge measurement costs beyond converging:
// start, creation, settling, clean-up.
func (m estModel) measurement(n int) time.Duration {
	wipe := estWipeRate
	if m.controllers {
		wipe = estClusterWipeRate
	}
	return estStart + perSecond(float64(n), estCreateRate) + perSecond(float64(n), wipe) + settleQuiet
}

// phases lists the plan's phases with their estimates.
func (o *options) phases(p Plan, contenders []string) []Phase {
	if o.sharding {
		return o.shardingPhases()
	}
	operators := slices.DeleteFunc(slices.Clone(contenders), func(c string) bool { return c == "floor" })
	rounds := o.rounds
	m := estModel{controllers: o.controllers}
	out := []Phase{
		{Kind: phaseBuild, Name: "build the contenders", EstimatedSeconds: estBuild.Seconds()},
		{Kind: phaseSetup, Name: "start the control plane, warm the API server up", EstimatedSeconds: estSetup.Seconds()},
	}
	if c := p.Unrelated; c != nil {
		objects := float64(3 * o.unrelated)
		est := 2 * perSecond(objects, estUnrelatedRate)
		for _, name := range operators {
			est += times(rounds, m.converge(name, *c)+m.measurement(c.N))
		}
		out = append(out, Phase{Kind: phaseUnrelated, Cell: c, EstimatedSeconds: est.Seconds(),
			Name: fmt.Sprintf("unrelated objects: %d each of ConfigMaps, Deployments, Services; converge %s", o.unrelated, c)})
	}
	for _, c := range p.Cells {
		var est time.Duration
		idle := slices.Contains(p.IdleCells, c)
		for _, name := range contenders {
			est += m.converge(name, c) + m.measurement(c.N)
			if name != "floor" {
				est += estColdStart + o.coldWindow
				if idle {
					est += o.idle
				}
			}
		}
		what := "converge, cold start"
		if idle {
			what = "converge, idle, cold start"
		}
		out = append(out, Phase{Kind: phaseCell, Cell: &c, EstimatedSeconds: times(rounds, est).Seconds(),
			Name: fmt.Sprintf("%s: %s", what, c)})
	}
	for _, c := range p.Backlog {
		var est time.Duration
		for _, name := range operators {
			est += m.converge(name, c) + m.measurement(c.N) + times(o.edits, o.editInterval)
		}
		out = append(out, Phase{Kind: phaseBacklog, Cell: &c, EstimatedSeconds: times(rounds, est).Seconds(),
			Name: fmt.Sprintf("live edits while a backlog drains: %s, %d edits", c, o.edits)})
	}
	if c := p.Failover; c != nil && len(operators) > 0 {
		// One WebApp set per operator, converged once; two trials (SIGKILL,
		// SIGTERM) per variant and round.
		var est time.Duration
		variants := 0
		for _, name := range operators {
			est += m.converge(name, *c) + perSecond(float64(c.N), estCreateRate)
			variants++
			if name == "handroll" {
				variants++ // without warm standby
			}
		}
		est += times(rounds*2*variants, estFailoverTrial)
		out = append(out, Phase{Kind: phaseFailover, Cell: c, EstimatedSeconds: est.Seconds(),
			Name: fmt.Sprintf("failover: %s, %d variants × SIGKILL, SIGTERM", c, variants)})
	}
	return out
}

// totalEstimate sums the phases' estimates.
func totalEstimate(phases []Phase) time.Duration {
	var s float64
	for _, p := range phases {
		s += p.EstimatedSeconds
	}
	return time.Duration(s * float64(time.Second))
}

// validatePlan catches what parseRegimes cannot see alone.
func (o *options) validatePlan() error {
	var errs []error
	if o.backlogN > 0 && o.edits > o.backlogN {
		errs = append(errs, fmt.Errorf("-edits %d: more than the %d WebApps of the backlog (each edit is to a different one)", o.edits, o.backlogN))
	}
	return errors.Join(errs...)
}

// clusterControllerArgs lift kube-controller-manager's and the
// scheduler's client limits (QPS 20 and 50 by default) as a large
// cluster's operators do: at the defaults, a few requests per pod at QPS
// 20 would make the cluster's own controllers, not the contenders, set
// the time to Ready.
var clusterControllerArgs = []string{"--kube-api-qps=500", "--kube-api-burst=1000"}

// clusterDisabledControllers are kube-controller-manager's controllers the
// bench's cluster does without: those of the Services' endpoints. No
// contender reads an Endpoints object or an EndpointSlice, and a WebApp's
// Ready waits only for its Deployment; yet they write several times per
// WebApp as its pod starts, on the same 2 cores as the contenders (the
// floor at N = 1000, one run each: 76 s to converge with them, 47 s
// without).
var clusterDisabledControllers = []string{"endpoints-controller", "endpointslice-controller", "endpointslice-mirroring-controller"}

// podsPerFakeNode is how many pods a kwok node takes (test/controlplane's
// node capacity).
const podsPerFakeNode = 250

// fakeNodes is how many kwok nodes hold the most pods any measurement
// has at once, with one to spare: every WebApp has one replica, and an
// edit makes it two.
func (o *options) fakeNodes() int {
	pods := max(slices.Max(o.sizes), o.backlogN+o.edits, o.unrelated, o.failoverN)
	if o.sharding {
		pods = o.shardingN
	}
	return (pods+podsPerFakeNode-1)/podsPerFakeNode + 1
}
