#!/usr/bin/env bash
# Regenerates everything derived from the Go types in pkg/apis:
#   - deepcopy and defaulter functions next to the types (zz_generated.*.go);
#   - the typed clientset, listers, informers and apply configurations in
#     pkg/generated;
#   - the CustomResourceDefinition in manifests/crd.
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
