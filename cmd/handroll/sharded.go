package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/pkg/shard"
)

// maxShards bounds --shards: each range costs a Lease renewed every retry
// period by its holder.
const maxShards = 1024

// validateShards checks --shards against the other flags.
func validateShards(o options) error {
	switch {
	case o.shards < 0 || o.shards > maxShards:
		return fmt.Errorf("--shards=%d: must be between 0 (one leader) and %d", o.shards, maxShards)
	case o.shards > 0 && !o.leader.Enabled:
		return fmt.Errorf("--shards=%d needs --leader-elect: each range is fenced by a Lease", o.shards)
	}
	return nil
}

// validateLeaseNames refuses a --leader-elect-resource-name that the shard
// membership cannot carry. It is the label value that marks the membership
// Leases, which a single leader lists too before it reconciles: a longer
// one would leave a leader holding its Lease and reconciling nothing. It
// is also the prefix of the range and membership Lease names.
func validateLeaseNames(o options) error {
	if !o.leader.Enabled {
		return nil
	}
	name := o.leader.LeaseName
	if msgs := validation.IsValidLabelValue(name); len(msgs) > 0 {
		return fmt.Errorf("--%s=%q: at most 63 characters, of a label value: it marks the shard membership Leases, which a single leader lists too (%s)",
			leader.FlagResourceName, name, strings.Join(msgs, "; "))
	}
	n := max(o.shards, 1)
	for _, derived := range []string{shard.MemberLease(name, "any"), shard.RangeLease(name, shard.Range{Index: n - 1, Count: n})} {
		if msgs := validation.IsDNS1123Subdomain(derived); len(msgs) > 0 {
			return fmt.Errorf("--%s=%q: the Lease name %q made from it is not valid: %s", leader.FlagResourceName, name, derived, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// shardedDeps is what steps 3 to 7 built, for the sharded steps 8 to 12.
type shardedDeps struct {
	cfg         *rest.Config
	kube        kubernetes.Interface
	handroll    clientset.Interface
	metadata    metadata.Interface
	recorder    events.EventRecorder
	broadcaster events.EventBroadcaster
	eventSink   *flushingSink
	registry    prometheus.Registerer
	health      *server.Health
	srvs        *servers
	identity    string
}

// startSharded is steps 8 to 12 with --shards: instead of one leader
// running one controller over every WebApp, a shard.Coordinator runs this
// replica's share of the ranges, each on its own Lease, with caches of
// that range's namespaces alone and controllers of its own: the WebApps',
// and the directory's for the range's entries.
func startSharded(ctx context.Context, o options, d shardedDeps) error {
	// Step 8 — cache, per range. The API server narrows each range's
	// caches when it applies the shardSelector, or with --namespaces, where
	// a range's namespaces are known. Otherwise every replica caches every
	// range once. Either way each range's controller keeps to its range on
	// the client too (step 9): the server's filtering saves memory, never
	// decides correctness.
	var shared *sharedCaches
	if len(o.namespaces) == 0 {
		probeCtx, cancelProbe := context.WithTimeout(ctx, 30*time.Second)
		filters, err := shard.ServerFilters(probeCtx, d.kube, o.operatorNamespace)
		cancelProbe()
		if err != nil {
			return fmt.Errorf("step 8, cache: %w", err)
		}
		if !filters {
			klog.InfoS("The API server does not apply shardSelector (its ShardedListAndWatch feature gate is off): every replica caches every range, and filters on the client")
			if shared, err = newSharedCaches(ctx, o, d); err != nil {
				return err
			}
			defer shared.stop()
		}
	}
	ranges, err := shard.Ranges(o.shards)
	if err != nil {
		return fmt.Errorf("step 8, cache: %w", err)
	}
	held := &heldCaches{byRange: map[int]syncer{}}
	d.health.AddReadinessCheck(server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		if shared != nil {
			if unsynced := shared.caches.Unsynced(); len(unsynced) > 0 {
				return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
			}
		}
		return held.ready()
	}})
	d.health.AddReadinessReport(server.Check{Name: "range-informer-sync", Check: func(*http.Request) error {
		if unsynced := held.unsynced(); len(unsynced) > 0 {
			return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
		}
		return nil
	}})

	// Step 9 — controllers, one per range held, each named after its range
	// in its metrics, logs and journal lines.
	controller.RegisterWorkqueueMetrics(d.registry)
	var journal controller.Journal
	if o.reconcileJournal != "" {
		j, err := controller.OpenJournal(o.reconcileJournal, d.identity, o.reconcileJournalMaxMiB<<20)
		if err != nil {
			return fmt.Errorf("step 9, controllers: %w", err)
		}
		defer j.Close()
		journal = j
	}
	drain := drainTimeout(o.shutdownTimeout)
	work := func(ctx context.Context, r shard.Range) error {
		copts := controller.Options{
			Name:                    fmt.Sprintf("%s-%d-of-%d", webapp.ControllerName, r.Index, r.Count),
			MaxConcurrentReconciles: o.maxConcurrentReconciles,
			Registerer:              d.registry,
			ShutdownTimeout:         drain,
			Journal:                 journal,
			// Whatever the caches hold: the API server that applied the
			// range's shardSelector at the start may not at the next list
			// or watch (one restarted without the gate), and then every
			// range's cache holds every WebApp.
			Predicates: []controller.Predicate{inRange(r)},
		}
		dopts := controller.Options{
			Name:            fmt.Sprintf("%s-%d-of-%d", webapp.DirectoryControllerName, r.Index, r.Count),
			Registerer:      d.registry,
			ShutdownTimeout: drain,
			Journal:         journal,
		}
		// The range's entries of the directory, among the other ranges'
		// writers: each write carries the part's resourceVersion, and
		// touches only the entries Manages says are the range's.
		directory := func(caches *handrollcache.Caches, inf webapp.Informers, manages func(string) bool) (*controller.Controller, error) {
			return webapp.NewDirectoryController(&webapp.DirectoryReconciler{
				WebApps:       caches.WebAppLister(),
				Services:      caches.ServiceLister(),
				ConfigMaps:    caches.ConfigMapLister(),
				Kube:          d.kube,
				Namespace:     o.operatorNamespace,
				Manages:       manages,
				WriteInterval: webapp.DefaultDirectoryWriteInterval,
			}, inf, dopts)
		}
		if shared != nil {
			c, err := webapp.NewController(shared.reconciler, shared.informers, copts)
			if err != nil {
				return err
			}
			dc, err := directory(shared.caches, shared.informers, inRangeKey(r))
			if err != nil {
				return err
			}
			klog.InfoS("Range held; starting its controllers", "range", r)
			return runControllers(ctx,
				func(ctx context.Context) error { return c.Start(ctx, shared.caches.HasSynced) },
				func(ctx context.Context) error { return dc.Start(ctx, shared.caches.HasSynced) },
			)
		}
		opts := handrollcache.Options{
			ChildSelector:     webapp.ChildSelector,
			MetadataSelector:  webapp.ForeignSelector,
			SyncPeriod:        o.syncPeriod,
			ShardSelector:     r.Selector(),
			OperatorNamespace: o.operatorNamespace,
		}
		manages := inRangeKey(r)
		if len(o.namespaces) > 0 {
			// Informers per namespace, as without --shards, for this
			// range's share of them; a range none falls in has no work.
			opts.ShardSelector = ""
			for _, ns := range o.namespaces {
				if shard.Of(ns, r.Count) == r.Index {
					opts.Namespaces = append(opts.Namespaces, ns)
				}
			}
			if len(opts.Namespaces) == 0 {
				klog.InfoS("Range held; none of --namespaces falls in it", "range", r)
				<-ctx.Done()
				return nil
			}
			manages = webapp.ManagedDirectoryKeys(opts.Namespaces)
		}
		caches := handrollcache.New(d.kube, d.handroll, d.metadata, opts)
		inf, err := webAppInformers(caches)
		if err != nil {
			return err
		}
		c, err := webapp.NewController(newWebAppReconciler(caches, d.kube, d.handroll, d.recorder), inf, copts)
		if err != nil {
			return err
		}
		dc, err := directory(caches, inf, manages)
		if err != nil {
			return err
		}
		stop := make(chan struct{})
		held.add(r, caches)
		defer func() {
			held.remove(r)
			close(stop)
			caches.Shutdown()
		}()
		// Step 10, per range — its caches, bounded, then its controller.
		caches.Start(stop)
		syncCtx, cancelSync := context.WithTimeout(ctx, o.cacheSyncTimeout)
		defer cancelSync()
		if err := caches.WaitForSync(syncCtx); err != nil {
			if ctx.Err() != nil {
				return nil // handed over, or stopped, while it filled
			}
			return fmt.Errorf("step 10, range %v: caches not synced within --cache-sync-timeout=%s: %w", r, o.cacheSyncTimeout, err)
		}
		klog.InfoS("Range held; starting its controllers", "range", r)
		return runControllers(ctx,
			func(ctx context.Context) error { return c.Start(ctx, caches.HasSynced) },
			func(ctx context.Context) error { return dc.Start(ctx, caches.HasSynced) },
		)
	}
	metrics, err := shard.NewMetrics(d.registry)
	if err != nil {
		return fmt.Errorf("step 9, controllers: %w", err)
	}

	// Step 11 — the ranges' elections (shard.Coordinator): membership,
	// assignment, one Lease per range.
	members, err := newMembers(d.cfg, o, d.identity)
	if err != nil {
		return fmt.Errorf("step 11, election: %w", err)
	}
	coordinator := &shard.Coordinator{
		Ranges:     ranges,
		Members:    members,
		Election:   o.leader,
		NewElector: func(opts leader.Options) (*leader.Elector, error) { return leader.New(d.cfg, opts, d.registry) },
		Work:       work,
		Interval:   o.leader.RetryPeriod,
		Metrics:    metrics,
	}
	// The single leader's elector does not run with --shards: its check in
	// /healthz passes, and the ranges' electors answer instead.
	d.health.AddLivenessCheck(coordinator.HealthCheck())
	cacheCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	d.broadcaster.StartRecordingToSink(cacheCtx.Done())
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	election := make(chan error, 1)
	go func() { election <- coordinator.Run(runCtx) }()
	klog.InfoS("Sharding", "ranges", o.shards, "identity", d.identity)

	// Step 12 — as with one leader: the ranges drain and their Leases are
	// released first; a lost range Lease ends the process at once.
	st := stopper{
		timeout:     o.shutdownTimeout,
		stopRun:     stopRun,
		election:    election,
		flushEvents: flushEvents(d.broadcaster, d.eventSink),
		stopCaches:  stopEvents, // each range stopped its own caches
		stopServers: d.srvs.stop,
	}
	return st.waitThenStop(ctx, d.srvs.errs, "shard election", "the ranges")
}

// newMembers is this replica's shard membership. Its renewals go through a
// client of their own, as the range Leases' do (leader.ClientConfig): on
// the controllers' rate-limited client, with no timeout, a burst of writes
// could hold a renewal past the Lease duration, and the others would judge
// a live replica gone and take its ranges' places in the assignment.
func newMembers(cfg *rest.Config, o options, identity string) (*shard.Members, error) {
	client, err := coordinationv1.NewForConfig(leader.ClientConfig(cfg, o.leader, "shard-members"))
	if err != nil {
		return nil, fmt.Errorf("shard membership client: %w", err)
	}
	return &shard.Members{
		Client: client, Namespace: o.leader.LeaseNamespace,
		Group: o.leader.LeaseName, Identity: identity, Duration: o.leader.LeaseDuration,
		Split: strconv.Itoa(o.shards), SingleLeader: o.leader.LeaseName,
	}, nil
}

// syncer is a range's caches, as readiness sees them.
type syncer interface{ Unsynced() []string }

// heldCaches are the caches of the ranges this replica holds, for /readyz.
//
// They count towards readiness only until they have first synced: a
// replica starting (a rollout's new pod) is Ready once its first ranges
// can be reconciled, which paces the rollout. Ranges taken over later
// never make a Ready replica unready: when a replica dies, every survivor
// syncs its share of the ranges at once, and counting those syncs could
// empty the webhook Service, which the webhooks (failurePolicy: Fail) need
// and which does not depend on any range's cache. The range-informer-sync
// report still shows them.
type heldCaches struct {
	mu       sync.Mutex
	byRange  map[int]syncer
	wasReady bool // every held range had synced, with at least one held
}

func (h *heldCaches) add(r shard.Range, c syncer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byRange[r.Index] = c
}

func (h *heldCaches) remove(r shard.Range) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byRange, r.Index)
}

