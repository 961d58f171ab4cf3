package webapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
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

func directoryWebApp(ns, name string, port int32) *handrollv1.WebApp {
	w := &handrollv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
	if port != 0 {
		w.Spec.Service = &handrollv1.WebAppService{Port: ptr.To(port)}
	}
	return w
}

func serviceOwnedBy(w *handrollv1.WebApp) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: w.Namespace, Name: w.Name,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "handroll.dev/v1", Kind: "WebApp", Name: w.Name, UID: w.UID, Controller: ptr.To(true),
		}},
	}}
}

// TestDesiredDirectory: an entry for every WebApp that is not being deleted
// and whose Service it controls; none for a WebApp without a Service yet,
// with a foreign Service, with a Service of an earlier WebApp of the same
// name, or being deleted.
func TestDesiredDirectory(t *testing.T) {
	listed := directoryWebApp("a", "listed", 0)
	port := directoryWebApp("b", "port", 8000)
	noService := directoryWebApp("a", "no-service", 0)
	foreign := directoryWebApp("a", "foreign", 0)
	recreated := directoryWebApp("a", "recreated", 0)
	deleting := directoryWebApp("a", "deleting", 0)
	deleting.DeletionTimestamp = &metav1.Time{}

	services := map[string]*corev1.Service{}
	for _, w := range []*handrollv1.WebApp{listed, port, deleting} {
		services[w.Namespace+"/"+w.Name] = serviceOwnedBy(w)
	}
	services["a/foreign"] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "foreign"}}
	older := recreated.DeepCopy()
	older.UID = "an-earlier-one"
	services["a/recreated"] = serviceOwnedBy(older)

	got := DesiredDirectory([]*handrollv1.WebApp{listed, port, noService, foreign, recreated, deleting},
		func(ns, name string) metav1.Object {
			if svc, ok := services[ns+"/"+name]; ok {
				return svc
			}
			return nil
		})
	want := map[string]string{
		"a.listed": "http://listed.a.svc:80",
		"b.port":   "http://port.b.svc:8000",
	}
	if !maps.Equal(got, want) {
		t.Errorf("DesiredDirectory:\n got %v\nwant %v", got, want)
	}
}

// TestDirectoryChanges: only what differs is written, and a key that
// another process's namespaces hold is never removed.
func TestDirectoryChanges(t *testing.T) {
	current := map[string]string{
		"a.same":    "http://same.a.svc:80",
		"a.changed": "http://changed.a.svc:80",
		"a.stale":   "http://stale.a.svc:80",
		"z.theirs":  "http://theirs.z.svc:80",
	}
	desired := map[string]string{
		"a.same":    "http://same.a.svc:80",
		"a.changed": "http://changed.a.svc:8080",
		"b.new":     "http://new.b.svc:80",
	}
	got := DirectoryChanges(current, desired, ManagedDirectoryKeys([]string{"a", "b"}))
	want := map[string]*string{
		"a.changed": ptr.To("http://changed.a.svc:8080"),
		"a.stale":   nil,
		"b.new":     ptr.To("http://new.b.svc:80"),
	}
	if !maps.EqualFunc(got, want, func(x, y *string) bool { return (x == nil && y == nil) || (x != nil && y != nil && *x == *y) }) {
		t.Errorf("DirectoryChanges: got %v, want %v", render(got), render(want))
	}
	if got := DirectoryChanges(desired, desired, ManagedDirectoryKeys(nil)); len(got) != 0 {
		t.Errorf("no difference, yet changes %v", render(got))
	}
	// Watching every namespace, every key is ours.
	if got := DirectoryChanges(current, nil, ManagedDirectoryKeys([]string{""})); len(got) != len(current) {
		t.Errorf("watching every namespace: changes %v, want every key removed", render(got))
	}
}

func TestManagedDirectoryKeys(t *testing.T) {
	some := ManagedDirectoryKeys([]string{"a", "b-c"})
	for key, want := range map[string]bool{"a.x": true, "b-c.y": true, "b.y": false, "ab.x": false, "a": false, "": false} {
		if got := some(key); got != want {
			t.Errorf("watching a and b-c: %q managed %v, want %v", key, got, want)
		}
	}
	for _, all := range [][]string{nil, {}, {""}} {
		if !ManagedDirectoryKeys(all)("anything.at-all") {
			t.Errorf("watching %q: a key is not managed", all)
		}
	}
}

