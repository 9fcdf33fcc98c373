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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWritersNameTheManagersAnUpdateChanged(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(101, 0))
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	old := []metav1.ManagedFieldsEntry{
		{Manager: "capi", Operation: metav1.ManagedFieldsOperationUpdate, Time: &t0, FieldsV1: fields(`{"f:spec":{}}`)},
		{Manager: "capi", Subresource: "status", Time: &t0, FieldsV1: fields(`{"f:status":{"f:a":{}}}`)},
	}
	for _, tc := range []struct {
		name string
		cur  []metav1.ManagedFieldsEntry
		want string
	}{
		{"status changed later", []metav1.ManagedFieldsEntry{old[0], {Manager: "capi", Subresource: "status", Time: &t1, FieldsV1: old[1].FieldsV1}}, "capi/status"},
		{"new fields in the same second", []metav1.ManagedFieldsEntry{old[0], {Manager: "capi", Subresource: "status", Time: &t0, FieldsV1: fields(`{"f:status":{"f:b":{}}}`)}}, "capi/status"},
		{"a new manager", append(append([]metav1.ManagedFieldsEntry{}, old...), metav1.ManagedFieldsEntry{Manager: "provider", Time: &t1}), "provider"},
		{"nothing visible", old, "?"},
	} {
		if got := writers(old, tc.cur); got != tc.want {
			t.Errorf("%s: writers = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHistogramQuantilesAndDifference(t *testing.T) {
	before := histogram{count: 2, sum: 0.02, buckets: map[float64]uint64{0.01: 2, 0.1: 2, 1: 2}}
	after := histogram{count: 12, sum: 1.52, buckets: map[float64]uint64{0.01: 3, 0.1: 8, 1: 12}}
	d := after.minus(before)
	if d.count != 10 || d.sum < 1.49 || d.sum > 1.51 {
		t.Fatalf("difference: %+v", d)
	}
	// 1 in the 10 ms bucket, 5 more by 100 ms, 4 more by 1 s.
	if got := d.quantile(0.5); got != 100 {
		t.Errorf("p50 = %v ms, want 100", got)
	}
	if got := d.quantile(0.99); got != 1000 {
		t.Errorf("p99 = %v ms, want 1000", got)
	}
	if got := (histogram{}).quantile(0.5); got != 0 {
		t.Errorf("empty p50 = %v, want 0", got)
	}
}
