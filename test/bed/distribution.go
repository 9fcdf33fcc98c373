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

package bed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
)

// distributions are those whose control planes the node agent brings up besides kubeadm's.
var distributions = []*guest.Distribution{guest.RKE2, guest.K3s}

// startDistribution brings up the control plane of an RKE2 or K3s cluster when a VM runs its
// first server (see guest.StartDistribution) and stops it with the bed; nil when the user data
// starts none. The apiserver listens on the Cluster's control-plane endpoint.
func (b *Bed) startDistribution(ctx context.Context, userData []byte) (*guest.Cluster, error) {
	for _, d := range distributions {
		n, err := d.ParseNode(userData)
		if err != nil {
			return nil, fmt.Errorf("reading %s bootstrap data: %w", d.Name, err)
		}
		if n == nil || !n.Init {
			continue
		}
		// The Cluster is in whichever management cluster holds the bootstrap data.
		mgmt, namespace, name, err := b.Nodes.Owner(ctx, userData)
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, fmt.Errorf("no Cluster's %s bootstrap data is in this VM's user data", d.Name)
		}
		cluster := &clusterv1.Cluster{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
			return nil, err
		}
		ep := cluster.Spec.ControlPlaneEndpoint
		if !ep.IsValid() {
			return nil, fmt.Errorf("cluster %s/%s has no control-plane endpoint yet", namespace, name)
		}
		g, err := guest.StartDistribution(ctx, namespace, name, net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), n)
		if err != nil {
			return nil, fmt.Errorf("starting the %s control plane of %s/%s: %w", d.Name, namespace, name, err)
		}
		// As for kubeadm: its addons are scheduled, and our CCM runs from its scheduled pod.
		if err := g.StartScheduling(context.WithoutCancel(ctx), b.ccmBinary); err != nil {
			return nil, errors.Join(err, g.Stop())
		}
		b.mu.Lock()
		b.guests = append(b.guests, g)
		b.mu.Unlock()
		return g, nil
	}
	return nil, nil
}
