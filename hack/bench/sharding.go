package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"

	"github.com/handroll/handroll/pkg/shard"
)

// The sharding scenario (-sharding): handroll with --shards, one replica
// against three, at the same per-replica client budget, on the same
// WebApps. It runs on its own and writes docs/benchmarks-sharding.md.
const (
	shardingRanges     = 12
	shardingNamespaces = 30
	// shardingReplicas is the replica count compared with one.
	shardingReplicas = 3
	// shardingFeatureGate narrows each range's caches on the server.
	shardingFeatureGate = "--feature-gates=ShardedListAndWatch=true"
	// shardingIdleWindow is how long the requests of ready, balanced
	// replicas are counted before any WebApp exists: their Lease traffic.
	shardingIdleWindow = 6 * time.Second
	shardingPageName   = "benchmarks-sharding.md"
)

// handroll's own Lease timings: with 12 ranges, the bench's short failover
// timings would renew 24 Leases a second per replica.
const (
	shardLeaseDuration = 15 * time.Second
	shardRenewDeadline = 10 * time.Second
	shardRetryPeriod   = 2 * time.Second
)

// ShardRun is one measurement: replicas handroll processes converging N
// WebApps.
type ShardRun struct {
	Replicas        int
	ConvergeSeconds float64
	// RangeLoads are the WebApps of each range.
	RangeLoads []int
	// BalancedSeconds is from the start of the processes to every range
	// held and each replica at most ceil(ranges / replicas).
	BalancedSeconds float64
	PerReplica      []ShardReplica
}

// ShardReplica is one replica's figures in a run.
type ShardReplica struct {
	PeakRSSBytes int64
	CPUSeconds   float64
	// Requests are its requests from the WebApps' creation to the settle.
	Requests map[string]float64
	// IdleRequestsPerSecond is its rate before any WebApp existed (Leases).
	IdleRequestsPerSecond float64
	// MeasuredSeconds is the time Requests were counted over.
	MeasuredSeconds float64
	// Ranges are those it reconciled in the measurement, from its metrics;
	// RangesHeld is handroll_shard_ranges_held at its end.
	Ranges     []int
	RangesHeld int
	WebApps    int
	Reconciles float64
}

// ShardingResults is what the sharding page shows.
type ShardingResults struct {
	Machine             Machine
	Command             string
	Started             string
	Duration            string
	N                   int
	Regime              Regime
	Workers             int
	BaselinePeakRSSByte int64
	// Controllers says the cluster's controllers ran (-controllers).
	Controllers bool `json:",omitempty"`
	// DisabledControllers are kube-controller-manager's controllers that
	// did not run.
	DisabledControllers []string `json:",omitempty"`
	// Runs are the measurements in order: one replica, then
	// shardingReplicas, for each round.
	Runs  []ShardRun
	Notes []string
}

// shardGoals are one round's figures for the goals.
type shardGoals struct {
	busiest    float64 // the busiest replica's WebApps over its share
	speedup    float64 // throughput of shardingReplicas over one's
	worstShare float64 // the largest cache share over one replica's
	reqOne     float64 // requests per WebApp, one replica
	reqMany    float64 // summed over shardingReplicas
	netOne     float64 // the same less the Lease traffic
	netMany    float64
}

// goals computes a round's figures: one replica's run and many's.
func (r *ShardingResults) goals(one, many ShardRun) shardGoals {
	tput := func(run ShardRun) float64 { return float64(r.N) / run.ConvergeSeconds }
	oneShare := cacheShare(one.PerReplica[0].PeakRSSBytes, r.BaselinePeakRSSByte)
	g := shardGoals{
		speedup: tput(many) / tput(one),
		reqOne:  one.requests() / float64(r.N), reqMany: many.requests() / float64(r.N),
		netOne: (one.requests() - one.leaseRequests()) / float64(r.N), netMany: (many.requests() - many.leaseRequests()) / float64(r.N),
	}
	busiest := 0
	for _, rep := range many.PerReplica {
		busiest = max(busiest, rep.WebApps)
		g.worstShare = max(g.worstShare, cacheShare(rep.PeakRSSBytes, r.BaselinePeakRSSByte)/oneShare)
	}
	g.busiest = float64(busiest) / (float64(r.N) / shardingReplicas)
	return g
}

