package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
	"github.com/handroll/handroll/pkg/shard"
)

// maxShards bounds --shards: a range is at least one bucket, and each costs
// a Lease renewed every retry period by its holder.
const maxShards = shard.Buckets

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

// startSharded is steps 8 to 12 with --shards: instead of one scope over
// every WebApp, a shard.Coordinator runs this replica's share of the
// ranges, each a scope under its own Lease, with caches of that range's
// WebApps and their children alone where the API server can narrow them.
func startSharded(ctx context.Context, p *process) (err error) {
	// A range that can no longer be fenced (its Lease lost, or its work
	// still running past the stop) ends the process at once: stopping the
	// other ranges would drain them for nothing, and their lines would
	// bury the reason, which main logs last.
	unlessFenced := func(stop func()) func() {
		return func() {
			if !leader.Unfenced(err) {
				stop()
			}
		}
	}
	// Step 8 — cache: what the replica caches for all its ranges. The API
	// server narrows each range's own caches when it applies the
	// shardSelector; otherwise every replica caches every range once, and
	// each range's controller keeps to its range on the client (step 9):
	// the server's filtering saves memory, never decides correctness.
	rc, err := newReplicaCaches(ctx, p)
	if err != nil {
		return err
	}
	defer unlessFenced(rc.stop)()
	ranges, err := shard.Ranges(p.o.shards)
	if err != nil {
		return fmt.Errorf("step 8, cache: %w", err)
	}
	// The checks are in place before the replica's caches are waited for:
	// a replica serving the webhooks must become ready while its WebApps
	// wait for the conversion webhook (heldCaches).
	held := &heldCaches{byRange: map[int]syncer{}, servesConversion: p.o.webhookPort != 0}
	held.addChecks(p.health, rc.caches)
	if err := rc.sync(ctx, p.o); err != nil {
		return err
	}

	// Step 9 — controllers, one scope per range held (rangeRunner.run).
	controller.RegisterWorkqueueMetrics(p.registry)
	journal, closeJournal, err := openJournal(p.o, p.elector.Identity())
	if err != nil {
		return fmt.Errorf("step 9, controllers: %w", err)
	}
	defer closeJournal()
	runner := &rangeRunner{p: p, replica: rc, held: held, journal: journal}
	metrics, err := shard.NewMetrics(p.registry)
	if err != nil {
		return fmt.Errorf("step 9, controllers: %w", err)
	}

	// Step 11 — the ranges' elections (shard.Coordinator): membership,
	// assignment, one Lease per range.
	members, err := newMembers(p.cfg, p.o, p.elector.Identity())
	if err != nil {
		return fmt.Errorf("step 11, election: %w", err)
	}
	coordinator := &shard.Coordinator{
		Ranges:     ranges,
		Members:    members,
		Election:   p.o.leader,
		NewElector: func(opts leader.Options) (*leader.Elector, error) { return leader.New(p.cfg, opts, p.registry) },
		Work:       runner.run,
		Interval:   p.o.leader.RetryPeriod,
		Metrics:    metrics,
	}
	// The single leader's elector does not run with --shards: its check in
	// /healthz passes, and the ranges' electors answer instead.
	p.health.AddLivenessCheck(coordinator.HealthCheck())
	cacheCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer unlessFenced(stopEvents)()
	if err := startEventWriter(cacheCtx, p.broadcaster, p.eventSink); err != nil {
		return fmt.Errorf("step 7, events: %w", err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer unlessFenced(stopRun)()
	election := make(chan error, 1)
	go func() { election <- coordinator.Run(runCtx) }()
	klog.InfoS("Sharding", "ranges", p.o.shards, "identity", p.elector.Identity(), "split", members.Split)

	// Step 12 — as with one leader: the ranges drain and their Leases are
	// released first; a lost range Lease ends the process at once.
	st := stopper{
		timeout:     p.o.shutdownTimeout,
		stopRun:     stopRun,
		election:    election,
		flushEvents: flushEvents(p.broadcaster, p.eventSink),
		stopCaches:  stopEvents, // each range stopped its own caches
		stopServers: p.srvs.stop,
	}
	return st.waitThenStop(ctx, p.srvs.errs, "shard election", "the ranges")
}

// rangeRunner runs a range's scope while this replica holds its Lease.
type rangeRunner struct {
	p       *process
	replica *replicaCaches
	held    *heldCaches
	journal controller.Journal
}

// run is a range's work: its caches, unless the replica's serve every
// range, and its scope's two controllers, until ctx ends.
func (rr *rangeRunner) run(ctx context.Context, r shard.Range) error {
	s := scope{rng: &r, uidOf: rr.replica.uidOf}
	caches, inf, rec := rr.replica.caches, rr.replica.informers, rr.replica.reconciler
	if rr.replica.serverFilters {
		caches = handrollcache.New(rr.p.kube, rr.p.informers, rr.p.metadata, rr.p.cacheOptions(s))
		var err error
		if inf, err = rr.replica.rangeInformers(caches); err != nil {
			return err
		}
		rec = rr.replica.reconcilerOn(caches, rr.p)
	}
	controllers, err := rr.p.controllers(s, caches, inf, rec, rr.journal)
	if err != nil {
		return err
	}
	if caches != rr.replica.caches {
		stop := make(chan struct{})
		rr.held.add(r, caches)
		defer func() {
			rr.held.remove(r)
			close(stop)
			caches.Shutdown()
		}()
		// Step 10, per range — its caches, bounded, then its controllers.
		caches.Start(stop)
		syncCtx, cancelSync := context.WithTimeout(ctx, rr.p.o.cacheSyncTimeout)
		defer cancelSync()
		if err := caches.WaitForSync(syncCtx); err != nil {
			if ctx.Err() != nil {
				return nil // handed over, or stopped, while it filled
			}
			return fmt.Errorf("step 10, range %v: caches not synced within --cache-sync-timeout=%s: %w", r, rr.p.o.cacheSyncTimeout, err)
		}
	}
	klog.InfoS("Range held; starting its controllers", "range", r)
	return controllers.run(ctx)
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
		Split: shard.Split(o.shards), SingleLeader: o.leader.LeaseName,
	}, nil
}

// syncer is a replica's or a range's caches, as readiness sees them
// (handrollcache.Caches).
type syncer interface {
	Unsynced() []string
	UnsyncedExceptConversion() []string
	AwaitingConversion() []string
}

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
//
// A replica that serves the webhooks counts neither in its own caches nor
// in its ranges' an informer waiting only for the API server to reach
// handroll's conversion webhook (see leaderSyncCheck): with every replica
// restarted at once, none is in the webhook Service, and none would ever
// be. The informer-sync-conversion report shows those.
type heldCaches struct {
	mu               sync.Mutex
	byRange          map[int]syncer
	wasReady         bool // every held range had synced, with at least one held
	servesConversion bool
	logged           sync.Once
}

// counted is what of s readiness waits for.
func (h *heldCaches) counted(s syncer) []string {
	if h.servesConversion {
		return s.UnsyncedExceptConversion()
	}
	return s.Unsynced()
}

// addChecks adds to health the replica's readiness check, on its own
// caches and those of the ranges held, and the report of every held
// range's.
func (h *heldCaches) addChecks(health *server.Health, replica syncer) {
	health.SetReadinessCheck(server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		if unsynced := h.counted(replica); len(unsynced) > 0 {
			return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
		}
		if err := h.ready(); err != nil {
			return err
		}
		if h.servesConversion {
			if waiting := h.awaitingConversion(replica); len(waiting) > 0 {
				h.logged.Do(func() {
					klog.InfoS("Ready before these caches sync: their lists need the WebApp conversion webhook, which the API server reaches only once a replica is ready",
						"informers", waiting)
				})
			}
		}
		return nil
	}})
	health.AddReadinessReport(server.Check{Name: "range-informer-sync", Check: func(*http.Request) error {
		if unsynced := h.unsynced(); len(unsynced) > 0 {
			return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
		}
		return nil
	}})
	if h.servesConversion {
		health.AddReadinessReport(server.Check{Name: "informer-sync-conversion", Check: func(*http.Request) error {
			if waiting := h.awaitingConversion(replica); len(waiting) > 0 {
				return fmt.Errorf("waiting for the API server to reach the conversion webhook, not counted in informer-sync: %s", strings.Join(waiting, ", "))
			}
			return nil
		}})
	}
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

