// Package release checks out the releases of handroll an upgrade must
// start from (the latest before this tree, and the oldest supported, named
// in test/upgrade/supported) and builds them, for the tests that upgrade
// from them (test/upgrade, and test/real's helm and install.yaml
// upgrades), and holds the writer both keep writing WebApps with while they
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

	"github.com/handroll/handroll/hack/releases/history"
)

// Release is a release of handroll checked out in a git worktree of its own.
type Release struct {
	Ref, Commit string // the version, such as v0.1.0, and its commit
	Dir         string // the worktree
	root        string // the repository
	allowances  map[string]bool
}

// AllowClosedOnStop is the allowance for a release whose webhook server
// closes its idle keep-alive connections the moment it stops: a call the
// API server sends on one just then fails with EOF, and the write is
// refused. No later release can change how an earlier one stops.
const AllowClosedOnStop = "webhook-connections-closed-on-stop"

var knownAllowances = map[string]bool{AllowClosedOnStop: true}

// Allows tells whether the supported file excuses the known defect name
// for r.
func (r *Release) Allows(name string) bool { return r.allowances[name] }

// Supported is what the supported file says: the oldest release an upgrade
// must start from, and each release's allowances.
type Supported struct {
	Oldest     string
	Allowances map[string]map[string]bool // version → defect → excused
}

// ReadSupported reads the supported file: lines "oldest vX.Y.Z" (one) and
// "allow vX.Y.Z NAME", each NAME a known defect of that release; blank
// lines and # comments are ignored.
func ReadSupported(file string) (Supported, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Supported{}, err
	}
	s := Supported{Allowances: map[string]map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case len(f) == 2 && f[0] == "oldest" && history.IsRelease(f[1]) && s.Oldest == "":
			s.Oldest = f[1]
		case len(f) == 3 && f[0] == "allow" && history.IsRelease(f[1]) && knownAllowances[f[2]]:
			if s.Allowances[f[1]] == nil {
				s.Allowances[f[1]] = map[string]bool{}
			}
			s.Allowances[f[1]][f[2]] = true
		default:
			return Supported{}, fmt.Errorf("%s:%d: %q: want \"oldest vX.Y.Z\" once, or \"allow vX.Y.Z NAME\", NAME one of %v",
				file, n, sc.Text(), slices.Collect(maps.Keys(knownAllowances)))
		}
	}
	if s.Oldest == "" {
		return Supported{}, fmt.Errorf("%s names no oldest supported release", file)
	}
	return s, nil
}

// UpgradedFrom names the releases this tree (HEAD of root) must upgrade
// from without rolling a pod: the latest release before it, found in
// history as hack/releases finds it, and the oldest supported one that file
// names, latest first, once each. A release the file names but history does
// not know is an error, as is a clone without history (a shallow one): the
// tests must not pass without having upgraded from anything.
func UpgradedFrom(root, file string) ([]history.Release, Supported, error) {
	s, err := ReadSupported(file)
	if err != nil {
		return nil, s, err
	}
	latest, err := history.Latest(root, "HEAD")
	if err != nil {
		return nil, s, fmt.Errorf("the latest release before HEAD: %w", err)
	}
	all, err := history.Find(root, "HEAD")
	if err != nil {
		return nil, s, err
	}
	for _, v := range append([]string{s.Oldest}, slices.Collect(maps.Keys(s.Allowances))...) {
		if !slices.ContainsFunc(all, func(r history.Release) bool { return r.Version == v }) {
			return nil, s, fmt.Errorf("%s names %s, which was never released (releases: %v)", file, v, all)
		}
	}
	oldest := all[slices.IndexFunc(all, func(r history.Release) bool { return r.Version == s.Oldest })]
	if oldest.Commit != latest.Commit {
		ok, err := isAncestor(root, oldest.Commit, latest.Commit)
		if err != nil {
			return nil, s, err
		}
		if !ok {
			return nil, s, fmt.Errorf("%s names %s as the oldest supported release, but it is not before the latest, %s", file, oldest, latest)
		}
		return []history.Release{latest, oldest}, s, nil
	}
	return []history.Release{latest}, s, nil
}

// CheckOutSupported checks out each release UpgradedFrom names, each with
// its allowances, latest first; the caller removes them.
func CheckOutSupported(root, file string) ([]*Release, error) {
	found, s, err := UpgradedFrom(root, file)
	if err != nil {
		return nil, err
	}
	removeLeftWorktrees(root)
	var out []*Release
	for _, f := range found {
		r, err := checkOut(root, f.Version, f.Commit)
		if err != nil {
			for _, o := range out {
				_ = o.Remove()
			}
			return nil, err
		}
		r.allowances = s.Allowances[f.Version]
		out = append(out, r)
	}
	return out, nil
}

// checkOut adds a detached worktree of commit.
func checkOut(root, ref, commit string) (*Release, error) {
	dir, err := os.MkdirTemp("", worktreePrefix+ref+"-")
	if err != nil {
		return nil, err
	}
	if _, err := git(root, "worktree", "add", "--detach", dir, commit); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Release{Ref: ref, Commit: commit, root: root, Dir: dir}, nil
}

const worktreePrefix = "handroll-release-"

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

func isAncestor(root, ancestor, commit string) (bool, error) {
	err := exec.Command("git", "-C", root, "merge-base", "--is-ancestor", ancestor, commit).Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
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
