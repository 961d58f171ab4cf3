package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
)

// WebAppReconciler is pkg/controller/webapp.Reconciler on controller-runtime:
// the same desired children, status and no-write check, read through the
// manager's cache and written with server-side apply.
type WebAppReconciler struct {
	// Client reads from the cache and writes as field manager "handroll".
	client.Client
	// APIReader reads the API server directly: a child missing from the
	// label-filtered cache may still exist, unlabelled and not ours.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// RefMetadata, with --tuned, holds the spec.configMapRef ConfigMaps as
	// metadata only; nil: they are read from the manager's cache, whole.
	RefMetadata cache.Cache
	// ConfigMapsFiltered says the typed ConfigMap cache holds only those
	// labelled as ours (--tuned), like the Deployment and Service caches.
	ConfigMapsFiltered bool
	// Progress paces the status writes that only report a rollout's
	// progress, as handroll's Reconciler.Progress does (nil: none held).
	Progress *webapp.ProgressWrites

	// refData is, per WebApp, its referenced ConfigMap's data at the
	// resourceVersion last read live (RefMetadata only).
	refMu   sync.Mutex
	refData map[types.NamespacedName]*corev1.ConfigMap
}

// SetupWithManager indexes WebApps by the ConfigMap they reference and
// registers the controller.
func (r *WebAppReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &handrollv1.WebApp{}, webapp.IndexConfigMapRef, func(o client.Object) []string {
		if ref := o.(*handrollv1.WebApp).Spec.ConfigMapRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// Status-only updates, our own included, are dropped; other
		// metadata changes too, except while the legacy finalizer is there.
		For(&handrollv1.WebApp{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{},
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return slices.Contains(o.GetFinalizers(), webapp.LegacyFinalizerDirectory)
			})))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{})
	referencing := handler.EnqueueRequestsFromMapFunc(r.webAppsReferencing)
	changed := predicate.ResourceVersionChangedPredicate{}
	if r.RefMetadata != nil {
		// builder.WatchesMetadata, on a cache of its own (see main.go).
		b = b.WatchesRawSource(source.Kind(r.RefMetadata, configMapMetadata(), referencing, changed))
	} else {
		b = b.Watches(&corev1.ConfigMap{}, referencing, builder.WithPredicates(changed))
	}
	return b.Named(webapp.ControllerName).Complete(r)
}

