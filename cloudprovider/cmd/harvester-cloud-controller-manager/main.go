// Command harvester-cloud-controller-manager is the guest cluster's cloud controller manager
// for Harvester HCI, on Kubernetes' cloud-provider framework.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	harvestercloud "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider"
)

func main() {
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("initialising the command options: %v", err)
	}
	opts := &harvestercloud.Options{}
	flagSets := cliflag.NamedFlagSets{}
	fs := flagSets.FlagSet("harvester")
	fs.StringVar(&opts.ManagementNetwork, "management-network", "",
		"Name of the VM network (the interface name in the VM spec) whose addresses are the nodes' InternalIPs; default: the first network.")
	fs.StringSliceVar(&opts.NodeIPCIDRs, "node-ip-cidr", nil,
		"CIDRs that choose a node's InternalIPs when kubelet's --node-ip does not.")
	fs.StringSliceVar(&opts.ExcludedCIDRs, "excluded-cidr", nil,
		"CIDRs whose addresses are never reported as node addresses.")

	initCloud := func(cfg *config.CompletedConfig) cloudprovider.Interface {
		shared := cfg.ComponentConfig.KubeCloudShared
		if shared.CloudProvider.Name != harvestercloud.ProviderName {
			klog.Fatalf("--cloud-provider must be %q", harvestercloud.ProviderName)
		}
		opts.ClusterName = shared.ClusterName
		f, err := os.Open(shared.CloudProvider.CloudConfigFile)
		if err != nil {
			klog.Fatalf("opening the cloud config: %v", err)
		}
		defer f.Close()
		cloud, err := harvestercloud.New(f, *opts)
		if err != nil {
			klog.Fatalf("initialising the harvester cloud provider: %v", err)
		}
		return cloud
	}

	command := app.NewCloudControllerManagerCommand(ccmOptions, initCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), flagSets, wait.NeverStop)
	os.Exit(cli.Run(command))
}
