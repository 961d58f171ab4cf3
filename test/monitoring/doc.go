// Package monitoring checks the Grafana dashboards of
// manifests/monitoring/grafana against the operator: every metric a panel
// queries must be one that bin/handroll, run against a real kube-apiserver
// with its webhooks serving, exports. The controller-runtime twin is not run
// here: it serves neither handroll's webhooks nor the certificate metric.
package monitoring
