#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok) from pinned Go module sources, so tests need
# nothing from the internet but Go modules; and, for the local cluster's real
# node, kubelet and kube-proxy from the same kubernetes sources.
#
# Usage: hack/testbin.sh [build|path|node|node-path|stages|update-modules|help]
#
#   build           build whatever is missing or stale (the default)
#   path            build if needed, then print the binary directory as the
#                   last line on stdout
#   node            build kubelet and kube-proxy if missing or stale
#   node-path       build them if needed, then print their directory (the
#                   same as path's) as the last line on stdout
#   stages          print a directory holding kwok's stage configs (pass them to
#                   kwok with --config); copies them without building binaries
#   update-modules  rewrite hack/testbin/*/go.mod from the versions below and
#                   run go mod tidy; run it after changing a version, then
#                   commit hack/testbin
#
# KUBEBUILDER_ASSETS, when it names a directory holding all six binaries, is
# used instead of building, as envtest does.
#
# Output: .local/testbin/k8s-<v>-etcd-<v>-kwok-<v>/ (git-ignored), with the
# binaries and kwok-stages/. A version change gives a new directory; remove old
# ones by hand. The first build takes 10-15 minutes on 2 cores; later builds of
# the same sources come from the Go build cache.
set -euo pipefail

# --- Pinned versions: change them here only, then run update-modules. -------
K8S_VERSION=1.37.2   # k8s.io/kubernetes; its staging modules at v0.37.2
ETCD_VERSION=3.6.16  # go.etcd.io/etcd/server/v3
KWOK_VERSION=0.8.0   # sigs.k8s.io/kwok
# ----------------------------------------------------------------------------

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
MODS=$ROOT/hack/testbin
OUT_BASE=$ROOT/.local/testbin
OUT=$OUT_BASE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION
MODULE_PREFIX=github.com/handroll/handroll/hack/testbin

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
# A real node's binaries: built only when asked for (7-8 minutes more, cold),
# since only the real node needs them.
NODE_BINARIES=(kubelet kube-proxy)
# Paths inside the kwok module. heartbeat-with-lease is a directory: every
# YAML file in it is copied.
STAGE_SOURCES=(
  kustomize/stage/node/fast/node-initialize.yaml
  kustomize/stage/node/heartbeat-with-lease
  kustomize/stage/pod/fast/pod-ready.yaml
  kustomize/stage/pod/fast/pod-complete.yaml
  kustomize/stage/pod/fast/pod-delete.yaml
)

# One set of compile flags for every binary: -trimpath is part of the build
# cache key, so mixing it would recompile all shared packages. Only link-time
# -X flags differ, and those do not touch the compile cache.
BUILD_FLAGS=(-trimpath -buildvcs=false)
LDFLAGS_BASE='-s -w'
K8S_MINOR=${K8S_VERSION#*.}; K8S_MINOR=${K8S_MINOR%%.*}
# What kubernetes' own build stamps; without it the binaries report
# v0.0.0-master, which kubectl's version-skew check and metrics misread.
K8S_LDFLAGS="$LDFLAGS_BASE"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=${K8S_VERSION%%.*} -X $pkg.gitMinor=$K8S_MINOR"
done

# The pinned modules alone decide what is built: no go.work may merge them
# with another module, and shell GOFLAGS (say -race) must not change the build.
export GOWORK=off GOFLAGS=

T0=$SECONDS
log() { printf 'testbin: %s\n' "$*" >&2; }
# dur 150 prints 2m30s.
dur() { if (($1 >= 60)); then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi; }
die() { printf 'testbin: error: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

module_of() {
  case $1 in
    etcd) echo etcd ;;
    kwok | kwok-stages) echo kwok ;;
    *) echo kubernetes ;;
  esac
}

package_of() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;; # main package at the module root
    kwok) echo sigs.k8s.io/kwok/cmd/kwok ;;
    kwok-stages) echo "sigs.k8s.io/kwok ${STAGE_SOURCES[*]}" ;;
    *) echo "k8s.io/kubernetes/cmd/$1" ;;
  esac
}

ldflags_of() {
  case $(module_of "$1") in
    kubernetes) echo "$K8S_LDFLAGS" ;;
    *) echo "$LDFLAGS_BASE" ;;
  esac
}