// rounds pairs the runs: [one, many] per round.
func (r *ShardingResults) rounds() [][2]ShardRun {
	var out [][2]ShardRun
	for i := 0; i+1 < len(r.Runs); i += 2 {
		out = append(out, [2]ShardRun{r.Runs[i], r.Runs[i+1]})
	}
	return out
}

func (r ShardRun) requests() float64 {
	var s float64
	for _, p := range r.PerReplica {
		s += total(p.Requests)
	}
	return s
}

// leaseRequests estimates the run's Lease traffic during the measurement:
// each replica's idle rate over the time its requests were counted.
func (r ShardRun) leaseRequests() float64 {
	var s float64
	for _, p := range r.PerReplica {
		s += p.IdleRequestsPerSecond * p.MeasuredSeconds
	}
	return s
}

// settleOver is settle for a sharded replica, whose Leases keep its
// counters moving: it waits until, over settleQuiet, they moved by no more
// than the idle rate explains (with half again and one request of slack),
// at most settleMax.
func (b *bench) settleOver(ctx context.Context, p *proc, idleRate float64) (map[string]float64, error) {
	last, err := p.requests()
	if err != nil {
		return nil, err
	}
	allowance := idleRate*settleQuiet.Seconds()*1.5 + 1
	for deadline := time.Now().Add(settleMax); time.Now().Before(deadline); {
		if err := sleep(ctx, settleQuiet); err != nil {
			return nil, err
		}
		now, err := p.requests()
		if err != nil {
			return nil, err
		}
		moved := total(now) - total(last)
		last = now
		if moved <= allowance {
			break
		}
	}
	return last, nil
}

// cacheShare is peak RSS less the idle operator's.
func cacheShare(peak, baseline int64) float64 { return mib(peak - baseline) }

// shardingPhases is the scenario's plan.
func (o *options) shardingPhases() []Phase {
	c := Cell{N: o.shardingN, Regime: o.shardingRegime}
	m := estModel{controllers: o.controllers}
	one := m.converge(contenderHandroll, c)
	// Three budgets, less the median imbalance of 600 uids (docs/sharding.md).
	three := time.Duration(float64(one) / shardingReplicas * 1.05)
	round := 2*(estStart+shardingIdleWindow) + 2*m.measurement(c.N) + one + three
	est := estStart + shardingIdleWindow + times(o.shardingRounds, round)
	return []Phase{
		{Kind: phaseBuild, Name: "build handroll and the floor", EstimatedSeconds: estBuild.Seconds()},
		{Kind: phaseSetup, Name: "start the control plane (" + shardingFeatureGate + "), warm the API server up", EstimatedSeconds: estSetup.Seconds()},
		{Kind: phaseSharding, Cell: &c, EstimatedSeconds: est.Seconds(),
			Name: fmt.Sprintf("sharding: idle baseline, then %d round(s) of 1 and %d replicas with --shards=%d converging %s over %d namespaces", o.shardingRounds, shardingReplicas, shardingRanges, c, shardingNamespaces)},
	}
}

// shardNamespaces are the scenario's namespaces, named as -sharding-names
// says: numbered at the end as people number them (bench-shard-3-team-00
// to -team-29), which put every WebApp in one range of 12 when the split
// hashed namespaces, or with random suffixes.
func (b *bench) shardNamespaces(label string) []string {
	out := make([]string, shardingNamespaces)
	for i := range out {
		out[i] = fmt.Sprintf("%s%s-team-%02d", namespacePrefix, label, i)
		if b.o.shardingNames == shardingNamesRandom {
			out[i] = fmt.Sprintf("%s%s-%s", namespacePrefix, label, strings.ToLower(rand.Text()[:8]))
		}
	}
	return out
}

// The values of -sharding-names.
const (
	shardingNamesNumbered = "numbered"
	shardingNamesRandom   = "random"
)

// rangeLoads counts the WebApps of each range: uids by key.
func rangeLoads(uids map[string]types.UID, ranges int) []int {
	out := make([]int, ranges)
	for _, uid := range uids {
		out[shard.Of(uid, ranges)]++
	}
	return out
}

// occupied is how many of loads are not zero.
func occupied(loads []int) int {
	k := 0
	for _, l := range loads {
		if l > 0 {
			k++
		}
	}
	return k
}

