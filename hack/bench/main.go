// Command bench measures handroll against its controller-runtime twin
// (hack/compare) and against a floor that issues only the writes
// convergence needs (hack/bench/floor), side by side in one run on one
// local control plane, and writes docs/benchmarks.md and
// docs/benchmarks.json.
//
//	go run ./hack/bench [-n 1000] [-rounds 3] [-idle 30s] [-contenders handroll,twin,floor] [-skip-failover]
//
// It prints its progress on stderr. See the "How each figure is measured"
// section of the output for what each measure is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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

// Failover variants.
const (
	variantHandrollWarm = "handroll-warm-standby"
	variantHandrollCold = "handroll-cold-standby"
	variantTwin         = "twin"
)

type options struct {
	n            int
	rounds       int
	quick        bool
	idle         time.Duration
	qps          float64
	burst        int
	workers      int
	out          string
	contenders   []string
	skipFailover bool
	timeout      time.Duration
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 1000, "WebApps per measurement")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each contender runs once per round; at least 3 unless -quick")
	fs.BoolVar(&o.quick, "quick", false, "allow fewer than 3 rounds (for trying the bench out; not for published figures)")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "how long to count an operator's writes after convergence, with nothing changing")
	fs.Float64Var(&o.qps, "qps", 20, "--kube-api-qps of every contender")
	fs.IntVar(&o.burst, "burst", 30, "--kube-api-burst of every contender")
	fs.IntVar(&o.workers, "workers", 4, "--max-concurrent-reconciles of every contender (the floor's writers)")
	fs.StringVar(&o.out, "out", "docs", "directory for benchmarks.md and benchmarks.json, relative to the repository root unless absolute")
	contenders := fs.String("contenders", "handroll,twin,floor", "comma-separated contenders to run, of handroll, twin, floor")
	fs.BoolVar(&o.skipFailover, "skip-failover", false, "skip the failover trials")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long any one wait (convergence, a first write, a Lease) may take before the bench fails")
	render := fs.String("render", "", "measure nothing: rewrite benchmarks.md next to the given benchmarks.json from its samples")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *render != "" {
		if err := rerender(*render); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	o.contenders = strings.Split(*contenders, ",")
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "contenders" })

	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := benchmark(ctx, o, explicit, args); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

func (o *options) validate() error {
	var errs []error
	if o.n < 1 {
		errs = append(errs, errors.New("-n must be at least 1"))
	}
	if o.rounds < 1 || (o.rounds < 3 && !o.quick) {
		errs = append(errs, fmt.Errorf("-rounds %d: at least 3 (or -quick to try the bench out)", o.rounds))
	}
	if o.qps <= 0 || o.burst < 1 || o.workers < 1 {
		errs = append(errs, errors.New("-qps, -burst and -workers must be positive"))
	}
	if o.idle < 0 {
		errs = append(errs, errors.New("-idle must not be negative"))
	}
	for _, c := range o.contenders {
		if !slices.Contains([]string{"handroll", "twin", "floor"}, c) {
			errs = append(errs, fmt.Errorf("-contenders: unknown contender %q (handroll, twin, floor)", c))
		}
	}
	return errors.Join(errs...)
}

// contender is one program under measurement.
type contender struct {
	name string
	bin  string
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
	namespaces int // per measurement
}