// unsynced names the informers of held ranges that have not synced, as
// counted.
func (h *heldCaches) unsynced() []string {
	return h.ofRanges(h.counted)
}

// awaitingConversion names the informers of the replica and of the held
// ranges that wait for the API server to reach the conversion webhook.
func (h *heldCaches) awaitingConversion(replica syncer) []string {
	return append(replica.AwaitingConversion(), h.ofRanges(syncer.AwaitingConversion)...)
}

// ofRanges is names of every held range, each prefixed with its range.
func (h *heldCaches) ofRanges(names func(syncer) []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for i, c := range h.byRange {
		for _, name := range names(c) {
			out = append(out, fmt.Sprintf("range %d: %s", i, name))
		}
	}
	slices.Sort(out)
	return out
}

// replicaCaches are what a replica caches for every range it holds, filled
// once, before it takes any, as a warm standby's are.
//
// When the API server applies the shardSelector (serverFilters), each
// range caches its own WebApps, by the selector on their uid, and their
// children, by BucketLabel; the replica caches, for all its ranges, the
// metadata of what those leave out: the objects not labelled with a bucket
// (other teams' objects, and children that do not carry it yet, which the
// reconciler then labels), every ConfigMap (a spec.configMapRef may name
// another range's), and every WebApp (whose uid says which range writes
// its directory entry).
//
// Otherwise it caches everything, as one leader does, and the ranges'
// controllers share it, each keeping to its range on the client.
type replicaCaches struct {
	serverFilters bool
	caches        *handrollcache.Caches
	informers     webapp.Informers   // of every range, without serverFilters; else the metadata alone
	reconciler    *webapp.Reconciler // every range's, without serverFilters
	uidOf         func(namespace, name string) (types.UID, bool)
	stop          func()
}