// shardArgs are the flags of a sharded replica of group.
func (b *bench) shardArgs(c contender, group string) []string {
	return b.args(c, b.o.shardingRegime,
		"--shards="+strconv.Itoa(shardingRanges),
		"--leader-elect=true",
		"--leader-elect-resource-name="+group,
		"--leader-elect-resource-namespace="+operatorNamespace,
		"--leader-elect-lease-duration="+shardLeaseDuration.String(),
		"--leader-elect-renew-deadline="+shardRenewDeadline.String(),
		"--leader-elect-retry-period="+shardRetryPeriod.String(),
	)
}

// shardMetrics is what the scenario reads of a replica's metrics: the
// ranges it holds now, and the reconciles of each range's controller
// (controller="webapp-<i>-of-<N>"). A range's controller and its metrics
// outlive a hand-over, so which ranges a replica worked on in a measurement
// is told by its reconciles' growth (reconciledRanges), not by which
// controllers it has.
type shardMetrics struct {
	held       float64
	reconciles map[int]float64
}

// reconciledRanges are the ranges whose reconciles grew from before to m,
// and by how much in all.
func (m shardMetrics) reconciledRanges(before shardMetrics) (ranges []int, reconciles float64) {
	for i, v := range m.reconciles {
		if d := v - before.reconciles[i]; d > 0 {
			ranges = append(ranges, i)
			reconciles += d
		}
	}
	slices.Sort(ranges)
	return ranges, reconciles
}

func (p *proc) shardMetrics() (shardMetrics, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return shardMetrics{}, fmt.Errorf("scraping %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return shardMetrics{}, fmt.Errorf("scraping %s: %s", p.name, resp.Status)
	}
	return parseShardMetrics(resp.Body)
}

// parseShardMetrics reads handroll_shard_ranges_held and each range's
// controller_runtime_reconcile_total.
func parseShardMetrics(r io.Reader) (shardMetrics, error) {
	m := shardMetrics{reconciles: map[int]float64{}}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return m, fmt.Errorf("parsing metrics: %w", err)
	}
	for _, s := range families["handroll_shard_ranges_held"].GetMetric() {
		m.held += s.GetGauge().GetValue()
	}
	for _, s := range families["controller_runtime_reconcile_total"].GetMetric() {
		for _, l := range s.GetLabel() {
			var i, n int
			if l.GetName() != "controller" {
				continue
			}
			if _, err := fmt.Sscanf(l.GetValue(), "webapp-%d-of-%d", &i, &n); err == nil {
				m.reconciles[i] += s.GetCounter().GetValue()
			}
		}
	}
	return m, nil
}

// webAppsIn counts the WebApps of the ranges rs.
func webAppsIn(rs []int, uids map[string]types.UID, ranges int) int {
	count := 0
	for i, l := range rangeLoads(uids, ranges) {
		if slices.Contains(rs, i) {
			count += l
		}
	}
	return count
}

// launchShards starts replicas of group and waits until they are ready and
// balanced: every range held, none above its ceiling.
func (b *bench) launchShards(ctx context.Context, c contender, group string, replicas int) ([]*proc, time.Duration, error) {
	var procs []*proc
	began := time.Now()
	for i := range replicas {
		p, err := launch(fmt.Sprintf("%s-%d", group, i), c.bin, b.shardArgs(c, group), b.logDir)
		if err != nil {
			return procs, 0, err
		}
		procs = append(procs, p)
	}
	ceiling := float64((shardingRanges + replicas - 1) / replicas)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var held, most float64
		for _, p := range procs {
			if !p.running() {
				return procs, 0, p.failed()
			}
			m, err := p.shardMetrics()
			if err != nil {
				held = -1 // not serving yet
				break
			}
			held += m.held
			most = max(most, m.held)
		}
		if held == shardingRanges && most <= ceiling {
			break
		}
		if time.Now().After(deadline) {
			return procs, 0, fmt.Errorf("%s: %d replicas not balanced after 2 minutes (%.0f of %d ranges held, the most %.0f)", group, replicas, held, shardingRanges, most)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return procs, 0, err
		}
	}
	balanced := time.Since(began)
	for _, p := range procs {
		if _, err := p.waitReady(ctx, 2*time.Minute); err != nil {
			return procs, 0, err
		}
	}
	return procs, balanced, nil
}

func stopAll(procs []*proc) error {
	var errs []error
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		errs = append(errs, p.waitExit(syscall.SIGTERM, stopGrace))
	}
	return errors.Join(errs...)
}

