package webapp

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/controller"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// ObjectMetaGetter reads an object's metadata from a cache, decoding
// nothing else (pkg/cache.ObjectMetaGetter).
type ObjectMetaGetter interface {
	Get(namespace, name string) (metav1.Object, error)
}

// DirectoryControllerName names the directory controller in logs and
// metrics.
const DirectoryControllerName = "directory"

// DirectoryReconciler keeps the directory's ConfigMaps (see DirectoryName)
// equal to DesiredDirectory of the cache, the way the endpoints controller
// keeps Endpoints equal to the ready pods: level triggered, so a missed or
// reordered event cannot leak an entry, and no finalizer holds WebApps back.
// Every event maps to the one Request of the directory, and writes are at
// least WriteInterval apart, so a burst of changes is one write per interval.
type DirectoryReconciler struct {
	WebApps handrolllisters.WebAppLister
	// Services reads the metadata of the children's Services: whether a
	// WebApp controls its Service is all the directory asks of them, and a
	// rebuild asks it of every WebApp (pkg/cache.Caches.ServiceMeta).
	Services   ObjectMetaGetter
	ConfigMaps corelisters.ConfigMapLister
	Kube       kubernetes.Interface

	// Namespace holds the directory ConfigMap (the operator's namespace).
	Namespace string
	// Namespaces are the namespaces this process watches (empty: all); the
	// entries of any other namespace are left to whoever watches it.
	Namespaces []string
	// Manages, when set, replaces Namespaces in saying which entries are
	// this reconciler's: with --shards, those of its range's namespaces.
	Manages func(key string) bool
	// WriteInterval is the least time from one write of the directory to
	// the next: a reconcile sooner only requeues itself for the rest of it.
	// Zero: no wait.
	WriteInterval time.Duration

	mu        sync.Mutex
	lastWrite time.Time // when the last reconcile that wrote finished
}

// DefaultDirectoryWriteInterval is handroll's DirectoryReconciler.WriteInterval:
// a new WebApp is listed within about this long, and a burst of creations
// costs one write per interval rather than one per WebApp.
const DefaultDirectoryWriteInterval = 2 * time.Second

// conflictRequeue is when a write refused for a stale resourceVersion is
// tried again, should the event of the newer version not come first.
const conflictRequeue = time.Second

