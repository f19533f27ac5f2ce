//go:build tools

// Records the commands built from k8s.io/kubernetes as dependencies so `go mod tidy` keeps them: kube-apiserver
// for test/cluster (build-control-plane.sh), and the rest of a single node for test/node (build-node.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
