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
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// caphvObject is a CAPHV object as the apiserver serves it, made from our reading of it.
func caphvObject(t *testing.T, kind string, obj any) *unstructured.Unstructured {
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion(ClusterGVK.GroupVersion().String())
	u.SetKind(kind)
	return u
}

// A management cluster with one provisioned CAPHV cluster: a control-plane machine and a
// worker, each with its Node, and the worker's template.
func managementWithCAPHV(t *testing.T, change func(objs map[string]client.Object)) client.Client {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, clientgoscheme.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"HarvesterCluster", "HarvesterMachine", "HarvesterMachineTemplate", "HarvesterClusterTemplate"} {
		gv := ClusterGVK.GroupVersion()
		scheme.AddKnownTypeWithName(gv.WithKind(k), &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gv.WithKind(k+"List"), &unstructured.UnstructuredList{})
	}
	hc := caphvCluster()
	hc.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "prod", UID: "cluster-uid"}}
	hc.Finalizers = []string{"harvester.infrastructure.cluster.x-k8s.io/finalizer", "example.com/keep"}
	objs := map[string]client.Object{
		"cluster": &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: ClusterGVK.Group, Kind: "HarvesterCluster", Name: "prod"}}},
		"hc":      caphvObject(t, "HarvesterCluster", hc),
		"webhook": &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: WebhookConfiguration}},
		"manager": &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: ManagerDeployment}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}},
		"template": caphvObject(t, "HarvesterMachineTemplate", func() *MachineTemplate {
			tmpl := &MachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "prod-workers"}}
			tmpl.Spec.Template.Spec = *caphvMachineSpec()
			tmpl.Spec.Template.Spec.ProviderID = ""
			return tmpl
		}()),
	}
	for _, name := range []string{"prod-cp-x2kqz", "prod-workers-7c9f8-p4r7m"} {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"}},
			Spec: clusterv1.MachineSpec{ClusterName: "prod"},
			Status: clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: name},
				Conditions: []metav1.Condition{{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionTrue, Reason: "UpToDate", LastTransitionTime: metav1.Now()}}}}
		hm := &Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: "machine-uid"}}},
			Spec: *caphvMachineSpec()}
		hm.Finalizers = []string{"harvestermachine.infrastructure.cluster.x-k8s.io"}
		hm.Annotations = map[string]string{clusterv1.TemplateClonedFromNameAnnotation: "prod-workers"}
		objs["machine/"+name], objs["hm/"+name] = m, caphvObject(t, "HarvesterMachine", hm)
	}
	if change != nil {
		change(objs)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, o := range objs {
		b = b.WithObjects(o)
	}
	return b.Build()
}

// A provisioned cluster passes; its objects read back as CAPHV wrote them.
func TestAProvisionedCAPHVClusterPassesTheCheck(t *testing.T) {
	g := NewWithT(t)
	inv, err := Read(context.Background(), managementWithCAPHV(t, nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Clusters).To(HaveLen(1))
	g.Expect(inv.Machines).To(HaveLen(2))
	g.Expect(inv.MachineTemplates).To(HaveLen(1))
	g.Expect(inv.Clusters[0].Spec.LoadBalancerConfig.Listeners).To(HaveLen(1))
	g.Expect(inv.Machines[0].Spec.Volumes[0].VolumeSize.String()).To(Equal("40Gi"))
	g.Expect(inv.MachineTemplates[0].Spec.Template.Spec.Networks).To(Equal([]string{"default/vlan10", "vlan20"}))
	g.Expect(inv.Check()).To(BeEmpty())
}

// A cluster that is deleting, rolling out, not yet provisioned or on ClusterClass is refused,
// naming the object and what to do; so is a machine whose VM this provider would not find.
func TestClustersInFlightAreRefused(t *testing.T) {
	cp := "machine/prod-cp-x2kqz"
	for name, tc := range map[string]struct {
		change func(objs map[string]client.Object)
		object string
		reason string
	}{
		"deleting": {func(objs map[string]client.Object) {
			m := objs[cp].(*clusterv1.Machine)
			m.DeletionTimestamp, m.Finalizers = &metav1.Time{Time: time.Now()}, []string{"machine.cluster.x-k8s.io"}
		}, "HarvesterMachine default/prod-cp-x2kqz", "being deleted"},
		"rolling out": {func(objs map[string]client.Object) {
			objs[cp].(*clusterv1.Machine).Status.Conditions[0].Status = metav1.ConditionFalse
		}, "HarvesterMachine default/prod-cp-x2kqz", "rolling out"},
		"no node yet": {func(objs map[string]client.Object) {
			objs[cp].(*clusterv1.Machine).Status.NodeRef = clusterv1.MachineNodeReference{}
		}, "HarvesterMachine default/prod-cp-x2kqz", "no node yet"},
		"ClusterClass": {func(objs map[string]client.Object) {
			objs["cluster"].(*clusterv1.Cluster).Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "harvester-rke2"}, Version: "v1.33.1"}
		}, "HarvesterCluster default/prod", "ClusterClass"},
		"a long machine name": {func(objs map[string]client.Object) {
			long := strings.Repeat("w", 70)
			hm := objs["hm/prod-workers-7c9f8-p4r7m"].(*unstructured.Unstructured)
			hm.SetName(long)
			hm.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: long, UID: "u"}})
			m := objs["machine/prod-workers-7c9f8-p4r7m"].(*clusterv1.Machine)
			m.Name = long
		}, "HarvesterMachine default/" + strings.Repeat("w", 70), "not the machine's name"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			inv, err := Read(context.Background(), managementWithCAPHV(t, tc.change))
			g.Expect(err).NotTo(HaveOccurred())
			refused := inv.Check()
			g.Expect(refused).To(ContainElement(And(HaveField("Object", tc.object), HaveField("Reason", ContainSubstring(tc.reason)))), "%v", refused)
			for _, r := range refused {
				g.Expect(r.Fix).NotTo(BeEmpty(), r.String())
			}
		})
	}
}