// shardingBaseline is the peak RSS of one idle replica holding every range,
// over the scenario's namespaces with no WebApp in them.
func (b *bench) shardingBaseline(ctx context.Context, c contender) (_ int64, err error) {
	namespaces := b.shardNamespaces("shard-idle")
	if err := b.cluster.createNamespaces(ctx, namespaces); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, b.cluster.wipe(context.WithoutCancel(ctx), namespaces)) }()
	procs, _, err := b.launchShards(ctx, c, "bench-shard-idle", 1)
	defer func() { err = errors.Join(err, stopAll(procs)) }()
	if err != nil {
		return 0, err
	}
	if err := sleep(ctx, shardingIdleWindow); err != nil {
		return 0, err
	}
	rss, _, err := procs[0].usage()
	b.logf("sharding: idle baseline %.1f MiB peak RSS", mib(rss))
	return rss, err
}

// shardRun measures replicas converging the scenario's WebApps.
func (b *bench) shardRun(ctx context.Context, c contender, round, replicas int) (_ ShardRun, err error) {
	n := b.o.shardingN
	run := ShardRun{Replicas: replicas}
	label := fmt.Sprintf("sharding, %d replica(s), %s", replicas, Cell{N: n, Regime: b.o.shardingRegime})
	namespaces := b.shardNamespaces(fmt.Sprintf("shard-r%d-%d", round, replicas))
	if err := b.cluster.createNamespaces(ctx, namespaces); err != nil {
		return run, err
	}
	b.tracker.begin(namespaces, n)
	defer func() { err = errors.Join(err, b.cleanUp(ctx, namespaces)) }()
	b.logf("%s: starting", label)
	procs, balanced, err := b.launchShards(ctx, c, fmt.Sprintf("bench-shard-%d", replicas), replicas)
	defer func() { err = errors.Join(err, stopAll(procs)) }()
	if err != nil {
		return run, err
	}
	run.BalancedSeconds = balanced.Seconds()

	// The Lease traffic alone, before there is anything to reconcile.
	idleFrom := make([]map[string]float64, replicas)
	for i, p := range procs {
		if idleFrom[i], err = p.requests(); err != nil {
			return run, err
		}
	}
	idleBegan := time.Now()
	if err := sleep(ctx, shardingIdleWindow); err != nil {
		return run, err
	}
	before := make([]map[string]float64, replicas)
	metricsBefore := make([]shardMetrics, replicas)
	for i, p := range procs {
		if before[i], err = p.requests(); err != nil {
			return run, err
		}
		if metricsBefore[i], err = p.shardMetrics(); err != nil {
			return run, err
		}
	}
	idleSeconds := time.Since(idleBegan).Seconds()
	counting := time.Now()

	b.logf("%s: balanced after %s; creating %d WebApps in %d namespaces", label, formatSeconds(run.BalancedSeconds), n, len(namespaces))
	if err := b.cluster.createWebApps(ctx, namespaces, n); err != nil {
		return run, err
	}
	created := time.Now()
	r, err := b.wait(ctx, label, procs, func(r runState) bool { return r.converged == r.want }, created)
	if err != nil {
		return run, err
	}
	uids, err := b.cluster.webAppUIDs(ctx, namespaces)
	if err != nil {
		return run, err
	}
	run.RangeLoads = rangeLoads(uids, shardingRanges)
	run.ConvergeSeconds = r.convergedAt.Sub(created).Seconds()
	for i, p := range procs {
		idleRate := total(delta(idleFrom[i], before[i])) / idleSeconds
		after, err := b.settleOver(ctx, p, idleRate)
		if err != nil {
			return run, err
		}
		rep := ShardReplica{
			Requests:              delta(before[i], after),
			IdleRequestsPerSecond: idleRate,
			MeasuredSeconds:       time.Since(counting).Seconds(),
		}
		if rep.PeakRSSBytes, rep.CPUSeconds, err = p.usage(); err != nil {
			return run, err
		}
		m, err := p.shardMetrics()
		if err != nil {
			return run, err
		}
		rep.Ranges, rep.Reconciles = m.reconciledRanges(metricsBefore[i])
		rep.RangesHeld = int(m.held)
		rep.WebApps = webAppsIn(rep.Ranges, uids, shardingRanges)
		run.PerReplica = append(run.PerReplica, rep)
		b.logf("%s: replica %d: %d ranges held, reconciled %v (%d WebApps), %.0f reconciles, %.0f requests, peak RSS %.1f MiB",
			label, i, rep.RangesHeld, rep.Ranges, rep.WebApps, rep.Reconciles, total(rep.Requests), mib(rep.PeakRSSBytes))
	}
	b.logf("%s: converged in %s, %.0f requests in all", label, formatSeconds(run.ConvergeSeconds), run.requests())
	return run, nil
}

