// Package chaos puts handroll through faults on a real control plane:
// SIGKILLs at random points, kube-apiserver and etcd outages, partitions of
// the leader from the API server, and throttling (client-side QPS and API
// Priority and Fairness). Its tests take minutes, so they run with
// `make test-chaos` (HANDROLL_CHAOS=1), not `make test`.
//
// The tests share one control plane, so each test's operators watch only
// that test's namespaces (--namespaces): the WebApps an earlier test leaves
// behind in its terminating namespaces would otherwise join their queue,
// and fail there, since nothing can be created in a terminating namespace.
package chaos

import (
	"fmt"
	"os"
	"testing"

	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

var env *controlplane.ControlPlane

func TestMain(m *testing.M) {
	if os.Getenv("HANDROLL_CHAOS") != "1" {
		fmt.Println("test/chaos: skipped; run with HANDROLL_CHAOS=1 (make test-chaos)")
		os.Exit(0)
	}
	remove := operator.BuildBeforeTests()
	// The sharded list and watch that --shards needs (TestShardedReplicas).
	code := controlplane.RunTests(m, controlplane.Options{APIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"}}, &env)
	remove()
	os.Exit(code)
}
