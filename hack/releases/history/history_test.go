package history

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo is a git repository in a temporary directory, made with the real git.
type repo struct {
	t   *testing.T
	dir string
}

// newRepo makes an empty repository; git reads no user or system
// configuration, so that a signing or hook setting cannot change the test.
func newRepo(t *testing.T) *repo {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{"GIT_AUTHOR", "GIT_COMMITTER"} {
		t.Setenv(k+"_NAME", "maintainers")
		t.Setenv(k+"_EMAIL", "maintainers@example.com")
		t.Setenv(k+"_DATE", "2026-12-02T10:00:00Z")
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "--quiet", "--initial-branch=main")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", r.dir}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (name, content pairs) and commits them, returning the commit.
func (r *repo) commit(msg string, files ...string) string {
	r.t.Helper()
	for i := 0; i+1 < len(files); i += 2 {
		if err := os.WriteFile(filepath.Join(r.dir, files[i]), []byte(files[i+1]), 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.git("add", files[i])
	}
	r.git("commit", "--quiet", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// history makes: v0.1.0-dev, v0.1.0 (cut), a fix, v0.2.0-dev, v0.2.0
// (cut), then v0.2.0 still in VERSION with a change after it.
type cuts struct{ dev1, v010, fix, dev2, v020, after string }

func (r *repo) history() cuts {
	var c cuts
	c.dev1 = r.commit("start", "VERSION", "v0.1.0-dev\n", "main.go", "package main\n")
	c.v010 = r.commit("cut v0.1.0", "VERSION", "v0.1.0\n")
	c.fix = r.commit("a fix", "main.go", "package main // fixed\n")
	c.dev2 = r.commit("develop v0.2.0", "VERSION", "v0.2.0-dev\n")
	c.v020 = r.commit("cut v0.2.0", "VERSION", "v0.2.0\n")
	c.after = r.commit("a change after v0.2.0", "main.go", "package main // changed\n")
	return c
}

func versions(rs []Release) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}

func TestFindFromHistory(t *testing.T) {
	r := newRepo(t)
	c := r.history()
	got, err := Find(r.dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	// Pre-releases are no releases; each release is the commit that set it,
	// not a later one that kept it.
	want := []string{"v0.1.0 " + c.v010, "v0.2.0 " + c.v020}
	if !slices.Equal(versions(got), want) {
		t.Errorf("Find = %q, want %q", versions(got), want)
	}
	// At an older revision, only what its history holds.
	got, err = Find(r.dir, c.fix)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"v0.1.0 " + c.v010}; !slices.Equal(versions(got), want) {
		t.Errorf("Find(fix) = %q, want %q", versions(got), want)
	}
}

func TestFindTagWinsOverHistory(t *testing.T) {
	r := newRepo(t)
	c := r.history()
	// v0.1.0 was tagged at its fix; v0.0.9 has only a tag; lightweight
	// and pre-release tags name no release.
	r.git("tag", "-a", "-m", "v0.1.0", "v0.1.0", c.fix)
	r.git("tag", "-a", "-m", "v0.0.9", "v0.0.9", c.dev1)
	r.git("tag", "v0.2.0", c.after)
	r.git("tag", "-a", "-m", "rc", "v0.3.0-rc.1", c.after)
	got, err := Find(r.dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v0.0.9 " + c.dev1, "v0.1.0 " + c.fix, "v0.2.0 " + c.v020}
	if !slices.Equal(versions(got), want) {
		t.Errorf("Find = %q, want %q", versions(got), want)
	}
	if !got[1].Tagged || got[2].Tagged {
		t.Errorf("Tagged: v0.1.0 %t, v0.2.0 %t; want true, false", got[1].Tagged, got[2].Tagged)
	}
}

func TestFindOrdersByVersion(t *testing.T) {
	r := newRepo(t)
	r.commit("v0.9.0", "VERSION", "v0.9.0\n")
	r.commit("v0.10.0", "VERSION", "v0.10.0\n")
	r.commit("v1.0.0", "VERSION", "v1.0.0\n")
	got, err := Find(r.dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, x := range got {
		vs = append(vs, x.Version)
	}
	if want := []string{"v0.9.0", "v0.10.0", "v1.0.0"}; !slices.Equal(vs, want) {
		t.Errorf("versions = %q, want %q", vs, want)
	}
}

func TestLatestIsAStrictAncestor(t *testing.T) {
	r := newRepo(t)
	c := r.history()
	for _, tc := range []struct{ rev, want string }{
		{"HEAD", "v0.2.0 " + c.v020},
		{c.v020, "v0.1.0 " + c.v010}, // a release does not upgrade from itself
		{c.dev2, "v0.1.0 " + c.v010},
		{c.fix, "v0.1.0 " + c.v010},
	} {
		got, err := Latest(r.dir, tc.rev)
		if err != nil {
			t.Errorf("Latest(%s): %v", tc.rev, err)
		} else if got.String() != tc.want {
			t.Errorf("Latest(%s) = %s, want %s", tc.rev, got, tc.want)
		}
	}
	for _, rev := range []string{c.v010, c.dev1} {
		if got, err := Latest(r.dir, rev); !errors.Is(err, ErrNone) {
			t.Errorf("Latest(%s) = %v, %v; want ErrNone", rev, got, err)
		}
	}
	// A release tagged on another branch is not an ancestor.
	r.git("checkout", "--quiet", "-b", "side", c.fix)
	side := r.commit("side work", "main.go", "package main // side\n")
	r.git("tag", "-a", "-m", "v0.1.1", "v0.1.1", side)
	r.git("checkout", "--quiet", "main")
	if got, err := Latest(r.dir, c.dev2); err != nil || got.Version != "v0.1.0" {
		t.Errorf("Latest(dev2) = %v, %v; want v0.1.0 (v0.1.1 is on another branch)", got, err)
	}
}

func TestCheck(t *testing.T) {
	r := newRepo(t)
	c := r.history()
	// HEAD is a later commit with another tree: v0.2.0 names another artifact.
	err := Check(r.dir, "v0.2.0")
	var cut *CutError
	if !errors.As(err, &cut) {
		t.Fatalf("Check(v0.2.0) at a later tree = %v, want a *CutError", err)
	}
	msg := err.Error()
	for _, want := range []string{"release: v0.2.0 was cut at " + c.v020[:7] + " (2026-12-02); HEAD is " + cut.Head, "v0.3.0-dev"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message %q is more than one line", msg)
	}
	for _, v := range []string{"v0.3.0-dev", "v0.3.0", "0.2.0", "v0.2.0+build"} {
		if err := Check(r.dir, v); err != nil {
			t.Errorf("Check(%s), never released: %v", v, err)
		}
	}
	// Back at v0.2.0's tree (a revert, a rebuild): the same artifact.
	r.git("revert", "--no-edit", "HEAD")
	if err := Check(r.dir, "v0.2.0"); err != nil {
		t.Errorf("Check(v0.2.0) at the release's tree: %v", err)
	}
	r.git("checkout", "--quiet", c.v020)
	if err := Check(r.dir, "v0.2.0"); err != nil {
		t.Errorf("Check(v0.2.0) at the release's commit: %v", err)
	}
}

func TestMissingHistoryIsAnError(t *testing.T) {
	r := newRepo(t)
	r.history()
	shallow := filepath.Join(t.TempDir(), "shallow")
	r.git("clone", "--quiet", "--depth=1", "file://"+r.dir, shallow)
	for name, dir := range map[string]string{"shallow": shallow, "not a repository": t.TempDir()} {
		if got, err := Find(dir, "HEAD"); err == nil {
			t.Errorf("%s: Find = %v, want an error", name, got)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if err := Check(dir, "v0.2.0"); err == nil {
			t.Errorf("%s: Check(v0.2.0) passed, want an error", name)
		}
	}
	if _, err := Find(shallow, "HEAD"); err == nil || !strings.Contains(err.Error(), "shallow") {
		t.Errorf("Find in a shallow clone: %v, want it to say shallow", err)
	}
}
