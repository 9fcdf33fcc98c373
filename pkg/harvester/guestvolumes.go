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

package harvester

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// GuestVolumeService deletes, when a guest cluster goes, the volumes its CSI driver made on
// Harvester: exactly those the HarvesterCluster recorded from the guest's PersistentVolumes
// while it lived.
type GuestVolumeService struct {
	C *transport.Client
}

// VolumeOutcome is what Delete did with one recorded volume: deleted it, or kept it and why;
// neither when it was gone or already being deleted.
type VolumeOutcome struct {
	Name    string
	Deleted bool
	Kept    string
}

// Delete deletes the named volumes of namespace, but never a machine's disk (the record may be
// wrong) nor a volume a VM still uses.
func (s *GuestVolumeService) Delete(ctx context.Context, namespace string, names []string) ([]VolumeOutcome, error) {
	if len(names) == 0 {
		return nil, nil
	}
	// Live, and every VM of the namespace: the cache holds only this cluster's (see
	// cacheSelection), and a volume may be attached to any VM, ours or not.
	vms := &kubevirtv1.VirtualMachineList{}
	if err := s.C.List(ctx, vms, client.InNamespace(namespace)); err != nil {
		return nil, transport.ClassifyError(err, "listing the VMs")
	}
	inUse := map[string]string{}
	for _, vm := range vms.Items {
		if vm.Spec.Template == nil {
			continue
		}
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				inUse[v.PersistentVolumeClaim.ClaimName] = vm.Name
			}
		}
	}
	var outcomes []VolumeOutcome
	for _, name := range names {
		pvc := &corev1.PersistentVolumeClaim{}
		err := s.C.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return outcomes, transport.ClassifyError(err, "reading a volume of the guest")
		}
		switch {
		case !pvc.DeletionTimestamp.IsZero():
			continue
		case pvc.Labels[naming.LabelManagedBy] == naming.ManagedByValue:
			outcomes = append(outcomes, VolumeOutcome{Name: name, Kept: "the guest's record names a machine's disk, which is not the guest's to delete"})
			continue
		case inUse[name] != "":
			outcomes = append(outcomes, VolumeOutcome{Name: name, Kept: "VM " + inUse[name] + " still uses it"})
			continue
		}
		if err := s.C.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
			return outcomes, transport.ClassifyError(err, "deleting a volume of the guest")
		}
		outcomes = append(outcomes, VolumeOutcome{Name: name, Deleted: true})
	}
	return outcomes, nil
}
