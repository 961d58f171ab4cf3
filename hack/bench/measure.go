package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// How long a stopped contender may take to exit before it is killed.
const stopGrace = time.Minute

// args are the flags every run of c gets in regime r, then extra.
func (b *bench) args(c contender, r Regime, extra ...string) []string {
	args := []string{
		"--kubeconfig=" + b.kubeconfig,
		"--kube-api-qps=" + strconv.FormatFloat(r.QPS, 'g', -1, 64),
		"--kube-api-burst=" + strconv.Itoa(r.Burst),
		"--max-concurrent-reconciles=" + strconv.Itoa(b.o.workers),
	}
	if c.operator {
		args = append(args,
			"--operator-namespace="+operatorNamespace,
			"--webhook-port=0",
			// Both operators default to 10h; said here so that a change of
			// either default cannot skew the comparison.
			"--sync-period=10h",
			"--graceful-shutdown-timeout=30s",
		)
	}
	args = append(args, c.flags...)
	return append(args, extra...)
}

// namespaceNames are the names of a measurement's namespaces.
func (b *bench) namespaceNames(label string, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("%s%s-%d", namespacePrefix, label, i)
	}
	return out
}

// convergeRun says what one converge measurement includes.
type convergeRun struct {
	cell  Cell
	round int
	// label names the measurement's namespaces; unique in the run.
	label string
	// idle and coldStart add those measurements (operators only) on the
	// converged WebApps.
	idle, coldStart bool
	// unrelated is how many unrelated objects of each kind are present.
	unrelated int
}

// converge measures c reconciling N WebApps created once it is ready, then,
// for an operator, its idle writes, and its restart with every WebApp
// converged (the cold start).
func (b *bench) converge(ctx context.Context, c contender, run convergeRun) (_ ConvergeSample, _ *ColdStartSample, err error) {
	n := run.cell.N
	label := fmt.Sprintf("converge %s, %s, round %d/%d", c.name, run.cell, run.round, b.o.rounds)
	if run.unrelated > 0 {
		label += ", unrelated objects present"
	}
	s := ConvergeSample{Contender: c.name, Round: run.round, Cell: run.cell, Unrelated: run.unrelated}
	namespaces := b.namespaceNames(run.label, namespacesFor(n))
	if err := b.cluster.createNamespaces(ctx, namespaces); err != nil {
		return s, nil, err
	}
	b.tracker.begin(namespaces, n)
	defer func() { err = errors.Join(err, b.cleanUp(ctx, namespaces)) }()

	p, args, pprofAddr, err := b.launchConverge(c, run)
	if err != nil {
		return s, nil, err
	}
	defer func() {
		if p.running() {
			err = errors.Join(err, p.stop(syscall.SIGTERM, stopGrace))
		}
	}()
	after, err := b.measureConverge(ctx, c, p, convergeTarget{label: label, namespaces: namespaces, n: n, pprofAddr: pprofAddr}, &s)
	if err != nil {
		return s, nil, err
	}
	if c.operator && run.idle && b.o.idle > 0 {
		if err := b.measureIdle(ctx, p, label, after, &s); err != nil {
			return s, nil, err
		}
	}
	if s.PeakRSSBytes, _, err = p.usage(); err != nil {
		return s, nil, err
	}
	if err := p.stop(syscall.SIGTERM, stopGrace); err != nil {
		return s, nil, err
	}
	if !c.operator || !run.coldStart {
		return s, nil, nil
	}
	cs, err := b.coldStart(ctx, c, run, args)
	return s, &cs, err
}

// launchConverge starts c for run: an operator without leader election,
// the floor waiting for SIGUSR1; with -heap-profiles, an operator serves
// pprof at pprofAddr. args are c's arguments, for the cold start.
func (b *bench) launchConverge(c contender, run convergeRun) (p *proc, args []string, pprofAddr string, err error) {
	extra := []string{"--leader-elect=false"}
	if !c.operator {
		extra = []string{"--wait-for-sigusr1"}
	}
	if b.o.heapProfiles && c.operator {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, nil, "", err
		}
		extra = append(extra, "--pprof-bind-address="+pprofAddr)
	}
	args = b.args(c, run.cell.Regime, extra...)
	p, err = launch(c.name, c.bin, args, b.logDir)
	return p, args, pprofAddr, err
}

