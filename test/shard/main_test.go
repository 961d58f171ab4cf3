// Package shard tests pkg/shard against a real etcd and kube-apiserver with
// the ShardedListAndWatch feature gate on: the server's shardSelector
// selects exactly the namespaces pkg/shard puts in a range, for the WebApp
// custom resource and the children's kinds, in lists and in watches; and
// support is detected, on this server and on one without the gate.
package shard

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

// gate turns the alpha sharded list and watch on.
const gate = "--feature-gates=ShardedListAndWatch=true"

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{APIServerArgs: []string{gate}}, &env))
}
