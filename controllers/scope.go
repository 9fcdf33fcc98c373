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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// conditionSet is what a kind's reconciler says of the conditions it writes: the ones its Ready
// summarises (all but the first may be missing: they appear once the object reaches their step)
// and the others it owns besides Ready and Paused.
type conditionSet struct {
	readyFrom []string
	others    []string
}

// owned are the conditions the reconciler writes: on a conflict with another writer, the patch
// keeps these as the reconcile set them and the others as the newest version has them.
func (s conditionSet) owned() []string {
	return append(append([]string{clusterv1.PausedCondition, clusterv1.ReadyCondition}, s.readyFrom...), s.others...)
}

var (
	clusterConditions = conditionSet{
		readyFrom: []string{infrav1.HarvesterAvailableCondition, infrav1.FailureDomainsReadyCondition,
			infrav1.LoadBalancerReadyCondition, infrav1.GuestCredentialsReadyCondition, infrav1.AddonsReadyCondition},
		others: []string{clusterv1.DeletingCondition, infrav1.IdentityExpiringSoonCondition},
	}
	machineConditions = conditionSet{
		readyFrom: []string{infrav1.VirtualMachineReadyCondition, infrav1.IPAddressesReadyCondition},
		others:    []string{infrav1.HostMaintenanceCondition, infrav1.ResourcesUpToDateCondition},
	}
)

// conditionedObject is a HarvesterCluster or a HarvesterMachine.
type conditionedObject interface {
	client.Object
	conditions.Setter
}

// objectPatch owns writing the object a reconcile works on: the scopes of both kinds embed
// it, and their Close, deferred once per reconcile, summarises Ready and writes what the
// reconcile changed with CAPI's patch.Helper (the conditions onto the newest version, keeping
// the owned ones on a conflict; then metadata and spec; then the rest of the status, so that a
// providerID is on the server before the status says provisioned).
type objectPatch struct {
	kube       client.Client
	read       conditionedObject // a copy of the version read
	obj        conditionedObject
	helper     *patch.Helper
	conditions conditionSet
}

// newObjectPatch starts the patch of obj, which the reconcile changes, from read, the version
// it read (obj itself when nothing is changed yet: read is copied here).
func newObjectPatch(c client.Client, read, obj conditionedObject, set conditionSet) (*objectPatch, error) {
	helper, err := patch.NewHelper(read, c)
	if err != nil {
		return nil, err
	}
	return &objectPatch{kube: c, read: read.DeepCopyObject().(conditionedObject), obj: obj, helper: helper, conditions: set}, nil
}

// Close writes what the reconcile changed. Once the last finalizer of a deleted object is
// gone, the apiserver deletes it, and what would follow that write finds nothing: not an error.
func (p *objectPatch) Close(ctx context.Context) error {
	if err := p.summarize(); err != nil {
		return err
	}
	return p.patch(ctx)
}

// summarize sets Ready from the conditions it summarises.
func (p *objectPatch) summarize() error {
	return conditions.SetSummaryCondition(p.obj, p.obj, clusterv1.ReadyCondition,
		conditions.ForConditionTypes(p.conditions.readyFrom),
		conditions.IgnoreTypesIfMissing(p.conditions.readyFrom[1:]),
	)
}

// patch writes with patch.Helper.
func (p *objectPatch) patch(ctx context.Context) error {
	return ignoreGone(p.helper.Patch(ctx, p.obj, patch.WithOwnedConditions{Conditions: p.conditions.owned()}), p.obj)
}

// ignoreGone drops the NotFound errors of a final patch: once a deleted object's last
// finalizer is removed, the apiserver deletes it and the status patch that follows finds
// nothing, which is the expected end, not an error to retry.
func ignoreGone(err error, obj client.Object) error {
	if err == nil || obj.GetDeletionTimestamp().IsZero() || len(obj.GetFinalizers()) > 0 {
		return err
	}
	var agg kerrors.Aggregate
	if !errors.As(err, &agg) {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return kerrors.FilterOut(agg, apierrors.IsNotFound)
}
