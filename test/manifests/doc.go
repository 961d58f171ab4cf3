// Package manifests checks manifests/ without a cluster: the RBAC of
// manifests/rbac against the exact list of requests the operator makes
// (permissions_test.go) and where the roles for users are aggregated, that
// manifests/default builds with kubectl's kustomize into the expected
// objects, consistent with one another, that make build-installer writes
// the same objects with the image asked for, that the optional
// manifests/network-policy component fits an overlay in another namespace,
// and that manifests/certmanager fills in that namespace's DNS names and
// CA injection and drops the self-managed certificates' permissions.
// Only that last test starts an API server (etcd and kube-apiserver), to
// have the policies accepted by a real one.
package manifests
