package admission

import (
	"encoding/json"
	"strings"
	"testing"
)

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
