// Package conversion tests what handroll's start needs of its own
// conversion webhook: a control plane of its own, because its test makes
// v1alpha1 the CRD's storage version for a while and points the CRD's
// conversion at a Service of its own.
package conversion

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

var env *controlplane.ControlPlane

// The API server resolves a webhook Service through its EndpointSlices, as
// it does the aggregated APIs': there is no kube-proxy on loopback, and a
// Service with no ready endpoint then fails the call at once, with "no
// endpoints available", as a cluster's does. ShardedListAndWatch lets the
// API server apply the shardSelector, so that --shards caches each range's
// WebApps apart from every WebApp's metadata, as on a cluster with the gate.
func TestMain(m *testing.M) {
	remove := operator.BuildBeforeTests()
	code := controlplane.RunTests(m, controlplane.Options{
		APIServerArgs: []string{"--enable-aggregator-routing=true", "--feature-gates=ShardedListAndWatch=true"},
	}, &env)
	remove()
	os.Exit(code)
}
