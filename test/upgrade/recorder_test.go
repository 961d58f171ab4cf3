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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
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
	client := dyn.Resource(gvr).Namespace(ns)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing %s in %s: %v", gvr.Resource, ns, err)
	}
	r := &recorder{resource: gvr.Resource, first: map[string]*unstructured.Unstructured{}, last: map[string]*unstructured.Unstructured{}}
	for i := range list.Items {
		o := &list.Items[i]
		r.first[o.GetName()], r.last[o.GetName()] = o, o
	}
	go r.follow(ctx, client, list.GetResourceVersion())
	return r
}

// follow watches from rv until ctx is done, again from where it stopped
// when a watch closes. The API server closes the watches of a custom
// resource when its CRD changes, and the new storage's watch cache cannot
// go back before it: then a list shows what changed in between, each
// changed object as one write (two writes to one object in those
// milliseconds would count as one).
func (r *recorder) follow(ctx context.Context, client dynamic.ResourceInterface, rv string) {
	for ctx.Err() == nil {
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = r.relist(ctx, client)
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		rv = r.drain(ctx, client, w, rv)
	}
}

// drain observes w's events until it closes and returns the
// resourceVersion to watch from next.
func (r *recorder) drain(ctx context.Context, client dynamic.ResourceInterface, w watch.Interface, rv string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return r.relist(ctx, client)
			}
			return rv
		case watch.Bookmark:
		default:
			r.observe(ev)
		}
		if o, ok := ev.Object.(*unstructured.Unstructured); ok {
			rv = o.GetResourceVersion()
		}
	}
	return rv
}

// relist records what changed since the objects were last seen, and
// returns the list's resourceVersion.
func (r *recorder) relist(ctx context.Context, client dynamic.ResourceInterface) string {
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			r.fail(fmt.Errorf("relisting %s: %w", r.resource, err))
		}
		return ""
	}
	seen := map[string]bool{}
	for i := range list.Items {
		o := &list.Items[i]
		seen[o.GetName()] = true
		switch last := r.current(o.GetName()); {
		case last == nil:
			r.observe(watch.Event{Type: watch.Added, Object: o})
		case last.GetResourceVersion() != o.GetResourceVersion():
			r.observe(watch.Event{Type: watch.Modified, Object: o})
		}
	}
	r.mu.Lock()
	var gone []*unstructured.Unstructured
	for name, o := range r.last {
		if !seen[name] {
			gone = append(gone, o)
		}
	}
	r.mu.Unlock()
	for _, o := range gone {
		r.observe(watch.Event{Type: watch.Deleted, Object: o})
	}
	return list.GetResourceVersion()
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

// joinWrites prints the first few writes in full, and counts the rest.
func joinWrites(ws []write) string {
	const shown = 5
	var b strings.Builder
	for i, w := range ws {
		if i == shown {
			fmt.Fprintf(&b, "... and %d more\n", len(ws)-shown)
			break
		}
		b.WriteString(w.String())
		b.WriteString("\n")
	}
	return b.String()
}
