// Package webapp is the WebApp reconciler: from a WebApp it derives a
// Deployment, a Service and, when spec.config is set, a ConfigMap, applies
// them with server-side apply, and reports what it sees in the WebApp's
// status.
//
// Manager piece replaced: the Reconciler a controller-runtime project writes
// and registers with builder.For(&WebApp{}).Owns(&Deployment{})...; here it
// is wired by hand onto pkg/controller. The functions that compute desired
// children and status (desired.go, status.go) are pure, so the
// controller-runtime twin reuses them and only the framework differs.
package webapp
