package webapp

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/randfill"
)

// sameAsJSON fails when FirstDifference and the reference disagree. Where
// the reference fails (a value encoding/json refuses anywhere in either
// object), FirstDifference, which reads only what desired sets, may still
// answer: only its path, when it has one, is checked then.
func sameAsJSON(t *testing.T, what string, desired, live any) {
	t.Helper()
	want, wantErr := differenceJSON(desired, live)
	got, err := FirstDifference(desired, live)
	if wantErr != nil {
		return
	}
	if err != nil || got != want {
		d, _ := json.Marshal(desired)
		l, _ := json.Marshal(live)
		t.Fatalf("%s: FirstDifference = %q, %v; through JSON %q\ndesired: %s\nlive:    %s", what, got, err, want, d, l)
	}
}

// testChild is a desired child and a new value of its live type.
type testChild struct {
	desired any
	newLive func() any
	stored  func(testing.TB, any) any // as an informer hands it out after the apply
}

func testChildren(t testing.TB, data []byte) []testChild {
	w := plausibleWebApp(data)
	w.Namespace, w.UID = "ns", "uid"
	var ref *corev1.ConfigMap
	if w.Spec.ConfigMapRef != nil {
		ref = refConfigMap(map[string]string{"k": string(data)}, map[string][]byte{"b": data})
	}
	out := []testChild{
		{DesiredDeployment(w, ref), func() any { return &appsv1.Deployment{} }, func(tb testing.TB, d any) any { return storedDeployment(tb, d) }},
		{DesiredService(w), func() any { return &corev1.Service{} }, func(tb testing.TB, d any) any { return storedService(tb, d) }},
	}
	if cm := DesiredConfigMap(w); cm != nil {
		out = append(out, testChild{cm, func() any { return &corev1.ConfigMap{} }, func(tb testing.TB, d any) any { return storedConfigMap(tb, d) }})
	}
	return out
}

// TestFirstDifferenceMatchesJSON edits every leaf of live children in turn
// (changed, removed, emptied) and checks that FirstDifference names the
// same path as the reference, on the typed object.
func TestFirstDifferenceMatchesJSON(t *testing.T) {
	seeds := [][]byte{nil, []byte("shop"), []byte("a longer seed that fills more of the spec: env, resources, config and a service")}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		seed := make([]byte, 64)
		for i := range seed {
			seed[i] = byte(r.UintN(256))
		}
		seeds = append(seeds, seed)
	}
	edits := 0
	for _, seed := range seeds {
		for _, c := range testChildren(t, seed) {
			live := c.stored(t, c.desired)
			var liveJSON map[string]any
			mustRoundTrip(t, live, &liveJSON)
			for _, path := range jsonLeaves(liveJSON, nil) {
				for _, edit := range []string{"change", "remove", "empty", "null"} {
					edited, ok := editJSON(liveJSON, path, edit)
					if !ok {
						continue
					}
					typed := c.newLive()
					if data, _ := json.Marshal(edited); json.Unmarshal(data, typed) != nil {
						continue
					}
					edits++
					sameAsJSON(t, edit+" "+strings.Join(path, "/"), c.desired, typed)
				}
			}
		}
	}
	if edits < 1000 {
		t.Errorf("only %d edits tried", edits)
	}
}

// FuzzFirstDifference compares FirstDifference with the reference on
// random desired objects (built by the reconciler's builders, or filled at
// random) and live objects edited at random places.
func FuzzFirstDifference(f *testing.F) {
	for _, seed := range []string{"", "shop", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", "a longer seed that fills more of the spec"} {
		f.Add([]byte(seed), uint64(0))
		f.Add([]byte(seed), uint64(1234567))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		r := rand.New(rand.NewPCG(seed, seed>>7))
		fill := randfill.NewFromGoFuzz(data).NilChance(0.4).NumElements(0, 3).MaxDepth(12).Funcs(
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewMilliQuantity(int64(c.Uint64()%5000), resource.DecimalSI)
			},
			func(i *intstr.IntOrString, c randfill.Continue) {
				if c.Bool() {
					*i = intstr.FromInt32(int32(c.Uint64() % 100))
				} else {
					*i = intstr.FromString(c.String(4))
				}
			},
			func(tm *metav1.Time, c randfill.Continue) {
				*tm = metav1.Unix(int64(c.Uint64()%2e9), 0)
			},
		)
		var children []testChild
		switch seed % 3 {
		case 0:
			children = testChildren(t, data)
		case 1:
			d := &appsv1ac.DeploymentApplyConfiguration{}
			fill.Fill(d)
			children = []testChild{{d, func() any { return &appsv1.Deployment{} }, nil}}
		case 2:
			s := &corev1ac.ServiceApplyConfiguration{}
			fill.Fill(s)
			children = []testChild{{s, func() any { return &corev1.Service{} }, nil}}
		}
		for _, c := range children {
			live := c.newLive()
			if data, err := json.Marshal(c.desired); err != nil || json.Unmarshal(data, live) != nil {
				continue
			}
			if c.stored != nil && r.IntN(2) == 0 {
				live = c.stored(t, c.desired)
			}
			sameAsJSON(t, "as applied", c.desired, live)
			for range 1 + r.IntN(4) {
				mutate(reflect.ValueOf(live).Elem(), r, fill)
			}
			sameAsJSON(t, "edited", c.desired, live)
		}
	})
}

