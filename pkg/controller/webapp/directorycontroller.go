package webapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strconv"
	"strings"
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
//
// Connected to its events by NewDirectoryController, it computes only the
// entries they name (see directoryIndex), and rebuilds the whole directory
// only when it cannot account for what the parts hold. A reconciler no
// controller feeds (one whose caller runs Reconcile itself) rebuilds every
// time.
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
	lastWrite time.Time           // when the last reconcile that wrote finished
	tracked   bool                // events name every change of an entry (NewDirectoryController)
	dirty     map[string]struct{} // keys that events named since a reconcile last took them
	rebuild   bool                // an event asked for a full rebuild (a resync)

	// reconciling serializes Reconcile, which alone uses index.
	reconciling sync.Mutex
	index       directoryIndex
}

// DefaultDirectoryWriteInterval is handroll's DirectoryReconciler.WriteInterval:
// a new WebApp is listed within about this long, and a burst of creations
// costs one write per interval rather than one per WebApp.
const DefaultDirectoryWriteInterval = 2 * time.Second

// conflictRequeue is when a write refused for a stale resourceVersion is
// tried again, should the event of the newer version not come first.
const conflictRequeue = time.Second

// Reconcile writes the difference between the directory as it stands and
// the desired one: a step of PlanDirectory, part by part. Each write carries
// the resourceVersion of its part as last seen, so a part that has changed
// since (by anyone) is never acted on blindly: the API server refuses with a
// conflict, and the newer version's event, or the requeue, brings the
// directory back here. Parts are written before part 0, so that part 0 says
// a new number of parts only after the others' writes of the same step have
// gone through.
func (r *DirectoryReconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	// First, before any work: during a burst every event lands here, and
	// the workqueue folds them into this one requeue.
	if wait := r.untilNextWrite(); wait > 0 {
		return controller.Result{RequeueAfter: wait}, nil
	}
	r.reconciling.Lock()
	defer r.reconciling.Unlock()
	dirty, rebuild := r.takeDirty()
	s, err := r.step(ctx, dirty, rebuild)
	if err == nil && len(s.errs) > 0 {
		err = errors.Join(s.errs...)
	}
	if err != nil {
		// Whatever went through, the next reconcile rebuilds: no key is lost.
		r.index.invalidate()
		r.putBack(maps.Keys(dirty))
		return controller.Result{}, err
	}
	for _, i := range s.refused {
		r.putBack(maps.Keys(s.plan.Changes[i]))
	}
	if len(s.refused) > 0 {
		return controller.Result{RequeueAfter: max(conflictRequeue, r.WriteInterval)}, nil
	}
	return controller.Result{}, nil
}

// step reconciles the dirty keys against the index when it can, and the
// whole directory when it must: when asked to, when the index does not
// stand for the parts the cache holds, or when the directory is to grow.
func (r *DirectoryReconciler) step(ctx context.Context, dirty map[string]struct{}, rebuild bool) (*directoryStep, error) {
	cms, err := r.ConfigMaps.ConfigMaps(r.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing the directory's parts: %w", err)
	}
	cached := map[int]*corev1.ConfigMap{}
	for _, cm := range cms {
		if i, ok := DirectoryPartIndex(cm.Name); ok {
			cached[i] = cm
		}
	}
	if !rebuild && r.index.catchUp(cached, dirty) {
		plan, ok, err := r.planDirty(dirty)
		if err != nil {
			return nil, err
		}
		if ok {
			s := newDirectoryStep(r.index.parts, plan, r.index.bases())
			r.write(ctx, s)
			r.index.advance(s)
			return s, nil
		}
	}
	return r.rebuildAll(ctx, cached)
}