// shardingScenario runs the baseline and the two measurements and writes
// the page.
func (b *bench) shardingScenario(ctx context.Context, contenders []contender, args []string) error {
	i := slices.IndexFunc(contenders, func(c contender) bool { return c.name == contenderHandroll })
	if i < 0 {
		return errors.New("sharding: handroll was not built")
	}
	c := contenders[i]
	if !hasFlag(c.bin, "shards") {
		return errors.New("sharding: this handroll has no --shards flag")
	}
	res := &ShardingResults{
		Machine: describeMachine(), Command: commandLine(args), Started: b.res.Started,
		N: b.o.shardingN, Regime: b.o.shardingRegime, Workers: b.o.workers, Controllers: b.o.controllers,
		DisabledControllers: b.res.Config.DisabledControllers,
	}
	var err error
	if res.BaselinePeakRSSByte, err = b.shardingBaseline(ctx, c); err != nil {
		return fmt.Errorf("sharding, baseline: %w", err)
	}
	for round := range b.o.shardingRounds {
		for _, replicas := range []int{1, shardingReplicas} {
			run, err := b.shardRun(ctx, c, round+1, replicas)
			if err != nil {
				return fmt.Errorf("sharding, round %d, %d replica(s): %w", round+1, replicas, err)
			}
			res.Runs = append(res.Runs, run)
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("The namespaces are named %s (`-sharding-names`). The split hashes each WebApp's uid, so how they are named does not move a WebApp between ranges; "+
		"when it hashed namespaces, names numbered at the end put every WebApp of 30 namespaces in one range of 12.", b.o.shardingNames))
	res.Duration = time.Since(b.began).Round(time.Second).String()
	path := filepath.Join(b.o.out, shardingPageName)
	if err := os.MkdirAll(b.o.out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(res.markdown()), 0o644); err != nil {
		return err
	}
	b.logf("wrote %s", path)
	return nil
}

// markdown is docs/benchmarks-sharding.md.
func (r *ShardingResults) markdown() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	r.setupSection(p)
	rounds := r.rounds()
	if len(rounds) == 0 {
		p("The run did not complete.")
		return sb.String()
	}
	r.goalsSection(p, rounds)
	one, many := rounds[0][0], rounds[0][1]
	r.convergeSection(p, one, many)
	r.perReplicaSection(p, one, many)
	r.methodologySection(p)
	return sb.String()
}

// throughput is run's WebApps converged per second.
func (r *ShardingResults) throughput(run ShardRun) float64 {
	return float64(r.N) / run.ConvergeSeconds
}

// setupSection is the page's title, machine and setup.
func (r *ShardingResults) setupSection(p func(string, ...any)) {
	p("# Benchmarks: sharding, 1 replica against %d", shardingReplicas)
	p("")
	p("Generated by `%s` on %s (%s in all). Machine: %d cores (%s), %s GiB, %s, %s.",
		r.Command, r.Started, r.Duration, r.Machine.CPUs, r.Machine.CPU, r.Machine.MemoryGiB, r.Machine.OS, r.Machine.Go)
	p("Each goal's figure is the median over %d round(s), with the min–max; the tables below give every run.", len(r.rounds()))
	p("")
	p("Setup: one local control plane, its kube-apiserver started with `%s`, so that each", shardingFeatureGate)
	p("range's caches are narrowed by the server (`shardSelector`). handroll with `--shards=%d`,", shardingRanges)
	p("each replica at `--kube-api-qps=%s --kube-api-burst=%d` and `--max-concurrent-reconciles=%d`;",
		strconv.FormatFloat(r.Regime.QPS, 'g', -1, 64), r.Regime.Burst, r.Workers)
	p("Leases %s / %s / %s. %d WebApps, created once the replicas are ready and balanced,", shardLeaseDuration, shardRenewDeadline, shardRetryPeriod, r.N)
	p("spread evenly over %d namespaces (named as the note at the end says): which range each WebApp falls in is the draw of its uid's hash.", shardingNamespaces)
	if r.Controllers {
		p("The cluster's controllers run (kube-controller-manager, kube-scheduler, kwok with fake nodes): each WebApp's pod is created, scheduled and reported ready, as in `benchmarks.md`%s.",
			withoutControllers(r.DisabledControllers))
	}
	p("")
	if r.Regime.QPS < estServerRate {
		p("Why QPS %s: the scenario measures what a split of the client budget buys. Three replicas at", strconv.FormatFloat(r.Regime.QPS, 'g', -1, 64))
		p("`-sharding-regime 200/300` would on this machine's %d cores share one API server that already sets the pace for a", r.Machine.CPUs)
		p("single client near 130 requests/s (the bench's cost model), and would measure the server, not the sharding.")
		p("")
	}
}

