package webapp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/controller"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// DirectoryControllerName names the directory controller in logs and
// metrics.
const DirectoryControllerName = "directory"

// DirectoryReconciler keeps the directory ConfigMap equal to
// DesiredDirectory of the cache, the way the endpoints controller keeps
// Endpoints equal to the ready pods: level triggered, so a missed or
// reordered event cannot leak an entry, and no finalizer holds WebApps back.
// Every event maps to the one Request of the directory, so a burst of
// changes is one reconcile and one write.
type DirectoryReconciler struct {
	WebApps    handrolllisters.WebAppLister
	Services   corelisters.ServiceLister
	ConfigMaps corelisters.ConfigMapLister
	Kube       kubernetes.Interface

	// Namespace holds the directory ConfigMap (the operator's namespace).
	Namespace string
	// Namespaces are the namespaces this process watches (empty: all); the
	// entries of any other namespace are left to whoever watches it.
	Namespaces []string
}

// conflictRequeue is when a write refused for a stale resourceVersion is
// tried again, should the event of the newer version not come first.
const conflictRequeue = time.Second

// Reconcile writes the difference between the directory in the cache and
// the desired one. The write carries the cached resourceVersion, so a cache
// that has not yet seen the latest write (ours or anyone's) is never acted
// on blindly: the API server refuses with a conflict, and the newer version's
// event, or the requeue, brings the directory back here.
func (r *DirectoryReconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	webapps, err := r.WebApps.List(labels.Everything())
	if err != nil {
		return controller.Result{}, fmt.Errorf("listing WebApps: %w", err)
	}
	desired := DesiredDirectory(webapps, func(ns, name string) *corev1.Service {
		svc, err := r.Services.Services(ns).Get(name)
		if err != nil {
			return nil // not found: the cache holds only our labelled Services
		}
		return svc
	})

	cm, err := r.ConfigMaps.ConfigMaps(r.Namespace).Get(DirectoryName)
	if apierrors.IsNotFound(err) {
		if len(desired) == 0 {
			return controller.Result{}, nil
		}
		return r.create(ctx, desired)
	}
	if err != nil {
		return controller.Result{}, err
	}
	err = r.patch(ctx, cm, desired)
	if apierrors.IsConflict(err) {
		logger.V(2).Info("The cached directory is not the latest; waiting for the newer version", "resourceVersion", cm.ResourceVersion)
		return controller.Result{RequeueAfter: conflictRequeue}, nil
	}
	return controller.Result{}, err
}

// patch writes, with one JSON merge patch that names cm's resourceVersion,
// the entries that differ from desired and our labels if they are missing.
// Nothing is sent when nothing differs.
func (r *DirectoryReconciler) patch(ctx context.Context, cm *corev1.ConfigMap, desired map[string]string) error {
	changes := DirectoryChanges(cm.Data, desired, ManagedDirectoryKeys(r.Namespaces))
	meta := map[string]any{"resourceVersion": cm.ResourceVersion}
	missing := false
	for k, v := range directoryLabels() {
		missing = missing || cm.Labels[k] != v
	}
	if missing {
		meta["labels"] = directoryLabels()
	}
	if len(changes) == 0 && !missing {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta, "data": changes})
	if err != nil {
		return err
	}
	_, err = r.Kube.CoreV1().ConfigMaps(r.Namespace).Patch(ctx, DirectoryName, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("patching the directory: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote the directory", "changed", len(changes), "entries", len(desired))
	return nil
}

// create makes the directory. AlreadyExists means the cache is behind, or
// that the ConfigMap is not in it at all: without our labels it escapes the
// operator namespace's filtered cache. Then the desired entries and our
// labels are merged in without a precondition, which is safe because it
// only adds: nothing is removed on the word of a cache that has not seen
// the object. Once the labelled object reaches the cache, its event brings
// the directory back here for an exact, preconditioned write.
func (r *DirectoryReconciler) create(ctx context.Context, desired map[string]string) (controller.Result, error) {
	configMaps := r.Kube.CoreV1().ConfigMaps(r.Namespace)
	_, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: DirectoryName, Namespace: r.Namespace, Labels: directoryLabels()},
		Data:       maps.Clone(desired),
	}, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created the directory", "entries", len(desired))
		return controller.Result{}, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return controller.Result{}, fmt.Errorf("creating the directory: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": directoryLabels()}, "data": desired})
	if err != nil {
		return controller.Result{}, err
	}
	if _, err := configMaps.Patch(ctx, DirectoryName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return controller.Result{}, fmt.Errorf("patching the directory the cache does not hold: %w", err)
	}
	return controller.Result{}, nil
}

func directoryLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelName: "webapp-directory"}
}

// NewDirectoryController connects r to the same informers as the WebApp
// controller, as two controllers of one Manager share its cache. Every event
// that can change the directory enqueues its one Request:
//
//   - a WebApp created or deleted, its spec changed (the port is in the URL)
//     or its deletion started;
//   - a Service created or deleted, or its controller changed;
//   - the directory ConfigMap itself, whatever changed: a write the cache had
//     not seen when the directory was last computed is corrected when it
//     arrives, and so is a hand edit.
func NewDirectoryController(r *DirectoryReconciler, inf Informers, opts controller.Options) (*controller.Controller, error) {
	if opts.Name == "" {
		opts.Name = DirectoryControllerName
	}
	c, err := controller.New(opts, r)
	if err != nil {
		return nil, err
	}
	directory := []controller.Request{{Namespace: r.Namespace, Name: DirectoryName}}
	toDirectory := controller.EnqueueMapped(func(context.Context, metav1.Object) []controller.Request { return directory })

	add := func(informers []cache.SharedIndexInformer, preds ...controller.Predicate) error {
		for _, informer := range informers {
			if err := c.Watch(informer, toDirectory, preds...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(inf.WebApps, controller.Or(controller.GenerationChanged(), deletionStarted())); err != nil {
		return nil, err
	}
	if err := add(inf.Services, controllerChanged()); err != nil {
		return nil, err
	}
	isDirectory := func(o metav1.Object) bool { return o.GetNamespace() == r.Namespace && o.GetName() == DirectoryName }
	// Resyncs pass too: each is a full recompute of the directory.
	if err := add(inf.ConfigMaps, controller.PredicateFuncs{
		CreateFunc: isDirectory,
		UpdateFunc: func(_, newObj metav1.Object) bool { return isDirectory(newObj) },
		DeleteFunc: isDirectory,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// deletionStarted passes the update that sets metadata.deletionTimestamp: a
// WebApp that other finalizers hold leaves the directory as its deletion
// starts.
func deletionStarted() controller.Predicate {
	return controller.PredicateFuncs{
		CreateFunc: func(metav1.Object) bool { return false },
		DeleteFunc: func(metav1.Object) bool { return false },
		UpdateFunc: func(oldObj, newObj metav1.Object) bool {
			return oldObj.GetDeletionTimestamp() == nil && newObj.GetDeletionTimestamp() != nil
		},
	}
}

// controllerChanged passes creates, deletes and the updates that change an
// object's controller reference: all of a Service that the directory reads.
func controllerChanged() controller.Predicate {
	uid := func(o metav1.Object) types.UID {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return ref.UID
		}
		return ""
	}
	return controller.PredicateFuncs{UpdateFunc: func(oldObj, newObj metav1.Object) bool {
		return uid(oldObj) != uid(newObj)
	}}
}
