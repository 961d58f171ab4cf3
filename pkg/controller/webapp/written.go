package webapp

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/handroll/handroll/pkg/controller"
)

// writtenMaxAge bounds how long a write is remembered should its event
// never come (it always does, even across a relist: this is a safety net).
const writtenMaxAge = 30 * time.Second

// echoWait bounds how long a child's event waits for the write in flight
// on that child to return, to tell whether it is that write's echo: the
// watch event of a write often arrives before its response.
const echoWait = 2 * time.Second

// justWritten remembers what this process last wrote of each object, and
// the resourceVersion its cache showed before the write, until the cache
// moves past that version. A reconcile that runs before its own write's
// watch event arrives (a child's event often comes first) then compares
// with what it wrote, not with the older cached copy, and does not write
// the same thing twice: the expectations of kube-controller-manager's
// ReplicaSet controller, for one write per object.
//
// The rule: an entry lives until the cache the reconciler reads is past
// the version the write was decided on. It is dropped in exactly five ways
// (TestJustWrittenEntryIsDroppedWhen):
//
//  1. a read finds the cache at any version but the one decided on or the
//     one written (seen);
//  2. it is older than writtenMaxAge (seen, event): a safety net;
//  3. the child's full informer delivers its echo, another version or its
//     deletion (notEcho, observe);
//  4. the WebApp's informer delivers another version of it, or its
//     deletion, for a status (observeStatus, and movedFrom after the write
//     when the echo came first);
//  5. the object is gone or being deleted by the reconciler (forget).
//
// A resync of the version decided on drops nothing: it shows the cache has
// not moved, and the reconcile it starts must still see the write, not
// apply it again. That matters where the version alone cannot tell, an
// object created and deleted again before a reconcile saw it, which is
// absent both before and after. A metadata informer's events drop nothing:
// it is a watch of its own, often ahead of the full one, and its event says
// nothing about what the full cache holds.
//
// The event of the write itself, its echo (the version written), changes
// nothing the reconciler does not already know: it starts no reconcile,
// and ends the memory (notEcho).
type justWritten struct {
	m        sync.Map // key → written
	observed sync.Map // informer → struct{}: observe adds its handler once
	inflight sync.Map // key → chan struct{}, closed when the write returns
}

type written struct {
	from string // the cached resourceVersion the write was decided on; "" for none
	to   string // the written object's resourceVersion; "" when unknown
	obj  any
	at   time.Time
}

// seen returns what was written of key while the cache still shows
// cachedRV, the version the write was decided on, or the written version
// itself: a filtered child's full cache may lag behind the metadata cache
// it is then read from, whose partial object would be applied again. Once
// the cache shows any other version the memory is dropped and the cache is
// right. Versions are compared for equality only: they are opaque.
func (j *justWritten) seen(key, cachedRV string) (any, bool) {
	v, ok := j.m.Load(key)
	if !ok {
		return nil, false
	}
	if w := v.(written); (w.from == cachedRV || w.to != "" && w.to == cachedRV) && time.Since(w.at) < writtenMaxAge {
		return w.obj, true
	}
	j.m.CompareAndDelete(key, v)
	return nil, false
}

// wrote records obj as written to key, decided on cachedRV. An obj with
// metadata (a child, not a status) records its resourceVersion too.
func (j *justWritten) wrote(key, cachedRV string, obj any) {
	w := written{from: cachedRV, obj: obj, at: time.Now()}
	if m, err := meta.Accessor(obj); err == nil {
		w.to = m.GetResourceVersion()
	}
	j.m.Store(key, w)
}

// writing marks a write of key in flight until done is called, after
// wrote or on its failure.
func (j *justWritten) writing(key string) (done func()) {
	ch := make(chan struct{})
	j.inflight.Store(key, ch)
	return func() {
		j.inflight.CompareAndDelete(key, ch)
		close(ch)
	}
}

// event is what the full cache shows of key now: version rv, or gone. It
// tells whether that is the echo of the write remembered, waiting (at most
// echoWait) for a write of key still in flight, and ends the memory either
// way: from then on that cache holds the write, or something newer.
func (j *justWritten) event(key, rv string, deleted bool) (echo bool) {
	if ch, ok := j.inflight.Load(key); ok && !deleted {
		select {
		case <-ch.(chan struct{}):
		case <-time.After(echoWait):
		}
	}
	v, ok := j.m.Load(key)
	if !ok {
		return false
	}
	w := v.(written)
	if w.before(rv, deleted) {
		return false // a resync of what the write was decided on: not moved
	}
	j.m.CompareAndDelete(key, v)
	return !deleted && rv != "" && w.to == rv && time.Since(w.at) < writtenMaxAge
}

