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
	"path/filepath"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	controlplaneadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
)

// ManagementScheme knows Kubernetes' kinds, Cluster API's (core, addons, IPAM, runtime, kubeadm
// bootstrap and control plane) and this provider's, and the older versions of CAPI's kinds,
// which the management cluster's conversion webhooks serve (conversion.go).
func ManagementScheme() (*runtime.Scheme, error) {
	// The provider's own scheme (what main.go runs with), plus what CAPI's controllers need.
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, err
	}
	for _, add := range []func(*runtime.Scheme) error{
		apiextensionsv1.AddToScheme,
		ipamv1.AddToScheme,
		runtimev1.AddToScheme,
		bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme,
		clusterv1beta1.AddToScheme,
		// Every version CAPI's converters convert between must be known to set them up.
		addonsv1beta1.AddToScheme,
		ipamv1alpha1.AddToScheme,
		ipamv1beta1.AddToScheme,
		runtimev1alpha1.AddToScheme,
		bootstrapv1beta1.AddToScheme,
		controlplanev1beta1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// ManagementOptions describe a management cluster: this provider's CRDs as config/crd renders
// them (with the contract label), Cluster API's and the kubeadm providers' CRDs from the
// cluster-api module, and all their webhooks served in-process, so that CAPI objects get their
// real defaulting and validation.
func ManagementOptions() (Options, error) {
	scheme, err := ManagementScheme()
	if err != nil {
		return Options{}, err
	}
	capi, err := ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return Options{}, err
	}

	m := &manifests{}
	ours, err := Kustomize(filepath.Join(RepoRoot(), "config", "crd"))
	if err != nil {
		return Options{}, err
	}
	if err := m.add(ours, providerWebhookPrefix); err != nil {
		return Options{}, err
	}
	// As config/default renders them (with their match conditions), not controller-gen's file.
	webhooks, err := Kustomize(filepath.Join(RepoRoot(), "config", "webhook"))
	if err != nil {
		return Options{}, err
	}
	if err := m.add(webhooks, providerWebhookPrefix); err != nil {
		return Options{}, err
	}
	if err := m.addFiles("capi-", filepath.Join(capi, "core", "config", "webhook", "manifests.yaml")); err != nil {
		return Options{}, err
	}
	if err := m.addFiles("kubeadm-bootstrap-", filepath.Join(capi, "bootstrap", "kubeadm", "config", "webhook", "manifests.yaml")); err != nil {
		return Options{}, err
	}
	if err := m.addFiles("kubeadm-control-plane-", filepath.Join(capi, "controlplane", "kubeadm", "config", "webhook", "manifests.yaml")); err != nil {
		return Options{}, err
	}

	kubeadmContract := map[string]string{"cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2"}
	for _, dir := range []string{
		filepath.Join(capi, "bootstrap", "kubeadm", "config", "crd", "bases"),
		filepath.Join(capi, "controlplane", "kubeadm", "config", "crd", "bases"),
	} {
		if err := m.addProviderCRDs(dir, kubeadmContract); err != nil {
			return Options{}, err
		}
	}

	core, err := filepath.Glob(filepath.Join(capi, "core", "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return Options{}, err
	}
	if len(core) == 0 {
		return Options{}, fmt.Errorf("no CRDs in %s", filepath.Join(capi, "core", "config", "crd", "bases"))
	}
	if err := m.addFiles("", core...); err != nil {
		return Options{}, err
	}
	var converted []string
	for _, crd := range m.crds {
		if crd.Spec.Group != infrav1.GroupVersion.Group && len(crd.Spec.Versions) > 1 {
			converted = append(converted, crd.Name)
		}
	}

	return Options{
		Name:   "management",
		Scheme: scheme,
		CRDs:   m.crds,
		// CAPI's, kubeadm's: served at v1beta1 too, converted by CAPI's webhooks (conversion.go).
		ConversionWebhookCRDs: converted,
		MutatingWebhooks:      m.mutating,
		ValidatingWebhooks:    m.validating,
		SetupWebhooks:         setupManagementWebhooks,
		// As the provider's and CAPI's managers read them.
		UncachedObjects: controllers.UncachedObjects(),
		// As CAPI v1.14's contracts expect a cluster may run it: setting an owner reference
		// needs delete on the object (and update on the owner's finalizers with
		// blockOwnerDeletion), which the shipped manager's role must then grant.
		ConfigureAPIServer: func(s *envtest.APIServer) error {
			s.Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
			return nil
		},
		// CAPI's managers read providers' objects from their caches (internal/setup's
		// ManagerClientOptions); live reads made the bed's CAPI core cost the management
		// apiserver a GET per infrastructure object on every Machine and MachineSet reconcile.
		CacheUnstructured: true,
	}, nil
}

// StartManagement starts a management cluster as ManagementOptions describes it.
func StartManagement() (*Environment, error) {
	o, err := ManagementOptions()
	if err != nil {
		return nil, err
	}
	return Start(o)
}

// StartManagementWithoutProvider starts a management cluster with this provider's CRDs but not
// its webhooks: the provider's manager binary, installed from its components, serves those.
func StartManagementWithoutProvider() (*Environment, error) {
	o, err := ManagementOptions()
	if err != nil {
		return nil, err
	}
	o.MutatingWebhooks = slices.DeleteFunc(o.MutatingWebhooks, func(w *admissionv1.MutatingWebhookConfiguration) bool {
		return strings.HasPrefix(w.Name, providerWebhookPrefix)
	})
	o.ValidatingWebhooks = slices.DeleteFunc(o.ValidatingWebhooks, func(w *admissionv1.ValidatingWebhookConfiguration) bool {
		return strings.HasPrefix(w.Name, providerWebhookPrefix)
	})
	o.SetupWebhooks = setupCAPIWebhooks
	return Start(o)
}

// StartBareManagement starts a management cluster as a platform admin has one before
// `clusterctl init --infrastructure harvester`: Cluster API's and the kubeadm providers' CRDs and
// webhooks, and nothing of this provider (clusterctl installs its CRDs with its components).
func StartBareManagement() (*Environment, error) {
	o, err := ManagementOptions()
	if err != nil {
		return nil, err
	}
	o.CRDs = slices.DeleteFunc(o.CRDs, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd.Spec.Group == infrav1.GroupVersion.Group
	})
	o.MutatingWebhooks = slices.DeleteFunc(o.MutatingWebhooks, func(w *admissionv1.MutatingWebhookConfiguration) bool {
		return strings.HasPrefix(w.Name, providerWebhookPrefix)
	})
	o.ValidatingWebhooks = slices.DeleteFunc(o.ValidatingWebhooks, func(w *admissionv1.ValidatingWebhookConfiguration) bool {
		return strings.HasPrefix(w.Name, providerWebhookPrefix)
	})
	o.SetupWebhooks = setupCAPIWebhooks
	return Start(o)
}

