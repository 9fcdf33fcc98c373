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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// The provider's own metrics, served on the manager's metrics endpoint with controller-runtime's
// (docs/metrics.md lists them all). Durations are measured from timestamps on the objects
// (Harvester's for the VM and load balancer, KubeVirt's for the VMI's phase) to the reconcile
// that sees the milestone, so they survive a restart of the manager and are observed once:
// at the reconcile that records the milestone.
var (
	provisioningSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "capi_harvester_machine_provisioning_seconds",
		Help: "Time a machine's VM took between milestones: stage created_to_running (VM created on Harvester to its VMI running), " +
			"running_to_provisioned (VMI running to the machine provisioned: an address on the management network) and created_to_provisioned.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600},
	}, []string{"stage"})

	loadBalancerAllocationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "capi_harvester_loadbalancer_allocation_seconds",
		Help:    "Time from the creation of a cluster's control-plane load balancer on Harvester until the provider saw its address.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	})

	guestTokenRenewals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capi_harvester_guest_credential_renewals_total",
		Help: "Guest Harvester tokens issued (first issue and renewals) and written to the guest's cloud-config.",
	})

	guestTokenRenewalFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capi_harvester_guest_credential_renewal_failures_total",
		Help: "Attempts to issue or renew a guest Harvester token that failed (token request or writing the cloud-config Secret).",
	})
)

// Provisioning stages of capi_harvester_machine_provisioning_seconds.
const (
	stageCreatedToRunning     = "created_to_running"
	stageRunningToProvisioned = "running_to_provisioned"
	stageCreatedToProvisioned = "created_to_provisioned"
)

// Machine phases of capi_harvester_machines.
const (
	machinePhasePending      = "Pending"
	machinePhaseProvisioning = "Provisioning"
	machinePhaseProvisioned  = "Provisioned"
	machinePhaseDeleting     = "Deleting"
)

// registerMetrics adds the provider's metrics to controller-runtime's registry, which the
// manager's metrics endpoint serves; reader lists the HarvesterMachines for the machines-by-phase
// gauge. It is safe to call for several managers in one process (tests): the first wins.
func registerMetrics(reader client.Reader) error {
	for _, c := range []prometheus.Collector{
		provisioningSeconds, loadBalancerAllocationSeconds, guestTokenRenewals, guestTokenRenewalFailures,
		&machinePhaseCollector{reader: reader},
	} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// sinceNonNegative is the seconds from start to end, 0 if a clock skew makes it negative.
func sinceNonNegative(start, end time.Time) float64 {
	return max(end.Sub(start).Seconds(), 0)
}

// observeProvisioned records the provisioning durations of a machine that has just become
// provisioned (now) with vm and vmi.
func observeProvisioned(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, now time.Time) {
	created := vm.CreationTimestamp.Time
	provisioningSeconds.WithLabelValues(stageCreatedToProvisioned).Observe(sinceNonNegative(created, now))
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running {
			provisioningSeconds.WithLabelValues(stageCreatedToRunning).Observe(sinceNonNegative(created, t.PhaseTransitionTimestamp.Time))
			provisioningSeconds.WithLabelValues(stageRunningToProvisioned).Observe(sinceNonNegative(t.PhaseTransitionTimestamp.Time, now))
			break
		}
	}
}

// machinePhaseCollector reports capi_harvester_machines by phase, counted from the manager's
// cache of HarvesterMachines at each scrape, so it is never out of step with them.
type machinePhaseCollector struct {
	reader client.Reader
}

var machinesDesc = prometheus.NewDesc("capi_harvester_machines",
	"HarvesterMachines by phase: Pending (no VM yet), Provisioning (VM made, not provisioned), Provisioned, Deleting.",
	[]string{"phase"}, nil)

func (c *machinePhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- machinesDesc }

func (c *machinePhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &infrav1.HarvesterMachineList{}
	if err := c.reader.List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(machinesDesc, err)
		return
	}
	counts := map[string]float64{
		machinePhasePending: 0, machinePhaseProvisioning: 0, machinePhaseProvisioned: 0, machinePhaseDeleting: 0,
	}
	for i := range list.Items {
		counts[machinePhase(&list.Items[i])]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(machinesDesc, prometheus.GaugeValue, n, phase)
	}
}

func machinePhase(hm *infrav1.HarvesterMachine) string {
	switch {
	case !hm.DeletionTimestamp.IsZero():
		return machinePhaseDeleting
	case hm.Status.Initialization.Provisioned != nil && *hm.Status.Initialization.Provisioned:
		return machinePhaseProvisioned
	case hm.Status.VirtualMachine.UID != "":
		return machinePhaseProvisioning
	default:
		return machinePhasePending
	}
}
