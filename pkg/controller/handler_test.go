package controller

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// fakeQueue records what a Handler adds.
type fakeQueue struct {
	mu   sync.Mutex
	adds []Request
}

func (q *fakeQueue) Add(req Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.adds = append(q.adds, req)
}

func (q *fakeQueue) added() []Request {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.adds)
}

func configMap(ns, name string, mutate ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, m := range mutate {
		m(cm)
	}
	return cm
}

func ownedBy(refs ...metav1.OwnerReference) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) { cm.OwnerReferences = refs }
}

func ref(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &controller}
}

func TestEnqueueObject(t *testing.T) {
	h := EnqueueObject()
	q := &fakeQueue{}
	ctx := context.Background()
	h.Create(ctx, configMap("ns", "created"), q)
	h.Update(ctx, configMap("ns", "updated"), configMap("ns", "updated"), q)
	h.Delete(ctx, configMap("ns", "deleted"), q)
	want := []Request{{Namespace: "ns", Name: "created"}, {Namespace: "ns", Name: "updated"}, {Namespace: "ns", Name: "deleted"}}
	if diff := cmp.Diff(want, q.added()); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
}

func TestEnqueueOwner(t *testing.T) {
	webapp := schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}
	tests := []struct {
		name           string
		owner          schema.GroupKind
		onlyController bool
		refs           []metav1.OwnerReference
		want           []Request
	}{{
		name:  "controller reference of the kind",
		owner: webapp, onlyController: true,
		refs: []metav1.OwnerReference{ref("handroll.dev/v1", "WebApp", "site", true)},
		want: []Request{{Namespace: "ns", Name: "site"}},
	}, {
		name:  "any version of the group",
		owner: webapp, onlyController: true,
		refs: []metav1.OwnerReference{ref("handroll.dev/v1alpha1", "WebApp", "site", true)},
		want: []Request{{Namespace: "ns", Name: "site"}},
	}, {
		name:  "non-controller reference skipped when onlyController",
		owner: webapp, onlyController: true,
		refs: []metav1.OwnerReference{ref("handroll.dev/v1", "WebApp", "other", false), ref("handroll.dev/v1", "WebApp", "site", true)},
		want: []Request{{Namespace: "ns", Name: "site"}},
	}, {
		name:  "reference without the controller field skipped when onlyController",
		owner: webapp, onlyController: true,
		refs: []metav1.OwnerReference{{APIVersion: "handroll.dev/v1", Kind: "WebApp", Name: "site"}},
	}, {
		name:  "every reference of the kind when not onlyController",
		owner: webapp, onlyController: false,
		refs: []metav1.OwnerReference{ref("handroll.dev/v1", "WebApp", "one", false), ref("handroll.dev/v1", "WebApp", "two", true)},
		want: []Request{{Namespace: "ns", Name: "one"}, {Namespace: "ns", Name: "two"}},
	}, {
		name:  "same kind in another group ignored",
		owner: webapp, onlyController: false,
		refs: []metav1.OwnerReference{ref("example.com/v1", "WebApp", "site", true)},
	}, {
		name:  "another kind in the same group ignored",
		owner: webapp, onlyController: false,
		refs: []metav1.OwnerReference{ref("handroll.dev/v1", "Site", "site", true)},
	}, {
		name:  "core group owner",
		owner: schema.GroupKind{Kind: "ConfigMap"}, onlyController: true,
		refs: []metav1.OwnerReference{ref("v1", "ConfigMap", "parent", true), ref("apps/v1", "ConfigMap", "not-core", true)},
		want: []Request{{Namespace: "ns", Name: "parent"}},
	}, {
		name:  "invalid apiVersion skipped, the rest still read",
		owner: webapp, onlyController: true,
		refs: []metav1.OwnerReference{ref("a/b/c", "WebApp", "broken", true), ref("handroll.dev/v1", "WebApp", "site", true)},
		want: []Request{{Namespace: "ns", Name: "site"}},
	}, {
		name:  "no owners",
		owner: webapp, onlyController: true,
	}}
	ctx := klog.NewContext(context.Background(), quietLogger)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := EnqueueOwner(tt.owner, tt.onlyController)
			for event, call := range map[string]func(q Queue){
				"create": func(q Queue) { h.Create(ctx, configMap("ns", "child", ownedBy(tt.refs...)), q) },
				"delete": func(q Queue) { h.Delete(ctx, configMap("ns", "child", ownedBy(tt.refs...)), q) },
			} {
				q := &fakeQueue{}
				call(q)
				if diff := cmp.Diff(tt.want, q.added()); diff != "" {
					t.Errorf("%s: enqueued (-want +got):\n%s", event, diff)
				}
			}
		})
	}

	t.Run("update enqueues the owners of old and new", func(t *testing.T) {
		h := EnqueueOwner(webapp, true)
		q := &fakeQueue{}
		h.Update(context.Background(),
			configMap("ns", "child", ownedBy(ref("handroll.dev/v1", "WebApp", "before", true))),
			configMap("ns", "child", ownedBy(ref("handroll.dev/v1", "WebApp", "after", true))), q)
		want := []Request{{Namespace: "ns", Name: "before"}, {Namespace: "ns", Name: "after"}}
		if diff := cmp.Diff(want, q.added()); diff != "" {
			t.Errorf("enqueued (-want +got):\n%s", diff)
		}
	})
}

