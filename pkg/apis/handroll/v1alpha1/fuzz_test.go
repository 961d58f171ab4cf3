package v1alpha1_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/apis/handroll/v1alpha1"
)

// FuzzRoundTripFromV1 builds a random v1 WebApp from the input and converts
// it to v1alpha1 and back: the result must equal the original.
func FuzzRoundTripFromV1(f *testing.F) {
	s := newScheme(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := newV1(data)
		in := orig.DeepCopy()
		var alpha v1alpha1.WebApp
		if err := s.Convert(in, &alpha, nil); err != nil {
			t.Fatalf("v1 to v1alpha1: %v", err)
		}
		if !reflect.DeepEqual(orig, in) {
			t.Fatalf("converting changed its input:\n%s", cmp.Diff(orig, in))
		}
		_, annotated := alpha.Annotations[v1alpha1.V1SpecAnnotation]
		if carries := orig.Spec.ConfigMapRef != nil || orig.Spec.Service != nil; annotated != carries {
			t.Errorf("annotation written: %v; v1-only fields set: %v", annotated, carries)
		}

		var back handrollv1.WebApp
		if err := s.Convert(&alpha, &back, nil); err != nil {
			t.Fatalf("v1alpha1 to v1: %v", err)
		}
		requireEquivalent(t, orig, &back)

		// The same through the wire format, as a conversion webhook sees it.
		var decoded v1alpha1.WebApp
		jsonRoundTrip(t, &alpha, &decoded)
		var backFromWire handrollv1.WebApp
		if err := s.Convert(&decoded, &backFromWire, nil); err != nil {
			t.Fatalf("v1alpha1 decoded from JSON to v1: %v", err)
		}
		requireSameJSON(t, orig, &backFromWire)
	})
}

// FuzzRoundTripFromV1alpha1 builds a random v1alpha1 WebApp from the input,
// with or without v1-only fields in the annotation as conversion from v1
// writes it, and converts it to v1 and back: the result must equal the
// original, and the v1 object must hold the annotation's fields.
func FuzzRoundTripFromV1alpha1(f *testing.F) {
	s := newScheme(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		orig, only := newV1alpha1(data)
		in := orig.DeepCopy()
		var v1 handrollv1.WebApp
		if err := s.Convert(in, &v1, nil); err != nil {
			t.Fatalf("v1alpha1 to v1: %v", err)
		}
		if !reflect.DeepEqual(orig, in) {
			t.Fatalf("converting changed its input:\n%s", cmp.Diff(orig, in))
		}
		if _, ok := v1.Annotations[v1alpha1.V1SpecAnnotation]; ok {
			t.Error("the v1 object kept the annotation")
		}
		requireEquivalent(t, only, v1Only{ConfigMapRef: v1.Spec.ConfigMapRef, Service: v1.Spec.Service})

		var back v1alpha1.WebApp
		if err := s.Convert(&v1, &back, nil); err != nil {
			t.Fatalf("v1 to v1alpha1: %v", err)
		}
		requireEquivalent(t, orig, &back)
	})
}

// FuzzV1SpecAnnotation converts a v1alpha1 WebApp whose annotation holds
// any string. Conversion must not panic; a value it cannot read must be an
// error naming the annotation; a value it accepts must not stay in the
// annotations, and the v1 object it gives must round-trip.
func FuzzV1SpecAnnotation(f *testing.F) {
	s := newScheme(f)
	f.Fuzz(func(t *testing.T, value string) {
		in := &v1alpha1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "team", Annotations: map[string]string{
				v1alpha1.V1SpecAnnotation: value, "keep": "me",
			}},
			Spec: v1alpha1.WebAppSpec{Image: "nginx"},
		}
		var v1 handrollv1.WebApp
		if err := s.Convert(in, &v1, nil); err != nil {
			if !strings.Contains(err.Error(), v1alpha1.V1SpecAnnotation) || !strings.Contains(err.Error(), "team/shop") {
				t.Fatalf("the error does not name the annotation and the object: %v", err)
			}
			return
		}
		if diff := cmp.Diff(map[string]string{"keep": "me"}, v1.Annotations); diff != "" {
			t.Fatalf("v1 annotations (-want +got):\n%s", diff)
		}
		var alpha v1alpha1.WebApp
		if err := s.Convert(&v1, &alpha, nil); err != nil {
			t.Fatalf("v1 to v1alpha1: %v", err)
		}
		var back handrollv1.WebApp
		if err := s.Convert(&alpha, &back, nil); err != nil {
			t.Fatalf("back to v1: %v", err)
		}
		requireEquivalent(t, &v1, &back)
	})
}

