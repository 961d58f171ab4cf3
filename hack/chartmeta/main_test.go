package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const changelog = `# Changelog

## [Unreleased]

### Added

- **A thing.** That matters.

## [v0.2.0] - 2026-12-02

Intro paragraph, not a change.

### Added

- ` + "`helm uninstall`" + ` keeps the data. More words
  on a second line.
- Two lines
  joined into one.

### Fixed

- A fix.

### Known issues

- Not a change.

## [v0.1.0] - 2026-12-01

### Added

- The first.
`

func TestChanges(t *testing.T) {
	got, err := Changes([]byte(changelog), "v0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{"added", "`helm uninstall` keeps the data"},
		{"added", "Two lines joined into one"},
		{"fixed", "A fix"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("v0.2.0: got %q, want %q", got, want)
	}
	if got, err := Changes([]byte(changelog), "v0.3.0-dev"); err != nil || !slices.Equal(got, []Change{{"added", "A thing"}}) {
		t.Errorf("a pre-release reads Unreleased: got %q, %v", got, err)
	}
	if _, err := Changes([]byte(changelog), "v0.9.0"); err == nil || !strings.Contains(err.Error(), "no section ## [v0.9.0]") {
		t.Errorf("a release without its section: %v, want the error naming it", err)
	}
}

// TestAnnotateKeepsTheChart checks that the annotations are added beside
// what Chart.yaml holds, its comments kept, and that a second run replaces
// them rather than adding more.
func TestAnnotateKeepsTheChart(t *testing.T) {
	dir := t.TempDir()
	chart := "apiVersion: v2\n# why the version\nversion: 0.2.0\nannotations:\n  artifacthub.io/license: Apache-2.0\n"
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(chart), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "CHANGELOG.md")
	if err := os.WriteFile(log, []byte(changelog), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := run(dir, log, "v0.2.0", "r/h:v0.2.0@sha256:00", []string{"linux/amd64"}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "# why the version") {
		t.Errorf("the comment is gone:\n%s", data)
	}
	var meta struct {
		Version     string            `yaml:"version"`
		Annotations map[string]string `yaml:"annotations"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	var changes []Change
	if err := yaml.Unmarshal([]byte(meta.Annotations["artifacthub.io/changes"]), &changes); err != nil || len(changes) != 3 {
		t.Errorf("artifacthub.io/changes: %v, %q", err, meta.Annotations["artifacthub.io/changes"])
	}
	if meta.Version != "0.2.0" || meta.Annotations["artifacthub.io/license"] != "Apache-2.0" || meta.Annotations["artifacthub.io/prerelease"] != "false" ||
		!strings.Contains(meta.Annotations["artifacthub.io/images"], "image: r/h:v0.2.0@sha256:00") || len(meta.Annotations) != 4 {
		t.Errorf("Chart.yaml after two runs:\n%s", data)
	}
}

func TestEmptyUnreleasedIsNoChange(t *testing.T) {
	got, err := Changes([]byte("## [Unreleased]\n\n## [v0.1.0] - 2026-12-01\n\n### Added\n\n- The first.\n"), "v0.2.0-dev")
	if err != nil || len(got) != 0 {
		t.Errorf("an empty Unreleased section for a pre-release: %q, %v; want no change and no error", got, err)
	}
}