func TestEnqueueMapped(t *testing.T) {
	type ctxKey struct{}
	var gotCtx []any
	// Maps a ConfigMap to the WebApps named in its "users" label.
	h := EnqueueMapped(func(ctx context.Context, obj metav1.Object) []Request {
		gotCtx = append(gotCtx, ctx.Value(ctxKey{}))
		if u := obj.GetLabels()["users"]; u != "" {
			return []Request{{Namespace: obj.GetNamespace(), Name: u}}
		}
		return nil
	})
	withUser := func(u string) func(*corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"users": u} }
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "the handler's context")
	q := &fakeQueue{}
	h.Create(ctx, configMap("ns", "cm", withUser("one")), q)
	h.Update(ctx, configMap("ns", "cm", withUser("one")), configMap("ns", "cm", withUser("two")), q)
	h.Delete(ctx, configMap("ns", "cm", withUser("two")), q)
	h.Create(ctx, configMap("ns", "unused"), q)

	want := []Request{{Namespace: "ns", Name: "one"}, {Namespace: "ns", Name: "one"}, {Namespace: "ns", Name: "two"}, {Namespace: "ns", Name: "two"}}
	if diff := cmp.Diff(want, q.added()); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
	for i, v := range gotCtx {
		if v != "the handler's context" {
			t.Errorf("call %d: map function got context value %v", i, v)
		}
	}
	if len(gotCtx) != 5 {
		t.Errorf("map function called %d times, want 5 (update maps old and new)", len(gotCtx))
	}
}

// recordingPredicate passes everything and records the objects it saw.
type recordingPredicate struct{ seen []string }

func (p *recordingPredicate) Create(obj metav1.Object) bool {
	p.seen = append(p.seen, "create "+obj.GetName())
	return true
}

func (p *recordingPredicate) Update(o, n metav1.Object) bool {
	p.seen = append(p.seen, "update "+o.GetName()+"->"+n.GetName())
	return true
}

func (p *recordingPredicate) Delete(obj metav1.Object) bool {
	p.seen = append(p.seen, "delete "+obj.GetName())
	return true
}

func newEventHandler(h Handler, q Queue, preds ...Predicate) *eventHandler {
	return &eventHandler{ctx: context.Background(), handler: h, predicates: preds, queue: q, logger: quietLogger}
}

func TestEventHandlerUnwrapsTombstones(t *testing.T) {
	q := &fakeQueue{}
	p := &recordingPredicate{}
	e := newEventHandler(EnqueueObject(), q, p)
	e.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: configMap("ns", "gone")})
	e.OnDelete(configMap("ns", "deleted"))

	want := []Request{{Namespace: "ns", Name: "gone"}, {Namespace: "ns", Name: "deleted"}}
	if diff := cmp.Diff(want, q.added()); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"delete gone", "delete deleted"}, p.seen); diff != "" {
		t.Errorf("predicates saw (-want +got):\n%s", diff)
	}
}

func TestEventHandlerAppliesEveryPredicate(t *testing.T) {
	q := &fakeQueue{}
	p := &recordingPredicate{}
	onlyKeep := PredicateFuncs{
		CreateFunc: func(obj metav1.Object) bool { return obj.GetName() == "keep" },
		UpdateFunc: func(_, n metav1.Object) bool { return n.GetName() == "keep" },
		DeleteFunc: func(obj metav1.Object) bool { return obj.GetName() == "keep" },
	}
	e := newEventHandler(EnqueueObject(), q, p, onlyKeep)
	for _, name := range []string{"drop", "keep"} {
		e.OnAdd(configMap("ns", name), false)
		e.OnUpdate(configMap("ns", name), configMap("ns", name))
		e.OnDelete(configMap("ns", name))
	}
	keep := Request{Namespace: "ns", Name: "keep"}
	if diff := cmp.Diff([]Request{keep, keep, keep}, q.added()); diff != "" {
		t.Errorf("enqueued (-want +got):\n%s", diff)
	}
	// The first predicate saw all six events: both are consulted.
	if len(p.seen) != 6 {
		t.Errorf("first predicate saw %v, want all six events", p.seen)
	}
}

