package docs

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A citation names a Go file and declarations in it: a code span holding
// the file's path, followed, with nothing but a space or ", " between them
// (the space may be a line break and an indent), by one or more code spans
// each holding a declaration: `Name` (a top-level func, type, var or const) or
// `Type.Name` (a method of Type or *Type, a field of struct Type, a method
// of interface Type). For example:
//
//	`pkg/manager/internal.go` `controllerManager.Start`, `controllerManager.engageStopProcedure`
//
// Which source a path names is decided by the path alone:
//
//   - A path whose first element holds a dot is a module path:
//     sigs.k8s.io/controller-runtime/... and k8s.io/client-go/... are read
//     in the versions the modules pin; other modules are not checked.
//   - Any other path is relative to controller-runtime's module root, or to
//     this repository's: the pages name handroll's files the same way. A path
//     that exists only in this repository is handroll's and is not checked
//     here (TestDocsNameWhatExists covers the pages it reads). A path that
//     exists only in controller-runtime is controller-runtime's. A path in
//     neither is reported, with or without declarations after it. A path in
//     both (pkg/cache/cache.go, pkg/controller/controller.go, ...) passes
//     when one of the two files declares every name after it; write it as
//     sigs.k8s.io/controller-runtime/... to leave no doubt.
//
// Code spans inside fenced blocks are not read.

// citedPage is a page whose citations are checked, relative to the
// repository root; a page with fewer than min citations fails. A page with
// none is skipped (logged) when min is 0.
type citedPage struct {
	path string
	min  int
}

var citedPages = []citedPage{
	{path: "docs/manager.md", min: 30},
	{path: "docs/seed-claims.md", min: 29},
	{path: "docs/manager-map.md"},
	{path: "docs/pitfalls.md"},
	{path: "hack/compare/README.md"},
}

// TestManagerPageCitationsExist: every controller-runtime (and client-go)
// file the pages cite exists in the version the modules pin, and declares
// every name cited after it.
func TestManagerPageCitationsExist(t *testing.T) {
	root := repoRoot(t)
	c := newCiteChecker(t)
	for _, p := range citedPages {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p.path)))
		if err != nil {
			t.Fatal(err)
		}
		problems, n := c.check(p.path, string(data))
		switch {
		case n == 0 && p.min == 0:
			t.Logf("%s: no citations in the checked format; skipped", p.path)
			continue
		case n < p.min:
			t.Errorf("%s: %d citations in the checked format, want at least %d", p.path, n, p.min)
		}
		for _, msg := range problems {
			t.Error(msg)
		}
		t.Logf("%s: %d citations checked", p.path, n)
	}
}

// TestCitationCheckerReportsWhatIsMissing: the checker fails for a
// declaration a file lacks and for a file that does not exist, whether or
// not names follow it, and passes what exists, handroll's paths and what
// is inside a fence.
func TestCitationCheckerReportsWhatIsMissing(t *testing.T) {
	c := newCiteChecker(t)
	page := strings.Join([]string{
		"Start is `pkg/manager/internal.go` `controllerManager.Start`, `controllerManager.engageStopProcedure`.",
		"It never calls `pkg/manager/internal.go` `controllerManager.Begin`.",
		"Nor does `pkg/manager/nosuch.go` `Start` exist,",
		"nor `pkg/manager/gone.go` alone.",
		"The lease: `k8s.io/client-go/tools/leaderelection/leaderelection.go` `LeaderElector.Run`",
		"`LeaderElector.Pause`.",
		"handroll's `cmd/handroll/start.go` `start` and `pkg/leader/elector.go` `Elector.Nothing` are not checked here.",
		"Both have `pkg/cache/cache.go`: `pkg/cache/cache.go` `Options` passes, `pkg/cache/cache.go` `NoSuchName` does not.",
		"```go",
		"`pkg/manager/fenced.go` `Fenced`",
		"```",
	}, "\n")
	problems, n := c.check("snippet.md", page)
	if n != 6 {
		t.Errorf("counted %d citations, want 6 (two of internal.go, nosuch.go, leaderelection.go, two of cache.go)", n)
	}
	cr, cg := c.cr.name, c.modules["k8s.io/client-go"].name
	want := []string{
		"snippet.md:2: pkg/manager/internal.go (" + cr + ") declares no controllerManager.Begin",
		"snippet.md:3: pkg/manager/nosuch.go is a file of neither " + cr + " nor this repository",
		"snippet.md:4: pkg/manager/gone.go is a file of neither " + cr + " nor this repository",
		"snippet.md:6: k8s.io/client-go/tools/leaderelection/leaderelection.go (" + cg + ") declares no LeaderElector.Pause",
		"snippet.md:8: pkg/cache/cache.go declares no NoSuchName, neither in " + cr + " nor in this repository",
	}
	for _, w := range want {
		if !slices.Contains(problems, w) {
			t.Errorf("the checker did not report %q; it reported:\n%s", w, strings.Join(problems, "\n"))
		}
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
}

// citation is a path span and the declaration spans that follow it.
type citation struct {
	line  int // of the path
	path  string
	decls []citedDecl
}

type citedDecl struct {
	line int
	name string
}

var (
	citeSpanRE = regexp.MustCompile("`([^`\n]+)`")
	citePathRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\.go$`)
	citeDeclRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$`)
)