func render(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v == nil {
			out[k] = "<remove>"
		} else {
			out[k] = *v
		}
	}
	return out
}

// TestLegacyFinalizerPatch: the patch removes the legacy finalizer at its
// index, guarded by tests of that entry and of the UID; nil without it.
func TestLegacyFinalizerPatch(t *testing.T) {
	w := directoryWebApp("a", "w", 0)
	if p := LegacyFinalizerPatch(w); p != nil {
		t.Errorf("no finalizer, yet a patch %s", p)
	}
	w.Finalizers = []string{"example.com/other", LegacyFinalizerDirectory}
	want := `[{"op":"test","path":"/metadata/uid","value":"a/w"},` +
		`{"op":"test","path":"/metadata/finalizers/1","value":"handroll.dev/directory"},` +
		`{"op":"remove","path":"/metadata/finalizers/1"}]`
	if got := string(LegacyFinalizerPatch(w)); got != want {
		t.Errorf("patch\n got %s\nwant %s", got, want)
	}
}

// configMapLimit is what the API server lets a ConfigMap's data hold.
const configMapLimit = 1 << 20

func TestDirectoryPartIsFNV1a(t *testing.T) {
	for _, key := range []string{"", "a.b", "default.shop", "team-0042.storefront", strings.Repeat("x", 127)} {
		h := fnv.New32a()
		h.Write([]byte(key))
		sum := h.Sum32()
		if got := DirectoryPart(key, 1); got != 0 {
			t.Errorf("DirectoryPart(%q, 1) = %d", key, got)
		}
		for parts := 2; parts <= 1<<16; parts *= 2 {
			got := DirectoryPart(key, parts)
			if want := int(sum % uint32(parts)); got != want {
				t.Errorf("DirectoryPart(%q, %d) = %d, want fnv1a32 %% P = %d", key, parts, got, want)
			}
			// Doubling P keeps a key in its part or moves it past the old P:
			// what lets a growing directory keep every entry readable.
			if half := DirectoryPart(key, parts/2); got != half && got != half+parts/2 {
				t.Errorf("%q: part %d of %d, but %d of %d", key, got, parts, half, parts/2)
			}
		}
	}
}

func TestDirectoryPartName(t *testing.T) {
	for _, i := range []int{0, 1, 2, 9, 10, 127, 4096} {
		name := DirectoryPartName(i)
		if got, ok := DirectoryPartIndex(name); !ok || got != i {
			t.Errorf("DirectoryPartIndex(%q) = %d, %v; want %d", name, got, ok, i)
		}
	}
	if DirectoryPartName(0) != "webapp-directory" || DirectoryPartName(3) != "webapp-directory-3" {
		t.Errorf("names %q, %q", DirectoryPartName(0), DirectoryPartName(3))
	}
	for _, name := range []string{"webapp-directory-", "webapp-directory-0", "webapp-directory-01", "webapp-directory-x",
		"webapp-directory-1x", "webapp-directory-+1", "webapp-directory-99999999999999999999", "shop-config", "webapp-directoryx"} {
		if i, ok := DirectoryPartIndex(name); ok {
			t.Errorf("DirectoryPartIndex(%q) = %d: not a part's name", name, i)
		}
	}
}

func TestDirectoryParts(t *testing.T) {
	for value, want := range map[string]int{"1": 1, "2": 2, "128": 128} {
		if got, err := DirectoryParts(map[string]string{DirectoryPartsAnnotation: value}); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", value, got, err, want)
		}
	}
	if got, err := DirectoryParts(nil); err != nil || got != 1 {
		t.Errorf("no annotation: %d, %v; want 1", got, err)
	}
	for _, value := range []string{"", "0", "-2", "3", "12", "x", " 2"} {
		if got, err := DirectoryParts(map[string]string{DirectoryPartsAnnotation: value}); err == nil {
			t.Errorf("%q: %d, want an error", value, got)
		}
	}
}