func TestEventHandlerIgnoresObjectsWithoutMetadata(t *testing.T) {
	q := &fakeQueue{}
	e := newEventHandler(EnqueueObject(), q)
	e.OnAdd("not an object", false)
	e.OnUpdate(configMap("ns", "x"), 42)
	e.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: nil})
	if got := q.added(); len(got) != 0 {
		t.Errorf("enqueued %v for events without objects", got)
	}
}

// newConfigMapInformer is a ConfigMap informer over an empty fake clientset,
// never started.
func newConfigMapInformer(t *testing.T) cache.SharedIndexInformer {
	t.Helper()
	return informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().ConfigMaps().Informer()
}

// TestWatchConnectsInformers runs a controller over real client-go informers
// on a fake clientset: ConfigMaps labelled app=web are its own kind
// (EnqueueObject), Secrets are children owned by a WebApp (EnqueueOwner).
func TestWatchConnectsInformers(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	cmInformer := &countingInformer{SharedIndexInformer: factory.Core().V1().ConfigMaps().Informer()}
	secretInformer := &countingInformer{SharedIndexInformer: factory.Core().V1().Secrets().Informer()}

	r := newRecorder(nil)
	h := newHarness(t, Options{MaxConcurrentReconciles: 1}, r)
	if err := h.c.Watch(cmInformer, EnqueueObject(), LabelSelector(labels.SelectorFromSet(labels.Set{"app": "web"}))); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Watch(secretInformer, EnqueueOwner(schema.GroupKind{Group: "handroll.dev", Kind: "WebApp"}, true)); err != nil {
		t.Fatal(err)
	}

	// An object that exists before the start arrives with the initial list.
	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, configMap("ns", "existing", withLabel("app", "web")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	defer func() {
		close(stopInformers)
		factory.Shutdown()
	}()
	h.start(t, cmInformer.HasSynced, secretInformer.HasSynced)
	if got := receive(t, r.calls, "the initial list"); got != (Request{Namespace: "ns", Name: "existing"}) {
		t.Fatalf("first reconcile %v, want ns/existing", got)
	}

	// Create: the unlabelled ConfigMap is filtered out. Events reach the
	// handler in order and the single worker takes keys in order, so had it
	// been enqueued it would be reconciled before the labelled one.
	cms := client.CoreV1().ConfigMaps("ns")
	if _, err := cms.Create(ctx, configMap("ns", "unlabelled"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := cms.Create(ctx, configMap("ns", "web", withLabel("app", "web")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	webKey := Request{Namespace: "ns", Name: "web"}
	if got := receive(t, r.calls, "the created ConfigMap"); got != webKey {
		t.Fatalf("reconciled %v, want %v", got, webKey)
	}

	// Update.
	web.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, r.calls, "the updated ConfigMap"); got != webKey {
		t.Fatalf("reconciled %v, want %v", got, webKey)
	}

	// A child: its controlling owner is reconciled.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "site-tls",
		OwnerReferences: []metav1.OwnerReference{ref("handroll.dev/v1", "WebApp", "site", true)}}}
	if _, err := client.CoreV1().Secrets("ns").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, r.calls, "the owner of the created Secret"); got != (Request{Namespace: "ns", Name: "site"}) {
		t.Fatalf("reconciled %v, want ns/site", got)
	}

	// Delete.
	if err := cms.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, r.calls, "the deleted ConfigMap"); got != webKey {
		t.Fatalf("reconciled %v, want %v", got, webKey)
	}

	if err := h.stop(t); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := r.all(); len(got) != 5 {
		t.Errorf("reconciled %v, want exactly the five above", got)
	}
	// The informers outlive the controller (other controllers may share
	// them): stopping must take our handlers off them.
	for _, inf := range []*countingInformer{cmInformer, secretInformer} {
		if added, removed := inf.counts(); added != 1 || removed != 1 {
			t.Errorf("handlers added %d, removed %d; want 1 and 1", added, removed)
		}
	}
}

// countingInformer counts the event handlers added to and removed from an
// informer.
type countingInformer struct {
	cache.SharedIndexInformer
	mu             sync.Mutex
	added, removed int
}

func (i *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	i.added++
	i.mu.Unlock()
	return i.SharedIndexInformer.AddEventHandler(h)
}

func (i *countingInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	i.mu.Lock()
	i.removed++
	i.mu.Unlock()
	return i.SharedIndexInformer.RemoveEventHandler(reg)
}

func (i *countingInformer) counts() (added, removed int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.added, i.removed
}

func withLabel(k, v string) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{k: v} }
}
