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

package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// InPlaceUpdates is Cluster API's in-place update extension for HarvesterMachines (Runtime SDK
// hooks CanUpdateMachine, CanUpdateMachineSet and UpdateMachine; docs/in-place-updates.md).
// Asked whether a change can be made in place, it answers with a patch of what it can make:
// the cpu and memory of a machine made with maxCPU and maxMemory, growing within them, and its
// image disks' sizes, growing (infrav1.InPlaceUpdate); Cluster API rolls out new machines for anything the patch leaves
// different (an image, a network, a Kubernetes version, the bootstrap config). Asked to make
// it, it finds the change already written into the HarvesterMachine by Cluster API and reports
// how far the machine's reconcile is (its ResourcesUpToDate condition): the reconcile does the
// work, the extension only reports.
type InPlaceUpdates struct {
	// Reader reads HarvesterMachines from the API server (not a cache: the hook must not call
	// an update done on a copy older than the change).
	Reader client.Reader
}

// InPlaceUpdateRetry is how soon Cluster API asks again while a machine's resize goes on.
const InPlaceUpdateRetry = 5

// NewInPlaceUpdateServer is a webhook server that also serves the in-place update extension's
// hooks (and the Runtime SDK's discovery), for the manager to use as its webhook server: one
// port and certificate serve both.
func NewInPlaceUpdateServer(opts server.Options, reader client.Reader) (*server.Server, error) {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return nil, err
	}
	opts.Catalog = catalog
	srv, err := server.New(opts)
	if err != nil {
		return nil, err
	}
	h := &InPlaceUpdates{Reader: reader}
	for _, e := range []server.ExtensionHandler{
		{Hook: runtimehooksv1.CanUpdateMachine, Name: "can-update-machine", HandlerFunc: h.CanUpdateMachine},
		{Hook: runtimehooksv1.CanUpdateMachineSet, Name: "can-update-machineset", HandlerFunc: h.CanUpdateMachineSet},
		{Hook: runtimehooksv1.UpdateMachine, Name: "update-machine", HandlerFunc: h.UpdateMachine},
	} {
		if err := srv.AddExtensionHandler(e); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

// CanUpdateMachineSet answers for a MachineDeployment's move from one HarvesterMachineTemplate
// to another.
func (h *InPlaceUpdates) CanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	ms := &req.Current.MachineSet
	if why := h.cannotMigrate(ctx, ms.Namespace, ms.Spec.ClusterName, ms.Spec.Template.Spec.FailureDomain); why != "" {
		resp.Message = why
		return
	}
	p, why := inPlacePatch(req.Current.InfrastructureMachineTemplate, req.Desired.InfrastructureMachineTemplate, "HarvesterMachineTemplate", "spec", "template", "spec")
	resp.InfrastructureMachineTemplatePatch = p
	resp.Message = why
	ctrl.LoggerFrom(ctx).V(2).Info("in-place update asked for a MachineSet", "machineSet", client.ObjectKeyFromObject(&req.Current.MachineSet), "patch", string(p.Patch), "why", why)
}

// CanUpdateMachine answers for a control-plane machine (KubeadmControlPlane asks).
func (h *InPlaceUpdates) CanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	m := &req.Current.Machine
	if why := h.cannotMigrate(ctx, m.Namespace, m.Spec.ClusterName, m.Spec.FailureDomain); why != "" {
		resp.Message = why
		return
	}
	p, why := inPlacePatch(req.Current.InfrastructureMachine, req.Desired.InfrastructureMachine, "HarvesterMachine", "spec")
	resp.InfrastructureMachinePatch = p
	resp.Message = why
	ctrl.LoggerFrom(ctx).V(2).Info("in-place update asked for a Machine", "machine", client.ObjectKeyFromObject(&req.Current.Machine), "patch", string(p.Patch), "why", why)
}

// UpdateMachine reports the machine's resize: done once its reconcile saw the changed spec and
// the running VM has it, in progress while KubeVirt works, failed (Cluster API then marks the
// Machine InPlaceUpdateFailed and asks again later) when KubeVirt or Harvester cannot make it.
func (h *InPlaceUpdates) UpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	desired, ok := decodeHarvester(req.Desired.InfrastructureMachine, "HarvesterMachine")
	if !ok {
		resp.Message = "not a HarvesterMachine: nothing to do"
		return
	}
	hm := &infrav1.HarvesterMachine{}
	key := client.ObjectKey{Namespace: desired.Metadata.Namespace, Name: desired.Metadata.Name}
	if err := h.Reader.Get(ctx, key, hm); err != nil {
		resp.Status = runtimehooksv1.ResponseStatusFailure
		resp.Message = fmt.Sprintf("reading HarvesterMachine %s: %v", key, err)
		if apierrors.IsNotFound(err) {
			resp.Message = fmt.Sprintf("HarvesterMachine %s is gone", key)
		}
		return
	}
	var spec infrav1.HarvesterMachineSpec
	if err := json.Unmarshal(desired.Spec, &spec); err != nil || hm.Spec.CPU != spec.CPU || !hm.Spec.Memory.Equal(spec.Memory) || !sameDiskSizes(hm.Spec.Disks, spec.Disks) {
		// The copy read is older than the change Cluster API wrote (or newer: the next call sees).
		resp.RetryAfterSeconds = InPlaceUpdateRetry
		resp.Message = "waiting for the HarvesterMachine's change to be stored"
		return
	}
	c := conditions.Get(hm, infrav1.ResourcesUpToDateCondition)
	switch {
	case c == nil || c.ObservedGeneration < hm.Generation:
		// The reconcile reports on every machine being updated in place (CAPI's
		// update-in-progress annotation), also one that has nothing to resize.
		resp.RetryAfterSeconds = InPlaceUpdateRetry
		resp.Message = "waiting for the machine's reconcile to see the change"
	case c.Status == metav1.ConditionTrue:
		resp.Message = "the VM has " + harvester.SizeText(&hm.Spec)
	case c.Reason == infrav1.ResizingReason:
		resp.RetryAfterSeconds = InPlaceUpdateRetry
		resp.Message = c.Message
	default:
		resp.Status = runtimehooksv1.ResponseStatusFailure
		resp.Message = c.Reason + ": " + c.Message
	}
}

