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
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// Annotations a take-over writes on each Cluster it takes over.
const (
	// StepAnnotation names the last step done: paused, released, created, adopted, done.
	StepAnnotation = "harvester.infrastructure.cluster.x-k8s.io/takeover-step"
	// PausedAnnotation marks a Cluster the take-over paused (and so unpauses at its end); a
	// Cluster its user had paused before stays paused.
	PausedAnnotation = "harvester.infrastructure.cluster.x-k8s.io/takeover-paused"
)

// The steps StepAnnotation records.
const (
	StepPaused   = "paused"
	StepReleased = "released"
	StepCreated  = "created"
	StepAdopted  = "adopted"
	StepDone     = "done"
)

// Outcome is where a run left the management cluster.
type Outcome string

const (
	// Refused means something cannot be taken over (the refusals say what and what to do); nothing
	// was changed by this run.
	Refused Outcome = "refused"
	// Checked means everything can be taken over (a check-only run; nothing was changed).
	Checked Outcome = "checked"
	// Released means the clusters are paused, CAPHV's objects are exported and CAPHV lets go of them;
	// CAPHV's CRDs are to be replaced by this provider's, and the take-over run again.
	Released Outcome = "released"
	// Waiting means CAPHV's CRDs are gone and this provider's are not installed yet.
	Waiting Outcome = "waiting for this provider"
	// Done means the clusters are this provider's and running again.
	Done Outcome = "done"
	// Restored means the clusters are CAPHV's again.
	Restored Outcome = "restored"
)

// Options of a run.
type Options struct {
	// Dir holds the export of CAPHV's objects: written before CAPHV lets go of them, read once
	// this provider's CRDs are installed. Keep it until the run says done.
	Dir string
	// CheckOnly checks and changes nothing.
	CheckOnly bool
	// Restore gives the clusters back to CAPHV (Restore) instead, while its CRDs are installed.
	Restore bool
	// Harvester connects to the Harvester cluster of a cluster's identity Secret
	// (HarvesterFromIdentity).
	Harvester func(ctx context.Context, namespace, secret string) (client.Client, error)
	// Wait bounds each wait: CAPHV saying Paused, and the machines provisioned again at the end.
	Wait time.Duration
	// Out gets what the run does, a line a step.
	Out io.Writer
}

// CRDName is the CRD whose versions tell CAPHV's installation (v1beta1 served) from this
// provider's.
const CRDName = "harvesterclusters.infrastructure.cluster.x-k8s.io"

// Run takes a management cluster's clusters over from CAPHV, resuming where an earlier run
// stopped: while CAPHV's CRDs are installed it checks, pauses, exports and releases; once this
// provider's are, it creates this provider's objects from the export, adopts what is on
// Harvester and unpauses. It never creates or deletes anything on Harvester.
func Run(ctx context.Context, c client.Client, o Options) (Outcome, []Refusal, error) {
	if o.Wait == 0 {
		o.Wait = 5 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKey{Name: CRDName}, crd)
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(o.Out, "No HarvesterCluster CRD is installed: install this provider (clusterctl init --infrastructure harvester) and run again with the same --dir.\n")
		return Waiting, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("reading CRD %s: %w", CRDName, err)
	}
	caphvInstalled := slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == ClusterGVK.Version })
	switch {
	case o.Restore && !caphvInstalled:
		return "", nil, errors.New("--restore gives the clusters back to CAPHV only while its CRDs are installed: this provider's are, and the clusters are its own")
	case o.Restore:
		return restore(ctx, c, o)
	case caphvInstalled:
		return release(ctx, c, o)
	}
	return takeOver(ctx, c, o)
}

