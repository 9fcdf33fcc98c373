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

package transport_test

import (
	"bufio"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// countedSource counts the watches that run: a watch runs until the context its controller
// started it with ends.
type countedSource struct {
	source.Source
	started, live *atomic.Int64
}

func (s countedSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.started.Add(1)
	s.live.Add(1)
	context.AfterFunc(ctx, func() { s.live.Add(-1) })
	return s.Source.Start(ctx, queue)
}

// Identity rotations and Harvester outages leave nothing behind: no goroutine, connection or
// watch outlives its cache, including caches torn down before they synced; and a connection
// whose cache failed or stopped is rebuilt by the next Get. One exception is controller-runtime's
// (v0.24, and v0.25 still): its multi-namespace cache waits in a goroutine per informer and per
// event handler for the informers of every namespace to sync, and one stopped before it synced
// never does (client-go closes its synced channel only on sync), so a cache torn down before it
// synced leaves those goroutines. They are counted apart and bounded here.
func TestFactoryLifecycleLeavesNothingBehind(t *testing.T) {
	g := NewWithT(t)
	f := &transport.ClientFactory{QPS: 50, Burst: 100, SyncTimeout: 300 * time.Millisecond}
	ctx, sim := startFactory(t, g, f)
	proxyPort := proxyPortOf(g, sim.APIServerURL())

	// A real controller, started before the first connection: it starts the watches added later
	// with its own context, as the manager's controllers do.
	c, err := controller.NewUnmanaged("factory-lifecycle", controller.Options{
		SkipNameValidation: ptr.To(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	sourcesStarted := make(chan struct{})
	g.Expect(c.Watch(source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		close(sourcesStarted)
		return nil
	}))).To(Succeed())
	go func() { _ = c.Start(ctx) }()
	<-sourcesStarted

	// The controllers' watches: the cached kinds and the hosts.
	var started, live atomic.Int64
	kinds := append(transport.CachedKinds(), &corev1.Node{})
	f.WatchCaches(c, func(hc cache.Cache) []source.Source {
		var sources []source.Source
		for _, kind := range kinds {
			sources = append(sources, countedSource{Source: source.Kind(hc, kind, &handler.EnqueueRequestForObject{}), started: &started, live: &live})
		}
		return sources
	})

	const user, namespace = "ns/cluster-a", "guests"
	identity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "identity"}}
	key := client.ObjectKeyFromObject(identity).String()
	// Each rotation a new token: tokens asked for in the same second with the same lifetime can
	// be the same, so the lifetime differs.
	rotations := 0
	rotate := func() {
		rotations++
		kubeconfig, err := sim.Kubeconfig(ctx, harvestersim.ProviderIdentityNamespace, harvestersim.ProviderIdentityName, "",
			24*time.Hour+time.Duration(rotations)*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		identity.Data = map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}
	}
	get := func(g Gomega) *transport.Client {
		hc, err := f.Get(ctx, user, identity, namespace, "")
		g.Expect(err).NotTo(HaveOccurred())
		return hc
	}
	watchesPerConnection := int64(len(kinds))

	rotate()
	g.Eventually(get, 30*time.Second).ShouldNot(BeNil())
	goroutinesBefore := settledGoroutines(g)
	upstreamBefore := multiNamespaceWaiters()
	tcpBefore := tcpConnectionsTo(g, proxyPort)
	g.Expect(f.Connections()).To(Equal([]string{key}))
	g.Expect(live.Load()).To(Equal(watchesPerConnection))
	t.Logf("before: %d goroutines, connections %v, %d watches, %d TCP connections to Harvester",
		goroutinesBefore, f.Connections(), live.Load(), tcpBefore)

	// 100 rotations (30 in make test, testenv.Scale): every other one while Harvester is too slow
	// for the new cache to sync before the next rotation tears it down.
	rotationCount, outageCount := testenv.Scale(100, 30), testenv.Scale(20, 8)
	for i := range rotationCount {
		slow := i%2 == 0
		if slow {
			sim.Faults.Latency("virtualmachines", time.Second)
		}
		rotate()
		if slow {
			_, err := f.Get(ctx, user, identity, namespace, "")
			g.Expect(err).To(MatchError(transport.ErrNotSynced), "rotation %d", i)
			sim.Faults.Clear()
			continue
		}
		g.Eventually(get, 30*time.Second).ShouldNot(BeNil(), "rotation %d", i)
	}
	g.Expect(started.Load()).To(BeNumerically(">=", int64(rotationCount+1)*watchesPerConnection), "every rotation registers the watches")

	// 20 outages (8 in make test), each while the newest cache has not synced yet; during every other one the
	// identity rotates too, so that the new cache cannot even be built.
	for i := range outageCount {
		sim.Faults.Latency("virtualmachines", time.Second)
		rotate()
		_, err := f.Get(ctx, user, identity, namespace, "")
		g.Expect(err).To(MatchError(transport.ErrNotSynced), "outage %d", i)
		g.Expect(sim.StopAPI()).To(Succeed())
		if i%2 == 0 {
			rotate()
			_, err := f.Get(ctx, user, identity, namespace, "")
			g.Expect(err).To(HaveOccurred(), "outage %d", i)
		}
		_, err = f.Get(ctx, user, identity, namespace, "")
		g.Expect(err).To(HaveOccurred(), "outage %d", i)
		sim.Faults.Clear()
		g.Expect(sim.StartAPI(ctx)).To(Succeed())
		g.Eventually(get, 60*time.Second).ShouldNot(BeNil(), "after outage %d", i)
	}

	// A cache that could not start because Harvester was down is built once Harvester is back.
	const other = "ns/cluster-b"
	otherIdentity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}
	kubeconfig, err := sim.ProviderKubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	otherIdentity.Data = map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}
	g.Expect(sim.StopAPI()).To(Succeed())
	_, err = f.Get(ctx, other, otherIdentity, namespace, "")
	g.Expect(err).To(HaveOccurred())
	g.Expect(sim.StartAPI(ctx)).To(Succeed())
	var first *transport.Client
	g.Eventually(func(g Gomega) {
		first, err = f.Get(ctx, other, otherIdentity, namespace, "")
		g.Expect(err).NotTo(HaveOccurred())
	}, 60*time.Second).Should(Succeed())

	// A cache that stopped by itself is not handed out again: the next Get builds a new one.
	g.Expect(f.StopCacheForTest(client.ObjectKeyFromObject(otherIdentity).String(), "")).To(BeTrue())
	g.Eventually(func(g Gomega) {
		hc, err := f.Get(ctx, other, otherIdentity, namespace, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(hc).NotTo(BeIdenticalTo(first), "the stopped connection is handed out again")
		g.Expect(hc.Cache.List(ctx, &corev1.NodeList{})).To(Succeed())
	}, 30*time.Second).Should(Succeed())
	f.Release(other)

	// As before: one connection with its watches, and nothing else.
	g.Expect(get(g)).NotTo(BeNil())
	g.Expect(f.Connections()).To(Equal([]string{key}))
	g.Eventually(live.Load, 30*time.Second).Should(Equal(watchesPerConnection), "watches outlived their cache")
	g.Eventually(ourGoroutines, 60*time.Second).Should(BeNumerically("<=", goroutinesBefore+goroutineTolerance))
	// At most one waiter per cached kind and namespace-spanning informer, and one per watch's
	// handler, for each of the slow rotations (every other one) and outages that tore a cache
	// down unsynced.
	leaked := multiNamespaceWaiters() - upstreamBefore
	t.Logf("controller-runtime's multi-namespace sync waiters left by unsynced caches: %d", leaked)
	g.Expect(leaked).To(BeNumerically("<=", (rotationCount/2+outageCount)*2*len(kinds)))
	g.Eventually(func(g Gomega) int { return tcpConnectionsTo(g, proxyPort) }, 30*time.Second).Should(BeNumerically("<=", tcpBefore))
	t.Logf("after %d watches started: %d goroutines, connections %v, %d watches, %d TCP connections to Harvester",
		started.Load(), runtime.NumGoroutine(), f.Connections(), live.Load(), tcpConnectionsTo(g, proxyPort))

	// The last user's release ends the connection and its watches.
	f.Release(user)
	g.Expect(f.Connections()).To(BeEmpty())
	g.Eventually(live.Load, 30*time.Second).Should(BeZero())
}

