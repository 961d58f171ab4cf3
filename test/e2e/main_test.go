// Package e2e runs end-to-end tests on the whole local cluster: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok with fake
// nodes, so that Deployments really roll out and garbage collection really
// runs.
package e2e

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	remove := operator.BuildBeforeTests()
	code := controlplane.RunTests(m, controlplane.Options{Nodes: 2}, &env)
	remove()
	os.Exit(code)
}
