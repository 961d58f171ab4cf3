#!/usr/bin/env bash
# Runs bin/handroll outside the cluster: `make run` uses it.
#
#   hack/run-local.sh <kubeconfig> [handroll flags...]
#
# On someone's cluster (KUBECONFIG) the process serves no webhooks and
# changes no webhook configuration: the cluster's own replicas, if any, keep
# serving admission and conversion, and this process joins the leader
# election (a standby while they lead). WEBHOOK_URL, an address at which
# that cluster's API server reaches this machine, opts in to serving them
# here; the webhook configurations and the CRD's conversion are pointed
# back at what they called before when the process stops.
#
# On the local cluster (LOCAL=1), whose API server runs on this machine, the
# webhooks are served here at WEBHOOK_URL (default https://127.0.0.1:9443),
# the CRD and the webhook configurations are installed, and so are the
# samples; unless
# handroll is deployed there (make deploy): then it is run as on someone's
# cluster.
#
# The operator runs in the foreground's process group, so Ctrl-C reaches it
# directly and it stops gracefully; the cluster stays up.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

kubeconfig="$1"
shift
WEBHOOK_PORT="${WEBHOOK_PORT:-9443}"
WEBHOOK_URL="${WEBHOOK_URL:-}"
LOCAL="${LOCAL:-0}"

kubectl() {
  "$(hack/testbin.sh path 2>/dev/null | tail -n 1)/kubectl" --kubeconfig="${kubeconfig}" "$@"
}

if [[ "${LOCAL}" == 1 ]] && [[ -n "$(kubectl get deployments -A -l app.kubernetes.io/name=handroll -o name 2>/dev/null)" ]]; then
  echo "handroll is deployed on the local cluster: running beside it, as on a shared cluster."
  LOCAL=0
fi

if [[ "${LOCAL}" == 1 ]]; then
  WEBHOOK_URL="${WEBHOOK_URL:-https://127.0.0.1:${WEBHOOK_PORT}}"
  # The local cluster starts with no CRD, so that any install path can own
  # it; a local run brings this tree's. Replaced, not applied, for the
  # reason below: a run that did not stop cleanly left the conversion
  # pointed at WEBHOOK_URL.
  crd=$(kubectl kustomize manifests/crd)
  kubectl replace -f - <<<"${crd}" >/dev/null 2>&1 || kubectl create -f - <<<"${crd}"
  kubectl wait --for=condition=Established --timeout=60s crd/webapps.handroll.dev >/dev/null
  # Replaced, not applied: once the operator has pointed them at
  # WEBHOOK_URL, applying the manifest's service reference would make them
  # invalid (a clientConfig has a url or a service, not both). Replacing
  # them brings in what the manifests changed (rules, matchConditions); the
  # operator points them at WEBHOOK_URL again when it starts. They are
  # rendered in the namespace manifests/default installs into.
  out=.local/run-local
  mkdir -p "${out}"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: handroll-system\nresources:\n- ../../manifests/webhook\n' >"${out}/kustomization.yaml"
  kubectl delete --ignore-not-found mutatingwebhookconfiguration/handroll validatingwebhookconfiguration/handroll
  kubectl create -f <(kubectl kustomize "${out}") 2>&1 | grep -v AlreadyExists || true
fi

webhook_flags=()
if [[ -n "${WEBHOOK_URL}" ]]; then
  webhook_flags=(--webhook-port="${WEBHOOK_PORT}" --webhook-url="${WEBHOOK_URL}")
fi

bin/handroll --kubeconfig="${kubeconfig}" "${webhook_flags[@]}" "$@" &
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
elif [[ -z "${WEBHOOK_URL}" ]]; then
  echo
  echo "handroll runs against ${kubeconfig} without webhooks: the cluster's webhook configurations and"
  echo "the CRD's conversion are left as they are. It leads only when no other replica does."
  echo "To serve the webhooks from here, give WEBHOOK_URL=https://<address the API server reaches>:${WEBHOOK_PORT}."
  echo
fi
wait "${pid}"
