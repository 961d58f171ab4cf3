package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
)

// DirectoryReconciler is pkg/controller/webapp.DirectoryReconciler on
// controller-runtime: a second controller of the same manager, on the same
// cache, that keeps the directory's ConfigMaps equal to
// webapp.DesiredDirectory of the cached WebApps and Services, in the parts
// that webapp.PlanDirectory lays out.
type DirectoryReconciler struct {
	// Client reads from the cache and writes as field manager "handroll".
	client.Client
	// Namespace holds the directory ConfigMap.
	Namespace string
	// Namespaces are the watched namespaces (empty: all); other namespaces'
	// entries are left alone.
	Namespaces []string
	// WriteInterval is the least time between two writes of the directory;
	// zero: webapp.DefaultDirectoryWriteInterval, as cmd/handroll runs it;
	// negative: no wait.
	WriteInterval time.Duration

	mu        sync.Mutex
	lastWrite time.Time
}

// SetupWithManager registers the controller: every event that can change
// the directory maps to its one Request, so a burst is one reconcile.
func (r *DirectoryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	directory := []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: webapp.DirectoryName}}}
	toDirectory := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request { return directory })
	deletionStarted := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
		},
	}
	controllerUID := func(o client.Object) types.UID {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return ref.UID
		}
		return ""
	}
	controllerChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return controllerUID(e.ObjectOld) != controllerUID(e.ObjectNew)
	}}
	isDirectory := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, part := webapp.DirectoryPartIndex(o.GetName())
		return part && o.GetNamespace() == r.Namespace
	})
	if r.WriteInterval == 0 {
		r.WriteInterval = webapp.DefaultDirectoryWriteInterval
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(webapp.DirectoryControllerName).
		Watches(&handrollv1.WebApp{}, toDirectory,
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionStarted))).
		Watches(&corev1.Service{}, toDirectory, builder.WithPredicates(controllerChanged)).
		Watches(&corev1.ConfigMap{}, toDirectory, builder.WithPredicates(isDirectory)).
		// One key: one worker is enough.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// Reconcile writes a step of webapp.PlanDirectory from the cached
// directory, part by part, each as a merge patch carrying its cached
// resourceVersion (MergeFromWithOptimisticLock): a stale cache gets a
// conflict, and the newer version's event (or the requeue) brings the
// directory back. Part 0 goes last, and when it is to say a new number of
// parts only once the other parts' writes have gone through. Within
// WriteInterval of a write it only requeues itself, before any listing.
func (r *DirectoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if wait := r.untilNextWrite(); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	var list handrollv1.WebAppList
	if err := r.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing WebApps: %w", err)
	}
	webapps := make([]*handrollv1.WebApp, len(list.Items))
	for i := range list.Items {
		webapps[i] = &list.Items[i]
	}
	desired := webapp.DesiredDirectory(webapps, func(ns, name string) metav1.Object {
		var svc corev1.Service
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			return nil
		}
		return &svc
	})

	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.InNamespace(r.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the directory's parts: %w", err)
	}
	cached := map[int]*corev1.ConfigMap{}
	current := map[int]map[string]string{}
	for i := range cms.Items {
		if part, ok := webapp.DirectoryPartIndex(cms.Items[i].Name); ok {
			cached[part], current[part] = &cms.Items[i], cms.Items[i].Data
		}
	}
	parts := 0
	if part0 := cached[0]; part0 != nil {
		var err error
		if parts, err = webapp.DirectoryParts(part0.Annotations); err != nil {
			log.FromContext(ctx).Info("Warning: the directory's number of parts is unreadable; taking it as 1", "err", err)
			parts = 1
		}
	}
	plan := webapp.PlanDirectory(parts, current, desired, webapp.ManagedDirectoryKeys(r.Namespaces))

	wrote, conflict := false, false
	var errs []error
	write := func(i int) {
		sent, err := r.writePart(ctx, i, cached[i], plan.Changes[i], plan.Parts)
		wrote = wrote || sent
		if apierrors.IsConflict(err) {
			conflict = true
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	for i := 1; i < len(plan.Changes); i++ {
		write(i)
	}
	if plan.Parts == parts || (!conflict && len(errs) == 0) {
		write(0)
	}
	if wrote {
		r.mu.Lock()
		r.lastWrite = time.Now()
		r.mu.Unlock()
	}
	if len(errs) > 0 {
		return ctrl.Result{}, errors.Join(errs...)
	}
	if conflict {
		log.FromContext(ctx).V(2).Info("The cached directory is not the latest; waiting for the newer version")
		return ctrl.Result{RequeueAfter: max(time.Second, r.WriteInterval)}, nil
	}
	return ctrl.Result{}, nil
}

func (r *DirectoryReconciler) untilNextWrite() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.WriteInterval <= 0 || r.lastWrite.IsZero() {
		return 0
	}
	return r.WriteInterval - time.Since(r.lastWrite)
}

// writePart brings part i (cm: its cached copy, nil when there is none) to
// changes and our labels, and part 0 to the annotation saying parts; it
// tells whether it sent a request.
func (r *DirectoryReconciler) writePart(ctx context.Context, i int, cm *corev1.ConfigMap, changes map[string]*string, parts int) (bool, error) {
	if cm == nil {
		data := map[string]string{}
		for k, v := range changes {
			if v != nil {
				data[k] = *v
			}
		}
		var annotations map[string]string
		if i == 0 && parts > 1 {
			annotations = map[string]string{webapp.DirectoryPartsAnnotation: strconv.Itoa(parts)}
		}
		if len(data) == 0 && annotations == nil {
			return false, nil
		}
		return true, r.create(ctx, i, data, annotations)
	}
	base := cm.DeepCopy()
	changed := len(changes) > 0
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range changes {
		if v == nil {
			delete(cm.Data, k)
		} else {
			cm.Data[k] = *v
		}
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, v := range directoryLabels() {
		changed = changed || cm.Labels[k] != v
		cm.Labels[k] = v
	}
	if i == 0 {
		if v, change := webapp.DirectoryPartsAnnotationFor(cm.Annotations, parts); change {
			changed = true
			if v == nil {
				delete(cm.Annotations, webapp.DirectoryPartsAnnotation)
			} else {
				if cm.Annotations == nil {
					cm.Annotations = map[string]string{}
				}
				cm.Annotations[webapp.DirectoryPartsAnnotation] = *v
			}
		}
	}
	if !changed {
		return false, nil
	}
	return true, r.Patch(ctx, cm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// create makes part i; on AlreadyExists (a cache behind, or an unlabelled
// ConfigMap the filtered cache cannot see) it merges data and our labels in
// without a precondition, which only adds, and leaves part 0's number of
// parts alone.
func (r *DirectoryReconciler) create(ctx context.Context, i int, data, annotations map[string]string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryPartName(i), Namespace: r.Namespace, Labels: directoryLabels(), Annotations: annotations},
		Data:       data,
	}
	err := r.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": directoryLabels()}, "data": data})
	if err != nil {
		return err
	}
	return r.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryPartName(i), Namespace: r.Namespace}},
		client.RawPatch(types.MergePatchType, patch))
}

func directoryLabels() map[string]string {
	return map[string]string{webapp.LabelManagedBy: webapp.ManagedBy, webapp.LabelName: "webapp-directory"}
}
