// Package gitops checks that the tools platform teams watch workloads with
// read a WebApp's status right: kstatus (sigs.k8s.io/cli-utils, which Flux,
// kpt and Config Sync use), Argo CD's health check
// (manifests/argocd/health.lua, run in gopher-lua as Argo CD runs it) and
// `kubectl wait --for=condition=Ready`.
//
// The statuses are the ones handroll writes: webapp.ComputeStatus on what a
// reconcile observes, applied through the status subresource by field
// manager handroll, then read back from a real kube-apiserver as those tools
// read it (unstructured, defaults and all). The API server matters: it
// drops the status of a new WebApp, and the CRD's default
// (status.observedGeneration 0) is what makes an unobserved WebApp read as
// in progress. No operator runs; docs/gitops.md is the table of cases.
//
// Manager piece: none. controller-runtime leaves a resource's status to its
// reconciler; this is what the reconciler's conditions mean to the tools
// that read them.
package gitops
