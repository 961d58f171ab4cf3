#!/usr/bin/env bash
# Applies (deploy) or deletes (undeploy) a kustomization with the operator's
# image set to IMG, the way `kustomize edit set image` would, without
# touching the committed manifests: the kustomization is written under
# .local/deploy and names DIR as its base. render prints the same build as
# one multi-document YAML on stdout (make build-installer), from a
# kustomization in a temporary directory, so that it needs no cluster and
# leaves .local/deploy alone. hack/manifest writes the kustomization and
# reads the build.
#
# Usage: hack/deploy.sh deploy|undeploy|render DIR IMG
#   KUBECTL   kubectl to use (default: kubectl on PATH, else the one
#             hack/testbin.sh builds)
#   KUBECONFIG the cluster (kubectl's own rules apply; not used by render)
#   GO        the go command that builds hack/manifest (default: go)
#   HANDROLL  the handroll binary undeploy runs `uninstall` with (default:
#             bin/handroll, which make builds)
#   UNDEPLOY_DELETE_WEBAPPS=true  undeploy deletes every WebApp in the
#             cluster, and then the CRD; by default it keeps both, and the
#             workloads of the WebApps, for a later deploy to take over
#   UNDEPLOY_WEBAPP_TIMEOUT  seconds undeploy waits for the WebApps to go
#             (default 120, whether or not the operator runs)
#   UNDEPLOY_FORCE_FINALIZERS=true  undeploy also removes other
#             controllers' finalizers from the WebApps, skipping their
#             clean-up
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
usage='usage: hack/deploy.sh deploy|undeploy|render DIR IMG'
cmd=${1:?$usage}
dir=${2:?$usage}
img=${3:?$usage}
case $cmd in
  deploy | undeploy | render) ;;
  *)
    echo "hack/deploy.sh: unknown command $cmd; $usage" >&2
    exit 2
    ;;
esac

if [[ -z ${KUBECTL:-} ]]; then
  KUBECTL=$(command -v kubectl || echo "$("$ROOT/hack/testbin.sh" path | tail -n 1)/kubectl")
fi

# The YAML is read and written by hack/manifest, with a YAML parser rather
# than line patterns; built once per run (quick from go's build cache).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
manifest=$tmp/manifest
(cd "$ROOT" && GOWORK=off "${GO:-go}" build -o "$manifest" ./hack/manifest)

# write_kustomization OUT: OUT/kustomization.yaml, DIR with the image IMG
# (name[:tag][@digest]; a registry's port is part of the name).
write_kustomization() {
  "$manifest" kustomization --base "$dir" --image "$img" "$1"
}

if [[ $cmd == render ]]; then
  write_kustomization "$tmp/render"
  "$KUBECTL" kustomize "$tmp/render"
  exit 0
fi

out=$ROOT/.local/deploy
write_kustomization "$out"
"$KUBECTL" kustomize "$out" >"$out/all.yaml"

# The namespace the operator is installed into: its Deployment's.
namespace=$("$manifest" namespace --kind Deployment --name handroll "$out/all.yaml")

case $cmd in
  deploy)
    # --force-conflicts: the Makefile's deploy target says whose fields it
    # takes, and why.
    "$KUBECTL" apply --server-side --field-manager=handroll-deploy --force-conflicts -f "$out/all.yaml"
    "$KUBECTL" -n "$namespace" rollout status deployment/handroll --timeout="${ROLLOUT_TIMEOUT:-180s}"
    ;;
  undeploy)
    # By default every WebApp is kept, with the CRD and their workloads,
    # unreconciled until a later deploy (in any namespace) takes them over:
    # an undeploy, to move the operator or by mistake, must not delete
    # every team's WebApps. With UNDEPLOY_DELETE_WEBAPPS=true, in order, so
    # that nothing is left behind and nothing waits for ever:
    # 1. `handroll uninstall --delete-webapps` (what the chart's pre-delete
    #    hook runs): every WebApp, while the operator runs (its directory follows; deleted in
    #    the foreground, each goes once the garbage collector has taken its
    #    children, which it cannot once the CRD is gone), handroll's own finalizer
    #    removed, another controller's never unless forced; then the
    #    operator scaled to 0 and what it made as it ran. A WebApp still
    #    held stops the uninstall here, before anything of the operator's
    #    is removed;
    # 2. the operator, so that it recreates nothing while the rest goes;
    # 3. its webhooks, RBAC and namespace;
    # 4. the CRD last.
    # Without it, step 1 scales the operator to 0 and deletes what it made,
    # saying how many WebApps it keeps, and step 4 is skipped.
    # A step that fails stops the uninstall with its reason; each step
    # finds done what an earlier run did, so running it again goes on.
    trap 'echo "undeploy: stopped, nothing after the failed step ran: fix what it says and run make undeploy again" >&2' ERR
    handroll=${HANDROLL:-$ROOT/bin/handroll}
    if [[ ! -x $handroll ]]; then
      echo "undeploy: no $handroll: make build, or set HANDROLL" >&2
      exit 1
    fi
    delete_webapps=${UNDEPLOY_DELETE_WEBAPPS:-false}
    if "$KUBECTL" get crd webapps.handroll.dev >/dev/null 2>&1; then
      # As long with no operator running: the wait is mostly the garbage
      # collector's, which learns a kind made since its last discovery only
      # at its next resync (30 s) and a list, and until then takes no child.
      wait_s=${UNDEPLOY_WEBAPP_TIMEOUT:-120}
      flags=()
      if [[ $delete_webapps == true ]]; then
        flags=(--delete-webapps)
      fi
      if [[ ${UNDEPLOY_FORCE_FINALIZERS:-false} == true ]]; then
        flags+=(--force-finalizers)
      fi
      if ! "$handroll" uninstall --operator-namespace="$namespace" --timeout="${wait_s}s" "${flags[@]}"; then
        trap - ERR
        echo "undeploy: stopped before removing the operator. A WebApp another controller holds is its to release;" \
          "to skip that controller's clean-up, run make undeploy UNDEPLOY_FORCE_FINALIZERS=true" >&2
        exit 1
      fi
    fi
    "$KUBECTL" -n "$namespace" delete deployment handroll --ignore-not-found --wait=true
    "$manifest" select --except-kind CustomResourceDefinition "$out/all.yaml" | "$KUBECTL" delete -f - --ignore-not-found --wait=true
    if [[ $delete_webapps == true ]]; then
      "$manifest" select --kind CustomResourceDefinition "$out/all.yaml" | "$KUBECTL" delete -f - --ignore-not-found --wait=true
      echo "undeploy: handroll is removed from namespace $namespace and the cluster."
    else
      echo "undeploy: handroll is removed from namespace $namespace; kept the CRD webapps.handroll.dev and every WebApp (UNDEPLOY_DELETE_WEBAPPS=true deletes them)."
    fi
    ;;
esac
