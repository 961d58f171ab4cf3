package webapp

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "webapp"

// IndexConfigMapRef indexes WebApps by "<namespace>/<spec.configMapRef.name>",
// so that a change to a user's ConfigMap finds the WebApps that mount it
// (mgr.GetFieldIndexer().IndexField in controller-runtime).
const IndexConfigMapRef = "spec.configMapRef.name"

// AddIndexers adds the WebApp indexes the controller needs; call it before
// the informer starts.
func AddIndexers(webapps cache.SharedIndexInformer) error {
	return webapps.AddIndexers(cache.Indexers{IndexConfigMapRef: func(obj any) ([]string, error) {
		w, ok := obj.(*handrollv1.WebApp)
		if !ok || w.Spec.ConfigMapRef == nil {
			return nil, nil
		}
		return []string{w.Namespace + "/" + w.Spec.ConfigMapRef.Name}, nil
	}})
}

// Informers are the caches the WebApp controller watches: one informer per
// cached namespace for each kind (one in all when every namespace is
// cached).
type Informers struct {
	WebApps     []cache.SharedIndexInformer // with AddIndexers applied
	Deployments []cache.SharedIndexInformer // these three: labelled as ours
	Services    []cache.SharedIndexInformer
	ConfigMaps  []cache.SharedIndexInformer

	// Metadata of every object of the kind that the three above do not
	// hold (nil: not cached). A spec.configMapRef is watched through
	// ConfigMapMetadata and ConfigMaps.
	DeploymentMetadata []cache.SharedIndexInformer
	ServiceMetadata    []cache.SharedIndexInformer
	ConfigMapMetadata  []cache.SharedIndexInformer

	// WebAppMetadata, with --shards, is the metadata of every WebApp,
	// which the directory controller watches for the entries of WebApps
	// gone from any range (nil: not cached).
	WebAppMetadata []cache.SharedIndexInformer
}

// NewController connects r to the informers — the builder.For(&WebApp{}).
// Owns(&Deployment{}).Owns(&Service{}).Owns(&ConfigMap{}).Watches(&ConfigMap{},
// mapFn) of a controller-runtime project, written out.
func NewController(r *Reconciler, inf Informers, opts controller.Options) (*controller.Controller, error) {
	if opts.Name == "" {
		opts.Name = ControllerName
	}
	c, err := controller.New(opts, r)
	if err != nil {
		return nil, err
	}
	webAppKind := handrollv1.Kind(handrollv1.WebAppKind)

	// For: the WebApp itself, when its spec changes. Status-only updates,
	// our own included, are dropped; so are other metadata changes, except
	// one that leaves the legacy finalizer on it.
	for _, webapps := range inf.WebApps {
		if err := c.Watch(webapps, controller.EnqueueObject(),
			controller.Or(controller.GenerationChanged(), hasLegacyFinalizer())); err != nil {
			return nil, err
		}
	}
	// What the reconciler remembers having written of a child, or of a
	// WebApp's status, holds until the object's next event in the cache it
	// reads (justWritten): not the metadata informers', which may run
	// ahead of it.
	for kind, informers := range map[string][]cache.SharedIndexInformer{
		"Deployment": inf.Deployments,
		"Service":    inf.Services,
		"ConfigMap":  inf.ConfigMaps,
	} {
		for _, informer := range informers {
			if err := r.recent.observe(informer, kind); err != nil {
				return nil, err
			}
		}
	}
	for _, informer := range inf.WebApps {
		if err := r.recent.observeStatus(informer); err != nil {
			return nil, err
		}
	}
	// Owns: any change to a child (status included) reconciles its owner,
	// but the watch event of the reconciler's own write of it. A
	// Deployment's rollout reporting progress goes before new WebApps: the
	// owner's status is what its user waits for.
	owner := controller.EnqueueOwner(webAppKind, true)
	for kind, watch := range map[string]struct {
		informers []cache.SharedIndexInformer
		handler   controller.Handler
	}{
		"Deployment": {inf.Deployments, controller.WithProgressPriority(owner, rolloutProgress)},
		"Service":    {inf.Services, owner},
		"ConfigMap":  {inf.ConfigMaps, owner},
	} {
		for _, informer := range watch.informers {
			if err := c.Watch(informer, watch.handler, r.recent.notEcho(kind)); err != nil {
				return nil, err
			}
		}
	}
	// Watches: a user's ConfigMap named by spec.configMapRef, through the index.
	byRef := func(_ context.Context, obj metav1.Object) []controller.Request {
		var reqs []controller.Request
		for _, webapps := range inf.WebApps {
			objs, err := webapps.GetIndexer().ByIndex(IndexConfigMapRef, obj.GetNamespace()+"/"+obj.GetName())
			if err != nil {
				continue
			}
			for _, o := range objs {
				w := o.(*handrollv1.WebApp)
				reqs = append(reqs, controller.Request{Namespace: w.Namespace, Name: w.Name})
			}
		}
		return reqs
	}
	if r.RefConfigMaps != nil {
		if err := r.RefConfigMaps.WatchReferences(inf.WebApps); err != nil {
			return nil, err
		}
	}
	// The metadata caches hold what the ConfigMaps cache does not (a
	// ConfigMap labelled as ours, another WebApp's config, may be named
	// too): a reference is watched through both.
	for _, configMaps := range slices.Concat(inf.ConfigMapMetadata, inf.ConfigMaps) {
		if err := c.Watch(configMaps, controller.EnqueueMapped(byRef), controller.ResourceVersionChanged()); err != nil {
			return nil, fmt.Errorf("watching referenced ConfigMaps: %w", err)
		}
	}
	return c, nil
}

// hasLegacyFinalizer passes the updates of a WebApp that carries
// LegacyFinalizerDirectory, so that the reconciler strips it.
func hasLegacyFinalizer() controller.Predicate {
	return controller.PredicateFuncs{UpdateFunc: func(_, newObj metav1.Object) bool {
		return slices.Contains(newObj.GetFinalizers(), LegacyFinalizerDirectory)
	}}
}

// rolloutProgress: a Deployment changed without a new spec (its generation
// did not move), so its rollout, or its pods' readiness, moved.
func rolloutProgress(oldObj, newObj metav1.Object) bool {
	return newObj.GetGeneration() != 0 && newObj.GetGeneration() == oldObj.GetGeneration()
}
