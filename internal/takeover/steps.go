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
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// What CAPHV v0.10's release installs that keeps its objects from changing once it is stopped.
const (
	WebhookConfiguration = "caphv-validating-webhook-configuration"
	ManagerNamespace     = "caphv-system"
	ManagerDeployment    = "caphv-controller-manager"
)

// Pause pauses every Cluster on CAPHV (spec.paused), so that neither Cluster API nor CAPHV acts
// on them while they change hands, and marks it as paused by the take-over (PausedAnnotation).
// A Cluster paused already is left as it is, and so stays paused after Unpause.
func Pause(ctx context.Context, c client.Client, inv *Inventory) error {
	for _, hc := range inv.Clusters {
		cluster := inv.OwnerCluster(&hc)
		if cluster == nil || ptrBool(cluster.Spec.Paused) {
			continue
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Paused = ptr.To(true)
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[PausedAnnotation] = "true"
		if err := c.Patch(ctx, cluster, patch); err != nil {
			return fmt.Errorf("pausing Cluster %s: %w", key(cluster), err)
		}
	}
	return nil
}

// Unpause lets Cluster API and this provider act again on the Clusters the take-over paused.
func Unpause(ctx context.Context, c client.Client, inv *Inventory) error {
	for _, hc := range inv.Clusters {
		cluster := inv.OwnerCluster(&hc)
		if cluster == nil {
			continue
		}
		if _, ours := cluster.Annotations[PausedAnnotation]; !ours {
			continue
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.Paused = ptr.To(false)
		delete(cluster.Annotations, PausedAnnotation)
		if err := c.Patch(ctx, cluster, patch); err != nil {
			return fmt.Errorf("unpausing Cluster %s: %w", key(cluster), err)
		}
	}
	return nil
}

func ptrBool(b *bool) bool { return b != nil && *b }

// Unpaused lists CAPHV's objects that do not say Paused yet: CAPHV still acts on them.
func (inv *Inventory) Unpaused() []string {
	var out []string
	for _, hc := range inv.Clusters {
		if !isTrue(hc.Status.Conditions, clusterv1.PausedCondition) {
			out = append(out, "HarvesterCluster "+key(&hc))
		}
	}
	for _, hm := range inv.Machines {
		if !isTrue(hm.Status.Conditions, clusterv1.PausedCondition) {
			out = append(out, "HarvesterMachine "+key(&hm))
		}
	}
	return out
}

func isTrue(conditions []metav1.Condition, t string) bool {
	for _, c := range conditions {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// Release stops CAPHV from holding its objects: its validating webhook (which fails closed, so
// that no finalizer could be removed once its manager is gone) is deleted, its manager scaled to
// zero, and its finalizers removed from every object, which its CRDs' deletion then takes with
// them. Run again, it finds nothing left to do.
func Release(ctx context.Context, c client.Client) error {
	hook := &unstructured.Unstructured{}
	hook.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"})
	hook.SetName(WebhookConfiguration)
	if err := c.Delete(ctx, hook); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting CAPHV's webhook configuration %s: %w", WebhookConfiguration, err)
	}
	if err := scaleManager(ctx, c, 0); err != nil {
		return err
	}
	return eachObject(ctx, c, func(kind string, o *unstructured.Unstructured) error {
		kept := slices.DeleteFunc(slices.Clone(o.GetFinalizers()), func(f string) bool { return slices.Contains(Finalizers, f) })
		if len(kept) == len(o.GetFinalizers()) {
			return nil
		}
		patch := client.MergeFromWithOptions(o.DeepCopy(), client.MergeFromWithOptimisticLock{})
		o.SetFinalizers(kept)
		if err := c.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("removing CAPHV's finalizers from %s %s: %w", kind, key(o), err)
		}
		return nil
	})
}

// eachObject calls do with every object of CAPHV's kinds on the management cluster.
func eachObject(ctx context.Context, c client.Client, do func(kind string, o *unstructured.Unstructured) error) error {
	for _, gvk := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return fmt.Errorf("listing CAPHV's %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			if err := do(gvk.Kind, &list.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// scaleManager sets the replicas of CAPHV's manager; gone already, it is left so.
func scaleManager(ctx context.Context, c client.Client, replicas int) error {
	deploy := &unstructured.Unstructured{}
	deploy.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	deploy.SetNamespace(ManagerNamespace)
	deploy.SetName(ManagerDeployment)
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if err := c.Patch(ctx, deploy, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("scaling CAPHV's manager %s/%s to %d: %w", ManagerNamespace, ManagerDeployment, replicas, err)
	}
	return nil
}

// Remove deletes CAPHV's objects from the management cluster once they are exported and released
// (clusterctl deletes a provider's CRDs only when no object of them is left). The Clusters and
// Machines that name them stay, paused; nothing on Harvester is touched. Run again, it finds
// nothing to delete.
func Remove(ctx context.Context, c client.Client) error {
	return eachObject(ctx, c, func(kind string, o *unstructured.Unstructured) error {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting CAPHV's %s %s: %w", kind, key(o), err)
		}
		return nil
	})
}

// restore gives the clusters back to CAPHV before its CRDs are replaced: every exported object
// that is missing is created again as exported (its status too, so that CAPHV sees its VMs made
// and its load balancer ready, and makes neither again), CAPHV's manager is scaled back to one
// replica, and the Clusters the take-over paused are unpaused. CAPHV's validating webhook
// configuration is not restored: re-apply CAPHV's components for it.
func restore(ctx context.Context, c client.Client, o Options) (Outcome, []Refusal, error) {
	exported, err := readExport(o.Dir)
	if err != nil {
		return "", nil, err
	}
	n := 0
	for _, u := range exported {
		status, hasStatus := u.Object["status"]
		u.SetUID("")
		u.SetCreationTimestamp(metav1.Time{})
		switch err := c.Create(ctx, u); {
		case apierrors.IsAlreadyExists(err):
			continue
		case err != nil:
			return "", nil, fmt.Errorf("restoring %s %s: %w", u.GetKind(), key(u), err)
		}
		n++
		if !hasStatus || u.GetKind() == ClusterTemplateGVK.Kind || u.GetKind() == MachineTemplateGVK.Kind {
			continue
		}
		u.Object["status"] = status
		if err := c.Status().Update(ctx, u); err != nil {
			return "", nil, fmt.Errorf("restoring the status of %s %s: %w", u.GetKind(), key(u), err)
		}
	}
	if err := scaleManager(ctx, c, 1); err != nil {
		return "", nil, err
	}
	inv, err := Read(ctx, c)
	if err != nil {
		return "", nil, err
	}
	if err := Unpause(ctx, c, inv); err != nil {
		return "", nil, err
	}
	for _, cluster := range inv.CAPIClusters {
		if _, ok := cluster.Annotations[StepAnnotation]; !ok {
			continue
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		delete(cluster.Annotations, StepAnnotation)
		if err := c.Patch(ctx, cluster, patch); err != nil {
			return "", nil, err
		}
	}
	fmt.Fprintf(o.Out, "Restored %d CAPHV objects from %s, scaled CAPHV's manager up and unpaused the clusters: they are CAPHV's again. Re-apply CAPHV's components to restore its validating webhook configuration.\n", n, o.Dir)
	return Restored, nil, nil
}

// Translated is this provider's objects for an inventory, to create once CAPHV's CRDs are
// replaced by this provider's.
type Translated struct {
	Clusters         []*infrav1.HarvesterCluster
	Machines         []*infrav1.HarvesterMachine
	MachineTemplates []*infrav1.HarvesterMachineTemplate
}

// Translate makes this provider's objects of every CAPHV object in the inventory, given the
// disks and NICs of each machine's VM (by namespace/name; ReadVM). It refuses as Check does,
// and also a machine whose VM was not read.
func (inv *Inventory) Translate(vms map[string]*MachineVM) (*Translated, []Refusal) {
	out := &Translated{}
	var refused []Refusal
	for _, hc := range inv.Clusters {
		t, r := TranslateCluster(&hc)
		refused = append(refused, r...)
		if t != nil {
			t.OwnerReferences = hc.OwnerReferences
			out.Clusters = append(out.Clusters, t)
		}
	}
	for _, hm := range inv.Machines {
		object := "HarvesterMachine " + key(&hm)
		vm, ok := vms[key(&hm)]
		hc := inv.clusterOf(&hm)
		if !ok || hc == nil {
			refused = append(refused, Refusal{Object: object, Reason: "its VM was not read", Fix: "run the take-over again"})
			continue
		}
		spec, r := TranslateMachineSpec(object, hc.Spec.TargetNamespace, &hm.Spec, vm)
		refused = append(refused, r...)
		if spec != nil {
			out.Machines = append(out.Machines, &infrav1.HarvesterMachine{ObjectMeta: carried(&hm.ObjectMeta), Spec: *spec})
		}
	}
	for i := range inv.MachineTemplates {
		t, r := inv.translateTemplate(&inv.MachineTemplates[i])
		refused = append(refused, r...)
		if t != nil {
			out.MachineTemplates = append(out.MachineTemplates, t)
		}
	}
	return out, refused
}

// translateTemplate makes this provider's HarvesterMachineTemplate of CAPHV's. Its machines are
// made in the target namespace of the cluster that uses it, where CAPHV's unqualified network
// names are read: such a name is refused unless every cluster of the template's namespace has
// the same target namespace.
func (inv *Inventory) translateTemplate(t *MachineTemplate) (*infrav1.HarvesterMachineTemplate, []Refusal) {
	object := "HarvesterMachineTemplate " + key(t)
	targets := map[string]bool{}
	for _, hc := range inv.Clusters {
		if hc.Namespace == t.Namespace {
			targets[hc.Spec.TargetNamespace] = true
		}
	}
	target := ""
	for _, n := range t.Spec.Template.Spec.Networks {
		if strings.Contains(n, "/") {
			continue
		}
		if len(targets) != 1 {
			return nil, []Refusal{{Object: object, Field: "spec.template.spec.networks", Reason: fmt.Sprintf(
				"network %q has no namespace, and the clusters of namespace %s put their VMs in %d Harvester namespaces", n, t.Namespace, len(targets)),
				Fix: "write it as namespace/name on CAPHV first"}}
		}
		target = slices.Collect(maps.Keys(targets))[0]
	}
	spec, refused := TranslateMachineSpec(object, target, &t.Spec.Template.Spec, nil)
	if spec == nil {
		return nil, refused
	}
	spec.ProviderID = ""
	return &infrav1.HarvesterMachineTemplate{ObjectMeta: carried(&t.ObjectMeta),
		Spec: infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{ObjectMeta: t.Spec.Template.ObjectMeta, Spec: *spec}}}, nil
}

// carried is the metadata a translated object keeps: namespace, name, labels, annotations
// (Cluster API's cloned-from records among them) and owners (the Cluster and Machines stay, so
// their UIDs hold).
func carried(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: maps.Clone(m.Labels), Annotations: maps.Clone(m.Annotations), OwnerReferences: m.OwnerReferences}
}

// Create creates the translated objects; one that exists already (a run resumed) is left as it
// is.
func Create(ctx context.Context, c client.Client, t *Translated) error {
	var objs []client.Object
	for _, o := range t.MachineTemplates {
		objs = append(objs, o)
	}
	for _, o := range t.Clusters {
		objs = append(objs, o)
	}
	for _, o := range t.Machines {
		objs = append(objs, o)
	}
	for _, o := range objs {
		o = o.DeepCopyObject().(client.Object)
		o.SetResourceVersion("")
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, key(o), err)
		}
	}
	return nil
}
