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
