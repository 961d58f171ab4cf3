package webapp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// walker is FirstDifference on a typed live object: desired (an apply
// configuration) and live are read side by side, field by JSON name, so
// that neither is encoded. It finds the path the tests' reference through
// encoding/json (differenceJSON) finds: an
// object's fields and keys in sorted order, lists keyed by name as
// server-side apply merges them. A field live's type does not have, or
// holds as a zero value it omits when desired sets that zero, is how the
// API server stores it, so it is up to date (see FirstDifference).
//
// The path is a stack of segments, written out only for a difference.
type walker struct{ segs []segment }

type segment struct {
	key   string // a field's or a map key's name; a list element's "name"
	index int    // a list element's position, when not named
	kind  byte   // '.' key, 'n' named element, 'i' indexed element
}

func (w *walker) path() string {
	var b strings.Builder
	for _, s := range w.segs {
		switch s.kind {
		case '.':
			b.WriteString(".")
			b.WriteString(s.key)
		case 'n':
			fmt.Fprintf(&b, "[name=%s]", s.key)
		default:
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	return orRoot(b.String())
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}

// at compares d and l one segment down.
func (w *walker) at(s segment, d, l reflect.Value) (bool, error) {
	w.segs = append(w.segs, s)
	differs, err := w.walk(d, l)
	if !differs && err == nil {
		w.segs = w.segs[:len(w.segs)-1]
	}
	return differs, err
}

// differsAt reports a difference one segment down.
func (w *walker) differsAt(s segment) (bool, error) {
	w.segs = append(w.segs, s)
	return true, nil
}

func (w *walker) walk(d, l reflect.Value) (bool, error) {
	for d.Kind() == reflect.Pointer || d.Kind() == reflect.Interface {
		if d.IsNil() {
			return false, nil // desired does not set it
		}
		d = d.Elem()
	}
	for l.Kind() == reflect.Pointer || l.Kind() == reflect.Interface {
		if l.IsNil() { // null: only an empty list is the same
			return d.Kind() != reflect.Slice || d.Len() > 0, nil
		}
		l = l.Elem()
	}
	switch {
	case marshals(d.Type()) || d.Kind() == reflect.Slice && d.Type().Elem().Kind() == reflect.Uint8:
		return leafDiffers(d, l)
	case d.Kind() == reflect.Struct:
		return w.structDiffers(d, l)
	case d.Kind() == reflect.Map:
		return w.mapDiffers(d, l)
	case d.Kind() == reflect.Slice:
		return w.sliceDiffers(d, l)
	}
	return leafDiffers(d, l)
}

func (w *walker) structDiffers(d, l reflect.Value) (bool, error) {
	if l.Kind() != reflect.Struct {
		return true, nil
	}
	liveFields := fieldSetOf(l.Type()).byName
	for _, f := range fieldSetOf(d.Type()).sorted {
		if len(w.segs) == 0 && (f.name == "apiVersion" || f.name == "kind") {
			continue // an informer's objects have none: the decoder clears them
		}
		dv, ok := fieldOf(d, f)
		if !ok {
			continue
		}
		lf, has := liveFields[f.name]
		if !has {
			continue // live's type cannot hold it: the API server drops it too
		}
		lv, ok := fieldOf(l, lf)
		if !ok && !encodesEmpty(dv) && !zeroOmitted(dv, lf) {
			return w.differsAt(segment{key: f.name, kind: '.'})
		}
		if !ok {
			continue
		}
		if differs, err := w.at(segment{key: f.name, kind: '.'}, dv, lv); differs || err != nil {
			return differs, err
		}
	}
	return false, nil
}

func (w *walker) mapDiffers(d, l reflect.Value) (bool, error) {
	if l.Kind() != reflect.Map || l.IsNil() || !d.Type().Key().ConvertibleTo(l.Type().Key()) {
		return true, nil // not an object, or null
	}
	keys := d.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		s := segment{key: k.String(), kind: '.'}
		dv := d.MapIndex(k)
		lv := l.MapIndex(k.Convert(l.Type().Key()))
		if !lv.IsValid() {
			if encodesEmpty(dv) {
				continue
			}
			return w.differsAt(s)
		}
		if differs, err := w.at(s, dv, lv); differs || err != nil {
			return differs, err
		}
	}
	return false, nil
}

// sliceDiffers matches the elements of lists keyed by name (containers,
// env, ports, volumes, mounts) by name, and other lists by position; live
// may hold more elements.
func (w *walker) sliceDiffers(d, l reflect.Value) (bool, error) {
	if d.Len() == 0 {
		return false, nil
	}
	if l.Kind() != reflect.Slice {
		return true, nil
	}
	if dNames, ok := names(d); ok {
		if lNames, ok := names(l); ok {
			for i, name := range dNames {
				s := segment{key: name, kind: 'n'}
				j := lastIndex(lNames, name) // the last of a duplicated name, as a merge keeps
				if j < 0 {
					return w.differsAt(s)
				}
				if differs, err := w.at(s, d.Index(i), l.Index(j)); differs || err != nil {
					return differs, err
				}
			}
			return false, nil
		}
	}
	if l.Len() < d.Len() {
		return true, nil
	}
	for i := range d.Len() {
		if differs, err := w.at(segment{index: i, kind: 'i'}, d.Index(i), l.Index(i)); differs || err != nil {
			return differs, err
		}
	}
	return false, nil
}

func lastIndex(list []string, s string) int {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == s {
			return i
		}
	}
	return -1
}

