//go:build tools

// Records the kube-apiserver command as a dependency so `go mod tidy` keeps k8s.io/kubernetes.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
