package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/release"
)

var (
	env *controlplane.ControlPlane
	// previous is the previous release, checked out in a worktree.
	previous *release.Release
)

func TestMain(m *testing.M) {
	if os.Getenv("HANDROLL_UPGRADE") != "1" {
		fmt.Println("test/upgrade: skipped; run with HANDROLL_UPGRADE=1 (make test-upgrade)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := controlplane.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	previous, err = release.CheckOut(root, filepath.Join(root, "test", "upgrade", "previous-release"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "test/upgrade: %v\n", err)
		return 1
	}
	defer func() {
		if err := previous.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "test/upgrade: %v\n", err)
		}
	}()
	// The cluster starts as the previous release left it: its CRD.
	// The gate lets sharded replicas narrow their caches
	// (TestShardedUpgradeRollsNoPods); one leader does not use it.
	return controlplane.RunTests(m, controlplane.Options{
		Nodes:         2,
		CRDDirs:       []string{filepath.Join(previous.Dir, "manifests", "crd")},
		APIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"},
	}, &env)
}