// ready is the readiness check's part of the held ranges.
func (h *heldCaches) ready() error {
	unsynced := h.unsynced()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.wasReady:
		return nil
	case len(unsynced) > 0:
		return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
	case len(h.byRange) > 0:
		h.wasReady = true
	}
	return nil
}

// unsynced names the informers of held ranges that have not synced.
func (h *heldCaches) unsynced() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for i, c := range h.byRange {
		for _, name := range c.Unsynced() {
			out = append(out, fmt.Sprintf("range %d: %s", i, name))
		}
	}
	slices.Sort(out)
	return out
}

// sharedCaches are the caches every range's controller shares when the API
// server cannot narrow them: filled once, before the ranges are taken, as
// a warm standby's are.
type sharedCaches struct {
	caches     *handrollcache.Caches
	informers  webapp.Informers
	reconciler *webapp.Reconciler
	stop       func()
}

func newSharedCaches(ctx context.Context, o options, d shardedDeps) (*sharedCaches, error) {
	caches := handrollcache.New(d.kube, d.handroll, d.metadata, handrollcache.Options{
		ChildSelector:     webapp.ChildSelector,
		MetadataSelector:  webapp.ForeignSelector,
		SyncPeriod:        o.syncPeriod,
		OperatorNamespace: o.operatorNamespace,
	})
	inf, err := webAppInformers(caches)
	if err != nil {
		return nil, fmt.Errorf("step 8, cache: %w", err)
	}
	done := make(chan struct{})
	s := &sharedCaches{caches: caches, informers: inf, reconciler: newWebAppReconciler(caches, d.kube, d.handroll, d.recorder),
		stop: func() { close(done); caches.Shutdown() }}
	caches.Start(done)
	syncCtx, cancel := context.WithTimeout(ctx, o.cacheSyncTimeout)
	defer cancel()
	if err := caches.WaitForSync(syncCtx); err != nil && ctx.Err() == nil {
		s.stop()
		return nil, fmt.Errorf("step 10, caches not synced within --cache-sync-timeout=%s: %w", o.cacheSyncTimeout, err)
	}
	return s, nil
}

