package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Queue is all a Handler may do with the workqueue: add keys. Handlers run
// on the informer's goroutine, so they only compute keys; the work happens
// in Reconcile. The workqueue itself de-duplicates keys.
type Queue interface {
	Add(req Request)
}

// PriorityQueue is the Queue a Watch hands its Handler. Add queues at the
// event's priority: low for the informer's initial list and for resyncs
// (updates whose old and new resourceVersion are the same), high for any other
// add, update or delete. AddWithPriority sets the priority itself, for a
// Handler that knows better (one that fans a live change out to many keys
// may queue them low). A key queued twice keeps the higher priority.
type PriorityQueue interface {
	Queue
	AddWithPriority(req Request, p Priority)
}

// Handler turns an informer event into zero or more Requests.
type Handler interface {
	Create(ctx context.Context, obj metav1.Object, q Queue)
	Update(ctx context.Context, oldObj, newObj metav1.Object, q Queue)
	Delete(ctx context.Context, obj metav1.Object, q Queue)
}

// EnqueueObject enqueues the object of the event itself: the handler for the
// controller's own kind (builder.For in controller-runtime).
func EnqueueObject() Handler { return enqueueObject{} }

type enqueueObject struct{}

func (enqueueObject) Create(_ context.Context, obj metav1.Object, q Queue) {
	q.Add(keyOf(obj))
}

// Update enqueues the new object; namespace and name never change.
func (enqueueObject) Update(_ context.Context, _, newObj metav1.Object, q Queue) {
	q.Add(keyOf(newObj))
}

func (enqueueObject) Delete(_ context.Context, obj metav1.Object, q Queue) {
	q.Add(keyOf(obj))
}