// goroutineTolerance allows for the simulator's and the HTTP connections' own goroutines coming
// and going; one leaked connection holds dozens, one leaked watch one per rotation.
const goroutineTolerance = 10

// settledGoroutines returns the goroutine count once it has held still for four samples in a
// row, 250 ms apart (within 30 s).
func settledGoroutines(g Gomega) int {
	last, still := -1, 0
	g.Eventually(func() int {
		if n := ourGoroutines(); n == last {
			still++
		} else {
			last, still = n, 0
		}
		return still
	}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(BeNumerically(">=", 4), "the goroutine count does not settle")
	return last
}

func proxyPortOf(g Gomega, url string) int {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(url, "https://"))
	g.Expect(err).NotTo(HaveOccurred())
	n, err := strconv.Atoi(port)
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// tcpConnectionsTo counts this process's established TCP connections to a local port: the
// sockets among /proc/self/fd whose remote end, per /proc/net/tcp, is that port.
func tcpConnectionsTo(g Gomega, port int) int {
	fds, err := os.ReadDir("/proc/self/fd")
	g.Expect(err).NotTo(HaveOccurred())
	ours := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			ours[strings.TrimSuffix(inode, "]")] = true
		}
	}
	count := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		scanner := bufio.NewScanner(file)
		scanner.Scan() // header
		for scanner.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(scanner.Text())
			if len(fields) < 10 || fields[3] != "01" || !ours[fields[9]] {
				continue
			}
			if strings.HasSuffix(fields[2], fmt.Sprintf(":%04X", port)) {
				count++
			}
		}
		g.Expect(scanner.Err()).NotTo(HaveOccurred())
		_ = file.Close()
	}
	return count
}

