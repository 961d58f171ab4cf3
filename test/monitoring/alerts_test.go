package monitoring

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// ruleFile is the PrometheusRule of manifests/monitoring.
const ruleFile = "manifests/monitoring/prometheus_rule.yaml"

// The job the ServiceMonitor's targets get (the metrics Service's name),
// which every alert selects.
const job = "handroll-metrics"

// targetLabels are the labels Prometheus, through a ServiceMonitor, adds to
// every series it scrapes; up is the series it writes for each scrape. An
// alert may use them although handroll does not serve them.
var targetLabels = []string{"job", "namespace", "pod", "instance", "service", "endpoint", "container"}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t *testing.T) []alertRule {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(ruleFile)))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Name  string      `json:"name"`
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("%s: %v", ruleFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", ruleFile, pr.APIVersion, pr.Kind)
	}
	var out []alertRule
	for _, g := range pr.Spec.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", ruleFile)
	}
	return out
}

// labelRefRE finds the labels an annotation's template reads.
var labelRefRE = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// TestPrometheusRuleIsWellFormed: every rule is an alert with a unique
// name, an expression Prometheus' parser accepts, a for: duration, a
// severity, a summary and a description, and selects handroll's job only.
func TestPrometheusRuleIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range readRules(t) {
		if r.Alert == "" || seen[r.Alert] {
			t.Errorf("rule %q: every rule is an alert with a name of its own", r.Alert)
		}
		seen[r.Alert] = true
		expr, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Errorf("%s: %v", r.Alert, err)
			continue
		}
		if d, err := model.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for: %q, want a duration above 0 (%v)", r.Alert, r.For, err)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if len(r.Annotations["summary"]) < 10 || len(r.Annotations["description"]) < 80 {
			t.Errorf("%s: want a summary and a description that says what to look at", r.Alert)
		}
		for _, sel := range selectors(expr) {
			if !slices.ContainsFunc(sel.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == "job" && m.Type == labels.MatchEqual && m.Value == job
			}) {
				t.Errorf("%s: %s does not select job=%q: it would match other operators' series", r.Alert, sel, job)
			}
		}
	}
}

func selectors(expr parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// unservedInAlert lists what expr names that families do not serve: a
// metric, a label a selector matches on, or a label it groups or matches
// by that none of its metrics has.
func unservedInAlert(expr parser.Expr, families map[string]*dto.MetricFamily) []string {
	var out []string
	known := map[string]bool{}
	for _, l := range targetLabels {
		known[l] = true
	}
	for _, sel := range selectors(expr) {
		has := seriesLabels(families, sel.Name)
		switch {
		case sel.Name == "up":
			has = map[string]bool{} // written by Prometheus, with the target labels alone
		case has == nil:
			out = append(out, fmt.Sprintf("%s is not served", sel.Name))
			continue
		}
		for _, m := range sel.LabelMatchers {
			if m.Name != model.MetricNameLabel && !has[m.Name] && !slices.Contains(targetLabels, m.Name) {
				out = append(out, fmt.Sprintf("%s has no label %s", sel.Name, m.Name))
			}
		}
		maps.Copy(known, has)
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		var used []string
		switch n := n.(type) {
		case *parser.AggregateExpr:
			used = n.Grouping
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				used = append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...)
			}
		}
		for _, l := range used {
			if !known[l] {
				out = append(out, fmt.Sprintf("no metric of the expression has the label %s it groups or matches by", l))
			}
		}
		return nil
	})
	return out
}

// seriesLabels returns the label names of the series name reads (a
// histogram's _bucket has le), or nil when it is not served.
func seriesLabels(families map[string]*dto.MetricFamily, name string) map[string]bool {
	if !served(families, name) {
		return nil
	}
	f, ok := families[name]
	if !ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(name, suffix); cut && families[base] != nil {
				f = families[base]
				break
			}
		}
	}
	out := map[string]bool{}
	if strings.HasSuffix(name, "_bucket") {
		out["le"] = true
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			out[l.GetName()] = true
		}
	}
	return out
}

