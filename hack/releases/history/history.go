// Package history finds handroll's releases in its git history, by one
// rule that the Makefile (through the hack/releases command) and the
// upgrade tests share.
//
// A release is a version vX.Y.Z without a pre-release suffix. Its commit is
// the annotated tag of that name when the repository has one, and otherwise
// the oldest commit whose VERSION file holds exactly that version: the
// commit that set it. A tag wins over history for its version, so tagging a
// release later never moves it.
//
// Releases are read from history, so a clone without it (a shallow one)
// is an error that says so: it would otherwise look like a project that
// never released anything.
package history

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// VersionFile is the file, at the repository's root, that names the version
// a tree builds.
const VersionFile = "VERSION"

// Release is a released version and the commit it was cut at.
type Release struct {
	Version string // vX.Y.Z
	Commit  string // the full hash
	Tagged  bool   // found as an annotated tag, not in VERSION's history
}

func (r Release) String() string { return r.Version + " " + r.Commit }

var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// IsRelease tells whether v names a release: vX.Y.Z, with neither a
// pre-release suffix nor build metadata.
func IsRelease(v string) bool { return releaseVersion.MatchString(v) }

// ErrNone is returned by Latest when no release precedes the revision.
var ErrNone = errors.New("no release")

// Find returns the releases known at rev: the annotated vX.Y.Z tags of the
// repository at dir, and the versions VERSION held in rev's history, each
// at the commit that set it. They come in version order, oldest first.
func Find(dir, rev string) ([]Release, error) {
	if err := requireHistory(dir); err != nil {
		return nil, err
	}
	commit, err := git(dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("%s is not a commit of the repository at %s", rev, dir)
	}
	found, err := fromHistory(dir, commit)
	if err != nil {
		return nil, err
	}
	tags, err := fromTags(dir)
	if err != nil {
		return nil, err
	}
	for v, c := range tags {
		found[v] = Release{Version: v, Commit: c, Tagged: true}
	}
	out := make([]Release, 0, len(found))
	for _, r := range found {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Release) int { return compareVersions(a.Version, b.Version) })
	return out, nil
}

// Latest returns the newest release whose commit is a strict ancestor of
// rev: the release rev upgrades from. rev itself is not one, even when it
// is a release's commit. It returns ErrNone, wrapped, when there is none.
func Latest(dir, rev string) (Release, error) {
	all, err := Find(dir, rev)
	if err != nil {
		return Release{}, err
	}
	head, err := git(dir, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return Release{}, err
	}
	for _, r := range slices.Backward(all) {
		if r.Commit == head {
			continue
		}
		ok, err := isAncestor(dir, r.Commit, head)
		if err != nil {
			return Release{}, err
		}
		if ok {
			return r, nil
		}
	}
	return Release{}, fmt.Errorf("%w before %s (%d found in its history and tags)", ErrNone, rev, len(all))
}

// Lookup returns version's release as known at rev, and whether it was cut.
func Lookup(dir, rev, version string) (Release, bool, error) {
	all, err := Find(dir, rev)
	if err != nil {
		return Release{}, false, err
	}
	i := slices.IndexFunc(all, func(r Release) bool { return r.Version == version })
	if i < 0 {
		return Release{}, false, nil
	}
	return all[i], true, nil
}

// requireHistory refuses a directory that is not a git repository, or a
// shallow clone: its releases cannot be told from its history.
func requireHistory(dir string) error {
	shallow, err := git(dir, "rev-parse", "--is-shallow-repository")
	if err != nil {
		return fmt.Errorf("releases are found in git history, and %s has none: %w", dir, err)
	}
	if shallow == "true" {
		return fmt.Errorf("releases are found in git history, and %s is a shallow clone: fetch it (git fetch --unshallow --tags) or use a full clone", dir)
	}
	return nil
}

// fromHistory returns, for each release version that VERSION held in
// commit's history, the commit that set it. The commits that changed
// VERSION come parents first; the first to hold a version set it.
func fromHistory(dir, commit string) (map[string]Release, error) {
	list, err := git(dir, "rev-list", "--full-history", "--topo-order", "--reverse", commit, "--", VersionFile)
	if err != nil {
		return nil, err
	}
	commits := strings.Fields(list)
	contents, err := versionsAt(dir, commits)
	if err != nil {
		return nil, err
	}
	found := map[string]Release{}
	for i, c := range commits {
		v := contents[i]
		if _, seen := found[v]; IsRelease(v) && !seen {
			found[v] = Release{Version: v, Commit: c}
		}
	}
	return found, nil
}

// versionsAt reads VERSION at each commit with one git cat-file; a commit
// without the file holds "".
func versionsAt(dir string, commits []string) ([]string, error) {
	var in bytes.Buffer
	for _, c := range commits {
		fmt.Fprintf(&in, "%s:%s\n", c, VersionFile)
	}
	cmd := exec.Command("git", "-C", dir, "cat-file", "--batch")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git cat-file --batch: %w\n%s", err, stderr.Bytes())
	}
	r := bufio.NewReader(bytes.NewReader(out))
	versions := make([]string, len(commits))
	for i := range commits {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file --batch: short output: %w", err)
		}
		fields := strings.Fields(header)
		if len(fields) != 3 {
			continue // "<object> missing": no VERSION in that commit
		}
		size, err := strconv.Atoi(fields[2])
		if err != nil {
			return nil, fmt.Errorf("git cat-file --batch: %q: %w", header, err)
		}
		body := make([]byte, size+1) // the content and its newline
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("git cat-file --batch: short output: %w", err)
		}
		versions[i] = strings.TrimSpace(string(body))
	}
	return versions, nil
}

// fromTags returns the commit of each annotated vX.Y.Z tag. A lightweight
// tag names no release: cutting one is a deliberate, annotated act.
func fromTags(dir string) (map[string]string, error) {
	out, err := git(dir, "for-each-ref", "--format=%(refname:strip=2) %(objecttype) %(*objecttype) %(*objectname)", "refs/tags/")
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && IsRelease(f[0]) && f[1] == "tag" && f[2] == "commit" {
			tags[f[0]] = f[3]
		}
	}
	return tags, nil
}

func isAncestor(dir, ancestor, commit string) (bool, error) {
	err := exec.Command("git", "-C", dir, "merge-base", "--is-ancestor", ancestor, commit).Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	default:
		return false, fmt.Errorf("git merge-base --is-ancestor %s %s: %w", ancestor, commit, err)
	}
}

// compareVersions orders two release versions (both match releaseVersion).
func compareVersions(a, b string) int {
	pa, pb := releaseVersion.FindStringSubmatch(a), releaseVersion.FindStringSubmatch(b)
	for i := 1; i <= 3; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return 0
}

// NextDevelopment names the version to develop after the release v:
// the next minor version's pre-release, such as v0.3.0-dev after v0.2.0.
func NextDevelopment(v string) string {
	p := releaseVersion.FindStringSubmatch(v)
	if p == nil {
		return ""
	}
	minor, _ := strconv.Atoi(p[2])
	return fmt.Sprintf("v%s.%d.0-dev", p[1], minor+1)
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