// v1Only is the annotation's value as this test expects it, written
// independently of conversion.go: v1's JSON names, in v1's order.
type v1Only struct {
	ConfigMapRef *handrollv1.ConfigMapReference `json:"configMapRef,omitempty"`
	Service      *handrollv1.WebAppService      `json:"service,omitempty"`
}

func filler(data []byte) *randfill.Filler {
	// NumElements from 0: maps and slices come nil, empty or filled.
	return randfill.NewFromGoFuzz(data).NilChance(0.2).NumElements(0, 3).Funcs(
		// Quantities and times keep their state in unexported fields that
		// only their constructors set consistently; FieldsV1 is raw JSON.
		func(q *resource.Quantity, c randfill.Continue) {
			formats := []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), formats[c.Intn(len(formats))])
		},
		func(t *metav1.Time, c randfill.Continue) { *t = metav1.Unix(c.Int63n(1<<33), 0) },
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			fv.SetRawBytes([]byte(fmt.Sprintf(`{"f:metadata":{"f:labels":{"f:%d":{}}}}`, c.Intn(100))))
		},
	)
}

// newV1 builds the v1 WebApp that data stands for.
func newV1(data []byte) *handrollv1.WebApp {
	var w handrollv1.WebApp
	filler(data).Fill(&w)
	// TypeMeta is the caller's to set for the version it converts to;
	// conversion converts the content only.
	w.TypeMeta = metav1.TypeMeta{}
	// The key is conversion's own: TestV1ObjectsDoNotOwnTheAnnotation covers
	// a v1 object that holds it.
	delete(w.Annotations, v1alpha1.V1SpecAnnotation)
	return &w
}

// newV1alpha1 builds the v1alpha1 WebApp that data stands for, with the
// annotation set to the v1-only fields it also builds, when there are any.
func newV1alpha1(data []byte) (*v1alpha1.WebApp, v1Only) {
	f := filler(data)
	var w v1alpha1.WebApp
	f.Fill(&w)
	var only v1Only
	f.Fill(&only)
	w.TypeMeta = metav1.TypeMeta{}
	delete(w.Annotations, v1alpha1.V1SpecAnnotation)
	if only != (v1Only{}) {
		value, err := json.Marshal(only)
		if err != nil {
			panic(err)
		}
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		w.Annotations[v1alpha1.V1SpecAnnotation] = string(value)
	}
	return &w, only
}

// requireEquivalent fails unless want and got are semantically equal and
// encode to the same JSON: apimachinery's semantic equality takes nil and
// empty maps and slices as equal, the JSON tells them apart where it would
// show.
func requireEquivalent(t *testing.T, want, got any) {
	t.Helper()
	if !equality.Semantic.DeepEqual(want, got) {
		t.Fatalf("not semantically equal (-want +got):\n%s", cmp.Diff(want, got))
	}
	requireSameJSON(t, want, got)
}

func requireSameJSON(t *testing.T, want, got any) {
	t.Helper()
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wantJSON, gotJSON) {
		t.Fatalf("JSON differs:\nwant %s\ngot  %s", wantJSON, gotJSON)
	}
}

func jsonRoundTrip(t *testing.T, in, out runtime.Object) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

