package main

import (
	"fmt"
	"math"
	"slices"
)

// Goals handroll is held to.
const (
	goalN                  = 1000
	goalNonEventRequests   = 3.6
	goalEvents             = 1.0
	goalUnrelatedGrowthMiB = 5.0
	goalEditP99Seconds     = 1.0
	goalPeakRSSSlopeKiB    = 15.0
	goalLiveHeapSlopeKiB   = 6.0
	goalCPUSlopeRatio      = 1.3
	goalCPURatio           = 1.3  // CPU to converge, handroll ÷ floor, at each of goalSizes
	goalServerCPURatio     = 1.2  // API server + etcd CPU per WebApp, handroll ÷ floor
	goalCPUGrowth          = 1.15 // CPU per WebApp at goalLargeN ÷ at goalN
	goalLiveHeapPerAppKiB  = 3.0  // at goalLargeN
	goalColdStartSeconds   = 3.0  // at goalLargeN
	goalLargeN             = 10000
	scaleSVGName           = "benchmarks-scale.svg"
	scaleSVGAlt            = "Converge time and peak RSS against N, one line per contender"
	percentileHigh         = 99
	percentileLow          = 50
)

// goalSizes are the sizes whose ratios to the floor have a goal each: a
// cost that grows faster than the floor's shows as a ratio that grows
// with N.
var goalSizes = []int{goalN, 3000, goalLargeN}

// met says whether v is at most goal; "—" when v is missing.
func met(v, goal float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return metOrNot(v <= goal)
}

