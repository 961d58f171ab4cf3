// Command linecount counts the Go lines handroll writes by hand for each
// piece of controller-runtime's Manager, next to the lines its twin on
// controller-runtime (hack/compare) writes for the same operator, and prints
// docs/lines.md.
//
//	go run ./hack/linecount      # print the page
//	go run ./hack/linecount -w   # write docs/lines.md
//
// Run it from the repository root. In a git checkout it counts the files
// git tracks, as they are in the work tree, so that a file nobody has added
// yet does not make the page differ from a fresh clone's; elsewhere it
// counts every file. A line counts when it holds Go tokens
// other than comments: blank lines, comment lines and the semicolons the
// lexer inserts do not count; every line of a multi-line string literal
// does. Tests (_test.go) are not counted in the table, and neither is
// generated code (files carrying Go's "Code generated ... DO NOT EDIT."
// line, which covers pkg/generated and the zz_generated files).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// twinRoot is the twin's module, relative to the repository root.
const twinRoot = "hack/compare"

// twinExamples holds the learner's examples on controller-runtime, which
// share the twin's module but are not part of the twin.
const twinExamples = twinRoot + "/examples"

// A piece is one row of the table: a piece of the Manager, the handroll
// files that replace it and the twin files that configure or use it.
//
// A path is a file, a directory ("dir/": the .go files directly in it) or a
// tree ("dir/...": every .go file below it). A file belongs to the piece
// with the most specific path that matches it: a file before a directory,
// a directory before a tree, a longer path before a shorter one.
type piece struct {
	name     string
	kind     kind
	handroll []string
	twin     []string // under twinRoot
	// twinNote says what the twin uses instead of writing it.
	twinNote string
}

// kind says how the two sides compare on a piece.
type kind int

const (
	// replaced: each side has its own; the twin's is controller-runtime,
	// configured in a few lines. These rows are what the Manager replaces.
	replaced kind = iota
	// shared: the twin imports handroll's code, so both run the same lines.
	shared
	// handrollOnly: the twin does not do it (it serves no webhooks).
	handrollOnly
)

