#!/usr/bin/env bash
# Runs handroll's behaviour scenarios against the controller-runtime twin:
# builds hack/compare/bin/handroll-twin, then runs test/webapp and test/e2e
# with HANDROLL_OPERATOR_BINARY pointing at it, so that test/operator starts
# the twin wherever it would start bin/handroll.
#
# Usage (from anywhere): hack/compare/test-twin.sh [extra go test flags]
#
# Every test of those packages that starts the operator runs, except these,
# which test what only handroll has rather than WebApp behaviour:
#   TestColdStandby              --leader-elect-warm-standby=false: the
#                                manager always fills its caches before the
#                                election, so the twin refuses the flag.
#   TestEveryMetricAppears       rest_client_request_duration_seconds, which
#                                handroll registers and controller-runtime
#                                does not (every other name is the same).
#   TestSecureMetrics            controller-runtime's secure metrics server
#                                makes its certificate and listens only after
#                                the manager has started, so /readyz can pass
#                                before /metrics answers; the scenario scrapes
#                                at once and is refused. The twin's
#                                --metrics-secure itself works.
#   TestManifestRBACIsEnough,    handroll's webhooks (self-managed
#   TestSelfManagedWebhooksAndConversion,  certificates, admission,
#   TestAPIServerCallsTheWebhooks          conversion): the twin serves none.
# The remaining tests of test/webapp and test/e2e (TestCacheSyncErrorNamesTheInformer,
# TestManifestsDeploy, TestDeploymentBecomesAvailable,
# TestDeletingAnOwnerCollectsItsDependents) start no operator.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
export GOWORK=off

twin="$root/hack/compare/bin/handroll-twin"
go -C hack/compare build -o bin/handroll-twin ./cmd/handroll-twin

scenarios=(
  # test/webapp: a real API server, the operator as a process.
  TestReconcileCreatesChildren
  TestUpdatesRollTheChildren
  TestDriftIsRepaired
  TestScaleThroughTheSubresource
  TestForeignObjectIsNeverOverwritten
  TestDeletedWebAppLeavesTheDirectory
  TestRestoredWebAppWithTheOldFinalizerIsDeleted
  TestQuickCreateAndDeleteLeaveTheDirectoryExact
  TestUpgradeStripsTheOldFinalizer
  TestForeignServiceIsNotAdvertised
  TestRapidUpdatesConverge
  TestNoWritesWhenIdle
  TestNoWritesWhenChildrenChangeStatus
  TestReferencedBinaryDataRollsThePods
  TestRefusedChildIsReported
  TestOneOfThreeReplicasReconciles
  TestNamespacesFlag
  TestReadyzFollowsCacheSync
  TestBadLeaderFlagsFailFast
  # test/e2e: the whole local cluster, pods made ready by kwok.
  TestWebAppBecomesReady
)
run="^($(IFS='|'; echo "${scenarios[*]}"))\$"

assets="$(hack/testbin.sh path | tail -n 1)"
HANDROLL_OPERATOR_BINARY="$twin" KUBEBUILDER_ASSETS="$assets" \
  go test ./test/webapp/ ./test/e2e/ -run "$run" -count=1 "$@"
