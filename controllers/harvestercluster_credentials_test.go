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

package controllers

import (
	"testing"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// The templates always write spec.guestHarvesterAPI, with an empty server unless
// HARVESTER_GUEST_API_SERVER is set: an empty server means the identity's own, and through
// Rancher's proxy it is still required.
func TestGuestEndpointTakesAnEmptyServerAsUnset(t *testing.T) {
	direct, proxy := "https://10.0.0.5:6443", "https://rancher.example.com/k8s/clusters/c-m-abc"
	for _, tc := range []struct {
		name     string
		api      *infrav1.HarvesterAPIEndpoint
		identity string
		want     string
		wantErr  bool
	}{
		{"unset", nil, direct, direct, false},
		{"empty server", &infrav1.HarvesterAPIEndpoint{}, direct, direct, false},
		{"empty server through Rancher", &infrav1.HarvesterAPIEndpoint{}, proxy, "", true},
		{"set through Rancher", &infrav1.HarvesterAPIEndpoint{Server: "https://10.0.0.9:6443"}, proxy, "https://10.0.0.9:6443", false},
	} {
		hc := &infrav1.HarvesterCluster{Spec: infrav1.HarvesterClusterSpec{GuestHarvesterAPI: tc.api}}
		got, _, err := guestEndpoint(hc, tc.identity, nil)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
