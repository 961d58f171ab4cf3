// Package docs holds the tests that keep docs/ true to the code and to
// controller-runtime: the Manager map has a row for every field and method of
// the controller-runtime options and interfaces it covers, and no row for one
// that does not exist; the handroll paths, links and tests the pages name
// exist; docs/lines.md is what hack/linecount prints.
//
// The controller-runtime source is read from the Go module cache (the twin's
// module under hack/compare pins the version), never imported: the main
// module does not depend on controller-runtime.
package docs
