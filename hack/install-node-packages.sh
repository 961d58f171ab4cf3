#!/usr/bin/env bash
# Installs the Debian packages a real node of the local cluster needs:
#
#   containerd                   the container runtime (its CRI plugin serves the kubelet)
#   runc                         the OCI runtime containerd starts containers with
#   containernetworking-plugins  the CNI plugins: bridge, host-local, loopback, portmap
#   iptables                     the egress guard, and kube-proxy's Service rules
#   iproute2                     the bridge, the dummy interface and routes of the tests
#
# Idempotent: installs only what is missing, and asks the package index only
# then. Needs root; without root, or without apt-get, it says so and exits
# 1, and the local cluster starts without its real node.
#
# containerd is never started as a system service here: the local cluster
# runs its own, with its own root, state and socket (hack/cluster).
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables iproute2)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-node-packages: already installed: ${PACKAGES[*]}"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "install-node-packages: root is needed to install ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "install-node-packages: no apt-get on this machine; install ${missing[*]} by hand" >&2
  exit 1
fi

echo "install-node-packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# No service may start from a package's postinst: the cluster runs its own
# containerd, and two on one machine would share runc's state directory.
policy=/usr/sbin/policy-rc.d
own_policy=
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 0755 "$policy"
  own_policy=1
fi
trap '[[ -z $own_policy ]] || rm -f "$policy"' EXIT

apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-node-packages: installed ${missing[*]}"
