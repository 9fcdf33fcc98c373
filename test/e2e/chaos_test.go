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

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// The fault scenarios run bounded in `make test`; `make chaos` runs them at full size
// (CHAOS_MACHINES, CHAOS_KILLS, CHAOS_OUTAGE) and writes their table to CHAOS_REPORT.

// chaosInt is an environment variable's number, or def.
func chaosInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// chaosRow is one scenario's outcome.
type chaosRow struct {
	scenario             string
	runs, machines       int
	duplicates, leaks    int
	recovery             time.Duration
	recoveryMeasuredFrom string
}

var chaosReport struct {
	mu   sync.Mutex
	rows []chaosRow
}

func recordChaos(r chaosRow) {
	chaosReport.mu.Lock()
	defer chaosReport.mu.Unlock()
	chaosReport.rows = append(chaosReport.rows, r)
}

// chaosTable is the report as a markdown table.
func chaosTable() string {
	chaosReport.mu.Lock()
	defer chaosReport.mu.Unlock()
	if len(chaosReport.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| scenario | runs | machines | duplicate VMs | leaks | recovery time |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range chaosReport.rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s (%s) |\n", r.scenario, r.runs, r.machines, r.duplicates, r.leaks,
			r.recovery.Round(100*time.Millisecond), r.recoveryMeasuredFrom)
	}
	return b.String()
}

var _ = ReportAfterSuite("chaos table", func(Report) {
	table := chaosTable()
	if table == "" {
		return
	}
	GinkgoWriter.Printf("\n%s", table)
	if path := os.Getenv("CHAOS_REPORT"); path != "" {
		Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		Expect(os.WriteFile(path, []byte(table), 0o644)).To(Succeed())
	}
})

// duplicateVMs counts the VMs in a namespace beyond one per machine (the machine annotation).
func duplicateVMs(namespace string) int {
	vms := &kubevirtv1.VirtualMachineList{}
	Expect(harvesterClient().List(ctx, vms, client.InNamespace(namespace))).To(Succeed())
	perMachine := map[string]int{}
	dups := 0
	for _, vm := range vms.Items {
		m := vm.Annotations[naming.AnnotationMachine]
		if m == "" {
			m = vm.Name
		}
		perMachine[m]++
		if perMachine[m] > 1 {
			dups++
		}
	}
	return dups
}
