package webapp

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

type walkInner struct {
	Name  string `json:"name"`
	Port  int
	Image string `json:"image"`
	Tag   string
}

type walkOther struct {
	Port int
}

type walkTagged struct {
	Image string `json:"image"`
}

type walkTaggedHolder struct {
	walkTagged
}

type walkUntagged struct {
	Image string
}

// walkOuter embeds walkInner before its own "name": the shallower field is
// the one encoding/json writes, whatever the order of declaration.
type walkOuter struct {
	walkInner
	walkOther        // "port" at the same depth as walkInner's: neither is written
	Name      string `json:"name"`
}

// walkDeep holds "image" tagged at depth 3 in walkInner only (walkTagged's
// is at 4), "Image" untagged at depth 4 (a name of its own), "Kind"
// tagged and untagged at one depth, and "Tag" untagged at depths 1 and 3.
type walkDeep struct {
	*walkOuter
	walkTags
	Tag string
}

type walkTags struct {
	walkTaggedHolder
	walkUntaggedHolder
	walkKindTagged // "Kind" at the same depth: the tagged one is written
	walkKindUntagged
}

type walkKindTagged struct {
	Kind string `json:"Kind"`
}

type walkKindUntagged struct {
	Kind string
}

type walkUntaggedHolder struct {
	walkUntagged `json:",omitempty"`
}

// TestFieldSetOfFollowsEncodingJSON: the fields fieldSetOf lists, and the
// values fieldOf reads, are the ones encoding/json writes, for embedded
// structs that repeat a name at another depth or at the same one.
func TestFieldSetOfFollowsEncodingJSON(t *testing.T) {
	for _, v := range []any{
		walkOuter{walkInner: walkInner{Name: "deep", Port: 1, Image: "i", Tag: "t"}, walkOther: walkOther{Port: 2}, Name: "shallow"},
		walkDeep{
			walkOuter: &walkOuter{walkInner: walkInner{Name: "deep", Image: "i1", Tag: "t2"}, Name: "shallow"},
			walkTags:  walkTags{walkTaggedHolder{walkTagged{"tagged"}}, walkUntaggedHolder{walkUntagged{"untagged"}}, walkKindTagged{"tagged"}, walkKindUntagged{"untagged"}},
			Tag:       "t1",
		},
	} {
		encoded, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(encoded, &want); err != nil {
			t.Fatal(err)
		}
		rv := reflect.ValueOf(v)
		fs := fieldSetOf(rv.Type())
		got := map[string]any{}
		for _, f := range fs.sorted {
			fv, ok := fieldOf(rv, f)
			if !ok {
				continue
			}
			b, err := json.Marshal(fv.Interface())
			if err != nil {
				t.Fatal(err)
			}
			var x any
			if err := json.Unmarshal(b, &x); err != nil {
				t.Fatal(err)
			}
			got[f.name] = x
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T: fieldSetOf reads %v; encoding/json writes %s", v, got, encoded)
		}
		if len(fs.sorted) != len(fs.byName) || !slices.IsSortedFunc(fs.sorted, func(a, b field) int {
			if a.name < b.name {
				return -1
			}
			return 1
		}) {
			t.Errorf("%T: sorted %v does not match byName", v, fs.sorted)
		}
	}
}
