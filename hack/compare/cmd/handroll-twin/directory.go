package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
// cache, that keeps the directory ConfigMap equal to webapp.DesiredDirectory
// of the cached WebApps and Services.
type DirectoryReconciler struct {
	// Client reads from the cache and writes as field manager "handroll".
	client.Client
	// Namespace holds the directory ConfigMap.
	Namespace string
	// Namespaces are the watched namespaces (empty: all); other namespaces'
	// entries are left alone.
	Namespaces []string
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
		return o.GetNamespace() == r.Namespace && o.GetName() == webapp.DirectoryName
	})
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

// Reconcile writes the difference between the cached directory and the
// desired one, as one merge patch carrying the cached resourceVersion
// (MergeFromWithOptimisticLock): a stale cache gets a conflict, and the
// newer version's event (or the requeue) brings the directory back.
func (r *DirectoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var list handrollv1.WebAppList
	if err := r.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing WebApps: %w", err)
	}
	webapps := make([]*handrollv1.WebApp, len(list.Items))
	for i := range list.Items {
		webapps[i] = &list.Items[i]
	}
	desired := webapp.DesiredDirectory(webapps, func(ns, name string) *corev1.Service {
		var svc corev1.Service
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			return nil
		}
		return &svc
	})

	var cm corev1.ConfigMap
	err := r.Get(ctx, req.NamespacedName, &cm)
	if apierrors.IsNotFound(err) {
		if len(desired) == 0 {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.create(ctx, desired)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	changes := webapp.DirectoryChanges(cm.Data, desired, webapp.ManagedDirectoryKeys(r.Namespaces))
	labelled := cm.Labels[webapp.LabelManagedBy] == webapp.ManagedBy && cm.Labels[webapp.LabelName] == "webapp-directory"
	if len(changes) == 0 && labelled {
		return ctrl.Result{}, nil
	}
	base := cm.DeepCopy()
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
	maps.Copy(cm.Labels, directoryLabels())
	err = r.Patch(ctx, &cm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(2).Info("The cached directory is not the latest; waiting for the newer version")
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// create makes the directory; on AlreadyExists (a cache behind, or an
// unlabelled ConfigMap the filtered cache cannot see) it merges the desired
// entries and labels in without a precondition, which only adds.
func (r *DirectoryReconciler) create(ctx context.Context, desired map[string]string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryName, Namespace: r.Namespace, Labels: directoryLabels()},
		Data:       desired,
	}
	err := r.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": directoryLabels()}, "data": desired})
	if err != nil {
		return err
	}
	return r.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webapp.DirectoryName, Namespace: r.Namespace}},
		client.RawPatch(types.MergePatchType, patch))
}

func directoryLabels() map[string]string {
	return map[string]string{webapp.LabelManagedBy: webapp.ManagedBy, webapp.LabelName: "webapp-directory"}
}