// Reconcile writes the difference between the directory in the cache and
// the desired one: a step of PlanDirectory, part by part. Each write carries
// the cached resourceVersion of its part, so a cache that has not yet seen
// the latest write (ours or anyone's) is never acted on blindly: the API
// server refuses with a conflict, and the newer version's event, or the
// requeue, brings the directory back here. Parts are written before part 0,
// so that part 0 says a new number of parts only after the others' writes of
// the same step have gone through.
func (r *DirectoryReconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	// First, before any O(WebApps) work: during a burst every event lands
	// here, and the workqueue folds them into this one requeue.
	if wait := r.untilNextWrite(); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	logger := klog.FromContext(ctx)
	webapps, err := r.WebApps.List(labels.Everything())
	if err != nil {
		return controller.Result{}, fmt.Errorf("listing WebApps: %w", err)
	}
	desired := DesiredDirectory(webapps, func(ns, name string) metav1.Object {
		svc, err := r.Services.Get(ns, name)
		if err != nil {
			return nil // not found: the cache holds only our labelled Services
		}
		return svc
	})

	cms, err := r.ConfigMaps.ConfigMaps(r.Namespace).List(labels.Everything())
	if err != nil {
		return controller.Result{}, fmt.Errorf("listing the directory's parts: %w", err)
	}
	cached := map[int]*corev1.ConfigMap{}
	current := map[int]map[string]string{}
	for _, cm := range cms {
		if i, ok := DirectoryPartIndex(cm.Name); ok {
			cached[i], current[i] = cm, cm.Data
		}
	}
	parts := 0 // no part 0: nothing to keep readable
	if part0 := cached[0]; part0 != nil {
		if parts, err = DirectoryParts(part0.Annotations); err != nil {
			// Read as one part, the annotation is written again.
			logger.Info("Warning: the directory's number of parts is unreadable; taking it as 1", "err", err)
			parts = 1
		}
	}
	manages := r.Manages
	if manages == nil {
		manages = ManagedDirectoryKeys(r.Namespaces)
	}
	plan := PlanDirectory(parts, current, desired, manages)
	if plan.Parts != parts && parts > 0 {
		logger.Info("Growing the directory", "parts", plan.Parts, "from", parts, "entries", len(desired))
	}

	wrote, conflict := false, false
	var errs []error
	write := func(i int) {
		sent, err := r.writePart(ctx, i, cached[i], plan.Changes[i], plan.Parts)
		wrote = wrote || sent
		if apierrors.IsConflict(err) {
			logger.V(2).Info("The cached directory is not the latest; waiting for the newer version", "part", i)
			conflict = true
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	for i := 1; i < len(plan.Changes); i++ {
		write(i)
	}
	// A new P waits for a step whose other writes all went through.
	if plan.Parts == parts || (!conflict && len(errs) == 0) {
		write(0)
	}
	if wrote {
		r.wrote()
	}
	if len(errs) > 0 {
		return controller.Result{}, errors.Join(errs...)
	}
	if conflict {
		return controller.Result{RequeueAfter: max(conflictRequeue, r.WriteInterval)}, nil
	}
	return controller.Result{}, nil
}

// untilNextWrite is how long the directory must still wait before it may be
// written again.
func (r *DirectoryReconciler) untilNextWrite() time.Duration {
	if r.WriteInterval <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastWrite.IsZero() {
		return 0
	}
	return r.WriteInterval - time.Since(r.lastWrite)
}

func (r *DirectoryReconciler) wrote() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastWrite = time.Now()
}

// writePart brings part i, as the cache holds it (nil: not at all), to
// changes and our labels; part 0 also to the annotation saying parts. It
// tells whether it sent a request. A part that exists is patched; one that
// does not is created if it has anything to hold.
func (r *DirectoryReconciler) writePart(ctx context.Context, i int, cm *corev1.ConfigMap, changes map[string]*string, parts int) (bool, error) {
	if cm != nil {
		return r.patch(ctx, i, cm, changes, parts)
	}
	data := map[string]string{}
	for k, v := range changes {
		if v != nil {
			data[k] = *v
		}
	}
	var annotations map[string]string
	if i == 0 && parts > 1 {
		annotations = map[string]string{DirectoryPartsAnnotation: strconv.Itoa(parts)}
	}
	if len(data) == 0 && annotations == nil {
		return false, nil
	}
	return true, r.create(ctx, i, data, annotations)
}

// patch writes to part i, with one JSON merge patch that names cm's
// resourceVersion, changes, our labels if they are missing and, on part 0,
// the annotation saying parts if it does not. Nothing is sent when nothing
// differs; it tells whether something was.
func (r *DirectoryReconciler) patch(ctx context.Context, i int, cm *corev1.ConfigMap, changes map[string]*string, parts int) (bool, error) {
	meta := map[string]any{"resourceVersion": cm.ResourceVersion}
	missing := false
	for k, v := range directoryLabels() {
		missing = missing || cm.Labels[k] != v
	}
	if missing {
		meta["labels"] = directoryLabels()
	}
	if i == 0 {
		if v, change := DirectoryPartsAnnotationFor(cm.Annotations, parts); change {
			meta["annotations"] = map[string]*string{DirectoryPartsAnnotation: v}
		}
	}
	if len(changes) == 0 && len(meta) == 1 {
		return false, nil
	}
	body := map[string]any{"metadata": meta}
	if len(changes) > 0 {
		body["data"] = changes // never null: in a merge patch that removes every entry
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	_, err = r.Kube.CoreV1().ConfigMaps(r.Namespace).Patch(ctx, DirectoryPartName(i), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return true, fmt.Errorf("patching the directory's part %d: %w", i, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote the directory", "part", i, "changed", len(changes))
	return true, nil
}

// create makes part i of the directory. AlreadyExists means the cache is
// behind, or that the ConfigMap is not in it at all: without our labels it
// escapes the operator namespace's filtered cache. Then data and our labels
// are merged in without a precondition, which is safe because it only adds:
// nothing is removed on the word of a cache that has not seen the object,
// nor is part 0's number of parts changed (the parts it counts may hold
// entries this cache has not seen). Once the labelled object reaches the
// cache, its event brings the directory back here for an exact,
// preconditioned write.
func (r *DirectoryReconciler) create(ctx context.Context, i int, data, annotations map[string]string) error {
	configMaps := r.Kube.CoreV1().ConfigMaps(r.Namespace)
	_, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: DirectoryPartName(i), Namespace: r.Namespace, Labels: directoryLabels(), Annotations: annotations},
		Data:       data,
	}, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created the directory", "part", i, "entries", len(data))
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the directory's part %d: %w", i, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": directoryLabels()}, "data": data})
	if err != nil {
		return err
	}
	if _, err := configMaps.Patch(ctx, DirectoryPartName(i), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("patching the directory's part %d, which the cache does not hold: %w", i, err)
	}
	return nil
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
//   - any part of the directory itself, whatever changed: a write the cache
//     had not seen when the directory was last computed is corrected when it
//     arrives, and so is a hand edit; a part's arrival takes a growing
//     directory to its next step.
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
	// A WebApp made or gone in any range: its entry may be this
	// reconciler's to remove (DirectoryReconciler.Manages).
	if err := add(inf.WebAppMetadata, controller.PredicateFuncs{
		UpdateFunc: func(metav1.Object, metav1.Object) bool { return false },
	}); err != nil {
		return nil, err
	}
	isDirectory := func(o metav1.Object) bool {
		_, part := DirectoryPartIndex(o.GetName())
		return part && o.GetNamespace() == r.Namespace
	}
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