// inRangeKey says which directory entries (DirectoryKey: "namespace.name")
// are r's.
func inRangeKey(r shard.Range) func(key string) bool {
	return func(key string) bool {
		ns, _, ok := strings.Cut(key, ".")
		return ok && shard.Of(ns, r.Count) == r.Index
	}
}

// inRange passes the events of objects in r's namespaces: a WebApp's
// children and referenced ConfigMap share its namespace.
func inRange(r shard.Range) controller.Predicate {
	in := func(obj metav1.Object) bool { return shard.Of(obj.GetNamespace(), r.Count) == r.Index }
	return controller.PredicateFuncs{
		CreateFunc: in,
		UpdateFunc: func(_, obj metav1.Object) bool { return in(obj) },
		DeleteFunc: in,
	}
}

// waitForNoShards holds a single leader back while replicas with --shards
// are live: they reconcile under range Leases that this one's Lease does
// not exclude. A membership Lease seen for the first time counts as live
// for a lease duration, so Leases left by killed replicas cost that wait.
// It returns an error only for one that no retry mends (RBAC without list
// on leases): the leader then gives its Lease up and the exit says why.
func waitForNoShards(ctx context.Context, kube kubernetes.Interface, o options) error {
	m := &shard.Members{Client: kube.CoordinationV1(), Namespace: o.leader.LeaseNamespace,
		Group: o.leader.LeaseName, Duration: o.leader.LeaseDuration, Split: "0"}
	logged := false
	for {
		others, err := m.OtherSplits(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil //nolint:nilerr // stopped while it read: a stop, not a failure
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// No retry mends these: lead nothing rather than hold the Lease
			// reconciling nothing, so that the exit says why.
			return fmt.Errorf("reading the shard membership Leases in %s before reconciling (the operator's Role needs list on leases: re-apply the RBAC of this version): %w",
				o.leader.LeaseNamespace, err)
		case err != nil:
			klog.ErrorS(err, "Reading the shard members before reconciling")
		case len(others) == 0:
			return nil
		case !logged:
			klog.ErrorS(nil, "Replicas with --shards are live; reconciling nothing until they are gone", "members", others)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.leader.RetryPeriod):
		}
	}
}
