// Package restmapper tests pkg/restmapper against a real kube-apiserver:
// built-in kinds and the WebApp CRD mapped both ways, a CRD installed after
// the mapper started, a CRD deleted, many goroutines looking up while a CRD
// appears, and how few discovery requests a lookup makes. Its benchmark
// measures the mapper against client-go's DeferredDiscoveryRESTMapper on
// the same server, in the same run.
package restmapper
