// Package generated holds code-generator output only: the typed clientset
// (clientset/versioned), listers, shared informers
// (informers/externalversions) and server-side apply configurations
// (applyconfiguration) for the handroll.dev API. Nothing here is edited by
// hand: `make generate` writes it and `make verify-codegen` proves it current.
//
// Manager pieces replaced: client.Client (typed writes, Status(), Patch and
// Apply), and the cache's informers and indexed reads for WebApps, which
// controller-runtime builds at run time from the Scheme and reflection.
package generated