// mutate changes one place of v, picked at random, settable.
func mutate(v reflect.Value, r *rand.Rand, fill *randfill.Filler) {
	for depth := 0; ; depth++ {
		if r.IntN(6) == 0 && depth > 0 {
			break
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				goto act
			}
			v = v.Elem()
			continue
		case reflect.Struct:
			var fields []int
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					fields = append(fields, i)
				}
			}
			if len(fields) == 0 {
				goto act
			}
			v = v.Field(fields[r.IntN(len(fields))])
			continue
		case reflect.Slice:
			if v.Len() == 0 {
				goto act
			}
			switch r.IntN(4) {
			case 0: // drop one
				i := r.IntN(v.Len())
				v.Set(reflect.AppendSlice(v.Slice(0, i), v.Slice(i+1, v.Len())))
				return
			case 1: // swap two
				i, j := r.IntN(v.Len()), r.IntN(v.Len())
				x := reflect.New(v.Type().Elem()).Elem()
				x.Set(v.Index(i))
				v.Index(i).Set(v.Index(j))
				v.Index(j).Set(x)
				return
			}
			v = v.Index(r.IntN(v.Len()))
			continue
		case reflect.Map:
			if v.Len() == 0 || v.Type().Key().Kind() != reflect.String {
				goto act
			}
			keys := v.MapKeys()
			k := keys[r.IntN(len(keys))]
			switch r.IntN(3) {
			case 0:
				v.SetMapIndex(k, reflect.Value{})
			case 1:
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(v.MapIndex(k))
				mutate(e, r, fill)
				v.SetMapIndex(k, e)
			default:
				e := reflect.New(v.Type().Elem())
				fill.Fill(e.Interface())
				v.SetMapIndex(k, e.Elem())
			}
			return
		}
		break
	}
act:
	if !v.CanSet() {
		return
	}
	switch r.IntN(4) {
	case 0:
		v.SetZero()
	case 1:
		if v.Kind() == reflect.String {
			v.SetString(v.String() + string([]byte{'x', 0xff}))
			return
		}
		fallthrough
	default:
		p := reflect.New(v.Type())
		fill.Fill(p.Interface())
		v.Set(p.Elem())
	}
}

func mustRoundTrip(t testing.TB, in, out any) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

// jsonLeaves lists the paths of the leaves, the empty containers and the
// list elements of v.
func jsonLeaves(v any, path []string) [][]string {
	switch x := v.(type) {
	case map[string]any:
		var out [][]string
		if len(x) == 0 && len(path) > 0 {
			out = append(out, path)
		}
		for k, e := range x {
			out = append(out, jsonLeaves(e, append(path[:len(path):len(path)], k))...)
		}
		return out
	case []any:
		out := [][]string{path}
		for i, e := range x {
			out = append(out, jsonLeaves(e, append(path[:len(path):len(path)], "#"+string(rune('0'+i))))...)
		}
		return out
	}
	return [][]string{path}
}

// editJSON returns a deep copy of v edited at path.
func editJSON(v any, path []string, edit string) (any, bool) {
	var cp any
	data, _ := json.Marshal(v)
	_ = json.Unmarshal(data, &cp)
	parent, last := any(nil), ""
	cur := cp
	for _, p := range path {
		parent, last = cur, p
		switch x := cur.(type) {
		case map[string]any:
			cur = x[p]
		case []any:
			cur = x[int(p[1]-'0')]
		}
	}
	if parent == nil {
		return nil, false
	}
	var next any
	switch edit {
	case "remove":
		if m, ok := parent.(map[string]any); ok {
			delete(m, last)
			return cp, true
		}
		l := parent.([]any)
		i := int(last[1] - '0')
		return editAt(cp, path[:len(path)-1], append(l[:i:i], l[i+1:]...)), true
	case "null":
		next = nil
	case "empty":
		switch cur.(type) {
		case string:
			next = ""
		case float64:
			next = float64(0)
		case bool:
			next = false
		case []any:
			next = []any{}
		case map[string]any:
			next = map[string]any{}
		default:
			return nil, false
		}
	case "change":
		switch x := cur.(type) {
		case string:
			next = x + "x"
		case float64:
			next = x + 1
		case bool:
			next = !x
		default:
			return nil, false
		}
	}
	switch p := parent.(type) {
	case map[string]any:
		p[last] = next
	case []any:
		p[int(last[1]-'0')] = next
	}
	return cp, true
}

func editAt(root any, path []string, v any) any {
	if len(path) == 0 {
		return v
	}
	cur := root
	for _, p := range path[:len(path)-1] {
		switch x := cur.(type) {
		case map[string]any:
			cur = x[p]
		case []any:
			cur = x[int(p[1]-'0')]
		}
	}
	switch x := cur.(type) {
	case map[string]any:
		x[path[len(path)-1]] = v
	case []any:
		x[int(path[len(path)-1][1]-'0')] = v
	}
	return root
}

// TestFirstDifferenceRefusesAnUntypedObject: there is no second way to
// compare. An Unstructured or a map is refused, not compared by other
// rules.
func TestFirstDifferenceRefusesAnUntypedObject(t *testing.T) {
	desired := DesiredService(testWebApp())
	var live map[string]any
	mustRoundTrip(t, desired, &live)
	for name, l := range map[string]any{
		"a map":           live,
		"an Unstructured": &unstructured.Unstructured{Object: live},
		"nil":             nil,
	} {
		if d, err := FirstDifference(desired, l); err == nil {
			t.Errorf("%s: FirstDifference = %q, nil; want an error", name, d)
		}
	}
}
