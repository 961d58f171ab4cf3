package webapp

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller"
	handrollfake "github.com/handroll/handroll/pkg/generated/clientset/versioned/fake"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// fakeInformer is an informer the test drives by hand: deliver stores an
// object and then calls the handlers, in client-go's order.
type fakeInformer struct {
	cache.SharedIndexInformer // nil: only what NewController uses is here
	indexer                   cache.Indexer
	handlers                  []cache.ResourceEventHandler
}

func newFakeInformer() *fakeInformer {
	return &fakeInformer{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

func (f *fakeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.handlers = append(f.handlers, h)
	return nil, nil
}

func (f *fakeInformer) GetIndexer() cache.Indexer { return f.indexer }
func (f *fakeInformer) GetStore() cache.Store     { return f.indexer }

func (f *fakeInformer) deliver(t *testing.T, obj any) {
	t.Helper()
	old, exists, err := f.indexer.Get(obj)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		if err := f.indexer.Update(obj); err != nil {
			t.Fatal(err)
		}
		for _, h := range f.handlers {
			h.OnUpdate(old, obj)
		}
		return
	}
	if err := f.indexer.Add(obj); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.handlers {
		h.OnAdd(obj, false)
	}
}

// fakeReconciler reads from the informers given and writes to the fake
// clients, recording events in a fake recorder.
func fakeReconciler(webapps, deployments, services, configMaps *fakeInformer, hr *handrollfake.Clientset, kube *fake.Clientset) *Reconciler {
	return &Reconciler{
		WebApps:     handrolllisters.NewWebAppLister(webapps.indexer),
		Deployments: appslisters.NewDeploymentLister(deployments.indexer),
		Services:    corelisters.NewServiceLister(services.indexer),
		ConfigMaps:  corelisters.NewConfigMapLister(configMaps.indexer),
		Client:      hr,
		Kube:        kube,
		Recorder:    events.NewFakeRecorder(100),
	}
}

// metadataIndexer reads a metadata informer's store (MetadataGetter).
type metadataIndexer struct{ cache.Indexer }

func (m metadataIndexer) Get(namespace, name string) (*metav1.PartialObjectMetadata, error) {
	obj, ok, err := m.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("unknown"), name)
	}
	return obj.(*metav1.PartialObjectMetadata).DeepCopy(), nil
}

// TestMetadataEventDoesNotEndJustWritten drives a child's metadata
// informer ahead of its full informer (two watches, no order between them)
// and checks that a reconcile in between does not apply again.
func TestMetadataEventDoesNotEndJustWritten(t *testing.T) {
	ctx := context.Background()
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop", UID: "uid-shop", ResourceVersion: "1", Generation: 1},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1", Config: map[string]string{"k": "v"}},
	}
	webapps := newFakeInformer()
	if err := webapps.indexer.Add(w); err != nil {
		t.Fatal(err)
	}

	applies := newStampedApplies()
	hr := handrollfake.NewSimpleClientset()
	hr.PrependReactor("patch", "webapps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, w.DeepCopy(), nil
	})
	r, recorder, children := newMetadataReconciler(t, webapps, hr, applies.kube)
	object := func(c writtenChild) runtime.Object {
		t.Helper()
		return applies.object(t, c)
	}
	applied := func() []string {
		t.Helper()
		return appliedEvents(ctx, t, r, recorder, w)
	}

	if got := applied(); len(got) != 1 || !strings.HasPrefix(got[0], "Normal Created") {
		t.Fatalf("first reconcile: events %q, want one Created", got)
	}

	// Created: the metadata informers see the children first.
	for _, c := range children {
		c.meta.deliver(t, metadataOf(object(c)))
	}
	if got := applied(); len(got) > 0 {
		t.Errorf("after the metadata events of the creates, before the full ones: %q, want no apply", got)
	}
	for _, c := range children {
		c.full.deliver(t, object(c))
	}
	if got := applied(); len(got) > 0 {
		t.Errorf("with every cache up to date: %q, want no apply", got)
	}

	// Updated: a new image rolls the Deployment; its metadata event comes
	// first.
	w = w.DeepCopy()
	w.Spec.Image, w.Generation, w.ResourceVersion = "nginx:2", 2, "2"
	if err := webapps.indexer.Update(w); err != nil {
		t.Fatal(err)
	}
	if got := applied(); len(got) != 1 || got[0] != "Normal Updated Updated Deployment shop" {
		t.Fatalf("after the image change: %q, want the Deployment updated", got)
	}
	dep := children[0]
	dep.meta.deliver(t, metadataOf(object(dep)))
	if got := applied(); len(got) > 0 {
		t.Errorf("after the Deployment's metadata event, before its full one: %q, want no apply", got)
	}
	dep.full.deliver(t, object(dep))
	if got := applied(); len(got) > 0 {
		t.Errorf("with every cache up to date: %q, want no apply", got)
	}
	if d := object(dep).(*appsv1.Deployment); d.Spec.Template.Spec.Containers[0].Image != "nginx:2" {
		t.Errorf("Deployment image %q, want nginx:2", d.Spec.Template.Spec.Containers[0].Image)
	}
}

