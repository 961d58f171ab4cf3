package monitoring

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The parts of a PromQL expression (with Grafana's variables) that name no
// metric, removed in this order: string literals first, so that a "{" or a
// "[" inside a label value cannot confuse the rest.
var (
	stringRE   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	matcherRE  = regexp.MustCompile(`\{[^}]*\}`)
	rangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	groupingRE = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	variableRE = regexp.MustCompile(`\$\{[^}]*\}|\$\w+|\[\[\w+\]\]`)
	offsetRE   = regexp.MustCompile(`\boffset\s+-?[0-9a-z]+`)
	// tokenRE matches a number or a duration whole (so that the e of 1e3
	// or the m of 5m is not read as a name), or a name.
	tokenRE = regexp.MustCompile(`(?i)0x[0-9a-f]+|(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?(?:ms|[smhdwy])*|[a-z_:][a-z0-9_:]*`)
	// callRE is a name followed by "(": a function or an aggregation.
	callRE = regexp.MustCompile(`^\s*\(`)
)

// promqlWords are PromQL's keywords and its functions and aggregations, so
// that even one written without "(" after it (it cannot be, in valid
// PromQL) is not taken for a metric.
var promqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
		and or unless bool by without on ignoring group_left group_right offset inf nan start end
		sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
		abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week
		day_of_year days_in_month delta deriv exp floor histogram_avg histogram_count histogram_fraction
		histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters double_exponential_smoothing
		hour idelta increase irate label_join label_replace ln log2 log10 minute month predict_linear
		rate resets round scalar sgn sort sort_desc sort_by_label sort_by_label_desc sqrt time timestamp vector year
		avg_over_time min_over_time max_over_time sum_over_time count_over_time quantile_over_time
		stddev_over_time stdvar_over_time last_over_time present_over_time mad_over_time
		acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh deg pi rad
		info`) {
		promqlWords[w] = true
	}
}

// metricNames returns the metric names expr reads, sorted, each once.
func metricNames(expr string) []string {
	s := stringRE.ReplaceAllString(expr, " ")
	s = matcherRE.ReplaceAllString(s, " ")
	s = variableRE.ReplaceAllString(s, " ")
	s = rangeRE.ReplaceAllString(s, " ")
	s = groupingRE.ReplaceAllString(s, " ")
	s = offsetRE.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range tokenRE.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		c := tok[0]
		if c >= '0' && c <= '9' || c == '.' {
			continue
		}
		if promqlWords[strings.ToLower(tok)] || callRE.MatchString(s[loc[1]:]) {
			continue
		}
		if !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	slices.Sort(out)
	return out
}

// labelValuesRE is Grafana's label_values(query, label) variable query;
// its second argument is a label, not a metric.
var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// variableMetricNames returns the metric names a template variable's query
// reads: label_values(query, label), query_result(query) or
// metrics(regex) (which names none).
func variableMetricNames(query string) []string {
	if m := labelValuesRE.FindStringSubmatch(query); m != nil {
		return metricNames(m[1])
	}
	if strings.HasPrefix(strings.TrimSpace(query), "label_values(") || strings.HasPrefix(strings.TrimSpace(query), "metrics(") {
		return nil // label_values(label): every metric
	}
	if q, ok := strings.CutPrefix(strings.TrimSpace(query), "query_result("); ok {
		return metricNames(strings.TrimSuffix(q, ")"))
	}
	return metricNames(query)
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`controller_runtime_active_workers{job="$job", namespace="$namespace"}`, []string{"controller_runtime_active_workers"}},
		{`sum(rate(controller_runtime_reconcile_total{job=~"$job"}[5m])) by (instance, pod)`, []string{"controller_runtime_reconcile_total"}},
		{`histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
			[]string{"controller_runtime_reconcile_time_seconds_bucket"}},
		{`sum without (code) (rate(a_total{code!="200", path=~"/x{1,2}[a-z]"}[5m] offset 1h)) / on (webhook) group_left sum(rate(b_total[1m:30s]))`,
			[]string{"a_total", "b_total"}},
		{`min by (certificate) (handroll_webhook_certificate_expiry_timestamp_seconds) - time() < 7 * 86400`,
			[]string{"handroll_webhook_certificate_expiry_timestamp_seconds"}},
		{`up == bool 1 or vector(0) and on() absent(x:recorded:rate5m) * 1e3 + 0x1F - .5`, []string{"up", "x:recorded:rate5m"}},
		{`label_replace(go_goroutines, "dst", "$1", "src", "(.*)")`, []string{"go_goroutines"}},
		{`topk(3, sum by (le) (rate(w_bucket[${__range}])))`, []string{"w_bucket"}},
		{`count_values("version", build_info)`, []string{"build_info"}},
		{`1 + 2`, nil},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%s) = %q, want %q", c.expr, got, c.want)
		}
	}
	for query, want := range map[string][]string{
		`label_values(controller_runtime_reconcile_total{namespace=~"$namespace"}, job)`: {"controller_runtime_reconcile_total"},
		`label_values(namespace)`:                       nil,
		`query_result(max by (pod) (go_goroutines))`:    {"go_goroutines"},
		`sum by (name) (leader_election_master_status)`: {"leader_election_master_status"},
	} {
		if got := variableMetricNames(query); !slices.Equal(got, want) {
			t.Errorf("variableMetricNames(%s) = %q, want %q", query, got, want)
		}
	}
}
