// Package shard tests pkg/shard against a real etcd and kube-apiserver with
// the ShardedListAndWatch feature gate on: the server's shardSelector
// selects exactly the namespaces pkg/shard puts in a range, for the WebApp
// custom resource and the children's kinds, in lists and in watches; and
// support is detected, on this server and on one without the gate.
package shard

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

var env *controlplane.ControlPlane

// gate turns the alpha sharded list and watch on.
const gate = "--feature-gates=ShardedListAndWatch=true"

func TestMain(m *testing.M) {
	remove := operator.BuildBeforeTests()
	code := controlplane.RunTests(m, controlplane.Options{APIServerArgs: []string{gate}}, &env)
	if plain != nil {
		if err := plain.Stop(); err != nil && code == 0 {
			code = 1
		}
	}
	remove()
	os.Exit(code)
}

// plain is a second control plane, without the gate, started by the first
// test that needs it.
var (
	plain     *controlplane.ControlPlane
	plainOnce sync.Once
	plainErr  error
)

func plainControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if env == nil {
		t.Skip("needs the control plane")
	}
	plainOnce.Do(func() {
		root, err := controlplane.RepoRoot()
		if err != nil {
			plainErr = err
			return
		}
		plain, plainErr = controlplane.StartWithBudget(controlplane.Options{CRDDirs: []string{filepath.Join(root, "manifests", "crd")}})
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plain
}
