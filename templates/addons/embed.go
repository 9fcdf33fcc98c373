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

// Package addons holds the manifests the provider delivers into guest clusters through
// ClusterResourceSets, embedded in the manager's binary.
package addons

import (
	_ "embed"
	"fmt"
	"regexp"
)

// CCM is the guest's cloud controller manager, with ${CLUSTER_NAME} and ${CCM_IMAGE} to fill in.
//
//go:embed ccm.yaml
var CCM string

// CSI is the Harvester CSI driver (driver.harvesterhci.io) with its default StorageClass
// harvester; it has no variables. It reads the same Secret kube-system/harvester-cloud-config as
// the CCM, so it belongs in the same ClusterResourceSet as that Secret.
//
//go:embed csi.yaml
var CSI string

// KubeVIP is kube-vip for Services of type LoadBalancer only (no control-plane VIP): it announces
// the addresses the CCM writes into kube-vip.io/loadbalancerIPs. It has no variables.
//
//go:embed kube-vip.yaml
var KubeVIP string

var variable = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// Render fills a manifest's ${VARIABLES}; a variable without a value is an error.
func Render(manifest string, values map[string]string) (string, error) {
	var missing []string
	out := variable.ReplaceAllStringFunc(manifest, func(m string) string {
		name := variable.FindStringSubmatch(m)[1]
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for %v", missing)
	}
	return out, nil
}
