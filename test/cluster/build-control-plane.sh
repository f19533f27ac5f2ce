#!/usr/bin/env bash
# Builds a real kube-apiserver and etcd for the cluster suite, once, into a cache directory outside the
# repository keyed by version. A no-op (prints the directory) when both binaries are already there.
#
# Needs only the machine's Go toolchain and the Go module proxy: k8s.io/kubernetes and etcd are ordinary Go
# modules (test/cluster/controlplane/go.mod pins them). Prints the cache directory as its last stdout line.
#
#   AGN_CONTROL_PLANE_CACHE  cache root (default ~/.cache/agn-control-plane)
#   AGN_BUILD_NICE           niceness for the Go build (default 15: the build shares 2 cores with everything else)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module_dir="$here/controlplane"

# The version key is read from go.mod, so bumping the pin there builds into a fresh directory.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$module_dir/go.mod")"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$module_dir/go.mod")"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
  echo "build-control-plane: cannot read the k8s.io/kubernetes or etcd version from $module_dir/go.mod" >&2
  exit 1
fi

cache_root="${AGN_CONTROL_PLANE_CACHE:-$HOME/.cache/agn-control-plane}"
out="$cache_root/${k8s_version}-etcd${etcd_version}"
nice_level="${AGN_BUILD_NICE:-15}"

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
  echo "build-control-plane: cached $out" >&2
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build-control-plane: the Go toolchain (go) is not on PATH; the cluster suite builds kube-apiserver with it" >&2
  exit 1
fi

mkdir -p "$out"
# Build into a temporary directory and rename at the end, so an interrupted build never looks cached.
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=test/cluster/k8s-ldflags.sh
source "$here/k8s-ldflags.sh"
ldflags="$(k8s_ldflags "$k8s_version")"

export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0
start=$(date +%s)
(
  cd "$module_dir"
  echo "build-control-plane: go mod download (k8s.io/kubernetes $k8s_version, etcd $etcd_version)" >&2
  nice -n "$nice_level" go mod download
  echo "build-control-plane: building kube-apiserver" >&2
  nice -n "$nice_level" go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  echo "build-control-plane: building etcd" >&2
  nice -n "$nice_level" go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" ./etcd
)
mv "$tmp/kube-apiserver" "$out/kube-apiserver"
mv "$tmp/etcd" "$out/etcd"
echo "build-control-plane: built in $(( $(date +%s) - start )) s into $out" >&2
echo "$out"
