package admission

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// applyPatch applies ops to doc with an independent implementation of
// RFC 6902, so the test does not trust our own reading of the RFC.
func applyPatch(t *testing.T, doc []byte, ops []Operation) []byte {
	t.Helper()
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatalf("decoding patch %s: %v", raw, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("applying patch %s to %s: %v", raw, doc, err)
	}
	return out
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	av, err := decodeJSON(a)
	if err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	bv, err := decodeJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(av, bv)
}

func TestCreateJSONPatch(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           string // the patch, exactly; "" skips the exact check
	}{
		{"equal", `{"a":1,"b":[1,{"c":null}]}`, `{"b":[1,{"c":null}],"a":1}`, `null`},
		{"add key", `{"a":1}`, `{"a":1,"b":{"c":2}}`, `[{"op":"add","path":"/b","value":{"c":2}}]`},
		{"remove key", `{"a":1,"b":2}`, `{"a":1}`, `[{"op":"remove","path":"/b"}]`},
		{"replace scalar", `{"a":1}`, `{"a":"1"}`, `[{"op":"replace","path":"/a","value":"1"}]`},
		{"add null", `{}`, `{"a":null}`, `[{"op":"add","path":"/a","value":null}]`},
		{"null to value", `{"a":null}`, `{"a":{"b":1}}`, `[{"op":"replace","path":"/a","value":{"b":1}}]`},
		{"nested", `{"s":{"x":{"y":1}}}`, `{"s":{"x":{"y":2,"z":3}}}`, `[{"op":"replace","path":"/s/x/y","value":2},{"op":"add","path":"/s/x/z","value":3}]`},
		{"escaped keys", `{"m":{}}`, `{"m":{"a/b":1,"c~d":2,"~1":3}}`, `[{"op":"add","path":"/m/a~1b","value":1},{"op":"add","path":"/m/c~0d","value":2},{"op":"add","path":"/m/~01","value":3}]`},
		{"array append", `{"l":[1]}`, `{"l":[1,2,3]}`, `[{"op":"add","path":"/l/1","value":2},{"op":"add","path":"/l/2","value":3}]`},
		{"array shrink", `{"l":[1,2,3]}`, `{"l":[1]}`, `[{"op":"remove","path":"/l/2"},{"op":"remove","path":"/l/1"}]`},
		{"array element field", `{"l":[{"n":"a"},{"n":"b"}]}`, `{"l":[{"n":"a"},{"n":"b","v":{"o":false}}]}`, `[{"op":"add","path":"/l/1/v","value":{"o":false}}]`},
		{"array insert at front", `{"l":[2,3]}`, `{"l":[1,2,3]}`, ""},
		{"object to array", `{"a":{"b":1}}`, `{"a":[1]}`, `[{"op":"replace","path":"/a","value":[1]}]`},
		{"root type change", `{"a":1}`, `[1]`, `[{"op":"replace","path":"","value":[1]}]`},
		{"big integers exact", `{"n":9007199254740993}`, `{"n":9007199254740992}`, `[{"op":"replace","path":"/n","value":9007199254740992}]`},
		{"empty key", `{"":1}`, `{"":2}`, `[{"op":"replace","path":"/","value":2}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := CreateJSONPatch([]byte(tc.from), []byte(tc.to))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(ops)
			if tc.want != "" && string(got) != tc.want {
				t.Errorf("patch\n got %s\nwant %s", got, tc.want)
			}
			if tc.want == "null" {
				return // nothing to apply
			}
			if out := applyPatch(t, []byte(tc.from), ops); !jsonEqual(t, out, []byte(tc.to)) {
				t.Errorf("applying %s to %s gave %s, want %s", got, tc.from, out, tc.to)
			}
		})
	}
}

func TestCreateJSONPatchRejectsInvalidJSON(t *testing.T) {
	for _, pair := range [][2]string{{`{`, `{}`}, {`{}`, `{"a":`}, {``, `{}`}, {`{} {}`, `{}`}, {`{}`, `nul`}} {
		if ops, err := CreateJSONPatch([]byte(pair[0]), []byte(pair[1])); err == nil {
			t.Errorf("CreateJSONPatch(%q, %q) = %v, want an error", pair[0], pair[1], ops)
		}
	}
}

// randomJSON builds a random document of bounded depth from a small alphabet
// of keys, so that two documents share structure often enough to exercise
// the recursive cases.
func randomJSON(r *rand.Rand, depth int) any {
	n := r.Intn(7)
	if depth == 0 && n >= 5 {
		n = r.Intn(5)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return r.Intn(2) == 0
	case 2:
		return json.Number(fmt.Sprint(r.Intn(5)))
	case 3:
		return []string{"", "x", "a/b", "~", "y"}[r.Intn(5)]
	case 4:
		return json.Number("1.5")
	case 5:
		m := map[string]any{}
		for range r.Intn(4) {
			m[[]string{"a", "b", "c/d", "e~f", ""}[r.Intn(5)]] = randomJSON(r, depth-1)
		}
		return m
	default:
		l := make([]any, r.Intn(4))
		for i := range l {
			l[i] = randomJSON(r, depth-1)
		}
		return l
	}
}

// TestCreateJSONPatchRoundTrips checks the defining property on many random
// pairs: applying the patch to from gives to.
func TestCreateJSONPatchRoundTrips(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range 2000 {
		// Roots are objects, as Kubernetes objects are (and as the patch
		// library used to check requires).
		from, _ := json.Marshal(map[string]any{"x": randomJSON(r, 4), "y": randomJSON(r, 2)})
		to, _ := json.Marshal(map[string]any{"x": randomJSON(r, 4), "z": randomJSON(r, 2)})
		ops, err := CreateJSONPatch(from, to)
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) == 0 {
			if !jsonEqual(t, from, to) {
				t.Fatalf("case %d: no patch from %s to %s", i, from, to)
			}
			continue
		}
		if out := applyPatch(t, from, ops); !jsonEqual(t, out, to) {
			p, _ := json.Marshal(ops)
			t.Fatalf("case %d: applying %s to %s gave %s, want %s", i, p, from, out, to)
		}
	}
}

func TestLookupPointer(t *testing.T) {
	doc, err := decodeJSON([]byte(`{"a":{"b/c":[10,{"d~e":null}]},"":1}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ptr   string
		want  string
		found bool
	}{
		{"", `{"":1,"a":{"b/c":[10,{"d~e":null}]}}`, true},
		{"/", `1`, true},
		{"/a/b~1c/0", `10`, true},
		{"/a/b~1c/1/d~0e", `null`, true},
		{"/a/b~1c/2", ``, false},
		{"/a/b~1c/-1", ``, false},
		{"/a/b~1c/x", ``, false},
		{"/a/b/c", ``, false},
		{"/a/b~1c/0/z", ``, false},
	}
	for _, tc := range cases {
		v, found := lookupPointer(doc, tc.ptr)
		if found != tc.found {
			t.Errorf("lookupPointer(%q) found = %v, want %v", tc.ptr, found, tc.found)
			continue
		}
		if !found {
			continue
		}
		got, _ := json.Marshal(v)
		if !strings.EqualFold(string(got), tc.want) {
			t.Errorf("lookupPointer(%q) = %s, want %s", tc.ptr, got, tc.want)
		}
	}
}
