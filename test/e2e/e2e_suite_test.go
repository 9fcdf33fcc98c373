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

// Package e2e holds the end-to-end suites: whole clusters on the simulated Harvester, with
// Cluster API's core controllers running in-process against real apiservers.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

var (
	testBed *bed.Bed
	ctx     = context.Background()
	// providerOptions are those of the bed's provider, for further management clusters.
	providerOptions bed.ProviderOptions
)

// shardOne are the files whose specs E2E_SHARD=1 runs; E2E_SHARD=2 runs the others, so that
// `make test` runs the suite as two processes (each with its own bed) on the machine's two
// cores. They are about half of the suite's time each (see out/e2e-timings-*.md). Specs of the
// two shards run at once: each uses its own loopback addresses for control-plane endpoints.
// fullOnly labels the specs only make test-full (TEST_FULL=1) runs.
const fullOnly = "full"

var shardOne = []string{
	"inplace_test.go", "clusterctl_test.go", "previouscapi_test.go", "maintenance_test.go", "move_test.go",
	"outage_test.go", "latency_test.go", "twomanagements_test.go", "restart_test.go", "machine_test.go", "takeover_test.go",
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	files := make([]string, 0, len(shardOne))
	for _, f := range shardOne {
		files = append(files, "/"+regexp.QuoteMeta(f)+"$")
	}
	switch shard := os.Getenv("E2E_SHARD"); shard {
	case "":
	case "1":
		suiteConfig.FocusFiles = append(suiteConfig.FocusFiles, files...)
	case "2":
		suiteConfig.SkipFiles = append(suiteConfig.SkipFiles, files...)
	default:
		t.Fatalf("E2E_SHARD=%q: the suite has shards 1 and 2", shard)
	}
	if !testenv.Full() {
		// make test's budget (docs/development.md): the flavours another spec covers run in
		// make test-full.
		suiteConfig.LabelFilter = "!" + fullOnly
	}
	if deadline, ok := t.Deadline(); ok {
		// Ginkgo's own limit (an hour) would end a shard on a loaded machine before go test's
		// -timeout (make test's TEST_TIMEOUT) does: the suite gets go test's, less a minute for
		// its cleanups and report.
		suiteConfig.Timeout = time.Until(deadline) - time.Minute
	}
	RunSpecs(t, "end-to-end on the simulated Harvester", suiteConfig, reporterConfig)
}

var _ = BeforeSuite(func() {
	// Sized for a loaded 2-core machine (both shards and the unit tests at once); the long steps
	// wait on their progress instead (waitProgressing).
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	opts := harvestersim.DefaultOptions()
	// The control planes' pool serves load balancers of VMs only; guest Services get pools of
	// their own in the tests that make them.
	opts.IPPools[0].GuestCluster = "none"
	var err error
	start := time.Now()
	// The provider runs as it ships: the manager binary from its image, installed from its
	// rendered components (RBAC, webhooks, arguments), as its own process.
	binary, ccmBinary, err := bed.ImageBinaries(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	providerOptions = bed.ProviderOptions{
		Binary: binary,
		// The shipped leader lease (15 s, renewed within 10 s): shorter ones were lost on a loaded
		// machine (a 6 s renewal deadline, several times a shard), each loss a restart. A fixed
		// missing image, key pair or network is seen within 2 s rather than the default 15 s.
		ExtraArgs: []string{"--reference-recheck-interval=2s"},
	}
	testBed, err = bed.Start(ctx, bed.Options{Harvester: opts, Kubeadm: true, CCMBinary: ccmBinary, Topology: true, Provider: &providerOptions})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("bed up in %s\n", time.Since(start).Round(time.Millisecond))
})

var _ = AfterSuite(func() {
	if testBed != nil {
		Expect(testBed.Stop(ctx)).To(Succeed())
	}
})

// A failed spec says whether the manager was still running, how often it ended by itself (the
// bed starts it again as the kubelet would), and shows the end of its log, which goes with the
// bed.
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() || testBed == nil || testBed.Provider == nil {
		return
	}
	if testBed.Harvester != nil {
		for _, ended := range testBed.Harvester.EndedPrograms(20) {
			GinkgoWriter.Printf("--- on the simulated Harvester, %s\n", ended)
		}
	}
	if restarts, last := testBed.Provider.Restarts(); restarts > 0 {
		GinkgoWriter.Printf("--- the manager ended by itself %d times so far (the last: %v) and was started again ---\n", restarts, last)
	}
	if exited, err := testBed.Provider.Exited(); exited {
		GinkgoWriter.Printf("--- the manager had exited (%v); the last lines of its log ---\n%s\n", err, testBed.Provider.LogTail(60))
		return
	}
	GinkgoWriter.Printf("--- the manager is running; the last lines of its log ---\n%s\n", testBed.Provider.LogTail(30))
})

// The suite's slowest specs go to E2E_TIMINGS (a markdown table), so that the time `make test`
// spends here can be read without rerunning it verbosely.
var _ = ReportAfterSuite("spec durations", func(report Report) {
	path := os.Getenv("E2E_TIMINGS")
	if path == "" {
		return
	}
	specs := make([]SpecReport, 0, len(report.SpecReports))
	for _, s := range report.SpecReports {
		// A shard's report lists the other shard's specs as skipped.
		if s.LeafNodeType == types.NodeTypeIt && s.State != types.SpecStateSkipped {
			specs = append(specs, s)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].RunTime > specs[j].RunTime })
	var b strings.Builder
	fmt.Fprintf(&b, "suite %s, %d specs\n\n| spec | state | time |\n| --- | --- | --- |\n", report.RunTime.Round(time.Second), len(specs))
	for _, s := range specs {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", s.FullText(), s.State, s.RunTime.Round(100*time.Millisecond))
	}
	Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	Expect(os.WriteFile(path, []byte(b.String()), 0o644)).To(Succeed())
})
