package webapp

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// writtenMaxAge bounds how long a write is remembered should its event
// never come (it always does, even across a relist: this is a safety net).
const writtenMaxAge = 30 * time.Second

// justWritten remembers what this process last wrote of each object, and
// the resourceVersion its cache showed before the write, until the cache
// moves past that version. A reconcile that runs before its own write's
// watch event arrives (a child's event often comes first) then compares
// with what it wrote, not with the older cached copy, and does not write
// the same thing twice: the expectations of kube-controller-manager's
// ReplicaSet controller, for one write per object.
//
// Any event for the object in the full informer, the one the reconciler
// reads, drops what was remembered (observe): that cache has it from then
// on. That matters where the version alone cannot tell, an object created
// and deleted again before a reconcile saw it, which is absent both before
// and after. A metadata informer's events drop nothing: it is a watch of
// its own, often ahead of the full one, and its event says nothing about
// what the full cache holds.
type justWritten struct {
	m        sync.Map // key → written
	observed sync.Map // informer → struct{}: observe adds its handler once
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

// observe drops key's memory when its informer delivers any event for it.
// Give it only the informers whose listers the reconciler reads the kind
// from, never a metadata informer (see justWritten).
//
// Several controllers on one reconciler (one per range of --shards, on
// shared informers) observe an informer once: a handler added per
// controller would outlive it.
func (j *justWritten) observe(informer cache.SharedIndexInformer, kind string) error {
	if _, loaded := j.observed.LoadOrStore(informer, struct{}{}); loaded {
		return nil
	}
	drop := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if m, err := meta.Accessor(obj); err == nil {
			j.m.Delete(childKey(kind, m.GetNamespace(), m.GetName()))
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    drop,
		UpdateFunc: func(_, newObj any) { drop(newObj) },
		DeleteFunc: drop,
	})
	if err != nil {
		j.observed.Delete(informer)
	}
	return err
}

// forget drops keys, for an object that is gone.
func (j *justWritten) forget(keys ...string) {
	for _, k := range keys {
		j.m.Delete(k)
	}
}
