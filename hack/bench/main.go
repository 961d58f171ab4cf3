// Command bench measures handroll against its controller-runtime twin
// (hack/compare), as kubebuilder scaffolds it and tuned (--tuned), and
// against a floor that issues only the writes convergence needs
// (hack/bench/floor), side by side in one run on one local control plane,
// at several sizes and client regimes, and writes docs/benchmarks.md,
// docs/benchmarks.json and docs/benchmarks-scale.svg.
//
//	go run ./hack/bench [-n 300,1000,3000] [-regimes 200/300] [-rounds 3] [-contenders handroll,twin,twin-tuned,floor] [-unrelated 400] [-backlog-n 1000] [-skip-failover] [-controllers=true]
//
// With -controllers (the default) the control plane runs
// kube-controller-manager, kube-scheduler and kwok with fake nodes for
// every pod, as the local cluster does: Deployments roll out, the
// operators see the status events a rollout causes, and each WebApp has
// two times, applied (the operator's own work) and Ready (the cluster's
// controllers' first, then the operator's share, timed apart).
//
//	go run ./hack/bench -sharding [-sharding-n 600] [-sharding-regime 20/30] [-sharding-rounds 3] [-sharding-names numbered|random]
//
// -sharding runs the sharding scenario alone (sharding.go): handroll with
// --shards=12, one replica against three, on a control plane with the
// ShardedListAndWatch feature gate, and writes docs/benchmarks-sharding.md.
//
// It prints its plan with an estimated time first, then its progress and
// each phase's time on stderr. See the "How each figure is measured"
// section of the output for what each measure is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/controlplane"
)

// Short Lease timings for every failover trial, so that a trial takes
// seconds; they satisfy pkg/leader's checks (lease > renew + retry + the
// Lease request timeout: 4 > 2 + 0.5 + 1).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// Contenders, in table order.
const (
	contenderHandroll  = "handroll"
	contenderTwin      = "twin"
	contenderTwinTuned = "twin-tuned"
	contenderFloor     = "floor"
)

var allContenders = []string{contenderHandroll, contenderTwin, contenderTwinTuned, contenderFloor}

// defaultContenders are all of them: the twin's extra requests are its
// own design (an event per child, a live GET for a missing child), which
// --tuned does not change, so the report shows the tuned twin beside it
// rather than leave the reader to guess what tuning would buy.
var defaultContenders = []string{contenderHandroll, contenderTwin, contenderTwinTuned, contenderFloor}

// Failover variants.
const (
	variantHandrollWarm = "handroll-warm-standby"
	variantHandrollCold = "handroll-cold-standby"
	variantTwin         = "twin"
	variantTwinTuned    = "twin-tuned"
)

