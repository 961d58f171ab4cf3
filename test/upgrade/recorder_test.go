package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// A write is one change to an object, as a watch saw it: of its content
// (metadata and spec, or data), of its status, or both.
type write struct {
	at            time.Time
	resource, key string
	content       bool
	status        bool
	diff          string
}

func (w write) String() string {
	what := map[[2]bool]string{{true, false}: "content", {false, true}: "status", {true, true}: "content and status"}[[2]bool{w.content, w.status}]
	return fmt.Sprintf("%s %s %s (%s):\n%s", w.at.Format(time.StampMilli), w.resource, w.key, what, w.diff)
}

// recorder lists a resource in a namespace and watches it from that list's
// resourceVersion, so that it counts every write from then on, not only the
// difference between two snapshots.
type recorder struct {
	resource string
	first    map[string]*unstructured.Unstructured // as listed

	mu      sync.Mutex
	last    map[string]*unstructured.Unstructured
	writes  []write
	created []string
	deleted []string
	err     error
}

func record(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string) *recorder {
	t.Helper()
	list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing %s in %s: %v", gvr.Resource, ns, err)
	}
	r := &recorder{resource: gvr.Resource, first: map[string]*unstructured.Unstructured{}, last: map[string]*unstructured.Unstructured{}}
	for i := range list.Items {
		o := &list.Items[i]
		r.first[o.GetName()], r.last[o.GetName()] = o, o
	}
	// A retry watcher resumes where a closed watch stopped: the API server
	// closes the watches of a custom resource when its CRD changes.
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return dyn.Resource(gvr).Namespace(ns).Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
	if err != nil {
		t.Fatalf("watching %s in %s: %v", gvr.Resource, ns, err)
	}
	go r.follow(ctx, w)
	return r
}

func (r *recorder) follow(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				r.fail(fmt.Errorf("the watch of %s ended early: writes after it would go uncounted", r.resource))
				return
			}
			r.observe(ev)
		}
	}
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

func (r *recorder) observe(ev watch.Event) {
	o, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		r.fail(fmt.Errorf("watching %s: %v", r.resource, ev.Object))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name := o.GetName()
	switch ev.Type {
	case watch.Added:
		r.created = append(r.created, name)
	case watch.Deleted:
		r.deleted = append(r.deleted, name)
	case watch.Modified:
		before := r.last[name]
		w := write{at: time.Now(), resource: r.resource, key: name}
		if before != nil {
			w.content = !equality.Semantic.DeepEqual(content(before), content(o))
			w.status = !equality.Semantic.DeepEqual(before.Object["status"], o.Object["status"])
			w.diff = cmp.Diff(before.Object, o.Object)
		}
		r.writes = append(r.writes, w)
	}
	r.last[name] = o
}

// content is what a write of the object itself (not of its status) changes:
// everything but the status, the resourceVersion and the status
// subresource's managedFields entries. An apply that changes nothing is no
// write at all; one that changes only who owns a field changes
// managedFields, and counts.
func content(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	delete(c.Object, "status")
	c.SetResourceVersion("")
	var fields []metav1.ManagedFieldsEntry
	for _, f := range c.GetManagedFields() {
		if f.Subresource != "status" {
			fields = append(fields, f)
		}
	}
	c.SetManagedFields(fields)
	return c.Object
}

// since returns the writes seen at or after from.
func (r *recorder) since(from time.Time) []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []write
	for _, w := range r.writes {
		if !w.at.Before(from) {
			out = append(out, w)
		}
	}
	return out
}

// result returns every write, the objects created and deleted, and the
// watch's error.
func (r *recorder) result() (writes []write, created, deleted []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]write(nil), r.writes...), append([]string(nil), r.created...), append([]string(nil), r.deleted...), r.err
}

// current returns the object as last seen.
func (r *recorder) current(name string) *unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[name]
}

// names returns the names listed first, sorted.
func (r *recorder) names() []string {
	var out []string
	for n := range r.first {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func joinWrites(ws []write) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String())
		b.WriteString("\n")
	}
	return b.String()
}
