// Package controlplane starts a real local Kubernetes control plane for tests
// and for `make cluster-up`: etcd and kube-apiserver, and optionally
// kube-controller-manager, kube-scheduler and kwok with fake nodes, from the
// binaries hack/testbin.sh builds from pinned sources.
//
// Manager piece replaced: controller-runtime's envtest (pkg/envtest), which
// starts etcd and kube-apiserver from downloaded binaries and installs CRDs.
// This harness downloads nothing, can also run the controllers and kwok so
// that Deployments really become available, and cleans up after a test binary
// that panicked.
package controlplane
