// Package monitoring checks the Grafana dashboards of
// manifests/monitoring/grafana and the alerts of its PrometheusRule against
// the operator: every metric a panel queries or an alert reads must be one
// that bin/handroll, run against a real kube-apiserver with its webhooks
// serving, exports, and no alert may fire on its scrapes. The controller-runtime twin is not run
// here: it serves neither handroll's webhooks nor the certificate metric.
package monitoring
