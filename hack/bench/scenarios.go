package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// unrelatedScenario creates the unrelated objects, has every operator
// converge cell's WebApps with them present, and deletes them, so that the
// other measurements run without them. The same cell's per-size converge
// is the comparison without them. The floor is left out: it watches
// nothing, so unrelated objects cannot change its work.
func (b *bench) unrelatedScenario(ctx context.Context, contenders []contender, cell Cell) (err error) {
	m := b.o.unrelated
	namespaces := unrelatedNamespaceNames(m)
	b.res.Config.Unrelated, b.res.Config.UnrelatedNamespaces, b.res.Config.UnrelatedConfigMapBytes = m, len(namespaces), unrelatedConfigMapBytes
	b.res.Config.UnrelatedCell, b.res.Config.UnrelatedKubectlApply = &cell, true
	b.logf("unrelated objects: creating %d ConfigMaps of %d KiB, %d Deployments, %d Services in %d namespaces", m, unrelatedConfigMapBytes>>10, m, m, len(namespaces))
	began := time.Now()
	if err := b.cluster.createNamespaces(ctx, namespaces); err != nil {
		return err
	}
	defer func() {
		began := time.Now()
		err = errors.Join(err, b.cluster.wipe(context.WithoutCancel(ctx), namespaces))
		b.logf("unrelated objects: deleted in %s", elapsed(time.Since(began)))
	}()
	if err := b.cluster.createUnrelated(ctx, namespaces, m); err != nil {
		return err
	}
	if err := b.cluster.podsRunning(ctx, namespaces, m); err != nil {
		return fmt.Errorf("the unrelated Deployments' pods: %w", err)
	}
	b.logf("unrelated objects: created in %s", elapsed(time.Since(began)))
	for round := 1; round <= b.o.rounds; round++ {
		for _, c := range rotate(contenders, round-1) {
			if c.name == contenderFloor {
				continue
			}
			s, _, err := b.converge(ctx, c, convergeRun{cell: cell, round: round, label: fmt.Sprintf("u-r%d-%s", round, c.name), unrelated: m})
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", c.name, round, err)
			}
			b.res.Converge = append(b.res.Converge, s)
		}
	}
	return nil
}

// editReplicas is what each live edit sets spec.replicas to; every WebApp
// is created with 1.
const editReplicas = 2

// editIndex is the WebApp the j-th of k edits changes among n: the middle
// of the j-th of k equal slices, so that the edits reach from the front of
// the backlog to its back.
func editIndex(j, k, n int) int { return (2*j + 1) * n / (2 * k) }

// backlog measures c starting on cell.N WebApps created while it was
// stopped, and the latency of user edits made as soon as it is ready,
// while that backlog drains.
func (b *bench) backlog(ctx context.Context, c contender, cell Cell, nsLabel string, round int) (_ BacklogSample, err error) {
	n := cell.N
	label := fmt.Sprintf("live edits %s, %s, round %d/%d", c.name, cell, round, b.o.rounds)
	s := BacklogSample{Contender: c.name, Round: round, Cell: cell}
	namespaces := b.namespaceNames(nsLabel, namespacesFor(n))
	if err := b.cluster.createNamespaces(ctx, namespaces); err != nil {
		return s, err
	}
	b.tracker.begin(namespaces, n)
	defer func() { err = errors.Join(err, b.cleanUp(ctx, namespaces)) }()
	b.logf("%s: creating %d WebApps", label, n)
	if err := b.cluster.createWebApps(ctx, namespaces, n); err != nil {
		return s, err
	}
	// Every WebApp is in the bench's cache before the contender starts, so
	// whatever changes next is the contender's doing.
	if _, err := b.wait(ctx, label+" (creating)", nil, func(r runState) bool { return r.seen == r.want }, time.Now()); err != nil {
		return s, err
	}

	// Before the start: the contender writes its first events within
	// milliseconds of it.
	eventsBefore, err := b.cluster.eventWrites(ctx)
	if err != nil {
		return s, err
	}
	p, err := launch(c.name, c.bin, b.args(c, cell.Regime, "--leader-elect=false"), b.logDir)
	if err != nil {
		return s, err
	}
	defer func() { err = errors.Join(err, p.stop(syscall.SIGTERM, stopGrace)) }()
	ready, err := p.waitReady(ctx, 2*time.Minute)
	if err != nil {
		return s, err
	}
	s.ReadySeconds = ready.Sub(p.started).Seconds()

	b.logf("%s: ready after %s; %d edits, %s apart", label, formatSeconds(s.ReadySeconds), b.o.edits, b.o.editInterval)
	if s.EditSeconds, err = b.liveEdits(ctx, p, label, namespaces, n); err != nil {
		return s, err
	}
	b.logf("%s: all %d edits seen; p50 %s, p99 %s", label, len(s.EditSeconds), formatSeconds(percentile(s.EditSeconds, 50)), formatSeconds(percentile(s.EditSeconds, 99)))

	r, err := b.wait(ctx, label, []*proc{p}, func(r runState) bool { return r.converged == r.want }, ready)
	if err != nil {
		return s, err
	}
	// convergedAt is the last time every WebApp was converged: the edits
	// are all seen by now, so this is the end of the drain.
	s.DrainSeconds = r.convergedAt.Sub(ready).Seconds()
	if !r.firstWrite.IsZero() {
		s.FirstWriteSeconds = r.firstWrite.Sub(p.started).Seconds()
	}
	after, err := b.settle(ctx, p)
	if err != nil {
		return s, err
	}
	eventsAfter, err := b.cluster.eventWrites(ctx)
	if err != nil {
		return s, err
	}
	s.Requests, s.EventWrites = after, eventsAfter-eventsBefore
	if s.PeakRSSBytes, s.CPUSeconds, err = p.usage(); err != nil {
		return s, err
	}
	b.logf("%s: drained %s after ready, %.0f requests", label, formatSeconds(s.DrainSeconds), total(s.Requests))
	return s, nil
}

// liveEdits makes -edits edits of spec.replicas, -edit-interval apart, each
// to a different one of the n WebApps in namespaces, and returns how long
// after its response each was seen applied. Each waiter is registered
// before its edit, and its clock starts at the edit's response.
func (b *bench) liveEdits(ctx context.Context, p *proc, label string, namespaces []string, n int) ([]float64, error) {
	type pending struct {
		name      string
		seen      <-chan time.Time
		responded time.Time
	}
	var edits []pending
	for j := range b.o.edits {
		i := editIndex(j, b.o.edits, n)
		ns, name := namespaces[i%len(namespaces)], appName(i)
		seen := b.tracker.awaitApp(ns, name, func(a *app) bool { return a.deployment && a.replicas == editReplicas })
		if _, err := b.cluster.setReplicas(ctx, ns, name, editReplicas); err != nil {
			return nil, err
		}
		edits = append(edits, pending{name: ns + "/" + name, seen: seen, responded: time.Now()})
		if err := sleep(ctx, b.o.editInterval); err != nil {
			return nil, err
		}
	}
	timeout := time.After(b.o.timeout)
	var latencies []float64
	for _, e := range edits {
		select {
		case at := <-e.seen:
			// A Deployment seen before the edit's response came back is a
			// zero latency, not a negative one.
			latencies = append(latencies, max(0, at.Sub(e.responded).Seconds()))
		case <-p.exited:
			return nil, p.failed()
		case <-timeout:
			return nil, fmt.Errorf("%s: the edit of %s not seen within %s", label, e.name, b.o.timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return latencies, nil
}
