#!/usr/bin/env bash
# Sets the default image of a copy of the chart (make chart-package
# CHART_IMG=...): manager.image.repository, and .digest or .tag, in its
# values.yaml, from IMG as hack/deploy.sh reads it (name[:tag] or
# name@digest; a registry's port is part of the name).
#
# Usage: hack/chart-image.sh IMG VALUES_YAML
set -euo pipefail

img=${1:?usage: hack/chart-image.sh IMG VALUES_YAML}
values=${2:?usage: hack/chart-image.sh IMG VALUES_YAML}

name=$img tag= digest=
if [[ $img == *@* ]]; then
  name=${img%@*} digest=${img#*@}
elif [[ ${img##*/} == *:* ]]; then
  name=${img%:*} tag=${img##*:}
fi
if [[ -n $digest && ! $digest =~ ^sha256:[0-9a-f]{64}$ ]]; then
  echo "chart-image: $img: the digest must be sha256: and 64 hex digits" >&2
  exit 1
fi

# The image block's three lines as values.yaml has them, each exactly once.
replace() {
  local from=$1 to=$2
  if [[ $(grep -cxF -- "$from" "$values") != 1 ]]; then
    echo "chart-image: $values does not hold the line '$from' exactly once" >&2
    exit 1
  fi
  awk -v from="$from" -v to="$to" '$0 == from { print to; next } { print }' "$values" >"$values.tmp"
  mv "$values.tmp" "$values"
}
replace '    repository: handroll' "    repository: $name"
[[ -z $tag ]] || replace '    tag: ""' "    tag: \"$tag\""
[[ -z $digest ]] || replace '    digest: ""' "    digest: \"$digest\""
