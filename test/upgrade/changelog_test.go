package upgrade

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rollsPodsMarker begins the CHANGELOG.md bullet, under a release's
// "### Changed", that says why that release changes the children of
// existing WebApps, and so rolls their pods: "- Rolls pods: <why>".
const rollsPodsMarker = "- Rolls pods:"

// rollsPods returns the reason the tree's CHANGELOG.md gives for changing
// the children of existing WebApps, in the section of the tree's VERSION
// or the one of what is not released yet; "" when it gives none, and the
// upgrade may then change no child.
func rollsPods(root string) (string, error) {
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	return rollsPodsIn(bufio.NewScanner(f), strings.TrimSpace(string(version)))
}

func rollsPodsIn(sc *bufio.Scanner, version string) (string, error) {
	var reasons []string
	inScope, changed := false, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inScope = strings.HasPrefix(line, "## [Unreleased]") || strings.HasPrefix(line, "## ["+version+"]")
			changed = false
		case strings.HasPrefix(line, "### "):
			changed = strings.TrimSpace(line) == "### Changed"
		case inScope && strings.HasPrefix(line, rollsPodsMarker):
			if !changed {
				return "", fmt.Errorf("CHANGELOG.md: %q is not under a ### Changed heading", line)
			}
			why := strings.TrimSpace(strings.TrimPrefix(line, rollsPodsMarker))
			if why == "" {
				return "", fmt.Errorf("CHANGELOG.md: %q says no why", line)
			}
			reasons = append(reasons, why)
		}
	}
	return strings.Join(reasons, "; "), sc.Err()
}

// childChange returns how a change to a WebApp's children is reported: a
// failure, unless the CHANGELOG says why this release rolls pods; then a
// line of the log beside that reason, for the reviewer to hold the two
// together.
func childChange(t *testing.T, why string) func(format string, args ...any) {
	if why == "" {
		return t.Errorf
	}
	return func(format string, args ...any) {
		t.Helper()
		t.Logf("allowed by CHANGELOG.md (Rolls pods: %s): "+format, append([]any{why}, args...)...)
	}
}

func TestRollsPodsReadsTheRelease(t *testing.T) {
	const changelog = `# Changelog

## [Unreleased]

### Fixed

- Rolls pods: under Fixed, where it is refused.

## [v0.3.0] - 2027-01-01

### Changed

- Rolls pods: the pod template's securityContext drops ALL capabilities.
- Something else.

## [v0.2.0] - 2026-12-02

### Changed

- Rolls pods: an older release's reason.
`
	read := func(text, version string) (string, error) {
		return rollsPodsIn(bufio.NewScanner(strings.NewReader(text)), version)
	}
	if _, err := read(changelog, "v0.3.0"); err == nil || !strings.Contains(err.Error(), "not under a ### Changed heading") {
		t.Errorf("a Rolls pods line under Fixed: %v; want it refused", err)
	}
	fixed := strings.Replace(changelog, "- Rolls pods: under Fixed, where it is refused.\n", "- A fix.\n", 1)
	for _, c := range []struct{ version, want string }{
		{"v0.3.0", "the pod template's securityContext drops ALL capabilities."},
		{"v0.2.0", "an older release's reason."},
		{"v0.4.0", ""},
	} {
		if got, err := read(fixed, c.version); err != nil || got != c.want {
			t.Errorf("VERSION %s: %q, %v; want %q", c.version, got, err, c.want)
		}
	}
	if _, err := read("## [Unreleased]\n### Changed\n- Rolls pods:\n", "v9.9.9"); err == nil {
		t.Error("a Rolls pods line with no why was accepted")
	}
	// This tree's own CHANGELOG parses; what it allows is printed.
	root := filepath.Join("..", "..")
	why, err := rollsPods(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this tree's CHANGELOG.md allows child changes: %q", why)
}
