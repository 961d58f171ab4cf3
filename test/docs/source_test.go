package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const (
	crPath = "sigs.k8s.io/controller-runtime"
	// crVersion is read when the twin's module is not in the checkout, or
	// cannot say which version it pins.
	crVersion = "v0.25.2"
)

// module is a module's directory in the module cache and its version.
type module struct {
	Dir     string
	Version string
	Error   string
}

var (
	crOnce sync.Once
	crMod  module
	crErr  error
)

// controllerRuntime locates the controller-runtime source: the version the
// twin pins (go list -m in hack/compare), else crVersion, downloaded into the
// module cache if needed.
func controllerRuntime(t *testing.T) module {
	t.Helper()
	root := repoRoot(t)
	crOnce.Do(func() {
		twin := filepath.Join(root, "hack", "compare")
		if _, err := os.Stat(filepath.Join(twin, "go.mod")); err == nil {
			out, err := goCommand(twin, "list", "-m", "-json", crPath)
			var m module
			if err == nil {
				err = json.Unmarshal(out, &m)
			}
			if err == nil && m.Dir != "" {
				crMod = m
				return
			}
			// The twin may be mid-edit, or its module not downloaded yet.
			t.Logf("hack/compare does not locate %s (%v); reading %s", crPath, err, crVersion)
		}
		// Outside any module, so that nothing is added to a go.mod.
		out, err := goCommand(t.TempDir(), "mod", "download", "-json", crPath+"@"+crVersion)
		var m module
		if jerr := json.Unmarshal(out, &m); jerr == nil && m.Error != "" {
			err = fmt.Errorf("%s", m.Error)
		} else if err == nil {
			err = jerr
		}
		if err != nil {
			crErr = fmt.Errorf("downloading %s@%s: %w", crPath, crVersion, err)
			return
		}
		crMod = m
	})
	if crErr != nil {
		t.Fatal(crErr)
	}
	return crMod
}

// goCommand runs the go command in dir and returns its standard output.
func goCommand(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// repoRoot is the main module's directory: the nearest go.mod above the
// test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = fmt.Errorf("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return root
}

// decl names a type declared in controller-runtime: the file, relative to the
// module's directory, and the type's name.
type decl struct {
	file, typ string
}

func (d decl) String() string { return d.typ + " (" + d.file + ")" }

// members returns, in declaration order, the exported field names of the
// struct d or the method names of the interface d; embedded interfaces are
// returned apart, as written ("recorder.Provider"). Unexported fields are
// left out: a user of controller-runtime cannot set them.
func members(t *testing.T, dir string, d decl) (names, embedded []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, filepath.FromSlash(d.file)), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var spec *ast.TypeSpec
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == d.typ {
			spec = ts
		}
		return spec == nil
	})
	if spec == nil {
		t.Fatalf("%s declares no type %s", d.file, d.typ)
	}
	var list *ast.FieldList
	switch typ := spec.Type.(type) {
	case *ast.StructType:
		list = typ.Fields
	case *ast.InterfaceType:
		list = typ.Methods
	default:
		t.Fatalf("%s is neither a struct nor an interface", d)
	}
	_, isInterface := spec.Type.(*ast.InterfaceType)
	for _, field := range list.List {
		if len(field.Names) == 0 {
			// Embedded: in a struct, a field named after its type; in an
			// interface, another method set.
			name := exprString(field.Type)
			if isInterface {
				embedded = append(embedded, name)
			} else if short := name[strings.LastIndex(name, ".")+1:]; ast.IsExported(strings.TrimPrefix(short, "*")) {
				names = append(names, strings.TrimPrefix(short, "*"))
			}
			continue
		}
		for _, n := range field.Names {
			if n.IsExported() {
				names = append(names, n.Name)
			}
		}
	}
	return names, embedded
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	default:
		return fmt.Sprintf("%T", e)
	}
}
