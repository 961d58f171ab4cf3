package webapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// lastResourceVersion numbers the writes of every versioned clientset.
var lastResourceVersion atomic.Int64

// versioned makes kube serve the ConfigMaps of namespace ops from objects,
// with resourceVersions kept as the API server keeps them, where the
// directory relies on them: every write stores a new one, and a patch
// that names another is refused with a conflict. Its merge patches are
// those DirectoryReconciler sends; it applies them without the fake's
// round trip through JSON and field management, which would make the
// tests slow.
func versioned(t testing.TB, kube *fake.Clientset, objects ...*corev1.ConfigMap) {
	s := &configMapServer{t: t, objects: map[string]*corev1.ConfigMap{}}
	for _, cm := range objects {
		s.objects[cm.Name] = cm.DeepCopy()
	}
	kube.PrependReactor("*", "configmaps", s.react)
}

type configMapServer struct {
	t       testing.TB
	objects map[string]*corev1.ConfigMap
}

func (s *configMapServer) react(a k8stesting.Action) (bool, runtime.Object, error) {
	// By verb: the Action interfaces overlap (a patch is a GetAction).
	switch a.GetVerb() {
	case "get", "delete", "patch":
		name := a.(k8stesting.GetAction).GetName()
		cm, ok := s.objects[name]
		switch {
		case !ok:
			return true, nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
		case a.GetVerb() == "get":
			return true, cm.DeepCopy(), nil
		case a.GetVerb() == "delete":
			delete(s.objects, name)
			return true, nil, nil
		}
		cm, err := mergePatch(s.t, cm.DeepCopy(), a.(k8stesting.PatchAction).GetPatch())
		if err != nil {
			return true, nil, err
		}
		return s.store(cm)
	case "list":
		list := &corev1.ConfigMapList{}
		for _, name := range slices.Sorted(maps.Keys(s.objects)) {
			list.Items = append(list.Items, *s.objects[name].DeepCopy())
		}
		return true, list, nil
	case "create", "update":
		cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		if _, ok := s.objects[cm.Name]; ok != (a.GetVerb() == "update") {
			if ok {
				return true, nil, apierrors.NewAlreadyExists(corev1.Resource("configmaps"), cm.Name)
			}
			return true, nil, apierrors.NewNotFound(corev1.Resource("configmaps"), cm.Name)
		}
		return s.store(cm)
	}
	return false, nil, nil
}

// store keeps cm, at a new resourceVersion.
func (s *configMapServer) store(cm *corev1.ConfigMap) (bool, runtime.Object, error) {
	cm.Namespace, cm.ResourceVersion = "ops", strconv.FormatInt(lastResourceVersion.Add(1), 10)
	s.objects[cm.Name] = cm
	return true, cm.DeepCopy(), nil
}