// goalsSection is each goal's median over rounds, with the min–max.
func (r *ShardingResults) goalsSection(p func(string, ...any), rounds [][2]ShardRun) {
	var gs []shardGoals
	for _, rd := range rounds {
		gs = append(gs, r.goals(rd[0], rd[1]))
	}
	// stat is the median (min–max) of one figure over the rounds, and
	// whether the median meets its goal.
	stat := func(f func(shardGoals) float64, format string, ok func(float64) bool) (string, string) {
		var xs []float64
		for _, g := range gs {
			xs = append(xs, f(g))
		}
		m := median(xs)
		return fmt.Sprintf(format+" ("+format+"–"+format+")", m, slices.Min(xs), slices.Max(xs)), metOrNot(ok(m))
	}
	row := func(goal string, f func(shardGoals) float64, format string, ok func(float64) bool) {
		v, met := stat(f, format, ok)
		p("| %s | %s | %s |", goal, v, met)
	}
	p("## Goals")
	p("")
	p("| goal | median (min–max) | met |")
	p("|---|--:|---|")
	row(fmt.Sprintf("the busiest of %d replicas holds at most 1.1× its share of the WebApps", shardingReplicas),
		func(g shardGoals) float64 { return g.busiest }, "%.2f×", func(v float64) bool { return v <= 1.1 })
	row(fmt.Sprintf("throughput with %d replicas at least 2.8× one's", shardingReplicas),
		func(g shardGoals) float64 { return g.speedup }, "%.2f×", func(v float64) bool { return v >= 2.8 })
	row("the busiest replica's cache share at most 1/3 + 10% (1.1 / 3 = 0.367) of one replica's",
		func(g shardGoals) float64 { return g.worstShare }, "%.3f", func(v float64) bool { return v <= 1.1/shardingReplicas })
	row(fmt.Sprintf("requests per WebApp, summed over the %d replicas, less one replica's: at most 0", shardingReplicas),
		func(g shardGoals) float64 { return g.reqMany - g.reqOne }, "%+.2f", func(v float64) bool { return v <= 0 })
	row("the same, less the Lease traffic (estimated)",
		func(g shardGoals) float64 { return g.netMany - g.netOne }, "%+.2f", func(v float64) bool { return v <= 0 })
	p("")
}

// convergeSection is every run's converge, and the first round's
// throughput ratio.
func (r *ShardingResults) convergeSection(p func(string, ...any), one, many ShardRun) {
	speedup := r.throughput(many) / r.throughput(one)
	p("## Converge")
	p("")
	p("| round | replicas | balanced after | converge | WebApps/s | requests | requests / WebApp | of them Leases, estimated | Lease requests/s, idle |")
	p("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for i, run := range r.Runs {
		var idle float64
		for _, rep := range run.PerReplica {
			idle += rep.IdleRequestsPerSecond
		}
		p("| %d | %d | %s | %s | %.1f | %.0f | %.2f | %.2f | %.1f |", i/2+1, run.Replicas, formatSeconds(run.BalancedSeconds), formatSeconds(run.ConvergeSeconds),
			r.throughput(run), run.requests(), run.requests()/float64(r.N), run.leaseRequests()/float64(r.N), idle)
	}
	p("")
	p("Throughput ratio in the first round, %d replicas over 1: **%.2f×** (the goal is 2.8×). WebApps per range in its %d-replica run: %s (%d of %d ranges hold some).",
		shardingReplicas, speedup, shardingReplicas, joinInts(many.RangeLoads), occupied(many.RangeLoads), shardingRanges)
	p("")
}

