// Package real tests handroll as a user runs it in a cluster: the image
// built by `make image`, installed by `make deploy`, in real containers on
// the local cluster's real node (kubelet, containerd, runc), under Pod
// Security enforced by the namespace. It also proves the node's egress
// guard from its packet counters.
//
// It runs only under `make test-real` (HANDROLL_REAL=1), which brings the
// local cluster up with its real node; `make test` skips it.
package real