func metOrNot(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// notRun and notMeasured are goal rows without a figure: the size or
// contender was not in the run, or the run did not record the figure (a
// benchmarks.json from before it was measured).
func notRun(label string) [3]string      { return [3]string{label, "not run", "—"} }
func notMeasured(label string) [3]string { return [3]string{label, "not measured", "—"} }

// goals are handroll's targets, each with the figure, its spread over
// rounds, and whether its median is met.
func (r *Results) goals() [][3]string {
	if !slices.Contains(r.Contenders, contenderHandroll) {
		return nil
	}
	var out [][3]string
	if g, ok := r.plotRegime(); ok {
		out = append(out, r.requestGoals(g)...)
		out = append(out, r.floorGoals(g)...)
		out = append(out, r.largeNGoals(g)...)
		out = append(out, r.peakRSSGoals(g)...)
	}
	out = append(out, r.slopeGoals()...)
	out = append(out, r.zeroGoals()...)
	return append(out, r.scenarioGoals()...)
}

// requestGoals are the requests per new WebApp at goalN.
func (r *Results) requestGoals(g Regime) [][3]string {
	cell := Cell{N: goalN, Regime: g}
	var out [][3]string
	for _, goal := range []struct {
		label string
		limit float64
		f     func(ConvergeSample) float64
	}{
		{"non-event requests", goalNonEventRequests, func(s ConvergeSample) float64 { return total(s.Requests) - s.EventWrites }},
		{"event", goalEvents, func(s ConvergeSample) float64 { return s.EventWrites }},
	} {
		label := fmt.Sprintf("≤ %g %s per new WebApp at N = %d (%s)", goal.limit, goal.label, goalN, g.Title())
		vs := figures(convergeValues(r, cell, false, perApp(goal.f))(contenderHandroll))
		if len(vs) == 0 {
			out = append(out, notRun(label))
			continue
		}
		out = append(out, [3]string{label, withSpread(vs, unitPerApp), met(median(vs), goal.limit)})
	}
	return out
}

// floorGoals are handroll's costs against the floor's at each of
// goalSizes: its own CPU to converge, and the API server's and etcd's.
func (r *Results) floorGoals(g Regime) [][3]string {
	var out [][3]string
	for _, n := range goalSizes {
		out = append(out, r.floorRatioGoal(fmt.Sprintf("CPU to converge (process start → converged), handroll ÷ floor ≤ %g× at N = %d (%s)", goalCPURatio, n, g.Title()),
			Cell{N: n, Regime: g}, always(func(s ConvergeSample) float64 { return s.CPUSeconds }), goalCPURatio))
	}
	for _, n := range goalSizes {
		out = append(out, r.floorRatioGoal(fmt.Sprintf("API server + etcd CPU per WebApp, handroll ÷ floor ≤ %g× at N = %d (%s)", goalServerCPURatio, n, g.Title()),
			Cell{N: n, Regime: g}, perAppIf(ConvergeSample.serverCPU), goalServerCPURatio))
	}
	return out
}

// floorRatioGoal is handroll's f ÷ the floor's in cell, paired by round.
func (r *Results) floorRatioGoal(label string, cell Cell, f func(ConvergeSample) (float64, bool), limit float64) [3]string {
	if len(r.converges(cell, contenderHandroll, false)) == 0 || len(r.converges(cell, contenderFloor, false)) == 0 {
		return notRun(label)
	}
	h, fl := convergeValues(r, cell, false, f)(contenderHandroll), convergeValues(r, cell, false, f)(contenderFloor)
	if len(h) == 0 || len(fl) == 0 {
		return notMeasured(label)
	}
	return ratioGoal(label, h, fl, contenderFloor, limit)
}

// ratioGoal is the paired ratio of of to to against limit.
func ratioGoal(label string, of, to []sample, den string, limit float64) [3]string {
	qs, why := pairedRatios(of, to, den)
	if why != "" {
		return [3]string{label, why, "—"}
	}
	return [3]string{label, withSpread(qs, unitTimes), met(median(qs), limit)}
}

// largeNGoals are those at goalLargeN: whether the CPU per WebApp stays
// flat from goalN, the live heap per WebApp, and the cold start.
func (r *Results) largeNGoals(g Regime) [][3]string {
	h := contenderHandroll
	small, large := Cell{N: goalN, Regime: g}, Cell{N: goalLargeN, Regime: g}
	cpu := perApp(func(s ConvergeSample) float64 { return s.CPUSeconds })
	out := make([][3]string, 3)

	label := fmt.Sprintf("CPU per WebApp at N = %d ÷ at N = %d ≤ %g (%s)", goalLargeN, goalN, goalCPUGrowth, g.Title())
	if a, b := convergeValues(r, large, false, cpu)(h), convergeValues(r, small, false, cpu)(h); len(a) == 0 || len(b) == 0 {
		out[0] = notRun(label)
	} else {
		out[0] = ratioGoal(label, a, b, fmt.Sprintf("N = %d", goalN), goalCPUGrowth)
	}

	label = fmt.Sprintf("live heap per WebApp (gctrace's whole MB ÷ N) ≤ %g KiB at N = %d (%s)", goalLiveHeapPerAppKiB, goalLargeN, g.Title())
	heap := perAppIf(func(s ConvergeSample) (float64, bool) {
		return float64(s.ConvergedLiveHeapBytes), s.ConvergedLiveHeapBytes > 0
	})
	switch vs := figures(convergeValues(r, large, false, heap)(h)); {
	case len(r.converges(large, h, false)) == 0:
		out[1] = notRun(label)
	case len(vs) == 0:
		out[1] = notMeasured(label)
	default:
		out[1] = [3]string{label, withSpread(vs, unitKiB), met(median(vs), goalLiveHeapPerAppKiB*1024)}
	}

	label = fmt.Sprintf("cold start to /readyz ≤ %s at N = %d (%s)", formatSeconds(goalColdStartSeconds), goalLargeN, g.Title())
	if vs := figures(coldValues(r, large, func(s ColdStartSample) float64 { return s.ReadySeconds })(h)); len(vs) == 0 {
		out[2] = notRun(label)
	} else {
		out[2] = [3]string{label, withSpread(vs, unitSeconds), met(median(vs), goalColdStartSeconds)}
	}
	return out
}

// goalPeakRSS are the peak RSS, once converged, handroll keeps within at
// these sizes.
var goalPeakRSS = []struct {
	n   int
	mib float64
}{{3000, 90}, {goalLargeN, 250}}

// peakRSSGoals are handroll's peak RSS once converged against goalPeakRSS.
func (r *Results) peakRSSGoals(g Regime) [][3]string {
	var out [][3]string
	for _, goal := range goalPeakRSS {
		label := fmt.Sprintf("peak RSS once converged ≤ %g MiB at N = %d (%s)", goal.mib, goal.n, g.Title())
		rss := always(func(s ConvergeSample) float64 { return mib(s.ConvergedPeakRSSBytes) })
		vs := figures(convergeValues(r, Cell{N: goal.n, Regime: g}, false, rss)(contenderHandroll))
		if len(vs) == 0 {
			out = append(out, notRun(label))
			continue
		}
		out = append(out, [3]string{label, withSpread(vs, unitMiB), met(median(vs), goal.mib)})
	}
	return out
}

// slopeGoals are the goals on the marginal costs (slopeRows) of the plot
// regime: memory per WebApp, and CPU per WebApp against the floor's.
func (r *Results) slopeGoals() [][3]string {
	g, ok := r.plotRegime()
	if !ok {
		return nil
	}
	n1, n2, rows := r.slopeRows(g)
	if len(rows) == 0 {
		return nil
	}
	span := fmt.Sprintf("from N = %d to %d (%s)", n1, n2, g.Title())
	var out [][3]string
	for _, goal := range []struct {
		label string
		row   row
		limit float64 // bytes
	}{
		{fmt.Sprintf("peak RSS ≤ %g KiB per WebApp more, %s", goalPeakRSSSlopeKiB, span), rows[0], goalPeakRSSSlopeKiB * 1024},
		{fmt.Sprintf("live heap ≤ %g KiB per WebApp more, %s", goalLiveHeapSlopeKiB, span), rows[1], goalLiveHeapSlopeKiB * 1024},
	} {
		v := figures(goal.row.values(contenderHandroll))
		if len(v) == 0 {
			out = append(out, notMeasured(goal.label))
			continue
		}
		out = append(out, [3]string{goal.label, withSpread(v, unitKiB), met(median(v), goal.limit)})
	}
	h, f := rows[2].values(contenderHandroll), rows[2].values(contenderFloor)
	label := fmt.Sprintf("CPU per WebApp more ≤ %g× the floor's, %s", goalCPUSlopeRatio, span)
	if len(h) == 0 || len(f) == 0 {
		return append(out, notMeasured(label))
	}
	goal := ratioGoal(label, h, f, contenderFloor, goalCPUSlopeRatio)
	goal[1] += fmt.Sprintf("; %s against %s", format(median(figures(h)), unitCPUPerApp), format(median(figures(f)), unitCPUPerApp))
	return append(out, goal)
}

// zeroGoals hold for every sample, not the median: no idle writes, and
// none after a restart.
func (r *Results) zeroGoals() [][3]string {
	h := contenderHandroll
	out := [][3]string{worst("0 idle writes, every size and regime", func(yield func(Cell, float64)) {
		for _, s := range r.Converge {
			if s.Contender == h && s.IdleWrites != nil {
				yield(s.Cell, *s.IdleWrites)
			}
		}
	})}
	if len(r.ColdStart) > 0 {
		out = append(out, worst(fmt.Sprintf("0 writes in the %s after /readyz on a restart over converged WebApps", seconds(r.Config.ColdStartWindowSeconds)), func(yield func(Cell, float64)) {
			for _, s := range r.ColdStart {
				if s.Contender == h {
					yield(s.Cell, s.WritesAfterReady)
				}
			}
		}))
	}
	return out
}

// worst is a zero goal's row: the largest of values, and where.
func worst(label string, values func(yield func(Cell, float64))) [3]string {
	var (
		largest = math.Inf(-1)
		where   Cell
		n       int
	)
	values(func(c Cell, v float64) {
		n++
		if v > largest {
			largest, where = v, c
		}
	})
	switch {
	case n == 0:
		return notMeasured(label)
	case largest == 0 && n == 1:
		return [3]string{label, "0 (one sample)", "yes"}
	case largest == 0:
		return [3]string{label, fmt.Sprintf("0 in all %d samples", n), "yes"}
	}
	return [3]string{label, fmt.Sprintf("%s (worst: %s)", format(largest, unitCount), where), "**no**"}
}

// scenarioGoals are those of the unrelated objects and the live edits.
func (r *Results) scenarioGoals() [][3]string {
	h := contenderHandroll
	var out [][3]string
	if c := r.Config.UnrelatedCell; c != nil {
		rss := always(func(s ConvergeSample) float64 { return mib(s.ConvergedPeakRSSBytes) })
		with := median(figures(convergeValues(r, *c, true, rss)(h)))
		without := median(figures(convergeValues(r, *c, false, rss)(h)))
		label := fmt.Sprintf("peak RSS grows ≤ %g MiB with %d unrelated objects of each kind, ConfigMaps of %d KiB%s (%s)",
			goalUnrelatedGrowthMiB, r.Config.Unrelated, r.Config.UnrelatedConfigMapBytes>>10, r.unrelatedApplied(), c)
		if math.IsNaN(with - without) {
			out = append(out, notMeasured(label))
		} else {
			out = append(out, [3]string{label, format(with-without, unitDeltaMiB), met(with-without, goalUnrelatedGrowthMiB)})
		}
	}
	for _, c := range r.backlogCells() {
		p99 := percentile(r.edits(c, h), percentileHigh)
		if math.IsNaN(p99) {
			continue
		}
		out = append(out, [3]string{fmt.Sprintf("p99 edit → Deployment ≤ %s while a backlog of %s drains", formatSeconds(goalEditP99Seconds), c), formatSeconds(p99), met(p99, goalEditP99Seconds)})
		if twin := percentile(r.edits(c, contenderTwin), percentileHigh); !math.IsNaN(twin) {
			out = append(out, [3]string{fmt.Sprintf("… and ≤ the twin's p99 (%s)", formatSeconds(twin)), formatSeconds(p99), metOrNot(p99 <= twin)})
		}
	}
	return out
}
