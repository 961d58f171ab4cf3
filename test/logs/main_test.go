// Package logs runs bin/handroll against a real etcd and kube-apiserver in
// each --logging-format and reads what it writes, line by line: every line
// in the format, the structured keys kept. The controller-runtime twin does
// not run it (hack/compare/test-twin.sh): the formats are handroll's flags.
package logs

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	remove := operator.BuildBeforeTests()
	code := controlplane.RunTests(m, controlplane.Options{}, &env)
	remove()
	os.Exit(code)
}
