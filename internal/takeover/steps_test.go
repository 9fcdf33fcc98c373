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

package takeover

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// Pausing pauses each Cluster on CAPHV once; the inventory says which CAPHV objects do not say
// Paused yet; unpausing undoes it, and only it: a Cluster its user had paused stays paused.
func TestPauseAndUnpause(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := managementWithCAPHV(t, func(objs map[string]client.Object) {
		other := caphvCluster()
		other.Name, other.UID = "held", "held-uid"
		other.Labels = map[string]string{clusterv1.ClusterNameLabel: "held"}
		objs["held"] = caphvObject(t, "HarvesterCluster", other)
		objs["held-cluster"] = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held"},
			Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	})
	inv, err := Read(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Unpaused()).To(ConsistOf("HarvesterCluster default/held", "HarvesterCluster default/prod", "HarvesterMachine default/prod-cp-x2kqz", "HarvesterMachine default/prod-workers-7c9f8-p4r7m"))
	for range 2 {
		g.Expect(Pause(ctx, c, inv)).To(Succeed())
	}
	cluster := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod"}, cluster)).To(Succeed())
	g.Expect(*cluster.Spec.Paused).To(BeTrue())
	inv, err = Read(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Unpause(ctx, c, inv)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod"}, cluster)).To(Succeed())
	g.Expect(*cluster.Spec.Paused).To(BeFalse())
	g.Expect(cluster.Annotations).NotTo(HaveKey(PausedAnnotation))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "held"}, cluster)).To(Succeed())
	g.Expect(*cluster.Spec.Paused).To(BeTrue(), "paused by its user before the take-over")
}

// An export holds every CAPHV object as read, and loads back into the same inventory once
// CAPHV's objects are removed (the Clusters and Machines are read live), also after an export
// run again once they are gone; loading a directory with something else in it fails.
func TestAnExportLoadsBackAsRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := managementWithCAPHV(t, nil)
	read, err := Read(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	for range 2 {
		n, err := Export(ctx, c, dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(4))
	}
	g.Expect(filepath.Join(dir, "default", "HarvesterMachine-prod-cp-x2kqz.yaml")).To(BeARegularFile())
	loaded, err := Load(ctx, c, dir)
	g.Expect(err).NotTo(HaveOccurred())
	// As read but for the resource version, which an export leaves out.
	for i := range read.Clusters {
		read.Clusters[i].ResourceVersion = ""
	}
	for i := range read.Machines {
		read.Machines[i].ResourceVersion = ""
	}
	for i := range read.MachineTemplates {
		read.MachineTemplates[i].ResourceVersion = ""
	}
	g.Expect(loaded).To(Equal(read))

	g.Expect(Release(ctx, c)).To(Succeed())
	g.Expect(Remove(ctx, c)).To(Succeed())
	left, err := Read(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left.Machines).To(BeEmpty())
	g.Expect(left.Clusters).To(ConsistOf(HaveField("DeletionTimestamp", Not(BeNil()))), "held by another's finalizer")
	_, err = Export(ctx, c, dir)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := Load(ctx, c, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(read), "an export after the removal keeps what was exported before, not a deleting copy")

	empty, err := Load(ctx, c, filepath.Join(dir, "missing"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(empty.Clusters).To(BeEmpty())

	g.Expect(os.WriteFile(filepath.Join(dir, "default", "other.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o600)).To(Succeed())
	_, err = Load(ctx, c, dir)
	g.Expect(err).To(MatchError(ContainSubstring("is not a CAPHV object")))
}

// Releasing CAPHV deletes its fail-closed webhook, scales its manager to zero and removes its
// finalizers (current and legacy), keeping others'; run again, it succeeds with nothing to do,
// also once CAPHV's installation is gone.
func TestReleaseLetsGoOfCAPHVsObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := managementWithCAPHV(t, nil)
	for range 2 {
		g.Expect(Release(ctx, c)).To(Succeed())
	}
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: WebhookConfiguration}, &admissionregistrationv1.ValidatingWebhookConfiguration{}))).To(BeTrue())
	deploy := &appsv1.Deployment{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: ManagerDeployment}, deploy)).To(Succeed())
	g.Expect(*deploy.Spec.Replicas).To(BeZero())
	for kind, name := range map[string]string{"HarvesterCluster": "prod", "HarvesterMachine": "prod-cp-x2kqz"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ClusterGVK.GroupVersion().WithKind(kind))
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, u)).To(Succeed())
		g.Expect(u.GetFinalizers()).NotTo(ContainElements(Finalizers), kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ClusterGVK)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod"}, u)).To(Succeed())
	g.Expect(u.GetFinalizers()).To(Equal([]string{"example.com/keep"}))

	g.Expect(c.Delete(ctx, deploy)).To(Succeed())
	g.Expect(Release(ctx, c)).To(Succeed())
}