// The seed corpus under testdata/fuzz holds, for the two []byte targets,
// inputs that build objects of the kinds named below, and, for
// FuzzV1SpecAnnotation, annotation values good and bad. go test runs them
// all as ordinary tests. An input's meaning depends on the types and on the
// filler, so TestSeedCorpus checks that each input still builds what its
// file is named for; after a change to either, rewrite them with
//
//	go test ./pkg/apis/handroll/v1alpha1 -run TestSeedCorpus -update-seeds
var updateSeeds = flag.Bool("update-seeds", false, "search for new fuzz seed inputs and rewrite testdata/fuzz")

var v1Seeds = map[string]func(*handrollv1.WebApp) bool{
	"no-v1-only-fields": func(w *handrollv1.WebApp) bool {
		return w.Spec.ConfigMapRef == nil && w.Spec.Service == nil && len(w.Annotations) > 0
	},
	"service-only": func(w *handrollv1.WebApp) bool {
		return w.Spec.ConfigMapRef == nil && w.Spec.Service != nil
	},
	"configmapref-only": func(w *handrollv1.WebApp) bool {
		return w.Spec.ConfigMapRef != nil && w.Spec.Service == nil
	},
	"both-v1-only-fields-and-other-annotations": func(w *handrollv1.WebApp) bool {
		return w.Spec.ConfigMapRef != nil && w.Spec.Service != nil && len(w.Annotations) > 0
	},
	"v1-only-fields-and-nil-annotations": func(w *handrollv1.WebApp) bool {
		return w.Spec.ConfigMapRef != nil && w.Spec.Service != nil && w.Annotations == nil
	},
	"empty-not-nil-env-config-annotations": func(w *handrollv1.WebApp) bool {
		return w.Spec.Env != nil && len(w.Spec.Env) == 0 && w.Spec.Config != nil && len(w.Spec.Config) == 0 &&
			w.Annotations != nil && len(w.Annotations) == 0
	},
	"nil-replicas-and-empty-status": func(w *handrollv1.WebApp) bool {
		return w.Spec.Replicas == nil && w.Status.Conditions != nil && len(w.Status.Conditions) == 0
	},
	// Left out, the defaulted fields stay left out through a round trip
	// (TestConversionBothWays covers explicit zeros).
	"nil-port-and-service-with-nil-fields": func(w *handrollv1.WebApp) bool {
		return w.Spec.Port == nil && w.Spec.Service != nil && w.Spec.Service.Port == nil && w.Spec.Service.Type == nil
	},
}

var v1alpha1Seeds = map[string]func(*v1alpha1.WebApp, v1Only) bool{
	"no-annotation": func(w *v1alpha1.WebApp, only v1Only) bool {
		return only == (v1Only{}) && len(w.Annotations) > 0
	},
	"annotation-with-both-fields-and-others": func(w *v1alpha1.WebApp, only v1Only) bool {
		return only.ConfigMapRef != nil && only.Service != nil && len(w.Annotations) > 1
	},
	"annotation-with-service-only": func(w *v1alpha1.WebApp, only v1Only) bool {
		return only.ConfigMapRef == nil && only.Service != nil
	},
	"annotation-alone": func(w *v1alpha1.WebApp, only v1Only) bool {
		return only != (v1Only{}) && len(w.Annotations) == 1
	},
	"empty-not-nil-env-and-configdata": func(w *v1alpha1.WebApp, only v1Only) bool {
		return w.Spec.Env != nil && len(w.Spec.Env) == 0 && w.Spec.ConfigData != nil && len(w.Spec.ConfigData) == 0
	},
	"nil-size-and-no-annotations": func(w *v1alpha1.WebApp, only v1Only) bool {
		return w.Spec.Size == nil && w.Annotations == nil
	},
	"nil-container-port": func(w *v1alpha1.WebApp, only v1Only) bool {
		return w.Spec.ContainerPort == nil
	},
}

