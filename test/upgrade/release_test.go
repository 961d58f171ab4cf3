package upgrade

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

// release is a revision of handroll checked out in a git worktree of its own.
type release struct {
	ref, commit string
	root, dir   string // the repository, and the worktree in it
	allowances  map[string]bool
}

// allowClosedOnStop is the allowance for a previous release whose webhook
// server closes its idle keep-alive connections the moment it stops: a
// call the API server sends on one just then fails with EOF, and the
// write is refused. No later release can change how an earlier one stops.
const allowClosedOnStop = "webhook-connections-closed-on-stop"

var knownAllowances = map[string]bool{allowClosedOnStop: true}

func (r *release) allows(name string) bool { return r.allowances[name] }

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

// checkOut adds a detached worktree of the revision file names. A clone
// without it (a shallow one, say) is an error that says so: the test must
// not pass without having upgraded from anything.
func checkOut(root, file string) (*release, error) {
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
	return &release{ref: ref, commit: commit, root: root, dir: dir, allowances: allowances}, nil
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

// remove removes the worktree and git's record of it.
func (r *release) remove() error {
	_, err := git(r.root, "worktree", "remove", "--force", r.dir)
	return errors.Join(err, os.RemoveAll(r.dir))
}

// build builds cmd/handroll of the tree at dir into out as that tree's
// `make build` does: static, -trimpath, and the -ldflags its Makefile
// computes (the version stamps), asked of that Makefile. The Go build and
// module caches are the user's, so a release that shares most packages
// with the tree is mostly cache hits.
func build(t *testing.T, dir, out string) {
	t.Helper()
	ldflags, err := makeVariable(dir, "LDFLAGS")
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

// makeVariable prints a variable of the Makefile in dir. The calling
// make's MAKEFLAGS are dropped, so that a variable set on its command line
// does not leak into another tree's.
func makeVariable(dir, name string) (string, error) {
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", dir,
		"--eval", fmt.Sprintf("upgrade-test-print: ; @echo $(%s)", name), "upgrade-test-print")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("reading %s from %s/Makefile: %w\n%s", name, dir, err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
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
