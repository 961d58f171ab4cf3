package main

import (
	"fmt"
	"strconv"
	"strings"
)

// lineCounts are the counts docs/lines.md shows. hack/linecount is a
// command, not a package, so its page is read: test/docs keeps that page
// current, and this one with it.
type lineCounts struct {
	files  map[string]int    // the per-file table
	pieces map[string][2]int // handroll's and the twin's lines, by piece
	names  []string          // the pieces, in the table's order
}

func parseLineCounts(page string) (*lineCounts, error) {
	c := &lineCounts{files: map[string]int{}, pieces: map[string][2]int{}}
	for _, l := range strings.Split(page, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := splitRow(l)
		switch len(cells) {
		case 2:
			// | `file` | lines |
			path, ok := strings.CutPrefix(cells[0], "`")
			if path, ok2 := strings.CutSuffix(path, "`"); ok && ok2 {
				if n, err := strconv.Atoi(cells[1]); err == nil {
					c.files[path] = n
				}
			}
		case 5:
			// | piece | handroll: where | lines | twin: where | lines |
			h, errH := strconv.Atoi(cells[2])
			t, errT := strconv.Atoi(cells[4])
			if errH == nil && errT == nil {
				c.pieces[cells[0]] = [2]int{h, t}
				c.names = append(c.names, cells[0])
			}
		}
	}
	if len(c.files) == 0 || len(c.pieces) == 0 {
		return nil, fmt.Errorf("docs/lines.md has no per-piece or per-file table: run `make lines`")
	}
	return c, nil
}

// file returns docs/lines.md's count for path.
func (c *lineCounts) file(path string) (int, error) {
	n, ok := c.files[path]
	if !ok {
		return 0, fmt.Errorf("docs/lines.md counts no file %s: run `make lines`", path)
	}
	return n, nil
}

// piece returns the one piece whose name starts with prefix.
func (c *lineCounts) piece(prefix string) (name string, counts [2]int, err error) {
	var found []string
	for _, n := range c.names {
		if strings.HasPrefix(n, prefix) {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return "", counts, fmt.Errorf("docs/lines.md has %d pieces named %q..., not one (fix the piece in hack/sidebyside/steps.go)", len(found), prefix)
	}
	return found[0], c.pieces[found[0]], nil
}

// splitRow splits a Markdown table row into its cells; a "|" inside a code
// span does not split.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	inCode := false
	for _, r := range line {
		switch {
		case r == '`':
			inCode = !inCode
		case r == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}