var pieces = []piece{
	{
		name:     "Start sequence: flags, config, signals, events, the options of every piece, start and stop (`ctrl.NewManager`, `mgr.Start`)",
		handroll: []string{"cmd/handroll/"},
		twin:     []string{"cmd/handroll-twin/"},
		twinNote: "the Manager's options for the cache, leader election and servers are set here",
	},
	{
		name:     "Cache: informers per namespace, label filters, transform, sync errors (`cluster.New`'s cache)",
		handroll: []string{"pkg/cache/", "pkg/stripjson/"},
		twinNote: "controller-runtime's cache",
	},
	{
		name:     "RESTMapper (`MapperProvider`)",
		handroll: []string{"pkg/restmapper/"},
		twinNote: "controller-runtime's dynamic RESTMapper",
	},
	{
		name:     "Controller machinery: workqueue, workers, handlers, predicates, metrics (`controller.New`, `builder`)",
		handroll: []string{"pkg/controller/"},
		twinNote: "controller-runtime's controller and builder",
	},
	{
		name:     "Reconcilers: the WebApp's reads, applies, events; the directory's controller; their watches and index (`Reconciler`, `builder.For/Owns/Watches`)",
		handroll: []string{"pkg/controller/webapp/reconciler.go", "pkg/controller/webapp/controller.go", "pkg/controller/webapp/directorycontroller.go", "pkg/controller/webapp/directoryindex.go"},
		twin:     []string{"cmd/handroll-twin/webapp.go", "cmd/handroll-twin/directory.go"},
	},
	{
		name:     "Leader election: the elector, the release, metrics, health check (`LeaderElection*`, `Elected`)",
		handroll: []string{"pkg/leader/"},
		twinNote: "controller-runtime's leader election",
	},
	{
		name:     "Metrics (with TokenReview and SubjectAccessReview), health and pprof servers (`Metrics`, `HealthProbeBindAddress`, `PprofBindAddress`)",
		handroll: []string{"pkg/server/"},
		twinNote: "controller-runtime's servers and `filters.WithAuthenticationAndAuthorization`",
	},
	{
		name:     "API types, defaults, validation, v1alpha1 conversions",
		kind:     shared,
		handroll: []string{"pkg/apis/handroll/...", "pkg/generated/doc.go"},
		twinNote: "imports handroll's `pkg/apis`",
	},
	{
		name:     "Scheme (`Options.Scheme`)",
		kind:     shared,
		handroll: []string{"pkg/apis/scheme/"},
		twinNote: "imports handroll's `pkg/apis/scheme`",
	},
	{
		name:     "Reconciler: desired children, status, the no-write check, the desired directory",
		kind:     shared,
		handroll: []string{"pkg/controller/webapp/"},
		twinNote: "imports handroll's `pkg/controller/webapp`",
	},
	{
		name:     "Leader election flags, defaults and validation",
		kind:     shared,
		handroll: []string{"pkg/leader/options.go"},
		twinNote: "imports handroll's `pkg/leader` `Options`",
	},
	{
		name:     "Test control plane (`envtest`)",
		kind:     shared,
		handroll: []string{"test/controlplane/"},
		twinNote: "its scenarios run on handroll's (`hack/compare/test-twin.sh`)",
	},
	{
		name:     "Webhook server and certificate watcher (`WebhookServer`, `certwatcher`)",
		kind:     handrollOnly,
		handroll: []string{"pkg/server/webhook.go", "pkg/server/certwatcher.go"},
		twinNote: "none: the twin serves no webhooks",
	},
	{
		name:     "Conversion webhook (`conversion.Webhook`)",
		kind:     handrollOnly,
		handroll: []string{"pkg/server/conversion.go"},
		twinNote: "none",
	},
	{
		name:     "Admission handlers (`webhook.CustomDefaulter`, `CustomValidator`)",
		kind:     handrollOnly,
		handroll: []string{"pkg/admission/"},
		twinNote: "none",
	},
	{
		name:     "Webhook certificates and CA injection (cert-manager or cert-controller; not in the Manager)",
		kind:     handrollOnly,
		handroll: []string{"pkg/certs/"},
		twinNote: "none",
	},
	{
		name:     "Sharding: hash ranges, their assignment, membership, the API server's shardSelector (not in the Manager: one leader runs every controller)",
		kind:     handrollOnly,
		handroll: []string{"pkg/shard/"},
		twinNote: "none",
	},
	{
		name:     "Uninstall: `handroll uninstall`, the Helm chart's pre-delete hook (not in the Manager: kubebuilder leaves it to `make undeploy`)",
		kind:     handrollOnly,
		handroll: []string{"cmd/handroll/uninstall.go"},
		twinNote: "none",
	},
	{
		name:     "Memory limit: the Go runtime's soft limit from the container's (not in the Manager; Go sets GOMAXPROCS from the CPU limit itself)",
		kind:     handrollOnly,
		handroll: []string{"cmd/handroll/memlimit.go"},
		twinNote: "none",
	},
}

// handrollRoots are the directories searched for handroll's hand-written
// code. Every non-test, non-generated Go file under them must belong to a
// piece. The rest of the repository is tooling and test harness (hack/,
// test/ but for the control plane) and is not counted.
var handrollRoots = []string{"cmd", "pkg", "test/controlplane"}

func main() {
	write := flag.Bool("w", false, "write docs/lines.md instead of printing it")
	flag.Parse()
	page, err := render(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "linecount:", err)
		os.Exit(1)
	}
	if !*write {
		os.Stdout.Write(page)
		return
	}
	if err := os.WriteFile(filepath.Join("docs", "lines.md"), page, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "linecount:", err)
		os.Exit(1)
	}
}

// file is one counted Go file.
type file struct {
	path  string // slash-separated, from the repository root
	lines int
}

// side is what one column of the table holds.
type side struct {
	byPiece  [][]file // indexed like pieces
	unmapped []file   // twin files no piece names
	tests    int      // lines in _test.go files, not in the table
}