# Identifies the inputs of one output: its module's go.mod/go.sum and flags.
# Stored in .stamps/<name> after the output is in place; a missing or different
# stamp means the output is absent, half-built or stale.
declare -A MOD_HASH=()
fingerprint() {
  local mod
  mod=$(module_of "$1")
  [[ -n ${MOD_HASH[$mod]:-} ]] ||
    MOD_HASH[$mod]=$(cat "$MODS/$mod/go.mod" "$MODS/$mod/go.sum" | sha256sum)
  printf '%s\n' "$1" "$(package_of "$1")" "${BUILD_FLAGS[*]}" "$(ldflags_of "$1")" "${MOD_HASH[$mod]}" |
    sha256sum | cut -d' ' -f1
}

up_to_date() {
  local name=$1 stamp=$OUT/.stamps/$1
  if [[ $name == kwok-stages ]]; then
    [[ -d $OUT/$name ]] || return 1
  else
    [[ -x $OUT/$name ]] || return 1
  fi
  [[ -f $stamp && "$(<"$stamp")" == "$(fingerprint "$name")" ]]
}

write_stamp() {
  mkdir -p "$OUT/.stamps"
  fingerprint "$1" >"$OUT/.stamps/.$1.tmp"
  mv -f "$OUT/.stamps/.$1.tmp" "$OUT/.stamps/$1"
}

