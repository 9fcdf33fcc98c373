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

// Package cloudprovider is the guest cluster's Harvester cloud controller manager: it tells the
// guest's Kubernetes which Harvester VM each Node is (providerID, addresses, zone) and, through
// Harvester load balancers, gives Services of type LoadBalancer their addresses. It runs with the
// guest's own least-privilege Harvester credential (capi-harvester-guest-cloudprovider in one
// namespace, config/harvester/provider-identity.yaml: exactly the calls it makes).
package cloudprovider

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// ProviderName is the cloud provider's name (--cloud-provider=harvester).
const ProviderName = "harvester"

// DefaultClusterName is the default of --cluster-name in Kubernetes' cloud-provider framework,
// which the upstream Harvester cloud provider keeps unless told otherwise.
const DefaultClusterName = "kubernetes"

// Options are the Harvester-specific settings of the cloud provider.
type Options struct {
	// ClusterName is --cluster-name; it must be unique per guest cluster in one Harvester
	// namespace. The default "kubernetes" is accepted with a warning, for guests that switch from
	// the upstream cloud provider.
	ClusterName string
	// ManagementNetwork, NodeIPCIDRs and ExcludedCIDRs shape the nodes' addresses.
	ManagementNetwork string
	NodeIPCIDRs       []string
	ExcludedCIDRs     []string
	// MaxLoadBalancers caps the Harvester load balancers of the cluster (--max-load-balancers);
	// 0 means no cap.
	MaxLoadBalancers int
	// HarvesterQPS and HarvesterBurst limit the requests to Harvester (--harvester-api-qps,
	// --harvester-api-burst); 0 takes the defaults below.
	HarvesterQPS   float32
	HarvesterBurst int
}

const (
	// DefaultMaxLoadBalancers is --max-load-balancers' default.
	DefaultMaxLoadBalancers = 20
	// DefaultHarvesterQPS and DefaultHarvesterBurst are the defaults of the client limits to
	// Harvester. client-go's own (5 a second, 10 at once) made 40 Services created at once
	// wait seconds for their load balancers' creations (make bench's P4); the burst lets a
	// guest create twice --max-load-balancers' default at once, and the cap bounds the rest.
	DefaultHarvesterQPS = 20
	// DefaultHarvesterBurst is the burst above DefaultHarvesterQPS.
	DefaultHarvesterBurst = 40
)

// Cloud is the Harvester cloud provider.
type Cloud struct {
	client    client.Client
	config    *rest.Config
	namespace string
	opts      Options
	addresses guestcloud.NodeAddressOptions
	// loadBalancers is set once StartLoadBalancers has started its watches.
	loadBalancers atomic.Pointer[loadBalancers]
}

var _ cloudprovider.Interface = &Cloud{}

// New builds the cloud provider from its cloud-config: the kubeconfig the cluster reconciler
// writes (its context's namespace is where the guest's VMs live; its token is read from a file,
// and re-read when renewed).
func New(cloudConfig io.Reader, opts Options) (*Cloud, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("--cluster-name must name this guest cluster uniquely on Harvester: load balancers are named and found by it")
	}
	if opts.ClusterName == DefaultClusterName {
		// Upstream's default: guests that ran the upstream cloud provider without the flag have
		// their load balancers under this name, and keep them only if it stays.
		klog.Warningf("--cluster-name is the default %q: load balancers are named and found by it, so guest clusters in one Harvester "+
			"namespace that both use it take each other's load balancers; keep it only for a guest whose load balancers "+
			"the upstream Harvester cloud provider made under it", DefaultClusterName)
	}
	if cloudConfig == nil {
		return nil, errors.New("the harvester cloud provider needs --cloud-config: the kubeconfig of the guest's Harvester credential")
	}
	data, err := io.ReadAll(cloudConfig)
	if err != nil {
		return nil, fmt.Errorf("reading the cloud config: %w", err)
	}
	cc, err := clientcmd.NewClientConfigFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("parsing the cloud config as a kubeconfig: %w", err)
	}
	namespace, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the cloud config's namespace: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building a client from the cloud config: %w", err)
	}
	cfg.UserAgent = "harvester-cloud-controller-manager/" + opts.ClusterName
	if opts.HarvesterQPS <= 0 {
		opts.HarvesterQPS = DefaultHarvesterQPS
	}
	if opts.HarvesterBurst <= 0 {
		opts.HarvesterBurst = DefaultHarvesterBurst
	}
	cfg.QPS, cfg.Burst = opts.HarvesterQPS, opts.HarvesterBurst
	c := &Cloud{config: cfg, namespace: namespace, opts: opts}
	if c.addresses, err = addressOptions(opts); err != nil {
		return nil, err
	}
	scheme, err := guestcloud.NewScheme()
	if err != nil {
		return nil, err
	}
	if c.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("creating the Harvester client: %w", err)
	}
	return c, nil
}

func addressOptions(o Options) (guestcloud.NodeAddressOptions, error) {
	out := guestcloud.NodeAddressOptions{ManagementNetwork: o.ManagementNetwork}
	parse := func(flag string, values []string) ([]netip.Prefix, error) {
		var prefixes []netip.Prefix
		for _, v := range values {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("--%s: %q is not a CIDR: %w", flag, v, err)
			}
			prefixes = append(prefixes, p.Masked())
		}
		return prefixes, nil
	}
	var err error
	if out.NodeIPCIDRs, err = parse("node-ip-cidr", o.NodeIPCIDRs); err != nil {
		return out, err
	}
	out.ExcludedCIDRs, err = parse("excluded-cidr", o.ExcludedCIDRs)
	return out, err
}

// Namespace is the Harvester namespace of the guest's VMs.
func (c *Cloud) Namespace() string { return c.namespace }

// Initialize starts what runs beside the framework's controllers, with the guest clients of
// the framework's builder: the topology sync and the watches of the load balancer.
func (c *Cloud) Initialize(builder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	ctx := wait.ContextForChannel(stop)
	if guest, err := builder.Client("harvester-topology"); err != nil {
		klog.ErrorS(err, "creating the guest client for the topology sync; node zones will not follow live migrations")
	} else {
		go func() {
			if err := c.SyncTopology(ctx, guest); err != nil {
				klog.ErrorS(err, "topology sync stopped")
			}
		}()
	}
	guest, err := builder.Client("harvester-loadbalancer")
	if err == nil {
		err = c.StartLoadBalancers(ctx, guest)
	}
	if err != nil {
		klog.ErrorS(err, "starting the load balancer; Services of type LoadBalancer will not be served")
	}
}

// LoadBalancer gives guest Services of type LoadBalancer Harvester load balancers, once
// Initialize (or StartLoadBalancers) has started its watches.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if l := c.loadBalancers.Load(); l != nil {
		return l, true
	}
	return nil, false
}

// Instances is the deprecated interface; InstancesV2 replaces it.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 maps Nodes to Harvester VMs.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return &instances{cloud: c}, true }

// Zones is deprecated; InstancesV2 reports zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes are not needed: the guest's CNI routes pod traffic.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName returns "harvester".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID is true: --cluster-name is required.
func (c *Cloud) HasClusterID() bool { return true }