func render(root string) ([]byte, error) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, errors.New("run it from the repository root")
	}
	all, err := goFiles(root)
	if err != nil {
		return nil, err
	}
	hr, err := collect(root, all, handrollRoots, func(p piece) []string { return p.handroll })
	if err != nil {
		return nil, err
	}
	if len(hr.unmapped) > 0 {
		var names []string
		for _, f := range hr.unmapped {
			names = append(names, f.path)
		}
		return nil, fmt.Errorf("no piece counts %s: add them to pieces in hack/linecount/main.go", strings.Join(names, ", "))
	}
	tw := &side{byPiece: make([][]file, len(pieces))}
	twinExists := slices.ContainsFunc(all, func(f string) bool { return under(f, twinRoot) })
	if twinExists {
		twinFiles := slices.DeleteFunc(slices.Clone(all), func(f string) bool { return under(f, twinExamples) })
		if tw, err = collect(root, twinFiles, []string{twinRoot}, func(p piece) []string {
			var out []string
			for _, t := range p.twin {
				out = append(out, twinRoot+"/"+t)
			}
			return out
		}); err != nil {
			return nil, err
		}
	}
	generated, err := generatedLines(root, all)
	if err != nil {
		return nil, err
	}

	var b bytes.Buffer
	b.WriteString(header)
	if !twinExists {
		fmt.Fprintf(&b, "The twin (`%s`) is not in this checkout: its column is empty.\n\n", twinRoot)
	}
	b.WriteString("| Manager piece | handroll: where | lines | twin: where | lines |\n")
	b.WriteString("|---|---|--:|---|--:|\n")
	var hTotal, tTotal, hReplaced, tReplaced int
	for i, p := range pieces {
		if i > 0 && p.kind != pieces[i-1].kind {
			fmt.Fprintf(&b, "| %s | | | | |\n", kindHeading[p.kind])
		}
		h, t := sum(hr.byPiece[i]), sum(tw.byPiece[i])
		hTotal += h
		tTotal += t
		if p.kind == replaced {
			hReplaced += h
			tReplaced += t
		}
		twinWhere := where(root, all, tw.byPiece[i])
		if p.twinNote != "" {
			if twinWhere != "" {
				twinWhere += "; "
			}
			twinWhere += p.twinNote
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d |\n", p.name, where(root, all, hr.byPiece[i]), h, twinWhere, t)
	}
	for _, f := range tw.unmapped {
		tTotal += f.lines
		fmt.Fprintf(&b, "| twin code not yet mapped to a piece | | 0 | `%s` | %d |\n", f.path, f.lines)
	}
	fmt.Fprintf(&b, "| **what the Manager replaces** (the first %d rows) | | **%d** | | **%d** |\n", countKind(replaced), hReplaced, tReplaced)
	fmt.Fprintf(&b, "| **all the hand-written Go** | | **%d** | | **%d** |\n\n", hTotal, tTotal)

	fmt.Fprintf(&b, "Not in the table: tests, %d lines in handroll's `_test.go` files and %d in the twin's; "+
		"code-generator output, %d lines (`pkg/generated`, the `zz_generated` files), which handroll generates from its types "+
		"and the twin imports from handroll; and the tooling under `hack/` and the test harnesses under `test/` other than the control plane.\n\n",
		hr.tests, tw.tests, generated)

	// Per file, in the order of the table.
	b.WriteString("## Per file\n\n| file | lines |\n|---|--:|\n")
	for _, s := range []*side{hr, tw} {
		for _, files := range append(slices.Clone(s.byPiece), s.unmapped) {
			for _, f := range files {
				fmt.Fprintf(&b, "| `%s` | %d |\n", f.path, f.lines)
			}
		}
	}
	return b.Bytes(), nil
}

const header = `# Lines of code, side by side

How many lines of Go handroll writes by hand for each piece of
controller-runtime's Manager, next to the lines the same operator takes on
controller-runtime (the twin in ` + "`hack/compare`" + `). Regenerate with

    go run ./hack/linecount -w

(test/docs fails while this page and the code disagree). A line counts when
it holds Go code: blank lines and comments do not count. Tests and generated
code are left out (see below the table).

The first rows are what the Manager replaces: handroll's own code against
the twin's configuration of controller-runtime (its README maps each piece to
its lines: ` + "`hack/compare/README.md`" + `). Then the code the twin imports from
handroll, which both run, and last handroll's webhooks, which the twin does
not have.

`

// goFiles lists the repository's Go files, slash-separated from root:
// those git tracks when root is a git work tree, else every one. testdata
// holds inputs, not code, and is left out.
func goFiles(root string) ([]string, error) {
	var files []string
	cmd := exec.Command("git", "ls-files", "-z", "--", "*.go")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		// A file in a merge's conflict is listed once per stage: once is
		// enough.
		for _, f := range slices.Compact(strings.Split(string(out), "\x00")) {
			// A tracked file deleted in the work tree is gone.
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); f != "" && err == nil {
				files = append(files, f)
			}
		}
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			rel, err := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	files = slices.DeleteFunc(files, func(f string) bool {
		return slices.Contains(strings.Split(path.Dir(f), "/"), "testdata")
	})
	slices.Sort(files)
	return files, nil
}

// under reports whether the file f is in the directory dir or below it.
func under(f, dir string) bool { return strings.HasPrefix(f, dir+"/") }

