#!/usr/bin/env bash
# Regenerates everything derived from the Go types in pkg/apis:
#   - deepcopy, defaulter and conversion functions next to the types
#     (zz_generated.*.go);
#   - the typed clientset, listers, informers and apply configurations in
#     pkg/generated;
#   - the CustomResourceDefinition in manifests/crd, with the conversion
#     webhook that converts between its versions.
# The generators' versions are pinned by hack/tools/go.mod.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
export GOWORK=off

MODULE="github.com/handroll/handroll"
BIN="${ROOT}/.local/bin"
mkdir -p "${BIN}"

# kube_codegen.sh installs its generators with `go install` into GOBIN.
export GOBIN="${BIN}"
CODEGEN_DIR="$(go -C hack/tools list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [[ -z "${CODEGEN_DIR}" || ! -f "${CODEGEN_DIR}/kube_codegen.sh" ]]; then
  go -C hack/tools mod download k8s.io/code-generator
  CODEGEN_DIR="$(go -C hack/tools list -m -f '{{.Dir}}' k8s.io/code-generator)"
fi
go -C hack/tools build -o "${BIN}/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen

# shellcheck source=/dev/null
source "${CODEGEN_DIR}/kube_codegen.sh"

BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"
# The generators clean their output directories first and complain when absent.
mkdir -p pkg/generated/{applyconfiguration,clientset,listers,informers}

kube::codegen::gen_helpers \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir "${ROOT}/pkg/generated" \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/pkg/apis"

echo "Generating CustomResourceDefinitions into manifests/crd"
"${BIN}/controller-gen" \
  crd:crdVersions=v1 \
  paths=./pkg/apis/... \
  output:crd:dir=./manifests/crd

# controller-gen has no marker for a conversion webhook. Insert the stanza as
# the first field of the CRD's top-level spec (where a YAML encoder sorting
# keys would put it), and fail loudly if the output is not shaped as expected.
# The Service's namespace is a placeholder: kustomize replaces it with the
# namespace manifests/default (or a user's overlay) installs into.
CRD="manifests/crd/handroll.dev_webapps.yaml"
echo "Adding the conversion webhook to ${CRD}"
awk '
  $0 == "spec:" { specs++; print; print conversion; next }
  /^  conversion:/ { found++ }
  { print }
  END {
    if (specs != 1) { print "update-codegen: expected one top-level spec: in the CRD, found " specs > "/dev/stderr"; exit 1 }
    if (found) { print "update-codegen: controller-gen already wrote spec.conversion" > "/dev/stderr"; exit 1 }
  }' conversion='  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          name: handroll-webhook
          namespace: system
          path: /convert
          port: 443
      conversionReviewVersions:
      - v1' "${CRD}" >"${CRD}.tmp" || { rm -f "${CRD}.tmp"; exit 1; }
mv "${CRD}.tmp" "${CRD}"

# The Helm chart reads the CRD from a copy of its own (helm reads nothing
# outside a chart); test/chart checks that it is this file.
cp "${CRD}" charts/handroll/files/