func TestDirectoryPartsFor(t *testing.T) {
	for _, c := range []struct{ bytes, current, want int }{
		{0, 0, 1}, {0, 1, 1}, {DirectoryPartBytes, 1, 1}, {DirectoryPartBytes + 1, 1, 2},
		{4 * DirectoryPartBytes, 1, 4}, {4*DirectoryPartBytes + 1, 0, 8},
		// Never fewer than now.
		{0, 8, 8}, {DirectoryPartBytes + 1, 8, 8}, {9 * DirectoryPartBytes, 8, 16},
	} {
		if got := DirectoryPartsFor(c.bytes, c.current); got != c.want {
			t.Errorf("DirectoryPartsFor(%d, %d) = %d, want %d", c.bytes, c.current, got, c.want)
		}
	}
}

// dirState is a directory as the API server holds it: P as part 0 says it
// (0: no part 0), and each part's entries.
type dirState struct {
	parts int
	data  map[int]map[string]string
}

func newDirState() *dirState { return &dirState{data: map[int]map[string]string{}} }

// step plans from s, as a reconciler whose cache is up to date, and writes
// the plan as DirectoryReconciler does: the other parts, then part 0 (the
// new P with it) only if they all went through. fail tells a write that is
// refused.
func (s *dirState) step(t *testing.T, desired map[string]string, manages func(string) bool, fail func(i int) bool) DirectoryPlan {
	t.Helper()
	plan := PlanDirectory(s.parts, s.clone().data, desired, manages)
	failed := false
	for i := 1; i < len(plan.Changes); i++ {
		if plan.Changes[i] == nil {
			continue
		}
		if fail(i) {
			failed = true
			continue
		}
		s.patch(i, plan.Changes[i])
	}
	if plan.Parts != s.parts && failed {
		return plan
	}
	_, exists := s.data[0]
	if !exists && plan.Parts <= 1 && !hasValues(plan.Changes[0]) {
		return plan // nothing to create
	}
	if (plan.Changes[0] != nil || plan.Parts != s.parts) && !fail(0) {
		s.patch(0, plan.Changes[0])
		s.parts = plan.Parts
	}
	return plan
}

func hasValues(changes map[string]*string) bool {
	for _, v := range changes {
		if v != nil {
			return true
		}
	}
	return false
}

func (s *dirState) patch(i int, changes map[string]*string) {
	if s.data[i] == nil {
		s.data[i] = map[string]string{}
	}
	for k, v := range changes {
		if v == nil {
			delete(s.data[i], k)
		} else {
			s.data[i][k] = *v
		}
	}
}

func (s *dirState) clone() *dirState {
	c := &dirState{parts: s.parts, data: map[int]map[string]string{}}
	for i, d := range s.data {
		c.data[i] = maps.Clone(d)
	}
	return c
}

// lookup reads as LookupDirectory does.
func (s *dirState) lookup(key string) (string, bool) {
	if _, ok := s.data[0]; !ok {
		return "", false
	}
	v, ok := s.data[DirectoryPart(key, s.parts)][key]
	return v, ok
}

// converge steps until a step writes nothing, checking after each that
// every entry readable before, and still desired or not ours, is readable
// after; it returns the number of steps that wrote.
func (s *dirState) converge(t *testing.T, desired map[string]string, manages func(string) bool) int {
	t.Helper()
	for steps := 0; steps < 10; steps++ {
		before := s.clone()
		plan := s.step(t, desired, manages, func(int) bool { return false })
		if plan.Parts == before.parts && !slices.ContainsFunc(plan.Changes, func(c map[string]*string) bool { return c != nil }) {
			return steps
		}
		s.checkReadable(t, before, desired, manages)
		s.checkSizes(t)
	}
	t.Fatalf("no convergence in 10 steps")
	return 0
}

func (s *dirState) checkReadable(t *testing.T, before *dirState, desired map[string]string, manages func(string) bool) {
	t.Helper()
	for i, data := range before.data {
		for k := range data {
			if _, readable := before.lookup(k); !readable || DirectoryPart(k, before.parts) != i {
				continue
			}
			if _, stays := desired[k]; !stays && manages(k) {
				continue
			}
			if _, ok := s.lookup(k); !ok {
				t.Fatalf("%s was readable (P %d) and is no longer (P %d)", k, before.parts, s.parts)
			}
		}
	}
}

func (s *dirState) checkSizes(t *testing.T) {
	t.Helper()
	for i, data := range s.data {
		if n := dataSize(data); n >= configMapLimit {
			t.Fatalf("part %d holds %d bytes, over the ConfigMap limit", i, n)
		}
	}
}

