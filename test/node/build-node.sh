#!/usr/bin/env bash
# Builds the binaries of a single-node Kubernetes for the node suite, once, into a cache directory outside the
# repository keyed by version; a no-op (prints the directory) when they are all there.
#
#   kube-apiserver, etcd          test/cluster/build-control-plane.sh (hard-linked in from its cache)
#   kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl
#                                 the same k8s.io/kubernetes module (test/cluster/controlplane/go.mod)
#   coredns, pause                test/node/images (CoreDNS's Go module; the pod sandbox's pause program)
#   kube-network-policies         test/node/netpol (the NetworkPolicy engine, with one file of its google/nftables
#                                 dependency replaced: netpol/_nftables/expr/queue.go says why; built into a
#                                 directory of its own, keyed by its version and the module's files, and
#                                 hard-linked in like kube-apiserver and etcd)
#
# containerd, runc and the CNI plugins come from Debian's packages (test/node/install-runtime.sh). Needs only the
# machine's Go toolchain and the Go module proxy. Prints the cache directory as its last stdout line.
#
#   AGN_NODE_CACHE   cache root (default ~/.cache/agn-node)
#   AGN_BUILD_NICE   niceness for the Go build (default 15)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_module="$here/../cluster/controlplane"
images_module="$here/images"
netpol_module="$here/netpol"

# A go.mod requirement is "MODULE VERSION" inside a require block or "require MODULE VERSION" on one line.
required() { awk -v m="$1" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m { print $2; exit }' "$2"; }
k8s_version="$(required k8s.io/kubernetes "$k8s_module/go.mod")"
coredns_version="$(required github.com/coredns/coredns "$images_module/go.mod")"
netpol_version="$(required sigs.k8s.io/kube-network-policies "$netpol_module/go.mod")"
if [[ -z "$k8s_version" || -z "$coredns_version" || -z "$netpol_version" ]]; then
  echo "build-node: cannot read the k8s.io/kubernetes, CoreDNS or kube-network-policies version from the go.mod files" >&2
  exit 1
fi

control_plane="$(bash "$here/../cluster/build-control-plane.sh" | tail -n 1)"
cache_root="${AGN_NODE_CACHE:-$HOME/.cache/agn-node}"
out="$cache_root/${k8s_version}-coredns${coredns_version}"
netpol_go=go1.26.10
netpol_key="$(echo "$netpol_go" | cat - "$netpol_module/go.mod" "$netpol_module/go.sum" "$netpol_module/main.go" "$netpol_module/_nftables/expr/queue.go" | sha256sum | cut -c1-12)"
netpol_out="$cache_root/kube-network-policies-${netpol_version}-${netpol_key}"
nice_level="${AGN_BUILD_NICE:-15}"
commands=(kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

mkdir -p "$out" "$netpol_out"
for binary in kube-apiserver etcd; do
  [[ -x "$out/$binary" ]] || ln -f "$control_plane/$binary" "$out/$binary" 2>/dev/null || cp "$control_plane/$binary" "$out/$binary"
done

missing=()
for binary in "${commands[@]}" coredns pause; do
  [[ -x "$out/$binary" ]] || missing+=("$binary")
done
[[ -x "$netpol_out/kube-network-policies" ]] || missing+=(kube-network-policies)

# The engine's own directory is keyed by its version and sources, $out by Kubernetes' and CoreDNS's: link it in every
# time, so $out always holds the engine test/node/netpol builds.
link_netpol() {
  ln -f "$netpol_out/kube-network-policies" "$out/kube-network-policies" 2>/dev/null ||
    cp -f "$netpol_out/kube-network-policies" "$out/kube-network-policies"
}
if [[ ${#missing[@]} -eq 0 ]]; then
  link_netpol
  echo "build-node: cached $out" >&2
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build-node: the Go toolchain (go) is not on PATH; the node suite builds the kubelet and the rest with it" >&2
  exit 1
fi

# Build into temporary directories and rename at the end, so an interrupted build never looks cached.
tmp="$(mktemp -d "$out/.build.XXXXXX")"
netpol_tmp="$(mktemp -d "$netpol_out/.build.XXXXXX")"
trap 'rm -rf "$tmp" "$netpol_tmp"' EXIT
has() { [[ " ${missing[*]} " == *" $1 "* ]]; }

# shellcheck source=test/cluster/k8s-ldflags.sh
source "$here/../cluster/k8s-ldflags.sh"
ldflags="$(k8s_ldflags "$k8s_version")"

export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0
start=$(date +%s)
k8s_missing=0
for binary in "${commands[@]}"; do has "$binary" && k8s_missing=1; done
if [[ $k8s_missing -eq 1 ]]; then
  (
    cd "$k8s_module"
    echo "build-node: building ${commands[*]} (k8s.io/kubernetes $k8s_version)" >&2
    # One go build for all five: they share most packages, and one build graph compiles each once.
    nice -n "$nice_level" go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${commands[@]/#/k8s.io/kubernetes/cmd/}"
  )
  for binary in "${commands[@]}"; do mv "$tmp/$binary" "$out/$binary"; done
fi
if has coredns || has pause; then
  (
    cd "$images_module"
    echo "build-node: building coredns $coredns_version and pause" >&2
    nice -n "$nice_level" go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$coredns_version" -o "$tmp/coredns" ./coredns
    nice -n "$nice_level" go build -trimpath -ldflags "-s -w" -o "$tmp/pause" ./pause
  )
  for binary in coredns pause; do mv "$tmp/$binary" "$out/$binary"; done
fi
if has kube-network-policies; then
  (
    cd "$netpol_module"
    # The engine is the one binary of the suite that enforces something: it is built with the Go release that has no
    # known flaw in the standard library reached from it (netpol/vulncheck.sh), which the go command fetches from the
    # module proxy as golang.org/toolchain (about 6 s the first time).
    export GOTOOLCHAIN="$netpol_go"
    echo "build-node: building kube-network-policies $netpol_version with $netpol_go" >&2
    # google/nftables as go.sum pins it, with expr/queue.go replaced (go build -overlay refuses files of the module
    # cache): a patched copy of the module and a copy of go.mod that points the module at it.
    go mod download github.com/google/nftables
    cp -r "$(go list -m -f '{{.Dir}}' github.com/google/nftables)" "$netpol_tmp/nftables"
    chmod -R u+w "$netpol_tmp/nftables"
    cp _nftables/expr/queue.go "$netpol_tmp/nftables/expr/queue.go"
    cp go.mod go.sum "$netpol_tmp/"
    go mod edit -modfile="$netpol_tmp/go.mod" -replace "github.com/google/nftables=$netpol_tmp/nftables"
    nice -n "$nice_level" go build -modfile="$netpol_tmp/go.mod" -trimpath -ldflags "-s -w" \
      -o "$netpol_tmp/kube-network-policies" .
  )
  mv "$netpol_tmp/kube-network-policies" "$netpol_out/kube-network-policies"
fi
link_netpol
echo "build-node: built in $(( $(date +%s) - start )) s into $out" >&2
echo "$out"
