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

package bed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// AddBareManagement starts a management cluster as a platform admin has one before
// `clusterctl init --infrastructure harvester`: Cluster API's core (and the kubeadm providers
// when the bed runs them) in-process and in clusterctl's inventory, cert-manager's API, and
// nothing of this provider. A test installs the provider with clusterctl, then
// StartInstalledProvider runs what clusterctl applied.
func (b *Bed) AddBareManagement(ctx context.Context) (*Management, error) {
	return b.addManagement(ctx, managementSpec{start: testenv.StartBareManagement, asBeforeClusterctl: true})
}

// installCertManagerAPI plays cert-manager's API for clusterctl: its Issuer, ClusterIssuer and
// Certificate kinds, so that clusterctl finds cert-manager installed (it creates a test Issuer
// and Certificate) and the components' Certificate and Issuer are accepted. Nothing issues
// certificates: the bed does that for the manager (StartInstalledProvider).
func installCertManagerAPI(ctx context.Context, c client.Client) error {
	for _, k := range []struct {
		kind, plural string
		scope        apiextensionsv1.ResourceScope
	}{
		{"Issuer", "issuers", apiextensionsv1.NamespaceScoped},
		{"ClusterIssuer", "clusterissuers", apiextensionsv1.ClusterScoped},
		{"Certificate", "certificates", apiextensionsv1.NamespaceScoped},
	} {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, ListKind: k.kind + "List", Plural: k.plural, Singular: strings.ToLower(k.kind)},
				Scope: k.scope,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true),
					}},
				}},
			},
		}
		if err := apply(ctx, c, crd); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"issuers.cert-manager.io", "clusterissuers.cert-manager.io", "certificates.cert-manager.io"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				return false, nil
			}
		}
		return true, nil
	})
}

// CAPIRepository writes a clusterctl local repository of the providers a bare management
// cluster runs (their metadata.yaml from the cluster-api module, and empty components: they are
// installed already), so that clusterctl, which reads the core provider's contract from its
// repository, needs no GitHub; it returns the `providers:` entries of clusterctl.yaml for them.
// An air-gapped site has such a repository for Cluster API too.
func (b *Bed) CAPIRepository(dir string) (string, error) {
	capi, err := testenv.ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return "", err
	}
	metadata, err := os.ReadFile(filepath.Join(capi, "metadata.yaml"))
	if err != nil {
		return "", err
	}
	var entries strings.Builder
	for _, p := range bedProviders(b.options.Kubeadm) {
		if p.manifestLabel() == ProviderManifestLabel {
			continue
		}
		components := map[clusterctlv1.ProviderType]string{
			clusterctlv1.CoreProviderType:         "core-components.yaml",
			clusterctlv1.BootstrapProviderType:    "bootstrap-components.yaml",
			clusterctlv1.ControlPlaneProviderType: "control-plane-components.yaml",
		}[p.kind]
		versionDir := filepath.Join(dir, p.manifestLabel(), inventoryVersion)
		if err := os.MkdirAll(versionDir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(versionDir, "metadata.yaml"), metadata, 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(versionDir, components), nil, 0o644); err != nil {
			return "", err
		}
		fmt.Fprintf(&entries, "- name: %s\n  type: %s\n  url: file://%s\n", p.name, p.kind, filepath.Join(versionDir, components))
	}
	return entries.String(), nil
}