// checkExact checks that every part holds exactly the entries of want that
// hash to it, and that P says as many parts as it takes.
func (s *dirState) checkExact(t *testing.T, want map[string]string, parts int) {
	t.Helper()
	if s.parts != parts {
		t.Errorf("P = %d, want %d", s.parts, parts)
	}
	for i, data := range s.data {
		for k, v := range data {
			if DirectoryPart(k, s.parts) != i {
				t.Errorf("part %d holds %s, which belongs in part %d", i, k, DirectoryPart(k, s.parts))
			} else if want[k] != v {
				t.Errorf("part %d: %s = %q, want %q", i, k, v, want[k])
			}
		}
	}
	for k, v := range want {
		if got, ok := s.lookup(k); !ok || got != v {
			t.Errorf("lookup %s = %q, %v; want %q", k, got, ok, v)
		}
	}
}

func dataSize(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

// label63 is a DNS label of 63 characters, the longest a namespace or a
// WebApp name can be.
func label63(prefix string, i int) string {
	s := fmt.Sprintf("%s-%06d-", prefix, i)
	return s + strings.Repeat("x", 63-len(s))
}

// realisticEntries are n entries of the longest names (63 characters for
// the namespace and for the WebApp) over namespaces of 100 WebApps each.
func realisticEntries(n int) map[string]string {
	entries := make(map[string]string, n)
	for i := range n {
		ns, name := label63("tenant", i/100), label63("storefront", i)
		entries[DirectoryKey(ns, name)] = fmt.Sprintf("http://%s.%s.svc:%d", name, ns, 8080)
	}
	return entries
}

// TestDirectoryHolds100000WebApps: the longest names, 100,000 of them, in
// parts that each stay well within the ConfigMap limit, every entry found.
func TestDirectoryHolds100000WebApps(t *testing.T) {
	entries := realisticEntries(100_000)
	s := newDirState()
	if steps := s.converge(t, entries, ManagedDirectoryKeys(nil)); steps != 1 {
		t.Errorf("%d steps from nothing, want 1", steps)
	}
	total := dataSize(entries)
	want := DirectoryPartsFor(total, 1)
	if want != 128 {
		t.Errorf("%d bytes: P %d, expected 128", total, want)
	}
	s.checkExact(t, entries, want)
	largest := 0
	for _, data := range s.data {
		largest = max(largest, dataSize(data))
	}
	t.Logf("%d entries, %d bytes, %d parts, the largest %d bytes (average %d)", len(entries), total, s.parts, largest, total/s.parts)
	if largest > configMapLimit/2 {
		t.Errorf("the largest part holds %d bytes: too close to the limit", largest)
	}
}

// TestDirectoryGrowsInOrder: a directory of one part, as the version
// before parts wrote it, grows as entries come: each step keeps every
// readable entry readable; the parts read gain no key until part 0 says
// the new P; entries leave the old parts only after. Refused writes at any
// point change none of that.
func TestDirectoryGrowsInOrder(t *testing.T) {
	all := realisticEntries(6000)
	keys := slices.Sorted(maps.Keys(all))
	old := map[string]string{}
	for _, k := range keys[:3000] {
		old[k] = all[k]
	}
	old["gone.long-ago"] = "http://long-ago.gone.svc:80"
	if dataSize(old) >= configMapLimit {
		t.Fatalf("the old directory would not fit: %d bytes", dataSize(old))
	}
	manages := ManagedDirectoryKeys(nil)
	for _, refused := range []func(step, part int) bool{
		func(int, int) bool { return false },
		func(step, part int) bool { return step == 0 && part == 3 },                    // a part of the copy
		func(step, part int) bool { return step == 1 && part == 0 },                    // part 0's new P
		func(step, part int) bool { return step <= 3 && (part+step)%3 == 0 },           // a bit of everything
		func(step, part int) bool { return step < 2 && DirectoryPart("k", 8) != part }, // all but one part
	} {
		s := newDirState()
		s.data[0] = maps.Clone(old)
		s.parts = 1
		final := DirectoryPartsFor(dataSize(all), 1)
		var sawNewP bool
		for step := 0; step < 20; step++ {
			before := s.clone()
			plan := s.step(t, all, manages, func(part int) bool { return refused(step, part) })
			s.checkReadable(t, before, all, manages)
			s.checkSizes(t)
			if before.parts < final {
				for i := range before.parts {
					for k := range s.data[i] {
						if _, was := before.data[i][k]; !was {
							t.Fatalf("step %d: part %d, read at P %d, gained %s while growing", step, i, before.parts, k)
						}
					}
				}
			}
			if s.parts > before.parts {
				sawNewP = true
				// Everything readable before is where the new P looks.
				for k := range before.data[0] {
					if _, ok := all[k]; ok && !hasKey(s.data[DirectoryPart(k, s.parts)], k) {
						t.Fatalf("step %d: P %d, but %s is not in its part yet", step, s.parts, k)
					}
				}
			}
			if plan.Parts == before.parts && !slices.ContainsFunc(plan.Changes, func(c map[string]*string) bool { return c != nil }) {
				break
			}
		}
		if !sawNewP {
			t.Errorf("P never grew")
		}
		s.checkExact(t, all, final)
	}
}

// TestDirectoryNeverShrinks: with most entries gone, P stays, and the rest
// stay where a reader looks.
func TestDirectoryNeverShrinks(t *testing.T) {
	all := realisticEntries(20_000)
	s := newDirState()
	s.converge(t, all, ManagedDirectoryKeys(nil))
	parts := s.parts
	if parts < 8 {
		t.Fatalf("P %d: the test needs more parts", parts)
	}
	few := map[string]string{}
	for k, v := range all {
		if len(few) == 10 {
			break
		}
		few[k] = v
	}
	s.converge(t, few, ManagedDirectoryKeys(nil))
	s.checkExact(t, few, parts)
}

// TestDirectorySharedByTwoProcesses: two processes, each with namespaces of
// its own (--namespaces), share one directory as it grows: neither removes
// the other's entries, both keep them readable, and they agree on P.
func TestDirectorySharedByTwoProcesses(t *testing.T) {
	all := realisticEntries(9000) // 90 namespaces
	var nsA, nsB []string
	for i := range 90 {
		if ns := label63("tenant", i); i%2 == 0 {
			nsA = append(nsA, ns)
		} else {
			nsB = append(nsB, ns)
		}
	}
	manA, manB := ManagedDirectoryKeys(nsA), ManagedDirectoryKeys(nsB)
	pick := func(manages func(string) bool, n int) map[string]string {
		out := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(all)) {
			if manages(k) && len(out) < n {
				out[k] = all[k]
			}
		}
		return out
	}
	a, b := pick(manA, 500), pick(manB, 2000)
	s := newDirState()
	run := func(rounds int) {
		t.Helper()
		for range rounds {
			before := s.clone()
			s.step(t, a, manA, func(int) bool { return false })
			s.checkReadable(t, before, a, manA)
			before = s.clone()
			s.step(t, b, manB, func(int) bool { return false })
			s.checkReadable(t, before, b, manB)
			s.checkSizes(t)
		}
	}
	run(3)
	small := s.parts
	a = pick(manA, 4500) // A's namespaces fill up: the directory grows
	run(6)
	both := maps.Clone(a)
	maps.Copy(both, b)
	parts := DirectoryPartsFor(dataSize(both), 1)
	if parts <= small {
		t.Fatalf("P %d, then %d: the test needs the directory to grow", small, parts)
	}
	s.checkExact(t, both, parts)
	// B's WebApps go: their entries go with them, A's stay.
	b = nil
	run(2)
	s.checkExact(t, a, parts)
}