// convergeTarget is what one converge measurement creates, and where.
type convergeTarget struct {
	label      string
	namespaces []string
	n          int
	pprofAddr  string // "" without -heap-profiles
}

// measureConverge waits for p to be ready, creates the WebApps and
// measures, into s, how p converges them: times, requests, events and
// memory. after is p's request counts once it settled.
func (b *bench) measureConverge(ctx context.Context, c contender, p *proc, t convergeTarget, s *ConvergeSample) (after map[string]float64, err error) {
	label := t.label
	b.logf("%s: starting", label)
	ready, err := p.waitReady(ctx, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	s.ReadySeconds = ready.Sub(p.started).Seconds()
	before, err := p.requests()
	if err != nil {
		return nil, err
	}
	eventsBefore, err := b.cluster.eventWrites(ctx)
	if err != nil {
		return nil, err
	}

	if t.pprofAddr != "" {
		// For a CPU profile of the converge, from another shell:
		// go tool pprof http://ADDR/debug/pprof/profile?seconds=…
		b.logf("%s: pprof at http://%s/debug/pprof/", label, t.pprofAddr)
	}
	b.logf("%s: ready after %s; creating %d WebApps", label, formatSeconds(s.ReadySeconds), t.n)
	created, err := b.createAndApply(ctx, c, p, t, s)
	if err != nil {
		return nil, err
	}
	if b.o.controllers && c.operator {
		if err := b.waitReady(ctx, label, p, created, s); err != nil {
			return nil, err
		}
	}
	after, err = b.settle(ctx, p)
	if err != nil {
		return nil, err
	}
	eventsAfter, err := b.cluster.eventWrites(ctx)
	if err != nil {
		return nil, err
	}
	s.Requests, s.EventWrites = delta(before, after), eventsAfter-eventsBefore
	if total(s.Requests) == 0 {
		return nil, fmt.Errorf("%s reported no API requests: does it export rest_client_requests_total?", c.name)
	}
	if s.ConvergedPeakRSSBytes, s.CPUSeconds, err = p.usage(); err != nil {
		return nil, err
	}
	s.ConvergedLiveHeapBytes, _ = p.liveHeap()
	if t.pprofAddr != "" {
		if err := saveHeapProfile(ctx, t.pprofAddr, strings.TrimSuffix(p.logPath, ".log")+".heap.pb.gz"); err != nil {
			return nil, err
		}
	}
	readyNote := ""
	if s.ReadyAllSeconds > 0 {
		readyNote = ", Ready in " + formatSeconds(s.ReadyAllSeconds)
	}
	b.logf("%s: applied in %s%s, %.0f requests (%.0f writes, %.0f of them events)", label, formatSeconds(s.ConvergeSeconds), readyNote, total(s.Requests), writes(s.Requests), s.EventWrites)
	return after, nil
}

// createAndApply creates the WebApps and waits until p has applied them
// all, recording into s the times and what the API server and etcd spent
// in CPU meanwhile. created is when the last create returned.
func (b *bench) createAndApply(ctx context.Context, c contender, p *proc, t convergeTarget, s *ConvergeSample) (created time.Time, err error) {
	apiBefore, etcdBefore, err := b.cluster.serverCPU()
	if err != nil {
		return created, err
	}
	began := time.Now()
	if err := b.cluster.createWebApps(ctx, t.namespaces, t.n); err != nil {
		return created, err
	}
	created = time.Now()
	s.CreateSeconds = created.Sub(began).Seconds()
	if !c.operator {
		if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			return created, err
		}
	}
	r, err := b.wait(ctx, t.label, []*proc{p}, func(r runState) bool { return r.converged == r.want }, created)
	if err != nil {
		return created, err
	}
	s.ConvergeSeconds = r.convergedAt.Sub(created).Seconds()
	// Read at once, so that the span is the same for every contender: the
	// operators' wait for Ready that follows is not in it.
	apiAfter, etcdAfter, err := b.cluster.serverCPU()
	if err != nil {
		return created, err
	}
	s.APIServerCPUSeconds, s.EtcdCPUSeconds = cpuDelta(apiBefore, apiAfter), cpuDelta(etcdBefore, etcdAfter)
	return created, nil
}