// rebuildAll is the full step: the desired directory of every WebApp in the
// cache, planned against every part. The index is built from its outcome.
func (r *DirectoryReconciler) rebuildAll(ctx context.Context, cached map[int]*corev1.ConfigMap) (*directoryStep, error) {
	logger := klog.FromContext(ctx)
	webapps, err := r.WebApps.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing WebApps: %w", err)
	}
	desired := DesiredDirectory(webapps, r.serviceOf)
	current := make(map[int]map[string]string, len(cached))
	for i, cm := range cached {
		current[i] = cm.Data
	}
	parts, readable := 0, true // no part 0: nothing to keep readable
	if part0 := cached[0]; part0 != nil {
		if parts, err = DirectoryParts(part0.Annotations); err != nil {
			// Read as one part, the annotation is written again.
			logger.Info("Warning: the directory's number of parts is unreadable; taking it as 1", "err", err)
			parts, readable = 1, false
		}
	}
	plan := PlanDirectory(parts, current, desired, r.manages())
	if plan.Parts != parts && parts > 0 {
		logger.Info("Growing the directory", "parts", plan.Parts, "from", parts, "entries", len(desired))
	}
	s := newDirectoryStep(parts, plan, cached)
	r.write(ctx, s)
	r.index.rebuilt(s, readable && r.isTracked())
	return s, nil
}

// planDirty is the step of PlanDirectory for the dirty keys alone, from the
// index, and true; false when P is to grow, a step only the full plan
// takes. It asks the caches for nothing but the dirty keys' WebApps and
// Services.
func (r *DirectoryReconciler) planDirty(dirty map[string]struct{}) (DirectoryPlan, bool, error) {
	x, manages := &r.index, r.manages()
	plan := DirectoryPlan{Parts: x.parts, Changes: make([]map[string]*string, x.parts)}
	size := x.size()
	for k := range dirty {
		if !manages(k) {
			continue // another's: counted in size where it stands, never written
		}
		v, want, err := r.entry(k)
		if err != nil {
			return DirectoryPlan{}, false, err
		}
		home := DirectoryPart(k, x.parts)
		if cur, ok := x.data(home)[k]; ok {
			size -= len(k) + len(cur)
		}
		if want {
			size += len(k) + len(v)
		}
		// As DirectoryChanges: set where it belongs, removed from any other part.
		for i := range x.parts {
			cur, has := x.data(i)[k]
			switch {
			case i == home && want && (!has || cur != v):
				plan.Changes[i] = withChange(plan.Changes[i], k, &v)
			case (i != home || !want) && has:
				plan.Changes[i] = withChange(plan.Changes[i], k, nil)
			}
		}
	}
	if DirectoryPartsFor(size, x.parts) != x.parts {
		return DirectoryPlan{}, false, nil
	}
	return plan, true, nil
}

func withChange(changes map[string]*string, k string, v *string) map[string]*string {
	if changes == nil {
		changes = map[string]*string{}
	}
	changes[k] = v
	return changes
}

// entry is the desired entry of key, as DesiredDirectory would have it.
func (r *DirectoryReconciler) entry(key string) (string, bool, error) {
	ns, name, ok := strings.Cut(key, ".")
	if !ok {
		return "", false, nil
	}
	w, err := r.WebApps.WebApps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading WebApp %s/%s: %w", ns, name, err)
	}
	url, want := directoryEntry(w, r.serviceOf)
	return url, want, nil
}

func (r *DirectoryReconciler) serviceOf(ns, name string) metav1.Object {
	svc, err := r.Services.Get(ns, name)
	if err != nil {
		return nil // not found: the cache holds only our labelled Services
	}
	return svc
}

func (r *DirectoryReconciler) manages() func(key string) bool {
	if r.Manages != nil {
		return r.Manages
	}
	return ManagedDirectoryKeys(r.Namespaces)
}

// directoryStep is one reconcile's writes: the plan, each part as the
// writes find it, and what came of them.
type directoryStep struct {
	parts   int // P before the step
	plan    DirectoryPlan
	base    map[int]*corev1.ConfigMap // nil: absent
	written map[int]*corev1.ConfigMap // each part that changed, as the API server returned it
	refused []int                     // parts whose write met a conflict
	sent    bool
	errs    []error
}

func newDirectoryStep(parts int, plan DirectoryPlan, base map[int]*corev1.ConfigMap) *directoryStep {
	return &directoryStep{parts: parts, plan: plan, base: base, written: map[int]*corev1.ConfigMap{}}
}