func keyOf(obj metav1.Object) Request {
	return Request{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// EnqueueOwner enqueues the owners of the event's object whose kind is owner
// (builder.Owns in controller-runtime): when a Deployment that a WebApp owns
// changes, the WebApp is reconciled. With onlyController, only the owner
// reference marked controller counts, as with builder.Owns.
//
// Owner references name no namespace: an owner must be in the object's own
// namespace (or cluster-scoped), and this handler assumes the former.
// controller-runtime asks a RESTMapper to tell the two apart.
func EnqueueOwner(owner schema.GroupKind, onlyController bool) Handler {
	return enqueueOwner{owner: owner, onlyController: onlyController}
}

type enqueueOwner struct {
	owner          schema.GroupKind
	onlyController bool
}

func (h enqueueOwner) Create(ctx context.Context, obj metav1.Object, q Queue) {
	h.addOwners(ctx, obj, q)
}

// Update enqueues the owners of both versions: if the owner references
// changed, the old owner has lost a child and must hear about it too.
func (h enqueueOwner) Update(ctx context.Context, oldObj, newObj metav1.Object, q Queue) {
	h.addOwners(ctx, oldObj, q)
	h.addOwners(ctx, newObj, q)
}

func (h enqueueOwner) Delete(ctx context.Context, obj metav1.Object, q Queue) {
	h.addOwners(ctx, obj, q)
}

func (h enqueueOwner) addOwners(ctx context.Context, obj metav1.Object, q Queue) {
	for _, ref := range obj.GetOwnerReferences() {
		if h.onlyController && (ref.Controller == nil || !*ref.Controller) {
			continue
		}
		// An owner reference carries apiVersion ("apps/v1", or "v1" for the
		// core group); only its group matters, any version of the kind is
		// the same owner.
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Ignoring owner reference with an invalid apiVersion", "object", klog.KObj(obj), "apiVersion", ref.APIVersion)
			continue
		}
		if gv.Group != h.owner.Group || ref.Kind != h.owner.Kind {
			continue
		}
		q.Add(Request{Namespace: obj.GetNamespace(), Name: ref.Name})
	}
}

// EnqueueMapped enqueues whatever fn returns for the event's object
// (builder.Watches with EnqueueRequestsFromMapFunc in controller-runtime),
// for example every WebApp that refers to a changed ConfigMap. fn should read
// from a cache, not the API server: it runs on the informer's goroutine.
func EnqueueMapped(fn func(ctx context.Context, obj metav1.Object) []Request) Handler {
	return enqueueMapped(fn)
}

type enqueueMapped func(ctx context.Context, obj metav1.Object) []Request

func (fn enqueueMapped) Create(ctx context.Context, obj metav1.Object, q Queue) {
	fn.add(ctx, obj, q)
}

// Update maps both versions: a change can move the object from one set of
// Requests to another, and both sets need a reconcile.
func (fn enqueueMapped) Update(ctx context.Context, oldObj, newObj metav1.Object, q Queue) {
	fn.add(ctx, oldObj, q)
	fn.add(ctx, newObj, q)
}

func (fn enqueueMapped) Delete(ctx context.Context, obj metav1.Object, q Queue) {
	fn.add(ctx, obj, q)
}

func (fn enqueueMapped) add(ctx context.Context, obj metav1.Object, q Queue) {
	for _, req := range fn(ctx, obj) {
		q.Add(req)
	}
}

// eventHandler is what Start registers on an informer: it adapts the
// informer's untyped callbacks to a Handler, after the predicates.
type eventHandler struct {
	ctx        context.Context
	handler    Handler
	predicates []Predicate
	queue      Queue
	logger     klog.Logger
}

var _ cache.ResourceEventHandler = &eventHandler{}

// OnAdd is called for new objects, and for every object of the initial list,
// which is queued low: it is what the cache held before we started, and live
// changes should not wait behind it.
func (e *eventHandler) OnAdd(obj any, isInInitialList bool) {
	o, ok := e.object(obj)
	if !ok {
		return
	}
	for _, p := range e.predicates {
		if !p.Create(o) {
			return
		}
	}
	prio := PriorityHigh
	if isInInitialList {
		prio = PriorityLow
	}
	e.handler.Create(e.ctx, o, e.at(prio))
}

// OnUpdate is called for changes, and also on informer resyncs, where old
// and new are the same version; those are queued low, as in
// controller-runtime's handler.WithLowPriorityWhenUnchanged. Unlike there,
// two empty resourceVersions (objects that never came from an API server,
// as with client-go's fake clientset) do not count as the same version.
func (e *eventHandler) OnUpdate(oldObj, newObj any) {
	o, ok := e.object(oldObj)
	if !ok {
		return
	}
	n, ok := e.object(newObj)
	if !ok {
		return
	}
	for _, p := range e.predicates {
		if !p.Update(o, n) {
			return
		}
	}
	prio := PriorityHigh
	if rv := o.GetResourceVersion(); rv != "" && rv == n.GetResourceVersion() {
		prio = PriorityLow
	}
	e.handler.Update(e.ctx, o, n, e.at(prio))
}

func (e *eventHandler) OnDelete(obj any) {
	// If the informer's watch was down when the object was deleted, it finds
	// out on the next list and hands us a tombstone holding the last state it
	// knew, instead of the object.
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := e.object(obj)
	if !ok {
		return
	}
	for _, p := range e.predicates {
		if !p.Delete(o) {
			return
		}
	}
	// A delete is always a live change, a tombstone included.
	e.handler.Delete(e.ctx, o, e.at(PriorityHigh))
}

// object returns obj's metadata, or logs why it has none.
func (e *eventHandler) object(obj any) (metav1.Object, bool) {
	o, err := meta.Accessor(obj)
	if err != nil {
		e.logger.Error(err, "Ignoring informer event for an object without metadata", "type", fmt.Sprintf("%T", obj))
		return nil, false
	}
	return o, true
}

// WithProgressPriority wraps h so that a live update for which progress
// holds is queued at PriorityProgress rather than PriorityHigh: a change
// that moves work already begun (a child's rollout) does not wait behind
// new work. Other events, and resyncs, keep their priority.
func WithProgressPriority(h Handler, progress func(oldObj, newObj metav1.Object) bool) Handler {
	return progressPriority{Handler: h, progress: progress}
}

type progressPriority struct {
	Handler
	progress func(oldObj, newObj metav1.Object) bool
}

func (h progressPriority) Update(ctx context.Context, oldObj, newObj metav1.Object, q Queue) {
	if at, ok := q.(queueAt); ok && at.priority == PriorityHigh && h.progress(oldObj, newObj) {
		q = queueAt{PriorityQueue: at.PriorityQueue, priority: PriorityProgress}
	}
	h.Handler.Update(ctx, oldObj, newObj, q)
}

// queueAt is a PriorityQueue whose Add uses the priority of one event.
type queueAt struct {
	PriorityQueue
	priority Priority
}

func (q queueAt) Add(req Request) { q.AddWithPriority(req, q.priority) }

// at returns the Queue to hand a Handler for an event of priority p. A plain
// Queue (a test's) is handed over as is.
func (e *eventHandler) at(p Priority) Queue {
	if pq, ok := e.queue.(PriorityQueue); ok {
		return queueAt{PriorityQueue: pq, priority: p}
	}
	return e.queue
}