// stampedApplies is a fake clientset that keeps each child's latest apply
// to deliver. The fake tracker keeps no resourceVersion in objects: it
// stamps each apply's answer, as the API server would.
type stampedApplies struct {
	kube   *fake.Clientset
	mu     sync.Mutex
	rv     int
	latest map[string]runtime.Object
}

func newStampedApplies() *stampedApplies {
	s := &stampedApplies{kube: fake.NewClientset(), rv: 100, latest: map[string]runtime.Object{}}
	s.kube.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := clienttesting.ObjectReaction(s.kube.Tracker())(a)
		if err != nil || obj == nil {
			return handled, obj, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rv++
		m, _ := meta.Accessor(obj)
		m.SetResourceVersion(strconv.Itoa(s.rv))
		s.latest[a.GetResource().Resource+"/"+m.GetName()] = obj.DeepCopyObject()
		return handled, obj, err
	})
	return s
}

// object returns a copy of c as last applied, failing if it never was.
func (s *stampedApplies) object(t *testing.T, c writtenChild) runtime.Object {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	obj := s.latest[c.resource+"/"+c.name]
	if obj == nil {
		t.Fatalf("%s %s was never applied", c.resource, c.name)
	}
	return obj.DeepCopyObject()
}

// writtenChild is a child of the WebApp with its full and metadata
// informers.
type writtenChild struct {
	resource string
	name     string
	full     *fakeInformer
	meta     *fakeInformer
}