// write sends s's plan: the other parts first, then part 0, unless P is to
// grow and another part's write did not go through.
func (r *DirectoryReconciler) write(ctx context.Context, s *directoryStep) {
	logger := klog.FromContext(ctx)
	write := func(i int) {
		cm, sent, err := r.writePart(ctx, i, s.base[i], s.plan.Changes[i], s.plan.Parts)
		s.sent = s.sent || sent
		switch {
		case apierrors.IsConflict(err):
			logger.V(2).Info("The directory has changed since it was read; waiting for the newer version", "part", i)
			s.refused = append(s.refused, i)
		case err != nil:
			s.errs = append(s.errs, err)
		case cm != nil:
			s.written[i] = cm
		}
	}
	for i := 1; i < len(s.plan.Changes); i++ {
		write(i)
	}
	// A new P waits for a step whose other writes all went through.
	if s.plan.Parts == s.parts || (len(s.refused) == 0 && len(s.errs) == 0) {
		write(0)
	}
	if s.sent {
		r.wrote()
	}
}

// takeDirty hands the keys events named to a reconcile, and whether it is
// to rebuild the whole directory instead.
func (r *DirectoryReconciler) takeDirty() (map[string]struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dirty, rebuild := r.dirty, r.rebuild || !r.tracked
	r.dirty, r.rebuild = nil, false
	if dirty == nil {
		dirty = map[string]struct{}{}
	}
	return dirty, rebuild
}

// putBack makes keys dirty again, for a reconcile that did not bring them
// to what they should be.
func (r *DirectoryReconciler) putBack(keys iter.Seq[string]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range keys {
		r.touchLocked(k)
	}
}

// touch records, for an event, that key's entry may have changed.
func (r *DirectoryReconciler) touch(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.touchLocked(key)
}

func (r *DirectoryReconciler) touchLocked(key string) {
	if r.dirty == nil {
		r.dirty = map[string]struct{}{}
	}
	r.dirty[key] = struct{}{}
}

// requestRebuild has the next reconcile rebuild the whole directory.
func (r *DirectoryReconciler) requestRebuild() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rebuild = true
}

func (r *DirectoryReconciler) isTracked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tracked
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

// writePart brings part i, as last seen (nil: not at all), to changes and
// our labels; part 0 also to the annotation saying parts. It returns the
// part as the API server holds it after a write that went through (nil
// when it cannot tell), and whether it sent a request. A part that exists is patched; one that
// does not is created if it has anything to hold.
func (r *DirectoryReconciler) writePart(ctx context.Context, i int, cm *corev1.ConfigMap, changes map[string]*string, parts int) (*corev1.ConfigMap, bool, error) {
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
		return nil, false, nil
	}
	created, err := r.create(ctx, i, data, annotations)
	return created, true, err
}

