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

// Package config_test checks what `kubectl kustomize config/default` renders: the provider as
// clusterctl installs it.
package config_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

func render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	data, err := testenv.Kustomize(filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.DecodeObjects(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func TestDefaultRendersOneNamespaceAndTheManager(t *testing.T) {
	g := NewWithT(t)
	objs := render(t)

	namespaces := ofKind(objs, "Namespace")
	g.Expect(namespaces).To(HaveLen(1))
	g.Expect(namespaces[0].GetName()).To(Equal("capi-harvester-system"))

	deployments := ofKind(objs, "Deployment")
	g.Expect(deployments).To(HaveLen(1))
	d := &appsv1.Deployment{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(deployments[0].Object, d)).To(Succeed())
	g.Expect(d.Namespace).To(Equal("capi-harvester-system"))
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	manager := d.Spec.Template.Spec.Containers[0]
	g.Expect(manager.Name).To(Equal("manager"))

	// The manager runs without privileges on a read-only root filesystem.
	sc := manager.SecurityContext
	g.Expect(sc).NotTo(BeNil())
	g.Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(sc.Capabilities.Drop).To(ContainElement(BeEquivalentTo("ALL")))
	g.Expect(*d.Spec.Template.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())

	// The webhook server's certificate is mounted where the manager reads it.
	g.Expect(manager.VolumeMounts).To(ContainElement(HaveField("MountPath", "/tmp/k8s-webhook-server/serving-certs")))
}

func TestDefaultLabelsEveryObjectForClusterctl(t *testing.T) {
	g := NewWithT(t)
	for _, o := range render(t) {
		g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", "infrastructure-harvester"),
			"%s %s", o.GetKind(), o.GetName())
		if o.GetKind() == "CustomResourceDefinition" {
			g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), o.GetName())
			// Only the machine template meets the v1beta1 contract too (docs/decisions/0003).
			if o.GetName() == "harvestermachinetemplates.infrastructure.cluster.x-k8s.io" {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1alpha1"), o.GetName())
			} else {
				g.Expect(o.GetLabels()).NotTo(HaveKey("cluster.x-k8s.io/v1beta1"), o.GetName())
			}
		}
	}
}

func TestWebhooksTrustTheCertManagerCertificate(t *testing.T) {
	g := NewWithT(t)
	objs := render(t)
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		cfgs := ofKind(objs, kind)
		g.Expect(cfgs).To(HaveLen(1), kind)
		g.Expect(cfgs[0].GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", "capi-harvester-system/capi-harvester-serving-cert"))
	}
	certs := ofKind(objs, "Certificate")
	g.Expect(certs).To(HaveLen(1))
	dnsNames, _, _ := unstructured.NestedStringSlice(certs[0].Object, "spec", "dnsNames")
	g.Expect(dnsNames).To(ContainElement("capi-harvester-webhook-service.capi-harvester-system.svc"))
}

// config/management's optional webhook reaches the manager as the components install it: their
// webhook Service and namespace, the path the manager serves the check at, and the CA
// cert-manager injects from their Certificate.
func TestGuestKubeconfigWebhookPointsAtTheManager(t *testing.T) {
	g := NewWithT(t)
	objs := render(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "management", "guest-kubeconfig-webhook.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	cfg := &admissionv1.ValidatingWebhookConfiguration{}
	g.Expect(yaml.UnmarshalStrict(data, cfg)).To(Succeed())
	g.Expect(cfg.Webhooks).To(HaveLen(1))
	svc := cfg.Webhooks[0].ClientConfig.Service
	g.Expect(svc).NotTo(BeNil())
	g.Expect(*svc.Path).To(Equal(controllers.KubeconfigWebhookPath))
	var services []string
	for _, s := range ofKind(objs, "Service") {
		services = append(services, s.GetNamespace()+"/"+s.GetName())
	}
	g.Expect(services).To(ContainElement(svc.Namespace + "/" + svc.Name))
	certs := ofKind(objs, "Certificate")
	g.Expect(certs).To(HaveLen(1))
	g.Expect(cfg.Annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", certs[0].GetNamespace()+"/"+certs[0].GetName()))
}
