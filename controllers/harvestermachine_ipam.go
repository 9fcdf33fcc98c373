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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/ipam"
)

// ipAddressRecheck is how soon a machine whose claim has no address looks again: the pool is
// not the provider's object (its kind belongs to whichever IPAM provider serves it, whose CRD
// may not even be installed), so no watch says when its free count changes; the claim's own
// update, which a watch does bring, is the main path.
const ipAddressRecheck = 10 * time.Second

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=inclusterippools;globalinclusterippools,verbs=get

// ipam is the IPAM service on the manager's client.
func (r *HarvesterMachineReconciler) ipam() ipam.Service { return ipam.Service{Client: r.Client} }

// reconcileIPAddresses claims the machine's static addresses (ipam.Service.Claim), writes them
// into status.ipAddresses once every claim has its address, and reports in IPAddressesReady
// where the claims stand. It returns whether every claim has its address.
func (r *HarvesterMachineReconciler) reconcileIPAddresses(ctx context.Context, s *machineScope) (bool, error) {
	hm := s.hm
	rep, err := r.ipam().Claim(ctx, hm, s.cluster.Name)
	for _, e := range rep.Events {
		r.Recorder.Eventf(hm, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
	if err != nil {
		return false, err
	}
	if rep.Ready && ipam.UsesIPPools(&hm.Spec) {
		hm.Status.IPAddresses = rep.Addresses
	}
	setIPCondition(hm, rep.Status, rep.Reason, rep.Message)
	return rep.Ready, nil
}

func setIPCondition(hm *infrav1.HarvesterMachine, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(hm, metav1.Condition{
		Type: infrav1.IPAddressesReadyCondition, Status: status, Reason: reason, Message: message,
		ObservedGeneration: hm.Generation,
	})
}