// newMetadataReconciler sets up a reconciler whose children have both full
// and metadata informers, and returns it with its event recorder and the
// children (the Deployment first).
func newMetadataReconciler(t *testing.T, webapps *fakeInformer, hr *handrollfake.Clientset, kube *fake.Clientset) (*Reconciler, *events.FakeRecorder, []writtenChild) {
	t.Helper()
	deployments, services, configMaps := newFakeInformer(), newFakeInformer(), newFakeInformer()
	deploymentMeta, serviceMeta, configMapMeta := newFakeInformer(), newFakeInformer(), newFakeInformer()
	recorder := events.NewFakeRecorder(100)
	r := fakeReconciler(webapps, deployments, services, configMaps, hr, kube)
	r.Recorder = recorder
	r.ChildrenCacheFiltered = true
	r.DeploymentMeta = metadataIndexer{deploymentMeta.indexer}
	r.ServiceMeta = metadataIndexer{serviceMeta.indexer}
	r.ConfigMapMeta = metadataIndexer{configMapMeta.indexer}
	if _, err := NewController(r, Informers{
		WebApps:     []cache.SharedIndexInformer{webapps},
		Deployments: []cache.SharedIndexInformer{deployments},
		Services:    []cache.SharedIndexInformer{services},
		ConfigMaps:  []cache.SharedIndexInformer{configMaps},

		DeploymentMetadata: []cache.SharedIndexInformer{deploymentMeta},
		ServiceMetadata:    []cache.SharedIndexInformer{serviceMeta},
		ConfigMapMetadata:  []cache.SharedIndexInformer{configMapMeta},
	}, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	return r, recorder, []writtenChild{
		{"deployments", "shop", deployments, deploymentMeta},
		{"services", "shop", services, serviceMeta},
		{"configmaps", handrollv1.OwnedConfigMapName("shop"), configMaps, configMapMeta},
	}
}

// metadataOf is obj as its metadata informer sees it.
func metadataOf(obj runtime.Object) *metav1.PartialObjectMetadata {
	m := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
	return &metav1.PartialObjectMetadata{ObjectMeta: *m.DeepCopy()}
}

// appliedEvents reconciles w and returns the Created and Updated events.
func appliedEvents(ctx context.Context, t *testing.T, r *Reconciler, recorder *events.FakeRecorder, w *handrollv1.WebApp) []string {
	t.Helper()
	if _, err := r.Reconcile(ctx, controller.Request{Namespace: w.Namespace, Name: w.Name}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var got []string
	for {
		select {
		case e := <-recorder.Events:
			if strings.HasPrefix(e, "Normal "+EventCreated+" ") || strings.HasPrefix(e, "Normal "+EventUpdated+" ") {
				got = append(got, e)
			}
		default:
			return got
		}
	}
}

// TestEchoOfOwnWriteStartsNoReconcile: the watch event of the reconciler's
// own write of a child, arriving before or after the write returns, is
// recognised by its version and passes no predicate; any other version of
// the child does, and so does the deletion.
func TestEchoOfOwnWriteStartsNoReconcile(t *testing.T) {
	var j justWritten
	key := childKey("Deployment", "ns", "shop")
	pred := j.notEcho("Deployment")
	at := func(rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop", ResourceVersion: rv}}
	}

	// The echo arrives while the write is still in flight.
	done := j.writing(key)
	passed := make(chan bool)
	go func() { passed <- pred.Create(at("7")) }()
	select {
	case <-passed:
		t.Fatal("the event was judged before the write in flight returned")
	case <-time.After(50 * time.Millisecond):
	}
	j.wrote(key, "", at("7"))
	done()
	if <-passed {
		t.Error("the echo of the write (version 7) passed: a second reconcile for nothing")
	}
	if !pred.Update(at("7"), at("7")) {
		t.Error("a resync of version 7 did not pass")
	}
	if _, held := j.m.Load(key); held {
		t.Error("the memory of the write outlived its echo")
	}
	if !pred.Update(at("7"), at("8")) {
		t.Error("a later version (8), someone else's change, did not pass")
	}
	if !pred.Delete(at("7")) {
		t.Error("the child's deletion did not pass")
	}

	// Deleted by hand before any other event: the deletion ends the memory
	// before the owner is queued, so its reconcile recreates the child.
	j.wrote(key, "", at("9"))
	if !pred.Delete(at("9")) {
		t.Error("the deletion of the child just written did not pass")
	}
	if _, held := j.seen(key, ""); held {
		t.Error("after its deletion, the child still reads as the one just written")
	}

	// A write that failed leaves nothing to match.
	done = j.writing(childKey("Service", "ns", "shop"))
	done()
	if !j.notEcho("Service").Create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop", ResourceVersion: "3"}}) {
		t.Error("a Service never written here was taken for an echo")
	}
}

// held counts the writes j still remembers.
func (j *justWritten) held() int {
	n := 0
	j.m.Range(func(any, any) bool { n++; return true })
	return n
}

// TestStatusMemoryEndsWithTheWebAppsEvent: what a reconcile remembers of
// the status it wrote ends with the WebApp's next event in the cache, as a
// child's memory ends with the child's, instead of waiting for the next
// reconcile of that WebApp, which a converged one may never have: a
// memory held per WebApp would grow with N.
func TestStatusMemoryEndsWithTheWebAppsEvent(t *testing.T) {
	t.Run("echo after the answer", func(t *testing.T) { testStatusMemoryEnds(t, false) })
	t.Run("echo before the answer", func(t *testing.T) { testStatusMemoryEnds(t, true) })
}

func testStatusMemoryEnds(t *testing.T, echoFirst bool) {
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop", UID: "uid-shop", ResourceVersion: "1", Generation: 1},
		Spec:       handrollv1.WebAppSpec{Image: "nginx:1"},
	}
	webapps, deployments, services, configMaps := newFakeInformer(), newFakeInformer(), newFakeInformer(), newFakeInformer()
	if err := webapps.indexer.Add(w); err != nil {
		t.Fatal(err)
	}
	written := w.DeepCopy()
	written.ResourceVersion = "2"
	hr := handrollfake.NewSimpleClientset()
	hr.PrependReactor("patch", "webapps", func(clienttesting.Action) (bool, runtime.Object, error) {
		if echoFirst {
			webapps.deliver(t, written.DeepCopy())
		}
		return true, written.DeepCopy(), nil
	})
	r := fakeReconciler(webapps, deployments, services, configMaps, hr, fake.NewClientset())
	if _, err := NewController(r, Informers{
		WebApps:     []cache.SharedIndexInformer{webapps},
		Deployments: []cache.SharedIndexInformer{deployments},
		Services:    []cache.SharedIndexInformer{services},
		ConfigMaps:  []cache.SharedIndexInformer{configMaps},
	}, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), controller.Request{Namespace: "team", Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	statusKey, children := writtenKeys("team", "shop")
	if echoFirst {
		if _, ok := r.recent.m.Load(statusKey); ok {
			t.Error("the echo reached the cache before the answer, and the memory of the status write outlived it")
		}
		return
	}
	if _, ok := r.recent.m.Load(statusKey); !ok {
		t.Fatal("the reconcile wrote the status but remembers nothing of it")
	}
	// The children's echoes end their memories.
	for _, key := range children {
		r.recent.forget(key)
	}

	webapps.deliver(t, w) // a resync of the version the write was decided on
	if _, ok := r.recent.m.Load(statusKey); !ok {
		t.Error("a resync of the version read ended the memory of the status written on it")
	}
	written.Status = handrollv1.WebAppStatus{ObservedGeneration: 1}
	webapps.deliver(t, written) // the echo of the status write
	if n := r.recent.held(); n != 0 {
		t.Errorf("after the WebApp's event, %d writes still remembered, want 0", n)
	}
}

// TestResyncBeforeTheEchoKeepsTheWrite: a resync of a child's version from
// before this process's write of it, delivered after the write returned
// and before its echo, says nothing new: the reconcile it starts must
// still compare with what was written, or it would apply the same child
// twice.
func TestResyncBeforeTheEchoKeepsTheWrite(t *testing.T) {
	var j justWritten
	full := newFakeInformer()
	if err := j.observe(full, "Deployment"); err != nil {
		t.Fatal(err)
	}
	pred := j.notEcho("Deployment")
	key := childKey("Deployment", "ns", "shop")
	at := func(rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop", ResourceVersion: rv}}
	}
	if err := full.indexer.Add(at("5")); err != nil {
		t.Fatal(err)
	}

	done := j.writing(key)
	j.wrote(key, "5", at("7"))
	done()

	// The resync: the cache's version 5 again, to every handler.
	full.deliver(t, at("5"))
	if !pred.Update(at("5"), at("5")) {
		t.Error("a resync did not pass")
	}
	if obj, ok := j.seen(key, "5"); !ok || obj.(*appsv1.Deployment).ResourceVersion != "7" {
		t.Fatalf("after a resync of version 5: seen %v, %t; want the write (version 7)", obj, ok)
	}

	// The echo ends the memory; the cache holds the write from then on.
	full.deliver(t, at("7"))
	pred.Update(at("5"), at("7"))
	if _, held := j.m.Load(key); held {
		t.Error("the memory of the write outlived its echo")
	}
}

// TestJustWrittenEntryIsDroppedWhen: each of the five ways a remembered
// write ends (see justWritten), and the events that must leave it in place
// because they say the cache has not moved.
func TestJustWrittenEntryIsDroppedWhen(t *testing.T) {
	child := childKey("Deployment", "ns", "shop")
	status, _ := writtenKeys("ns", "shop")
	dep := func(rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop", ResourceVersion: rv}}
	}
	app := func(rv string) *handrollv1.WebApp {
		return &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shop", ResourceVersion: rv}}
	}
	// Every case starts from a Deployment written at version 7 and a
	// status written, both decided on version 5 of the cache.
	type world struct {
		j                  *justWritten
		full, meta, webapp *fakeInformer
		pred               controller.Predicate
	}
	cases := []struct {
		name    string
		key     string
		act     func(t *testing.T, w world)
		dropped bool
	}{
		// 1. A read finds the cache moved.
		{"1: a read finds the cache at another version", child, func(_ *testing.T, w world) { w.j.seen(child, "6") }, true},
		{"kept: a read finds the version decided on", child, func(_ *testing.T, w world) { w.j.seen(child, "5") }, false},
		{"kept: a read finds the version written", child, func(_ *testing.T, w world) { w.j.seen(child, "7") }, false},
		// 2. Too old.
		{"2: it is older than writtenMaxAge", child, func(_ *testing.T, w world) {
			v, _ := w.j.m.Load(child)
			old := v.(written)
			old.at = time.Now().Add(-writtenMaxAge - time.Second)
			w.j.m.Store(child, old)
			w.j.seen(child, "5")
		}, true},
		// 3. The child's full informer moves.
		{"3: the child's echo reaches the predicates", child, func(_ *testing.T, w world) { w.pred.Update(dep("5"), dep("7")) }, true},
		{"3: the child's informer delivers another version", child, func(t *testing.T, w world) { w.full.deliver(t, dep("8")) }, true},
		{"3: the child is deleted", child, func(_ *testing.T, w world) { w.pred.Delete(dep("7")) }, true},
		{"3: the child's informer delivers its deletion", child, func(_ *testing.T, w world) {
			for _, h := range w.full.handlers {
				h.OnDelete(dep("7"))
			}
		}, true},
		{"kept: a resync of the version decided on", child, func(t *testing.T, w world) {
			w.full.deliver(t, dep("5"))
			w.pred.Update(dep("5"), dep("5"))
		}, false},
		{"kept: a metadata informer's event", child, func(t *testing.T, w world) { w.meta.deliver(t, dep("8")) }, false},
		// 4. The WebApp's informer moves, for a status.
		{"4: the WebApp's informer delivers another version", status, func(t *testing.T, w world) { w.webapp.deliver(t, app("8")) }, true},
		{"4: the WebApp's informer delivers its deletion", status, func(_ *testing.T, w world) {
			for _, h := range w.webapp.handlers {
				h.OnDelete(app("8"))
			}
		}, true},
		{"4: the cache is past the version decided on when the write returns", status, func(_ *testing.T, w world) { w.j.movedFrom(status, "8") }, true},
		{"kept: the WebApp's informer resyncs the version decided on", status, func(t *testing.T, w world) { w.webapp.deliver(t, app("5")) }, false},
		// 5. Gone.
		{"5: the object is forgotten", child, func(_ *testing.T, w world) { w.j.forget(child) }, true},
		{"5: the status is forgotten", status, func(_ *testing.T, w world) { w.j.forget(status) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := world{j: &justWritten{}, full: newFakeInformer(), meta: newFakeInformer(), webapp: newFakeInformer()}
			if err := w.j.observe(w.full, "Deployment"); err != nil {
				t.Fatal(err)
			}
			if err := w.j.observeStatus(w.webapp); err != nil {
				t.Fatal(err)
			}
			w.pred = w.j.notEcho("Deployment")
			w.full.deliver(t, dep("5"))
			w.webapp.deliver(t, app("5"))
			w.j.wrote(child, "5", dep("7"))
			w.j.wrote(status, "5", &handrollv1.WebAppStatus{ObservedGeneration: 1})

			c.act(t, w)
			if _, held := w.j.m.Load(c.key); held == c.dropped {
				t.Errorf("%s: still remembered = %t, want %t", c.key, held, !c.dropped)
			}
		})
	}
}
