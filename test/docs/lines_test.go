package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinesIsCurrent: the committed docs/lines.md is what hack/linecount
// prints for the code as it is, so the counts it shows are true.
func TestLinesIsCurrent(t *testing.T) {
	root := repoRoot(t)
	got, err := goCommand(root, "run", "./hack/linecount")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "docs", "lines.md"))
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
			t.Fatalf("docs/lines.md is out of date: run `go run ./hack/linecount -w` and commit it.\nfirst difference, line %d:\n  committed: %s\n  counted:   %s", i+1, wl, gl)
		}
	}
}