// TestAlertMetricsAreServed runs the operator as TestDashboardMetricsAreServed
// does and checks each alert against it: every metric and label its
// expression names is served, and the expression, evaluated by
// Prometheus' engine on a few real scrapes a second apart, finds nothing.
// That is the healthy operator's state now, not over the rules' windows
// and for: durations, which a test cannot wait out: an alert whose
// condition holds only after a while (a rate, a duration) passes it
// trivially. So each alert is also shown to fire, on the same scrapes with
// its symptom written into them (see symptoms), and its annotations to read
// only labels its result has.
func TestAlertMetricsAreServed(t *testing.T) {
	op, opNS, families := servingOperator(t)
	rules := readRules(t)
	for _, r := range rules {
		expr, err := parser.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		for _, msg := range unservedInAlert(expr, families) {
			t.Errorf("%s: %s (in %s)", r.Alert, msg, r.Expr)
		}
	}

	// The check itself: a made-up metric, a matcher on a label the metric
	// lacks, and a grouping by a label no metric has are reported.
	bad, err := parser.ParseExpr(`sum by (controllr) (rate(controller_runtime_reconcile_errors_total{job="handroll-metrics", result="error"}[5m])) + on (namespace) handroll_made_up_total`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(unservedInAlert(bad, families), "\n")
	for _, want := range []string{
		"handroll_made_up_total is not served",
		"controller_runtime_reconcile_errors_total has no label result",
		"the label controllr it groups",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("a made-up alert: the check does not report %q; it reports:\n%s", want, got)
		}
	}

	// Scrapes as Prometheus would store them, with the target's labels.
	target := map[string]string{"job": job, "namespace": opNS, "pod": "handroll-0", "instance": op.MetricsAddr,
		"service": job, "endpoint": "metrics", "container": "manager"}
	var scrapes []scrape
	for i := range 4 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		scrapes = append(scrapes, scrape{at: time.Now(), families: op.Metrics(t)})
	}
	end := scrapes[len(scrapes)-1].at
	healthy := evaluate(t, storeScrapes(t, target, scrapes, nil), rules, end)
	for _, r := range rules {
		if res := healthy[r.Alert]; len(res) > 0 {
			t.Errorf("%s fires for a healthy operator: %s", r.Alert, res)
		}
	}

	for _, r := range rules {
		symptom, ok := symptoms[r.Alert]
		if !ok {
			t.Errorf("%s: no symptom in symptoms shows that it can fire", r.Alert)
			continue
		}
		res := evaluate(t, storeScrapes(t, target, scrapes, symptom), []alertRule{r}, end)[r.Alert]
		if len(res) == 0 {
			t.Errorf("%s does not fire on its symptom", r.Alert)
			continue
		}
		for key, text := range r.Annotations {
			for _, m := range labelRefRE.FindAllStringSubmatch(text, -1) {
				if !res[0].Metric.Has(m[1]) {
					t.Errorf("%s: an annotation reads $labels.%s, which its result %s lacks", r.Alert, m[1], res[0].Metric)
				}
			}
			out, err := expandAnnotation(r.Alert, text, res[0], end)
			if err != nil {
				t.Errorf("%s: annotation %s: %v", r.Alert, key, err)
			} else if key == "summary" {
				t.Logf("%s fires: %s", r.Alert, out)
			}
		}
	}
}

type scrape struct {
	at       time.Time
	families map[string]*dto.MetricFamily
}

// sample is one stored sample, which a symptom may change.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// symptom changes the sample of scrape i (0 the first) of n.
type symptom func(s *sample, i, n int, at time.Time)

// symptoms makes each alert's condition true in the real scrapes: a
// counter that grows, a gauge past its threshold, an observation in a high
// bucket. The alerts' windows are wider than the scrapes, so a rate over
// them is what those few seconds give.
var symptoms = map[string]symptom{
	"HandrollDown": func(s *sample, _, _ int, _ time.Time) {
		if s.name == "up" {
			s.value = 0
		}
	},
	"HandrollNoLeader": func(s *sample, _, _ int, _ time.Time) {
		if s.name == "leader_election_master_status" {
			s.value = 0
		}
	},
	"HandrollReconcileErrors":   grow("controller_runtime_reconcile_errors_total", 3),
	"HandrollReconcilePanics":   grow("controller_runtime_reconcile_panics_total", 1),
	"HandrollWorkqueueBackedUp": slowBuckets("workqueue_queue_duration_seconds_bucket", 600),
	"HandrollReconcileStuck": func(s *sample, _, _ int, _ time.Time) {
		if s.name == "workqueue_longest_running_processor_seconds" {
			s.value = 1200
		}
	},
	"HandrollWebhookErrors": func(s *sample, i, _ int, _ time.Time) {
		if s.name == "controller_runtime_webhook_requests_total" && s.labels["code"] == "500" {
			s.value += float64(10 * i)
		}
	},
	"HandrollWebhookSlow":                   slowBuckets("controller_runtime_webhook_latency_seconds_bucket", 4),
	"HandrollWebhookPanics":                 grow("controller_runtime_conversion_webhook_panics_total", 1),
	"HandrollWebhookCertificateExpiresSoon": expiresIn(3 * 24 * time.Hour),
	"HandrollWebhookCertificateExpiring":    expiresIn(time.Hour),
}