// cpuDelta is after − before, rounded to the clock tick both are read in.
func cpuDelta(before, after float64) *float64 {
	d := math.Round((after-before)*clockTicks) / clockTicks
	return &d
}

// measureIdle leaves p idle for -idle and counts, into s, the writes and
// CPU it spends with nothing changing, from its request counts after.
func (b *bench) measureIdle(ctx context.Context, p *proc, label string, after map[string]float64, s *ConvergeSample) error {
	b.logf("%s: idle for %s", label, b.o.idle)
	if err := sleep(ctx, b.o.idle); err != nil {
		return err
	}
	if !p.running() {
		return p.failed()
	}
	idle, err := p.requests()
	if err != nil {
		return err
	}
	_, cpu, err := p.usage()
	if err != nil {
		return err
	}
	s.IdleRequests = delta(after, idle)
	// Both readings are whole clock ticks: round away the float noise.
	w, idleCPU := writes(s.IdleRequests), math.Round((cpu-s.CPUSeconds)*clockTicks)/clockTicks
	s.IdleWrites, s.IdleCPUSeconds = &w, &idleCPU
	b.logf("%s: %.0f writes while idle", label, w)
	return nil
}

// coldStart restarts c, just stopped, on the WebApps it converged: the
// time to /readyz, and the writes before it and in the window after it,
// which a converged cluster should not need.
func (b *bench) coldStart(ctx context.Context, c contender, run convergeRun, args []string) (_ ColdStartSample, err error) {
	label := fmt.Sprintf("cold start %s, %s, round %d/%d", c.name, run.cell, run.round, b.o.rounds)
	s := ColdStartSample{Contender: c.name, Round: run.round, Cell: run.cell, WindowSeconds: b.o.coldWindow.Seconds()}
	p, err := launch(c.name+"-restart", c.bin, args, b.logDir)
	if err != nil {
		return s, err
	}
	defer func() { err = errors.Join(err, p.stop(syscall.SIGTERM, stopGrace)) }()
	ready, err := p.waitReady(ctx, 2*time.Minute)
	if err != nil {
		return s, err
	}
	s.ReadySeconds = ready.Sub(p.started).Seconds()
	atReady, err := p.requests()
	if err != nil {
		return s, err
	}
	if err := sleep(ctx, time.Until(ready.Add(b.o.coldWindow))); err != nil {
		return s, err
	}
	if !p.running() {
		return s, p.failed()
	}
	end, err := p.requests()
	if err != nil {
		return s, err
	}
	s.WritesBeforeReady, s.WritesAfterReady = writes(atReady), writes(delta(atReady, end))
	b.logf("%s: ready after %s; %.0f writes before, %.0f in the %s after", label, formatSeconds(s.ReadySeconds), s.WritesBeforeReady, s.WritesAfterReady, b.o.coldWindow)
	return s, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle scrapes p's request counters until they have not moved for
// settleQuiet after convergence (at most settleMax), so that writes that
// trail the last status (a directory entry, events) count as converge.
const (
	settleQuiet = 2 * time.Second
	settleMax   = time.Minute
)

func (b *bench) settle(ctx context.Context, p *proc) (map[string]float64, error) {
	last, err := p.requests()
	if err != nil {
		return nil, err
	}
	quietSince, deadline := time.Now(), time.Now().Add(settleMax)
	for time.Since(quietSince) < settleQuiet && time.Now().Before(deadline) {
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
		now, err := p.requests()
		if err != nil {
			return nil, err
		}
		if total(now) != total(last) {
			quietSince = time.Now()
		}
		last = now
	}
	return last, nil
}

// saveHeapProfile writes the in-use heap, after a collection, of the
// process serving pprof at addr to path (go tool pprof reads it).
func saveHeapProfile(ctx context.Context, addr, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// warmUp has the floor converge a few WebApps before anything is measured:
// the API server's first writes of each kind compile the CRD's validation
// rules and build its server-side apply machinery, which whoever ran first
// would otherwise pay for.
func (b *bench) warmUp(ctx context.Context, floor contender, r Regime) (err error) {
	n := min(b.o.sizes[0], 50)
	namespaces := b.namespaceNames("warmup", 1)
	if err := b.cluster.createNamespaces(ctx, namespaces); err != nil {
		return err
	}
	b.tracker.begin(namespaces, n)
	defer func() { err = errors.Join(err, b.cleanUp(ctx, namespaces)) }()
	if err := b.cluster.createWebApps(ctx, namespaces, n); err != nil {
		return err
	}
	p, err := launch("warmup", floor.bin, b.args(floor, r), b.logDir)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.stop(syscall.SIGTERM, stopGrace)) }()
	_, err = b.wait(ctx, "warm-up", []*proc{p}, func(r runState) bool { return r.converged == r.want }, time.Now())
	return err
}

