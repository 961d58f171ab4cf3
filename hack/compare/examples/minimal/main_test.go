package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/minimal"
)

var (
	env *controlplane.ControlPlane
	bin string
)

// TestMain builds this program once, before any test and its deadlines,
// then starts the control plane (manifests/crd installed) for the tests.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if !testing.Short() {
		var cleanup func()
		var err error
		if bin, cleanup, err = minimal.Build("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
	}
	return controlplane.RunTests(m, controlplane.Options{}, &env)
}

// TestTwinMinimalReconcilesAndStopsOnSIGTERM: the controller-runtime
// minimal program passes the scenario handroll's passes
// (examples/minimal): it reconciles a WebApp and counts the Deployment it
// controls, holds the Lease while it runs, and on SIGTERM releases it and
// exits 0.
func TestTwinMinimalReconcilesAndStopsOnSIGTERM(t *testing.T) {
	minimal.Scenario(t, env, bin)
}
