// kube-network-policies (sigs.k8s.io/kube-network-policies, the NetworkPolicy engine kind ships) as a host process
// of the node suite's node. Upstream's cmd/main.go builds its API client only from the in-cluster config (a pod's
// ServiceAccount token under /var/run/secrets) and stops only on SIGINT; the suite runs its components as host
// processes with a kubeconfig each and stops them with SIGTERM. So this is upstream's main with those two changes,
// around the unchanged engine (pkg/networkpolicy): NetworkPolicies only (no AdminNetworkPolicy), nftables + nfqueue in
// the node's namespace. NRI stays on as upstream's main leaves it (it does not pass its --disable-nri on): the
// suite's containerd (1.6) has no NRI socket, so the engine logs that and takes pod addresses from the API server
// alone. Config.NRIdisabled is not an option in v0.8.0: the engine then dereferences its nil NRI plugin for the
// first packet whose address is no pod's (controller.go:190) and panics.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		kubeconfig          string
		failOpen            bool
		queueID             int
		metricsBindAddress  string
		hostnameOverride    string
		netfilterBug1766Fix bool
	)
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the engine's identity (required)")
	flag.BoolVar(&failOpen, "fail-open", false, "If set, don't drop packets if the controller is not running")
	flag.IntVar(&queueID, "nfqueue-id", 100, "Number of the nfqueue used")
	flag.StringVar(&metricsBindAddress, "metrics-bind-address", ":9080", "The IP address and port for the metrics server to serve on")
	flag.StringVar(&hostnameOverride, "hostname-override", "", "The name of the Node this engine enforces the policies of (default: the hostname)")
	flag.BoolVar(&netfilterBug1766Fix, "netfilter-bug-1766-fix", true, "If set, process DNS packets on the PREROUTING hooks to avoid the race condition on the conntrack subsystem, not needed for kernels 6.12+ (see https://bugzilla.netfilter.org/show_bug.cgi?id=1766)")

	c := logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(c, flag.CommandLine)
	flag.Parse()
	logs.InitLogs()
	if err := logsapi.ValidateAndApply(c, nil); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	if kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig is required")
		return 1
	}

	// SIGTERM too: a host process is stopped with it, and the engine removes its nftables table only on a clean stop.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer cancel()
	logger := klog.FromContext(ctx)

	if _, _, err := net.SplitHostPort(metricsBindAddress); err != nil {
		logger.Error(err, "parsing metrics bind address", "address", metricsBindAddress)
		return 1
	}
	nodeName, err := nodeutil.GetHostname(hostnameOverride)
	if err != nil {
		logger.Error(err, "can not obtain the node name")
		return 1
	}

	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		logger.Error(err, "reading the kubeconfig", "path", kubeconfig)
		return 1
	}
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.ContentType = "application/vnd.kubernetes.protobuf"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Error(err, "creating the API client")
		return 1
	}
	informersFactory := informers.NewSharedInformerFactory(clientset, 0)

	http.Handle("/metrics", promhttp.Handler())
	go func() {
		utilruntime.HandleError(http.ListenAndServe(metricsBindAddress, nil))
	}()

	controller, err := networkpolicy.NewController(
		clientset,
		informersFactory.Networking().V1().NetworkPolicies(),
		informersFactory.Core().V1().Namespaces(),
		informersFactory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			FailOpen:            failOpen,
			QueueID:             queueID,
			NodeName:            nodeName,
			NetfilterBug1766Fix: netfilterBug1766Fix,
		},
	)
	if err != nil {
		logger.Error(err, "can not start the network policy controller")
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	informersFactory.Start(ctx.Done())

	select {
	case err = <-done:
		// Run returns early only when it cannot open the nfqueue socket.
		logger.Error(err, "the network policy controller stopped")
		return 1
	case <-ctx.Done():
	}
	// Run deletes the nftables table on its way out: wait for it rather than a fixed grace period.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		logger.Info("the controller did not stop within 5 s")
		return 1
	}
	return 0
}
