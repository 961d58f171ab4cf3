package main

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/shard"
)

// A scope is the WebApps that one Lease fences, and what reconciles them:
// every WebApp (or those of --namespaces) for the single leader, under
// --leader-elect-resource-name; or, with --shards, the WebApps whose uid
// falls in one range, under that range's Lease. Both build their caches'
// options and their two controllers here, so that the single leader is
// one scope of the sharded design, and sharded.go holds only what
// sharding adds: membership, assignment and which caches a range reads.
type scope struct {
	// rng is the range; nil: every WebApp.
	rng *shard.Range
	// uidOf tells, for a range, the uid of a directory entry's WebApp.
	uidOf func(namespace, name string) (types.UID, bool)
}

// cacheOptions are the options of s's own caches: every WebApp, or a
// range's by the API server's shardSelector on their uid, and the
// children by label. Of the objects the child selector leaves out, the
// single leader caches the metadata; a range reads the replica's.
func (p *process) cacheOptions(s scope) handrollcache.Options {
	opts := handrollcache.Options{
		Namespaces:        p.o.namespaces,
		ChildSelector:     webapp.ChildSelector,
		SyncPeriod:        p.o.syncPeriod,
		OperatorNamespace: p.o.operatorNamespace,
	}
	if s.rng == nil {
		opts.MetadataSelector = webapp.ForeignSelector
		return opts
	}
	opts.ChildSelector += "," + s.rng.ChildSelector()
	opts.ShardSelector = s.rng.Selector()
	opts.OperatorSelector = webapp.ChildSelector
	return opts
}

// scopeControllers are a scope's two controllers, on its caches: the
// WebApps', and the directory's for the scope's entries.
type scopeControllers struct {
	caches    *handrollcache.Caches
	webapp    *controller.Controller
	directory *controller.Controller
}

// controllers builds s's controllers on caches (whose informers are inf),
// the WebApps' with rec. A range's are named after it in their metrics,
// logs and journal lines, keep to its WebApps whatever the caches hold,
// and write only its directory entries.
//
// They drain their in-flight reconciles within the shutdown timeout less
// a margin (drainTimeout), so that the Lease is released (step 12) even
// when a reconcile hangs: a standby then takes over within a retry period
// rather than a lease duration.
func (p *process) controllers(s scope, caches *handrollcache.Caches, inf webapp.Informers, rec *webapp.Reconciler, journal controller.Journal) (*scopeControllers, error) {
	common := controller.Options{Registerer: p.registry, ShutdownTimeout: drainTimeout(p.o.shutdownTimeout), Journal: journal}
	webOpts, dirOpts := common, common
	webOpts.MaxConcurrentReconciles = p.o.maxConcurrentReconciles
	directory := &webapp.DirectoryReconciler{
		WebApps:       caches.WebAppLister(),
		Services:      caches.ServiceMeta(),
		ConfigMaps:    caches.ConfigMapLister(),
		Kube:          p.kube,
		Namespace:     p.o.operatorNamespace,
		Namespaces:    p.o.namespaces,
		WriteInterval: webapp.DefaultDirectoryWriteInterval,
	}
	if r := s.rng; r != nil {
		webOpts.Name = fmt.Sprintf("%s-%d-of-%d", webapp.ControllerName, r.Index, r.Count)
		dirOpts.Name = fmt.Sprintf("%s-%d-of-%d", webapp.DirectoryControllerName, r.Index, r.Count)
		// Whatever the caches hold: the API server that applied the
		// range's shardSelector at the start may not at the next list or
		// watch (one restarted without the gate), and then every range's
		// cache holds every WebApp.
		webOpts.Predicates = []controller.Predicate{inRange(*r)}
		webApps := caches.WebAppLister()
		webOpts.Keep = func(req controller.Request) bool {
			w, err := webApps.WebApps(req.Namespace).Get(req.Name)
			return err != nil || r.Holds(w.UID) // a WebApp gone: its memory is forgotten
		}
		// The range's entries, among the other ranges' writers: each write
		// carries the part's resourceVersion, and touches only the entries
		// Manages says are the range's.
		directory.Manages = directoryKeys(*r, s.uidOf, p.o.namespaces)
	}
	wc, err := webapp.NewController(rec, inf, webOpts)
	if err != nil {
		return nil, err
	}
	// One worker, as it has one key.
	dc, err := webapp.NewDirectoryController(directory, inf, dirOpts)
	if err != nil {
		return nil, err
	}
	return &scopeControllers{caches: caches, webapp: wc, directory: dc}, nil
}

// run runs both controllers, on caches that have synced, until ctx ends
// and their reconciles have drained (runControllers).
func (sc *scopeControllers) run(ctx context.Context) error {
	return runControllers(ctx,
		func(ctx context.Context) error { return sc.webapp.Start(ctx, sc.caches.HasSynced) },
		func(ctx context.Context) error { return sc.directory.Start(ctx, sc.caches.HasSynced) },
	)
}

// openJournal opens --reconcile-journal, when set, with the replica's
// identity (a new one when leader election is off), for every scope's
// controllers; closeJournal closes it.
func openJournal(o options, identity string) (j controller.Journal, closeJournal func(), err error) {
	if o.reconcileJournal == "" {
		return nil, func() {}, nil
	}
	if identity == "" {
		if identity, err = leader.NewIdentity(); err != nil {
			return nil, nil, err
		}
	}
	fj, err := controller.OpenJournal(o.reconcileJournal, identity, o.reconcileJournalMaxMiB<<20)
	if err != nil {
		return nil, nil, err
	}
	return fj, func() { _ = fj.Close() }, nil
}