// fakeDirectory is a DirectoryReconciler on a fake clientset, with its
// caches in indexers: the WebApps and Services given, and the ConfigMaps
// as sync last copied them from the clientset.
type fakeDirectory struct {
	r                 *DirectoryReconciler
	kube              *fake.Clientset
	webapps, services cache.Indexer
	configMaps        cache.Indexer
	lists             atomic.Int64 // WebApp lists: a reconcile that did the work
	gets              atomic.Int64 // WebApp gets: the entries computed one by one
}

func newFakeDirectory(t testing.TB, entries map[string]string, objects ...runtime.Object) *fakeDirectory {
	t.Helper()
	index := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	webapps, services := index(), index()
	for k := range entries {
		ns, name, _ := strings.Cut(k, ".")
		w := directoryWebApp(ns, name, 8080) // realisticEntries' port
		// As handroll's caches hold it.
		svc, err := handrollcache.CompactChild(servedService(w))
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(webapps.Add(w), services.Add(svc)); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeDirectory{kube: fake.NewClientset(objects...), webapps: webapps, services: services, configMaps: index()}
	f.r = &DirectoryReconciler{
		WebApps:    countingLister{handrolllisters.NewWebAppLister(webapps), &f.lists, &f.gets},
		Services:   handrollcache.NewServiceMeta(services),
		ConfigMaps: corelisters.NewConfigMapLister(f.configMaps),
		Kube:       f.kube,
		Namespace:  "ops",
	}
	f.sync(t)
	return f
}

// servedService is w's Service as the API server serves it, labels, ports
// and cluster IP set.
func servedService(w *handrollv1.WebApp) *corev1.Service {
	svc := serviceOwnedBy(w)
	svc.Labels = map[string]string{"app.kubernetes.io/managed-by": "handroll", "app.kubernetes.io/name": w.Name}
	svc.ResourceVersion, svc.Generation = "12345", 1
	svc.Spec = corev1.ServiceSpec{
		Selector:   map[string]string{"handroll.dev/webapp": w.Name},
		Ports:      []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		ClusterIP:  "10.0.12.34",
		ClusterIPs: []string{"10.0.12.34"},
		Type:       corev1.ServiceTypeClusterIP,
	}
	return svc
}

// BenchmarkDirectoryRebuild3000: a rebuild of the directory of 3000
// WebApps with nothing to write, their Services as handroll's caches hold
// them. While WebApps arrive it runs once per DefaultDirectoryWriteInterval.
func BenchmarkDirectoryRebuild3000(b *testing.B) {
	f := newFakeDirectory(b, realisticEntries(3000))
	if _, writes, err := f.reconcile(b); err != nil || len(writes) == 0 {
		b.Fatalf("the first reconcile: %v, %v", writes, err)
	}
	f.sync(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, writes, err := f.reconcile(b); err != nil || len(writes) != 0 {
			b.Fatalf("a reconcile of a directory up to date: %v, %v", writes, err)
		}
	}
}

type countingLister struct {
	handrolllisters.WebAppLister
	n, gets *atomic.Int64
}

func (l countingLister) List(sel labels.Selector) ([]*handrollv1.WebApp, error) {
	l.n.Add(1)
	return l.WebAppLister.List(sel)
}

func (l countingLister) WebApps(namespace string) handrolllisters.WebAppNamespaceLister {
	return countingNamespaceLister{l.WebAppLister.WebApps(namespace), l.gets}
}

type countingNamespaceLister struct {
	handrolllisters.WebAppNamespaceLister
	gets *atomic.Int64
}

func (l countingNamespaceLister) Get(name string) (*handrollv1.WebApp, error) {
	l.gets.Add(1)
	return l.WebAppNamespaceLister.Get(name)
}

// sync brings the ConfigMap cache up to date with the clientset.
func (f *fakeDirectory) sync(t testing.TB) {
	t.Helper()
	list, err := f.kube.CoreV1().ConfigMaps("ops").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]any, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	if err := f.configMaps.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}