// collect sorts the hand-written Go files under roots into the piece whose
// path, as paths(piece) gives it, matches most specifically.
func collect(root string, all, roots []string, paths func(piece) []string) (*side, error) {
	s := &side{byPiece: make([][]file, len(pieces))}
	for _, rel := range all {
		if !slices.ContainsFunc(roots, func(r string) bool { return under(rel, r) }) {
			continue
		}
		gen, n, err := count(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(rel, "_test.go"):
			s.tests += n
		case gen:
		default:
			f := file{path: rel, lines: n}
			if i := owner(rel, paths); i >= 0 {
				s.byPiece[i] = append(s.byPiece[i], f)
			} else {
				s.unmapped = append(s.unmapped, f)
			}
		}
	}
	return s, nil
}

// owner returns the index of the piece that counts rel, or -1.
func owner(rel string, paths func(piece) []string) int {
	best, bestScore := -1, 0
	for i, p := range pieces {
		for _, pat := range paths(p) {
			if score := match(pat, rel); score > bestScore {
				best, bestScore = i, score
			}
		}
	}
	return best
}

// match scores how specifically pat names rel; 0 means not at all.
func match(pat, rel string) int {
	switch {
	case strings.HasSuffix(pat, "/..."):
		if strings.HasPrefix(rel, strings.TrimSuffix(pat, "...")) {
			return 1000 + len(pat)
		}
	case strings.HasSuffix(pat, "/"):
		if path.Dir(rel)+"/" == pat {
			return 2000 + len(pat)
		}
	case pat == rel:
		return 3000
	}
	return 0
}

// where names a piece's files: a directory when the piece counts every
// hand-written file directly in it and there are several, else the files.
func where(root string, all []string, files []file) string {
	var parts []string
	var dirs []string
	byDir := map[string][]string{}
	for _, f := range files {
		d := path.Dir(f.path)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], path.Base(f.path))
	}
	for _, d := range dirs {
		names := byDir[d]
		if inDir, err := handWritten(root, all, d); err == nil && len(inDir) > 1 && slices.Equal(inDir, sorted(names)) {
			parts = append(parts, "`"+d+"/`")
			continue
		}
		for _, n := range names {
			parts = append(parts, "`"+d+"/"+n+"`")
		}
	}
	return strings.Join(parts, ", ")
}

// handWritten lists the counted files directly in dir, sorted.
func handWritten(root string, all []string, dir string) ([]string, error) {
	var out []string
	for _, f := range all {
		if path.Dir(f) != dir || strings.HasSuffix(f, "_test.go") {
			continue
		}
		gen, _, err := count(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		if !gen {
			out = append(out, path.Base(f))
		}
	}
	return out, nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// kindHeading opens the rows of each kind but the first.
var kindHeading = map[kind]string{
	shared:       "*shared: the twin imports handroll's code for these*",
	handrollOnly: "*handroll only: the twin serves no webhooks*",
}

func countKind(k kind) int {
	n := 0
	for _, p := range pieces {
		if p.kind == k {
			n++
		}
	}
	return n
}

func sum(files []file) int {
	n := 0
	for _, f := range files {
		n += f.lines
	}
	return n
}

// generatedLines counts the code lines of the generated files in the main
// module's code.
func generatedLines(root string, all []string) (int, error) {
	total := 0
	for _, f := range all {
		if !under(f, "cmd") && !under(f, "pkg") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		gen, n, err := count(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return 0, err
		}
		if gen {
			total += n
		}
	}
	return total, nil
}

// generatedComment is Go's convention for generated files
// (https://go.dev/s/generatedcode).
var generatedComment = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// count reports whether the file at p is generated and how many of its
// lines hold code.
func count(p string) (generated bool, lines int, err error) {
	src, err := os.ReadFile(p)
	if err != nil {
		return false, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, len(src)+1)
	for sc.Scan() {
		if generatedComment.MatchString(sc.Text()) {
			generated = true
			break
		}
	}

	fset := token.NewFileSet()
	tf := fset.AddFile(p, -1, len(src))
	var s scanner.Scanner
	var scanErr error
	// Mode 0 skips comments.
	s.Init(tf, src, func(pos token.Position, msg string) {
		if scanErr == nil {
			scanErr = fmt.Errorf("%s: %s", pos, msg)
		}
	}, 0)
	code := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line end, not written
		}
		first := tf.Line(pos)
		// A raw string literal may span lines; each of them is code.
		for l := first; l <= first+strings.Count(lit, "\n"); l++ {
			code[l] = true
		}
	}
	if scanErr != nil {
		return false, 0, scanErr
	}
	return generated, len(code), nil
}
