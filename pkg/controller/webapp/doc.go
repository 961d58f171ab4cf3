// Package webapp is the WebApp reconciler: from a WebApp it derives a
// Deployment, a Service and, when spec.config is set, a ConfigMap, applies
// them with server-side apply, and reports what it sees in the WebApp's
// status.
//
// Manager piece replaced: the Reconciler a controller-runtime project writes
// and registers with builder.For(&WebApp{}).Owns(&Deployment{})...; here it
// is wired by hand onto pkg/controller. Beside it, on the same informers,
// runs a second controller, the directory's (directorycontroller.go): two
// controllers sharing one cache, as under one Manager. The functions that
// compute the desired children, status and directory (desired.go,
// status.go, directory.go) are pure, so the controller-runtime twin reuses
// them and only the framework differs.
package webapp
