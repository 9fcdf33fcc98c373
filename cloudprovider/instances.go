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

package cloudprovider

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// instances implements InstancesV2 on Harvester VMs.
type instances struct {
	cloud *Cloud
}

// findVM finds a Node's VM: by providerID (the VM's UID) when the Node has one, else by the VM
// name, else by the hostname its VMI runs with. It returns nil, nil when there is none.
func (i *instances) findVM(ctx context.Context, node *corev1.Node) (*kubevirtv1.VirtualMachine, error) {
	c, ns := i.cloud.client, i.cloud.namespace
	if uid, ok := strings.CutPrefix(node.Spec.ProviderID, guestcloud.ProviderIDPrefix); ok && uid != "" {
		vms := &kubevirtv1.VirtualMachineList{}
		if err := c.List(ctx, vms, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing VMs in %s: %w", ns, err)
		}
		for idx := range vms.Items {
			if vms.Items[idx].UID == types.UID(uid) {
				return &vms.Items[idx], nil
			}
		}
		return nil, nil // the VM of this providerID is gone, even if one of the same name exists
	} else if node.Spec.ProviderID != "" {
		return nil, fmt.Errorf("node %s has providerID %q, which is not a Harvester VM's", node.Name, node.Spec.ProviderID)
	}
	vm := &kubevirtv1.VirtualMachine{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: node.Name}, vm)
	if err == nil {
		return vm, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading VM %s/%s: %w", ns, node.Name, err)
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := c.List(ctx, vmis, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing VMIs in %s: %w", ns, err)
	}
	for _, vmi := range vmis.Items {
		if vmi.Spec.Hostname == node.Name {
			if err := c.Get(ctx, client.ObjectKeyFromObject(&vmi), vm); err != nil {
				return nil, client.IgnoreNotFound(err)
			}
			return vm, nil
		}
	}
	return nil, nil
}

// InstanceExists is false only when the Node's VM is really gone; errors (Harvester
// unreachable) are errors, so that the node controller never deletes a Node by mistake.
func (i *instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	vm, err := i.findVM(ctx, node)
	return vm != nil, err
}

// InstanceShutdown is true when the VM is stopped (no VMI, or a VMI that ended).
func (i *instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	vm, err := i.findVM(ctx, node)
	if err != nil || vm == nil {
		return false, err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := i.cloud.client.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	return vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed, nil
}

// InstanceMetadata reports the providerID, an instance type, the addresses and the zone and
// region Harvester keeps on the VMI (for VMs labelled as guest-cluster VMs).
func (i *instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	vm, err := i.findVM(ctx, node)
	if err != nil {
		return nil, err
	}
	if vm == nil {
		return nil, cloudprovider.InstanceNotFound
	}
	md := &cloudprovider.InstanceMetadata{ProviderID: guestcloud.ProviderIDPrefix + string(vm.UID)}
	md.InstanceType = guestcloud.InstanceType(vm)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := i.cloud.client.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return md, nil
		}
		return nil, err
	}
	md.NodeAddresses = guestcloud.NodeAddresses(vmi, node, i.cloud.addresses)
	md.Zone = vmi.Annotations[corev1.LabelTopologyZone]
	md.Region = vmi.Annotations[corev1.LabelTopologyRegion]
	return md, nil
}