type options struct {
	sizes          []int
	regimes        []regimeSpec
	rounds         int
	quick          bool
	idle           time.Duration
	coldWindow     time.Duration
	workers        int
	out            string
	contenders     []string
	unrelated      int
	backlogN       int
	backlogRegimes []Regime
	edits          int
	editInterval   time.Duration
	failoverN      int
	skipFailover   bool
	timeout        time.Duration
	// controllers runs kube-controller-manager, kube-scheduler and kwok
	// with fake nodes for every pod, as the local cluster does.
	controllers bool
	// keepLogs keeps the contenders' logs after a run that succeeded.
	keepLogs bool
	// heapProfiles saves each operator's heap profile, once converged, beside
	// its log (and keeps the logs).
	heapProfiles bool
	// planOnly prints the plan and its estimate and runs nothing.
	planOnly bool
	// explicitContenders says -contenders was given: a contender that
	// cannot run is then an error, not a note.
	explicitContenders bool
	// sharding runs the sharding scenario alone (sharding.go), at
	// shardingN WebApps in shardingRegime per replica.
	sharding       bool
	shardingN      int
	shardingNames  string // shardingNamesNumbered or shardingNamesRandom
	shardingRounds int
	shardingRegime Regime
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	o, render, err := parseFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	if render != "" {
		if err := rerender(render); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	if o.planOnly {
		printPlan(os.Stderr, o.phases(o.plan(), o.contenders))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := benchmark(ctx, o, args); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags parses args into options, or returns the -render path.
func parseFlags(args []string, output io.Writer) (o options, render string, err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(output)
	raw := o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if fs.NArg() > 0 {
		return o, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *raw.render != "" {
		return o, *raw.render, nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.keepLogs = o.keepLogs || o.heapProfiles

	errs := o.resolveFlags(raw, set)
	o.defaults(set)
	if err := errors.Join(errs...); err != nil {
		return o, "", err
	}
	return o, "", o.validate()
}

// rawFlags are the flags parsed into options only once they are all set.
type rawFlags struct {
	sizes, regimes, contenders, backlogRegimes, shardingRegime, render *string
	qps                                                                *float64
	burst                                                              *int
}

// addFlags declares the bench's flags on fs: into o, or, for those parsed
// later (resolveFlags), into what it returns.
func (o *options) addFlags(fs *flag.FlagSet) rawFlags {
	var raw rawFlags
	raw.sizes = fs.String("n", "300,1000,3000", "sizes: WebApps per measurement, comma-separated")
	raw.regimes = fs.String("regimes", "200/300", "client regimes QPS/BURST, comma-separated; QPS/BURST@N+N runs that regime at those sizes only, "+
		"else the regime with the highest QPS runs every -n and the others the smallest -n")
	raw.qps = fs.Float64("qps", 20, "shorthand for -regimes QPS/BURST with -burst: a single regime")
	raw.burst = fs.Int("burst", 30, "see -qps")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each contender runs each measurement once per round, and each figure is the median over rounds")
	fs.BoolVar(&o.quick, "quick", false, "a trial run: -idle 5s, -cold-start-window 3s and -edits 10 unless given, and the report says it was one")
	fs.DurationVar(&o.idle, "idle", 20*time.Second, "how long to count an operator's writes after convergence, with nothing changing")
	fs.DurationVar(&o.coldWindow, "cold-start-window", 8*time.Second, "how long to count a restarted operator's writes after /readyz, with every WebApp converged")
	fs.IntVar(&o.workers, "workers", 4, "--max-concurrent-reconciles of every contender (the floor's writers)")
	fs.StringVar(&o.out, "out", "docs", "directory for benchmarks.md, benchmarks.json and benchmarks-scale.svg, relative to the repository root unless absolute")
	raw.contenders = fs.String("contenders", strings.Join(defaultContenders, ","), "comma-separated contenders to run, of "+strings.Join(allContenders, ", "))
	fs.IntVar(&o.unrelated, "unrelated", 400, "unrelated objects of each kind (ConfigMaps of 64 KiB, Deployments, Services), in namespaces without WebApps, for the unrelated-objects scenario; 0 skips it")
	fs.IntVar(&o.backlogN, "backlog-n", -1, "WebApps created while the contender is stopped, for the live-edits scenario; -1: the largest -n, at most 300; 0 skips it")
	raw.backlogRegimes = fs.String("backlog-regimes", "", "regimes of the live-edits scenario, comma-separated QPS/BURST; empty: the regime with the highest QPS")
	fs.IntVar(&o.edits, "edits", 50, "spec.replicas edits, each to a different WebApp, once the contender is ready in the live-edits scenario")
	fs.DurationVar(&o.editInterval, "edit-interval", 150*time.Millisecond, "time between two edits")
	fs.IntVar(&o.failoverN, "failover-n", -1, "WebApps of each failover trial; -1: the smallest -n")
	fs.BoolVar(&o.skipFailover, "skip-failover", false, "skip the failover trials")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long any one wait (convergence, a first write, a Lease) may take before the bench fails")
	fs.BoolVar(&o.controllers, "controllers", true, "run kube-controller-manager, kube-scheduler and kwok with fake nodes for every pod, so that Deployments roll out and the report has the time to Ready; false: the API server alone")
	fs.BoolVar(&o.keepLogs, "keep-logs", false, "keep the contenders' logs (a failed run always does), and say where")
	fs.BoolVar(&o.heapProfiles, "heap-profiles", false, "save each operator's heap profile once it converged (pprof, in-use after a GC) beside its log, and print where it serves pprof, for a CPU profile; implies -keep-logs")
	fs.BoolVar(&o.planOnly, "plan", false, "measure nothing: print the plan and its estimated time")
	fs.BoolVar(&o.sharding, "sharding", false, "run only the sharding scenario: handroll with --shards=12, 1 replica against 3, on a control plane with the ShardedListAndWatch gate; writes benchmarks-sharding.md")
	fs.IntVar(&o.shardingN, "sharding-n", 600, "WebApps of the sharding scenario, over 30 namespaces")
	fs.IntVar(&o.shardingRounds, "sharding-rounds", 3, "rounds of the sharding scenario, each one replica then three")
	fs.StringVar(&o.shardingNames, "sharding-names", shardingNamesNumbered, "how the sharding scenario's namespaces are named: "+shardingNamesNumbered+" (…-team-00 to -team-29) or "+shardingNamesRandom)
	raw.shardingRegime = fs.String("sharding-regime", "20/30", "QPS/BURST of each replica in the sharding scenario")
	raw.render = fs.String("render", "", "measure nothing: rewrite benchmarks.md and benchmarks-scale.svg next to the given benchmarks.json from its samples")
	return raw
}

// resolveFlags parses raw into o; set holds the flags given.
func (o *options) resolveFlags(raw rawFlags, set map[string]bool) []error {
	var errs []error
	var err error
	if o.sizes, err = parseSizes(*raw.sizes, ","); err != nil {
		errs = append(errs, fmt.Errorf("-n: %w", err))
	}
	switch {
	case (set["qps"] || set["burst"]) && set["regimes"]:
		errs = append(errs, errors.New("-qps and -burst are a shorthand for one regime: give them or -regimes, not both"))
	case set["qps"] || set["burst"]:
		if *raw.qps <= 0 || *raw.burst < 1 {
			errs = append(errs, errors.New("-qps and -burst must be positive"))
		}
		o.regimes = []regimeSpec{{Regime: Regime{QPS: *raw.qps, Burst: *raw.burst}}}
	default:
		if o.regimes, err = parseRegimes(*raw.regimes); err != nil {
			errs = append(errs, fmt.Errorf("-regimes: %w", err))
		}
	}
	if *raw.backlogRegimes != "" {
		specs, err := parseRegimes(*raw.backlogRegimes)
		if err != nil {
			errs = append(errs, fmt.Errorf("-backlog-regimes: %w", err))
		}
		for _, s := range specs {
			if s.sizes != nil {
				errs = append(errs, fmt.Errorf("-backlog-regimes: %s: the size is -backlog-n", s.Regime))
			}
			o.backlogRegimes = append(o.backlogRegimes, s.Regime)
		}
	}
	o.contenders = strings.Split(*raw.contenders, ",")
	o.explicitContenders = set["contenders"]
	if specs, err := parseRegimes(*raw.shardingRegime); err != nil || len(specs) != 1 || specs[0].sizes != nil {
		errs = append(errs, fmt.Errorf("-sharding-regime %q: want one QPS/BURST, such as 20/30", *raw.shardingRegime))
	} else {
		o.shardingRegime = specs[0].Regime
	}
	if o.sharding {
		if set["contenders"] {
			errs = append(errs, errors.New("-sharding measures handroll alone: drop -contenders"))
		}
		o.contenders = []string{contenderHandroll}
		if o.shardingNames != shardingNamesNumbered && o.shardingNames != shardingNamesRandom {
			errs = append(errs, fmt.Errorf("-sharding-names=%q: want %s or %s", o.shardingNames, shardingNamesNumbered, shardingNamesRandom))
		}
		if o.shardingRounds < 1 {
			errs = append(errs, errors.New("-sharding-rounds must be positive"))
		}
		if o.shardingN < 1 {
			errs = append(errs, errors.New("-sharding-n must be positive"))
		}
	}
	return errs
}

// defaults fills in what depends on other flags: -quick's shorter
// settings, unless given, and the sizes of the backlog and the failover.
func (o *options) defaults(set map[string]bool) {
	if o.quick {
		if !set["idle"] {
			o.idle = 5 * time.Second
		}
		if !set["cold-start-window"] {
			o.coldWindow = 3 * time.Second
		}
		if !set["edits"] {
			o.edits = 10
		}
	}
	if len(o.sizes) > 0 {
		if o.backlogN == -1 {
			// Larger backlogs drain for minutes per contender and round
			// with the cluster's controllers running.
			o.backlogN = min(o.sizes[len(o.sizes)-1], 300)
		}
		if o.failoverN == -1 {
			o.failoverN = o.sizes[0]
		}
	}
}

func (o *options) validate() error {
	var errs []error
	if o.rounds < 1 {
		errs = append(errs, fmt.Errorf("-rounds %d: at least 1", o.rounds))
	}
	if o.workers < 1 {
		errs = append(errs, errors.New("-workers must be positive"))
	}
	if o.idle < 0 || o.coldWindow < 0 || o.editInterval < 0 {
		errs = append(errs, errors.New("-idle, -cold-start-window and -edit-interval must not be negative"))
	}
	if o.unrelated < 0 || o.backlogN < 0 {
		errs = append(errs, errors.New("-unrelated and -backlog-n must not be negative (-backlog-n -1 is the largest -n)"))
	}
	if o.backlogN > 0 && o.edits < 1 {
		errs = append(errs, errors.New("-edits must be positive"))
	}
	if o.failoverN < 1 && !o.skipFailover {
		errs = append(errs, errors.New("-failover-n must be positive (-1 is the smallest -n)"))
	}
	for i, c := range o.contenders {
		if !slices.Contains(allContenders, c) {
			errs = append(errs, fmt.Errorf("-contenders: unknown contender %q (%s)", c, strings.Join(allContenders, ", ")))
		} else if slices.Contains(o.contenders[:i], c) {
			errs = append(errs, fmt.Errorf("-contenders: %s given twice", c))
		}
	}
	errs = append(errs, o.validatePlan())
	return errors.Join(errs...)
}

// contender is one program under measurement.
type contender struct {
	name string
	bin  string
	// flags go to every run of it (twin-tuned: --tuned).
	flags []string
	// operator is false for the floor, which has no informers, no leader
	// election and no idle loop.
	operator bool
	// warmStandbyFlag says the binary has --leader-elect-warm-standby.
	warmStandbyFlag bool
}

// bench holds what every measurement shares.
type bench struct {
	o          options
	began      time.Time
	kubeconfig string
	cluster    *cluster
	tracker    *tracker
	logDir     string
	res        *Results
}

// maxNamespaces is how many namespaces a measurement spreads its WebApps
// over, at most.
const maxNamespaces = 10

func namespacesFor(n int) int { return min(maxNamespaces, n) }

func benchmark(ctx context.Context, o options, args []string) (err error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	b := newBench(o, args)
	res := b.res

	// The plan first, so that a run that does not fit can be stopped
	// before it has cost anything.
	plan := o.plan()
	clock := &phaseClock{b: b, phases: o.phases(plan, o.contenders), cur: -1}
	printPlan(os.Stderr, clock.phases)
	defer func() {
		clock.end()
		clock.logSummary()
	}()

	work, err := os.MkdirTemp("", "handroll-bench-")
	if err != nil {
		return err
	}
	b.logDir = work
	defer func() {
		if err != nil {
			b.savePartial(work, clock.phases, err)
		}
		if err != nil || o.keepLogs {
			fmt.Fprintf(os.Stderr, "bench: contender logs kept in %s\n", work)
		} else {
			_ = os.RemoveAll(work)
		}
	}()

	clock.start(phaseBuild, nil)
	contenders, floor, err := b.build(ctx, root)
	if err != nil {
		return err
	}
	o = b.o // build may have dropped contenders

	clock.start(phaseSetup, nil)
	// One control plane for everything.
	cpOpts := clusterOptions(root, o)
	cp, err := controlplane.Start(ctx, cpOpts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil {
			fmt.Fprintf(os.Stderr, "bench: stopping the control plane: %v\n", stopErr)
		}
	}()
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	if err := b.connect(ctx, trackCtx, cp); err != nil {
		return err
	}
	res.Config = b.config(plan, cpOpts)

	b.logf("warming the API server up")
	if err := b.warmUp(ctx, floor, scaleRegime(o.regimes)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if o.sharding {
		clock.start(phaseSharding, nil)
		return b.shardingScenario(ctx, contenders, args)
	}
	if err := b.measure(ctx, clock, contenders, plan); err != nil {
		return err
	}
	clock.end()

	res.Phases = append(res.Phases, clock.done()...)
	res.Duration = time.Since(b.began).Round(time.Second).String()
	if err := res.write(o.out); err != nil {
		return err
	}
	b.logf("wrote %s, %s and %s", filepath.Join(o.out, "benchmarks.md"), filepath.Join(o.out, "benchmarks.json"), filepath.Join(o.out, scaleSVGName))
	return nil
}

// newBench is a run of o, its results begun.
func newBench(o options, args []string) *bench {
	res := &Results{
		Machine: describeMachine(),
		Command: commandLine(args),
		Started: time.Now().UTC().Format(time.RFC3339),
	}
	if o.quick {
		res.Notes = append(res.Notes, "A trial run (-quick): short idle, cold-start and edit settings; not for publishing.")
	}
	return &bench{o: o, began: time.Now(), res: res}
}

// phaseClock times each phase of a run; each phase's time is kept beside
// its estimate, to refit the model.
type phaseClock struct {
	b      *bench
	phases []Phase
	cur    int // the phase running; -1 for none
	began  time.Time
}

// end ends the phase running, if any.
func (c *phaseClock) end() {
	if c.cur >= 0 {
		p := &c.phases[c.cur]
		p.Seconds = time.Since(c.began).Seconds()
		c.b.logf("phase done in %s (estimated %s): %s", elapsed(time.Since(c.began)),
			elapsed(time.Duration(p.EstimatedSeconds*float64(time.Second))), p.Name)
	}
	c.cur = -1
}

// start ends the phase running and starts the planned phase of kind and
// cell not yet timed, or a new one when none was planned.
func (c *phaseClock) start(kind string, cell *Cell) {
	c.end()
	c.cur = slices.IndexFunc(c.phases, func(p Phase) bool {
		return p.Kind == kind && p.Seconds == 0 && (cell == nil || (p.Cell != nil && *p.Cell == *cell))
	})
	if c.cur < 0 {
		c.phases = append(c.phases, Phase{Kind: kind, Name: kind, Cell: cell})
		c.cur = len(c.phases) - 1
	}
	c.began = time.Now()
}

// logSummary logs each phase that ran, its time beside its estimate.
func (c *phaseClock) logSummary() {
	c.b.logf("phases (took, estimated):")
	for _, p := range c.phases {
		if p.Seconds > 0 {
			c.b.logf("  %8s  %8s  %s", elapsed(time.Duration(p.Seconds*float64(time.Second))), elapsed(time.Duration(p.EstimatedSeconds*float64(time.Second))), p.Name)
		}
	}
}

// done is the phases that ran.
func (c *phaseClock) done() []Phase {
	var out []Phase
	for _, p := range c.phases {
		if p.Seconds > 0 {
			out = append(out, p)
		}
	}
	return out
}

// clusterOptions are the options of the one control plane a run uses.
func clusterOptions(root string, o options) controlplane.Options {
	cpOpts := controlplane.Options{
		CRDDirs:  []string{filepath.Join(root, "manifests", "crd")},
		Progress: os.Stderr,
	}
	if o.sharding {
		cpOpts.APIServerArgs = []string{shardingFeatureGate}
	}
	if o.controllers {
		cpOpts.Nodes = o.fakeNodes()
		cpOpts.ControllerArgs = clusterControllerArgs
		cpOpts.DisabledControllers = clusterDisabledControllers
	}
	return cpOpts
}

// connect makes b's clients of cp, creates the operator's namespace and
// starts the tracker until trackCtx ends.
func (b *bench) connect(ctx, trackCtx context.Context, cp *controlplane.ControlPlane) error {
	b.kubeconfig = cp.Kubeconfig
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.UserAgent = "handroll-bench"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b.cluster = &cluster{kube: kube, client: client, apiServerEvents: map[types.UID]float64{}, controllers: b.o.controllers, cp: cp}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	b.tracker = newTracker()
	return b.tracker.start(trackCtx, kube, client, operatorNamespace)
}

// config is the run's configuration, as the report states it.
func (b *bench) config(plan Plan, cpOpts controlplane.Options) Config {
	o := b.o
	cfg := Config{
		Sizes: o.sizes, Cells: plan.Cells, IdleCells: plan.IdleCells, NamespacesMax: maxNamespaces,
		Rounds: o.rounds, IdleSeconds: o.idle.Seconds(), ColdStartWindowSeconds: o.coldWindow.Seconds(), Workers: o.workers,
		LeaseDuration: leaseDuration.String(), RenewDeadline: renewDeadline.String(), RetryPeriod: retryPeriod.String(),
		ReadyzEveryInformer: true,
	}
	if o.controllers {
		cfg.FakeNodes, cfg.DisabledControllers = cpOpts.Nodes, cpOpts.DisabledControllers
	}
	for _, s := range o.regimes {
		cfg.Regimes = append(cfg.Regimes, s.Regime)
	}
	return cfg
}

// measure runs the plan's scenarios, each in its phase: unrelated objects,
// the converge cells, the backlogs of live edits and the failovers.
func (b *bench) measure(ctx context.Context, clock *phaseClock, contenders []contender, plan Plan) error {
	o, res := b.o, b.res
	if c := plan.Unrelated; c != nil {
		clock.start(phaseUnrelated, c)
		if err := b.unrelatedScenario(ctx, contenders, *c); err != nil {
			return fmt.Errorf("unrelated objects: %w", err)
		}
	}
	for i, cell := range plan.Cells {
		clock.start(phaseCell, &cell)
		if err := b.convergeCell(ctx, contenders, plan, i, cell); err != nil {
			return err
		}
	}
	if len(plan.Backlog) > 0 {
		res.Config.BacklogWebApps, res.Config.Edits, res.Config.EditIntervalSeconds = o.backlogN, o.edits, o.editInterval.Seconds()
		res.Config.BacklogCells = plan.Backlog
	}
	for i, cell := range plan.Backlog {
		clock.start(phaseBacklog, &cell)
		if err := b.backlogCell(ctx, contenders, i, cell); err != nil {
			return err
		}
	}
	if c := plan.Failover; c == nil {
		res.Notes = append(res.Notes, "Failover was skipped (-skip-failover).")
	} else {
		clock.start(phaseFailover, c)
		if err := b.failovers(ctx, contenders, *c, res); err != nil {
			return err
		}
	}
	return nil
}

// convergeCell measures the i-th converge cell, every round.
func (b *bench) convergeCell(ctx context.Context, contenders []contender, plan Plan, i int, cell Cell) error {
	for round := 1; round <= b.o.rounds; round++ {
		// Rotated by cell as well as by round, so that with one round
		// the same contender does not always go first.
		for _, c := range rotate(contenders, i+round-1) {
			run := convergeRun{cell: cell, round: round, label: fmt.Sprintf("c%d-r%d-%s", i, round, c.name), idle: slices.Contains(plan.IdleCells, cell), coldStart: true}
			s, cs, err := b.converge(ctx, c, run)
			if err != nil {
				return fmt.Errorf("converge, %s, %s, round %d: %w", c.name, cell, round, err)
			}
			b.res.Converge = append(b.res.Converge, s)
			if cs != nil {
				b.res.ColdStart = append(b.res.ColdStart, *cs)
			}
		}
	}
	return nil
}

// backlogCell measures the i-th backlog cell, every round, with the
// operators alone.
func (b *bench) backlogCell(ctx context.Context, contenders []contender, i int, cell Cell) error {
	for round := 1; round <= b.o.rounds; round++ {
		for _, c := range rotate(contenders, i+round-1) {
			if !c.operator {
				continue
			}
			s, err := b.backlog(ctx, c, cell, fmt.Sprintf("b%d-r%d-%s", i, round, c.name), round)
			if err != nil {
				return fmt.Errorf("live edits, %s, %s, round %d: %w", c.name, cell, round, err)
			}
			b.res.Backlog = append(b.res.Backlog, s)
		}
	}
	return nil
}

// savePartial writes what was measured before runErr into dir, with the
// report rendered from it, so that a run that fails late keeps its
// samples: the report says it is incomplete, and `-render` on its
// benchmarks.json rewrites it.
func (b *bench) savePartial(dir string, phases []Phase, runErr error) {
	r := *b.res
	if len(r.Converge)+len(r.ColdStart)+len(r.Backlog)+len(r.Failover) == 0 {
		return
	}
	r.Notes = append(slices.Clone(r.Notes), fmt.Sprintf("Incomplete: the run stopped with an error after %s, and this report holds only what was measured before it: %v", elapsed(time.Since(b.began)), runErr))
	r.Phases = nil
	for _, p := range phases {
		if p.Seconds > 0 {
			r.Phases = append(r.Phases, p)
		}
	}
	r.Duration = time.Since(b.began).Round(time.Second).String()
	if err := r.write(dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: saving the samples measured before the error: %v\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "bench: the samples measured before the error are in %s, its report beside it\n", filepath.Join(dir, "benchmarks.json"))
}

// printPlan prints each phase with its estimate.
func printPlan(w io.Writer, phases []Phase) {
	fmt.Fprintf(w, "bench plan, estimated %s in all:\n", elapsed(totalEstimate(phases)))
	for _, p := range phases {
		fmt.Fprintf(w, "  %8s  %s\n", elapsed(seconds(p.EstimatedSeconds)), p.Name)
	}
}

// build builds each contender once and probes the flags the plan needs;
// a contender that cannot run is dropped with a note unless -contenders
// named it. The floor is built even when it is not measured: it warms the
// API server up.
func (b *bench) build(ctx context.Context, root string) (contenders []contender, floor contender, err error) {
	o := &b.o
	drop := func(name, why string) error {
		if o.explicitContenders {
			return fmt.Errorf("-contenders names %s, but %s", name, why)
		}
		o.contenders = slices.DeleteFunc(o.contenders, func(c string) bool { return c == name })
		b.res.Notes = append(b.res.Notes, fmt.Sprintf("%s was not run: %s.", name, why))
		return nil
	}
	wantTwin := slices.Contains(o.contenders, contenderTwin) || slices.Contains(o.contenders, contenderTwinTuned)
	if _, statErr := os.Stat(filepath.Join(root, "hack", "compare", "cmd", "handroll-twin")); statErr != nil && wantTwin {
		for _, name := range []string{contenderTwin, contenderTwinTuned} {
			if slices.Contains(o.contenders, name) {
				if err := drop(name, "hack/compare/cmd/handroll-twin does not exist in this checkout"); err != nil {
					return nil, floor, err
				}
			}
		}
	}
	bld := builder{root: root, dir: b.logDir}
	bins := map[string]string{}
	for _, name := range allContenders {
		if !slices.Contains(o.contenders, name) && name != contenderFloor {
			continue
		}
		c := contender{name: name, operator: name != contenderFloor}
		switch name {
		case contenderHandroll:
			b.logf("building handroll")
			c.bin, err = bld.build(ctx, "handroll", ".", "./cmd/handroll")
		case contenderTwin, contenderTwinTuned:
			if bins["twin"] == "" {
				b.logf("building the twin")
				bins["twin"], err = bld.build(ctx, "handroll-twin", filepath.Join("hack", "compare"), "./cmd/handroll-twin")
			}
			c.bin = bins["twin"]
			if name == contenderTwinTuned {
				c.flags = []string{"--tuned"}
			}
		case contenderFloor:
			b.logf("building the floor")
			c.bin, err = bld.build(ctx, "floor", ".", "./hack/bench/floor")
			floor = c
		}
		if err != nil {
			return nil, floor, err
		}
		// Probed as the warm-standby flag is: the twin's --tuned may be
		// newer than this bench.
		if name == contenderTwinTuned && !hasFlag(c.bin, "tuned") {
			if err := drop(name, "this twin has no --tuned flag"); err != nil {
				return nil, floor, err
			}
			continue
		}
		if c.operator {
			c.warmStandbyFlag = hasFlag(c.bin, "leader-elect-warm-standby")
		}
		if slices.Contains(o.contenders, name) {
			contenders = append(contenders, c)
			b.res.Contenders = append(b.res.Contenders, name)
		}
	}
	return contenders, floor, nil
}

// failovers runs every failover variant of the contenders, SIGKILL and
// SIGTERM, in each round.
func (b *bench) failovers(ctx context.Context, contenders []contender, cell Cell, res *Results) error {
	var variants []failoverVariant
	for _, c := range contenders {
		switch c.name {
		case contenderHandroll:
			variants = append(variants, failoverVariant{name: variantHandrollWarm, c: c})
			if c.warmStandbyFlag {
				variants = append(variants, failoverVariant{name: variantHandrollCold, c: c, extra: []string{"--leader-elect-warm-standby=false"}})
			} else {
				res.Notes = append(res.Notes, "handroll without warm standby was not measured: this handroll has no --leader-elect-warm-standby flag.")
			}
		case contenderTwin:
			variants = append(variants, failoverVariant{name: variantTwin, c: c})
		case contenderTwinTuned:
			variants = append(variants, failoverVariant{name: variantTwinTuned, c: c})
		}
	}
	if len(variants) == 0 {
		res.Notes = append(res.Notes, "Failover was not measured: no operator among the contenders.")
		return nil
	}
	res.Config.FailoverWebApps, res.Config.FailoverNamespaces = cell.N, 1
	res.Config.FailoverRegime = &cell.Regime
	trial := 0
	for round := 1; round <= b.o.rounds; round++ {
		for _, v := range rotate(variants, round-1) {
			for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
				trial++
				s, err := b.failover(ctx, v, cell, sig, round, trial)
				if err != nil {
					return fmt.Errorf("failover, %s, %s, round %d: %w", v.name, signalName(sig), round, err)
				}
				res.Failover = append(res.Failover, s)
			}
		}
	}
	return nil
}

// rotate returns xs starting at its k-th element, so that no contender
// always runs first (on a cold cache) or last.
func rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

// commandLine is how to repeat this run.
func commandLine(args []string) string {
	parts := []string{"go", "run", "./hack/bench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// hasFlag tells whether bin's --help lists --name.
func hasFlag(bin, name string) bool {
	out, _ := execOutput(bin, "--help")
	return strings.Contains(out, "--"+name)
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// logf prints a progress line on stderr.
func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s | "+format+"\n", append([]any{elapsed(time.Since(b.began))}, args...)...)
}

func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}
