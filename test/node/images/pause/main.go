// Command pause is the pod sandbox's process (the kubelet's "pause" container), which holds a pod's namespaces
// open while its containers come and go. The upstream image is pulled from registry.k8s.io; this machine reaches
// no registry, so the node suite builds this one: it waits for SIGTERM or SIGINT and exits 0, and reaps children
// that exit (as PID 1 of a pod whose containers share its process namespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
