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
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// machineScope holds what one reconcile of a HarvesterMachine works with, and writes what the
// reconcile changed of the machine when it closes (objectPatch).
type machineScope struct {
	*objectPatch

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
func (r *HarvesterMachineReconciler) newScope(before, hm *infrav1.HarvesterMachine) (*machineScope, error) {
	p, err := newObjectPatch(r.Client, before, hm, machineConditions)
	if err != nil {
		return nil, err
	}
	return &machineScope{objectPatch: p, hm: hm}, nil
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

// Close writes what the reconcile changed of the machine. Its status, conditions included, goes
// in one request when the status on the server is still the one the reconcile read (after the
// metadata and spec, so that a providerID is there before the status says provisioned):
// patch.Helper writes the conditions and the rest of the status apart, and that second round
// trip through a busy management apiserver doubled P1 in make bench (docs/performance.md).
// When the status moved on since the read, patch.Helper writes, merging the reconcile's own
// conditions onto the newest version.
func (s *machineScope) Close(ctx context.Context) error {
	if err := s.summarize(); err != nil {
		return err
	}
	if done, err := s.patchStatusOnce(ctx); done {
		return ignoreGone(err, s.hm)
	}
	return s.patch(ctx)
}

// patchStatusOnce writes the metadata and spec if they changed, then the status locked to the
// version whose status the reconcile read; done is false when the status moved on (a conflict)
// and when only the metadata or spec changed, both left to patch.Helper.
func (s *machineScope) patchStatusOnce(ctx context.Context) (done bool, err error) {
	read, hm := s.read.(*infrav1.HarvesterMachine), s.hm
	if equality.Semantic.DeepEqual(read.Status, hm.Status) {
		return false, nil
	}
	base := read
	spec := hm.DeepCopy()
	spec.Status = read.Status
	if !equality.Semantic.DeepEqual(read, spec) {
		if err := s.kube.Patch(ctx, spec, client.MergeFrom(read.DeepCopy())); err != nil {
			return true, err
		}
		if !equality.Semantic.DeepEqual(spec.Status, read.Status) {
			return false, nil
		}
		base = spec
	}
	changed := base.DeepCopy()
	changed.Status = hm.Status
	err = s.kube.Status().Patch(ctx, changed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return false, nil
	}
	return true, err
}

// writeFinalizer adds the machine's finalizer to read, the version the reconcile read, and
// returns the server's version after that write (status included).
func (r *HarvesterMachineReconciler) writeFinalizer(ctx context.Context, read *infrav1.HarvesterMachine) (*infrav1.HarvesterMachine, error) {
	written := read.DeepCopy()
	controllerutil.AddFinalizer(written, infrav1.MachineFinalizer)
	if err := r.Client.Patch(ctx, written, client.MergeFrom(read)); err != nil {
		return nil, fmt.Errorf("adding the finalizer: %w", err)
	}
	return written, nil
}