func benchmark(ctx context.Context, o options, explicitContenders bool, args []string) (err error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	res := &Results{
		Machine: describeMachine(),
		Command: commandLine(args),
		Started: time.Now().UTC().Format(time.RFC3339),
	}
	b := &bench{o: o, began: time.Now(), namespaces: min(10, o.n)}

	work, err := os.MkdirTemp("", "handroll-bench-")
	if err != nil {
		return err
	}
	b.logDir = work
	defer func() {
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: contender logs kept in %s\n", work)
		} else {
			_ = os.RemoveAll(work)
		}
	}()

	// The contenders, built once each.
	_, twinErr := os.Stat(filepath.Join(root, "hack", "compare", "cmd", "handroll-twin"))
	if twinErr != nil && slices.Contains(o.contenders, "twin") {
		if explicitContenders {
			return fmt.Errorf("-contenders names twin, but hack/compare/cmd/handroll-twin does not exist")
		}
		o.contenders = slices.DeleteFunc(o.contenders, func(c string) bool { return c == "twin" })
		res.Notes = append(res.Notes, "The twin was not run: hack/compare/cmd/handroll-twin does not exist in this checkout.")
	}
	bld := builder{root: root, dir: work}
	var contenders []contender
	var floor contender
	for _, name := range []string{"handroll", "twin", "floor"} {
		// The floor is built even when it is not measured: it warms the
		// API server up.
		if !slices.Contains(o.contenders, name) && name != "floor" {
			continue
		}
		b.logf("building %s", name)
		c := contender{name: name, operator: name != "floor"}
		switch name {
		case "handroll":
			c.bin, err = bld.build(ctx, "handroll", ".", "./cmd/handroll")
		case "twin":
			c.bin, err = bld.build(ctx, "handroll-twin", filepath.Join("hack", "compare"), "./cmd/handroll-twin")
		case "floor":
			c.bin, err = bld.build(ctx, "floor", ".", "./hack/bench/floor")
			floor = c
		}
		if err != nil {
			return err
		}
		if c.operator {
			c.warmStandbyFlag = hasFlag(c.bin, "leader-elect-warm-standby")
		}
		if slices.Contains(o.contenders, name) {
			contenders = append(contenders, c)
			res.Contenders = append(res.Contenders, name)
		}
	}
	b.o = o

	// One control plane for everything.
	cp, err := controlplane.Start(ctx, controlplane.Options{
		CRDDirs:  []string{filepath.Join(root, "manifests", "crd")},
		Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil {
			fmt.Fprintf(os.Stderr, "bench: stopping the control plane: %v\n", stopErr)
		}
	}()
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
	b.cluster = &cluster{kube: kube, client: client}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	b.tracker = newTracker()
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	if err := b.tracker.start(trackCtx, kube, client, operatorNamespace); err != nil {
		return err
	}

	res.Config = Config{
		WebApps: o.n, Namespaces: b.namespaces, Rounds: o.rounds, IdleSeconds: o.idle.Seconds(),
		QPS: o.qps, Burst: o.burst, Workers: o.workers,
		LeaseDuration: leaseDuration.String(), RenewDeadline: renewDeadline.String(), RetryPeriod: retryPeriod.String(),
	}

	b.logf("warming the API server up")
	if err := b.warmUp(ctx, floor); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for round := 1; round <= o.rounds; round++ {
		for _, c := range rotate(contenders, round-1) {
			s, err := b.converge(ctx, c, round)
			if err != nil {
				return fmt.Errorf("converge, %s, round %d: %w", c.name, round, err)
			}
			res.Converge = append(res.Converge, s)
			cs, err := b.coldStart(ctx, c, round)
			if err != nil {
				return fmt.Errorf("cold start, %s, round %d: %w", c.name, round, err)
			}
			res.ColdStart = append(res.ColdStart, cs)
		}
	}

	if o.skipFailover {
		res.Notes = append(res.Notes, "Failover was skipped (-skip-failover).")
	} else if err := b.failovers(ctx, contenders, res); err != nil {
		return err
	}

	res.Duration = time.Since(b.began).Round(time.Second).String()
	if err := res.write(o.out); err != nil {
		return err
	}
	b.logf("wrote %s and %s", filepath.Join(o.out, "benchmarks.md"), filepath.Join(o.out, "benchmarks.json"))
	return nil
}

// failovers runs every failover variant of the contenders, SIGKILL and
// SIGTERM, in each round.
func (b *bench) failovers(ctx context.Context, contenders []contender, res *Results) error {
	var variants []failoverVariant
	for _, c := range contenders {
		switch c.name {
		case "handroll":
			variants = append(variants, failoverVariant{name: variantHandrollWarm, c: c})
			if c.warmStandbyFlag {
				variants = append(variants, failoverVariant{name: variantHandrollCold, c: c, extra: []string{"--leader-elect-warm-standby=false"}})
			} else {
				res.Notes = append(res.Notes, "handroll without warm standby was not measured: this handroll has no --leader-elect-warm-standby flag.")
			}
		case "twin":
			variants = append(variants, failoverVariant{name: variantTwin, c: c})
		}
	}
	if len(variants) == 0 {
		res.Notes = append(res.Notes, "Failover was not measured: no operator among the contenders.")
		return nil
	}
	res.Config.FailoverWebApps, res.Config.FailoverNamespaces = b.o.n, 1
	trial := 0
	for round := 1; round <= b.o.rounds; round++ {
		for _, v := range rotate(variants, round-1) {
			for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
				trial++
				s, err := b.failover(ctx, v, sig, round, trial)
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
