// Command chartmeta writes a release's Artifact Hub annotations into the
// Chart.yaml of a copy of the chart, as make chart-package packages it:
// artifacthub.io/changes from the CHANGELOG section of the version (the
// Unreleased one for a pre-release such as v0.3.0-dev), artifacthub.io/images
// naming the image the chart runs by digest, and artifacthub.io/prerelease.
// Artifact Hub shows them on the chart's page; helm ignores them.
//
//	go run ./hack/chartmeta --chart DIR --changelog CHANGELOG.md --version vX.Y.Z --image REF
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	chart := flag.String("chart", "", "the chart's directory (a copy: its Chart.yaml is rewritten)")
	changelog := flag.String("changelog", "CHANGELOG.md", "the changelog, in the form of keepachangelog.com")
	version := flag.String("version", "", "the release, vX.Y.Z")
	image := flag.String("image", "", "the image the chart runs, such as REPO:TAG@sha256:...")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "the image's platforms, comma-separated")
	flag.Parse()
	if err := run(*chart, *changelog, *version, *image, strings.Split(*platforms, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "chartmeta:", err)
		os.Exit(1)
	}
}

func run(chart, changelog, version, image string, platforms []string) error {
	if chart == "" || version == "" {
		return errors.New("--chart and --version are required")
	}
	log, err := os.ReadFile(changelog)
	if err != nil {
		return err
	}
	changes, err := Changes(log, version)
	if err != nil {
		return fmt.Errorf("%s: %w", changelog, err)
	}
	annotations := map[string]any{}
	if len(changes) > 0 {
		annotations["artifacthub.io/changes"] = changes
	}
	if image != "" {
		annotations["artifacthub.io/images"] = []map[string]any{{"name": "handroll", "image": image, "platforms": platforms}}
	}
	annotations["artifacthub.io/prerelease"] = fmt.Sprint(strings.Contains(version, "-"))
	return annotate(filepath.Join(chart, "Chart.yaml"), annotations)
}

// Change is one entry of artifacthub.io/changes.
type Change struct {
	Kind        string `yaml:"kind"`
	Description string `yaml:"description"`
}

// kinds maps the changelog's headings to Artifact Hub's kinds; a heading
// not named here (Known issues) is not a change.
var kinds = map[string]string{
	"Added": "added", "Changed": "changed", "Deprecated": "deprecated",
	"Removed": "removed", "Fixed": "fixed", "Security": "security",
}

var (
	versionHeading = regexp.MustCompile(`^## \[([^\]]+)\]`)
	emphasis       = regexp.MustCompile(`\*\*|__`)
	sentenceEnd    = regexp.MustCompile(`\. `)
)

// Changes reads the section of version from a changelog: each bullet of an
// Added, Changed, … heading becomes one change, described by its first
// sentence. A pre-release reads the Unreleased section, which may be
// empty; a release without changes of its own is an error, since its chart
// would say nothing.
func Changes(changelog []byte, version string) ([]Change, error) {
	want := version
	if strings.Contains(version, "-") {
		want = "Unreleased"
	}
	var (
		changes []Change
		found   bool
		kind    string
		bullet  []string
	)
	flush := func() {
		if kind != "" && len(bullet) > 0 {
			changes = append(changes, Change{Kind: kind, Description: firstSentence(strings.Join(bullet, " "))})
		}
		bullet = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(changelog))
	for sc.Scan() {
		line := sc.Text()
		if m := versionHeading.FindStringSubmatch(line); m != nil {
			if found {
				break
			}
			found = m[1] == want
			continue
		}
		if !found {
			continue
		}
		switch {
		case strings.HasPrefix(line, "### "):
			flush()
			kind = kinds[strings.TrimSpace(strings.TrimPrefix(line, "### "))]
		case strings.HasPrefix(line, "- "):
			flush()
			bullet = []string{strings.TrimPrefix(line, "- ")}
		case strings.HasPrefix(line, "  ") && bullet != nil:
			bullet = append(bullet, strings.TrimSpace(line))
		case strings.TrimSpace(line) == "":
		default:
			flush()
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("no section ## [%s]", want)
	}
	if len(changes) == 0 && want != "Unreleased" {
		return nil, fmt.Errorf("the section ## [%s] lists no change", want)
	}
	return changes, nil
}

// firstSentence is the bullet up to its first sentence's end, without
// Markdown emphasis: Artifact Hub lists each change on one line.
func firstSentence(text string) string {
	text = emphasis.ReplaceAllString(text, "")
	if loc := sentenceEnd.FindStringIndex(text); loc != nil {
		text = text[:loc[0]]
	}
	return strings.TrimSuffix(strings.TrimSpace(text), ".")
}

// annotate sets annotations in the Chart.yaml at path, each value written
// as a YAML string (Artifact Hub reads lists from YAML inside the string),
// keeping the file's other keys, their order and comments.
func annotate(path string, annotations map[string]any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a mapping", path)
	}
	block := mapping(doc.Content[0], "annotations")
	for _, key := range sortedKeys(annotations) {
		value, ok := annotations[key].(string)
		if !ok {
			out, err := yaml.Marshal(annotations[key])
			if err != nil {
				return err
			}
			value = string(out)
		}
		set(block, key, value)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// mapping returns the mapping under key in m, adding an empty one.
func mapping(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	value := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
	return value
}

// set sets key to the string value in m, as a literal block when it holds
// more than one line.
func set(m *yaml.Node, key, value string) {
	node := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	if strings.Contains(value, "\n") {
		node.Style = yaml.LiteralStyle
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = node
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, node)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
