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

package config

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// remediable is how many unhealthy machines of total a MachineHealthCheck still remediates:
// CAPI's MachineHealthCheck controller scales a percentage down (GetScaledValueFromIntOrPercent
// with roundUp false, getMaxUnhealthy in internal/controllers/machinehealthcheck), and no
// threshold means no limit.
func remediable(t *testing.T, threshold *intstr.IntOrString, total int) int {
	t.Helper()
	if threshold == nil {
		return total
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(threshold, total, false)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func decodeInto[T any](t *testing.T, u map[string]any) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every flavour, rendered with its defaults, health-checks its workers and its control plane,
// and remediates one failed worker at the default size: a threshold of 40% rounded two workers
// down to none, so a failed worker was never replaced.
func TestEveryFlavourRemediatesAFailedMachineAtItsDefaultSize(t *testing.T) {
	g := NewWithT(t)
	names, err := templates.Names()
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range names {
		if name == "clusterclass-harvester.yaml" {
			continue // with the topology flavour
		}
		file := name
		if name == "cluster-template-topology.yaml" {
			file = "clusterclass-harvester.yaml"
		}
		out, err := templates.Render(file, requiredValues("tpl"))
		g.Expect(err).NotTo(HaveOccurred(), name)
		if name == "cluster-template-topology.yaml" {
			cluster, err := templates.Render(name, requiredValues("tpl"))
			g.Expect(err).NotTo(HaveOccurred())
			out = append(append(out, []byte("\n---\n")...), cluster...)
		}
		objs, err := testenv.DecodeObjects(out)
		g.Expect(err).NotTo(HaveOccurred(), name)
		var mhcs []*clusterv1.MachineHealthCheck
		var mds []*clusterv1.MachineDeployment
		var class *clusterv1.ClusterClass
		var cluster *clusterv1.Cluster
		for _, o := range objs {
			switch o.GetKind() {
			case "MachineHealthCheck":
				mhcs = append(mhcs, decodeInto[clusterv1.MachineHealthCheck](t, o.Object))
			case "MachineDeployment":
				mds = append(mds, decodeInto[clusterv1.MachineDeployment](t, o.Object))
			case "ClusterClass":
				class = decodeInto[clusterv1.ClusterClass](t, o.Object)
			case "Cluster":
				cluster = decodeInto[clusterv1.Cluster](t, o.Object)
			}
		}
		if class != nil {
			g.Expect(class.Spec.ControlPlane.HealthCheck.IsDefined()).To(BeTrue(), "%s: the control plane's health check", name)
			g.Expect(cluster.Spec.Topology.Workers.MachineDeployments).NotTo(BeEmpty())
			for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
				var hc *clusterv1.MachineDeploymentClassHealthCheck
				for i := range class.Spec.Workers.MachineDeployments {
					if class.Spec.Workers.MachineDeployments[i].Class == md.Class {
						hc = &class.Spec.Workers.MachineDeployments[i].HealthCheck
					}
				}
				g.Expect(hc).NotTo(BeNil(), "%s: class %s", name, md.Class)
				g.Expect(hc.IsDefined()).To(BeTrue(), "%s: class %s has a health check", name, md.Class)
				g.Expect(remediable(t, hc.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo, int(*md.Replicas))).To(BeNumerically(">=", 1),
					"%s: one of %d workers is remediated", name, *md.Replicas)
			}
			continue
		}
		g.Expect(mds).NotTo(BeEmpty(), name)
		for _, md := range mds {
			var check *clusterv1.MachineHealthCheck
			for _, mhc := range mhcs {
				if mhc.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentNameLabel] == md.Name {
					check = mhc
				}
			}
			g.Expect(check).NotTo(BeNil(), "%s: a health check of MachineDeployment %s", name, md.Name)
			g.Expect(remediable(t, check.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo, int(*md.Spec.Replicas))).To(BeNumerically(">=", 1),
				"%s: one of %d workers is remediated", name, *md.Spec.Replicas)
		}
		cp := false
		for _, mhc := range mhcs {
			if v, ok := mhc.Spec.Selector.MatchLabels[clusterv1.MachineControlPlaneLabel]; ok && v == "" {
				cp = true
			}
		}
		g.Expect(cp).To(BeTrue(), "%s: a health check of the control plane", name)
	}
}
