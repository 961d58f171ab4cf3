package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// embed says where the methods of an embedded interface are mapped: in this
// section (decl) or in the section another heading names (section).
type embed struct {
	decl    decl
	section string
}

// mapSection is one section of docs/manager-map.md that must have a row for
// every member of a controller-runtime type. The section is the one whose
// heading's first code span is name.
type mapSection struct {
	name   string
	decl   decl
	embeds map[string]embed
}

var mapSections = []mapSection{
	{name: "manager.Options", decl: decl{"pkg/manager/manager.go", "Options"}},
	{name: "metricsserver.Options", decl: decl{"pkg/metrics/server/server.go", "Options"}},
	{name: "webhook.Options", decl: decl{"pkg/webhook/server.go", "Options"}},
	{name: "client.Options", decl: decl{"pkg/client/client.go", "Options"}},
	{name: "client.CacheOptions", decl: decl{"pkg/client/client.go", "CacheOptions"}},
	{name: "config.Controller", decl: decl{"pkg/config/controller.go", "Controller"}},
	{name: "cache.Options", decl: decl{"pkg/cache/cache.go", "Options"}},
	{name: "cache.ByObject", decl: decl{"pkg/cache/cache.go", "ByObject"}},
	{name: "cache.Config", decl: decl{"pkg/cache/cache.go", "Config"}},
	{name: "manager.Manager", decl: decl{"pkg/manager/manager.go", "Manager"},
		embeds: map[string]embed{"cluster.Cluster": {section: "cluster.Cluster"}}},
	{name: "cluster.Cluster", decl: decl{"pkg/cluster/cluster.go", "Cluster"},
		embeds: map[string]embed{"recorder.Provider": {decl: decl{"pkg/recorder/recorder.go", "Provider"}}}},
}

const notApplicable = "not applicable, because"

// TestManagerMapCoversControllerRuntime reads the controller-runtime types
// from source and fails for each field or method that has no row of its own
// in its section of docs/manager-map.md, and for each row that names a member
// controller-runtime does not have. A row must name the handroll file that
// does the same, or say "not applicable, because" and why.
func TestManagerMapCoversControllerRuntime(t *testing.T) {
	cr := controllerRuntime(t)
	doc := readDoc(t, "manager-map.md")
	if !strings.Contains(doc.text, "controller-runtime "+cr.Version) {
		t.Errorf("docs/manager-map.md does not say which controller-runtime it maps (%q); the twin pins %s", "controller-runtime "+cr.Version, cr.Version)
	}
	sections := doc.sections()

	for _, ms := range mapSections {
		want, embedded := members(t, cr.Dir, ms.decl)
		for _, e := range embedded {
			where, ok := ms.embeds[e]
			switch {
			case !ok:
				t.Errorf("%s embeds %s, which this test does not place: add it to mapSections", ms.decl, e)
			case where.section != "":
				if !slices.ContainsFunc(mapSections, func(s mapSection) bool { return s.name == where.section }) {
					t.Errorf("%s: the methods of %s are said to be in section %s, which mapSections lacks", ms.name, e, where.section)
				}
			default:
				methods, more := members(t, cr.Dir, where.decl)
				if len(more) > 0 {
					t.Errorf("%s embeds %v, which this test does not place", where.decl, more)
				}
				want = append(want, methods...)
			}
		}

		sec, err := sections.find(ms.name)
		if err != nil {
			t.Errorf("docs/manager-map.md: %v", err)
			continue
		}
		rows := map[string]int{}
		for _, r := range sec.rows() {
			name, ok := soleCodeSpan(r.cells[0])
			if !ok {
				t.Errorf("docs/manager-map.md:%d (section %s): the first cell must be one name in backquotes, got %q", r.line, ms.name, r.cells[0])
				continue
			}
			if prev, dup := rows[name]; dup {
				t.Errorf("docs/manager-map.md:%d (section %s): `%s` has a row already, at line %d", r.line, ms.name, name, prev)
			}
			rows[name] = r.line
			rest := strings.Join(r.cells[1:], " | ")
			if !strings.Contains(rest, notApplicable) && len(repoPaths(rest)) == 0 {
				t.Errorf("docs/manager-map.md:%d (section %s): the row of `%s` names no handroll file and does not say %q", r.line, ms.name, name, notApplicable+" …")
			}
		}
		for _, name := range want {
			if _, ok := rows[name]; !ok {
				t.Errorf("docs/manager-map.md, section %s: no row for `%s`, a member of %s in controller-runtime %s", ms.name, name, ms.decl, cr.Version)
			}
		}
		for name, line := range rows {
			if !slices.Contains(want, name) {
				t.Errorf("docs/manager-map.md:%d (section %s): `%s` is not a member of %s in controller-runtime %s", line, ms.name, name, ms.decl, cr.Version)
			}
		}
	}
}