// grow adds step per scrape to every series of a counter.
func grow(name string, step float64) symptom {
	return func(s *sample, i, _ int, _ time.Time) {
		if s.name == name {
			s.value += step * float64(i)
		}
	}
}

// slowBuckets adds 100 observations of seconds per scrape to a histogram's
// buckets that hold them.
func slowBuckets(name string, seconds float64) symptom {
	return func(s *sample, i, _ int, _ time.Time) {
		if s.name != name {
			return
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err == nil && le >= seconds {
			s.value += float64(100 * i)
		}
	}
}

func expiresIn(d time.Duration) symptom {
	return func(s *sample, _, _ int, at time.Time) {
		if s.name == "handroll_webhook_certificate_expiry_timestamp_seconds" && s.labels["certificate"] == "serving" {
			s.value = float64(at.Add(d).Unix())
		}
	}
}

// storeScrapes stores the scrapes as Prometheus would: each series with
// the target's labels, and up = 1 for each scrape. With a symptom, each
// sample goes through it first.
func storeScrapes(t *testing.T, target map[string]string, scrapes []scrape, change symptom) memStore {
	t.Helper()
	bySeries := map[string]*memSeries{}
	for i, sc := range scrapes {
		for _, s := range append(flatten(sc.families), sample{name: "up", value: 1}) {
			if change != nil {
				change(&s, i, len(scrapes), sc.at)
			}
			m := map[string]string{model.MetricNameLabel: s.name}
			maps.Copy(m, s.labels)
			maps.Copy(m, target)
			lset := labels.FromMap(m)
			ms, ok := bySeries[lset.String()]
			if !ok {
				ms = &memSeries{lset: lset}
				bySeries[lset.String()] = ms
			}
			ms.samples = append(ms.samples, floatSample{t: sc.at.UnixMilli(), f: s.value})
		}
	}
	var out memStore
	for _, ms := range bySeries {
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b *memSeries) int { return labels.Compare(a.lset, b.lset) })
	return out
}

// memStore is a storage.Queryable of a few series held in memory, sorted
// by labels: enough for the engine, without the TSDB and its configuration
// (which brings every cloud's SDK).
type memStore []*memSeries

type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

func (s memStore) Querier(int64, int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
		var out []storage.Series
		for _, ms := range s {
			if !slices.ContainsFunc(matchers, func(m *labels.Matcher) bool { return !m.Matches(ms.lset.Get(m.Name)) }) {
				out = append(out, storage.NewListSeries(ms.lset, ms.samples))
			}
		}
		return &listSeriesSet{series: out, i: -1}
	}}, nil
}

type listSeriesSet struct {
	series []storage.Series
	i      int
}

