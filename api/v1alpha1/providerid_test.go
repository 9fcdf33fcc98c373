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