// citeSeparatorRE is what may stand between a path span and a declaration
// span, or between two declaration spans: a space or a comma and a space,
// where the space may be a line break and the next line's indent.
var citeSeparatorRE = regexp.MustCompile(`^(?:,? |,?[ \t]*\n[ \t]*)$`)

// findCitations returns every code span holding a Go file's path, with the
// declaration spans that follow it, outside fenced blocks.
func findCitations(text string) []citation {
	lines := strings.Split(text, "\n")
	inFence := false
	for i, l := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		if fence || inFence {
			lines[i] = ""
		}
		if fence {
			inFence = !inFence
		}
	}
	text = strings.Join(lines, "\n")
	lineOf := func(off int) int { return strings.Count(text[:off], "\n") + 1 }

	var out []citation
	spans := citeSpanRE.FindAllStringSubmatchIndex(text, -1)
	for i := 0; i < len(spans); i++ {
		path := text[spans[i][2]:spans[i][3]]
		if !citePathRE.MatchString(path) {
			continue
		}
		c := citation{line: lineOf(spans[i][0]), path: path}
		for i+1 < len(spans) {
			between := text[spans[i][1]:spans[i+1][0]]
			name := text[spans[i+1][2]:spans[i+1][3]]
			if !citeSeparatorRE.MatchString(between) || !citeDeclRE.MatchString(name) || citePathRE.MatchString(name) {
				break
			}
			i++
			c.decls = append(c.decls, citedDecl{line: lineOf(spans[i][0]), name: name})
		}
		out = append(out, c)
	}
	return out
}

// citeSource is a module whose files the pages cite.
type citeSource struct {
	name string // "controller-runtime v0.25.2"
	dir  string
}

type citeChecker struct {
	root       string
	cr         citeSource
	modules    map[string]citeSource      // by module path
	parsedDecl map[string]map[string]bool // by file; nil: no such file
}

func newCiteChecker(t *testing.T) *citeChecker {
	t.Helper()
	root := repoRoot(t)
	cr := controllerRuntime(t)
	c := &citeChecker{
		root:       root,
		cr:         citeSource{name: "controller-runtime " + cr.Version, dir: cr.Dir},
		parsedDecl: map[string]map[string]bool{},
	}
	c.modules = map[string]citeSource{crPath: c.cr}
	// client-go as the main module pins it.
	out, err := goCommand(root, "list", "-m", "-json", "k8s.io/client-go")
	var cg module
	if err == nil {
		err = json.Unmarshal(out, &cg)
	}
	if err != nil || cg.Dir == "" {
		t.Fatalf("locating k8s.io/client-go: %v", err)
	}
	c.modules["k8s.io/client-go"] = citeSource{name: "client-go " + cg.Version, dir: cg.Dir}
	return c
}