// StartInstalledProvider plays the kubelet and cert-manager for the provider clusterctl
// installed in a management cluster: it reads the Deployment, the Certificate and the webhook
// configurations clusterctl applied (by clusterctl's provider label), points the webhooks at the
// manager's loopback port with a certificate of the bed's, and runs the manager binary with the
// Deployment's command, arguments and environment as its ServiceAccount. After `clusterctl
// upgrade` it is called again, as a Deployment's new pod would start: the running manager is
// stopped first. Once the manager is ready, the Deployment is marked Available.
func (m *Management) StartInstalledProvider(ctx context.Context, o ProviderOptions) error {
	if m.Provider != nil {
		if err := m.Provider.cleanup(); err != nil {
			return err
		}
		m.Provider = nil
	}
	work, err := os.MkdirTemp("", "capi-harvester-manager-")
	if err != nil {
		return err
	}
	p := &Provider{mgmt: m.Env.Client, binary: o.Binary, workDir: work, LogFile: o.LogFile}
	if p.LogFile == "" {
		p.LogFile = filepath.Join(work, "manager.log")
	}
	objects, err := installedObjects(ctx, m.Env.Client)
	if err == nil {
		err = p.prepare(objects)
	}
	if err == nil {
		p.MetricsAddr = containerFlag(p.Container.Args, "--diagnostics-address")
		for _, obj := range objects {
			if strings.HasSuffix(obj.GetKind(), "WebhookConfiguration") {
				if err = p.applyWebhookConfiguration(ctx, obj); err != nil {
					break
				}
			}
		}
	}
	if err == nil {
		err = p.finish(ctx, m.Env, o)
	}
	if err == nil {
		err = p.Start(ctx)
	}
	if err == nil {
		// Its pod is ready: the Deployment controller would report the Deployment Available,
		// which the Cluster API Operator reads as the provider's readiness.
		err = MarkDeploymentAvailable(ctx, m.Env.Client, p.deployment.Namespace, p.deployment.Name)
	}
	if err != nil {
		return errors.Join(err, p.cleanup())
	}
	p.keepWebhooksRouted(ctx)
	m.Provider = p
	return nil
}

// keepWebhooksRouted plays the cluster's Service routing for the installed provider's webhooks
// until the provider stops: an installer that applies its components again (the Cluster API
// Operator does on its reconciles) points them back at the webhook Service, which nothing routes
// here, so the bed points them at the manager's loopback port again, as it did at the start.
func (p *Provider) keepWebhooksRouted(ctx context.Context) {
	routeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	// Stopping waits for the loop to end: an apply of its own after the next manager's would
	// point the webhooks at a port nothing serves.
	p.stopRouting = func() { cancel(); <-done }
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(routeCtx, 250*time.Millisecond, false, func(ctx context.Context) (bool, error) {
			objects, err := providerObjects(ctx, p.mgmt, webhookConfigurationKinds...)
			if err != nil {
				return false, nil // tried again on the next tick
			}
			for _, obj := range objects {
				webhooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
				for _, w := range webhooks {
					if service, _, _ := unstructured.NestedMap(asMap(w), "clientConfig", "service"); service != nil {
						_ = p.applyWebhookConfiguration(ctx, obj)
						break
					}
				}
			}
			return false, nil
		})
	}()
}

// installedObjects are the provider's Deployment, Certificates and webhook configurations in
// the management cluster, as clusterctl labels them.
func installedObjects(ctx context.Context, c client.Client) ([]*unstructured.Unstructured, error) {
	return providerObjects(ctx, c, append([]schema.GroupVersionKind{
		appsv1.SchemeGroupVersion.WithKind("DeploymentList"),
		{Group: "cert-manager.io", Version: "v1", Kind: "CertificateList"},
	}, webhookConfigurationKinds...)...)
}

// webhookConfigurationKinds are the lists of both kinds of webhook configuration.
var webhookConfigurationKinds = []schema.GroupVersionKind{
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfigurationList"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfigurationList"},
}

// providerObjects are the objects of the given list kinds that carry the provider's label.
func providerObjects(ctx context.Context, c client.Client, lists ...schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	for _, gvk := range lists {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(ctx, list, client.MatchingLabels{"cluster.x-k8s.io/provider": ProviderManifestLabel}); err != nil {
			return nil, fmt.Errorf("listing the provider's %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetKind(strings.TrimSuffix(gvk.Kind, "List"))
			obj.SetAPIVersion(gvk.GroupVersion().String())
			objects = append(objects, obj)
		}
	}
	return objects, nil
}

// asMap is v as a JSON object, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// containerFlag is the value of a --flag=value argument.
func containerFlag(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}
