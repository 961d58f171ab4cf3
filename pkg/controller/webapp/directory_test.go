package webapp

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
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
		func(ns, name string) *corev1.Service { return services[ns+"/"+name] })
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
