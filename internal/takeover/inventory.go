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
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Inventory is every CAPHV object of a management cluster, and the Cluster API objects that use
// them. Deleting CAPHV's CRDs deletes all of CAPHV's objects at once, so a take-over is of the
// whole management cluster: every cluster on CAPHV, or none.
type Inventory struct {
	Clusters         []Cluster
	Machines         []Machine
	MachineTemplates []MachineTemplate
	// ClusterTemplates counts CAPHV's HarvesterClusterTemplates (ClusterClass), which are refused.
	ClusterTemplates []metav1.ObjectMeta
	// CAPIClusters and CAPIMachines by namespace/name.
	CAPIClusters map[string]*clusterv1.Cluster
	CAPIMachines map[string]*clusterv1.Machine
}

// Read lists CAPHV's objects (in their storage version, which needs no conversion webhook) and
// the Clusters and Machines that own them.
func Read(ctx context.Context, c client.Reader) (*Inventory, error) {
	inv, err := readCAPI(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := list(ctx, c, ClusterGVK, &inv.Clusters); err != nil {
		return nil, err
	}
	if err := list(ctx, c, MachineGVK, &inv.Machines); err != nil {
		return nil, err
	}
	if err := list(ctx, c, MachineTemplateGVK, &inv.MachineTemplates); err != nil {
		return nil, err
	}
	var clusterTemplates []struct {
		metav1.ObjectMeta `json:"metadata"`
	}
	if err := list(ctx, c, ClusterTemplateGVK, &clusterTemplates); err != nil {
		return nil, err
	}
	for _, t := range clusterTemplates {
		inv.ClusterTemplates = append(inv.ClusterTemplates, t.ObjectMeta)
	}
	return inv, nil
}

// readCAPI is an inventory of the Clusters and Machines of the management cluster, which use
// CAPHV's objects.
func readCAPI(ctx context.Context, c client.Reader) (*Inventory, error) {
	inv := &Inventory{CAPIClusters: map[string]*clusterv1.Cluster{}, CAPIMachines: map[string]*clusterv1.Machine{}}
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return nil, fmt.Errorf("listing Clusters: %w", err)
	}
	for i := range clusters.Items {
		inv.CAPIClusters[key(&clusters.Items[i])] = &clusters.Items[i]
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines); err != nil {
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	for i := range machines.Items {
		inv.CAPIMachines[key(&machines.Items[i])] = &machines.Items[i]
	}
	return inv, nil
}

// list reads every object of a CAPHV kind into out (a pointer to a slice of its type).
func list(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, out any) error {
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, u); err != nil {
		return fmt.Errorf("listing CAPHV's %s (%s): %w", gvk.Kind, gvk.GroupVersion(), err)
	}
	items := make([]map[string]any, 0, len(u.Items))
	for _, item := range u.Items {
		items = append(items, item.Object)
	}
	return decode(gvk.Kind, items, out)
}

