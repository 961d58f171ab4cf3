package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// imageKeys are the keys of manager.image that name the image, in the
// order they are set.
var imageKeys = []string{"repository", "tag", "digest"}

func runChartImage(args []string) error {
	if len(args) != 2 {
		return errUsage
	}
	ref, err := parseImage(args[0])
	if err != nil {
		return err
	}
	path := args[1]
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	values, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := setChartImage(values, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Replace the file whole: an interrupted write must not leave half of it.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, info.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// setChartImage returns values with manager.image.repository, .tag and
// .digest set to ref's name, tag and digest. The parser finds each value;
// only its bytes are replaced, so that comments, key order, blank lines
// and line ends stay as they are (an encoder would rewrite them all). A
// key that is absent stays absent when its value is to be empty. The
// result is parsed again and must equal values but for the keys set.
func setChartImage(values []byte, ref imageRef) ([]byte, error) {
	root, err := oneDocument(values)
	if err != nil {
		return nil, err
	}
	image, err := mappingAt(root, "manager", "image")
	if err != nil {
		return nil, err
	}
	want := map[string]string{"repository": ref.name, "tag": ref.tag, "digest": ref.digest}
	var edits []edit
	set := map[string]string{}
	for _, key := range imageKeys {
		v, err := mappingValue(image, key)
		if err != nil {
			return nil, fmt.Errorf("manager.image: %w", err)
		}
		switch {
		case v == nil && want[key] == "":
		case v == nil:
			return nil, fmt.Errorf("manager.image has no %s to set to %q", key, want[key])
		case holds(v, want[key]):
		default:
			e, err := scalarEdit(values, v, want[key], image.Style&yaml.FlowStyle != 0)
			if err != nil {
				return nil, fmt.Errorf("manager.image.%s: %w", key, err)
			}
			edits = append(edits, e)
			set[key] = want[key]
		}
	}
	out := applyEdits(values, edits)
	if err := sameBut(values, out, set); err != nil {
		return nil, err
	}
	return out, nil
}

// holds reports whether the scalar v already says s to helm: a string s,
// or, for an empty s, null too (the chart treats both as unset).
func holds(v *yaml.Node, s string) bool {
	if v.Kind != yaml.ScalarNode {
		return false
	}
	return (v.Tag == "!!str" && v.Value == s) || (s == "" && v.Tag == "!!null")
}

// oneDocument parses data, which must hold one document, a mapping.
func oneDocument(data []byte) (*yaml.Node, error) {
	docs, err := documents(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 || docs[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want one YAML document, a mapping; found %d documents", len(docs))
	}
	return docs[0], nil
}

// mappingAt follows keys from the mapping m to a mapping.
func mappingAt(m *yaml.Node, keys ...string) (*yaml.Node, error) {
	for i, key := range keys {
		v, err := mappingValue(m, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(keys[:i], "."), err)
		}
		if v == nil || v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s is not a mapping", strings.Join(keys[:i+1], "."))
		}
		m = v
	}
	return m, nil
}

// An edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

func applyEdits(src []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return b.start - a.start })
	out := slices.Clone(src)
	for _, e := range edits {
		out = slices.Concat(out[:e.start], []byte(e.text), out[e.end:])
	}
	return out
}

// scalarEdit replaces the one-line scalar v of src with value, written in
// v's style (a plain value that would not read back as that string is
// double-quoted). flow: v is inside a flow mapping, where ",[]{}" end a
// plain scalar.
func scalarEdit(src []byte, v *yaml.Node, value string, flow bool) (edit, error) {
	switch {
	case v.Kind != yaml.ScalarNode:
		return edit{}, fmt.Errorf("line %d: not a scalar", v.Line)
	case v.Anchor != "" || v.Style&yaml.TaggedStyle != 0:
		return edit{}, fmt.Errorf("line %d: an anchor or a tag; write the value alone", v.Line)
	case v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return edit{}, fmt.Errorf("line %d: a block scalar; write the value on the key's line", v.Line)
	}
	start, ok := offset(src, v.Line, v.Column)
	if !ok {
		return edit{}, fmt.Errorf("line %d column %d is not in the file", v.Line, v.Column)
	}
	if v.Tag == "!!null" && v.Value == "" { // "key:" and nothing: insert after the colon
		return edit{start, start, " " + render(value, v.Style, flow)}, nil
	}
	end := scalarEnd(src, start, v.Style, flow)
	if got, err := parseScalar(string(src[start:end]), flow); err != nil || got.Value != v.Value || got.Style != v.Style {
		return edit{}, fmt.Errorf("line %d: %q is not the whole value %q: write it on one line", v.Line, src[start:end], v.Value)
	}
	return edit{start, end, render(value, v.Style, flow)}, nil
}

