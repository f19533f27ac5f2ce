#!/usr/bin/env bash
# Installs the node's container runtime from Debian's packages when any part is missing: containerd (1.6), runc,
# the CNI plugins (bridge, host-local, loopback, portmap under /usr/lib/cni), iptables and conntrack (kube-proxy's
# iptables mode and its conntrack clean-up), nftables (the nft CLI: the suite checks and clears the table of the
# NetworkPolicy engine, which itself talks netlink). Idempotent: a no-op when everything is there. Needs root and apt.
#
# The packages' own services are never used: the suite starts its own containerd with its own root, state and
# socket under a temporary directory (test/node/node-cluster.ts), so a Debian containerd.service (absent here: no
# systemd) is irrelevant and /etc/containerd is not read.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables conntrack nftables)
missing=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
for package in "${packages[@]}"; do have "$package" || missing+=("$package"); done

if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-runtime: needs root to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "install-runtime: apt-get install ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The lists may be absent on a fresh machine: update once, then install.
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

for binary in containerd containerd-shim-runc-v2 ctr runc iptables conntrack nft; do
  command -v "$binary" >/dev/null || { echo "install-runtime: $binary is missing after install" >&2; exit 1; }
done
for plugin in bridge host-local loopback portmap; do
  [[ -x /usr/lib/cni/$plugin ]] || { echo "install-runtime: /usr/lib/cni/$plugin is missing after install" >&2; exit 1; }
done
echo "install-runtime: containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1 {print $3}'), CNI plugins in /usr/lib/cni" >&2