// decode reads objects of a CAPHV kind, as the API server or an export gives them, into out (a
// pointer to a slice of its type).
func decode(kind string, items []map[string]any, out any) error {
	raw, err := json.Marshal(items)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("reading CAPHV's %s: %w", kind, err)
	}
	return nil
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// Check says what in the inventory cannot be taken over (nothing: it can). It reads only the
// management cluster: CheckVMs checks each machine's VM on Harvester.
func (inv *Inventory) Check() []Refusal {
	var out []Refusal
	for _, t := range inv.ClusterTemplates {
		out = append(out, Refusal{Object: "HarvesterClusterTemplate " + key(&t), Reason: "ClusterClass clusters are not taken over: the ClusterClass's patches address CAPHV's fields, which this provider's kinds do not have",
			Fix: "move those clusters to a cluster manifest, or keep CAPHV"})
	}
	for i := range inv.Clusters {
		hc := &inv.Clusters[i]
		out = append(out, inv.checkCluster(hc)...)
	}
	for i := range inv.Machines {
		out = append(out, inv.checkMachine(&inv.Machines[i])...)
	}
	for i := range inv.MachineTemplates {
		_, refused := inv.translateTemplate(&inv.MachineTemplates[i])
		out = append(out, refused...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out
}

// OwnerCluster is the Cluster a CAPHV object belongs to (its cluster-name label), or nil.
func (inv *Inventory) OwnerCluster(o metav1.Object) *clusterv1.Cluster {
	return inv.CAPIClusters[o.GetNamespace()+"/"+o.GetLabels()[clusterv1.ClusterNameLabel]]
}

func (inv *Inventory) checkCluster(hc *Cluster) []Refusal {
	r := &refusals{object: "HarvesterCluster " + key(hc)}
	cluster := inv.OwnerCluster(hc)
	switch {
	case cluster == nil:
		r.add("metadata.labels", "no Cluster owns it", "delete it, or keep CAPHV")
	case !cluster.DeletionTimestamp.IsZero() || !hc.DeletionTimestamp.IsZero():
		r.add("", "the cluster is being deleted", "wait until it is gone")
	case cluster.Spec.Topology.IsDefined():
		r.add("", fmt.Sprintf("Cluster %s uses ClusterClass %s", key(cluster), cluster.Spec.Topology.ClassRef.Name), "move it to a cluster manifest, or keep CAPHV")
	case cluster.Spec.InfrastructureRef.Kind != ClusterGVK.Kind || cluster.Spec.InfrastructureRef.Name != hc.Name:
		r.add("", fmt.Sprintf("Cluster %s's infrastructure is %s %s", key(cluster), cluster.Spec.InfrastructureRef.Kind, cluster.Spec.InfrastructureRef.Name), "delete the HarvesterCluster no Cluster uses")
	}
	_, refused := TranslateCluster(hc)
	return append(r.list, refused...)
}

func (inv *Inventory) checkMachine(hm *Machine) []Refusal {
	r := &refusals{object: "HarvesterMachine " + key(hm)}
	var m *clusterv1.Machine
	for _, ref := range hm.OwnerReferences {
		if ref.Kind == "Machine" {
			m = inv.CAPIMachines[hm.Namespace+"/"+ref.Name]
		}
	}
	switch {
	case m == nil:
		r.add("metadata.ownerReferences", "no Machine owns it", "wait for Cluster API to finish making it, or delete it")
	case !m.DeletionTimestamp.IsZero() || !hm.DeletionTimestamp.IsZero():
		r.add("", fmt.Sprintf("Machine %s is being deleted", key(m)), "wait until it is gone")
	case m.Status.NodeRef.Name == "" || hm.Spec.ProviderID == "":
		r.add("status.nodeRef", fmt.Sprintf("Machine %s has no node yet", key(m)), "wait until it is provisioned, or delete it")
	case isFalse(m.Status.Conditions, clusterv1.MachineUpToDateCondition):
		r.add("", fmt.Sprintf("Machine %s is not up to date: its control plane or MachineDeployment is rolling out", key(m)), "wait for the rollout to finish")
	}
	// CAPHV names the VM after the machine (cut to 63 characters); this provider after the
	// machine when its name is a DNS label, which every name up to 63 characters that
	// Kubernetes accepts for a VM is.
	if msgs := validation.IsDNS1123Label(hm.Name); len(msgs) > 0 {
		r.add("metadata.name", "its VM's name is not the machine's name (longer than 63 characters, or not a DNS label), so this provider would not find it", "replace the machine with one of a shorter name, or keep CAPHV")
	}
	hc := inv.clusterOf(hm)
	if hc == nil {
		r.add("metadata.labels", "no HarvesterCluster of its cluster", "keep CAPHV")
		return r.list
	}
	_, refused := TranslateMachineSpec(r.object, hc.Spec.TargetNamespace, &hm.Spec, nil)
	return append(r.list, refused...)
}

// clusterOf is the CAPHV HarvesterCluster of a machine's cluster.
func (inv *Inventory) clusterOf(hm *Machine) *Cluster {
	cluster := inv.OwnerCluster(hm)
	if cluster == nil {
		return nil
	}
	for i := range inv.Clusters {
		if hc := &inv.Clusters[i]; hc.Namespace == cluster.Namespace && hc.Name == cluster.Spec.InfrastructureRef.Name {
			return hc
		}
	}
	return nil
}

func isFalse(conditions []metav1.Condition, t string) bool {
	for _, c := range conditions {
		if c.Type == t {
			return c.Status == metav1.ConditionFalse
		}
	}
	return false
}
