package docs

import (
	"regexp"
	"strings"
	"testing"
)

// articlesHeading is the section of docs/seed-claims.md that answers the
// two articles docs/manager.md started from, claim by claim.
const articlesHeading = "The articles say, v0.25.2 does"

// articlesPage is the page, in docs/, that holds the table.
const articlesPage = "seed-claims.md"

// articleRefRE is how a row names its claim's place: the article, A or B,
// and its section numbers.
var articleRefRE = regexp.MustCompile(`^(?:[AB] \d+(?:\.\d+)?(?:, )?)+`)

// TestArticlesTableCitesEveryRow: every row of the articles table says
// where in which article the claim is, and cites, in its last cell, the
// file and declaration of controller-runtime or client-go that decide it
// (TestManagerPageCitationsExist checks that those exist).
func TestArticlesTableCitesEveryRow(t *testing.T) {
	var rows []row
	for _, sec := range readDoc(t, articlesPage).sections() {
		if sec.heading == articlesHeading {
			rows = append(rows, sec.rows()...)
		}
	}
	// One row for each claim the page answers; fewer means one was lost.
	const claims = 29
	if len(rows) < claims {
		t.Fatalf("docs/%s %q: %d rows, want at least %d", articlesPage, articlesHeading, len(rows), claims)
	}
	for _, r := range rows {
		if len(r.cells) != 3 {
			t.Errorf("docs/%s:%d: %d cells, want 3 (the articles say, v0.25.2 does, decided in)", articlesPage, r.line, len(r.cells))
			continue
		}
		if !articleRefRE.MatchString(r.cells[0]) {
			t.Errorf("docs/%s:%d: the claim does not begin with its article and section (\"A 4.2: ...\"): %q", articlesPage, r.line, r.cells[0])
		}
		cited := 0
		for _, c := range findCitations(r.cells[2]) {
			if len(c.decls) > 0 {
				cited++
			}
		}
		if cited == 0 {
			t.Errorf("docs/%s:%d: %q cites no file and declaration", articlesPage, r.line, strings.TrimSpace(r.cells[2]))
		}
	}
}
