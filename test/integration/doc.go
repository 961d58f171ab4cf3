// Package integration tests the WebApp API itself against a real
// kube-apiserver: the CRD's schema, defaults and CEL rules, its status and
// scale subresources, its printer columns and its discovery names. No
// controller runs; what is tested here is what the API server enforces for
// every client, whether or not handroll is deployed.
package integration
