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