// patch writes to part i, with one JSON merge patch that names cm's
// resourceVersion, changes, our labels if they are missing and, on part 0,
// the annotation saying parts if it does not. Nothing is sent when nothing
// differs; it tells whether something was.
func (r *DirectoryReconciler) patch(ctx context.Context, i int, cm *corev1.ConfigMap, changes map[string]*string, parts int) (*corev1.ConfigMap, bool, error) {
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
		return nil, false, nil
	}
	body := map[string]any{"metadata": meta}
	if len(changes) > 0 {
		body["data"] = changes // never null: in a merge patch that removes every entry
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return nil, false, err
	}
	patched, err := r.Kube.CoreV1().ConfigMaps(r.Namespace).Patch(ctx, DirectoryPartName(i), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, true, fmt.Errorf("patching the directory's part %d: %w", i, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote the directory", "part", i, "changed", len(changes))
	return patched, true, nil
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
func (r *DirectoryReconciler) create(ctx context.Context, i int, data, annotations map[string]string) (*corev1.ConfigMap, error) {
	configMaps := r.Kube.CoreV1().ConfigMaps(r.Namespace)
	created, err := configMaps.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: DirectoryPartName(i), Namespace: r.Namespace, Labels: directoryLabels(), Annotations: annotations},
		Data:       data,
	}, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created the directory", "part", i, "entries", len(data))
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the directory's part %d: %w", i, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": directoryLabels()}, "data": data})
	if err != nil {
		return nil, err
	}
	if _, err := configMaps.Patch(ctx, DirectoryPartName(i), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return nil, fmt.Errorf("patching the directory's part %d, which the cache does not hold: %w", i, err)
	}
	// Not the part as we would have it: it may hold entries we know
	// nothing of. It is compared whole when the cache has it.
	return nil, nil
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
//
// The WebApp and Service events also name their entry to r, which from
// then on reconciles the entries named rather than every one.
func NewDirectoryController(r *DirectoryReconciler, inf Informers, opts controller.Options) (*controller.Controller, error) {
	if opts.Name == "" {
		opts.Name = DirectoryControllerName
	}
	c, err := controller.New(opts, r)
	if err != nil {
		return nil, err
	}
	entries, parts := r.track()
	add := func(informers []cache.SharedIndexInformer, h controller.Handler, preds ...controller.Predicate) error {
		for _, informer := range informers {
			if err := c.Watch(informer, h, preds...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(inf.WebApps, entries, controller.Or(controller.GenerationChanged(), deletionStarted())); err != nil {
		return nil, err
	}
	if err := add(inf.Services, entries, controllerChanged()); err != nil {
		return nil, err
	}
	// A WebApp made or gone in any range: its entry may be this
	// reconciler's to remove (DirectoryReconciler.Manages).
	if err := add(inf.WebAppMetadata, entries, controller.PredicateFuncs{
		UpdateFunc: func(metav1.Object, metav1.Object) bool { return false },
	}); err != nil {
		return nil, err
	}
	isDirectory := func(o metav1.Object) bool {
		_, part := DirectoryPartIndex(o.GetName())
		return part && o.GetNamespace() == r.Namespace
	}
	// Resyncs pass too: each is a full rebuild of the directory.
	if err := add(inf.ConfigMaps, parts, controller.PredicateFuncs{
		CreateFunc: isDirectory,
		UpdateFunc: func(_, newObj metav1.Object) bool { return isDirectory(newObj) },
		DeleteFunc: isDirectory,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// track tells r that events name every change of an entry from now on, and
// returns the Handlers that do: entries for the WebApps and their Services
// (a Service has its WebApp's name), parts for the directory's ConfigMaps.
// Both enqueue the directory's one Request.
func (r *DirectoryReconciler) track() (entries, parts controller.Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tracked = true
	req := controller.Request{Namespace: r.Namespace, Name: DirectoryName}
	return entryEvents{r, req}, partEvents{r, req}
}

// entryEvents names the entry of each event's object dirty, before the
// Request is queued: the reconcile that takes the key reads the cache as it
// was at the event, or later.
type entryEvents struct {
	r   *DirectoryReconciler
	req controller.Request
}

func (h entryEvents) Create(_ context.Context, obj metav1.Object, q controller.Queue) {
	h.r.touch(DirectoryKey(obj.GetNamespace(), obj.GetName()))
	q.Add(h.req)
}

// Update needs only the new object: namespace and name never change.
func (h entryEvents) Update(ctx context.Context, _, newObj metav1.Object, q controller.Queue) {
	h.Create(ctx, newObj, q)
}

func (h entryEvents) Delete(ctx context.Context, obj metav1.Object, q controller.Queue) {
	h.Create(ctx, obj, q)
}

// partEvents queues the Request for every event of a part: the reconcile
// compares each part's version with the one it knows. A resync (an update
// to the same resourceVersion) asks for a full rebuild, the periodic check
// that nothing has been missed.
type partEvents struct {
	r   *DirectoryReconciler
	req controller.Request
}

func (h partEvents) Create(_ context.Context, _ metav1.Object, q controller.Queue) { q.Add(h.req) }

func (h partEvents) Update(_ context.Context, oldObj, newObj metav1.Object, q controller.Queue) {
	if rv := oldObj.GetResourceVersion(); rv != "" && rv == newObj.GetResourceVersion() {
		h.r.requestRebuild()
	}
	q.Add(h.req)
}

func (h partEvents) Delete(_ context.Context, _ metav1.Object, q controller.Queue) { q.Add(h.req) }

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
