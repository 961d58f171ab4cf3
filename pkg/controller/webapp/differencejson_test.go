package webapp

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// differenceJSON is FirstDifference through encoding/json, both sides
// whole: the comparison the typed walk replaced, kept as the reference the
// tests hold it to, on typed objects, Unstructured ones and plain maps.
func differenceJSON(desired any, live any) (string, error) {
	d, err := toJSONValue(desired)
	if err != nil {
		return "", err
	}
	l, err := toJSONValue(live)
	if err != nil {
		return "", err
	}
	stored, err := asStored(desired, live)
	if err != nil {
		return "", err
	}
	// Objects from an informer carry no apiVersion and kind: the decoder
	// clears them once the type is known. They say nothing about drift.
	if m, ok := d.(map[string]any); ok {
		delete(m, "apiVersion")
		delete(m, "kind")
	}
	return difference(d, stored, l, ""), nil
}

// asStored decodes desired into a new value of live's type and encodes it
// again: what an object of that type can hold of desired. It is desired
// itself when live is not a struct (an unstructured object, say).
func asStored(desired any, live any) (any, error) {
	t := reflect.TypeOf(live)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return toJSONValue(desired)
	}
	data, err := json.Marshal(desired)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", desired, err)
	}
	typed := reflect.New(t).Interface()
	if err := json.Unmarshal(data, typed); err != nil {
		return nil, fmt.Errorf("decoding %T as %s: %w", desired, t, err)
	}
	return toJSONValue(typed)
}

func toJSONValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// difference returns the path of the first value in want that is not
// present and equal in got, or "" when want is a subset of got. stored is
// want as live's type holds it (nil where that is unknown): a field want
// sets and stored lacks is one the type drops, so got cannot have it either.
func difference(want, stored, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return orRoot(path)
		}
		s, _ := stored.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			sv, kept := s[k] // a nil map lacks every key
			gv, ok := g[k]
			if !ok {
				if isEmpty(w[k]) {
					continue // an empty value and an absent one are the same to the API
				}
				if s != nil && !kept {
					continue // live's type drops it (omitempty): absent is how it is stored
				}
				return path + "." + k
			}
			if d := difference(w[k], sv, gv, path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			if len(w) == 0 && got == nil {
				return ""
			}
			return orRoot(path)
		}
		s, _ := stored.([]any)
		if len(s) != len(w) {
			s = nil // not element for element: compare strictly
		}
		return listDifference(w, s, g, path)
	default:
		if reflect.DeepEqual(want, got) {
			return ""
		}
		return orRoot(path)
	}
}

// listDifference matches the elements of lists keyed by "name" (containers,
// env, ports, volumes, mounts) by name, as server-side apply merges them,
// and other lists by position; got may hold more elements than want. stored
// is nil or want's stored form, element for element.
func listDifference(want, stored, got []any, path string) string {
	storedAt := func(i int) any {
		if stored == nil {
			return nil
		}
		return stored[i]
	}
	if keyed(want) && keyed(got) {
		byName := make(map[any]any, len(got))
		for _, g := range got {
			byName[g.(map[string]any)["name"]] = g
		}
		for i, w := range want {
			name := w.(map[string]any)["name"]
			p := fmt.Sprintf("%s[name=%v]", path, name)
			g, ok := byName[name]
			if !ok {
				return p
			}
			if d := difference(w, storedAt(i), g, p); d != "" {
				return d
			}
		}
		return ""
	}
	if len(got) < len(want) {
		return orRoot(path)
	}
	for i := range want {
		if d := difference(want[i], storedAt(i), got[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
			return d
		}
	}
	return ""
}

func keyed(list []any) bool {
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"]; !ok {
			return false
		}
	}
	return len(list) > 0
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