// The translated objects keep what Cluster API relies on (names, owners, labels, the template a
// machine was cloned from) and are created once: a resumed run leaves them as they are.
func TestTranslatedObjectsAreCreatedOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := managementWithCAPHV(t, nil)
	inv, err := Read(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	shape := &MachineVM{Disks: []string{"disk-0", "disk-1"}, NICs: []string{"nic-1", "nic-2"}}
	_, refused := inv.Translate(map[string]*MachineVM{"default/prod-cp-x2kqz": shape})
	g.Expect(refused).To(ConsistOf(HaveField("Object", "HarvesterMachine default/prod-workers-7c9f8-p4r7m")), "a machine whose VM was not read")

	translated, refused := inv.Translate(map[string]*MachineVM{"default/prod-cp-x2kqz": shape, "default/prod-workers-7c9f8-p4r7m": shape})
	g.Expect(refused).To(BeEmpty())
	for range 2 {
		g.Expect(Create(ctx, c, translated)).To(Succeed())
	}
	hc := &infrav1.HarvesterCluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod"}, hc)).To(Succeed())
	g.Expect(hc.OwnerReferences).To(ConsistOf(HaveField("Kind", "Cluster")))
	g.Expect(hc.Annotations).To(HaveKeyWithValue(infrav1.LoadBalancerAnnotation, "default-prod-lb"))
	hm := &infrav1.HarvesterMachine{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod-cp-x2kqz"}, hm)).To(Succeed())
	g.Expect(hm.OwnerReferences).To(ConsistOf(HaveField("Kind", "Machine")))
	g.Expect(hm.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "prod"))
	g.Expect(hm.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, "prod-workers"))
	g.Expect(hm.Spec.ProviderID).To(Equal("harvester://0b7e0c4e-1111-4222-8333-444455556666"))
	g.Expect(hm.Finalizers).To(BeEmpty(), "the provider adds its own when it first reconciles")
	tmpl := &infrav1.HarvesterMachineTemplate{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "prod-workers"}, tmpl)).To(Succeed())
	g.Expect(tmpl.Spec.Template.Spec.ProviderID).To(BeEmpty())
	g.Expect(tmpl.Spec.Template.Spec.Networks[1].NetworkName).To(Equal("guests/vlan20"))
}

// A template's unqualified network is read in the target namespace of the clusters that use it:
// refused when the clusters of its namespace put their VMs in different ones.
func TestATemplatesBareNetworkNeedsOneTargetNamespace(t *testing.T) {
	g := NewWithT(t)
	c := managementWithCAPHV(t, func(objs map[string]client.Object) {
		other := caphvCluster()
		other.Name, other.UID, other.Spec.TargetNamespace = "staging", "other-uid", "staging-guests"
		objs["other"] = caphvObject(t, "HarvesterCluster", other)
	})
	inv, err := Read(context.Background(), c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Check()).To(ContainElement(And(HaveField("Object", "HarvesterMachineTemplate default/prod-workers"),
		HaveField("Field", "spec.template.spec.networks"), HaveField("Reason", ContainSubstring(`"vlan20"`)))))
}
