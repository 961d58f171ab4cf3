package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/handroll/handroll/test/controlplane"
)

// dashboardDir holds the dashboards, relative to the repository's root.
const dashboardDir = "manifests/monitoring/grafana"

// query is one PromQL query of a dashboard and where it is.
type query struct {
	where string // file, and the panel's title or the variable's name
	expr  string
	names []string
}

// dashboard is the part of Grafana's dashboard JSON model read here. Rows
// hold their panels in panels when collapsed, so panels nest.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// readDashboards parses every JSON file of the dashboard directory.
func readDashboards(t *testing.T) map[string][]byte {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dashboardDir), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dashboardDir, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	return out
}

func parseDashboard(t *testing.T, file string, data []byte) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

// queries returns every panel target's expression, nested panels
// included, and every query variable's query.
func (d dashboard) queries(file string) []query {
	var out []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, query{where: fmt.Sprintf("%s: panel %q", file, p.Title), expr: tg.Expr, names: metricNames(tg.Expr)})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := variableQuery(v.Query)
		out = append(out, query{where: fmt.Sprintf("%s: variable %q", file, v.Name), expr: q, names: variableMetricNames(q)})
	}
	return out
}

// variableQuery reads a variable's query, a string in older dashboards and
// an object with a query field in newer ones.
func variableQuery(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.Query
}

// served reports whether a scrape's families hold name: the family itself,
// or a histogram's (or summary's) _bucket, _sum and _count series.
func served(families map[string]*dto.MetricFamily, name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := families[base]; ok {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				return true
			case dto.MetricType_SUMMARY:
				return suffix != "_bucket"
			}
		}
	}
	return false
}

// unserved lists, for each query, the metrics it names that families do
// not hold, and the queries that name no metric at all (a typo in the
// extraction would otherwise pass them silently).
func unserved(qs []query, families map[string]*dto.MetricFamily) []string {
	var out []string
	for _, q := range qs {
		if len(q.names) == 0 {
			out = append(out, fmt.Sprintf("%s: no metric found in %s", q.where, q.expr))
		}
		for _, n := range q.names {
			if !served(families, n) {
				out = append(out, fmt.Sprintf("%s: %s is not served (in %s)", q.where, n, q.expr))
			}
		}
	}
	return out
}

// TestDashboardsAreWellFormed: each dashboard parses, has a uid of its own
// and unique panel ids, takes its Prometheus from the datasource variable
// in every panel and target, and has queries.
func TestDashboardsAreWellFormed(t *testing.T) {
	uids := map[string]string{}
	for file, data := range readDashboards(t) {
		d := parseDashboard(t, file, data)
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: no uid or title", file)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s have the same uid %q", file, other, d.UID)
		}
		uids[d.UID] = file
		if !slices.ContainsFunc(d.Templating.List, func(v variable) bool { return v.Name == "datasource" && v.Type == "datasource" }) {
			t.Errorf("%s: no datasource variable", file)
		}
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] {
					t.Errorf("%s: panel id %d used twice", file, p.ID)
				}
				ids[p.ID] = true
				if p.Type != "row" && !strings.Contains(string(p.Datasource), "${datasource}") {
					t.Errorf("%s: panel %q does not use the datasource variable: %s", file, p.Title, p.Datasource)
				}
				for _, tg := range p.Targets {
					if !strings.Contains(string(tg.Datasource), "${datasource}") {
						t.Errorf("%s: a target of panel %q does not use the datasource variable", file, p.Title)
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		if len(d.queries(file)) == 0 {
			t.Errorf("%s: no queries", file)
		}
	}
}