func (l *listSeriesSet) Next() bool                        { l.i++; return l.i < len(l.series) }
func (l *listSeriesSet) At() storage.Series                { return l.series[l.i] }
func (l *listSeriesSet) Err() error                        { return nil }
func (l *listSeriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is a chunks.Sample of a float value.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

// flatten turns a scrape into the series Prometheus stores: a histogram as
// its _bucket (cumulative, by le), _sum and _count, a summary as its
// quantiles, _sum and _count.
func flatten(families map[string]*dto.MetricFamily) []sample {
	var out []sample
	for name, f := range families {
		for _, m := range f.GetMetric() {
			lbl := map[string]string{}
			for _, l := range m.GetLabel() {
				lbl[l.GetName()] = l.GetValue()
			}
			with := func(k, v string) map[string]string {
				c := maps.Clone(lbl)
				c[k] = v
				return c
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, sample{name, lbl, m.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				out = append(out, sample{name, lbl, m.GetGauge().GetValue()})
			case dto.MetricType_UNTYPED:
				out = append(out, sample{name, lbl, m.GetUntyped().GetValue()})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					out = append(out, sample{name + "_bucket", with("le", formatFloat(b.GetUpperBound())), float64(b.GetCumulativeCount())})
				}
				if !inf {
					out = append(out, sample{name + "_bucket", with("le", "+Inf"), float64(h.GetSampleCount())})
				}
				out = append(out, sample{name + "_sum", lbl, h.GetSampleSum()}, sample{name + "_count", lbl, float64(h.GetSampleCount())})
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					out = append(out, sample{name, with("quantile", formatFloat(q.GetQuantile())), q.GetValue()})
				}
				out = append(out, sample{name + "_sum", lbl, sm.GetSampleSum()}, sample{name + "_count", lbl, float64(sm.GetSampleCount())})
			}
		}
	}
	return out
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// evaluate runs each rule's expression at ts on db with Prometheus' engine
// and returns what each found.
func evaluate(t *testing.T, db storage.Queryable, rules []alertRule, ts time.Time) map[string]promql.Vector {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	out := map[string]promql.Vector{}
	for _, r := range rules {
		q, err := engine.NewInstantQuery(context.Background(), db, nil, r.Expr, ts)
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: evaluating: %v", r.Alert, res.Err)
		}
		v, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: the result is not an instant vector: %v", r.Alert, err)
		}
		out[r.Alert] = v
		q.Close()
	}
	return out
}

// expandAnnotation expands an annotation for one result of its alert as
// Prometheus' rule manager does (rules/alerting.go): with $labels, $value
// and the template functions.
func expandAnnotation(alert, text string, smpl promql.Sample, ts time.Time) (string, error) {
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	data := template.AlertTemplateData(smpl.Metric.Map(), nil, "", smpl)
	noQueries := func(context.Context, string, time.Time) (promql.Vector, error) {
		return nil, errors.New("no queries from annotations")
	}
	return template.NewTemplateExpander(context.Background(), defs+text, "__alert_"+alert, data,
		model.TimeFromUnixNano(ts.UnixNano()), noQueries, nil, nil).Expand()
}

// TestNoLeaderAlertWithShards: replicas that split the WebApps (--shards)
// report leader_election_master_status for their ranges' Leases only, not
// for the single leader's Lease they never contend for, so HandrollNoLeader
// stays quiet while every range is held.
func TestNoLeaderAlertWithShards(t *testing.T) {
	opNS := env.Namespace(t)
	const shards = 3
	op := operator.Start(t, env.Kubeconfig,
		"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS, fmt.Sprintf("--shards=%d", shards))
	var families map[string]*dto.MetricFamily
	poll(t, "the replica holds every range", time.Minute, func(context.Context) (bool, error) {
		families = op.Metrics(t)
		held := families["handroll_shard_ranges_held"].GetMetric()
		return len(held) == 1 && held[0].GetGauge().GetValue() == shards, nil
	})
	for _, m := range families["leader_election_master_status"].GetMetric() {
		if name := label(m, "name"); !strings.Contains(name, "-shard-") {
			t.Errorf("a sharded replica reports the Lease %q, which is no range's", name)
		}
	}
	var rule alertRule
	for _, r := range readRules(t) {
		if r.Alert == "HandrollNoLeader" {
			rule = r
		}
	}
	if rule.Alert == "" {
		t.Fatal("no HandrollNoLeader alert")
	}
	target := map[string]string{"job": job, "namespace": opNS, "pod": "handroll-0", "instance": op.MetricsAddr}
	var scrapes []scrape
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		scrapes = append(scrapes, scrape{at: time.Now(), families: op.Metrics(t)})
	}
	end := scrapes[len(scrapes)-1].at
	if res := evaluate(t, storeScrapes(t, target, scrapes, nil), []alertRule{rule}, end)[rule.Alert]; len(res) > 0 {
		t.Errorf("HandrollNoLeader fires for sharded replicas holding every range: %s", res)
	}
	if res := evaluate(t, storeScrapes(t, target, scrapes, symptoms[rule.Alert]), []alertRule{rule}, end)[rule.Alert]; len(res) != shards {
		t.Errorf("HandrollNoLeader with no range held: %d results, want one per range (%d): %s", len(res), shards, res)
	}
}
