// Package roles checks the ClusterRoles manifests/rbac defines for users
// (webapp-admin, webapp-editor, webapp-viewer) against a real
// kube-apiserver with RBAC authorization: bound directly and through
// Kubernetes' admin, edit and view roles they are aggregated into, asked
// with kubectl auth can-i as each user. kube-controller-manager runs
// because it does the aggregating.
package roles

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunTests(m, controlplane.Options{Controllers: true}, &env))
}
