#!/usr/bin/env bash
# Runs bin/handroll outside the cluster, with its webhooks called by the API
# server at WEBHOOK_URL: `make run` uses it. Against the local cluster (no
# KUBECONFIG) it also installs the webhook configurations and the samples.
#
#   hack/run-local.sh <kubeconfig> [handroll flags...]
#
# The operator runs in the foreground's process group, so Ctrl-C reaches it
# directly and it stops gracefully; the cluster stays up.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

kubeconfig="$1"
shift
WEBHOOK_PORT="${WEBHOOK_PORT:-9443}"
WEBHOOK_URL="${WEBHOOK_URL:-https://127.0.0.1:${WEBHOOK_PORT}}"
LOCAL="${LOCAL:-0}"

kubectl() {
  "$(hack/testbin.sh path 2>/dev/null | tail -n 1)/kubectl" --kubeconfig="${kubeconfig}" "$@"
}

if [[ "${LOCAL}" == 1 ]]; then
  # Replaced, not applied: once the operator has pointed them at
  # WEBHOOK_URL, applying the manifest's service reference would make them
  # invalid (a clientConfig has a url or a service, not both). Replacing
  # them brings in what the manifests changed (rules, matchConditions); the
  # operator points them at WEBHOOK_URL again when it starts.
  kubectl delete --ignore-not-found mutatingwebhookconfiguration/handroll validatingwebhookconfiguration/handroll
  kubectl create -f <(kubectl kustomize manifests/webhook) 2>&1 | grep -v AlreadyExists || true
fi

bin/handroll --kubeconfig="${kubeconfig}" \
  --webhook-port="${WEBHOOK_PORT}" --webhook-url="${WEBHOOK_URL}" "$@" &
pid=$!
# Ctrl-C has already reached the operator (same process group); a second
# signal would make it exit without draining, so INT only waits.
trap 'wait "${pid}"' INT
trap 'kill -TERM "${pid}" 2>/dev/null || true; wait "${pid}"' TERM

if [[ "${LOCAL}" == 1 ]]; then
  # The samples go through the webhooks, so they wait until the API server
  # has been pointed at this process.
  for _ in $(seq 1 120); do
    got="$(kubectl get validatingwebhookconfiguration handroll -o jsonpath='{.webhooks[0].clientConfig.url}' 2>/dev/null || true)"
    [[ "${got}" == "${WEBHOOK_URL}"* ]] && break
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.5
  done
  for _ in 1 2 3 4 5; do
    kubectl apply -k manifests/samples && break
    sleep 2
  done
  echo
  echo "handroll runs on the local cluster; its webhooks are called at ${WEBHOOK_URL}. In another terminal:"
  echo "  $(hack/testbin.sh path 2>/dev/null | tail -n 1)/kubectl --kubeconfig=${kubeconfig} get webapps,deployments,services -A"
  echo "  curl -s http://127.0.0.1:8080/metrics | head"
  echo "  curl -s 'http://127.0.0.1:8081/readyz?verbose'"
  echo "Ctrl-C stops the operator; the cluster stays up until 'make cluster-down'."
  echo "While it is stopped, new WebApps and spec changes are refused (the webhooks fail closed);"
  echo "labels, finalizers and deletes still go through."
  echo
fi
wait "${pid}"
