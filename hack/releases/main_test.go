package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommands runs the commands as the Makefile does, on a repository
// made with the real git: v0.1.0 cut, then v0.2.0 cut and changed after.
func TestCommands(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_AUTHOR_NAME", "maintainers")
	t.Setenv("GIT_AUTHOR_EMAIL", "maintainers@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "maintainers")
	t.Setenv("GIT_COMMITTER_EMAIL", "maintainers@example.com")
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	var commits []string
	git("init", "--quiet")
	for _, v := range []string{"v0.1.0", "v0.2.0-dev", "v0.2.0"} {
		if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "VERSION")
		git("commit", "--quiet", "-m", v)
		commits = append(commits, git("rev-parse", "HEAD"))
	}
	git("commit", "--quiet", "--allow-empty", "-m", "same tree")
	// An untracked file does not change the tree of HEAD.
	if err := os.WriteFile(filepath.Join(dir, "main.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // stderr: a prefix
	}{
		{[]string{"list"}, 0, "v0.1.0 " + commits[0] + "\nv0.2.0 " + commits[2] + "\n", ""},
		{[]string{"latest"}, 0, "v0.2.0 " + commits[2] + "\n", ""},
		{[]string{"latest", commits[2]}, 0, "v0.1.0 " + commits[0] + "\n", ""},
		{[]string{"latest", commits[0]}, 1, "", "releases: no release before"},
		{[]string{"check", "v0.2.0"}, 0, "", ""}, // HEAD has v0.2.0's tree
		{[]string{"check", "v0.1.0"}, 1, "", "release: v0.1.0 was cut at " + commits[0][:7]},
		{[]string{"check", "v0.3.0-dev"}, 0, "", ""},
		{[]string{"check"}, 2, "", "usage:"},
		{[]string{"tags"}, 2, "", "usage:"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(dir, tc.args, &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || !strings.HasPrefix(stderr.String(), tc.stderr) ||
			(tc.stderr == "") != (stderr.Len() == 0) || strings.Count(stderr.String(), "\n") > 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, one stderr line starting %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