func newReplicaCaches(ctx context.Context, p *process) (*replicaCaches, error) {
	o := p.o
	filters := false
	if len(o.namespaces) == 0 {
		probeCtx, cancelProbe := context.WithTimeout(ctx, 30*time.Second)
		var err error
		filters, err = shard.ServerFilters(probeCtx, p.kube, o.operatorNamespace)
		cancelProbe()
		if err != nil {
			return nil, fmt.Errorf("step 8, cache: %w", err)
		}
	}
	rc := &replicaCaches{serverFilters: filters}
	var err error
	switch {
	case filters:
		rc.caches = handrollcache.New(p.kube, p.informers, p.metadata, handrollcache.Options{
			Namespaces:           o.namespaces,
			MetadataSelector:     "!" + shard.BucketLabel,
			ConfigMapMetadataAll: true,
			SyncPeriod:           o.syncPeriod,
		})
		rc.informers = webapp.Informers{
			DeploymentMetadata: rc.caches.Metadata(handrollcache.DeploymentsResource),
			ServiceMetadata:    rc.caches.Metadata(handrollcache.ServicesResource),
			ConfigMapMetadata:  rc.caches.Metadata(handrollcache.ConfigMapsResource),
			WebAppMetadata:     rc.caches.Metadata(handrollcache.WebAppsResource),
		}
		webApps := rc.caches.MetadataLister(handrollcache.WebAppsResource)
		rc.uidOf = func(ns, name string) (types.UID, bool) {
			m, err := webApps.Get(ns, name)
			if err != nil {
				return "", false
			}
			return m.GetUID(), true
		}
	default:
		if len(o.namespaces) > 0 {
			// Each range's own caches would watch every one of the
			// namespaces: ranges × namespaces watches, which starved the
			// Lease renewals of a replica with 12 ranges and 30 namespaces.
			klog.InfoS("With --namespaces the ranges share one cache of those namespaces, and each filters on the client")
		} else {
			klog.InfoS("The API server does not apply shardSelector (its ShardedListAndWatch feature gate is off): every replica caches every range, and filters on the client")
		}
		rc.caches = handrollcache.New(p.kube, p.informers, p.metadata, p.cacheOptions(scope{}))
		if rc.informers, err = webAppInformers(rc.caches); err != nil {
			return nil, fmt.Errorf("step 8, cache: %w", err)
		}
		rc.reconciler = rc.reconcilerOn(rc.caches, p)
		webApps := rc.caches.WebAppLister()
		rc.uidOf = func(ns, name string) (types.UID, bool) {
			w, err := webApps.WebApps(ns).Get(name)
			if err != nil {
				return "", false
			}
			return w.UID, true
		}
	}
	done := make(chan struct{})
	rc.stop = func() { close(done); rc.caches.Shutdown() }
	rc.caches.Start(done)
	return rc, nil
}

