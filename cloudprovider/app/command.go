/*
Copyright 2026 The cluster-api-provider-harvester Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package app builds the harvester-cloud-controller-manager command on Kubernetes'
// cloud-provider framework. The binary runs it, and the test bed runs it in-process for each
// guest cluster, so both start the CCM the same way.
package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	cloudprovider "k8s.io/cloud-provider"
	ccmapp "k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	harvestercloud "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider"
)

// NewCommand returns the CCM's command; it runs until stop is closed.
func NewCommand(stop <-chan struct{}) (*cobra.Command, error) {
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("initialising the command options: %w", err)
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
	fs.IntVar(&opts.MaxLoadBalancers, "max-load-balancers", harvestercloud.DefaultMaxLoadBalancers,
		"Most Harvester load balancers the cluster may have (one per Service of type LoadBalancer that shares no address); a Service beyond it gets none and a LoadBalancerLimitReached event. 0: no limit.")
	fs.Float32Var(&opts.HarvesterQPS, "harvester-api-qps", harvestercloud.DefaultHarvesterQPS,
		"Requests a second to Harvester's API, on average.")
	fs.IntVar(&opts.HarvesterBurst, "harvester-api-burst", harvestercloud.DefaultHarvesterBurst,
		"Requests to Harvester's API at once, beyond --harvester-api-qps.")

	// The framework gives the initialiser no way to return an error: a CCM that cannot
	// initialise its cloud exits, as every CCM on this framework does.
	initCloud := func(cfg *config.CompletedConfig) cloudprovider.Interface {
		cloud, err := newCloud(cfg, *opts)
		if err != nil {
			klog.Fatalf("initialising the harvester cloud provider: %v", err)
		}
		return cloud
	}
	return ccmapp.NewCloudControllerManagerCommand(ccmOptions, initCloud, ccmapp.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), flagSets, stop), nil
}

func newCloud(cfg *config.CompletedConfig, opts harvestercloud.Options) (*harvestercloud.Cloud, error) {
	shared := cfg.ComponentConfig.KubeCloudShared
	if shared.CloudProvider.Name != harvestercloud.ProviderName {
		return nil, fmt.Errorf("--cloud-provider must be %q", harvestercloud.ProviderName)
	}
	opts.ClusterName = shared.ClusterName
	if opts.MaxLoadBalancers < 0 {
		return nil, fmt.Errorf("--max-load-balancers must be 0 (no limit) or more, not %d", opts.MaxLoadBalancers)
	}
	f, err := os.Open(shared.CloudProvider.CloudConfigFile)
	if err != nil {
		return nil, fmt.Errorf("opening the cloud config: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	return harvestercloud.New(f, opts)
}
