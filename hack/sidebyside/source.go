package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"strings"
)

// A part is one range of a Go file that a step shows.
//
// Without body, it is the top-level declaration decl, whole, with its doc
// comment. With body, it is the statements of the function decl from the
// one that from names up to, not including, the one that to names: an
// empty from starts at the first statement, an empty to runs to the last.
//
// decl is "name" (a function, type, variable or constant) or "Recv.name"
// (a method). An anchor that starts with "//" names the statement that a
// comment beginning with it precedes; any other anchor names the statement
// whose source contains it. Each must name exactly one statement, so that a
// change that moves or duplicates it fails instead of showing the wrong
// lines.
type part struct {
	file     string // slash-separated, from the repository root
	decl     string
	body     bool
	from, to string
}

// whole is a part that shows the declaration name of file.
func whole(file, name string) part { return part{file: file, decl: name} }

// stmts is a part that shows the statements of fn from from up to to.
func stmts(file, fn, from, to string) part {
	return part{file: file, decl: fn, body: true, from: from, to: to}
}

// span is a range of lines, both included, counted from 1.
type span struct{ from, to int }

// source is one parsed Go file.
type source struct {
	path  string
	fset  *token.FileSet
	file  *ast.File
	src   []byte
	lines []string     // lines[0] is line 1
	code  map[int]bool // the lines that hold code
}

func parseSource(path string, src []byte) (*source, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	code, err := codeLines(path, src)
	if err != nil {
		return nil, err
	}
	return &source{
		path:  path,
		fset:  fset,
		file:  f,
		src:   src,
		lines: strings.Split(string(src), "\n"),
		code:  code,
	}, nil
}

// codeLines are the lines that hold Go tokens other than comments, the rule
// of hack/linecount, so that a step's count and docs/lines.md's agree: the
// semicolons the lexer inserts do not count, every line of a multi-line
// raw string does.
func codeLines(path string, src []byte) (map[int]bool, error) {
	tf := token.NewFileSet().AddFile(path, -1, len(src))
	var s scanner.Scanner
	var scanErr error
	s.Init(tf, src, func(pos token.Position, msg string) {
		if scanErr == nil {
			scanErr = fmt.Errorf("%s: %s", pos, msg)
		}
	}, 0) // mode 0 skips comments
	code := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		first := tf.Line(pos)
		for l := first; l <= first+strings.Count(lit, "\n"); l++ {
			code[l] = true
		}
	}
	return code, scanErr
}

func (s *source) line(p token.Pos) int { return s.fset.Position(p).Line }

func (s *source) text(n ast.Node) string {
	return string(s.src[s.fset.Position(n.Pos()).Offset:s.fset.Position(n.End()).Offset])
}

// count is the number of code lines in sp.
func (s *source) count(sp span) int {
	n := 0
	for l := sp.from; l <= sp.to; l++ {
		if s.code[l] {
			n++
		}
	}
	return n
}

// locate finds p in s; its errors name the step and the file.
func locate(step string, p part, s *source) (span, error) {
	sp, err := s.find(p)
	if err != nil {
		return span{}, fmt.Errorf("step %q: %s: %w (fix the anchor in hack/sidebyside/steps.go)", step, p.file, err)
	}
	return sp, nil
}

func (s *source) find(p part) (span, error) {
	d, err := s.decl(p.decl)
	if err != nil {
		return span{}, err
	}
	if !p.body {
		start := d.Pos()
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc != nil {
				start = d.Doc.Pos()
			}
		case *ast.GenDecl:
			if d.Doc != nil {
				start = d.Doc.Pos()
			}
		}
		return span{s.line(start), s.line(d.End())}, nil
	}
	fn, ok := d.(*ast.FuncDecl)
	if !ok || fn.Body == nil {
		return span{}, fmt.Errorf("%s is not a function with a body", p.decl)
	}
	list := fn.Body.List
	i, j := 0, len(list)
	var anchorLine int
	if p.from != "" {
		if i, anchorLine, err = s.statement(fn, p.from); err != nil {
			return span{}, err
		}
	}
	if p.to != "" {
		if j, _, err = s.statement(fn, p.to); err != nil {
			return span{}, err
		}
	}
	if i >= j {
		return span{}, fmt.Errorf("in %s, %q does not come before %q", p.decl, p.from, p.to)
	}
	from := s.leading(fn, i)
	if anchorLine != 0 && anchorLine < from {
		from = anchorLine
	}
	return span{from, s.line(list[j-1].End())}, nil
}

