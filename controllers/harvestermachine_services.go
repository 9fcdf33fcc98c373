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

package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

// The HarvesterMachine reconciler reaches Harvester only through these two interfaces, as CAPK's
// machine factory and CAPV's service interfaces do: the manager runs them on Harvester
// (harvesterServices, pkg/harvester.VMService), and controller tests give their own
// (HarvesterMachineReconciler.services) to test the reconciler's decisions without a Harvester.

// vmService is what a machine's reconcile asks of Harvester about its VM
// (pkg/harvester.VMService). Its failures are transport.Errors.
type vmService interface {
	// Get returns the machine's VM in namespace, nil when there is none.
	Get(ctx context.Context, namespace string, m *infrav1.HarvesterMachine) (*kubevirtv1.VirtualMachine, error)
	// Create makes the VM with its volumes and cloud-init; created is false when it was there.
	Create(ctx context.Context, req *harvester.VMRequest) (vm *kubevirtv1.VirtualMachine, created bool, err error)
	// AdoptCloudInit makes the VM own its cloud-init Secret.
	AdoptCloudInit(ctx context.Context, vm *kubevirtv1.VirtualMachine) error
	// Observe reads the VM's instance: where it runs, its addresses, whether it is ready.
	Observe(ctx context.Context, vm *kubevirtv1.VirtualMachine, m *infrav1.HarvesterMachine) (harvester.VMState, error)
	// Delete deletes the VM and then the machine's volumes and Secrets; gone once nothing is left.
	Delete(ctx context.Context, namespace string, m *infrav1.HarvesterMachine) (gone, deleted bool, err error)
	// Host reads a Harvester host.
	Host(ctx context.Context, name string) (*corev1.Node, error)
	// SetRunStrategy sets the VM's run strategy and annotations (nil removes), locked to vm's
	// version.
	SetRunStrategy(ctx context.Context, vm *kubevirtv1.VirtualMachine, strategy kubevirtv1.VirtualMachineRunStrategy, annotations map[string]*string) error
	// Resizer sets the VM's CPU sockets and guest memory and grows its volumes.
	harvester.Resizer
}

// machineServices connect a machine's reconcile to its Harvester.
type machineServices interface {
	// connect opens (or reuses) the machine's connection to its cluster's Harvester; a failure
	// is a transport.Error for the machine's condition.
	connect(ctx context.Context, s *machineScope) error
	// vms is the VM service on that connection; shared are the Harvester namespaces besides the
	// target namespace whose images, key pairs and networks the machine may name (nil: any).
	vms(s *machineScope, shared []string) vmService
	// release drops the machine's use of its connection, once it has nothing left on Harvester.
	release(s *machineScope)
}

// harvesterServices are machineServices on Harvester, through the reconciler's ClientFactory.
type harvesterServices struct{ r *HarvesterMachineReconciler }

func (h harvesterServices) connect(ctx context.Context, s *machineScope) error {
	c, _, err := connect(ctx, h.r.Client, h.r.SecretMetadata, h.r.Factory, s.hc, s.userKey(), h.r.ProviderNamespace)
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

func (h harvesterServices) vms(s *machineScope, shared []string) vmService {
	return &harvester.VMService{C: s.client, Guest: s.guest, SharedNamespaces: shared}
}

func (h harvesterServices) release(s *machineScope) {
	h.r.Factory.Release(s.userKey())
}

// svc returns the reconciler's services: its own when a test set them, else Harvester's.
func (r *HarvesterMachineReconciler) svc() machineServices {
	if r.services != nil {
		return r.services
	}
	return harvesterServices{r: r}
}
