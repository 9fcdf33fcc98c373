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

package integration

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// settles bounds a wait for the bed's controllers (the provider's, CAPI's, KubeVirt's, the
// simulated Harvester's) to act: a minute holds on an idle machine, not with make test's other
// processes and a benchmark on two cores.
const settles = 3 * time.Minute

// testContext is a test's context: it ends at the test binary's deadline (go test -timeout),
// less a minute for the cleanups, not at a fixed time a loaded machine can pass.
func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	if deadline, ok := t.Deadline(); ok {
		return context.WithDeadline(context.Background(), deadline.Add(-time.Minute))
	}
	return context.WithCancel(context.Background())
}

// The package's tests share one bed: starting the whole bed is most of each test's time and
// CPU (six beds took about 300 of the package's 340 s alone). Each test keeps to its own
// management namespace, its own hosts and, where it changes a namespace's quota, its own
// Harvester namespace, and restores what else it changes on Harvester.
var shared struct {
	once   sync.Once
	bed    *bed.Bed
	err    error
	cancel context.CancelFunc
}

// TestMain stops the shared bed once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.bed != nil {
		if err := shared.bed.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the bed:", err)
			code = 1
		}
	}
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(code)
}

// startBed returns the package's bed (management with CAPI, a simulated Harvester, guests,
// the provider's controllers in-process), started by the first test that asks. It runs until
// TestMain stops it, or until go test's deadline less a minute.
func startBed(t *testing.T) *bed.Bed {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := testContext(t)
		shared.cancel = cancel
		shared.bed, shared.err = bed.Start(ctx, bed.Options{SetupManagement: func(ctx context.Context, tb *bed.Bed) error {
			return controllers.Setup(ctx, tb.Management.Manager, controllers.Options{
				ClusterConcurrency: 2, MachineConcurrency: 2, HarvesterQPS: 100, HarvesterBurst: 200, SkipNameValidation: true,
			})
		}})
	})
	if shared.err != nil {
		t.Fatalf("starting the bed: %v", shared.err)
	}
	return shared.bed
}

// createMachinePool creates a HarvesterMachineTemplate of spec and a bare MachineDeployment of one
// machine from it in namespace ns, and returns a reader of that one HarvesterMachine.
func createMachinePool(ctx context.Context, g Gomega, c client.Client, ns, name string, spec infrav1.HarvesterMachineSpec) func(Gomega) *infrav1.HarvesterMachine {
	g.Expect(c.Create(ctx, &infrav1.HarvesterMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: spec}},
	})).To(Succeed())
	g.Expect(c.Create(ctx, bed.BareMachineDeployment(ns, name, 1))).To(Succeed())
	return func(g Gomega) *infrav1.HarvesterMachine {
		hms := &infrav1.HarvesterMachineList{}
		g.Expect(c.List(ctx, hms, client.InNamespace(ns))).To(Succeed())
		g.Expect(hms.Items).To(HaveLen(1))
		return &hms.Items[0]
	}
}