// sync is step 10 for the replica's caches: it waits, within
// --cache-sync-timeout, until they have synced. A stop while they fill is
// no error.
func (rc *replicaCaches) sync(ctx context.Context, o options) error {
	syncCtx, cancel := context.WithTimeout(ctx, o.cacheSyncTimeout)
	defer cancel()
	if err := rc.caches.WaitForSync(syncCtx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("step 10, caches not synced within --cache-sync-timeout=%s: %w", o.cacheSyncTimeout, err)
	}
	return nil
}

// rangeInformers are a range's own informers, from caches, with the
// replica's metadata informers.
func (rc *replicaCaches) rangeInformers(caches *handrollcache.Caches) (webapp.Informers, error) {
	webapps := caches.WebApps()
	for _, inf := range webapps {
		if err := webapp.AddIndexers(inf); err != nil {
			return webapp.Informers{}, err
		}
	}
	inf := rc.informers
	inf.WebApps, inf.Deployments, inf.Services, inf.ConfigMaps = webapps, caches.Deployments(), caches.Services(), caches.ConfigMaps()
	return inf, nil
}

// reconcilerOn is the WebApp reconciler of sharded replicas: it reads
// caches, and rc's metadata when caches has none, and labels every child
// with its owner's bucket.
func (rc *replicaCaches) reconcilerOn(caches *handrollcache.Caches, p *process) *webapp.Reconciler {
	r := newWebAppReconciler(caches, p.kube, p.handroll, p.recorder, p.o.firstStatusGrace)
	if caches != rc.caches {
		r.DeploymentMeta = rc.caches.MetadataLister(handrollcache.DeploymentsResource)
		r.ServiceMeta = rc.caches.MetadataLister(handrollcache.ServicesResource)
		r.ConfigMapMeta = rc.caches.MetadataLister(handrollcache.ConfigMapsResource)
	}
	r.ChildLabels = func(w *handrollv1.WebApp) map[string]string {
		return map[string]string{shard.BucketLabel: shard.Bucket(w.UID)}
	}
	return r
}

// directoryKeys says which directory entries (DirectoryKey:
// "namespace.name") are r's: those of its WebApps, and of the entries whose
// WebApp is gone, those whose key hashes into r, so that exactly one range
// removes each. Without --namespaces every key is some range's; with them,
// only their namespaces' keys.
func directoryKeys(r shard.Range, uidOf func(namespace, name string) (types.UID, bool), namespaces []string) func(key string) bool {
	watched := webapp.ManagedDirectoryKeys(namespaces)
	return func(key string) bool {
		ns, name, ok := strings.Cut(key, ".")
		if !ok || !watched(key) {
			return false
		}
		if uid, found := uidOf(ns, name); found {
			return r.Holds(uid)
		}
		return r.Contains(shard.Hash(key))
	}
}

// inRange passes the events of r's WebApps and of the objects they
// control; and of any other object (a referenced ConfigMap may be named by
// WebApps of every range), for Keep to decide on each WebApp it maps to.
func inRange(r shard.Range) controller.Predicate {
	in := func(obj metav1.Object) bool {
		if _, ok := obj.(*handrollv1.WebApp); ok {
			return r.Holds(obj.GetUID())
		}
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && ref.Kind == handrollv1.WebAppKind {
			return r.Holds(ref.UID)
		}
		return true
	}
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