// reconcile runs one Reconcile and returns the writes it sent, in order,
// as "verb name" with " parts=P" when it sets part 0's annotation.
func (f *fakeDirectory) reconcile(t testing.TB) (controller.Result, []string, error) {
	t.Helper()
	f.kube.ClearActions()
	res, err := f.r.Reconcile(context.Background(), controller.Request{Namespace: "ops", Name: DirectoryName})
	var writes []string
	for _, a := range f.kube.Actions() {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			cm := a.GetObject().(*corev1.ConfigMap)
			w := "create " + cm.Name
			if p, ok := cm.Annotations[DirectoryPartsAnnotation]; ok {
				w += " parts=" + p
			}
			writes = append(writes, w)
		case k8stesting.PatchAction:
			w := "patch " + a.GetName()
			var p struct {
				Metadata struct {
					Annotations map[string]*string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(a.GetPatch(), &p); err != nil {
				t.Fatal(err)
			}
			if v, ok := p.Metadata.Annotations[DirectoryPartsAnnotation]; ok && v != nil {
				w += " parts=" + *v
			}
			writes = append(writes, w)
		}
	}
	return res, writes, err
}

// TestDirectoryReconcilerWritesPartZeroLast: growing, the reconciler
// writes the other parts first and part 0's new P last, and not at all in
// a reconcile where another part's write failed.
func TestDirectoryReconcilerWritesPartZeroLast(t *testing.T) {
	all := realisticEntries(2000)
	old := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(all))[:1500] {
		old[k] = all[k]
	}
	f := newFakeDirectory(t, all, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: DirectoryName, Labels: directoryLabels()},
		Data:       old,
	})
	parts := strconv.Itoa(DirectoryPartsFor(dataSize(all), 1))
	if parts == "1" {
		t.Fatal("the test needs a directory that grows")
	}

	refuse := DirectoryPartName(2)
	f.kube.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() == refuse {
			return true, nil, apierrors.NewInternalError(errors.New("refused"))
		}
		if c, ok := a.(k8stesting.CreateAction); ok && c.GetObject().(metav1.Object).GetName() == refuse {
			return true, nil, apierrors.NewInternalError(errors.New("refused"))
		}
		return false, nil, nil
	})
	_, writes, err := f.reconcile(t)
	if err == nil {
		t.Errorf("a part's write failed, yet no error")
	}
	if slices.ContainsFunc(writes, func(w string) bool { return strings.HasSuffix(w, " "+DirectoryName) || strings.Contains(w, "parts=") }) {
		t.Errorf("a part's write failed, yet part 0 was written: %v", writes)
	}

	refuse = ""
	f.sync(t)
	_, writes, err = f.reconcile(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) == 0 || writes[len(writes)-1] != "patch "+DirectoryName+" parts="+parts {
		t.Errorf("writes %v: want part 0's parts=%s last", writes, parts)
	}
	for k, v := range old { // what a reader found before, it finds with the new P
		ns, name, _ := strings.Cut(k, ".")
		if url, found, err := LookupDirectory(context.Background(), f.kube, "ops", ns, name); err != nil || !found || url != v {
			t.Fatalf("with the new P, LookupDirectory %s: %q, %v, %v", k, url, found, err)
		}
	}

	// Then the entries leave part 0, and nothing more is to be done.
	f.sync(t)
	if _, writes, err = f.reconcile(t); err != nil || !slices.Contains(writes, "patch "+DirectoryName) {
		t.Errorf("after the new P: writes %v (%v), want part 0's moved entries removed", writes, err)
	}
	f.sync(t)
	if _, writes, err = f.reconcile(t); err != nil || len(writes) != 0 {
		t.Errorf("converged, yet writes %v (%v)", writes, err)
	}
	for k, v := range all {
		if url, found, err := LookupDirectory(context.Background(), f.kube, "ops", strings.Split(k, ".")[0], strings.Split(k, ".")[1]); err != nil || !found || url != v {
			t.Fatalf("LookupDirectory %s: %q, %v, %v", k, url, found, err)
		}
	}
}