// mergePatch applies to cm a JSON merge patch of the shape
// DirectoryReconciler sends, checking the resourceVersion it names.
func mergePatch(t testing.TB, cm *corev1.ConfigMap, patch []byte) (*corev1.ConfigMap, error) {
	var p struct {
		Metadata struct {
			ResourceVersion *string            `json:"resourceVersion"`
			Labels          map[string]*string `json:"labels"`
			Annotations     map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Data map[string]*string `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Errorf("a patch the test server does not know: %s: %v", patch, err)
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if rv := p.Metadata.ResourceVersion; rv != nil && *rv != cm.ResourceVersion {
		return nil, apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, errors.New("the object has been modified"))
	}
	merge := func(m map[string]string, patch map[string]*string) map[string]string {
		if m == nil && len(patch) > 0 {
			m = map[string]string{}
		}
		for k, v := range patch {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	cm.Labels = merge(cm.Labels, p.Metadata.Labels)
	cm.Annotations = merge(cm.Annotations, p.Metadata.Annotations)
	cm.Data = merge(cm.Data, p.Data)
	return cm, nil
}

// trackedDirectory is a fakeDirectory on a versioned clientset whose
// reconciler is connected to its events, as NewDirectoryController
// connects it: the test calls the handlers as the informers would.
type trackedDirectory struct {
	*fakeDirectory
	entries, parts controller.Handler
	uids           int // WebApps made so far, for new uids
}

func newTrackedDirectory(t testing.TB, entries map[string]string) *trackedDirectory {
	t.Helper()
	f := newFakeDirectory(t, entries)
	versioned(t, f.kube)
	d := &trackedDirectory{fakeDirectory: f}
	d.entries, d.parts = f.r.track()
	return d
}

// sync brings the cache up to date with the API server as handroll's does
// for the operator's namespace: our labelled ConfigMaps only.
func (d *trackedDirectory) sync(t testing.TB) {
	t.Helper()
	list, err := d.kube.CoreV1().ConfigMaps("ops").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	for i := range list.Items {
		if cm := &list.Items[i]; cm.Labels[LabelManagedBy] == ManagedBy {
			objs = append(objs, cm)
		}
	}
	if err := d.configMaps.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

// discard is a Queue: the tests call Reconcile themselves.
type discard struct{}

func (discard) Add(controller.Request) {}

func (d *trackedDirectory) addWebApp(t testing.TB, ns, name string, port int32) *handrollv1.WebApp {
	t.Helper()
	d.uids++
	w := directoryWebApp(ns, name, port)
	w.UID = types.UID(fmt.Sprintf("%s/%s/%d", ns, name, d.uids))
	if err := d.webapps.Add(w); err != nil {
		t.Fatal(err)
	}
	d.entries.Create(context.Background(), w, discard{})
	return w
}

func (d *trackedDirectory) addService(t testing.TB, svc *corev1.Service) {
	t.Helper()
	compact, err := handrollcache.CompactChild(svc)
	if err != nil {
		t.Fatal(err)
	}
	old, exists, _ := d.services.Get(compact)
	if err := d.services.Add(compact); err != nil {
		t.Fatal(err)
	}
	if exists {
		d.entries.Update(context.Background(), old.(metav1.Object), svc, discard{})
	} else {
		d.entries.Create(context.Background(), svc, discard{})
	}
}

// writeNow reconciles and fails the test on an error.
func (d *trackedDirectory) writeNow(t testing.TB) []string {
	t.Helper()
	_, writes, err := d.reconcile(t)
	if err != nil {
		t.Fatal(err)
	}
	return writes
}

// settle reconciles, on a cache brought up to date after each write, until
// a reconcile writes nothing.
func (d *trackedDirectory) settle(t testing.TB) {
	t.Helper()
	for range 5 {
		d.sync(t)
		if len(d.writeNow(t)) == 0 {
			return
		}
	}
	t.Fatal("the directory does not settle")
}

// partState is what a reader and the next reconcile see of a part.
type partState struct {
	Labels, Annotations, Data map[string]string
}

func partStates(t testing.TB, kube *fake.Clientset) map[string]partState {
	t.Helper()
	list, err := kube.CoreV1().ConfigMaps("ops").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]partState{}
	for _, cm := range list.Items {
		out[cm.Name] = partState{cm.Labels, cm.Annotations, cm.Data}
	}
	return out
}

// fullRebuild is what a full rebuild writes from where d stands: the
// reconciler as it was before it had an index (untracked), on a copy of
// d's API server and of d's cache, reading the same WebApps and Services.
func (d *trackedDirectory) fullRebuild(t testing.TB) (map[string]partState, controller.Result, error) {
	t.Helper()
	list, err := d.kube.CoreV1().ConfigMaps("ops").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset()
	versioned(t, kube, slices.Collect(func(yield func(*corev1.ConfigMap) bool) {
		for i := range list.Items {
			if !yield(&list.Items[i]) {
				return
			}
		}
	})...)
	cached := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, obj := range d.configMaps.List() {
		if err := cached.Add(obj.(*corev1.ConfigMap).DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	full := &DirectoryReconciler{
		WebApps:    handrolllisters.NewWebAppLister(d.webapps),
		Services:   handrollcache.NewServiceMeta(d.services),
		ConfigMaps: corelisters.NewConfigMapLister(cached),
		Kube:       kube,
		Namespace:  "ops",
		Namespaces: d.r.Namespaces,
	}
	res, err := full.Reconcile(context.Background(), controller.Request{Namespace: "ops", Name: DirectoryName})
	return partStates(t, kube), res, err
}

// TestIncrementalDirectoryEqualsFullRebuild: whatever happens to the
// WebApps, their Services and the parts themselves (edits by another
// writer, seen by the cache or not yet, resyncs, refused writes), a
// reconcile of the keys events named writes exactly what a full rebuild
// from the same directory, cache and WebApps would: the rule of
// directoryIndex. The directory starts in one part and grows to two.
func TestIncrementalDirectoryEqualsFullRebuild(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			incrementalEqualsFullRebuild(t, rand.New(rand.NewPCG(seed, 45)))
		})
	}
}

func incrementalEqualsFullRebuild(t *testing.T, rng *rand.Rand) {
	w := newDirectoryWorld(t, rng)
	d := w.d
	lists, steps, compared, grew := d.lists.Load(), 200, 0, false
	for step := range steps {
		w.stir(t, step >= steps/3 && !grew)
		want, wantRes, wantErr := d.fullRebuild(t)
		res, _, err := d.reconcile(t)
		switch {
		case w.failing != "":
			// A refused write: no comparison, the next steps must still agree.
		case (err != nil) != (wantErr != nil) || res != wantRes:
			t.Fatalf("step %d: the incremental reconcile returned %v, %v; the full rebuild %v, %v", step, res, err, wantRes, wantErr)
		default:
			compared++
			if diff := cmp.Diff(want, partStates(t, d.kube)); diff != "" {
				t.Fatalf("step %d: the incremental reconcile wrote other than the full rebuild (-full +incremental):\n%s", step, diff)
			}
		}
		w.failing = ""
		d.checkIndex(t)
		d.sync(t)
		grew = grew || partsOf(t, d) == 2
	}
	d.settle(t)
	w.checkReadable(t)
	if !grew {
		t.Errorf("P never grew to 2")
	}
	full := d.lists.Load() - lists
	t.Logf("%d steps, %d compared, %d of them full rebuilds, %d WebApps", steps, compared, full, len(d.webapps.List()))
	if full > int64(steps)/3 {
		t.Errorf("%d full rebuilds in %d reconciles: the incremental path was hardly taken", full, steps)
	}
}

// newDirectoryWorld is a directory of 940 entries, one part close to two,
// of two namespaces the reconciler keeps beside one it does not.
func newDirectoryWorld(t *testing.T, rng *rand.Rand) *directoryWorld {
	mine := []string{label63("tenant", 1), label63("tenant", 2)}
	d := newTrackedDirectory(t, nil)
	d.r.Namespaces = mine
	w := &directoryWorld{d: d, rng: rng, namespaces: append(slices.Clone(mine), "elsewhere")}
	for i := range 940 {
		w.serve(t, d.addWebApp(t, mine[i%2], label63("storefront", i), 8080))
	}
	d.settle(t)
	if p := partsOf(t, d); p != 1 {
		t.Fatalf("P %d at the start, want 1", p)
	}
	d.kube.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var name string
		switch a := a.(type) {
		case k8stesting.PatchAction:
			name = a.GetName()
		case k8stesting.CreateAction:
			name = a.GetObject().(metav1.Object).GetName()
		}
		if w.failing != "" && name == w.failing {
			return true, nil, apierrors.NewInternalError(errors.New("refused"))
		}
		return false, nil, nil
	})
	return w
}

// stir makes the changes of one step: a few to the WebApps and Services
// (and, with grow, four more entries of the reconciler's), now and then
// another writer's edit of a part, a resync, a write to be refused.
func (w *directoryWorld) stir(t *testing.T, grow bool) {
	d := w.d
	for range 1 + w.rng.IntN(4) {
		w.change(t)
	}
	for range 4 * btoi(grow) {
		w.made++
		w.serve(t, d.addWebApp(t, w.namespaces[w.made%2], label63("shop", w.made), 8080))
	}
	if w.rng.IntN(8) == 0 {
		w.editPart(t, w.rng.IntN(3) > 0) // most seen by the cache, some not yet
	}
	if w.rng.IntN(15) == 0 {
		for _, obj := range d.configMaps.List() {
			d.parts.Update(context.Background(), obj.(metav1.Object), obj.(metav1.Object), discard{}) // a resync
		}
	}
	if w.rng.IntN(12) == 0 {
		w.failing = DirectoryPartName(w.rng.IntN(partsOf(t, d)))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkIndex checks the index's own accounts: each part's home size is
// that of the part it holds.
func (d *trackedDirectory) checkIndex(t testing.TB) {
	t.Helper()
	x := &d.r.index
	if !x.valid {
		return
	}
	for i, p := range x.part {
		if want := homeSize(p.cm, i, x.parts); p.home != want {
			t.Fatalf("the index counts %d bytes at home in part %d, which holds %d", p.home, i, want)
		}
	}
}

func partsOf(t testing.TB, d *trackedDirectory) int {
	t.Helper()
	cm, err := d.kube.CoreV1().ConfigMaps("ops").Get(context.Background(), DirectoryName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 1 // deleted by another writer: the next reconcile makes it again
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := DirectoryParts(cm.Annotations)
	if err != nil {
		return 1 // as the reconciler takes it
	}
	return p
}

// directoryWorld makes random changes to a trackedDirectory's WebApps,
// Services and parts, each with the event its informer would deliver.
type directoryWorld struct {
	d          *trackedDirectory
	rng        *rand.Rand
	namespaces []string // the last one not the reconciler's
	made       int
	failing    string // the part whose writes are refused
}

func (w *directoryWorld) serve(t testing.TB, app *handrollv1.WebApp) {
	t.Helper()
	w.d.addService(t, servedService(app))
}

func (w *directoryWorld) pick() *handrollv1.WebApp {
	all := w.d.webapps.List()
	return all[w.rng.IntN(len(all))].(*handrollv1.WebApp)
}

// change makes one change of a WebApp or of a Service, new WebApps
// (and so the directory's size) most often.
func (w *directoryWorld) change(t testing.TB) {
	t.Helper()
	d, ctx := w.d, context.Background()
	switch op := w.rng.IntN(10); {
	case op < 3: // a WebApp, served at once or later
		w.made++
		app := d.addWebApp(t, w.namespaces[w.rng.IntN(len(w.namespaces))], label63("shop", w.made), int32(8000+w.rng.IntN(3)))
		if op < 2 {
			w.serve(t, app)
		}
	case op == 3: // served, or served again after its Service went
		w.serve(t, w.pick())
	case op < 6: // a new port
		old := w.pick()
		app := old.DeepCopy()
		app.Generation++
		app.Spec.Service = &handrollv1.WebAppService{Port: ptr.To(int32(9000 + w.rng.IntN(100)))}
		update(t, d.webapps, app)
		d.entries.Update(ctx, old, app, discard{})
	case op == 6: // its deletion starts
		old := w.pick()
		app := old.DeepCopy()
		app.DeletionTimestamp = &metav1.Time{}
		update(t, d.webapps, app)
		d.entries.Update(ctx, old, app, discard{})
	case op == 7: // gone
		app := w.pick()
		if err := d.webapps.Delete(app); err != nil {
			t.Fatal(err)
		}
		d.entries.Delete(ctx, app, discard{})
	case op == 8: // its Service gone
		app := w.pick()
		if obj, ok, _ := d.services.GetByKey(app.Namespace + "/" + app.Name); ok {
			if err := d.services.Delete(obj); err != nil {
				t.Fatal(err)
			}
			d.entries.Delete(ctx, obj.(metav1.Object), discard{})
		}
	default: // its Service's name taken by another controller's
		app := w.pick()
		svc := servedService(app)
		svc.OwnerReferences[0].UID = "someone-else"
		w.d.addService(t, svc)
	}
}

func update(t testing.TB, indexer cache.Indexer, obj any) {
	t.Helper()
	if err := indexer.Update(obj); err != nil {
		t.Fatal(err)
	}
}

// editPart is another writer's edit of a random part: an entry added
// (ours or another process's, in its part or not), changed or removed, the
// part deleted, its labels or part 0's annotation changed. seen: the cache
// catches up, with the event; otherwise the reconcile's write meets it.
func (w *directoryWorld) editPart(t testing.TB, seen bool) {
	t.Helper()
	d, ctx := w.d, context.Background()
	configMaps := d.kube.CoreV1().ConfigMaps("ops")
	name := DirectoryPartName(w.rng.IntN(partsOf(t, d)))
	cm, err := configMaps.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(cm.Data))
	some := func() string { return keys[w.rng.IntN(len(keys))] }
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	switch op := w.rng.IntN(9); {
	case op == 0:
		if err := configMaps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cm = nil
	case op == 1:
		cm.Labels = nil
	case op == 2 && name == DirectoryName:
		cm.Annotations = map[string]string{DirectoryPartsAnnotation: "3"}
	case op < 5 && len(keys) > 0:
		cm.Data[some()] = "http://edited"
	case op < 7 && len(keys) > 0:
		delete(cm.Data, some())
	case op == 7:
		cm.Data["elsewhere."+label63("theirs", w.rng.IntN(1000))] = "http://theirs"
	default:
		app := w.pick()
		cm.Data[DirectoryKey(app.Namespace, app.Name)] = "http://misplaced"
	}
	if cm != nil {
		if _, err := configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !seen {
		return
	}
	old, _, _ := d.configMaps.GetByKey("ops/" + name)
	d.sync(t)
	switch now, exists, _ := d.configMaps.GetByKey("ops/" + name); {
	case !exists && old != nil:
		d.parts.Delete(ctx, old.(metav1.Object), discard{})
	case exists && old != nil:
		d.parts.Update(ctx, old.(metav1.Object), now.(metav1.Object), discard{})
	case exists:
		d.parts.Create(ctx, now.(metav1.Object), discard{})
	}
}

// checkReadable checks that a reader finds the entry of every WebApp of
// the reconciler's namespaces that should have one, and no other: the
// other namespaces' entries are another process's.
func (w *directoryWorld) checkReadable(t testing.TB) {
	t.Helper()
	var webapps []*handrollv1.WebApp
	for _, obj := range w.d.webapps.List() {
		webapps = append(webapps, obj.(*handrollv1.WebApp))
	}
	desired, manages := DesiredDirectory(webapps, w.d.r.serviceOf), ManagedDirectoryKeys(w.d.r.Namespaces)
	for _, app := range webapps {
		k := DirectoryKey(app.Namespace, app.Name)
		if !manages(k) {
			continue
		}
		want, ok := desired[k]
		if url, found, err := LookupDirectory(context.Background(), w.d.kube, "ops", app.Namespace, app.Name); err != nil || found != ok || url != want {
			t.Errorf("LookupDirectory %s: %q, %v, %v; want %q, %v", k, url, found, err, want, ok)
		}
	}
}

// TestIncrementalDirectoryReconcileOfOneKeyIsConstantWork: once 3000
// entries have converged, a reconcile after one WebApp's event lists
// nothing and computes that one entry, whatever the directory holds.
func TestIncrementalDirectoryReconcileOfOneKeyIsConstantWork(t *testing.T) {
	d := newTrackedDirectory(t, realisticEntries(3000))
	d.settle(t)
	if d.lists.Load() < 2 {
		t.Fatalf("%d lists to converge: the first reconciles are full rebuilds", d.lists.Load())
	}
	parts := partsOf(t, d)
	lists, gets := d.lists.Load(), d.gets.Load()
	if writes := d.writeNow(t); len(writes) != 0 || d.lists.Load() != lists || d.gets.Load() != gets {
		t.Fatalf("nothing named: writes %v, %d lists, %d gets", writes, d.lists.Load()-lists, d.gets.Load()-gets)
	}

	app := d.addWebApp(t, label63("tenant", 0), "one-more", 8080)
	d.addService(t, servedService(app)) // the same key, named twice
	writes := d.writeNow(t)
	key := DirectoryKey(app.Namespace, app.Name)
	if want := []string{"patch " + DirectoryPartName(DirectoryPart(key, parts))}; !slices.Equal(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
	if n := d.lists.Load() - lists; n != 0 {
		t.Errorf("%d WebApp lists for one key, want 0", n)
	}
	if n := d.gets.Load() - gets; n != 1 {
		t.Errorf("%d entries computed for one key, want 1", n)
	}
	if url, found, err := LookupDirectory(context.Background(), d.kube, "ops", app.Namespace, app.Name); err != nil || !found || url != URL(app) {
		t.Errorf("LookupDirectory: %q, %v, %v", url, found, err)
	}
}

// TestIncrementalDirectoryWritesAheadOfItsCache: a cache that has not yet
// seen the reconciler's last write of a part holds back no write: the next
// one names the version the last one returned, and the API server accepts
// it; once the cache shows that version, the index holds the cache's copy.
func TestIncrementalDirectoryWritesAheadOfItsCache(t *testing.T) {
	d := newTrackedDirectory(t, map[string]string{"a.one": "http://one.a.svc:8080"})
	d.settle(t)
	for _, name := range []string{"two", "three"} {
		d.serve(t, d.addWebApp(t, "a", name, 8080))
		if writes := d.writeNow(t); !slices.Equal(writes, []string{"patch " + DirectoryName}) {
			t.Fatalf("%s: writes %v", name, writes)
		}
	}
	cached, _, _ := d.configMaps.GetByKey("ops/" + DirectoryName)
	if len(cached.(*corev1.ConfigMap).Data) != 1 {
		t.Fatalf("the cache was to stay behind")
	}
	if data := partStates(t, d.kube)[DirectoryName].Data; len(data) != 3 {
		t.Errorf("the directory holds %v", data)
	}
	d.sync(t)
	lists := d.lists.Load()
	if writes := d.writeNow(t); len(writes) != 0 || d.lists.Load() != lists {
		t.Errorf("caught up: writes %v, %d lists", writes, d.lists.Load()-lists)
	}
	now, _, _ := d.configMaps.GetByKey("ops/" + DirectoryName)
	if d.r.index.part[0].cm != now {
		t.Errorf("the index holds a copy of its own, not the cache's")
	}
}

func (d *trackedDirectory) serve(t testing.TB, app *handrollv1.WebApp) *handrollv1.WebApp {
	t.Helper()
	d.addService(t, servedService(app))
	return app
}

// TestIncrementalDirectoryKeepsWhatFailed: a write that fails loses no
// key: the next reconcile rebuilds the whole directory and writes it; a
// write refused for a conflict makes its keys dirty again, and the next
// reconcile, on the newer version, writes them without a rebuild.
func TestIncrementalDirectoryKeepsWhatFailed(t *testing.T) {
	d := newTrackedDirectory(t, map[string]string{"a.one": "http://one.a.svc:8080"})
	d.r.Namespaces = []string{"a"}
	d.settle(t)
	fail := true
	d.kube.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			fail = false
			return true, nil, apierrors.NewInternalError(errors.New("refused"))
		}
		return false, nil, nil
	})
	d.serve(t, d.addWebApp(t, "a", "two", 8080))
	if _, _, err := d.reconcile(t); err == nil {
		t.Fatal("a refused write, yet no error")
	}
	lists := d.lists.Load()
	if writes := d.writeNow(t); len(writes) != 1 || d.lists.Load() != lists+1 {
		t.Errorf("after an error: writes %v, %d lists; want the rebuild's one write", writes, d.lists.Load()-lists)
	}
	d.settle(t)

	// Another writer's edit the cache has not seen: the write conflicts.
	cm, err := d.kube.CoreV1().ConfigMaps("ops").Get(context.Background(), DirectoryName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["elsewhere.theirs"] = "http://theirs"
	if _, err := d.kube.CoreV1().ConfigMaps("ops").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.serve(t, d.addWebApp(t, "a", "three", 8080))
	if res, _, err := d.reconcile(t); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a conflict: %v, %v; want a requeue", res, err)
	}
	d.sync(t)
	lists = d.lists.Load()
	if writes := d.writeNow(t); len(writes) != 1 || d.lists.Load() != lists {
		t.Errorf("on the newer version: writes %v, %d lists; want one write, no rebuild", writes, d.lists.Load()-lists)
	}
	if data := partStates(t, d.kube)[DirectoryName].Data; len(data) != 4 || !strings.HasPrefix(data["a.three"], "http://three.") {
		t.Errorf("the directory holds %v", data)
	}
}

// BenchmarkDirectoryIncremental3000: a reconcile after one WebApp's event,
// in a directory of 3000 with nothing to write: what
// BenchmarkDirectoryRebuild3000 does for every WebApp.
func BenchmarkDirectoryIncremental3000(b *testing.B) {
	d := newTrackedDirectory(b, realisticEntries(3000))
	d.settle(b)
	app := d.webapps.List()[0].(*handrollv1.WebApp)
	b.ReportAllocs()
	for b.Loop() {
		d.entries.Update(context.Background(), app, app, discard{})
		if writes := d.writeNow(b); len(writes) != 0 {
			b.Fatalf("writes %v", writes)
		}
	}
}

// TestIncrementalDirectoryEventsDuringReconciles: events that arrive on
// another goroutine while reconciles run, as informers deliver them, are
// never lost between a reconcile's taking the keys and its reading the
// caches: once they stop, the directory settles to every entry.
func TestIncrementalDirectoryEventsDuringReconciles(t *testing.T) {
	d := newTrackedDirectory(t, map[string]string{"a.first": "http://first.a.svc:8080"})
	d.settle(t)
	done := make(chan struct{})
	var apps []*handrollv1.WebApp
	go func() {
		defer close(done)
		for i := range 300 {
			app := directoryWebApp("a", fmt.Sprint("app-", i), 8080)
			if err := d.webapps.Add(app); err != nil {
				t.Error(err)
				return
			}
			d.entries.Create(context.Background(), app, discard{})
			svc, err := handrollcache.CompactChild(servedService(app))
			if err == nil {
				err = d.services.Add(svc)
			}
			if err != nil {
				t.Error(err)
				return
			}
			d.entries.Create(context.Background(), svc.(metav1.Object), discard{})
			apps = append(apps, app)
			goruntime.Gosched()
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		d.writeNow(t)
		d.sync(t)
	}
	d.settle(t)
	for _, app := range apps {
		if url, found, err := LookupDirectory(context.Background(), d.kube, "ops", app.Namespace, app.Name); err != nil || !found || url != URL(app) {
			t.Fatalf("LookupDirectory %s: %q, %v, %v", app.Name, url, found, err)
		}
	}
}
