package cache_test

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	handrollcache "github.com/handroll/handroll/pkg/cache"
)

// TestCompactChildDecodesToTrimChild: a child a WebApp controls is cached
// as a Child, whose key, owner, version and labels read without a decode
// step by the informer and the handlers, and which decodes to exactly what
// TrimChild keeps.
func TestCompactChildDecodesToTrimChild(t *testing.T) {
	for name, w := range webApps() {
		for _, c := range children(w) {
			t.Run(name+"/"+c.kind, func(t *testing.T) {
				want, err := handrollcache.TrimChild(live(t, c))
				if err != nil {
					t.Fatal(err)
				}
				out, err := handrollcache.CompactChild(live(t, c))
				if err != nil {
					t.Fatal(err)
				}
				packed, ok := out.(*handrollcache.Child)
				if !ok {
					t.Fatalf("CompactChild kept a %T, not a Child", out)
				}
				wantMeta := want.(metav1.Object)
				key, err := cache.MetaNamespaceKeyFunc(packed)
				if err != nil || key != wantMeta.GetNamespace()+"/"+wantMeta.GetName() {
					t.Errorf("key %q, %v", key, err)
				}
				if packed.GetResourceVersion() != wantMeta.GetResourceVersion() || packed.GetGeneration() != wantMeta.GetGeneration() {
					t.Error("resourceVersion or generation lost")
				}
				if owner := metav1.GetControllerOf(packed); owner == nil || owner.UID != w.UID {
					t.Errorf("controller %v, want the WebApp's uid %s", owner, w.UID)
				}
				if !apiequality.Semantic.DeepEqual(packed.GetLabels(), wantMeta.GetLabels()) ||
					!apiequality.Semantic.DeepEqual(packed.GetAnnotations(), wantMeta.GetAnnotations()) {
					t.Errorf("labels %v and annotations %v, want %v and %v",
						packed.GetLabels(), packed.GetAnnotations(), wantMeta.GetLabels(), wantMeta.GetAnnotations())
				}
				got, err := packed.Object()
				if err != nil {
					t.Fatal(err)
				}
				// What a watch decodes carries no apiVersion and kind,
				// nor does a Child; these test objects do.
				reflect.ValueOf(want).Elem().FieldByName("TypeMeta").SetZero()
				if !apiequality.Semantic.DeepEqual(got, want) {
					t.Errorf("decoded:\n%+v\nwant what TrimChild keeps:\n%+v", got, want)
				}
			})
		}
	}
}

// TestCompactChildKeepsOthersTrimmed: what no controller owns (the
// operator's own ConfigMaps, read whole by the directory) stays a trimmed
// typed object, and a tombstone passes as it is.
func TestCompactChildKeepsOthersTrimmed(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "handroll-directory", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "handroll"}}},
		Data:       map[string]string{"a": "b"},
	}
	out, err := handrollcache.CompactChild(cm)
	if err != nil {
		t.Fatal(err)
	}
	kept, ok := out.(*corev1.ConfigMap)
	if !ok || kept.Data["a"] != "b" || kept.ManagedFields != nil {
		t.Errorf("CompactChild kept %#v", out)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "a/b", Obj: &appsv1.Deployment{}}
	if out, err := handrollcache.CompactChild(tomb); err != nil || out != tomb {
		t.Errorf("CompactChild(tombstone) = %#v, %v", out, err)
	}
}

// BenchmarkChildObject is what a read of a cached Deployment costs: its
// decode.
func BenchmarkChildObject(b *testing.B) {
	out, err := handrollcache.CompactChild(decodeServed(b, servedChildren(b, 1)[0]))
	if err != nil {
		b.Fatal(err)
	}
	c := out.(*handrollcache.Child)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Object(); err != nil {
			b.Fatal(err)
		}
	}
}
