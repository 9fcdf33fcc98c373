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

package harvestersim

import (
	"fmt"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// harvesterCRDs returns the CRDs of the kinds a Harvester cluster serves that this project
// touches, each from its owner's own source: KubeVirt's generated from kubevirt.io/api's Go
// types (`make manifests` writes them to test/crds/kubevirt), Harvester's and the load
// balancer's from their modules, and Multus' NetworkAttachmentDefinition.
func harvesterCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	harvesterDir, err := testenv.ModuleDir("github.com/harvester/harvester")
	if err != nil {
		return nil, err
	}
	lbDir, err := testenv.ModuleDir("github.com/harvester/harvester-load-balancer")
	if err != nil {
		return nil, err
	}
	root := testenv.RepoRoot()
	files := []string{
		filepath.Join(root, "test", "crds", "kubevirt", "kubevirt.io_virtualmachines.yaml"),
		filepath.Join(root, "test", "crds", "kubevirt", "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(root, "test", "crds", "kubevirt", "kubevirt.io_virtualmachineinstancemigrations.yaml"),
		filepath.Join(root, "test", "crds", "multus", "k8s.cni.cncf.io_network-attachment-definitions.yaml"),
		filepath.Join(harvesterDir, "deploy", "charts", "harvester-crd", "templates", "harvesterhci.io_virtualmachineimages.yaml"),
		filepath.Join(harvesterDir, "deploy", "charts", "harvester-crd", "templates", "harvesterhci.io_keypairs.yaml"),
		filepath.Join(harvesterDir, "deploy", "charts", "harvester-crd", "templates", "harvesterhci.io_settings.yaml"),
		filepath.Join(lbDir, "crds", "loadbalancer.harvesterhci.io_loadbalancers.yaml"),
		filepath.Join(lbDir, "crds", "loadbalancer.harvesterhci.io_ippools.yaml"),
	}
	// The rest of what Harvester's webhook server watches (harvesterwebhook.go), as its build
	// collected them.
	webhookDir, err := HarvesterWebhookDir()
	if err != nil {
		return nil, err
	}
	more, err := filepath.Glob(filepath.Join(webhookDir, "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	files = append(files, more...)
	// The rest of KubeVirt's kinds, as KubeVirt's operator installs them (kubevirt.go).
	kubeVirtDir, err := KubeVirtDir()
	if err != nil {
		return nil, err
	}
	kubeVirtCRDs, err := filepath.Glob(filepath.Join(kubeVirtDir, "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	files = append(files, kubeVirtCRDs...)
	var crds []*apiextensionsv1.CustomResourceDefinition
	seen := map[string]bool{}
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := testenv.DecodeObjects(data)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		for _, u := range objs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", f, err)
			}
			if seen[crd.Name] {
				continue
			}
			seen[crd.Name] = true
			completeKubeVirtCRD(crd)
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// completeKubeVirtCRD adds what KubeVirt's operator sets on its CRDs and controller-gen cannot
// know (kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go): short names,
// and the status subresource on VirtualMachines and migrations. VMIs have none: virt-handler
// writes their status with ordinary updates.
func completeKubeVirtCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	if crd.Spec.Group != "kubevirt.io" {
		return
	}
	withStatus := false
	switch crd.Spec.Names.Kind {
	case "VirtualMachine":
		crd.Spec.Names.ShortNames = []string{"vm", "vms"}
		withStatus = true
	case "VirtualMachineInstance":
		crd.Spec.Names.ShortNames = []string{"vmi", "vmis"}
	case "VirtualMachineInstanceMigration":
		crd.Spec.Names.ShortNames = []string{"vmim", "vmims"}
		withStatus = true
	}
	for i := range crd.Spec.Versions {
		if withStatus {
			crd.Spec.Versions[i].Subresources = &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
			}
		}
	}
}
