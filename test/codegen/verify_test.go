// Package codegen tests the code-generation scripts themselves.
package codegen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyCodegenCatchesHandEdits edits a generated file in a copy of the
// tree and expects hack/verify-codegen.sh to fail, naming the file, while
// leaving that copy untouched.
func TestVerifyCodegenCatchesHandEdits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generators (about a minute)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	copyTree(t, root, tree)

	const edited = "pkg/generated/listers/handroll/v1/webapp.go"
	path := filepath.Join(tree, edited)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	handEdited := append(append([]byte{}, orig...), []byte("\n// a hand edit\n")...)
	if err := os.WriteFile(path, handEdited, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command("bash", filepath.Join(tree, "hack/verify-codegen.sh")).CombinedOutput()
	if err == nil {
		t.Fatalf("verify-codegen.sh passed on a hand-edited generated file:\n%s", out)
	}
	for _, want := range []string{edited, "-// a hand edit", "out of date or were edited by hand"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(handEdited) {
		t.Error("verify-codegen.sh changed the tree it verified")
	}
}

// copyTree copies the files git knows (tracked, or new and not ignored) and
// the already-built generators, so the copy regenerates without rebuilding.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `
set -euo pipefail
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$1"
if [[ -d .local/bin ]]; then mkdir -p "$1/.local" && cp -a .local/bin "$1/.local/bin"; fi
`, "copy", to)
	cmd.Dir = from
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copying the tree: %v\n%s", err, out)
	}
}
