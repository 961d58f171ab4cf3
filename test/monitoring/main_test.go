package monitoring

import (
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &env)) }