// names returns the "name" of every element of list, if each is an object
// that has one in JSON.
func names(list reflect.Value) ([]string, bool) {
	out := make([]string, list.Len())
	for i := range list.Len() {
		e := reflect.Indirect(list.Index(i))
		if e.Kind() != reflect.Struct {
			return nil, false
		}
		f, ok := fieldSetOf(e.Type()).byName["name"]
		if !ok {
			return nil, false
		}
		v, ok := fieldOf(e, f)
		if v = reflect.Indirect(v); !ok || v.Kind() != reflect.String {
			return nil, false
		}
		out[i] = v.String()
	}
	return out, len(out) > 0
}

// leafDiffers compares two values as encoding/json writes them.
func leafDiffers(d, l reflect.Value) (bool, error) {
	plain := !marshals(d.Type()) && !marshals(l.Type())
	switch {
	case plain && d.Kind() == reflect.String && l.Kind() == reflect.String:
		return d.String() != l.String(), nil
	case plain && d.Kind() == reflect.Bool && l.Kind() == reflect.Bool:
		return d.Bool() != l.Bool(), nil
	case plain && d.CanInt() && l.CanInt():
		return d.Int() != l.Int(), nil
	}
	// Quantities, IntOrStrings, times, bytes: encoded as they encode
	// themselves, one leaf at a time.
	dj, err := json.Marshal(d.Interface())
	if err != nil {
		return false, err
	}
	lj, err := json.Marshal(l.Interface())
	if err != nil {
		return false, err
	}
	if bytes.Equal(dj, lj) {
		return false, nil
	}
	return !sameJSON(dj, lj), nil
}

// sameJSON tells whether two encodings hold equal values, written
// differently (1 and 1.0, say); one that does not decode is not equal.
func sameJSON(a, b []byte) bool {
	var av, bv any
	if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(av, bv)
}

// encodesEmpty tells whether desired's value d encodes as {}, [] or null,
// which live may lack.
func encodesEmpty(d reflect.Value) bool {
	d = reflect.Indirect(d)
	switch {
	case !d.IsValid():
		return true
	case d.Kind() == reflect.Interface:
		return d.IsNil() || encodesEmpty(d.Elem())
	case marshals(d.Type()):
		return false
	case d.Kind() == reflect.Map || d.Kind() == reflect.Slice:
		return d.Len() == 0
	case d.Kind() == reflect.Struct:
		for _, f := range fieldSetOf(d.Type()).sorted {
			if _, ok := fieldOf(d, f); ok {
				return false
			}
		}
		return true
	}
	return false
}

