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

package testenv

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	serviceconfig "k8s.io/cloud-provider/controllers/service/config/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates/addons"
)

// CCMServiceWorkers is the number of service-controller workers the CCM ships with: its addon's
// --concurrent-service-syncs, else k8s.io/cloud-provider's default. Tests that run the service
// controller in-process run it with these, not with a kinder number.
func CCMServiceWorkers() (int, error) {
	manifest, err := addons.Render(addons.CCM, map[string]string{"CLUSTER_NAME": "workers", "CCM_IMAGE": "ccm"})
	if err != nil {
		return 0, err
	}
	objs, err := DecodeObjects([]byte(manifest))
	if err != nil {
		return 0, err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		data, err := o.MarshalJSON()
		if err != nil {
			return 0, err
		}
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal(data, d); err != nil {
			return 0, err
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, a := range append(c.Command, c.Args...) {
				if v, ok := strings.CutPrefix(a, "--concurrent-service-syncs="); ok {
					n, err := strconv.Atoi(v)
					if err != nil {
						return 0, fmt.Errorf("the CCM addon's %s: %w", a, err)
					}
					return n, nil
				}
			}
		}
	}
	defaults := serviceconfig.ServiceControllerConfiguration{}
	serviceconfig.RecommendedDefaultServiceControllerConfiguration(&defaults)
	return int(defaults.ConcurrentServiceSyncs), nil
}