// cleanUp ends the tracker's run and empties namespaces.
func (b *bench) cleanUp(ctx context.Context, namespaces []string) error {
	b.tracker.end()
	began := time.Now()
	if err := b.cluster.wipe(context.WithoutCancel(ctx), namespaces); err != nil {
		return err
	}
	b.logf("wiped in %s", elapsed(time.Since(began)))
	return nil
}

// wait waits until done holds for the tracker's run, printing progress
// every few seconds, and fails if one of procs exits or the timeout passes.
func (b *bench) wait(ctx context.Context, label string, procs []*proc, done func(runState) bool, since time.Time) (runState, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		r, changed := b.tracker.snapshot()
		if done(r) {
			return r, nil
		}
		for _, p := range procs {
			if !p.running() {
				return r, p.failed()
			}
		}
		select {
		case <-changed:
		case <-tick.C:
			b.logf("%s: %d/%d WebApps seen, %d converged, %s", label, r.seen, r.want, r.converged, elapsed(time.Since(since)))
		case <-ctx.Done():
			return r, fmt.Errorf("%s: %d/%d converged after %s: %w", label, r.converged, r.want, elapsed(time.Since(since)), ctx.Err())
		}
	}
}

// failoverVariant is an operator with the flags of one failover setup.
type failoverVariant struct {
	name  string
	c     contender
	extra []string
}

// failoverNamespace holds the WebApps of c's failover trials. The set
// stays between trials (it is converged once); each operator is confined
// to it with --namespaces, so the other operator's set does not touch its
// caches.
func (b *bench) failoverNamespace(ctx context.Context, c contender, n int) (string, error) {
	ns := namespacePrefix + "failover-" + c.name
	_, err := b.cluster.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		return ns, nil
	}
	if err := b.cluster.createNamespaces(ctx, []string{ns}); err != nil {
		return "", err
	}
	b.tracker.begin([]string{ns}, n)
	if err := b.cluster.createWebApps(ctx, []string{ns}, n); err != nil {
		return "", err
	}
	return ns, nil
}

// failover runs one trial: two replicas, the leader stopped by sig, one
// WebApp changed, the new leader's first write for it timed. A trial in
// which the old leader still wrote the change while stopping says nothing
// about the new one; it is run again, up to failoverAttempts times.
const failoverAttempts = 3

