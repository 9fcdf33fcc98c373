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
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers/internal/ownwrites"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// machineScope holds what one reconcile of a HarvesterMachine works with, and writes what the
// reconcile changed of the machine when it closes (PatchObject), as CAPA's MachineScope does.
type machineScope struct {
	// kube and apiReader are the management cluster's client and live reader; writes records the
	// scope's own writes (see ownwrites).
	kube      client.Client
	apiReader client.Reader
	writes    *ownwrites.Record[*infrav1.HarvesterMachine]
	// before is the machine as read (or as the reconcile's finalizer write left it): what
	// PatchObject compares hm with, and the version its status patch is locked to.
	before *infrav1.HarvesterMachine

	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	hm      *infrav1.HarvesterMachine
	hc      *infrav1.HarvesterCluster // nil when gone
	// guest names the cluster on Harvester; guestKnown is false while the HarvesterCluster
	// has not recorded its owner mark (then nothing of the cluster is on Harvester yet).
	guest      naming.Guest
	guestKnown bool
	client     *transport.Client
}

// newScope is the scope of a reconcile that read before and changes hm.
func (r *HarvesterMachineReconciler) newScope(before, hm *infrav1.HarvesterMachine) *machineScope {
	return &machineScope{kube: r.Client, apiReader: r.APIReader, writes: &r.writes, before: before, hm: hm}
}

// Close writes what the reconcile changed (PatchObject).
func (s *machineScope) Close(ctx context.Context) error {
	return s.PatchObject(ctx)
}

func (s *machineScope) userKey() string {
	return "HarvesterMachine/" + s.hm.Namespace + "/" + s.hm.Name
}

func (r *HarvesterMachineReconciler) readHarvesterCluster(ctx context.Context, s *machineScope) error {
	ref := s.cluster.Spec.InfrastructureRef
	if ref.Name == "" {
		return nil
	}
	hc := &infrav1.HarvesterCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: ref.Name}, hc); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.hc = hc
	s.guest, s.guestKnown = naming.GuestOf(hc, s.cluster.Name)
	return nil
}

// reportVM reports a failed step's reason and message on the VirtualMachineReady condition.
func (s *machineScope) reportVM(reason, message string) {
	setVMCondition(s.hm, metav1.ConditionFalse, reason, message)
}

// failureDomain returns the machine's failure domain and the host label it stands for.
func failureDomain(s *machineScope) (string, string) {
	name := s.machine.Spec.FailureDomain
	if name == "" {
		return "", ""
	}
	for _, fd := range s.hc.Status.FailureDomains {
		if fd.Name == name {
			if key := fd.Attributes[build.FailureDomainTopologyKey]; key != "" {
				return name, key
			}
		}
	}
	return name, build.LabelZone
}

// sharedNamespaces are the Harvester namespaces, besides the target namespace, whose images, key
// pairs and networks the cluster's machines (and its load balancer's network) may name: a
// HarvesterClusterIdentity's sharedNamespaces (never nil for one); nil, any, for a Secret
// identity (the tenant's own credential reaches what it is bound to).
func sharedNamespaces(ctx context.Context, c client.Client, hc *infrav1.HarvesterCluster) ([]string, error) {
	ref := hc.Spec.Identity()
	if ref.Kind != infrav1.HarvesterClusterIdentityKind {
		return nil, nil
	}
	identity := &infrav1.HarvesterClusterIdentity{}
	if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, identity); err != nil {
		return nil, err
	}
	return append([]string{}, identity.Spec.SharedNamespaces...), nil
}

func setVMCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.VirtualMachineReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}