// perReplicaSection is each replica's ranges, WebApps and memory, and how
// the first round's split compares with an even one.
func (r *ShardingResults) perReplicaSection(p func(string, ...any), one, many ShardRun) {
	base := r.BaselinePeakRSSByte
	oneShare := cacheShare(one.PerReplica[0].PeakRSSBytes, base)
	busiest := 0
	for _, rep := range many.PerReplica {
		busiest = max(busiest, rep.WebApps)
	}
	ideal := float64(r.N) / shardingReplicas
	p("## Per replica")
	p("")
	p("Idle baseline: one replica holding all %d ranges over the %d namespaces, no WebApps: **%.1f MiB** peak RSS.", shardingRanges, shardingNamespaces, mib(base))
	p("A replica's cache share is its peak RSS (VmHWM, from its start to the end of the settle) less that baseline.")
	p("")
	p("| run | replica | ranges held | ranges reconciled | WebApps | of N | reconciles | requests | peak RSS | cache share | share / 1 replica's | CPU |")
	p("|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for k, run := range r.Runs {
		for i, rep := range run.PerReplica {
			share := cacheShare(rep.PeakRSSBytes, base)
			p("| round %d, %d replica(s) | %d | %d | %s | %d | %.3f | %.0f | %.0f | %.1f MiB | %.1f MiB | %.3f | %.1f s |", k/2+1, run.Replicas, i,
				rep.RangesHeld, joinInts(rep.Ranges), rep.WebApps, float64(rep.WebApps)/float64(r.N), rep.Reconciles, total(rep.Requests), mib(rep.PeakRSSBytes), share, share/oneShare, rep.CPUSeconds)
		}
	}
	p("")
	p("In the first round, the busiest of the %d replicas holds %d WebApps, %.2f× its share (%.0f): each WebApp's range is the draw of its uid,", shardingReplicas, busiest, float64(busiest)/ideal, ideal)
	p("and for %d WebApps the median draw is 1.05× ([sharding.md](sharding.md#what-to-hash-the-uid-and-a-label-on-the-children)).", r.N)
	p("The converge time of %d replicas is the busiest one's: at the single replica's pace (%.1f WebApps/s) the ratio would be %d / %.2f = %.2f;",
		shardingReplicas, r.throughput(one), shardingReplicas, float64(busiest)/ideal, shardingReplicas/(float64(busiest)/ideal))
	p("the busiest replica went at %.1f WebApps/s (its %d over the converge time).", float64(busiest)/many.ConvergeSeconds, busiest)
	p("The cache-share goal assumes an even split: a replica's share is to be read against its WebApps' fraction of N (`of N`),")
	p("which the uids' draw, not the replica, decides.")
	p("")
}

// methodologySection is how each figure is measured, and the notes.
func (r *ShardingResults) methodologySection(p func(string, ...any)) {
	p("## How each figure is measured")
	p("")
	p("- **Balanced after**: from starting the replicas to every range held and no replica above ceil(%d / replicas), read from each replica's `handroll_shard_ranges_held`.", shardingRanges)
	p("- **Converge**: from the last WebApp's creation to every WebApp converged, as the bench's tracker sees it (the same test as `benchmarks.md`'s converge).")
	p("- **Requests**: each replica's `rest_client_requests_total`, from just before the WebApps are created to when, after convergence, they moved over 2 s by no more than its Lease traffic explains (1.5 × its idle rate, plus one), summed over the replicas. They include the Lease traffic (range Leases renewed every retry period, the membership Lease and list; each elector has a client of its own, outside the QPS budget); the Lease column estimates it as each replica's request rate over %s while ready and balanced with no WebApps, times the time its requests were counted.", shardingIdleWindow)
	p("- **Ranges, WebApps, reconciles**: the ranges whose controller (`controller=\"webapp-<i>-of-%d\"`) counted reconciles (`controller_runtime_reconcile_total`) in the measurement, the WebApps whose uid `pkg/shard.Of` puts in those ranges, and those reconciles. An empty range has none, so it is held but not listed; a range that changed hands during the measurement would be listed on both replicas (their WebApps would sum to more than N). Ranges held is `handroll_shard_ranges_held` at the end.", shardingRanges)
	p("- **Peak RSS**: `VmHWM` of `/proc/<pid>/status`. The baseline is the same reading for an idle replica holding all %d ranges; a replica of %d holds fewer ranges, so fewer (empty) informers, and its share is, if anything, overstated.", shardingRanges, shardingReplicas)
	p("- **Cache share / 1 replica's**: (peak RSS − baseline) / (the single replica's peak RSS − baseline); the goal reads 1/3 + 10%% as 1.1 × 1/3.")
	for _, n := range r.Notes {
		p("")
		p("%s", n)
	}
}
