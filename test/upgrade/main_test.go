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
	// releases are the releases upgraded from, latest first (the latest
	// before this tree and the oldest supported), each in a worktree.
	releases []*release.Release
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
	releases, err = release.CheckOutSupported(root, filepath.Join(root, "test", "upgrade", "supported"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "test/upgrade: %v\n", err)
		return 1
	}
	defer func() {
		for _, r := range releases {
			if err := r.Remove(); err != nil {
				fmt.Fprintf(os.Stderr, "test/upgrade: %v\n", err)
			}
		}
	}()
	for _, r := range releases {
		fmt.Printf("test/upgrade: upgrading from %s (%s)\n", r.Ref, r.Commit)
	}
	// The cluster starts as the oldest release left it: its CRD.
	// The gate lets sharded replicas narrow their caches
	// (TestShardedUpgradeRollsNoPods); one leader does not use it.
	return controlplane.RunTests(m, controlplane.Options{
		Nodes:         2,
		CRDDirs:       []string{filepath.Join(releases[len(releases)-1].Dir, "manifests", "crd")},
		APIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"},
	}, &env)
}
