package stripjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestStrip(t *testing.T) {
	const mf = `[{"manager":"m","operation":"Update","fieldsV1":{"f:metadata":{"f:managedFields":{}}}}]`
	for _, tc := range []struct{ name, in, want string }{
		{"first", `{"metadata":{"managedFields":` + mf + `,"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{"last", `{"metadata":{"name":"a","managedFields":` + mf + `}}`, `{"metadata":{"name":"a"}}`},
		{"middle", `{"metadata":{"name":"a","managedFields":[],"uid":"u"}}`, `{"metadata":{"name":"a","uid":"u"}}`},
		{"alone", `{"metadata":{"managedFields":null}}`, `{"metadata":{}}`},
		{"twice", `{"metadata":{"managedFields":1,"managedFields":2}}`, `{"metadata":{}}`},
		{"twice around", `{"metadata":{"managedFields":1,"a":1,"managedFields":2,"b":2}}`, `{"metadata":{"a":1,"b":2}}`},
		{"whitespace", " {\n \"metadata\" : { \"name\" : \"a\" ,\r\n\t\"managedFields\" : [ ] } } ", " {\n \"metadata\" : { \"name\" : \"a\" } } "},
		{"metadata last", `{"spec":{"managedFields":1},"metadata":{"managedFields":1,"name":"a"}}`, `{"spec":{"managedFields":1},"metadata":{"name":"a"}}`},
		{"escaped key", `{"metadata":{"managed\u0046ields":1,"name":"a"}}`, `{"metadata":{"name":"a"}}`},
		{"escaped metadata", `{"meta\u0064ata":{"managedFields":1}}`, `{"meta\u0064ata":{}}`},
		{"escaped quotes", `{"spec":{"x":"\"metadata\":{\"managedFields\":1}\\"},"metadata":{"managedFields":[]}}`, `{"spec":{"x":"\"metadata\":{\"managedFields\":1}\\"},"metadata":{}}`},
		{"annotations", `{"metadata":{"annotations":{"a":"1","` + LastApplied + `":"{\"metadata\":{}}","b":"2"}}}`, `{"metadata":{"annotations":{"a":"1","b":"2"}}}`},
		{"annotation alone", `{"metadata":{"annotations":{"` + LastApplied + `":"x"}}}`, `{"metadata":{"annotations":{}}}`},
		{"escaped annotation", `{"metadata":{"annotations":{"kubectl.kubernetes.io\/last-applied-configuration":"x"}}}`, `{"metadata":{"annotations":{}}}`},
		{"list", `{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"managedFields":[],"name":"a"}},{"metadata":{"name":"b","managedFields":[]}}]}`,
			`{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}`},
		// Left: not the top-level object's metadata, or not the name.
		{"in spec", `{"spec":{"metadata":{"managedFields":1}}}`, ""},
		{"in annotation", `{"metadata":{"annotations":{"managedFields":"1"}}}`, ""},
		{"case", `{"metadata":{"ManagedFields":1},"Metadata":{"managedFields":1}}`, ""},
		{"nested items", `{"spec":{"items":[{"metadata":{"managedFields":1}}]}}`, ""},
		{"item's items", `{"items":[{"items":[{"metadata":{"managedFields":1}}]}]}`, ""},
		{"annotation elsewhere", `{"metadata":{"labels":{"` + LastApplied + `":"x"}}}`, ""},
		{"array", `[{"metadata":{"managedFields":1}}]`, ""},
		// Left: not valid JSON.
		{"truncated", `{"metadata":{"managedFields":[]`, ""},
		{"trailing", `{"metadata":{"managedFields":[]}}x`, ""},
		{"two values", `{"metadata":{"managedFields":[]}} {}`, ""},
		{"bad escape", `{"metadata":{"managedFields":"\x"}}`, ""},
		{"control", "{\"metadata\":{\"managedFields\":\"\n\"}}", ""},
		{"bad number", `{"metadata":{"managedFields":01}}`, ""},
		{"bad fraction", `{"metadata":{"managedFields":1.}}`, ""},
		{"bad literal", `{"metadata":{"managedFields":nul}}`, ""},
		{"trailing comma", `{"metadata":{"managedFields":[],}}`, ""},
		{"deep", `{"metadata":{"managedFields":[]},"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = tc.in
			}
			got := Strip([]byte(tc.in))
			if string(got) != want {
				t.Errorf("Strip(%s)\n = %s\nwant %s", tc.in, got, want)
			}
			if tc.want != "" && !json.Valid(got) {
				t.Errorf("Strip(%s) is not valid JSON", tc.in)
			}
		})
	}
}

// TestStripKeepsInput: data is not written to, and returned itself when
// nothing is cut.
func TestStripKeepsInput(t *testing.T) {
	in := []byte(`{"metadata":{"name":"a","managedFields":[]}}`)
	orig := bytes.Clone(in)
	if Strip(in); !bytes.Equal(in, orig) {
		t.Errorf("Strip changed its input to %s", in)
	}
	same := []byte(`{"metadata":{"name":"a"}}`)
	if got := Strip(same); &got[0] != &same[0] {
		t.Error("Strip copied data it had nothing to cut from")
	}
}
