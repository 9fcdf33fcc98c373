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

package v1alpha1

import ctrl "sigs.k8s.io/controller-runtime"

// SetupWebhooksWithManager registers the defaulting and validating webhooks of every kind.
func SetupWebhooksWithManager(mgr ctrl.Manager) error {
	for _, w := range []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&HarvesterClusterWebhook{},
		&HarvesterClusterTemplateWebhook{},
		&HarvesterClusterIdentityWebhook{},
		&HarvesterMachineWebhook{},
		&HarvesterMachineTemplateWebhook{},
	} {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	return nil
}