// before tells whether an event of version rv shows the object as it was
// when the write was decided, so that the cache has not moved: a resync
// delivered after the write returned and before its echo.
func (w written) before(rv string, deleted bool) bool {
	return !deleted && rv != "" && rv == w.from
}

// notEcho passes a child's events except the echo of this process's own
// write: the reconcile that wrote it already acted on what it holds. It
// ends the memory of the write before the owner is queued, so that the
// reconcile an event starts never meets a memory older than its cache (a
// Service deleted by hand, read back as the one just written, would not be
// recreated). A resync (the same version again) passes.
func (j *justWritten) notEcho(kind string) controller.Predicate {
	pass := func(obj metav1.Object, deleted bool) bool {
		return !j.event(childKey(kind, obj.GetNamespace(), obj.GetName()), obj.GetResourceVersion(), deleted)
	}
	return controller.PredicateFuncs{
		CreateFunc: func(obj metav1.Object) bool { return pass(obj, false) },
		UpdateFunc: func(old, obj metav1.Object) bool {
			return pass(obj, false) || old.GetResourceVersion() == obj.GetResourceVersion()
		},
		DeleteFunc: func(obj metav1.Object) bool { return pass(obj, true) },
	}
}

// observe drops key's memory when its informer delivers any event for it
// but the echo of the write remembered or a resync of the version it was
// decided on.
// Give it only the informers whose listers the reconciler reads the kind
// from, never a metadata informer (see justWritten).
//
// Several controllers on one reconciler (one per range of --shards, on
// shared informers) observe an informer once: a handler added per
// controller would outlive it.
func (j *justWritten) observe(informer cache.SharedIndexInformer, kind string) error {
	return j.onEvents(informer, func(m metav1.Object, deleted bool) {
		key := childKey(kind, m.GetNamespace(), m.GetName())
		v, ok := j.m.Load(key)
		if !ok {
			return
		}
		w, rv := v.(written), m.GetResourceVersion()
		if !deleted && w.to == rv || w.before(rv, deleted) {
			return // the echo, which notEcho ends, or a resync from before it
		}
		j.m.CompareAndDelete(key, v)
	})
}

// observeStatus drops what was written of a WebApp's status once its
// informer (the one the reconciler reads) delivers any version but the one
// the write was decided on: from then on that cache holds the write, or
// something newer. Without it the memory would last until the WebApp's
// next reconcile, which a converged WebApp may never have: an entry for
// every WebApp whose status was ever written.
func (j *justWritten) observeStatus(informer cache.SharedIndexInformer) error {
	return j.onEvents(informer, func(m metav1.Object, deleted bool) {
		key, _ := writtenKeys(m.GetNamespace(), m.GetName())
		if deleted {
			j.m.Delete(key)
			return
		}
		j.movedFrom(key, m.GetResourceVersion())
	})
}

// onEvents calls drop for every event of informer, once per informer
// (see observe).
func (j *justWritten) onEvents(informer cache.SharedIndexInformer, drop func(m metav1.Object, deleted bool)) error {
	if _, loaded := j.observed.LoadOrStore(informer, struct{}{}); loaded {
		return nil
	}
	handle := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if m, err := meta.Accessor(obj); err == nil {
			drop(m, deleted)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { handle(obj, false) },
		UpdateFunc: func(_, newObj any) { handle(newObj, false) },
		DeleteFunc: func(obj any) { handle(obj, true) },
	})
	if err != nil {
		j.observed.Delete(informer)
	}
	return err
}

// movedFrom drops what was written of key when the cache, now at version
// rv, is no longer at the version the write was decided on.
func (j *justWritten) movedFrom(key, rv string) {
	if v, ok := j.m.Load(key); ok && v.(written).from != rv {
		j.m.CompareAndDelete(key, v)
	}
}

// forget drops keys, for an object that is gone.
func (j *justWritten) forget(keys ...string) {
	for _, k := range keys {
		j.m.Delete(k)
	}
}
