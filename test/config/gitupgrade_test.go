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

package config

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// docs/operations.md's kubeadm upgrade from Git, as the change a user commits to a cluster's
// file rendered from cluster-template.yaml: new HarvesterMachineTemplates (the new image) under
// new names beside the old ones, the version and the template names changed in the
// KubeadmControlPlane and the MachineDeployment, the whole file server-side applied as Fleet's
// agent applies it. Against a management cluster with CAPI's webhooks and ours, the change is
// accepted and the control plane and workers then name the new templates at the new version;
// the tempting shortcut, a new image in the existing templates, is refused (templates are
// immutable). The rollout that follows is CAPI's: test/e2e/inplace_test.go runs it from the
// commands.
func TestKubeadmUpgradeFromGitIsAccepted(t *testing.T) {
	g := NewWithT(t)
	env := managementWithProviders(t)
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ctx := context.Background()
	g.Expect(env.StartManager(ctx)).To(Succeed())

	const namespace, from, to, newImage = "git-upgrade", "v1.35.4", "v1.35.5", "default/ubuntu-24.04-kube-v1.35.5"
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	values := requiredValues(namespace)
	values["KUBERNETES_VERSION"] = from
	rendered, err := templates.Render("cluster-template.yaml", values)
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := testenv.DecodeObjects(rendered)
	g.Expect(err).NotTo(HaveOccurred())
	apply := func(objs []*unstructured.Unstructured) error {
		for _, o := range objs {
			if err := env.Client.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("fleet-agent"), client.ForceOwnership); err != nil {
				return err
			}
		}
		return nil
	}
	g.Expect(apply(objs)).To(Succeed(), "the rendered file applied as Fleet applies it")

	// The commit: each template copied under a new name with the new image, the references
	// and versions moved to it; the old templates stay in the file until the rollout is done.
	renamed := map[string]string{}
	var upgraded []*unstructured.Unstructured
	for _, o := range objs {
		o = o.DeepCopy()
		switch o.GetKind() {
		case "HarvesterMachineTemplate":
			upgraded = append(upgraded, o.DeepCopy())
			disks, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "disks")
			g.Expect(disks).NotTo(BeEmpty(), o.GetName())
			disks[0].(map[string]any)["image"] = newImage
			g.Expect(unstructured.SetNestedSlice(o.Object, disks, "spec", "template", "spec", "disks")).To(Succeed())
			renamed[o.GetName()] = o.GetName() + "-v1-35-5"
			o.SetName(renamed[o.GetName()])
		case "KubeadmControlPlane":
			g.Expect(unstructured.SetNestedField(o.Object, to, "spec", "version")).To(Succeed())
		case "MachineDeployment":
			g.Expect(unstructured.SetNestedField(o.Object, to, "spec", "template", "spec", "version")).To(Succeed())
		}
		upgraded = append(upgraded, o)
	}
	for _, o := range upgraded {
		var path []string
		switch o.GetKind() {
		case "KubeadmControlPlane":
			path = []string{"spec", "machineTemplate", "spec", "infrastructureRef", "name"}
		case "MachineDeployment":
			path = []string{"spec", "template", "spec", "infrastructureRef", "name"}
		default:
			continue
		}
		old, _, _ := unstructured.NestedString(o.Object, path...)
		g.Expect(renamed).To(HaveKey(old), "%s names a template of the file", o.GetKind())
		g.Expect(unstructured.SetNestedField(o.Object, renamed[old], path...)).To(Succeed())
	}

	// The shortcut first: a new image in the templates that exist is refused.
	var inPlace []*unstructured.Unstructured
	for _, o := range upgraded {
		if o.GetKind() != "HarvesterMachineTemplate" || renamed[o.GetName()] != "" {
			continue // not a template, or an old one
		}
		o = o.DeepCopy() // a new template, under its old name
		for old, n := range renamed {
			if n == o.GetName() {
				o.SetName(old)
			}
		}
		inPlace = append(inPlace, o)
	}
	g.Expect(inPlace).To(HaveLen(2))
	err = apply(inPlace)
	g.Expect(err).To(HaveOccurred(), "a template's image changed in place")
	g.Expect(err.Error()).To(ContainSubstring("a machine template cannot change; create a new one"))

	g.Expect(apply(upgraded)).To(Succeed(), "the upgraded file applied as Fleet applies it")
	for _, o := range upgraded {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), got)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		switch o.GetKind() {
		case "KubeadmControlPlane":
			version, _, _ := unstructured.NestedString(got.Object, "spec", "version")
			ref, _, _ := unstructured.NestedString(got.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
			g.Expect(version).To(Equal(to))
			g.Expect(ref).To(Equal("tpl-control-plane-v1-35-5"))
		case "MachineDeployment":
			version, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "version")
			ref, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "infrastructureRef", "name")
			g.Expect(version).To(Equal(to))
			g.Expect(ref).To(Equal("tpl-md-0-v1-35-5"))
		}
	}
}
