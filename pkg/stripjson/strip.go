package stripjson

import (
	"bytes"
	"encoding/json"
)

// LastApplied is the annotation kubectl apply writes: a copy of the whole
// object as last applied.
const LastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// maxDepth is encoding/json's nesting limit; deeper documents are left as
// they are for the decoder to refuse.
const maxDepth = 10000

// Strip returns data without the top-level object's metadata.managedFields
// and metadata.annotations[LastApplied], and without the same members of
// each object in the top-level "items" array (a list). Each member goes
// with one comma, so the result is valid JSON. Nothing else is touched:
// members of those names elsewhere (in spec, in an annotation's value)
// stay. Keys are compared as the decoder reads them, escapes resolved and
// case kept.
//
// It is one pass over data, which it checks to be a single valid JSON
// value; when it is not, or nothing is to be removed, data is returned
// itself. Otherwise the result is a new slice: data is not changed. So
// when data decodes, the result decodes to the same object with those
// fields empty.
func Strip(data []byte) []byte {
	s := scanner{data: data, cuts: make([]span, 0, 4)}
	if !s.document() || len(s.cuts) == 0 {
		return data
	}
	n := len(data)
	for _, c := range s.cuts {
		n -= c.to - c.from
	}
	out := make([]byte, 0, n)
	from := 0
	for _, c := range s.cuts {
		out = append(out, data[from:c.from]...)
		from = c.to
	}
	return append(out, data[from:]...)
}

// where says what a value is in the document, and so which of its
// members are looked at.
type where uint8

const (
	elsewhere   where = iota // nothing in it is removed
	top                      // the document: an object, or a list
	items                    // a list's items
	item                     // one item: an object
	metadata                 // an object's metadata
	annotations              // its annotations
)

// span is [from, to) of data.
type span struct{ from, to int }

type scanner struct {
	data  []byte
	pos   int
	depth int
	cuts  []span // in order, apart: checked by cut
	bad   bool   // a cut out of order: never expected, but then nothing is cut
}

// document scans data as one JSON value with optional whitespace around.
func (s *scanner) document() bool {
	s.space()
	if !s.value(top) {
		return false
	}
	s.space()
	return s.pos == len(s.data) && !s.bad
}

func (s *scanner) cut(from, to int) {
	if n := len(s.cuts); from > to || n > 0 && from < s.cuts[n-1].to {
		s.bad = true
		return
	}
	s.cuts = append(s.cuts, span{from, to})
}

func (s *scanner) value(w where) bool {
	if s.pos >= len(s.data) {
		return false
	}
	switch s.data[s.pos] {
	case '{':
		return s.object(w)
	case '[':
		return s.array(w)
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// object scans an object; of those where says are looked at, the members
// to remove are cut out.
func (s *scanner) object(w where) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.pos++ // '{'
	s.space()
	m := members{last: -1, pending: -1}
	if s.next('}') {
		s.depth--
		return true
	}
	for {
		key := s.pos
		escaped, ok := s.str()
		if !ok {
			return false
		}
		name := s.data[key:s.pos]
		s.space()
		if !s.next(':') {
			return false
		}
		s.space()
		m.begin(s, key)
		drop, inner := member(w, name, escaped)
		if !s.value(inner) {
			return false
		}
		m.done(s, key, s.pos, drop)
		s.space()
		if s.next(',') {
			s.space()
			continue
		}
		if !s.next('}') {
			return false
		}
		m.end(s)
		s.depth--
		return true
	}
}

// members cuts an object's removed members out with one comma each: the
// one before, when a member precedes, else the one after.
type members struct {
	last       int // end of the previous member's value; -1: none left before
	pending    int // start of a removed member whose comma after is not yet seen
	pendingEnd int // end of its value
}

// begin is at the key of a member: a removed first member goes with the
// comma between them.
func (m *members) begin(s *scanner, key int) {
	if m.pending >= 0 {
		s.cut(m.pending, key)
		m.pending = -1
	}
}

// done is after a member's value, which ends at end.
func (m *members) done(s *scanner, key, end int, drop bool) {
	switch {
	case !drop:
		m.last = end
	case m.last >= 0:
		s.cut(m.last, end)
		m.last = end
	default:
		m.pending, m.pendingEnd = key, end
	}
}

// end is at the closing brace: a removed member left alone goes alone.
func (m *members) end(s *scanner) {
	if m.pending >= 0 {
		s.cut(m.pending, m.pendingEnd)
	}
}

// member says whether the member of an object at w whose key (quoted) is
// name is removed, and where its value is.
func member(w where, name []byte, escaped bool) (drop bool, inner where) {
	switch w {
	case top:
		if is(name, escaped, "metadata") {
			return false, metadata
		}
		if is(name, escaped, "items") {
			return false, items
		}
	case item:
		if is(name, escaped, "metadata") {
			return false, metadata
		}
	case metadata:
		if is(name, escaped, "managedFields") {
			return true, elsewhere
		}
		if is(name, escaped, "annotations") {
			return false, annotations
		}
	case annotations:
		return is(name, escaped, LastApplied), elsewhere
	}
	return false, elsewhere
}

// is compares a key, quoted, with want. An escaped key (rare) is decoded
// first, as the decoder would.
func is(quoted []byte, escaped bool, want string) bool {
	if !escaped {
		return string(quoted[1:len(quoted)-1]) == want
	}
	var key string
	if err := json.Unmarshal(quoted, &key); err != nil {
		return false
	}
	return key == want
}

func (s *scanner) array(w where) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.pos++ // '['
	s.space()
	if s.next(']') {
		s.depth--
		return true
	}
	inner := elsewhere
	if w == items {
		inner = item
	}
	for {
		if !s.value(inner) {
			return false
		}
		s.space()
		if s.next(',') {
			s.space()
			continue
		}
		if !s.next(']') {
			return false
		}
		s.depth--
		return true
	}
}

// str scans a string and says whether it holds an escape.
func (s *scanner) str() (escaped, ok bool) {
	d := s.data
	if s.pos >= len(d) || d[s.pos] != '"' {
		return false, false
	}
	start := s.pos + 1
	for i := start; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return escaped, true
		case c == '\\':
			n := escapeLen(d[i+1:])
			if n == 0 {
				return false, false
			}
			escaped = true
			i += n
		case c < 0x20:
			return false, false
		}
	}
	return false, false
}

// escapeLen is the length of the escape that rest (after a backslash)
// starts with; 0 when it is not one.
func escapeLen(rest []byte) int {
	if len(rest) == 0 {
		return 0
	}
	switch rest[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(rest) < 5 {
			return 0
		}
		for _, c := range rest[1:5] {
			if !isHex(c) {
				return 0
			}
		}
		return 5
	}
	return 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number scans -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return false
		}
		i = j
	}
	s.pos = i
	return true
}

// digits returns the index after the digits that start at i.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return false
	}
	s.pos += len(lit)
	return true
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next consumes c if it comes next.
func (s *scanner) next(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}