var annotationSeeds = map[string]string{
	"both-fields":              `{"configMapRef":{"name":"shared"},"service":{"type":"NodePort","port":80,"nodePort":30080}}`,
	"defaulted-service":        `{"service":{"type":"ClusterIP","port":80}}`,
	"empty-object":             `{}`,
	"null":                     `null`,
	"not-json":                 `not json`,
	"wrong-type":               `{"service":{"port":"80"}}`,
	"unknown-field":            `{"configMapRef":{"name":"a","namespace":"b"}}`,
	"field-name-case":          `{"Service":{}}`,
	"duplicate-field":          `{"service":{"port":80},"service":{"port":81}}`,
	"trailing-data":            `{"service":{}} {}`,
	"escapes-and-non-ascii":    `{"configMapRef":{"name":"\u003c\"a\u0026b\"\\ü\u003e"}}`,
	"number-out-of-int32":      `{"service":{"port":4294967377}}`,
	"empty":                    ``,
	"deeply-nested-in-unknown": `{"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
}

func TestSeedCorpus(t *testing.T) {
	checkOrWrite(t, "FuzzRoundTripFromV1", slices.Sorted(maps.Keys(v1Seeds)), func(name string, data []byte) bool {
		return v1Seeds[name](newV1(data))
	})
	checkOrWrite(t, "FuzzRoundTripFromV1alpha1", slices.Sorted(maps.Keys(v1alpha1Seeds)), func(name string, data []byte) bool {
		return v1alpha1Seeds[name](newV1alpha1(data))
	})

	dir := filepath.Join("testdata", "fuzz", "FuzzV1SpecAnnotation")
	if *updateSeeds {
		rewriteDir(t, dir)
		for name, value := range annotationSeeds {
			writeSeed(t, filepath.Join(dir, name), fmt.Sprintf("string(%q)", value))
		}
	}
	got := readSeeds(t, dir, "string")
	if len(got) != len(annotationSeeds) {
		t.Errorf("%s holds %d seeds, want %d", dir, len(got), len(annotationSeeds))
	}
	for name, value := range got {
		if want, ok := annotationSeeds[name]; !ok || want != value {
			t.Errorf("%s/%s holds %q, want %q", dir, name, value, want)
		}
	}
}

// checkOrWrite checks that target's seeds are the named ones and that each
// builds what its name says or, with -update-seeds, searches for the first
// input that builds each and writes it.
func checkOrWrite(t *testing.T, target string, names []string, builds func(name string, data []byte) bool) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if *updateSeeds {
		rewriteDir(t, dir)
	search:
		for _, name := range names {
			for i := uint64(1); i < 1<<20; i++ {
				if data := binary.BigEndian.AppendUint64(nil, i); builds(name, data) {
					writeSeed(t, filepath.Join(dir, name), fmt.Sprintf("[]byte(%q)", data))
					continue search
				}
			}
			t.Fatalf("%s: no input builds %s", target, name)
		}
	}
	got := readSeeds(t, dir, "[]byte")
	if gotNames := slices.Sorted(maps.Keys(got)); !slices.Equal(gotNames, names) {
		t.Errorf("%s holds seeds %v, want %v", dir, gotNames, names)
	}
	for name, data := range got {
		if slices.Contains(names, name) && !builds(name, []byte(data)) {
			t.Errorf("%s/%s no longer builds what it is named for; rerun with -update-seeds", dir, name)
		}
	}
}

func rewriteDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeSeed(t *testing.T, path, value string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("go test fuzz v1\n"+value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readSeeds reads the one-value corpus files in dir, each value of type
// typ, as go test writes them.
func readSeeds(t *testing.T, dir, typ string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the seed corpus (write it with -update-seeds): %v", err)
	}
	seeds := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
			!strings.HasPrefix(lines[1], typ+"(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s/%s is not a corpus file of one %s", dir, e.Name(), typ)
		}
		value, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], typ+"("), ")"))
		if err != nil {
			t.Fatalf("%s/%s: %v", dir, e.Name(), err)
		}
		seeds[e.Name()] = value
	}
	return seeds
}
