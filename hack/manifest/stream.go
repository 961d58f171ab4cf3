package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// documents parses every document of r and returns their roots, leaving out
// empty documents ("---" followed by nothing, or by comments only).
func documents(r io.Reader) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(r)
	var roots []*yaml.Node
	for i := 1; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return roots, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		if root := doc.Content[0]; root.Kind != yaml.ScalarNode || root.Tag != "!!null" {
			roots = append(roots, root)
		}
	}
}

// objects returns the API objects the documents hold, in order. A mapping
// is one, unless it is a List (its kind ends in List and it has items),
// which holds its items, as kubectl reads it; a sequence holds its items.
func objects(roots []*yaml.Node) ([]*yaml.Node, error) {
	var out []*yaml.Node
	var walk func(n *yaml.Node, where string) error
	walk = func(n *yaml.Node, where string) error {
		n = deref(n)
		switch n.Kind {
		case yaml.SequenceNode:
			for i, item := range n.Content {
				if err := walk(item, fmt.Sprintf("%s, item %d", where, i+1)); err != nil {
					return err
				}
			}
			return nil
		case yaml.MappingNode:
			kind, err := scalarValue(n, "kind")
			if err != nil || kind == "" {
				return fmt.Errorf("%s (line %d): not an object with a kind", where, n.Line)
			}
			items, err := mappingValue(n, "items")
			if err != nil {
				return fmt.Errorf("%s (line %d): %w", where, n.Line, err)
			}
			if !strings.HasSuffix(kind, "List") || items == nil {
				out = append(out, n)
				return nil
			}
			if items = deref(items); items.Kind == yaml.ScalarNode && items.Tag == "!!null" {
				return nil
			}
			if items.Kind != yaml.SequenceNode {
				return fmt.Errorf("%s (line %d): a %s whose items are not a list", where, n.Line, kind)
			}
			return walk(items, where)
		default:
			return fmt.Errorf("%s (line %d): not an object", where, n.Line)
		}
	}
	for i, root := range roots {
		if err := walk(root, fmt.Sprintf("document %d", i+1)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readObjects reads the objects of the file named by path ("-": stdin).
func readObjects(path string) ([]*yaml.Node, error) {
	r := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	roots, err := documents(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	objs, err := objects(roots)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// kinds is a flag that may be given more than once.
type kinds []string

func (k *kinds) String() string     { return strings.Join(*k, ",") }
func (k *kinds) Set(v string) error { *k = append(*k, v); return nil }

func runSelect(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("select", flag.ContinueOnError)
	var only, except kinds
	fs.Var(&only, "kind", "print the objects of this kind (repeatable)")
	fs.Var(&except, "except-kind", "print the objects of every kind but this one (repeatable)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || (len(only) > 0) == (len(except) > 0) {
		return errUsage
	}
	objs, err := readObjects(fs.Arg(0))
	if err != nil {
		return err
	}
	enc := yaml.NewEncoder(stdout)
	enc.SetIndent(2)
	printed := 0
	for _, o := range objs {
		kind, _ := scalarValue(o, "kind")
		if slices.Contains(only, kind) || (len(except) > 0 && !slices.Contains(except, kind)) {
			if err := enc.Encode(expand(o)); err != nil {
				return err
			}
			printed++
		}
	}
	if printed == 0 {
		return nil // the encoder refuses to close a stream it never opened
	}
	return enc.Close()
}

func runNamespace(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("namespace", flag.ContinueOnError)
	kind := fs.String("kind", "", "the object's kind")
	name := fs.String("name", "", "the object's name")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || *kind == "" || *name == "" {
		return errUsage
	}
	objs, err := readObjects(fs.Arg(0))
	if err != nil {
		return err
	}
	var found []string
	for _, o := range objs {
		k, _ := scalarValue(o, "kind")
		meta, _ := mappingValue(o, "metadata")
		if k != *kind || meta == nil {
			continue
		}
		if n, _ := scalarValue(deref(meta), "name"); n == *name {
			ns, err := scalarValue(deref(meta), "namespace")
			if err != nil {
				return fmt.Errorf("%s %s: %w", *kind, *name, err)
			}
			found = append(found, ns)
		}
	}
	switch {
	case len(found) != 1:
		return fmt.Errorf("%s holds %d objects %s %s, want one", fs.Arg(0), len(found), *kind, *name)
	case found[0] == "":
		return fmt.Errorf("%s %s in %s has no namespace", *kind, *name, fs.Arg(0))
	}
	_, err = fmt.Fprintln(stdout, found[0])
	return err
}

// mappingValue returns the value of key in the mapping m, nil if it has
// none. A key given twice is an error: which one counts differs between
// parsers.
func mappingValue(m *yaml.Node, key string) (*yaml.Node, error) {
	var v *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			if v != nil {
				return nil, fmt.Errorf("line %d: %s given twice", k.Line, key)
			}
			v = m.Content[i+1]
		}
	}
	return v, nil
}

// scalarValue returns the scalar value of key in the mapping m, "" if it
// has none.
func scalarValue(m *yaml.Node, key string) (string, error) {
	v, err := mappingValue(m, key)
	if err != nil || v == nil {
		return "", err
	}
	if v = deref(v); v.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: %s is not a scalar", v.Line, key)
	}
	return v.Value, nil
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// expand returns a copy of n with every alias replaced by a copy of what it
// names, and no anchors: an object printed on its own, out of a List, must
// not refer to an anchor left behind in another item.
func expand(n *yaml.Node) *yaml.Node {
	n = deref(n)
	c := *n
	c.Anchor, c.Alias = "", nil
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = expand(child)
	}
	return &c
}
