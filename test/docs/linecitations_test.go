package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A line citation names a Go file and a line, or a range of lines, in a
// code span: `cmd/handroll/start.go:177` or `pkg/leader/elector.go:110-114`.
// Outside a fenced block it must be followed, with nothing but a space or
// ", " between them (the space may be a line break and an indent), by a
// code span holding the code that stands on that line, or on one of the
// lines of the range, in that file:
//
//	`cmd/handroll/start.go:177` `p.srvs.serve`
//
// so that a line that moves fails the test, which says where its code is
// now. Inside a fenced block (a diagram) a citation is bare text, with no
// code span around it, and must be one the page cites outside the fences,
// where its code is checked.
//
// A path that starts with a module path (sigs.k8s.io/controller-runtime/...,
// k8s.io/client-go/...) is that module's file, in the version the modules
// pin. Any other path is this repository's file when it has one, else
// controller-runtime's: a file both have (pkg/controller/controller.go) is
// written with the module path when it means controller-runtime's.

// lineCitedPages are the pages whose line citations are checked, relative
// to the repository root, and how many each must have at least.
var lineCitedPages = []citedPage{
	{path: "docs/lifecycle.md", min: 60},
	{path: "examples/minimal/README.md", min: 10},
}

// TestLineCitationsPointAtTheirCode: every line citation of the pages
// names a file that exists and a line in it that holds the code cited with
// it; every citation in a diagram is one the page checks outside it.
func TestLineCitationsPointAtTheirCode(t *testing.T) {
	root := repoRoot(t)
	c := newLineChecker(newCiteChecker(t))
	for _, p := range lineCitedPages {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p.path)))
		if err != nil {
			t.Fatal(err)
		}
		problems, n := c.check(p.path, string(data))
		if n < p.min {
			t.Errorf("%s: %d line citations with their code, want at least %d", p.path, n, p.min)
		}
		for _, msg := range problems {
			t.Error(msg)
		}
		t.Logf("%s: %d line citations checked", p.path, n)
	}
}

