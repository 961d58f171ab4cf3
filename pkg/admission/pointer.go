package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

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

// unescapePointerToken reads a JSON Pointer token (RFC 6901 section 4):
// "~1" first, so that an escaped "~01" reads as "~1".
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