// cannotMigrate says why machines placed in failureDomain of a cluster (anywhere when "") cannot
// be resized in place ("" when they can): KubeVirt resizes a running VM through a live migration,
// and a VM pinned to a failure domain of one host, or on a Harvester of one host (the cluster's
// failure domains count their hosts), has nowhere to migrate to; its resize would wait for ever.
// Not knowing means no.
func (h *InPlaceUpdates) cannotMigrate(ctx context.Context, namespace, clusterName, failureDomain string) string {
	cluster := &clusterv1.Cluster{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, cluster); err != nil {
		return fmt.Sprintf("not in place: reading Cluster %s/%s for its failure domains: %v", namespace, clusterName, err)
	}
	if failureDomain == "" {
		// Anywhere on the Harvester cluster: its hosts are those of every domain.
		hosts := 0
		for _, fd := range cluster.Status.FailureDomains {
			n, _ := strconv.Atoi(fd.Attributes[build.FailureDomainHostsKey])
			hosts += n
		}
		if hosts > 1 {
			return ""
		}
		return "not in place: the Harvester cluster has one host (as its failure domains count them): KubeVirt resizes a running VM through a live migration, which needs another host"
	}
	for _, fd := range cluster.Status.FailureDomains {
		if fd.Name == failureDomain {
			if hosts, err := strconv.Atoi(fd.Attributes[build.FailureDomainHostsKey]); err == nil && hosts > 1 {
				return ""
			}
			return fmt.Sprintf("not in place: the machines are placed in failure domain %s, which has one Harvester host: KubeVirt resizes a running VM through a live migration, which such a VM cannot make", failureDomain)
		}
	}
	return fmt.Sprintf("not in place: failure domain %s is not one of Cluster %s/%s's", failureDomain, namespace, clusterName)
}

// sameDiskSizes says whether two disk lists have the same sizes.
func sameDiskSizes(a, b []infrav1.Disk) bool {
	return slices.EqualFunc(a, b, func(x, y infrav1.Disk) bool { return x.Size.Equal(y.Size) })
}

// harvesterObject is the part of a hook's object the extension reads.
type harvesterObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
}

// decodeHarvester reads a hook's object when it is one of the provider's of kind.
func decodeHarvester(raw runtime.RawExtension, kind string) (*harvesterObject, bool) {
	if len(raw.Raw) == 0 {
		return nil, false
	}
	var o harvesterObject
	if err := json.Unmarshal(raw.Raw, &o); err != nil {
		return nil, false
	}
	group, _, _ := strings.Cut(o.APIVersion, "/")
	return &o, group == infrav1.GroupVersion.Group && o.Kind == kind
}

// inPlacePatch is the JSON merge patch of current (a kind object whose HarvesterMachine spec is
// at specPath) that takes what desired changes in place, empty when it can take nothing, and
// why the rest cannot (for the message). The values are desired's own JSON, as Cluster API
// compares the patched object with desired field by field.
func inPlacePatch(current, desired runtime.RawExtension, kind string, specPath ...string) (runtimehooksv1.Patch, string) {
	cur, ok1 := decodeHarvester(current, kind)
	des, ok2 := decodeHarvester(desired, kind)
	if !ok1 || !ok2 {
		return runtimehooksv1.Patch{}, "not a " + kind
	}
	curSpec, _, err1 := specAt(cur.Spec, specPath[1:])
	desSpec, desRaw, err2 := specAt(des.Spec, specPath[1:])
	if err1 != nil || err2 != nil {
		return runtimehooksv1.Patch{}, fmt.Sprintf("reading the %s specs: %v", kind, firstError(err1, err2))
	}
	updated, refused := infrav1.InPlaceUpdate(curSpec, desSpec, field.NewPath(specPath[0], specPath[1:]...))
	changes := map[string]any{}
	if updated.CPU != curSpec.CPU {
		changes["cpu"] = desRaw["cpu"]
	}
	if !updated.Memory.Equal(curSpec.Memory) {
		changes["memory"] = desRaw["memory"]
	}
	if !reflect.DeepEqual(updated.Disks, curSpec.Disks) {
		changes["disks"] = desRaw["disks"] // the same disks, grown: desired's (a list is replaced whole)
	}
	why := ""
	if len(refused) > 0 {
		why = "not in place: " + refused.ToAggregate().Error()
	}
	if len(changes) == 0 {
		return runtimehooksv1.Patch{}, why
	}
	var doc any = changes
	for i := len(specPath) - 1; i >= 0; i-- {
		doc = map[string]any{specPath[i]: doc}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return runtimehooksv1.Patch{}, err.Error()
	}
	return runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: b}, why
}

// specAt reads the HarvesterMachine spec at path under spec (a template's template.spec), typed
// and as its JSON fields.
func specAt(spec json.RawMessage, path []string) (*infrav1.HarvesterMachineSpec, map[string]json.RawMessage, error) {
	for _, p := range path {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(spec, &m); err != nil {
			return nil, nil, err
		}
		spec = m[p]
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(spec, &raw); err != nil {
		return nil, nil, err
	}
	typed := &infrav1.HarvesterMachineSpec{}
	if err := json.Unmarshal(spec, typed); err != nil {
		return nil, nil, err
	}
	return typed, raw, nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
