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
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentilesByNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := percentiles(ds)
	want := Percentiles{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}
	if got != want {
		t.Fatalf("percentiles: got %+v, want %+v", got, want)
	}
	if one := percentiles([]time.Duration{7 * time.Millisecond}); one.P50 != 7 || one.P99 != 7 {
		t.Fatalf("one sample: got %+v", one)
	}
	if none := percentiles(nil); none != (Percentiles{}) {
		t.Fatalf("no sample: got %+v", none)
	}
}

// The report's files are what docs/performance.md and hack/benchplot read: JSON that round-trips
// and a table with every figure's row.
func TestReportWritesJSONAndMarkdown(t *testing.T) {
	r := &Report{
		Machines: 4, Clusters: 2,
		P1: Latency{Provider: Percentiles{N: 4, P50: 300}, Baseline: &Percentiles{N: 4, P50: 10}},
		P3: APICost{
			ServerPerMachine:   perMachine(map[string]int{"create virtualmachines": 4, "get virtualmachines": 8}, 4, verbOf),
			BaselinePerMachine: perMachine(map[string]int{"create virtualmachines": 4}, 4, verbOf),
		},
		Series: Series{ProviderProvisioned: offsets(time.Unix(0, 0), []time.Time{time.Unix(2, 0), time.Unix(1, 0)})},
	}
	dir := t.TempDir()
	md, err := r.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| P1 p50 | 300 ms | 10 ms | 30.00 |", "| P3 Harvester writes per machine lifecycle (server side) | 1.0 | 1.0 | 1.00 |", "| get | 0.00 | 2.00 | 0.00 |", "P4 CCM"} {
		if !strings.Contains(md, row) {
			t.Errorf("the table lacks %q:\n%s", row, md)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Series.ProviderProvisioned; len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("series: got %v, want sorted offsets [1 2]", got)
	}
}