# Fails early, with the fix, when a go.mod no longer matches the pins above.
check_modules() {
  local f
  command -v go >/dev/null || die "go not found in PATH (needed to build the control plane)"
  for f in kubernetes etcd kwok; do
    [[ -f $MODS/$f/go.mod && -f $MODS/$f/go.sum ]] ||
      die "hack/testbin/$f/go.mod or go.sum is missing; run 'hack/testbin.sh update-modules'"
  done
  local stale=()
  grep -Eq "(^|[[:space:]])k8s\.io/kubernetes v${K8S_VERSION//./\\.}([[:space:]]|$)" "$MODS/kubernetes/go.mod" ||
    stale+=("kubernetes: k8s.io/kubernetes v$K8S_VERSION")
  if grep -E '=> k8s\.io/[^ ]+ v' "$MODS/kubernetes/go.mod" | grep -Ev " v0\.${K8S_VERSION#*.}[[:space:]]*$" >/dev/null; then
    stale+=("kubernetes: staging replaces at v0.${K8S_VERSION#*.}")
  fi
  grep -Eq "(^|[[:space:]])go\.etcd\.io/etcd/server/v3 v${ETCD_VERSION//./\\.}([[:space:]]|$)" "$MODS/etcd/go.mod" ||
    stale+=("etcd: go.etcd.io/etcd/server/v3 v$ETCD_VERSION")
  grep -Eq "(^|[[:space:]])sigs\.k8s\.io/kwok v${KWOK_VERSION//./\\.}([[:space:]]|$)" "$MODS/kwok/go.mod" ||
    stale+=("kwok: sigs.k8s.io/kwok v$KWOK_VERSION")
  if ((${#stale[@]})); then
    printf 'testbin: error: hack/testbin/*/go.mod does not match the versions pinned in hack/testbin.sh:\n' >&2
    printf 'testbin:   expected %s\n' "${stale[@]}" >&2
    die "run 'hack/testbin.sh update-modules' and commit hack/testbin"
  fi
}

# Prints a field of `go mod download -json` (run in the current directory).
download_field() {
  local field=$1 target=$2 json
  json=$(go mod download -json "$target") || die "go mod download $target failed"
  sed -n "s/^[[:space:]]*\"$field\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"$json" | head -n1
}

TMPDIRS=()
TICKER=
GOPID=
cleanup() {
  if [[ -n $TICKER ]]; then kill "$TICKER" 2>/dev/null || true; fi
  # A killed script must not leave go build (and its compilers) running.
  if [[ -n $GOPID ]]; then
    pkill -TERM -P "$GOPID" 2>/dev/null || true
    kill -TERM "$GOPID" 2>/dev/null || true
  fi
  if ((${#TMPDIRS[@]})); then rm -rf "${TMPDIRS[@]}"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Builds into a temporary directory next to the output, then renames: an
# interrupted build never leaves a truncated binary under the real name.
# step is "n of m", for the progress lines.
build_binary() {
  local name=$1 step=$2 mod pkg tmp start
  mod=$(module_of "$name")
  pkg=$(package_of "$name")
  tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  TMPDIRS+=("$tmp")
  start=$SECONDS
  log "building $name, $step ($pkg, module hack/testbin/$mod); total $(dur $((SECONDS - T0))) so far"
  # Go is silent while compiling, kube-apiserver for many minutes on a
  # cold cache: say every minute that it is still going, so that the build
  # never looks hung. The sleep must not inherit stdout/stderr or the lock
  # (fd 9): once orphaned it would keep a caller's $(hack/testbin.sh path)
  # or the lock waiting.
  (
    while sleep 60 >/dev/null 2>&1 9>&-; do
      log "still building $name ($step), $(dur $((SECONDS - start))) elapsed, total $(dur $((SECONDS - T0)))"
    done
  ) &
  TICKER=$!
  # In the background so that a signal reaches our trap at once; without fd 9
  # so that nothing but this script holds the lock.
  (cd "$MODS/$mod" && exec go build "${BUILD_FLAGS[@]}" -ldflags "$(ldflags_of "$name")" -o "$tmp/$name" "$pkg") 9>&- &
  GOPID=$!
  if ! wait "$GOPID"; then
    GOPID=
    die "building $name failed (go output above)"
  fi
  GOPID=
  kill "$TICKER" 2>/dev/null || true
  wait "$TICKER" 2>/dev/null || true
  TICKER=
  mv -f "$tmp/$name" "$OUT/$name"
  rm -rf "$tmp"
  write_stamp "$name"
  log "built $name ($step) in $(dur $((SECONDS - start))), total $(dur $((SECONDS - T0)))"
}

# Copies kwok's stage configs out of the module cache (read-only files there).
copy_stages() {
  local dir tmp src f
  dir=$(cd "$MODS/kwok" && download_field Dir sigs.k8s.io/kwok)
  [[ -n $dir && -d $dir ]] || die "could not locate sigs.k8s.io/kwok in the Go module cache"
  tmp=$(mktemp -d "$OUT/.build.XXXXXX")
  TMPDIRS+=("$tmp")
  for src in "${STAGE_SOURCES[@]}"; do
    if [[ -d $dir/$src ]]; then
      for f in "$dir/$src"/*.yaml; do
        [[ $(basename "$f") == kustomization.yaml ]] && continue
        install -m 0644 "$f" "$tmp/"
      done
    else
      [[ -f $dir/$src ]] || die "kwok v$KWOK_VERSION has no $src"
      install -m 0644 "$dir/$src" "$tmp/"
    fi
  done
  # A directory cannot be renamed over a non-empty one; the stamp is written
  # only afterwards, so a crash in between just redoes this cheap step.
  chmod 0755 "$tmp" # mktemp -d made it 0700
  rm -rf "$OUT/kwok-stages"
  mv "$tmp" "$OUT/kwok-stages"
  write_stamp kwok-stages
  log "copied kwok stage configs to $OUT/kwok-stages ($1)"
}

lock() {
  mkdir -p "$OUT"
  exec 9>"$OUT_BASE/.lock"
  # Parallel test packages may all call us at once: one builds, the rest wait.
  if command -v flock >/dev/null; then
    flock -n 9 || {
      log "another hack/testbin.sh is building; waiting for it"
      flock 9
    }
  fi
  # Leftovers of a build that was killed outright; safe to drop under the lock.
  rm -rf "$OUT"/.build.* "$OUT"/.stamps/.*.tmp
}

# build [names...]: builds those of the given outputs that are not up to date.
build() {
  local todo=() name
  for name in "$@"; do up_to_date "$name" || todo+=("$name"); done
  ((${#todo[@]})) || return 0
  check_modules
  lock
  todo=()
  for name in "$@"; do up_to_date "$name" || todo+=("$name"); done
  ((${#todo[@]})) || return 0
  log "into $OUT: ${todo[*]}"
  [[ ${todo[*]} == kwok-stages ]] ||
    log "(a cold build takes 10-15 minutes on 2 idle cores; later ones reuse the Go build cache)"
  local i=0
  for name in "${todo[@]}"; do
    i=$((i + 1))
    if [[ $name == kwok-stages ]]; then copy_stages "$i of ${#todo[@]}"; else build_binary "$name" "$i of ${#todo[@]}"; fi
  done
  log "done in $(dur $((SECONDS - T0)))"
}

stages_complete() {
  local d=$1 src
  for src in "${STAGE_SOURCES[@]}"; do
    if [[ $src == */heartbeat-with-lease ]]; then
      compgen -G "$d/node-heartbeat-with-lease*.yaml" >/dev/null || return 1
    else
      [[ -f $d/$(basename "$src") ]] || return 1
    fi
  done
}

# True when KUBEBUILDER_ASSETS holds every binary; says why not otherwise.
use_assets() {
  local d=${KUBEBUILDER_ASSETS:-} b
  [[ -n $d ]] || return 1
  for b in "${BINARIES[@]}"; do
    if [[ ! -x $d/$b ]]; then
      log "KUBEBUILDER_ASSETS=$d has no $b; using our own build instead"
      return 1
    fi
  done
  return 0
}

write_go_mod() {
  local mod=$1 upstream=$2 require=$3
  shift 3
  {
    echo "// Generated by hack/testbin.sh update-modules from the versions pinned there."
    echo "module $MODULE_PREFIX/$mod"
    echo
    grep -m1 '^go [0-9]' "$upstream"
    if grep -q '^godebug ' "$upstream"; then
      echo
      grep '^godebug ' "$upstream"
    fi
    echo
    echo "require $require"
    if (($#)); then
      echo
      echo "replace ("
      printf '\t%s\n' "$@"
      echo ")"
    fi
  } >"$MODS/$mod/go.mod"
  rm -f "$MODS/$mod/go.sum"
  log "go mod tidy in hack/testbin/$mod"
  (cd "$MODS/$mod" && go mod tidy) || die "go mod tidy failed in hack/testbin/$mod"
}

update_modules() {
  command -v go >/dev/null || die "go not found in PATH"
  local scratch upstream replaces=() m
  scratch=$(mktemp -d)
  TMPDIRS+=("$scratch")
  cd "$scratch"

  # kubernetes' go.mod points each staging module at ./staging/src/...; outside
  # its repository those must be the published releases of the same tag.
  upstream=$(download_field GoMod "k8s.io/kubernetes@v$K8S_VERSION")
  [[ -f $upstream ]] || die "could not download k8s.io/kubernetes v$K8S_VERSION"
  while read -r m; do
    replaces+=("$m => $m v0.${K8S_VERSION#*.}")
  done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/.*#\1#p' "$upstream")
  ((${#replaces[@]})) || die "found no staging replace lines in k8s.io/kubernetes v$K8S_VERSION go.mod"
  write_go_mod kubernetes "$upstream" "k8s.io/kubernetes v$K8S_VERSION" "${replaces[@]}"

  upstream=$(download_field GoMod "go.etcd.io/etcd/server/v3@v$ETCD_VERSION")
  write_go_mod etcd "$upstream" "go.etcd.io/etcd/server/v3 v$ETCD_VERSION"

  upstream=$(download_field GoMod "sigs.k8s.io/kwok@v$KWOK_VERSION")
  write_go_mod kwok "$upstream" "sigs.k8s.io/kwok v$KWOK_VERSION"
  log "updated hack/testbin/*/go.mod and go.sum; commit them"
}

cmd=${1:-build}
case $cmd in
  -h | --help | help)
    usage
    ;;
  build)
    if use_assets; then
      log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS; nothing to build"
    else
      build "${BINARIES[@]}" kwok-stages
    fi
    ;;
  path)
    if use_assets; then
      stages_complete "$KUBEBUILDER_ASSETS/kwok-stages" ||
        log "note: $KUBEBUILDER_ASSETS has no kwok-stages/; 'hack/testbin.sh stages' prints a directory that has them"
      echo "$KUBEBUILDER_ASSETS"
    else
      build "${BINARIES[@]}" kwok-stages
      echo "$OUT"
    fi
    ;;
  node)
    build "${NODE_BINARIES[@]}"
    ;;
  node-path)
    build "${NODE_BINARIES[@]}"
    echo "$OUT"
    ;;
  stages)
    if use_assets && stages_complete "$KUBEBUILDER_ASSETS/kwok-stages"; then
      echo "$KUBEBUILDER_ASSETS/kwok-stages"
    else
      build kwok-stages
      echo "$OUT/kwok-stages"
    fi
    ;;
  update-modules)
    update_modules
    ;;
  *)
    usage >&2
    die "unknown command '$cmd'"
    ;;
esac
