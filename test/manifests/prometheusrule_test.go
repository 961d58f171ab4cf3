package manifests

import (
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// jobMatcherRE finds the job an alert expression selects.
var jobMatcherRE = regexp.MustCompile(`\bjob\s*=\s*"([^"]*)"`)

// TestPrometheusRuleBuilds: manifests/monitoring's PrometheusRule lands in
// the overlay's namespace, and every alert selects the job the
// ServiceMonitor's targets get: the Prometheus Operator names it after the
// Service scraped, unless the ServiceMonitor sets a jobLabel.
func TestPrometheusRuleBuilds(t *testing.T) {
	kubectl := kubectlPath(t)
	objs := kustomizePath(t, kubectl, installOverlay(t, elsewhere, "monitoring"), "an overlay in "+elsewhere+" with manifests/monitoring")
	rule, ok := objs[objectKey("PrometheusRule", elsewhere, "handroll")]
	if !ok || rule.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Fatalf("the overlay has no monitoring.coreos.com/v1 PrometheusRule %s/handroll", elsewhere)
	}
	sm := objs[objectKey("ServiceMonitor", elsewhere, "handroll")]
	if jl, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel"); jl != "" {
		t.Fatalf("the ServiceMonitor sets jobLabel %q: the alerts' job matchers assume the Service's name", jl)
	}
	const service = "handroll-metrics" // what TestMonitoringBuilds shows the ServiceMonitor selects
	if _, ok := objs[objectKey("Service", elsewhere, service)]; !ok {
		t.Fatalf("the overlay has no Service %s", service)
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			alerts++
			expr, _ := r["expr"].(string)
			jobs := jobMatcherRE.FindAllStringSubmatch(expr, -1)
			if len(jobs) == 0 {
				t.Errorf("%v selects no job", r["alert"])
			}
			for _, m := range jobs {
				if m[1] != service {
					t.Errorf("%v selects job %q; the ServiceMonitor's targets are job %q", r["alert"], m[1], service)
				}
			}
		}
	}
	if alerts == 0 {
		t.Error("the PrometheusRule has no alerts")
	}
}
