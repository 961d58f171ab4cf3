package v1_test

import (
	"reflect"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// TestDeepCopyIsIndependent fills WebApps with random values, copies them,
// and proves that the copy is equal and shares no memory with the original:
// a reconciler may then change a copy of a cached object without corrupting
// the informer's cache.
func TestDeepCopyIsIndependent(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.1).NumElements(1, 3).Funcs(
		// Quantities and times have unexported fields that only their
		// constructors keep consistent; the fuzzer fills the rest.
		randfillQuantity, randfillTime,
	)
	for i := 0; i < 200; i++ {
		var orig handrollv1.WebApp
		f.Fill(&orig)

		cp := orig.DeepCopy()
		if !equality.Semantic.DeepEqual(&orig, cp) {
			t.Fatalf("round %d: DeepCopy is not equal to the original", i)
		}
		if path, shared := sharesMemory(reflect.ValueOf(orig), reflect.ValueOf(*cp), "WebApp"); shared {
			t.Fatalf("round %d: the copy shares memory with the original at %s", i, path)
		}

		// The check itself must be able to fail: a plain struct copy shares
		// the original's slices and maps.
		if shallow := orig; len(orig.Spec.Env) > 0 {
			if _, shared := sharesMemory(reflect.ValueOf(orig), reflect.ValueOf(shallow), "WebApp"); !shared {
				t.Fatalf("round %d: a shallow copy was not detected as sharing memory", i)
			}
		}

		list := handrollv1.WebAppList{Items: []handrollv1.WebApp{orig}}
		lcp := list.DeepCopyObject().(*handrollv1.WebAppList)
		if path, shared := sharesMemory(reflect.ValueOf(list), reflect.ValueOf(*lcp), "WebAppList"); shared {
			t.Fatalf("round %d: the list copy shares memory with the original at %s", i, path)
		}
	}
}

// sharesMemory walks a and b (of the same type) in step and reports the first
// pointer, slice or map that both point at.
func sharesMemory(a, b reflect.Value, path string) (string, bool) {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return "", false
		}
		if a.Pointer() == b.Pointer() {
			return path, true
		}
		return sharesMemory(a.Elem(), b.Elem(), path)
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return "", false
		}
		return sharesMemory(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return "", false
		}
		if a.Pointer() == b.Pointer() {
			return path, true
		}
		for i := 0; i < a.Len(); i++ {
			if p, ok := sharesMemory(a.Index(i), b.Index(i), path+"["+itoa(i)+"]"); ok {
				return p, true
			}
		}
	case reflect.Map:
		if a.Len() == 0 || b.Len() == 0 {
			return "", false
		}
		if a.Pointer() == b.Pointer() {
			return path, true
		}
		for _, k := range a.MapKeys() {
			if p, ok := sharesMemory(a.MapIndex(k), b.MapIndex(k), path+"[key]"); ok {
				return p, true
			}
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if p, ok := sharesMemory(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); ok {
				return p, true
			}
		}
	}
	return "", false
}

func itoa(i int) string { return strconv.Itoa(i) }

func randfillQuantity(q *resource.Quantity, c randfill.Continue) {
	*q = *resource.NewMilliQuantity(c.Int63n(1<<20), resource.DecimalSI)
}

func randfillTime(t *metav1.Time, c randfill.Continue) {
	*t = metav1.Unix(c.Int63n(1<<31), 0)
}