// TestDirectoryReconcilerWaitsWriteInterval: within WriteInterval of a
// write a reconcile lists nothing and requeues itself for the rest of it.
func TestDirectoryReconcilerWaitsWriteInterval(t *testing.T) {
	f := newFakeDirectory(t, map[string]string{"a.one": "http://one.a.svc:8080"})
	f.r.WriteInterval = time.Hour
	if res, writes, err := f.reconcile(t); err != nil || len(writes) != 1 || res.RequeueAfter != 0 {
		t.Fatalf("first reconcile: %v, writes %v, %v", res, writes, err)
	}
	f.sync(t)
	lists := f.lists.Load()
	res, writes, err := f.reconcile(t)
	if err != nil || len(writes) != 0 || f.lists.Load() != lists {
		t.Errorf("within the interval: writes %v, %d lists, %v", writes, f.lists.Load()-lists, err)
	}
	if res.RequeueAfter <= 59*time.Minute || res.RequeueAfter > time.Hour {
		t.Errorf("RequeueAfter %v, want the rest of the hour", res.RequeueAfter)
	}

	// A reconcile that writes nothing does not hold the next one back.
	g := newFakeDirectory(t, nil)
	g.r.WriteInterval = time.Hour
	for range 2 {
		if res, writes, err := g.reconcile(t); err != nil || len(writes) != 0 || res.RequeueAfter != 0 {
			t.Errorf("nothing to write: %v, writes %v, %v", res, writes, err)
		}
	}
	if g.lists.Load() != 2 {
		t.Errorf("%d lists, want 2", g.lists.Load())
	}
}

