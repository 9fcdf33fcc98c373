// Command harvester-cloud-controller-manager is the guest cluster's cloud controller manager
// for Harvester HCI, on Kubernetes' cloud-provider framework.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider/app"
)

func main() {
	command, err := app.NewCommand(wait.NeverStop)
	if err != nil {
		klog.Fatal(err)
	}
	os.Exit(cli.Run(command))
}
