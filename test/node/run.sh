#!/usr/bin/env bash
# npm run test:node: install the node's runtime from Debian (containerd, runc, CNI plugins, iptables, conntrack,
# nftables) when missing, build the project image (npm run image -- --no-load: the OCI archive only; the suite imports
# it into containerd), build or reuse the node's binaries (build-node.sh: kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl, CoreDNS, pause, kube-network-policies), then
# run the suite. Extra arguments go to vitest.
# Needs root (network namespaces, cgroups, mounts). A run killed before its teardown is cleaned up by the next
# one, and by the sweep below on the way out.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [[ $(id -u) -ne 0 ]]; then
  echo "test:node: needs root (it creates network namespaces, cgroups and mounts for a kubelet)" >&2
  exit 1
fi
bash test/node/install-runtime.sh
npm run --silent image -- --no-load
bin_dir="$(bash test/node/build-node.sh | tail -n 1)"
export AGN_NODE_BIN="$bin_dir"
sweep() { npx --no-install node test/node/sweep.ts || true; }
trap sweep EXIT
sweep
npx vitest run --config test/node/vitest.config.ts "$@"
