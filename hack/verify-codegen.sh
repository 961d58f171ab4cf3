#!/usr/bin/env bash
# Proves that everything generated from pkg/apis is current: it copies the
# tree to a temporary directory, runs update-codegen.sh there, and fails with
# a diff if any generated file differs. The working tree is never touched.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/handroll-verify-codegen.XXXXXX")"
trap 'rm -rf "${TMP}"' EXIT

# The tree as git sees it (tracked files and new ones not ignored), so that
# local build output and binaries are not copied.
cd "${ROOT}"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf - | tar -xf - -C "${TMP}"
else
  tar --exclude=./.local --exclude=./bin -cf - . | tar -xf - -C "${TMP}"
fi
# Reuse the generators already built here, if any: only their output matters.
if [[ -d "${ROOT}/.local/bin" ]]; then
  mkdir -p "${TMP}/.local" && cp -a "${ROOT}/.local/bin" "${TMP}/.local/bin"
fi

"${TMP}/hack/update-codegen.sh" >"${TMP}/.codegen.log" 2>&1 || {
  cat "${TMP}/.codegen.log" >&2
  echo "verify-codegen: update-codegen.sh failed" >&2
  exit 1
}

status=0
for path in pkg/apis pkg/generated manifests/crd charts/handroll/files; do
  if ! diff -ruN --exclude='*_test.go' "${ROOT}/${path}" "${TMP}/${path}" >"${TMP}/.diff" 2>&1; then
    sed -e "s|${TMP}/||g" -e "s|${ROOT}/||g" "${TMP}/.diff"
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo >&2
  echo "verify-codegen: generated files are out of date or were edited by hand." >&2
  echo "verify-codegen: run 'make generate' (hack/update-codegen.sh) and commit the result." >&2
  exit 1
fi
echo "verify-codegen: generated code and CRDs are up to date."