// zeroOmitted tells whether desired's value dv is the zero value of live's
// field lf, which lf's type omits (omitempty on a plain string, say): it
// is stored as no value at all, so live lacking it is up to date.
func zeroOmitted(dv reflect.Value, lf field) bool {
	dv = reflect.Indirect(dv)
	switch lf.typ.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Struct:
		return false // a set pointer, map, list or object is kept even when empty
	}
	return lf.omitEmpty && dv.Kind() == lf.typ.Kind() && dv.IsZero()
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

var marshalers sync.Map // reflect.Type → bool

// marshals tells whether t has an encoding of its own. It is asked of
// every value walked; the answer per type is kept.
func marshals(t reflect.Type) bool {
	if m, ok := marshalers.Load(t); ok {
		return m.(bool)
	}
	m := t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
	marshalers.Store(t, m)
	return m
}

// field is a struct field as encoding/json sees it.
type field struct {
	name      string
	index     []int
	typ       reflect.Type
	omitEmpty bool
}

type fieldSet struct {
	sorted []field // by name, as differenceJSON visits an object's keys
	byName map[string]field
}

var fieldSets sync.Map // reflect.Type → *fieldSet

// fieldSetOf lists t's JSON fields, embedded structs without a name
// inlined. A name found more than once is resolved as encoding/json does,
// so that the walk reads the value that the encoding holds: the shallowest
// field wins, then a tagged one over an untagged one; two left equal cancel
// out, and the name is not written at all.
func fieldSetOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	type candidate struct {
		field
		tagged bool
	}
	byName := map[string][]candidate{} // per name, in order of depth
	// Breadth first, a depth at a time: a struct type already seen at a
	// shallower depth adds nothing that is not dominated (or cancelled).
	type level struct {
		typ   reflect.Type
		index []int
	}
	visited := map[reflect.Type]bool{}
	for next := []level{{t, nil}}; len(next) > 0; {
		current := next
		next = nil
		for _, lv := range current {
			if visited[lv.typ] {
				continue
			}
			visited[lv.typ] = true
			for i := range lv.typ.NumField() {
				sf := lv.typ.Field(i)
				name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
				if name == "-" && opts == "" {
					continue
				}
				idx := append(slices.Clone(lv.index), i)
				if name == "" && sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						next = append(next, level{et, idx})
						continue
					}
				}
				if !sf.IsExported() {
					continue
				}
				tagged := name != ""
				if !tagged {
					name = sf.Name
				}
				byName[name] = append(byName[name], candidate{
					field:  field{name: name, index: idx, typ: sf.Type, omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty")},
					tagged: tagged,
				})
			}
		}
	}
	fs := &fieldSet{byName: map[string]field{}}
	for name, cs := range byName {
		// cs is in order of depth; among the shallowest, a tagged one wins.
		depth := len(cs[0].index)
		var tagged, untagged []candidate
		for _, c := range cs {
			if len(c.index) != depth {
				break
			}
			if c.tagged {
				tagged = append(tagged, c)
			} else {
				untagged = append(untagged, c)
			}
		}
		switch {
		case len(tagged) == 1:
			fs.byName[name] = tagged[0].field
		case len(tagged) == 0 && len(untagged) == 1:
			fs.byName[name] = untagged[0].field
		}
	}
	for _, f := range fs.byName {
		fs.sorted = append(fs.sorted, f)
	}
	slices.SortFunc(fs.sorted, func(a, b field) int { return strings.Compare(a.name, b.name) })
	actual, _ := fieldSets.LoadOrStore(t, fs)
	return actual.(*fieldSet)
}

// fieldOf is v's field f, and whether encoding/json writes it: not when
// an embedded pointer on the way is nil, nor when omitempty omits it; a
// nil without omitempty is written, as null.
func fieldOf(v reflect.Value, f field) (reflect.Value, bool) {
	fv, err := v.FieldByIndexErr(f.index)
	if err != nil {
		return fv, false
	}
	switch fv.Kind() {
	case reflect.Pointer, reflect.Interface:
		return fv, !fv.IsNil() || !f.omitEmpty
	case reflect.Map, reflect.Slice:
		return fv, !f.omitEmpty || fv.Len() > 0
	case reflect.Struct:
		return fv, true
	}
	return fv, !f.omitEmpty || !fv.IsZero()
}