// A Harvester that accepts connections but never answers holds up the building of its own
// identity's connection only: another identity's Get goes through meanwhile.
func TestSilentHarvesterHoldsUpOnlyItsOwnIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated Harvester")
	}
	g := NewWithT(t)
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := sharedHarvester(t, g)

	asked := make(chan struct{}, 100)
	release := make(chan struct{})
	silent := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		asked <- struct{}{}
		<-release
	}))
	defer silent.Close()
	defer close(release)
	silentKubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"silent": {Server: silent.URL,
			CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: silent.Certificate().Raw})}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"silent": {Token: "token"}},
		Contexts:       map[string]*clientcmdapi.Context{"silent": {Cluster: "silent", AuthInfo: "silent"}},
		CurrentContext: "silent",
	})
	g.Expect(err).NotTo(HaveOccurred())
	working, err := sim.ProviderKubeconfig(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	scheme, err := guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	// Requests wait as long as the silent Harvester does: only the test ends its silence.
	f := &transport.ClientFactory{Scheme: scheme, QPS: 50, Burst: 100, RequestTimeout: time.Hour}
	go func() { _ = f.Start(ctx) }()
	workingIdentity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "working"},
		Data: map[string][]byte{infrav1.IdentitySecretKey: working}}
	// The working identity's connection first: it also tells that the factory runs.
	g.Eventually(func() error {
		_, err := f.Get(ctx, "ns/working-cluster", workingIdentity, "guests", "")
		return err
	}, 60*time.Second).Should(Succeed())

	silentDone := make(chan error, 1)
	go func() {
		_, err := f.Get(ctx, "ns/silent-cluster", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "silent"},
			Data: map[string][]byte{infrav1.IdentitySecretKey: silentKubeconfig}}, "guests", "")
		silentDone <- err
	}()
	g.Eventually(asked, 30*time.Second).Should(Receive(), "the silent Harvester is asked while its connection is built")

	// Another user of the working identity: a Get that takes the factory's lock, which the silent
	// identity's build must not hold.
	g.Eventually(func(g Gomega) {
		c, err := f.Get(ctx, "ns/working-machine", workingIdentity, "guests", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Cache.List(ctx, &corev1.NodeList{})).To(Succeed())
	}, 60*time.Second).Should(Succeed())
	g.Expect(silentDone).NotTo(Receive(), "the silent identity's Get is still waiting for its Harvester")
}