// TestLineCheckerReportsWhatIsWrong: the checker reports a line that does
// not hold its code (and where the code is), a line past the end, a file
// that does not exist, a citation with no code, and a diagram's citation
// that the page does not check; it passes what is right.
func TestLineCheckerReportsWhatIsWrong(t *testing.T) {
	c := newLineChecker(newCiteChecker(t))
	start := readLines(t, filepath.Join(repoRoot(t), "cmd", "handroll", "start.go"))
	line := slices.IndexFunc(start, func(l string) bool { return strings.Contains(l, "func start(ctx context.Context, o options) error {") }) + 1
	if line == 0 {
		t.Fatal("cmd/handroll/start.go declares no func start: the test needs another line to cite")
	}
	run := slices.IndexFunc(start, func(l string) bool { return strings.Contains(l, "func runLeader(") }) + 1
	page := strings.Join([]string{
		fmt.Sprintf("Right: `cmd/handroll/start.go:%d` `func start(`, and a range `cmd/handroll/start.go:%d-%d` `func start(`.", line, line-2, line),
		fmt.Sprintf("Moved: `cmd/handroll/start.go:%d` `func runLeader(`.", line),
		"Past the end: `cmd/handroll/start.go:100000` `x`.",
		"No such file: `cmd/handroll/nosuch.go:1` `x`.",
		fmt.Sprintf("No code: `cmd/handroll/start.go:%d`.", line),
		"Module path: `sigs.k8s.io/controller-runtime/pkg/manager/manager.go:1` `/*`.",
		"```mermaid",
		fmt.Sprintf("A->>B: cmd/handroll/start.go:%d and cmd/handroll/start.go:1", line),
		"```",
	}, "\n")
	problems, n := c.check("snippet.md", page)
	if n != 6 {
		t.Errorf("counted %d citations with their code, want 6 (all but the one with no code and the diagram's)", n)
	}
	want := []string{
		fmt.Sprintf("snippet.md:2: cmd/handroll/start.go:%d does not hold `func runLeader(`; it is on line %d", line, run),
		"snippet.md:3: cmd/handroll/start.go:100000: the file has " + strconv.Itoa(len(start)) + " lines",
		"snippet.md:4: cmd/handroll/nosuch.go is a file of neither " + c.cite.cr.name + " nor this repository",
		"snippet.md:5: cmd/handroll/start.go:" + strconv.Itoa(line) + " is cited with no code after it",
		"snippet.md:8: cmd/handroll/start.go:1, in a fenced block, is not cited outside the fences with its code",
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

var (
	// lineCiteRE is a line citation: path, first line, last line.
	lineCiteRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\.go):([0-9]+)(?:-([0-9]+))?$`)
	// fencedLineCiteRE finds the citations in a fenced block's text.
	fencedLineCiteRE = regexp.MustCompile(`[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\.go:[0-9]+(?:-[0-9]+)?`)
)

type lineChecker struct {
	cite  *citeChecker
	files map[string][]string // by absolute path; nil: no such file
}

func newLineChecker(c *citeChecker) *lineChecker {
	return &lineChecker{cite: c, files: map[string][]string{}}
}

// check returns what is wrong with the line citations of text, and how
// many citations with their code it checked.
func (c *lineChecker) check(page, text string) (problems []string, checked int) {
	report := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", page, line)+fmt.Sprintf(format, args...))
	}
	lines := strings.Split(text, "\n")
	outside := make([]string, len(lines))
	var fenced []struct {
		line int
		text string
	}
	inFence := false
	for i, l := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		if !fence && !inFence {
			outside[i] = l
		} else if !fence {
			fenced = append(fenced, struct {
				line int
				text string
			}{i + 1, l})
		}
		if fence {
			inFence = !inFence
		}
	}
	prose := strings.Join(outside, "\n")
	lineOf := func(off int) int { return strings.Count(prose[:off], "\n") + 1 }

	withCode := map[string]bool{}
	spans := citeSpanRE.FindAllStringSubmatchIndex(prose, -1)
	for i, sp := range spans {
		m := lineCiteRE.FindStringSubmatch(prose[sp[2]:sp[3]])
		if m == nil {
			continue
		}
		at := lineOf(sp[0])
		var code string
		if i+1 < len(spans) && citeSeparatorRE.MatchString(prose[sp[1]:spans[i+1][0]]) {
			code = prose[spans[i+1][2]:spans[i+1][3]]
			if lineCiteRE.MatchString(code) {
				code = ""
			}
		}
		if code == "" {
			report(at, "%s is cited with no code after it", m[0])
			continue
		}
		checked++
		if msg := c.verify(m, code); msg != "" {
			report(at, "%s", msg)
			continue
		}
		withCode[m[0]] = true
	}
	for _, f := range fenced {
		for _, cite := range fencedLineCiteRE.FindAllString(f.text, -1) {
			if !withCode[cite] {
				report(f.line, "%s, in a fenced block, is not cited outside the fences with its code", cite)
			}
		}
	}
	return problems, checked
}

// verify checks one citation (lineCiteRE's match) and its code; it
// returns what is wrong, or "".
func (c *lineChecker) verify(m []string, code string) string {
	path := m[1]
	first, _ := strconv.Atoi(m[2])
	last := first
	if m[3] != "" {
		last, _ = strconv.Atoi(m[3])
	}
	var src citeSource
	rel := path
	first0, _, _ := strings.Cut(path, "/")
	switch {
	case strings.Contains(first0, "."):
		for modPath, s := range c.cite.modules {
			if r, found := strings.CutPrefix(path, modPath+"/"); found {
				src, rel = s, r
			}
		}
		if src.dir == "" {
			return fmt.Sprintf("%s: a module this test does not read", path)
		}
	case fileExists(filepath.Join(c.cite.root, filepath.FromSlash(path))):
		src = citeSource{name: "this repository", dir: c.cite.root}
	case fileExists(filepath.Join(c.cite.cr.dir, filepath.FromSlash(path))):
		src = c.cite.cr
	default:
		return fmt.Sprintf("%s is a file of neither %s nor this repository", path, c.cite.cr.name)
	}
	lines := c.read(filepath.Join(src.dir, filepath.FromSlash(rel)))
	switch {
	case lines == nil:
		return fmt.Sprintf("%s is not a file of %s", path, src.name)
	case first < 1 || last < first:
		return fmt.Sprintf("%s: not a range of lines", m[0])
	case last > len(lines):
		return fmt.Sprintf("%s: the file has %d lines", m[0], len(lines))
	}
	for _, l := range lines[first-1 : last] {
		if strings.Contains(l, code) {
			return ""
		}
	}
	var where []string
	for i, l := range lines {
		if strings.Contains(l, code) {
			where = append(where, strconv.Itoa(i+1))
		}
	}
	switch len(where) {
	case 0:
		return fmt.Sprintf("%s does not hold `%s`, nor does any line of the file", m[0], code)
	case 1:
		return fmt.Sprintf("%s does not hold `%s`; it is on line %s", m[0], code, where[0])
	default:
		return fmt.Sprintf("%s does not hold `%s`; it is on lines %s", m[0], code, strings.Join(where, ", "))
	}
}

// read returns the lines of file, nil when it does not exist.
func (c *lineChecker) read(file string) []string {
	if l, ok := c.files[file]; ok {
		return l
	}
	var lines []string
	if data, err := os.ReadFile(file); err == nil {
		lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	}
	c.files[file] = lines
	return lines
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