// configMapMetadata is the object a metadata-only ConfigMap informer holds.
func configMapMetadata() client.Object {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

// webAppsReferencing maps a ConfigMap to the WebApps whose
// spec.configMapRef names it.
func (r *WebAppReconciler) webAppsReferencing(ctx context.Context, cm client.Object) []ctrl.Request {
	var list handrollv1.WebAppList
	// An error means a namespace the WebApp cache does not hold (the
	// operator's own): no WebApp there to enqueue.
	if err := r.List(ctx, &list, client.InNamespace(cm.GetNamespace()),
		client.MatchingFields{webapp.IndexConfigMapRef: cm.GetName()}); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile brings one WebApp's world in line with its spec.
func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var w handrollv1.WebApp
	if err := r.Get(ctx, req.NamespacedName, &w); err != nil {
		// Gone: the garbage collector removes the children, and the
		// directory controller its entry.
		if apierrors.IsNotFound(err) {
			r.rememberRef(req.NamespacedName, nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The first version's finalizer, with a JSON patch that tests the entry:
	// server-side apply cannot remove one another field manager co-owns.
	if patch := webapp.LegacyFinalizerPatch(&w); patch != nil {
		if err := r.Patch(ctx, w.DeepCopy(), client.RawPatch(types.JSONPatchType, patch)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("removing the legacy finalizer %s: %w", webapp.LegacyFinalizerDirectory, err)
		}
	}
	if !w.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	handrollv1.SetObjectDefaults_WebApp(&w)

	obs, err := r.reconcileChildren(ctx, &w)
	if err != nil {
		return ctrl.Result{}, err
	}
	held, err := r.updateStatus(ctx, &w, obs)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}
	if obs.ApplyFailed != "" {
		return ctrl.Result{}, errors.New(obs.ApplyFailed)
	}
	if obs.Conflict != "" {
		// Retried with backoff, so the WebApp heals once the foreign object
		// goes away; never overwritten.
		return ctrl.Result{}, fmt.Errorf("%s exists and is not controlled by WebApp %s", obs.Conflict, req)
	}
	return ctrl.Result{RequeueAfter: held}, nil
}

// child is one object a WebApp owns.
type child struct {
	kind, name string
	empty      client.Object // of the child's type, never filled
	desired    runtime.ApplyConfiguration
	filtered   bool // its cache holds only objects labelled as ours
}

var errNotControlled = errors.New("not controlled by this WebApp")

func (r *WebAppReconciler) reconcileChildren(ctx context.Context, w *handrollv1.WebApp) (webapp.Observed, error) {
	var obs webapp.Observed
	refCM, err := r.referencedConfigMap(ctx, w)
	if err != nil {
		return obs, err
	}

	var children []child
	if cm := webapp.DesiredConfigMap(w); cm != nil {
		children = append(children, child{"ConfigMap", *cm.Name, &corev1.ConfigMap{}, cm, r.ConfigMapsFiltered})
	}
	children = append(children,
		child{"Service", w.Name, &corev1.Service{}, webapp.DesiredService(w), true},
		child{"Deployment", w.Name, &appsv1.Deployment{}, webapp.DesiredDeployment(w, refCM), true})

	for _, c := range children {
		current, err := r.ensure(ctx, w, c)
		switch {
		case errors.Is(err, errNotControlled):
			obs.Conflict = fmt.Sprintf("%s %s/%s", c.kind, w.Namespace, c.name)
			r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, webapp.EventResourceConflict, "Reconcile",
				"%s exists and is not controlled by this WebApp; it is left untouched", obs.Conflict)
			continue
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
			// The API server will refuse this until something changes: say
			// so in the status and an event rather than only in our log.
			obs.ApplyFailed = fmt.Sprintf("%s %s/%s: %v", c.kind, w.Namespace, c.name, err)
			r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, webapp.ReasonApplyFailed, "Apply", "%s", obs.ApplyFailed)
			if _, ok := current.(*corev1.Service); ok {
				obs.ServiceExists = true // ours, unchanged: still advertised
			}
			continue
		case err != nil:
			return obs, fmt.Errorf("%s %s/%s: %w", c.kind, w.Namespace, c.name, err)
		}
		switch o := current.(type) {
		case *appsv1.Deployment:
			obs.Deployment = o
		case *corev1.Service:
			obs.ServiceExists = true
		}
	}

	if len(w.Spec.Config) == 0 {
		return obs, r.deleteOwnedConfigMap(ctx, w)
	}
	return obs, nil
}

// referencedConfigMap returns the spec.configMapRef ConfigMap, nil when
// there is none or it does not exist. With RefMetadata its cache holds the
// metadata only: the data, which only the config hash needs, is read live
// and kept for the WebApp until the resourceVersion changes, so that it is
// read once per change rather than once per reconcile.
func (r *WebAppReconciler) referencedConfigMap(ctx context.Context, w *handrollv1.WebApp) (*corev1.ConfigMap, error) {
	ref := w.Spec.ConfigMapRef
	webAppKey := client.ObjectKeyFromObject(w)
	if ref == nil {
		r.rememberRef(webAppKey, nil)
		return nil, nil
	}
	key := client.ObjectKey{Namespace: w.Namespace, Name: ref.Name}
	if r.RefMetadata == nil {
		var cm corev1.ConfigMap
		if err := r.Get(ctx, key, &cm); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return &cm, nil
	}

	m := configMapMetadata()
	if err := r.RefMetadata.Get(ctx, key, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.rememberRef(webAppKey, nil)
			return nil, nil
		}
		return nil, err
	}
	r.refMu.Lock()
	kept := r.refData[webAppKey]
	r.refMu.Unlock()
	if kept != nil && kept.Name == ref.Name && kept.ResourceVersion == m.GetResourceVersion() {
		return kept, nil
	}
	var cm corev1.ConfigMap
	if err := r.APIReader.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted since the cache saw it: its delete event follows.
			r.rememberRef(webAppKey, nil)
			return nil, nil
		}
		return nil, err
	}
	kept = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cm.Name, ResourceVersion: cm.ResourceVersion},
		Data:       cm.Data,
		BinaryData: cm.BinaryData,
	}
	r.rememberRef(webAppKey, kept)
	return kept, nil
}

