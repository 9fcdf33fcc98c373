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

// Package guest plays the guest clusters of the tests and the demo: one kube-apiserver per guest
// cluster, the `<cluster>-kubeconfig` Secret CAPI reads to reach it, and a node agent that
// registers a Node for each running VM whose cloud-init carries the cluster's bootstrap data, as
// kubelet does once cloud-init has run.
package guest

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Cluster is a guest cluster's control plane.
type Cluster struct {
	// Namespace and Name of the CAPI Cluster in the management cluster.
	Namespace, Name string
	Env             *testenv.Environment
	// WithCCM says a cloud controller manager runs in the guest: kubelets then register with the
	// uninitialized taint and no providerID, and the CCM fills it in.
	WithCCM bool
	// Kubeadm says the guest is the control plane `kubeadm init` brought up on a Machine (see
	// StartKubeadm), as opposed to one a test started up front.
	Kubeadm bool
	// NodeConfigFor, when set, says how a VM's bootstrap data registers its Node (name, role,
	// labels, taints, external cloud provider): for RKE2 and K3s guests (StartDistribution).
	NodeConfigFor func(userData []byte) (*NodeConfig, error)

	certDir string
	// etcd is the guest's stacked etcd (kubeadm's, or RKE2's or K3s's embedded one; nil with an
	// external one or none), network how its
	// apiserver reaches the kubelets (nil when it does not).
	etcd    *stackedEtcd
	network *kubeletNetwork
	// distribution is an RKE2 or K3s guest's (StartDistribution), nil for kubeadm's.
	distribution *Distribution
	// workDir, processes and kubelets: the scheduling part of the guest (StartScheduling).
	workDir   string
	processes []*process
	kubelets  *kubelets
}

// Start starts a guest control plane and writes its kubeconfig Secret into the management
// cluster, where CAPI's ClusterCache finds it.
func Start(ctx context.Context, management client.Client, namespace, name string, withCCM bool) (*Cluster, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env, err := testenv.Start(testenv.Options{Name: "guest-" + namespace + "-" + name, Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kubeconfig, err := env.Kubeconfig()
	if err != nil {
		return nil, fmt.Errorf("writing the guest kubeconfig: %w", err)
	}
	if err := management.Create(ctx, testenv.KubeconfigSecret(namespace, name, kubeconfig)); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating the kubeconfig Secret of guest %s/%s: %w", namespace, name, err)
	}
	return &Cluster{Namespace: namespace, Name: name, Env: env, WithCCM: withCCM}, nil
}

// Stop stops the guest control plane.
func (c *Cluster) Stop() error {
	if c.kubelets != nil {
		c.kubelets.stopAll()
	}
	for _, p := range c.processes {
		p.stop()
	}
	err := c.Env.Stop()
	if c.network != nil {
		c.network.stop()
	}
	if c.etcd != nil {
		c.etcd.stopAll()
	}
	for _, dir := range []string{c.certDir, c.workDir} {
		if dir != "" {
			err = errors.Join(err, os.RemoveAll(dir))
		}
	}
	return err
}

// StartScheduling gives the guest what places and runs its pods: kube-scheduler and
// kube-controller-manager as processes, and kubelets for its nodes (see kubelets), which run our
// CCM's pod with ccmBinary, the CCM image's entrypoint. Guests a test starts up front have none
// of this: their addons are only applied.
func (c *Cluster) StartScheduling(ctx context.Context, ccmBinary string) error {
	dir, err := os.MkdirTemp("", "guest-"+c.Name+"-cp-")
	if err != nil {
		return err
	}
	c.workDir = dir
	return c.startScheduling(ctx, ccmBinary)
}
