package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionFromMakefile builds handroll with the ldflags `make build` uses
// and checks that --version prints the VERSION file's version and the
// commit, so that a renamed variable or a Makefile that no longer reads
// VERSION cannot ship a release that calls itself v0.0.0-dev.
func TestVersionFromMakefile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds handroll; not in -short")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(file))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(want) {
		t.Fatalf("VERSION holds %q, want a semantic version such as v0.1.0", want)
	}

	dry := exec.Command("make", "--no-print-directory", "-n", "build")
	dry.Dir = root
	plan, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, plan)
	}
	m := regexp.MustCompile(`-ldflags '([^']*)'`).FindSubmatch(plan)
	if m == nil {
		t.Fatalf("make -n build passes no -ldflags '...':\n%s", plan)
	}
	ldflags := string(m[1])

	bin := filepath.Join(t.TempDir(), "handroll")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("handroll --version: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	if lines[0] != "handroll "+want {
		t.Errorf("first line %q, want %q (ldflags %q)", lines[0], "handroll "+want, ldflags)
	}
	if _, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err != nil {
		t.Skipf("not a git checkout (%v): the commit is not stamped", err)
	}
	// The commit the Makefile stamped: HEAD when make ran, which a commit
	// since may have made an ancestor of HEAD.
	stamped := regexp.MustCompile(`-X main.gitCommit=([0-9a-f]{40}) `).FindStringSubmatch(ldflags)
	if stamped == nil {
		t.Fatalf("the Makefile's ldflags %q stamp no commit", ldflags)
	}
	if err := exec.Command("git", "-C", root, "merge-base", "--is-ancestor", stamped[1], "HEAD").Run(); err != nil {
		t.Errorf("the stamped commit %s is not HEAD or an ancestor of it: %v", stamped[1], err)
	}
	if !regexp.MustCompile(`(?m)^  commit: +` + stamped[1] + ` \(tree (clean|dirty)\)$`).Match(out) {
		t.Errorf("--version does not name commit %s and the tree's state:\n%s", stamped[1], out)
	}
}

func TestPrintVersion(t *testing.T) {
	defer func(v, c, s string) { version, gitCommit, gitTreeState = v, c, s }(version, gitCommit, gitTreeState)
	version, gitCommit, gitTreeState = "v1.2.3", "0123abcd", "dirty"
	var out strings.Builder
	printVersion(&out)
	if !strings.HasPrefix(out.String(), "handroll v1.2.3\n  commit:   0123abcd (tree dirty)\n  go:       go") {
		t.Errorf("printVersion:\n%s", out.String())
	}
	gitCommit = ""
	out.Reset()
	printVersion(&out)
	if strings.Contains(out.String(), "commit:") {
		t.Errorf("printVersion without a stamped commit names one:\n%s", out.String())
	}
}
