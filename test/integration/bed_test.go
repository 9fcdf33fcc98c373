package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// startBed starts the whole bed (management with CAPI, a simulated Harvester, guests) with the
// provider's controllers in-process, and stops it when the test ends (callers cancel ctx in a
// t.Cleanup registered before, so that it runs after the bed stopped).
func startBed(ctx context.Context, t *testing.T) *bed.Bed {
	t.Helper()
	testBed, err := bed.Start(ctx, bed.Options{SetupManagement: func(ctx context.Context, tb *bed.Bed) error {
		return controllers.Setup(ctx, tb.Management.Manager, controllers.Options{
			ClusterConcurrency: 2, MachineConcurrency: 2, HarvesterQPS: 100, HarvesterBurst: 200, SkipNameValidation: true,
		})
	}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(testBed.Stop(ctx)).To(Succeed()) })
	return testBed
}