// Clusters that share an identity Secret in one target namespace share its transport (one live
// client, one guard) but each connection caches only its own cluster's objects: N clusters do not
// make N copies of the namespace.
func TestClustersOfOneIdentityCacheOnlyTheirOwnObjects(t *testing.T) {
	g := NewWithT(t)
	f := &transport.ClientFactory{QPS: 50, Burst: 100}
	ctx, sim := startFactory(t, g, f)

	kubeconfig, err := sim.Kubeconfig(ctx, harvestersim.ProviderIdentityNamespace, harvestersim.ProviderIdentityName, "", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	identity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "identity"},
		Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}}
	const namespace = "guests"
	for _, cluster := range []string{"ns.a", "ns.b"} {
		vm := harvestersim.SampleVM(namespace, "vm-"+strings.ReplaceAll(cluster, ".", "-"), "")
		vm.Labels = map[string]string{naming.LabelManagedBy: naming.ManagedByValue, naming.LabelCluster: cluster}
		g.Expect(sim.Env.Client.Create(ctx, vm)).To(Succeed())
	}

	var a, b *transport.Client
	g.Eventually(func(g Gomega) {
		a, err = f.Get(ctx, "HarvesterCluster/ns/a", identity, namespace, "ns.a")
		g.Expect(err).NotTo(HaveOccurred())
		b, err = f.Get(ctx, "HarvesterCluster/ns/b", identity, namespace, "ns.b")
		g.Expect(err).NotTo(HaveOccurred())
	}, 30*time.Second).Should(Succeed())
	g.Expect(a.Client).To(BeIdenticalTo(b.Client), "one live client (one guard, one HTTP client) per identity")
	g.Expect(a.Cache).NotTo(BeIdenticalTo(b.Cache))
	g.Expect(f.Connections()).To(Equal([]string{"ns/identity"}))

	names := func(c cache.Cache) []string {
		vms := &kubevirtv1.VirtualMachineList{}
		g.Expect(c.List(ctx, vms, client.InNamespace(namespace))).To(Succeed())
		var out []string
		for _, vm := range vms.Items {
			out = append(out, vm.Name)
		}
		return out
	}
	g.Expect(names(a.Cache)).To(ConsistOf("vm-ns-a"))
	g.Expect(names(b.Cache)).To(ConsistOf("vm-ns-b"))

	f.Release("HarvesterCluster/ns/a")
	g.Expect(f.Connections()).To(Equal([]string{"ns/identity"}), "cluster b still uses the identity")
	f.Release("HarvesterCluster/ns/b")
	g.Expect(f.Connections()).To(BeEmpty())
}

// startFactory starts f (with the Harvester scheme) on the package's simulated Harvester until the
// test ends; it skips the test under -short.
func startFactory(t *testing.T, g Gomega, f *transport.ClientFactory) (context.Context, *harvestersim.Harvester) {
	if testing.Short() {
		t.Skip("starts a simulated Harvester")
	}
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sim := sharedHarvester(t, g)
	var err error
	f.Scheme, err = guestcloud.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = f.Start(ctx) }()
	return ctx, sim
}

// A host's event, seen by every connection's cache, is mapped by each to its own users only:
// with a connection per cluster, one host event used to wake every tenant's cluster once per
// connection.
func TestHostEventsReachOnlyTheUsersOfTheirConnection(t *testing.T) {
	g := NewWithT(t)
	f := &transport.ClientFactory{QPS: 50, Burst: 100}
	ctx, sim := startFactory(t, g, f)

	c, err := controller.NewUnmanaged("host-events", controller.Options{
		SkipNameValidation: ptr.To(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	var mu sync.Mutex
	var mapped [][]string
	f.WatchCaches(c, func(hc cache.Cache) []source.Source {
		return []source.Source{source.Kind(hc, client.Object(&corev1.Node{}), handler.EnqueueRequestsFromMapFunc(
			func(context.Context, client.Object) []reconcile.Request {
				users := f.UsersOf(hc)
				slices.Sort(users)
				mu.Lock()
				mapped = append(mapped, users)
				mu.Unlock()
				return nil
			}))}
	})

	kubeconfig, err := sim.Kubeconfig(ctx, harvestersim.ProviderIdentityNamespace, harvestersim.ProviderIdentityName, "", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	identity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "identity"},
		Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}}
	for _, cluster := range []string{"a", "b"} {
		g.Eventually(func() error {
			_, err := f.Get(ctx, "HarvesterCluster/ns/"+cluster, identity, "guests", "ns."+cluster)
			return err
		}, 30*time.Second).Should(Succeed())
	}

	// A new host: each connection's cache sees it and maps it to its own cluster.
	g.Expect(sim.AddHost(ctx, harvestersim.Host{Name: "host-new"})).To(Succeed())
	g.Eventually(func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(mapped)
	}, 30*time.Second).Should(ContainElements([]string{"HarvesterCluster/ns/a"}, []string{"HarvesterCluster/ns/b"}))
	mu.Lock()
	defer mu.Unlock()
	for _, users := range mapped {
		g.Expect(len(users)).To(BeNumerically("<=", 1), "an event reached another connection's users: %v", users)
	}
}

