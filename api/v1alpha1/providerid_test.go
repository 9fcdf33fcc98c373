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

package v1alpha1_test

import (
	"testing"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// The provider and its cloud provider write one providerID form; each package has the prefix,
// since neither may import the other (test/config's import rules).
func TestTheProviderIDPrefixIsTheCCMs(t *testing.T) {
	if infrav1.ProviderIDPrefix != guestcloud.ProviderIDPrefix {
		t.Fatalf("the provider writes %q, its CCM %q", infrav1.ProviderIDPrefix, guestcloud.ProviderIDPrefix)
	}
}
