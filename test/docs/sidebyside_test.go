package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSideBySideIsCurrent: the committed docs/side-by-side.md is what
// hack/sidebyside prints for the code as it is, so the snippets, their line
// ranges and their counts are true. The tool fails when an anchor of its
// steps no longer names exactly one statement or declaration.
func TestSideBySideIsCurrent(t *testing.T) {
	root := repoRoot(t)
	got, err := goCommand(root, "run", "./hack/sidebyside")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "docs", "side-by-side.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) == string(want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("docs/side-by-side.md is out of date: run `make side-by-side` and commit it.\nfirst difference, line %d:\n  committed: %s\n  generated: %s", i+1, wl, gl)
		}
	}
}

// TestSideBySideReadsInOneSitting: the page stays one a reader goes
// through in about half an hour: no code block longer than hack/sidebyside
// shows inline, and the page as a whole within a reading budget. The code
// left out is linked, line by line.
func TestSideBySideReadsInOneSitting(t *testing.T) {
	const (
		longestBlock = 16   // hack/sidebyside inlineLimit
		pageBudget   = 1400 // lines of Markdown, code included
	)
	p := readDoc(t, "side-by-side.md")
	if n := len(p.lines); n > pageBudget {
		t.Errorf("docs/side-by-side.md has %d lines, more than the %d a reading of it may take", n, pageBudget)
	}
	open := -1
	for i, l := range p.lines {
		if !strings.HasPrefix(l, "```") {
			continue
		}
		if open < 0 {
			open = i
			continue
		}
		if n := i - open - 1; n > longestBlock {
			t.Errorf("docs/side-by-side.md:%d: a block of %d lines, longer than the %d shown inline", open+1, n, longestBlock)
		}
		open = -1
	}
	if links := strings.Count(p.text, "lines of code, not shown."); links == 0 {
		t.Error("docs/side-by-side.md links no block: is every block of code shown whole again?")
	}
}