// A Harvester that never answers costs one request's timeout per identity, not one per Get: the
// connection that failed is torn down, but the factory remembers its server's silence, so the
// connections built at the next reconciles fail at once until a probe is due. Twenty such
// identities leave another tenant's connection untouched.
func TestSilentHarvestersAreRememberedPerIdentity(t *testing.T) {
	g := NewWithT(t)
	// The healthy Harvester below must answer within the request timeout, or it is silent too:
	// 300 ms did not hold with make test, make bench and an e2e run on two cores.
	f := &transport.ClientFactory{QPS: 50, Burst: 100, RequestTimeout: 3 * time.Second, SyncTimeout: 5 * time.Second}
	ctx, sim := startFactory(t, g, f)

	var reached atomic.Int64
	blackHole := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		<-r.Context().Done()
	}))
	t.Cleanup(blackHole.Close)
	silentIdentity := func(i int) *corev1.Secret {
		data, err := clientcmd.Write(clientcmdapi.Config{
			Clusters: map[string]*clientcmdapi.Cluster{"h": {Server: blackHole.URL,
				CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blackHole.Certificate().Raw})}},
			AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: fmt.Sprintf("tenant-%d", i)}},
			Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "h", AuthInfo: "u"}},
			CurrentContext: "c",
		})
		g.Expect(err).NotTo(HaveOccurred())
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("tenant-%d", i), Name: "identity"},
			Data: map[string][]byte{infrav1.IdentitySecretKey: data}}
	}
	const identities, reconciles = 20, 5
	var wg sync.WaitGroup
	for i := range identities {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secret := silentIdentity(i)
			for range reconciles {
				_, err := f.Get(ctx, fmt.Sprintf("HarvesterCluster/tenant-%d/c", i), secret, "guests", "")
				g.Expect(err).To(HaveOccurred())
			}
		}()
	}
	// Meanwhile another tenant's Harvester answers, and its connection syncs.
	kubeconfig, err := sim.Kubeconfig(ctx, harvestersim.ProviderIdentityNamespace, harvestersim.ProviderIdentityName, "", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	healthy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "identity"},
		Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}}
	g.Eventually(func() error {
		_, err := f.Get(ctx, "HarvesterCluster/other/c", healthy, "guests", "")
		return err
	}, 2*time.Minute).Should(Succeed())
	wg.Wait()
	// Each identity's first connection asked (its discovery, perhaps a request or two at once);
	// none of the later reconciles' connections did.
	g.Expect(reached.Load()).To(BeNumerically("<", int64(identities*reconciles)),
		"requests that reached the silent Harvester")
	t.Logf("%d identities x %d reconciles: %d requests reached the silent Harvester", identities, reconciles, reached.Load())
}

// One Get against a tenant's server that answers discovery without end reads at most the bound
// (it used to read the whole stream into the heap), and the cluster's condition says why.
func TestEndlessAnswersAreCutOffAtTheirBound(t *testing.T) {
	g := NewWithT(t)
	f := &transport.ClientFactory{QPS: 50, Burst: 100, RequestTimeout: time.Minute}
	ctx, _ := startFactory(t, g, f)
	var written atomic.Int64
	chunk := []byte(strings.Repeat("x", 1<<20))
	endless := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for written.Load() < 2<<30 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"h": {Server: endless.URL,
			CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: endless.Certificate().Raw})}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "tenant"}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "h", AuthInfo: "u"}},
		CurrentContext: "c",
	})
	g.Expect(err).NotTo(HaveOccurred())
	identity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "identity"},
		Data: map[string][]byte{infrav1.IdentitySecretKey: data}}
	_, err = f.Get(ctx, "HarvesterCluster/tenant/c", identity, "guests", "")
	g.Expect(err).To(HaveOccurred())
	// What the condition says of the cut answer is TestAnswersAreReadUpToTheirBound's: here
	// discovery's own errors may come first (one make test run reported "the request to
	// Harvester failed"), so only the bound is checked.
	e, ok := transport.AsError(transport.ClassifyError(err, "connecting"))
	g.Expect(ok).To(BeTrue())
	t.Logf("the condition would say: %s", e.Message)
	// What the server managed to write: the bound, and what the TCP buffers took.
	g.Expect(written.Load()).To(BeNumerically("<", int64(transport.MaxAnswerBytes)+32<<20))
}

