// Package bench measures the provider on the simulated Harvester. `make bench` runs it and prints
// the figures; nothing here asserts a speed.
package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// stamps records when each object first reached a state, by watch.
type stamps struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *stamps) mark(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[name]; !ok {
		s.at[name] = time.Now()
	}
}

func (s *stamps) get(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[name]
	return t, ok
}

// BenchmarkMachineProvisioning provisions a MachineDeployment of 5*b.N machines and reports how
// long the provider takes from the moment a VMI runs with an address on Harvester to the moment
// its HarvesterMachine is provisioned (the event-driven path), and the whole rollout's duration.
func BenchmarkMachineProvisioning(b *testing.B) {
	ctx := context.Background()
	testBed, err := bed.Start(ctx, bed.Options{SetupManagement: func(ctx context.Context, tb *bed.Bed) error {
		return controllers.Setup(ctx, tb.Management.Manager, controllers.Options{
			ClusterConcurrency: 5, MachineConcurrency: 10, HarvesterQPS: 100, HarvesterBurst: 200, SkipNameValidation: true,
		})
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := testBed.Stop(ctx); err != nil {
			b.Error(err)
		}
	}()

	running, provisioned := &stamps{at: map[string]time.Time{}}, &stamps{at: map[string]time.Time{}}
	watch(ctx, b, testBed.Harvester.Env.Manager.GetCache(), &kubevirtv1.VirtualMachineInstance{}, func(obj any) {
		vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance)
		if ok && vmi.Status.Phase == kubevirtv1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != "" {
			running.mark(vmi.Name)
		}
	})
	watch(ctx, b, testBed.Management.Manager.GetCache(), &infrav1.HarvesterMachine{}, func(obj any) {
		hm, ok := obj.(*infrav1.HarvesterMachine)
		if ok && ptr.Deref(hm.Status.Initialization.Provisioned, false) {
			provisioned.mark(hm.Name)
		}
	})

	c := testBed.Management.Client
	ns, name := "bench", "bench"
	must(b, createCluster(ctx, testBed, ns, name))
	replicas := int32(5 * b.N)
	b.ResetTimer()
	start := time.Now()
	must(b, c.Create(ctx, bed.BareMachineDeployment(ns, name, replicas)))
	var machines []string
	must(b, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		hms := &infrav1.HarvesterMachineList{}
		if err := c.List(ctx, hms, client.InNamespace(ns)); err != nil {
			return false, err
		}
		machines = machines[:0]
		for _, hm := range hms.Items {
			if _, ok := provisioned.get(hm.Name); ok {
				machines = append(machines, hm.Name)
			}
		}
		return len(machines) == int(replicas), nil
	}))
	total := time.Since(start)
	b.StopTimer()

	var latencies []time.Duration
	for _, m := range machines {
		r, ok1 := running.get(m)
		p, ok2 := provisioned.get(m)
		if ok1 && ok2 {
			latencies = append(latencies, p.Sub(r))
		}
	}
	slices.Sort(latencies)
	if len(latencies) == 0 {
		b.Fatal("no latency measured")
	}
	p50 := latencies[len(latencies)/2]
	p95 := latencies[(len(latencies)*95)/100]
	maxLatency := latencies[len(latencies)-1]
	b.ReportMetric(float64(p50.Milliseconds()), "ms-ip-to-provisioned-p50")
	b.ReportMetric(float64(maxLatency.Milliseconds()), "ms-ip-to-provisioned-max")
	b.ReportMetric(total.Seconds(), "s-rollout")
	fmt.Printf("machines: %d; VMI running with IP -> HarvesterMachine provisioned: p50 %s, p95 %s, max %s; MachineDeployment created -> all provisioned: %s\n",
		len(latencies), p50.Round(time.Millisecond), p95.Round(time.Millisecond), maxLatency.Round(time.Millisecond), total.Round(time.Millisecond))
}

// watch calls on for every add and update of obj's kind in a manager's cache.
func watch(ctx context.Context, b *testing.B, c cache.Cache, obj client.Object, on func(any)) {
	inf, err := c.GetInformer(ctx, obj)
	must(b, err)
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, newObj any) { on(newObj) },
	})
	must(b, err)
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// createCluster creates a Cluster with its HarvesterCluster and guest, and waits until its
// infrastructure is provisioned.
func createCluster(ctx context.Context, tb *bed.Bed, ns, name string) error {
	if err := tb.CreateBareCluster(ctx, ns, name); err != nil {
		return err
	}
	c := tb.Management.Client
	template := &infrav1.HarvesterMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: infrav1.HarvesterMachineSpec{
			CPU: 2, Memory: resource.MustParse("4Gi"),
			Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
			Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
		}}},
	}
	if err := c.Create(ctx, template); err != nil {
		return fmt.Errorf("creating the machine template: %w", err)
	}
	if _, err := tb.AddGuest(ctx, ns, name, false); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
			return false, err
		}
		return ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false), nil
	})
}