func (b *bench) failover(ctx context.Context, v failoverVariant, cell Cell, sig syscall.Signal, round, trial int) (FailoverSample, error) {
	label := fmt.Sprintf("failover %s, %s, round %d/%d", v.name, signalName(sig), round, b.o.rounds)
	ns, err := b.failoverNamespace(ctx, v.c, cell.N)
	if err != nil {
		return FailoverSample{}, err
	}
	b.tracker.begin([]string{ns}, cell.N)
	defer b.tracker.end()
	for attempt := 1; ; attempt++ {
		s, oldLeaderWrote, err := b.failoverAttempt(ctx, label, v, cell, sig, ns, fmt.Sprintf("bench-%s-%d-%d", v.name, trial, attempt), trial+attempt-1)
		s.Round = round
		if err != nil || !oldLeaderWrote {
			return s, err
		}
		if attempt == failoverAttempts {
			return s, fmt.Errorf("in %d attempts, the old leader wrote the change every time before it stopped", attempt)
		}
		b.logf("%s: the old leader wrote the change before it stopped; again", label)
	}
}

func (b *bench) failoverAttempt(ctx context.Context, label string, v failoverVariant, cell Cell, sig syscall.Signal, ns, leaseName string, pick int) (s FailoverSample, oldLeaderWrote bool, err error) {
	s = FailoverSample{Variant: v.name, Signal: signalName(sig)}
	args := b.failoverArgs(v, cell, ns, leaseName)

	// Replica A first, so that it is the leader.
	leading := b.tracker.awaitLease(leaseName, func(l lease) bool { return l.holder != "" })
	a, err := launch(v.name+"-a", v.c.bin, args, b.logDir)
	if err != nil {
		return s, false, err
	}
	defer func() { err = errors.Join(err, a.stop(syscall.SIGTERM, stopGrace)) }()
	b.logf("%s: starting replica A", label)
	first, err := b.awaitLease(ctx, leading, a)
	if err != nil {
		return s, false, err
	}
	sb, err := launch(v.name+"-b", v.c.bin, args, b.logDir)
	if err != nil {
		return s, false, err
	}
	defer func() { err = errors.Join(err, sb.stop(syscall.SIGTERM, stopGrace)) }()
	if _, err := b.wait(ctx, label, []*proc{a, sb}, func(r runState) bool { return r.converged == r.want }, time.Now()); err != nil {
		return s, false, err
	}
	if _, err := sb.waitReady(ctx, 2*time.Minute); err != nil {
		return s, false, err
	}

	// The WebApp to change, and what its change will look like.
	name := appName((pick - 1) % cell.N)
	w, err := b.cluster.client.HandrollV1().WebApps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return s, false, err
	}
	replicas := int32(2)
	if w.Spec.Replicas != nil && *w.Spec.Replicas == 2 {
		replicas = 1
	}
	wrote := b.tracker.awaitApp(ns, name, func(x *app) bool {
		return (x.deployment && x.replicas == replicas) || x.observed > w.Generation
	})
	taken := b.tracker.awaitLease(leaseName, func(l lease) bool { return l.holder != "" && l.holder != first.holder })

	// The change follows the signal at once: the time to the new leader's
	// write is then the time nobody reconciles, whatever the old process
	// still does on its way out (flushing events, stopping its servers).
	b.logf("%s: stopping the leader", label)
	stopped := time.Now()
	if err := a.cmd.Process.Signal(sig); err != nil {
		return s, false, err
	}
	gen, err := b.cluster.setReplicas(ctx, ns, name, replicas)
	if err != nil {
		return s, false, err
	}
	if gen != w.Generation+1 {
		return s, false, fmt.Errorf("WebApp %s/%s went from generation %d to %d: something else changed it", ns, name, w.Generation, gen)
	}

	written, err := b.awaitWrite(ctx, wrote, ns, name)
	if err != nil {
		return s, false, err
	}
	next, err := b.awaitLease(ctx, taken, sb)
	if err != nil {
		return s, false, err
	}
	if err := a.waitExit(sig, stopGrace); err != nil {
		return s, false, err
	}
	// Only the Lease's holder writes, and the new one only after it took
	// the Lease: an earlier write was the old leader's.
	if written.Before(next.acquire) {
		return s, true, nil
	}
	s.KillToWriteSeconds = written.Sub(stopped).Seconds()
	s.AcquireToWriteSeconds = written.Sub(next.acquire).Seconds()
	b.logf("%s: first write %s after the stop, %s after the Lease was taken", label, formatSeconds(s.KillToWriteSeconds), formatSeconds(s.AcquireToWriteSeconds))
	return s, false, nil
}

