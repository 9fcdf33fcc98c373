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

package transport_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// The package's tests share one simulated Harvester: starting one (its apiserver, Harvester's and
// KubeVirt's programs) is most of what each test cost. Each test leaves it as it found it: its
// API up and no faults set (sharedHarvester clears them when the test ends); what a test creates
// carries names and labels of its own.
var shared struct {
	once sync.Once
	sim  *harvestersim.Harvester
	err  error
}

func sharedHarvester(t *testing.T, g Gomega) *harvestersim.Harvester {
	t.Helper()
	shared.once.Do(func() {
		shared.sim, shared.err = harvestersim.Start(context.Background(), harvestersim.DefaultOptions())
	})
	g.Expect(shared.err).NotTo(HaveOccurred())
	sim := shared.sim
	t.Cleanup(func() {
		sim.Faults.Clear()
		g.Expect(sim.StartAPI(context.Background())).To(Succeed(), "the simulated Harvester's API is left down")
	})
	return sim
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.sim != nil {
		if err := shared.sim.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the simulated Harvester:", err)
			code = 1
		}
	}
	os.Exit(code)
}