// multiNamespaceWaiterFrames are controller-runtime's goroutines that wait for a multi-namespace
// informer, or a handler registered on one, to sync (pkg/cache/multi_namespace_cache.go).
var multiNamespaceWaiterFrames = []string{
	"sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func",
	"sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func",
}

// goroutineStacks returns every goroutine's stack.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func isMultiNamespaceWaiter(stack string) bool {
	for _, frame := range multiNamespaceWaiterFrames {
		if strings.Contains(stack, frame) {
			return true
		}
	}
	return false
}

// multiNamespaceWaiters counts controller-runtime's multi-namespace sync waiters.
func multiNamespaceWaiters() int {
	n := 0
	for _, stack := range goroutineStacks() {
		if isMultiNamespaceWaiter(stack) {
			n++
		}
	}
	return n
}

// ourGoroutines counts the goroutines but controller-runtime's multi-namespace sync waiters.
func ourGoroutines() int {
	stacks := goroutineStacks()
	n := len(stacks)
	for _, stack := range stacks {
		if isMultiNamespaceWaiter(stack) {
			n--
		}
	}
	return n
}

// A guest that fills its target namespace with objects the cache keeps (load balancers: every
// one of the namespace is cached) stops its own connection at the connection's budget, not the
// manager: its clusters read CacheBudgetExceeded with what happened, another connection of the
// same identity serving another namespace goes on, and once the cooldown passes (and the
// objects are gone) the connection is built again.
func TestAConnectionThatPassesItsCacheBudgetStopsAloneAndComesBack(t *testing.T) {
	g := NewWithT(t)
	f := &transport.ClientFactory{QPS: 200, Burst: 400, MaxCachedBytes: 32 << 10, BudgetCooldown: 3 * time.Second}
	ctx, sim := startFactory(t, g, f)

	kubeconfig, err := sim.Kubeconfig(ctx, harvestersim.ProviderIdentityNamespace, harvestersim.ProviderIdentityName, "", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	identity := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "identity"},
		Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}}
	const flooded, calm = "budget-flooded", "budget-calm"
	for _, ns := range []string{flooded, calm} {
		g.Expect(sim.AddTargetNamespace(ctx, ns)).To(Succeed())
	}
	var lbs []*lbv1.LoadBalancer
	for i := range 200 {
		lb := &lbv1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: flooded, Name: fmt.Sprintf("guest-lb-%03d", i),
				Labels: map[string]string{guestcloud.LabelLBCluster: "ns.a", guestcloud.LabelLBServiceNamespace: "default",
					guestcloud.LabelLBServiceName: fmt.Sprintf("svc-%03d", i)}},
			Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.Cluster, IPAM: lbv1.Pool,
				Listeners: []lbv1.Listener{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, BackendPort: 30080}}},
		}
		g.Expect(sim.Env.Client.Create(ctx, lb)).To(Succeed())
		lbs = append(lbs, lb)
	}

	budgetError := func(g Gomega) {
		_, err := f.Get(ctx, "HarvesterCluster/ns/a", identity, flooded, "ns.a")
		e, ok := transport.AsError(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(e.Reason).To(Equal(infrav1.CacheBudgetExceededReason))
		g.Expect(e.Message).To(ContainSubstring(flooded))
	}
	g.Eventually(budgetError, 30*time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		b, err := f.Get(ctx, "HarvesterCluster/ns/b", identity, calm, "ns.b")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Cache.List(ctx, &lbv1.LoadBalancerList{}, client.InNamespace(calm))).To(Succeed())
	}, 30*time.Second).Should(Succeed(), "another connection goes on")
	budgetError(g) // still down within its cooldown

	for _, lb := range lbs {
		g.Expect(sim.Env.Client.Delete(ctx, lb)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		a, err := f.Get(ctx, "HarvesterCluster/ns/a", identity, flooded, "ns.a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Cache.List(ctx, &lbv1.LoadBalancerList{}, client.InNamespace(flooded))).To(Succeed())
	}, 60*time.Second).Should(Succeed(), "built again after the cooldown")
	f.Release("HarvesterCluster/ns/a")
	f.Release("HarvesterCluster/ns/b")
}
