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

package build

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

func TestMachineCapacity(t *testing.T) {
	root := infrav1.Disk{Image: "ubuntu", Size: resource.MustParse("40Gi")}
	data := infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("100Gi")}
	for _, tc := range []struct {
		name string
		spec infrav1.HarvesterMachineSpec
		want corev1.ResourceList
	}{
		{
			name: "first disk boots when none sets a boot order",
			spec: infrav1.HarvesterMachineSpec{CPU: 4, Memory: resource.MustParse("8Gi"), Disks: []infrav1.Disk{root, data}},
			want: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi"), "ephemeral-storage": resource.MustParse("40Gi")},
		},
		{
			name: "reserved memory is not the guest's; the lowest boot order wins",
			spec: infrav1.HarvesterMachineSpec{CPU: 2, Memory: resource.MustParse("8Gi"), ReservedMemory: ptr.To(resource.MustParse("256Mi")),
				Disks: []infrav1.Disk{withBootOrder(data, 2), withBootOrder(root, 1)}},
			want: corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("7936Mi"), "ephemeral-storage": resource.MustParse("40Gi")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := MachineCapacity(&tc.spec)
			g.Expect(got).To(HaveLen(len(tc.want)))
			for name, q := range tc.want {
				have, ok := got[name]
				g.Expect(ok).To(BeTrue(), "%s", name)
				g.Expect(have.Cmp(q)).To(BeZero(), "%s: %s, want %s", name, have.String(), q.String())
			}
			g.Expect(got).NotTo(HaveKey(corev1.ResourceName("nvidia.com/gpu")), "no GPUs in the spec")
		})
	}
	g := NewWithT(t)
	g.Expect(MachineNodeInfo()).To(Equal(infrav1.NodeInfo{Architecture: "amd64", OperatingSystem: "linux"}))
}

func withBootOrder(d infrav1.Disk, order int32) infrav1.Disk {
	d.BootOrder = ptr.To(order)
	return d
}