// StartManagementWithoutCAPI starts a management cluster with this provider's CRDs only: no
// Cluster API CRDs, webhooks or conversion in-process. The caller installs a Cluster API of its
// own (another version's, as processes) and the provider as it ships.
func StartManagementWithoutCAPI() (*Environment, error) {
	o, err := ManagementOptions()
	if err != nil {
		return nil, err
	}
	o.CRDs = slices.DeleteFunc(o.CRDs, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		return crd.Spec.Group != infrav1.GroupVersion.Group
	})
	o.ConversionWebhookCRDs = nil
	o.MutatingWebhooks, o.ValidatingWebhooks, o.SetupWebhooks = nil, nil, nil
	return Start(o)
}

// providerWebhookPrefix names this provider's webhook configurations in the test environment.
const providerWebhookPrefix = "harvester-"

func setupManagementWebhooks(mgr ctrl.Manager) error {
	if err := setupCAPIWebhooks(mgr); err != nil {
		return err
	}
	return infrav1.SetupWebhooksWithManager(mgr)
}

func setupCAPIWebhooks(mgr ctrl.Manager) error {
	registerConversion(mgr)
	c := mgr.GetClient()
	for _, w := range []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&coreadmission.Cluster{Client: c},
		&coreadmission.ClusterClass{Client: c},
		&coreadmission.Machine{},
		&coreadmission.MachineDeployment{},
		&coreadmission.MachineSet{},
		&coreadmission.MachineHealthCheck{},
		&coreadmission.MachineDrainRule{},
		&coreadmission.MachinePool{},
		&coreadmission.ClusterResourceSet{},
		&coreadmission.ClusterResourceSetBinding{},
		&coreadmission.ExtensionConfig{},
		&coreadmission.IPAddress{Client: c},
		&coreadmission.IPAddressClaim{},
		&bootstrapadmission.KubeadmConfig{},
		&bootstrapadmission.KubeadmConfigTemplate{},
		&controlplaneadmission.KubeadmControlPlane{},
		&controlplaneadmission.KubeadmControlPlaneTemplate{},
		&controlplaneadmission.ScaleValidator{Client: c},
	} {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	return nil
}