// release is the run while CAPHV is installed.
func release(ctx context.Context, c client.Client, o Options) (Outcome, []Refusal, error) {
	inv, err := Read(ctx, c)
	if err != nil {
		return "", nil, err
	}
	h := harvesters{connect: o.Harvester}
	refused := append(inv.Check(), h.checkVMs(ctx, inv)...)
	if len(refused) > 0 {
		return Refused, refused, nil
	}
	fmt.Fprintf(o.Out, "CAPHV has %d clusters, %d machines and %d machine templates; each can be taken over.\n", len(inv.Clusters), len(inv.Machines), len(inv.MachineTemplates))
	if o.CheckOnly {
		return Checked, nil, nil
	}

	if err := Pause(ctx, c, inv); err != nil {
		return "", nil, err
	}
	if err := recordStep(ctx, c, inv, StepPaused); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "Paused the clusters; waiting for CAPHV to say so.\n")
	var unpaused []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, o.Wait, true, func(ctx context.Context) (bool, error) {
		if inv, err = Read(ctx, c); err != nil {
			return false, err
		}
		unpaused = inv.Unpaused()
		return len(unpaused) == 0, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("CAPHV did not say Paused within %s on %v (is its manager running?): %w", o.Wait, unpaused, err)
	}
	// A rollout or a deletion may have begun before the pause took.
	if refused := append(inv.Check(), h.checkVMs(ctx, inv)...); len(refused) > 0 {
		return Refused, refused, Unpause(ctx, c, inv)
	}
	n, err := Export(ctx, c, o.Dir)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "Exported %d CAPHV objects to %s.\n", n, o.Dir)
	if err := Release(ctx, c); err != nil {
		return "", nil, err
	}
	if err := recordStep(ctx, c, inv, StepReleased); err != nil {
		return "", nil, err
	}
	// Deleted only once exported: a run resumed after this point exports what is left over the
	// files written before, so the export keeps every object.
	if err := Remove(ctx, c); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "CAPHV is stopped, and its objects are deleted from the management cluster (their export is in %s). Next: replace CAPHV with this provider, then run again with the same --dir:\n", o.Dir)
	fmt.Fprint(o.Out, "  clusterctl delete --infrastructure harvester --include-crd\n  clusterctl init --infrastructure harvester\n")
	return Released, nil, nil
}

// takeOver is the run once this provider's CRDs are installed.
func takeOver(ctx context.Context, c client.Client, o Options) (Outcome, []Refusal, error) {
	inv, err := Load(ctx, c, o.Dir)
	if err != nil {
		return "", nil, err
	}
	if len(inv.Clusters) == 0 {
		fmt.Fprintf(o.Out, "This provider is installed and %s holds no CAPHV cluster: nothing to take over.\n", o.Dir)
		return Done, nil, nil
	}
	if o.CheckOnly {
		fmt.Fprintf(o.Out, "This provider is installed; a run takes over the %d clusters exported to %s.\n", len(inv.Clusters), o.Dir)
		return Checked, nil, nil
	}
	h := harvesters{connect: o.Harvester}
	vms := map[string]*kubevirtv1.VirtualMachine{}
	shapes := map[string]*MachineVM{}
	for i := range inv.Machines {
		hm := &inv.Machines[i]
		hc := inv.clusterOf(hm)
		if hc == nil {
			continue // Translate refuses it
		}
		hv, err := h.of(ctx, hc)
		if err != nil {
			return "", nil, err
		}
		vm, shape, err := ReadVM(ctx, hv, hc.Spec.TargetNamespace, inv.adopted(hm))
		if err != nil {
			return "", nil, err
		}
		vms[key(hm)], shapes[key(hm)] = vm, shape
	}
	translated, refused := inv.Translate(shapes)
	if len(refused) > 0 {
		return Refused, refused, nil
	}
	if err := Create(ctx, c, translated); err != nil {
		return "", nil, fmt.Errorf("%w (is this provider's manager running? its webhooks check each object)", err)
	}
	if err := recordStep(ctx, c, inv, StepCreated); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "Created %d HarvesterClusters, %d HarvesterMachines and %d HarvesterMachineTemplates.\n", len(translated.Clusters), len(translated.Machines), len(translated.MachineTemplates))

	guests := map[string]naming.Guest{}
	for _, hc := range translated.Clusters {
		cluster := inv.OwnerCluster(hc)
		if cluster == nil {
			continue
		}
		g, _ := naming.GuestOf(hc, cluster.Name)
		guests[key(hc)] = g
	}
	for i := range inv.Machines {
		hm := &inv.Machines[i]
		hc := inv.clusterOf(hm)
		hv, err := h.of(ctx, hc)
		if err != nil {
			return "", nil, err
		}
		if err := AdoptMachine(ctx, hv, guests[key(hc)], vms[key(hm)], inv.adopted(hm)); err != nil {
			return "", nil, err
		}
	}
	for i := range inv.Clusters {
		hc := &inv.Clusters[i]
		hv, err := h.of(ctx, hc)
		if err != nil {
			return "", nil, err
		}
		if err := AdoptLoadBalancer(ctx, hv, guests[key(hc)], hc.Spec.TargetNamespace, LoadBalancerName(hc.Namespace, hc.Name)); err != nil {
			return "", nil, err
		}
	}
	if err := recordStep(ctx, c, inv, StepAdopted); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "Labelled %d VMs, their instances, volumes and cloud-init Secrets, and %d load balancers as this provider's.\n", len(inv.Machines), len(inv.Clusters))

	if err := Unpause(ctx, c, inv); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "Unpaused the clusters; waiting for this provider to report every machine provisioned on its VM.\n")
	var waiting []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, o.Wait, true, func(ctx context.Context) (bool, error) {
		waiting = nil
		for _, want := range translated.Machines {
			hm := &infrav1.HarvesterMachine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(want), hm); err != nil {
				return false, err
			}
			if hm.Spec.ProviderID != want.Spec.ProviderID || hm.Status.Initialization.Provisioned == nil || !*hm.Status.Initialization.Provisioned {
				waiting = append(waiting, key(hm))
			}
		}
		return len(waiting) == 0, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("machines %v not provisioned on their VMs within %s: %w", waiting, o.Wait, err)
	}
	if err := recordStep(ctx, c, inv, StepDone); err != nil {
		return "", nil, err
	}
	fmt.Fprintf(o.Out, "Done: the clusters are this provider's. Keep %s until you have checked them.\n", o.Dir)
	return Done, nil, nil
}