// offset is the byte offset of line and column (1-based; columns count
// characters, as the parser counts them).
func offset(src []byte, line, column int) (int, bool) {
	i := 0
	for l := 1; l < line; l++ {
		n := bytes.IndexAny(src[i:], "\r\n")
		if n < 0 {
			return 0, false
		}
		i += n + 1
		if src[i-1] == '\r' && i < len(src) && src[i] == '\n' {
			i++
		}
	}
	for c := 1; c < column; c++ {
		if i >= len(src) || src[i] == '\n' || src[i] == '\r' {
			return 0, false
		}
		_, size := utf8.DecodeRune(src[i:])
		i += size
	}
	return i, true
}

// scalarEnd is the end of the one-line scalar of the given style that
// starts at src[start]. The caller checks that what it spans parses as
// the parser's value.
func scalarEnd(src []byte, start int, style yaml.Style, flow bool) int {
	i := start
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		for i++; i < len(src) && src[i] != '"' && src[i] != '\n' && src[i] != '\r'; i++ {
			if src[i] == '\\' {
				i++
			}
		}
		return min(i+1, len(src))
	case style&yaml.SingleQuotedStyle != 0:
		for i++; i < len(src) && src[i] != '\n' && src[i] != '\r'; i++ {
			if src[i] == '\'' {
				if i+1 < len(src) && src[i+1] == '\'' {
					i++
					continue
				}
				break
			}
		}
		return min(i+1, len(src))
	}
	for ; i < len(src); i++ {
		c := src[i]
		if c == '\n' || c == '\r' || (c == '#' && (src[i-1] == ' ' || src[i-1] == '\t')) ||
			(flow && strings.IndexByte(",[]{}", c) >= 0) {
			break
		}
	}
	for i > start && (src[i-1] == ' ' || src[i-1] == '\t') {
		i--
	}
	return i
}

// parseScalar parses text as the value of a key, in a flow mapping or a
// block one.
func parseScalar(text string, flow bool) (*yaml.Node, error) {
	doc := "k: " + text
	if flow {
		doc = "{k: " + text + "}"
	}
	root, err := oneDocument([]byte(doc))
	if err != nil {
		return nil, err
	}
	v, err := mappingValue(root, "k")
	if err != nil || v == nil || v.Kind != yaml.ScalarNode || len(root.Content) != 2 {
		return nil, fmt.Errorf("%q is not one scalar", text)
	}
	return v, nil
}

// render writes s as a YAML scalar in style: quoted as asked, plain where
// plain reads back as the string s, else double-quoted.
func render(s string, style yaml.Style, flow bool) string {
	doubleQuoted := func() string {
		b, _ := json.Marshal(s) // a JSON string is a YAML double-quoted scalar
		return string(b)
	}
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		return doubleQuoted()
	case style&yaml.SingleQuotedStyle != 0:
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	if v, err := parseScalar(s, flow); err == nil && v.Tag == "!!str" && v.Value == s && v.Style == 0 {
		return s
	}
	return doubleQuoted()
}

// sameBut checks that after parses as before with manager.image's keys in
// set set to their values, and nothing else changed.
func sameBut(before, after []byte, set map[string]string) error {
	var want, got map[string]any
	if err := yaml.Unmarshal(before, &want); err != nil {
		return err
	}
	if err := yaml.Unmarshal(after, &got); err != nil {
		return fmt.Errorf("the edited file does not parse: %w", err)
	}
	manager, _ := want["manager"].(map[string]any)
	image, ok := manager["image"].(map[string]any)
	if !ok {
		return fmt.Errorf("manager.image does not parse as a mapping of strings")
	}
	for k, v := range set {
		image[k] = v
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("the edit changed more than manager.image (a bug in this helper): refusing to write it")
	}
	return nil
}
