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

package guest

import (
	"context"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// DefaultKubeletVersion is the version the kubelet of a guest image reports when the image's
// name says none: the version of the bed's guest API servers.
const DefaultKubeletVersion = "v1.35.4"

// kubeVersionInName is how image-builder names its images after the Kubernetes they carry
// (`ubuntu-2404-kube-v1.35.5`).
var kubeVersionInName = regexp.MustCompile(`kube-(v[0-9]+\.[0-9]+\.[0-9]+)`)

// KubeletVersionOfImage is the version the kubelet baked into a Harvester image reports: the
// `kube-vX.Y.Z` its name carries, else DefaultKubeletVersion. A kubeadm guest's kubelet comes
// with its image (an RKE2 or K3s one with its installer, unless air-gapped: NodeConfig),
// whatever version the Machine asks for: CAPI compares the two
// (Node.status.nodeInfo.kubeletVersion: a Machine's UpToDate condition, KCP's rollout), so a
// version bump without a new image never completes.
func KubeletVersionOfImage(imageID string) string {
	if m := kubeVersionInName.FindStringSubmatch(imageID); m != nil {
		return m[1]
	}
	return DefaultKubeletVersion
}

// kubeletVersion is the version of the kubelet on the image a VMI booted from: the image of the
// first of its volumes cloned from one.
func (a *NodeAgent) kubeletVersion(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	for _, v := range vmi.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		err := a.harvester.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, pvc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		if image := pvc.Annotations[harvestersim.AnnotationImageID]; image != "" {
			return KubeletVersionOfImage(image), nil
		}
	}
	return DefaultKubeletVersion, nil
}
