// Package e2e holds the end-to-end suites: whole clusters on the simulated Harvester, with
// Cluster API's core controllers running in-process against real apiservers.
package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

var (
	testBed *bed.Bed
	ctx     = context.Background()
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "end-to-end on the simulated Harvester")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	opts := harvestersim.DefaultOptions()
	// The control planes' pool serves load balancers of VMs only; guest Services get pools of
	// their own in the tests that make them.
	opts.IPPools[0].GuestCluster = "none"
	var err error
	start := time.Now()
	testBed, err = bed.Start(ctx, bed.Options{Harvester: opts, Kubeadm: true, Topology: true, SetupManagement: func(ctx context.Context, b *bed.Bed) error {
		return controllers.Setup(ctx, b.Management.Manager, controllers.Options{
			ClusterConcurrency: 5, MachineConcurrency: 5, HarvesterQPS: 50, HarvesterBurst: 100, SkipNameValidation: true,
		})
	}})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("bed up in %s\n", time.Since(start).Round(time.Millisecond))
})

var _ = AfterSuite(func() {
	if testBed != nil {
		Expect(testBed.Stop(ctx)).To(Succeed())
	}
})