// TestDocsNameWhatExists: every handroll path the pages name in code spans,
// every relative link, and every test they cite by name exist. A path that
// is not in this repository but is in controller-runtime's module is one of
// its files, which TestManagerPageCitationsExist checks.
func TestDocsNameWhatExists(t *testing.T) {
	root := repoRoot(t)
	cr := controllerRuntime(t)
	tests := testNames(t, root)
	for _, page := range []string{"manager-map.md", "architecture.md", "pitfalls.md", "manager.md", "seed-claims.md", "exercises.md", "README.md", "sharding.md", "gitops.md", "upgrade.md", "monitoring.md", "lifecycle.md"} {
		doc := readDoc(t, page)
		for _, p := range repoPaths(doc.text) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				if _, crErr := os.Stat(filepath.Join(cr.Dir, filepath.FromSlash(p))); crErr == nil {
					continue
				}
				t.Errorf("docs/%s names %s, which does not exist", page, p)
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(doc.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(root, "docs", filepath.FromSlash(target))); err != nil {
				t.Errorf("docs/%s links to %s, which does not exist", page, m[1])
			}
		}
		for _, m := range testNameRE.FindAllStringSubmatch(doc.text, -1) {
			if !tests[m[1]] {
				t.Errorf("docs/%s cites %s, which no _test.go file declares", page, m[1])
			}
		}
	}
}

// page is one Markdown file of docs/.
type page struct {
	name  string
	text  string
	lines []string
}

func readDoc(t *testing.T, name string) page {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return page{name: name, text: string(data), lines: strings.Split(string(data), "\n")}
}

// section is the lines under one heading, up to the next heading.
type section struct {
	heading string
	start   int // line number of the heading, from 1
	lines   []string
}

type sectionList []section

func (p page) sections() sectionList {
	var out sectionList
	inFence := false
	for i, l := range p.lines {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(l, "#") {
			out = append(out, section{heading: strings.TrimLeft(l, "# "), start: i + 1})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].lines = append(out[len(out)-1].lines, l)
		}
	}
	return out
}

// find returns the one section whose heading's first code span is name.
func (s sectionList) find(name string) (section, error) {
	var found []section
	for _, sec := range s {
		if spans := codeSpanRE.FindStringSubmatch(sec.heading); spans != nil && spans[1] == name {
			found = append(found, sec)
		}
	}
	switch len(found) {
	case 0:
		return section{}, fmt.Errorf("no section whose heading starts with `%s`", name)
	case 1:
		return found[0], nil
	default:
		return section{}, fmt.Errorf("%d sections whose heading starts with `%s`", len(found), name)
	}
}

// row is one body row of a table.
type row struct {
	line  int
	cells []string
}

// rows returns the body rows of every table in the section: the lines that
// start with "|", less each table's header and delimiter rows.
func (s section) rows() []row {
	var out []row
	for i := 0; i < len(s.lines); i++ {
		if !strings.HasPrefix(s.lines[i], "|") {
			continue
		}
		// A table: header, delimiter, body.
		i += 2
		for ; i < len(s.lines) && strings.HasPrefix(s.lines[i], "|"); i++ {
			out = append(out, row{line: s.start + 1 + i, cells: splitRow(s.lines[i])})
		}
	}
	return out
}

// splitRow splits a table row into its cells, ignoring a "|" inside a code
// span or escaped as "\|".
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	inCode := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
			continue
		case c == '`':
			inCode = !inCode
		case c == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

var (
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
	// repoPathRE matches a path into the repository written as a code span.
	repoPathRE = regexp.MustCompile("`((?:cmd|pkg|test|hack|manifests|docs)/[A-Za-z0-9_./-]*)`")
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	testNameRE = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)`")
	testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)
)

// soleCodeSpan returns s's content when s is exactly one code span.
func soleCodeSpan(s string) (string, bool) {
	m := codeSpanRE.FindStringSubmatch(s)
	if m == nil || m[0] != s {
		return "", false
	}
	return m[1], true
}

func repoPaths(s string) []string {
	var out []string
	for _, m := range repoPathRE.FindAllStringSubmatch(s, -1) {
		out = append(out, strings.TrimSuffix(m[1], "/"))
	}
	return out
}

// testNames are the test, fuzz and benchmark functions declared in the
// repository's _test.go files.
func testNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFuncRE.FindAllStringSubmatch(string(data), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
