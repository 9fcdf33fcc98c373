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

package harvestersim_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/takeover"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// A take-over labels a running VM that another provider made, its template and its running
// instance: KubeVirt's own virt-controller and admission take the labels, and the instance
// keeps running as it was (same UID, same host, no restart asked for).
func TestKubeVirtTakesATakeOversLabelsWithoutARestart(t *testing.T) {
	g := NewWithT(t)
	v := harvestersim.SampleVM(ns, "caphv-made", "caphv-made-cloud-init")
	g.Expect(sim.Client().Create(ctx, v)).To(Succeed())
	defer deleteVM(t, v.Name)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "caphv-made-cloud-init"}}
	g.Expect(sim.Client().Create(ctx, secret)).To(Succeed())
	defer func() { g.Expect(client.IgnoreNotFound(sim.Client().Delete(ctx, secret))).To(Succeed()) }()
	key := client.ObjectKeyFromObject(v)
	running := &kubevirtv1.VirtualMachineInstance{}
	g.Eventually(func(g Gomega) {
		g.Expect(sim.Client().Get(ctx, key, running)).To(Succeed())
		g.Expect(running.Status.Phase).To(Equal(kubevirtv1.Running))
	}, settles).Should(Succeed())
	g.Expect(sim.Client().Get(ctx, key, v)).To(Succeed())

	guest := naming.Guest{Namespace: "default", Name: "prod", Mark: "0123456789abcdef"}
	m := &takeover.AdoptedMachine{Namespace: "default", Name: v.Name, ControlPlane: true, ProviderID: infrav1.ProviderIDPrefix + string(v.UID)}
	vm, _, err := takeover.ReadVM(ctx, sim.Client(), ns, m)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(takeover.AdoptMachine(ctx, sim.Client(), guest, vm, m)).To(Succeed())

	stays := func(g Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(sim.Client().Get(ctx, key, vmi)).To(Succeed())
		g.Expect(guest.Owns(vmi)).To(BeTrue(), "%v", vmi.Labels)
		g.Expect(vmi.Labels).To(HaveKeyWithValue(naming.LabelRole, naming.RoleControlPlane))
		g.Expect([]any{vmi.UID, vmi.Status.Phase, vmi.Status.NodeName}).To(Equal([]any{running.UID, kubevirtv1.Running, running.Status.NodeName}))
		got := &kubevirtv1.VirtualMachine{}
		g.Expect(sim.Client().Get(ctx, key, got)).To(Succeed())
		g.Expect(guest.Owns(got)).To(BeTrue())
		g.Expect(got.Spec.Template.ObjectMeta.Labels).To(HaveKeyWithValue(naming.LabelCluster, guest.ID()))
		for _, c := range got.Status.Conditions {
			g.Expect(c.Type == kubevirtv1.VirtualMachineRestartRequired && c.Status == corev1.ConditionTrue).To(BeFalse(), c.Message)
		}
	}
	g.Eventually(stays, settles).Should(Succeed())
	// virt-controller has seen the change: the VM's status is written after it.
	g.Consistently(stays, 10*time.Second, 500*time.Millisecond).Should(Succeed())
	g.Expect(sim.Client().Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(guest.Owns(secret)).To(BeTrue())
}
