# Sourced by test/cluster/build-control-plane.sh and test/node/build-node.sh. k8s_ldflags VERSION prints the Go
# -ldflags that stamp a k8s.io/kubernetes build with its version the way the upstream build does: /version reports
# it (not v0.0.0-master), the kubelet reports it as the node's kubeletVersion, and version skew checks read it.
k8s_ldflags() {
  local version="$1" minor flags="-s -w" pkg
  minor="${version#v1.}"
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s' "$flags"
}