// rememberRef keeps cm as the WebApp's referenced data; nil forgets it.
func (r *WebAppReconciler) rememberRef(webApp types.NamespacedName, cm *corev1.ConfigMap) {
	if r.RefMetadata == nil {
		return
	}
	r.refMu.Lock()
	defer r.refMu.Unlock()
	if cm == nil {
		delete(r.refData, webApp)
		return
	}
	if r.refData == nil {
		r.refData = map[types.NamespacedName]*corev1.ConfigMap{}
	}
	r.refData[webApp] = cm
}

// ensure applies c unless the live object already holds its configuration,
// and refuses to touch an object of that name that the WebApp does not
// control. It returns the object as it now is.
func (r *WebAppReconciler) ensure(ctx context.Context, w *handrollv1.WebApp, c child) (client.Object, error) {
	key := client.ObjectKey{Namespace: w.Namespace, Name: c.name}
	current := c.empty.DeepCopyObject().(client.Object)
	err := r.Get(ctx, key, current)
	if apierrors.IsNotFound(err) && c.filtered {
		err = r.APIReader.Get(ctx, key, current)
	}
	exists := err == nil
	if client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	if exists {
		if !metav1.IsControlledBy(current, w) {
			return nil, errNotControlled
		}
		diff, err := webapp.FirstDifference(c.desired, current)
		if err != nil {
			return nil, err
		}
		if diff == "" {
			return current, nil
		}
		log.FromContext(ctx).V(3).Info("Child differs from the desired state; applying", "kind", c.kind, "name", c.name, "field", diff)
	}

	if err := r.Apply(ctx, c.desired, client.ForceOwnership); err != nil {
		if exists {
			// The object we control is still there as it was.
			return current, err
		}
		return nil, err
	}
	// Apply decoded the API server's answer into the apply configuration;
	// the status and the event want it as the typed object.
	applied := c.empty.DeepCopyObject().(client.Object)
	if err := convert(c.desired, applied); err != nil {
		return nil, err
	}
	reason, verb := webapp.EventCreated, "Created"
	if exists {
		reason, verb = webapp.EventUpdated, "Updated"
	}
	r.Recorder.Eventf(w, applied, corev1.EventTypeNormal, reason, "Apply", "%s %s %s", verb, c.kind, c.name)
	return applied, nil
}

// deleteOwnedConfigMap removes the ConfigMap rendered from spec.config once
// spec.config is emptied; one we do not control is left alone.
func (r *WebAppReconciler) deleteOwnedConfigMap(ctx context.Context, w *handrollv1.WebApp) error {
	var cm corev1.ConfigMap
	err := r.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: handrollv1.OwnedConfigMapName(w.Name)}, &cm)
	if err != nil || !metav1.IsControlledBy(&cm, w) {
		return client.IgnoreNotFound(err)
	}
	if err := r.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID}); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, webapp.EventDeleted, "Delete", "Deleted ConfigMap %s: spec.config is empty", cm.Name)
	return nil
}

// updateStatus computes the status and applies it to the status
// subresource, only when it differs from what the WebApp already shows. A
// write that only reports progress may be held, as handroll's is: it
// returns how long.
func (r *WebAppReconciler) updateStatus(ctx context.Context, w *handrollv1.WebApp, obs webapp.Observed) (time.Duration, error) {
	status := webapp.ComputeStatus(w, obs, metav1.Now())
	if equality.Semantic.DeepEqual(status, w.Status) {
		return 0, nil
	}
	owner := client.ObjectKeyFromObject(w)
	if held := max(r.Progress.HoldFirst(w.CreationTimestamp.Time, w.Status, status, time.Now()), r.Progress.Hold(owner, w.Status, status, time.Now())); held > 0 {
		return held, nil
	}
	var ac handrollac.WebAppStatusApplyConfiguration
	if err := convert(status, &ac); err != nil {
		return 0, err
	}
	if err := r.Status().Apply(ctx, handrollac.WebApp(w.Name, w.Namespace).WithStatus(&ac), client.ForceOwnership); err != nil {
		return 0, err
	}
	r.Progress.Wrote(owner, time.Now())

	// The same events as handroll's, decided by the same function.
	if typ, reason, note, ok := webapp.ReadinessEvent(w.Status.Conditions, status.Conditions); ok {
		r.Recorder.Eventf(w, nil, typ, reason, "Reconcile", "%s", note)
	}
	return 0, nil
}

// convert copies from into to through JSON, which apply configurations
// share field for field with their types.
func convert(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}
