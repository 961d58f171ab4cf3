package monitoring

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
