// Command etcd is the stock etcd server (etcdmain), built from the Go module that
// k8s.io/kubernetes itself pins, so the suite needs no system package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