// failoverArgs are the arguments of both replicas of variant v: leader
// election on leaseName, over namespace ns alone.
func (b *bench) failoverArgs(v failoverVariant, cell Cell, ns, leaseName string) []string {
	return b.args(v.c, cell.Regime, append([]string{
		"--namespaces=" + ns,
		"--leader-elect=true",
		"--leader-elect-resource-name=" + leaseName,
		"--leader-elect-resource-namespace=" + operatorNamespace,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=" + renewDeadline.String(),
		"--leader-elect-retry-period=" + retryPeriod.String(),
	}, v.extra...)...)
}

// awaitWrite waits for the write wrote reports of WebApp ns/name, within
// the timeout.
func (b *bench) awaitWrite(ctx context.Context, wrote <-chan time.Time, ns, name string) (time.Time, error) {
	select {
	case written := <-wrote:
		return written, nil
	case <-time.After(b.o.timeout):
		return time.Time{}, fmt.Errorf("no write for WebApp %s/%s within %s", ns, name, b.o.timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// awaitLease waits for ch, failing if p exits or the timeout passes.
func (b *bench) awaitLease(ctx context.Context, ch <-chan lease, p *proc) (lease, error) {
	timeout := time.After(b.o.timeout)
	select {
	case l := <-ch:
		return l, nil
	case <-p.exited:
		return lease{}, p.failed()
	case <-timeout:
		return lease{}, fmt.Errorf("%s did not take the Lease within %s", p.name, b.o.timeout)
	case <-ctx.Done():
		return lease{}, ctx.Err()
	}
}

// execOutput runs bin with args and returns what it printed.
func execOutput(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// Quantiles are the p50 and p99, in seconds, of N durations.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	N   int     `json:"n"`
}

// readyFrom keeps r's Ready figures, timed from the last create.
func (s *ConvergeSample) readyFrom(r runState, created time.Time) {
	s.ReadyAllSeconds = r.readyAt.Sub(created).Seconds()
	lags := make([]float64, len(r.readyLags))
	for i, d := range r.readyLags {
		lags[i] = d.Seconds()
	}
	if len(lags) > 0 {
		s.ReadyLag = &Quantiles{P50: percentile(lags, percentileLow), P99: percentile(lags, percentileHigh), N: len(lags)}
	}
}

// readyTimeout bounds the wait for Ready: past it, the WebApps not Ready
// are counted and the measurement goes on. Ready depends on the cluster's
// controllers and kwok as well, and on 2 cores they can fall behind: a
// fake node's heartbeat late enough makes kube-controller-manager mark its
// pods not ready, and kwok does not mark them ready again.
const readyTimeout = 5 * time.Minute

// waitReady waits, after every WebApp is applied, until every one is
// Ready, and keeps the Ready figures in s, or how many were not Ready.
func (b *bench) waitReady(ctx context.Context, label string, p *proc, created time.Time, s *ConvergeSample) error {
	b.logf("%s: applied in %s; waiting for every WebApp to be Ready", label, formatSeconds(s.ConvergeSeconds))
	waitCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	r, err := b.wait(waitCtx, label, []*proc{p}, func(r runState) bool { return r.ready == r.want }, created)
	switch {
	case err == nil:
		s.readyFrom(r, created)
		return nil
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		s.NotReady = r.want - r.ready
		b.logf("%s: %d of %d WebApps not Ready after %s: Ready is not measured in this sample", label, s.NotReady, r.want, readyTimeout)
		return nil
	}
	return err
}
