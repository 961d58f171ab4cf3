package webapp

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// UpToDate tells whether live already holds what applying desired would
// write, so the reconciler can skip the request. Two things must hold:
//
//   - live carries desired's applied-hash annotation: the configuration last
//     applied is this one (so a field removed from desired, which a subset
//     test cannot see, still forces an apply that removes it);
//   - every field desired sets has the same value in live: nobody edited a
//     field we own since (drift), which the hash alone cannot see.
//
// Fields that live has and desired does not (server defaults, status, other
// managers' fields) do not matter. Both sides go through encoding/json, so
// quantities and the like compare in canonical form.
func UpToDate(desired any, live any) (bool, error) {
	d, err := toJSONValue(desired)
	if err != nil {
		return false, err
	}
	l, err := toJSONValue(live)
	if err != nil {
		return false, err
	}
	return subset(d, l), nil
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

// subset reports whether every value in want is present and equal in got.
func subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				if isEmpty(wv) {
					continue // an empty value and an absent one are the same to the API
				}
				return false
			}
			if !subset(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		return listSubset(w, g)
	default:
		return reflect.DeepEqual(want, got)
	}
}

// listSubset matches the elements of lists keyed by "name" (containers, env,
// ports, volumes, mounts) by name, as server-side apply merges them, and
// other lists by position; got may hold more elements than want.
func listSubset(want, got []any) bool {
	if keyed(want) && keyed(got) {
		byName := make(map[any]any, len(got))
		for _, g := range got {
			byName[g.(map[string]any)["name"]] = g
		}
		for _, w := range want {
			g, ok := byName[w.(map[string]any)["name"]]
			if !ok || !subset(w, g) {
				return false
			}
		}
		return true
	}
	if len(got) < len(want) {
		return false
	}
	for i := range want {
		if !subset(want[i], got[i]) {
			return false
		}
	}
	return true
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
