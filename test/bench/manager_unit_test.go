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

package bench

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestReconcileLinesCountObjectsByController(t *testing.T) {
	g := NewWithT(t)
	log := []byte(`I1123 21:44:30.100000   4242 controller.go:285] "Reconciling" controller="harvestermachine" controllerGroup="infrastructure.cluster.x-k8s.io" controllerKind="HarvesterMachine" HarvesterMachine="label-0/bench-a" namespace="label-0" name="bench-a" reconcileID="1"
I1123 21:44:30.200000   4242 controller.go:285] "Reconciling" controller="harvestermachine" controllerGroup="infrastructure.cluster.x-k8s.io" controllerKind="HarvesterMachine" HarvesterMachine="label-0/bench-a" namespace="label-0" name="bench-a" reconcileID="2"
I1123 21:44:30.300000   4242 controller.go:285] "Reconciling" controller="harvestercluster" controllerGroup="infrastructure.cluster.x-k8s.io" controllerKind="HarvesterCluster" HarvesterCluster="label-0/bench" namespace="label-0" name="bench" reconcileID="3"
I1123 21:44:30.400000   4242 controller.go:285] "Reconciling" controller="clustercache" reconcileID="4"
I1123 21:44:30.500000   4242 machine.go:10] "Machine provisioned" controller="harvestermachine" namespace="label-0" name="bench-a"
`)
	g.Expect(reconcileLines(log)).To(Equal(map[string]int{
		"harvestermachine label-0/bench-a": 2,
		"harvestercluster label-0/bench":   1,
	}))
}

func TestBootDelayIsReadAndChecked(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("BENCH_BOOT_DELAY", "") // unset: the default
	s, err := readSettings()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.bootDelay).To(Equal(defaultBootDelay))

	t.Setenv("BENCH_BOOT_DELAY", "0")
	s, err = readSettings()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.bootDelay).To(BeZero())

	t.Setenv("BENCH_BOOT_DELAY", "500ms")
	s, err = readSettings()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.bootDelay).To(Equal(500 * time.Millisecond))

	for _, bad := range []string{"-1s", "soon"} {
		t.Setenv("BENCH_BOOT_DELAY", bad)
		_, err = readSettings()
		g.Expect(err).To(HaveOccurred(), bad)
	}
}