// decl returns the one top-level declaration named name.
func (s *source) decl(name string) (ast.Decl, error) {
	recv, fn, method := strings.Cut(name, ".")
	if !method {
		recv, fn = "", name
	}
	var found []ast.Decl
	for _, d := range s.file.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name == fn && receiver(d) == recv {
				found = append(found, d)
			}
		case *ast.GenDecl:
			if method {
				continue
			}
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					if sp.Name.Name == fn {
						found = append(found, d)
					}
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.Name == fn {
							found = append(found, d)
						}
					}
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no declaration %s", name)
	case 1:
		return found[0], nil
	default:
		return nil, fmt.Errorf("%d declarations named %s", len(found), name)
	}
}

// receiver is the name of d's receiver type, "" for a function.
func receiver(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	t := d.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// statement returns the index of the one statement of fn's body that anchor
// names and, for a comment anchor, the comment's line.
func (s *source) statement(fn *ast.FuncDecl, anchor string) (index, commentLine int, err error) {
	comment := strings.HasPrefix(anchor, "//")
	var found []int
	for k, st := range fn.Body.List {
		if !comment {
			if strings.Contains(s.text(st), anchor) {
				found = append(found, k)
			}
			continue
		}
		for _, g := range s.gap(fn, k) {
			for _, c := range g.List {
				if strings.HasPrefix(c.Text, anchor) && (len(found) == 0 || found[len(found)-1] != k) {
					found = append(found, k)
					commentLine = s.line(c.Pos())
				}
			}
		}
	}
	one, many := "holds", "hold"
	if comment {
		one, many = "follows the comment", "follow the comment"
	}
	switch len(found) {
	case 0:
		return 0, 0, fmt.Errorf("no statement of %s %s %q", fn.Name.Name, one, anchor)
	case 1:
		return found[0], commentLine, nil
	default:
		return 0, 0, fmt.Errorf("%d statements of %s %s %q: an anchor must name one", len(found), fn.Name.Name, many, anchor)
	}
}

// gap returns the comment groups between statement k of fn's body and the
// one before it (or the opening brace).
func (s *source) gap(fn *ast.FuncDecl, k int) []*ast.CommentGroup {
	after := fn.Body.Lbrace
	if k > 0 {
		after = fn.Body.List[k-1].End()
	}
	before := fn.Body.List[k].Pos()
	var out []*ast.CommentGroup
	for _, g := range s.file.Comments {
		if g.Pos() > after && g.End() < before {
			out = append(out, g)
		}
	}
	return out
}

// leading is the first line of statement k of fn's body with the comments
// directly above it: those that the statement follows without a blank
// line, but not one that trails the statement before.
func (s *source) leading(fn *ast.FuncDecl, k int) int {
	first := s.line(fn.Body.List[k].Pos())
	prevEnd := s.line(fn.Body.Lbrace)
	if k > 0 {
		prevEnd = s.line(fn.Body.List[k-1].End())
	}
	gap := s.gap(fn, k)
	for i := len(gap) - 1; i >= 0; i-- {
		g := gap[i]
		if s.line(g.Pos()) == prevEnd || s.line(g.End()) < first-1 {
			break
		}
		first = s.line(g.Pos())
	}
	return first
}

// fields returns the line span of each key of the one composite literal of
// type typ (as written, such as "ctrl.Options") in the function fn.
func (s *source) fields(fn, typ string) (map[string]span, []string, error) {
	d, err := s.decl(fn)
	if err != nil {
		return nil, nil, err
	}
	var lits []*ast.CompositeLit
	ast.Inspect(d, func(n ast.Node) bool {
		if cl, ok := n.(*ast.CompositeLit); ok && cl.Type != nil && types.ExprString(cl.Type) == typ {
			lits = append(lits, cl)
		}
		return true
	})
	if len(lits) != 1 {
		return nil, nil, fmt.Errorf("%d %s literals in %s, not one", len(lits), typ, fn)
	}
	spans := map[string]span{}
	var keys []string
	for _, e := range lits[0].Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return nil, nil, fmt.Errorf("the %s literal in %s has an element without a key", typ, fn)
		}
		k := types.ExprString(kv.Key)
		keys = append(keys, k)
		spans[k] = span{s.line(kv.Pos()), s.line(kv.End())}
	}
	return spans, keys, nil
}

// snippet is the text of sp, less the indentation its lines share.
func (s *source) snippet(sp span) string {
	lines := s.lines[sp.from-1 : sp.to]
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		out[i] = l
	}
	return strings.Join(out, "\n")
}
