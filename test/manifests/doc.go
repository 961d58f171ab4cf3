// Package manifests checks manifests/ without a cluster: the RBAC of
// manifests/rbac against the exact list of requests the operator makes
// (permissions_test.go), and that manifests/default builds with kubectl's
// kustomize into the expected objects, consistent with one another.
package manifests
