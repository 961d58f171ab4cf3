#!/usr/bin/env bash
# Applies (deploy) or deletes (undeploy) a kustomization with the operator's
# image set to IMG, the way `kustomize edit set image` would, without
# touching the committed manifests: the kustomization is written under
# .local/deploy and names DIR as its base.
#
# Usage: hack/deploy.sh deploy|undeploy DIR IMG
#   KUBECTL   kubectl to use (default: kubectl on PATH, else the one
#             hack/testbin.sh builds)
#   KUBECONFIG the cluster (kubectl's own rules apply)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cmd=${1:?usage: hack/deploy.sh deploy|undeploy DIR IMG}
dir=${2:?usage: hack/deploy.sh deploy|undeploy DIR IMG}
img=${3:?usage: hack/deploy.sh deploy|undeploy DIR IMG}

if [[ -z ${KUBECTL:-} ]]; then
  KUBECTL=$(command -v kubectl || echo "$("$ROOT/hack/testbin.sh" path | tail -n 1)/kubectl")
fi

# IMG is name[:tag] or name@digest; a registry's port is part of the name.
name=$img tag= digest=
if [[ $img == *@* ]]; then
  name=${img%@*} digest=${img#*@}
elif [[ ${img##*/} == *:* ]]; then
  name=${img%:*} tag=${img##*:}
fi

base=$(cd "$dir" && pwd -P)
out=$ROOT/.local/deploy
mkdir -p "$out"
{
  echo "# Written by hack/deploy.sh: $dir with the image $img."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "- $(realpath --relative-to="$out" "$base")"
  echo "images:"
  echo "- name: handroll"
  echo "  newName: $name"
  [[ -z $tag ]] || echo "  newTag: \"$tag\""
  [[ -z $digest ]] || echo "  digest: $digest"
} >"$out/kustomization.yaml"

case $cmd in
  deploy)
    "$KUBECTL" apply --server-side --field-manager=handroll-deploy --force-conflicts -k "$out"
    "$KUBECTL" -n "${NAMESPACE:-handroll-system}" rollout status deployment/handroll --timeout="${ROLLOUT_TIMEOUT:-180s}"
    ;;
  undeploy)
    # The operator first, so that it recreates nothing while the rest goes.
    "$KUBECTL" -n "${NAMESPACE:-handroll-system}" delete deployment handroll --ignore-not-found --wait=true
    "$KUBECTL" delete -k "$out" --ignore-not-found --wait=true
    ;;
  *)
    echo "hack/deploy.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
