// Package release checks out a previous release of handroll and builds it,
// for the tests that upgrade from it (test/upgrade, and test/real's Helm
// upgrade), and holds the writer both keep writing WebApps with while they
// do: an upgrade must refuse none of its writes.
package release

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Release is a revision of handroll checked out in a git worktree of its own.
type Release struct {
	Ref, Commit string
	Dir         string // the worktree
	root        string // the repository
	allowances  map[string]bool
}

// AllowClosedOnStop is the allowance for a previous release whose webhook
// server closes its idle keep-alive connections the moment it stops: a
// call the API server sends on one just then fails with EOF, and the
// write is refused. No later release can change how an earlier one stops.
const AllowClosedOnStop = "webhook-connections-closed-on-stop"

var knownAllowances = map[string]bool{AllowClosedOnStop: true}

// Allows tells whether the file naming r excuses the known defect name.
func (r *Release) Allows(name string) bool { return r.allowances[name] }

// readRevision returns the first line of file that is neither blank nor a
// # comment, a tag or a commit, and the allowances the lines after it name
// ("allow NAME", each a known defect of that release).
func readRevision(file string) (string, map[string]bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	rev, allowances := "", map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case rev == "":
			rev = line
		default:
			name, ok := strings.CutPrefix(line, "allow ")
			if !ok || !knownAllowances[strings.TrimSpace(name)] {
				return "", nil, fmt.Errorf("%s: %q: want \"allow NAME\", NAME one of %v", file, line, slices.Collect(maps.Keys(knownAllowances)))
			}
			allowances[strings.TrimSpace(name)] = true
		}
	}
	if rev == "" {
		return "", nil, fmt.Errorf("%s names no revision", file)
	}
	return rev, allowances, nil
}

// CheckOut adds a detached worktree of the revision file names. A clone
// without it (a shallow one, say) is an error that says so: the test must
// not pass without having upgraded from anything.
func CheckOut(root, file string) (*Release, error) {
	ref, allowances, err := readRevision(file)
	if err != nil {
		return nil, err
	}
	commit, err := git(root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		why := ""
		if shallow, _ := git(root, "rev-parse", "--is-shallow-repository"); shallow == "true" {
			why = " (this is a shallow clone)"
		}
		return nil, fmt.Errorf("the previous release %q, named in %s, is not in this clone%s; "+
			"the upgrade test builds it from the repository's history: fetch it (git fetch --unshallow --tags) or use a full clone",
			ref, file, why)
	}
	removeLeftWorktrees(root)
	dir, err := os.MkdirTemp("", worktreePrefix)
	if err != nil {
		return nil, err
	}
	if _, err := git(root, "worktree", "add", "--detach", dir, commit); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Release{Ref: ref, Commit: commit, root: root, Dir: dir, allowances: allowances}, nil
}

const worktreePrefix = "handroll-previous-release-"

// removeLeftWorktrees removes the worktrees that runs killed before they
// could remove their own left behind (one run at a time per clone).
func removeLeftWorktrees(root string) {
	list, err := git(root, "worktree", "list", "--porcelain")
	if err != nil {
		return
	}
	for _, line := range strings.Split(list, "\n") {
		path, ok := strings.CutPrefix(line, "worktree ")
		if ok && strings.HasPrefix(filepath.Base(path), worktreePrefix) && filepath.Dir(path) == filepath.Clean(os.TempDir()) {
			_, _ = git(root, "worktree", "remove", "--force", path)
		}
	}
	_, _ = git(root, "worktree", "prune")
}

// Remove removes the worktree and git's record of it.
func (r *Release) Remove() error {
	_, err := git(r.root, "worktree", "remove", "--force", r.Dir)
	return errors.Join(err, os.RemoveAll(r.Dir))
}

// Build builds cmd/handroll of the tree at dir into out as that tree's
// `make build` does: static, -trimpath, and the -ldflags its Makefile
// computes (the version stamps), asked of that Makefile. The Go build and
// module caches are the user's, so a release that shares most packages
// with the tree is mostly cache hits.
func Build(t testing.TB, dir, out string) {
	t.Helper()
	ldflags, err := MakeVariable(dir, "LDFLAGS")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/handroll")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s in %s: %v\n%s", filepath.Base(out), dir, err, b)
	}
	t.Logf("built %s from %s with -ldflags %q", filepath.Base(out), dir, ldflags)
}

// MakeVariable prints a variable of the Makefile in dir. The calling
// make's MAKEFLAGS are dropped, so that a variable set on its command line
// does not leak into another tree's.
func MakeVariable(dir, name string) (string, error) {
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", dir,
		"--eval", fmt.Sprintf("upgrade-test-print: ; @echo $(%s)", name), "upgrade-test-print")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = WithoutMakeFlags(os.Environ())
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("reading %s from %s/Makefile: %w\n%s", name, dir, err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// WithoutMakeFlags is env without the calling make's MAKEFLAGS, MFLAGS
// and MAKELEVEL, for a make run in another tree: a variable set on the
// calling make's command line must not leak into it.
func WithoutMakeFlags(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			out = append(out, kv)
		}
	}
	return out
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}
