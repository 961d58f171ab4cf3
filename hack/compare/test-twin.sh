#!/usr/bin/env bash
# Runs handroll's behaviour scenarios against the controller-runtime twin:
# builds hack/compare/bin/handroll-twin, then runs test/webapp and test/e2e
# with HANDROLL_OPERATOR_BINARY pointing at it, so that test/operator starts
# the twin wherever it would start bin/handroll. Then the scenarios that the
# options of --tuned change run again against the twin with --tuned. Then
# test/examples runs the stop example (hack/compare/examples/stop) beside
# handroll's (examples/stop), and hack/compare/examples/minimal passes the
# scenario examples/minimal passes (test/minimal). Last, hack/compare/pitfalls shows
# controller-runtime's side of docs/pitfalls.md.
#
# Usage (from anywhere): hack/compare/test-twin.sh [extra go test flags]
#
# Every test of those packages that starts the operator runs, except these,
# which test what only handroll has rather than WebApp behaviour:
#   TestColdStandby              reads handroll's "Caches synced" log line,
#                                which the twin never writes. The twin takes
#                                --leader-elect-warm-standby=false (warm-up
#                                off), but its standby still lists and
#                                watches WebApps: IndexField made that
#                                informer in the manager's cache, which
#                                starts on every replica.
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
  TestReadyzWaitsForEveryInformer
  TestBadLeaderFlagsFailFast
  # test/e2e: the whole local cluster, pods made ready by kwok.
  TestWebAppBecomesReady
)
run="^($(IFS='|'; echo "${scenarios[*]}"))\$"

# --tuned (about 30 s more): children with and without spec.configMapRef
# (the label-filtered ConfigMap cache, the metadata-only referenced one and
# its live read), a referenced ConfigMap's data and binaryData rolling the
# pods, a conflict on a child name held by a foreign object, --namespaces
# (the caches' namespaces), and warm standbys handing over the Lease.
tuned_scenarios=(
  TestReconcileCreatesChildren
  TestUpdatesRollTheChildren
  TestReferencedBinaryDataRollsThePods
  TestForeignObjectIsNeverOverwritten
  TestNamespacesFlag
  TestOneOfThreeReplicasReconciles
)
tuned_run="^($(IFS='|'; echo "${tuned_scenarios[*]}"))\$"
# test/operator runs one executable with flags of its own: a wrapper adds
# --tuned, and exec keeps the twin the process the tests signal.
tuned="$root/hack/compare/bin/handroll-twin-tuned"
printf '#!/bin/sh\nexec "$(dirname "$0")/handroll-twin" --tuned "$@"\n' >"$tuned"
chmod +x "$tuned"

assets="$(hack/testbin.sh path | tail -n 1)"
status=0
HANDROLL_OPERATOR_BINARY="$twin" KUBEBUILDER_ASSETS="$assets" \
  go test ./test/webapp/ ./test/e2e/ -run "$run" -count=1 "$@" || status=$?
echo "--- the same operator with --tuned"
HANDROLL_OPERATOR_BINARY="$tuned" KUBEBUILDER_ASSETS="$assets" \
  go test ./test/webapp/ -run "$tuned_run" -count=1 "$@" || status=$?
echo "--- the stop when the grace period runs out: the Manager's, then handroll's"
KUBEBUILDER_ASSETS="$assets" \
  go test ./test/examples/ -run '^TestStop' -count=1 "$@" || status=$?
echo "--- the minimal program on controller-runtime (examples/minimal's scenario)"
KUBEBUILDER_ASSETS="$assets" \
  go -C hack/compare test -count=1 ./examples/minimal/ "$@" || status=$?
echo "--- controller-runtime's side of docs/pitfalls.md"
KUBEBUILDER_ASSETS="$assets" \
  go -C hack/compare test -race -count=1 ./pitfalls/... "$@" || status=$?
exit "$status"
