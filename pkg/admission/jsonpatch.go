package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Operation is one RFC 6902 JSON Patch operation. Only the three a diff
// needs are produced: add, replace and remove.
type Operation struct {
	Op    string // "add", "replace" or "remove"
	Path  string // an RFC 6901 JSON Pointer
	Value any    // the new value; unused for remove
}

// MarshalJSON writes "value" for add and replace even when it is null (a
// field tag with omitempty would drop it and change the operation's meaning),
// and never for remove.
func (o Operation) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// CreateJSONPatch returns operations that turn the JSON document from into
// the document to. Objects are compared key by key (in sorted order, so the
// same inputs always give the same patch); arrays element by element, with
// additions or removals at the end; anything else that differs is replaced.
// An element inserted at the front of an array therefore becomes a run of
// replaces rather than one add: correct, not minimal, and enough for
// defaulting, which fills in fields and never reorders lists.
func CreateJSONPatch(from, to []byte) ([]Operation, error) {
	a, err := decodeJSON(from)
	if err != nil {
		return nil, fmt.Errorf("decoding the original document: %w", err)
	}
	b, err := decodeJSON(to)
	if err != nil {
		return nil, fmt.Errorf("decoding the new document: %w", err)
	}
	var ops []Operation
	diff("", a, b, &ops)
	return ops, nil
}

// decodeJSON keeps numbers as written (json.Number), so that 64-bit integers
// survive and are compared exactly.
func decodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func diff(path string, a, b any, ops *[]Operation) {
	if reflect.DeepEqual(a, b) {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			diffObjects(path, av, bv, ops)
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			diffArrays(path, av, bv, ops)
			return
		}
	}
	*ops = append(*ops, Operation{Op: "replace", Path: path, Value: b})
}

func diffObjects(path string, a, b map[string]any, ops *[]Operation) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + escapePointerToken(k)
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case inA && !inB:
			*ops = append(*ops, Operation{Op: "remove", Path: p})
		case !inA && inB:
			*ops = append(*ops, Operation{Op: "add", Path: p, Value: bv})
		default:
			diff(p, av, bv, ops)
		}
	}
}

func diffArrays(path string, a, b []any, ops *[]Operation) {
	n := min(len(a), len(b))
	for i := range n {
		diff(path+"/"+strconv.Itoa(i), a[i], b[i], ops)
	}
	// Each add appends at the index that is the current length; removals go
	// from the last index down, so no operation shifts another's index.
	for i := n; i < len(b); i++ {
		*ops = append(*ops, Operation{Op: "add", Path: path + "/" + strconv.Itoa(i), Value: b[i]})
	}
	for i := len(a) - 1; i >= n; i-- {
		*ops = append(*ops, Operation{Op: "remove", Path: path + "/" + strconv.Itoa(i)})
	}
}

// escapePointerToken escapes a key for a JSON Pointer (RFC 6901 section 3):
// "~" first, so that the "~" of an escaped "/" is not escaped again.
func escapePointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// lookupPointer returns the value at pointer in doc, and whether there is one.
func lookupPointer(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[unescapePointerToken(tok)]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