// PatchObject writes what the reconcile changed of hm (read as before) in at most two requests:
// metadata and spec first (a finalizer is on the server before anything is made, a providerID
// before the status says provisioned, also when the manager dies between the two writes), then
// the status, conditions included, in one patch locked to a version whose status is the one
// the reconcile read: a stale read gets a conflict and never overwrites newer conditions; when
// only the metadata or spec moved on (CAPI's Machine controller's writes, or this patch's own
// first request), the status is written over the newest version at once.
// CAPI's patch.Helper writes conditions, the rest of the status and the spec apart, so that
// controllers sharing an object's conditions merge them; the provider alone writes a
// HarvesterMachine's status, and on a busy management cluster every request waits its turn
// behind --kube-api-qps (docs/performance.md).
func (s *machineScope) PatchObject(ctx context.Context) error {
	before, hm := s.before, s.hm
	if err := conditions.SetSummaryCondition(hm, hm, clusterv1.ReadyCondition,
		conditions.ForConditionTypes{infrav1.VirtualMachineReadyCondition, infrav1.IPAddressesReadyCondition},
		// Machines made before IPAddressesReady existed lack it until their next reconcile.
		conditions.IgnoreTypesIfMissing{infrav1.IPAddressesReadyCondition},
	); err != nil {
		return err
	}
	// base is the version the status patch is locked to.
	base := before.DeepCopy()
	spec := hm.DeepCopy()
	spec.Status = before.Status
	// The server's versions this patch wrote over (its reads and its own intermediate writes),
	// and its last successful write.
	var over []string
	var written *infrav1.HarvesterMachine
	defer func() {
		if written != nil {
			s.writes.Wrote(over, written)
		}
	}()
	if !equality.Semantic.DeepEqual(before, spec) {
		if err := s.kube.Patch(ctx, spec, client.MergeFrom(before.DeepCopy())); err != nil {
			return ignoreGone(err, hm)
		}
		base = spec // the server's version after the patch
		over, written = append(over, before.ResourceVersion), spec
	}
	if equality.Semantic.DeepEqual(before.Status, hm.Status) {
		return nil
	}
	err := errStatusMovedOn
	if equality.Semantic.DeepEqual(base.Status, before.Status) {
		changed := base.DeepCopy()
		changed.Status = hm.Status
		if err = s.kube.Status().Patch(ctx, changed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err == nil {
			over, written = append(over, before.ResourceVersion, base.ResourceVersion), changed
		}
	}
	if (apierrors.IsConflict(err) || errors.Is(err, errStatusMovedOn)) && s.apiReader != nil {
		latest := &infrav1.HarvesterMachine{}
		if getErr := s.apiReader.Get(ctx, client.ObjectKeyFromObject(hm), latest); getErr == nil &&
			equality.Semantic.DeepEqual(latest.Status, before.Status) {
			changed := latest.DeepCopy()
			changed.Status = hm.Status
			if err = s.kube.Status().Patch(ctx, changed, client.MergeFromWithOptions(latest, client.MergeFromWithOptimisticLock{})); err == nil {
				over, written = append(over, before.ResourceVersion, latest.ResourceVersion), changed
			}
		}
	}
	if errors.Is(err, errStatusMovedOn) {
		return apierrors.NewConflict(infrav1.GroupVersion.WithResource("harvestermachines").GroupResource(), hm.Name, err)
	}
	return ignoreGone(err, hm)
}

// errStatusMovedOn: the status on the server is no longer the one the reconcile read.
var errStatusMovedOn = errors.New("the HarvesterMachine's status changed since it was read")

// writeFinalizer adds the machine's finalizer to read, the version the reconcile read, and
// returns the server's version after that write (status included); the write is recorded as
// the reconcile's own, so that a later reconcile that reads read from a lagging cache works
// from it (see ownwrites).
func (r *HarvesterMachineReconciler) writeFinalizer(ctx context.Context, read *infrav1.HarvesterMachine) (*infrav1.HarvesterMachine, error) {
	written := read.DeepCopy()
	controllerutil.AddFinalizer(written, infrav1.MachineFinalizer)
	if err := r.Client.Patch(ctx, written, client.MergeFrom(read)); err != nil {
		return nil, fmt.Errorf("adding the finalizer: %w", err)
	}
	r.writes.Wrote([]string{read.ResourceVersion}, written)
	return written, nil
}