// check returns what is wrong with the citations in text, and how many
// citations with declarations it checked (handroll's are not counted).
func (c *citeChecker) check(page, text string) (problems []string, checked int) {
	report := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", page, line)+fmt.Sprintf(format, args...))
	}
	for _, ct := range findCitations(text) {
		src, rel, ok := c.source(ct.path)
		if !ok {
			continue
		}
		if len(ct.decls) > 0 {
			checked++
		}
		if !fileExists(filepath.Join(src.dir, filepath.FromSlash(rel))) {
			if rel == ct.path {
				report(ct.line, "%s is a file of neither %s nor this repository", ct.path, src.name)
			} else {
				report(ct.line, "%s is not a file of %s", ct.path, src.name)
			}
			continue
		}
		missing := c.missing(src, rel, ct.decls)
		if src.dir == c.root && len(missing) > 0 {
			// In both: the names may be controller-runtime's or handroll's.
			crMissing := c.missing(c.cr, rel, ct.decls)
			if len(crMissing) == 0 {
				continue
			}
			inNeither := slices.DeleteFunc(slices.Clone(missing), func(d citedDecl) bool { return !slices.Contains(crMissing, d) })
			for _, d := range inNeither {
				report(d.line, "%s declares no %s, neither in %s nor in this repository", ct.path, d.name, c.cr.name)
			}
			if len(inNeither) == 0 {
				report(ct.line, "%s: neither %s's file nor this repository's declares all of the names cited", ct.path, c.cr.name)
			}
			continue
		}
		for _, d := range missing {
			report(d.line, "%s (%s) declares no %s", ct.path, src.name, d.name)
		}
	}
	return problems, checked
}

// source says where path is read: in which module, and at what path
// there. A module path names its module; any other path is
// controller-runtime's, or this repository's when only it has the file, or
// when both have it (check then accepts either). ok is false for handroll's
// own paths and for modules this test does not read, which are not checked.
// A path that neither has is returned as controller-runtime's, to be
// reported.
func (c *citeChecker) source(path string) (src citeSource, rel string, ok bool) {
	first, _, _ := strings.Cut(path, "/")
	if strings.Contains(first, ".") {
		for modPath, s := range c.modules {
			if r, found := strings.CutPrefix(path, modPath+"/"); found {
				return s, r, true
			}
		}
		return citeSource{}, "", false
	}
	inRepo := fileExists(filepath.Join(c.root, filepath.FromSlash(path)))
	inCR := fileExists(filepath.Join(c.cr.dir, filepath.FromSlash(path)))
	switch {
	case inRepo && inCR:
		return citeSource{name: "this repository", dir: c.root}, path, true
	case inRepo:
		return citeSource{}, "", false
	default:
		return c.cr, path, true
	}
}

// missing returns the declarations of decls that the file rel of src
// lacks (all of them when there is no such file).
func (c *citeChecker) missing(src citeSource, rel string, decls []citedDecl) []citedDecl {
	names := c.declarations(filepath.Join(src.dir, filepath.FromSlash(rel)))
	var out []citedDecl
	for _, d := range decls {
		if !names[d.name] {
			out = append(out, d)
		}
	}
	return out
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// declarations returns the names file declares, as a citation writes
// them; nil when the file does not exist or does not parse.
func (c *citeChecker) declarations(file string) map[string]bool {
	if d, ok := c.parsedDecl[file]; ok {
		return d
	}
	var names map[string]bool
	if f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution); err == nil {
		names = declaredNames(f)
	}
	c.parsedDecl[file] = names
	return names
}

func declaredNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names[d.Name.Name] = true
			} else if recv := baseTypeName(d.Recv.List[0].Type); recv != "" {
				names[recv+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					var list *ast.FieldList
					switch typ := s.Type.(type) {
					case *ast.StructType:
						list = typ.Fields
					case *ast.InterfaceType:
						list = typ.Methods
					}
					if list == nil {
						continue
					}
					for _, field := range list.List {
						// An embedded field or interface is named by its type.
						if len(field.Names) == 0 {
							if n := baseTypeName(field.Type); n != "" {
								names[s.Name.Name+"."+n] = true
							}
						}
						for _, n := range field.Names {
							names[s.Name.Name+"."+n.Name] = true
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}

// baseTypeName is the name of the type e denotes, without pointer, package
// or type arguments: *Kind[object, request] is "Kind".
func baseTypeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return baseTypeName(e.X)
	case *ast.ParenExpr:
		return baseTypeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return baseTypeName(e.X)
	case *ast.IndexListExpr:
		return baseTypeName(e.X)
	default:
		return ""
	}
}