// adopted is what AdoptMachine and ReadVM need of a CAPHV machine.
func (inv *Inventory) adopted(hm *Machine) *AdoptedMachine {
	controlPlane := false
	if m := inv.machineOf(hm); m != nil {
		_, controlPlane = m.Labels[clusterv1.MachineControlPlaneLabel]
	}
	return &AdoptedMachine{Namespace: hm.Namespace, Name: hm.Name, ControlPlane: controlPlane, ProviderID: hm.Spec.ProviderID, Labels: hm.Labels}
}

// machineOf is the Machine that owns a CAPHV machine, or nil.
func (inv *Inventory) machineOf(hm *Machine) *clusterv1.Machine {
	for _, ref := range hm.OwnerReferences {
		if ref.Kind == "Machine" {
			return inv.CAPIMachines[hm.Namespace+"/"+ref.Name]
		}
	}
	return nil
}

// recordStep writes the step done on each Cluster taken over.
func recordStep(ctx context.Context, c client.Client, inv *Inventory, step string) error {
	for i := range inv.Clusters {
		cluster := inv.OwnerCluster(&inv.Clusters[i])
		if cluster == nil || cluster.Annotations[StepAnnotation] == step {
			continue
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[StepAnnotation] = step
		if err := c.Patch(ctx, cluster, patch); err != nil {
			return fmt.Errorf("recording step %s on Cluster %s: %w", step, key(cluster), err)
		}
	}
	return nil
}

// harvesters connects to each cluster's Harvester once.
type harvesters struct {
	connect func(ctx context.Context, namespace, secret string) (client.Client, error)
	clients map[string]client.Client
}

func (h *harvesters) of(ctx context.Context, hc *Cluster) (client.Client, error) {
	if hc == nil {
		return nil, errors.New("a machine of no cluster")
	}
	k := hc.Namespace + "/" + hc.Spec.IdentitySecret.Name
	if c, ok := h.clients[k]; ok {
		return c, nil
	}
	c, err := h.connect(ctx, hc.Namespace, hc.Spec.IdentitySecret.Name)
	if err != nil {
		return nil, fmt.Errorf("connecting to the Harvester of HarvesterCluster %s: %w", key(hc), err)
	}
	if h.clients == nil {
		h.clients = map[string]client.Client{}
	}
	h.clients[k] = c
	return c, nil
}

// checkVMs refuses each machine whose VM cannot be read or is not the one its providerID names.
func (h *harvesters) checkVMs(ctx context.Context, inv *Inventory) []Refusal {
	var out []Refusal
	for i := range inv.Machines {
		hm := &inv.Machines[i]
		hc := inv.clusterOf(hm)
		if hc == nil || hm.Spec.ProviderID == "" || inv.machineOf(hm) == nil {
			continue // Check refuses it
		}
		object := "HarvesterMachine " + key(hm)
		hv, err := h.of(ctx, hc)
		if err == nil {
			_, _, err = ReadVM(ctx, hv, hc.Spec.TargetNamespace, inv.adopted(hm))
		}
		if err != nil {
			out = append(out, Refusal{Object: object, Reason: err.Error(), Fix: "let CAPHV repair the machine, or delete it, and run again"})
		}
	}
	return out
}
