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

package takeover

import (
	"context"
	"fmt"
	"maps"
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// AdoptedMachine is a machine whose VM a take-over marks as this provider's.
type AdoptedMachine struct {
	// Namespace and Name of the HarvesterMachine (and of CAPHV's before it); the VM has its name.
	Namespace, Name string
	ControlPlane    bool
	// ProviderID names the VM by UID: the VM found by name must be that one.
	ProviderID string
	// Labels of the machine that this provider copies onto its VMs (its MachineDeployment or
	// control plane).
	Labels map[string]string
}

// ReadVM reads a machine's VM and checks it is the one its providerID names, and returns the
// names of its disks and NICs (for TranslateMachineSpec).
func ReadVM(ctx context.Context, h client.Reader, targetNamespace string, m *AdoptedMachine) (*kubevirtv1.VirtualMachine, *MachineVM, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := h.Get(ctx, client.ObjectKey{Namespace: targetNamespace, Name: m.Name}, vm); err != nil {
		return nil, nil, fmt.Errorf("reading VM %s/%s of machine %s/%s: %w", targetNamespace, m.Name, m.Namespace, m.Name, err)
	}
	if want := infrav1.ProviderIDPrefix + string(vm.UID); m.ProviderID != want {
		return nil, nil, fmt.Errorf("VM %s/%s is %s, but machine %s/%s has providerID %s: the VM was made anew outside CAPHV; it is not taken over",
			vm.Namespace, vm.Name, want, m.Namespace, m.Name, m.ProviderID)
	}
	shape := &MachineVM{}
	if t := vm.Spec.Template; t != nil {
		claims := map[string]bool{}
		for _, v := range t.Spec.Volumes {
			claims[v.Name] = v.PersistentVolumeClaim != nil
		}
		for _, d := range t.Spec.Domain.Devices.Disks {
			if claims[d.Name] {
				shape.Disks = append(shape.Disks, d.Name)
			}
		}
		for _, n := range t.Spec.Domain.Devices.Interfaces {
			shape.NICs = append(shape.NICs, n.Name)
		}
	}
	return vm, shape, nil
}

// machineLabels are the labels this provider's VM of the machine carries (and its VMI, volumes
// and cloud-init Secret): the builder's own.
func machineLabels(g naming.Guest, m *AdoptedMachine) map[string]string {
	role := naming.RoleWorker
	if m.ControlPlane {
		role = naming.RoleControlPlane
	}
	return build.MachineLabels(&build.VMInput{Guest: g, Role: role, Machine: &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: m.Labels}}})
}

// AdoptMachine labels a machine's VM, its running instance, its volumes and its cloud-init
// Secret as this provider's, changing nothing else: the VM's spec stays (its template's labels
// aside, for the instances it starts later), nothing restarts. Run again, it writes nothing new.
func AdoptMachine(ctx context.Context, h client.Client, g naming.Guest, vm *kubevirtv1.VirtualMachine, m *AdoptedMachine) error {
	labels := machineLabels(g, m)
	annotations := map[string]string{naming.AnnotationMachine: m.Name}

	// KubeVirt writes the VM's status all the time: read it again on a conflict, and stop if it
	// is another VM than the one read (deleted and made again meanwhile).
	uid := vm.UID
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		current := &kubevirtv1.VirtualMachine{}
		if err := h.Get(ctx, client.ObjectKeyFromObject(vm), current); err != nil {
			return err
		}
		if current.UID != uid {
			return fmt.Errorf("VM %s/%s was made again (UID %s, was %s)", vm.Namespace, vm.Name, current.UID, uid)
		}
		patched := current.DeepCopy()
		patched.Labels = merged(patched.Labels, labels)
		patched.Annotations = merged(patched.Annotations, annotations)
		if t := patched.Spec.Template; t != nil {
			t.ObjectMeta.Labels = merged(t.ObjectMeta.Labels, labels)
			t.ObjectMeta.Annotations = merged(t.ObjectMeta.Annotations, annotations)
		}
		return h.Patch(ctx, patched, client.MergeFromWithOptions(current, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("labelling VM %s/%s: %w", vm.Namespace, vm.Name, err)
	}

	vmi := &kubevirtv1.VirtualMachineInstance{}
	switch err := h.Get(ctx, client.ObjectKeyFromObject(vm), vmi); {
	case apierrors.IsNotFound(err):
		// Not running: it starts from the template, with the labels.
	case err != nil:
		return fmt.Errorf("reading VMI %s/%s: %w", vm.Namespace, vm.Name, err)
	default:
		if err := labelObject(ctx, h, vmi, labels, annotations); err != nil {
			return err
		}
	}

	if t := vm.Spec.Template; t != nil {
		for _, v := range t.Spec.Volumes {
			var obj client.Object
			switch {
			case v.PersistentVolumeClaim != nil && !v.PersistentVolumeClaim.Hotpluggable:
				obj = &corev1.PersistentVolumeClaim{}
				obj.SetName(v.PersistentVolumeClaim.ClaimName)
			case v.Name == infrav1.CloudInitDiskName && v.CloudInitNoCloud != nil && v.CloudInitNoCloud.UserDataSecretRef != nil:
				obj = &corev1.Secret{}
				obj.SetName(v.CloudInitNoCloud.UserDataSecretRef.Name)
			default:
				continue
			}
			obj.SetNamespace(vm.Namespace)
			if err := h.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("reading %s/%s of VM %s: %w", vm.Namespace, obj.GetName(), vm.Name, err)
			}
			if err := labelObject(ctx, h, obj, labels, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// AdoptLoadBalancer labels CAPHV's control-plane load balancer as the guest's and has it select
// the VMIs by this provider's labels (which every control-plane VMI must carry first: call it
// after AdoptMachine for each), so that the control-plane machines this provider makes become
// its backends. Its address, listeners and health check stay.
func AdoptLoadBalancer(ctx context.Context, h client.Client, g naming.Guest, targetNamespace, name string) error {
	// Harvester's controller writes the load balancer's status: read it again on a conflict.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		lb := &lbv1.LoadBalancer{}
		if err := h.Get(ctx, client.ObjectKey{Namespace: targetNamespace, Name: name}, lb); err != nil {
			return err
		}
		patched := lb.DeepCopy()
		patched.Labels = merged(patched.Labels, g.Labels())
		patched.Spec.BackendServerSelector = map[string][]string{
			naming.LabelCluster: {g.ID()},
			naming.LabelRole:    {naming.RoleControlPlane},
		}
		return h.Patch(ctx, patched, client.MergeFromWithOptions(lb, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("adopting load balancer %s/%s: %w", targetNamespace, name, err)
	}
	return nil
}

// labelObject adds labels and annotations to an object with a merge patch.
func labelObject(ctx context.Context, h client.Client, obj client.Object, labels, annotations map[string]string) error {
	before := obj.DeepCopyObject().(client.Object)
	obj.SetLabels(merged(obj.GetLabels(), labels))
	if annotations != nil {
		obj.SetAnnotations(merged(obj.GetAnnotations(), annotations))
	}
	if err := h.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
		return fmt.Errorf("labelling %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func merged(into, add map[string]string) map[string]string {
	out := maps.Clone(into)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}