// TestLookupDirectoryFollowsAGrowingP: a reader that read part 0 just
// before it said a new P, and the part that P named just after the entry
// left it, reads part 0 again and finds the entry where the new P puts it.
func TestLookupDirectoryFollowsAGrowingP(t *testing.T) {
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("shop.web-%d", i); DirectoryPart(k, 2) == 1 && DirectoryPart(k, 4) == 3 {
			key = k
		}
	}
	ns, name, _ := strings.Cut(key, ".")
	part := func(i int, parts string, data map[string]string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: DirectoryPartName(i)}, Data: data}
		if parts != "" {
			cm.Annotations = map[string]string{DirectoryPartsAnnotation: parts}
		}
		return cm
	}
	kube := fake.NewClientset(part(0, "4", nil), part(1, "", nil), part(3, "", map[string]string{key: "http://here"}))
	stale := true
	kube.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == DirectoryName && stale {
			stale = false
			return true, part(0, "2", nil), nil
		}
		return false, nil, nil
	})
	if url, found, err := LookupDirectory(context.Background(), kube, "ops", ns, name); err != nil || !found || url != "http://here" {
		t.Errorf("LookupDirectory: %q, %v, %v; want it found in part 3", url, found, err)
	}

	kube.ClearActions()
	if url, found, err := LookupDirectory(context.Background(), kube, "ops", "shop", "none"); err != nil || found {
		t.Errorf("LookupDirectory of nothing: %q, %v, %v", url, found, err)
	}
	if n := len(kube.Actions()); n > 3 {
		t.Errorf("a miss took %d reads", n)
	}
	if url, found, err := LookupDirectory(context.Background(), fake.NewClientset(), "ops", ns, name); err != nil || found {
		t.Errorf("no directory: %q, %v, %v", url, found, err)
	}
	bad := fake.NewClientset(part(0, "3", nil))
	if _, _, err := LookupDirectory(context.Background(), bad, "ops", ns, name); err == nil {
		t.Errorf("P 3: no error")
	}
}

// BenchmarkPlanDirectory100000: the step a reconcile takes with 100,000
// WebApps and nothing to change.
func BenchmarkPlanDirectory100000(b *testing.B) {
	entries := realisticEntries(100_000)
	parts := DirectoryPartsFor(dataSize(entries), 1)
	current := map[int]map[string]string{}
	for k, v := range entries {
		i := DirectoryPart(k, parts)
		if current[i] == nil {
			current[i] = map[string]string{}
		}
		current[i][k] = v
	}
	manages := ManagedDirectoryKeys(nil)
	for b.Loop() {
		if plan := PlanDirectory(parts, current, entries, manages); slices.ContainsFunc(plan.Changes, func(c map[string]*string) bool { return c != nil }) {
			b.Fatal("changes in a directory that is up to date")
		}
	}
}

// TestPlanDirectoryWritesOnlyWhatItManages: with --shards and client-side
// filtering every range's cache holds every WebApp, so desired holds other
// ranges' entries too. A range writes only its own: one whose cache lags
// must not put back an entry the owning range has just removed, nor
// rewrite another range's value.
func TestPlanDirectoryWritesOnlyWhatItManages(t *testing.T) {
	mine := func(k string) bool { return strings.HasPrefix(k, "mine.") }
	current := map[int]map[string]string{0: {"mine.a": "http://a", "theirs.c": "http://c-new"}}
	// The lagging cache still has theirs.b (its owner removed it) and an
	// old value of theirs.c.
	desired := map[string]string{"mine.a": "http://a", "mine.d": "http://d", "theirs.b": "http://b", "theirs.c": "http://c-old"}
	plan := PlanDirectory(1, current, desired, mine)
	want := map[string]*string{"mine.d": ptr.To("http://d")}
	if d := cmp.Diff(want, plan.Changes[0]); d != "" {
		t.Errorf("changes to part 0 (-want +got):\n%s", d)
	}
}
