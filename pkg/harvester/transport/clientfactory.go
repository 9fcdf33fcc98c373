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

package transport

// Long file: the connection cache (one per identity and server), its lifecycle (reuse, rebuild on
// a changed kubeconfig, close on idle) and its caches' informers belong together; the request
// guard and metrics are already apart (guard.go, requestmetrics.go).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// ErrInvalidKubeconfig is returned for an identity Secret whose kubeconfig is missing or bad.
var ErrInvalidKubeconfig = errors.New("invalid kubeconfig")

// ErrNotSynced is returned while a new connection's cache has not caught up with Harvester, for
// instance because Harvester does not answer.
var ErrNotSynced = errors.New("the Harvester cache is not synced yet")

// CachedKinds are the Harvester kinds the factory's caches hold, in the target namespaces: what
// the controllers watch. Of each kind only the provider's objects (labelled as its) are cached,
// except load balancers (see cacheSelection). Volumes are among them so that a machine's
// deletion learns from events, not by polling, when Harvester has removed its volumes.
func CachedKinds() []client.Object {
	return []client.Object{&kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}, &lbv1.LoadBalancer{},
		&corev1.PersistentVolumeClaim{}}
}

// cacheSelection is which objects of a cached kind a connection's cache holds. Load balancers
// are all of the target namespaces': besides the provider's control-plane ones, those the
// guests' cloud controller managers make for their Services carry the CCM's labels, not the
// provider's, and a cluster's deletion waits for them to go, learning it from their events. A
// cache takes one label selector per kind, and no selector says "ours or a guest's"; a target
// namespace holds few load balancers besides these.
//
// The other kinds are also selected by guest cluster (LabelCluster) when the connection serves
// one: N clusters with their own identities in one target namespace then each cache (and decode)
// their own machines' objects, not N copies of everybody's (at 1,000 machines in 50 such
// clusters, the whole-namespace caches took most of the manager's CPU and 1.2 GB of its heap).
func cacheSelection(kind client.Object, cluster string) cache.ByObject {
	if _, ok := kind.(*lbv1.LoadBalancer); ok {
		return cache.ByObject{}
	}
	set := labels.Set{naming.LabelManagedBy: naming.ManagedByValue}
	if cluster != "" {
		set[naming.LabelCluster] = cluster
	}
	return cache.ByObject{Label: labels.SelectorFromSet(set)}
}

// Client reaches one Harvester cluster: Client reads live and writes, Cache holds the provider's
// VMs, VMIs and volumes and the load balancers of the target namespaces, and the hosts, and
// feeds the controllers' watches.
type Client struct {
	client.Client
	Cache  cache.Cache
	Config *rest.Config
}

// ClientFactory keeps one connection per identity Secret and guest cluster: a cache of that
// cluster's objects in its target namespace, and the identity's transport, which all the
// identity's connections share (one guard, one HTTP client and one live client, with its
// client-side rate limits, per identity Secret and kubeconfig). A connection is rebuilt when the Secret's
// kubeconfig changes, a new target namespace appears or its cache stopped, and torn down when
// its last user releases it; the controllers' watches on its cache end with it, and the
// transport with the identity's last connection. It runs as a manager Runnable.
type ClientFactory struct {
	Scheme    *runtime.Scheme
	QPS       float32
	Burst     int
	UserAgent string
	// SyncTimeout bounds how long Get waits for a new cache to sync.
	SyncTimeout time.Duration
	// MaxCachedBytes bounds what one connection's cache holds (DefaultMaxCachedBytes when 0,
	// none when negative): a connection that passes it is stopped, its clusters report
	// CacheBudgetExceeded, and it is built again after BudgetCooldown
	// (DefaultBudgetCooldown when 0). Other connections go on.
	MaxCachedBytes int64
	BudgetCooldown time.Duration
	// MaxCachedBytesTotal bounds what all connections cache together
	// (DefaultMaxCachedBytesTotal when 0, none when negative): past it, the connection that
	// holds the most is stopped as above.
	MaxCachedBytesTotal int64
	budgets             budgets
	// cooling holds, by connection key, the connections stopped for a budget until their
	// cooldown ends; the stopped connection itself is retired, so its cache's memory goes.
	cooling map[string]*overBudget
	// Policy decides which identity kubeconfigs are accepted (see KubeconfigPolicy).
	Policy KubeconfigPolicy
	// Metrics, when set, counts every connection's requests, labelled by its identity Secret.
	Metrics *RequestMetrics
	// RequestTimeout bounds each request to a Harvester (DefaultRequestTimeout when zero), and
	// MaxInFlight how many one connection has out at once (DefaultMaxInFlight): see
	// requestGuard.
	RequestTimeout time.Duration
	MaxInFlight    int

	mu          sync.Mutex
	ctx         context.Context
	connections map[string]*connection // by connectionKey
	// transports are the identities' shared transports, by identity Secret namespace/name and
	// kubeconfig fingerprint.
	transports map[string]*transport
	// silences remember, per identity and server, a Harvester that stopped answering, beyond the
	// transports (which go with their failed connections); see silenceOfLocked.
	silences map[string]*silence
	// building holds, by connection key, a channel closed when the connection being built for
	// it is in place (or failed). Building asks Harvester for its API groups, and a Harvester
	// that does not answer must not hold up every other identity's Get: it is built without mu.
	building map[string]chan struct{}
	watches  []cacheWatch
}

// connectionKey names the connection of identity Secret identity (namespace/name) for guest
// cluster (a ClusterID, or "" for a connection that serves every cluster).
func connectionKey(identity, cluster string) string { return identity + "|" + cluster }

// transport is what the connections of one identity Secret with one kubeconfig share.
type transport struct {
	key        string
	cfg        *rest.Config
	httpClient *http.Client
	mapper     meta.RESTMapper
	live       client.Client
	refs       int
	silence    *silence
}

type connection struct {
	// identity is the identity Secret's namespace/name, cluster the guest cluster it serves.
	identity, cluster string
	transport         *transport
	// retired is set once the connection left service and gave back its transport.
	retired     bool
	fingerprint string
	// secretVersion is the identity Secret's resourceVersion the last Get saw with this
	// fingerprint (see Reuse).
	secretVersion string
	namespaces    map[string]bool
	users         map[string]string // user -> namespace it needs
	client        *Client
	// ctx ends when the connection is torn down or its cache stopped by itself; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	synced bool
	// over is set when the cache went over its budget (see ClientFactory.MaxCachedBytes).
	over *overBudget
}

// overBudget records that a connection's cache passed its budget: what to tell its clusters,
// and until when it stays down.
type overBudget struct {
	mu      sync.Mutex
	message string
	until   time.Time
}

func (o *overBudget) set(message string, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.message, o.until = message, until
}

// err returns the error its clusters report while the connection stays down, or nil.
func (o *overBudget) err(now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.message == "" || !now.Before(o.until) {
		return nil
	}
	return &Error{Kind: KindUnreachable, Reason: infrav1.CacheBudgetExceededReason, Message: o.message}
}

// stopped tells whether the connection's cache no longer runs.
func (c *connection) stopped() bool { return c.ctx.Err() != nil }

// Watcher is what the factory needs of a controller to add watches: controller.Controller is one.
type Watcher interface {
	Watch(src source.Source) error
}

type cacheWatch struct {
	watcher Watcher
	sources func(cache.Cache) []source.Source
}

// Start records the manager's context; connections live until it ends.
func (f *ClientFactory) Start(ctx context.Context) error {
	f.mu.Lock()
	f.ctx = ctx
	f.budgets.limit = f.MaxCachedBytesTotal
	if f.budgets.limit == 0 {
		f.budgets.limit = DefaultMaxCachedBytesTotal
	}
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, c := range f.connections {
		f.retireLocked(c)
		delete(f.connections, key)
	}
	return nil
}

// retireLocked ends c's cache and gives back its share of the identity's transport, once; f.mu
// is held.
func (f *ClientFactory) retireLocked(c *connection) {
	c.cancel()
	if c.retired {
		return
	}
	c.retired = true
	if t := c.transport; t != nil {
		t.refs--
		if t.refs == 0 {
			delete(f.transports, t.key)
			t.httpClient.CloseIdleConnections()
		}
	}
}

// WatchCaches makes w watch, on the cache of every connection the factory opens from now on,
// the sources that sources returns for that cache (e.g. source.Kind on a cached kind). Each
// watch ends with its connection (see connectionSource).
func (f *ClientFactory) WatchCaches(w Watcher, sources func(cache.Cache) []source.Source) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches = append(f.watches, cacheWatch{watcher: w, sources: sources})
}

// connectionSource is a watch on a connection's cache that ends with the connection.
//
// A controller that has started starts every source added later with its own context, which
// lives as long as the manager. A Kind source waits, with that context, for its informer and
// then for the cache to sync: on a cache torn down before it synced (identity rotated, Harvester
// down) it would wait until the manager stops, holding the cache and its credentials. So the
// factory hands the controller this wrapper, whose Start gives the source a context that also
// ends when the connection does.
//
// It hides the source's WaitForSync on purpose: a watch added before its controller starts must
// not hold that start up while Harvester does not answer; Get reports the sync instead.
type connectionSource struct {
	src  source.Source
	conn context.Context
}

func (s connectionSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	ctx, cancel := context.WithCancel(ctx)
	// Whichever ends first, the controller or the connection, ends the source; the other's
	// registration goes with it.
	stop := context.AfterFunc(s.conn, cancel)
	context.AfterFunc(ctx, func() { stop() })
	return s.src.Start(ctx, queue)
}

func (s connectionSource) String() string { return fmt.Sprint(s.src) }

// Get returns the connection for an identity Secret and a guest cluster (its ClusterID, or ""
// for a connection whose cache holds every cluster's objects), for user (an object key) working
// in namespace on Harvester.
func (f *ClientFactory) Get(ctx context.Context, user string, secret *corev1.Secret, namespace, cluster string) (*Client, error) {
	kubeconfig := secret.Data[infrav1.IdentitySecretKey]
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("%w: Secret %s/%s has no %q key", ErrInvalidKubeconfig, secret.Namespace, secret.Name, infrav1.IdentitySecretKey)
	}
	sum := sha256.Sum256(kubeconfig)
	fingerprint := hex.EncodeToString(sum[:])
	identity := secret.Namespace + "/" + secret.Name
	key := connectionKey(identity, cluster)

	for {
		f.mu.Lock()
		// A user that switched identity Secrets lets go of the old connection.
		f.releaseLocked(user, key)
		c, ok := f.connections[key]
		if over := f.cooling[key]; over != nil {
			if err := over.err(time.Now()); err != nil {
				if ok && c.stopped() {
					// Stopped before Get stored it: its cache's memory goes now.
					f.retireLocked(c)
					delete(f.connections, key)
				}
				f.mu.Unlock()
				return nil, err
			}
			delete(f.cooling, key)
		}
		if ok && c.fingerprint == fingerprint && c.namespaces[namespace] && !c.stopped() {
			c.users[user] = namespace
			c.secretVersion = secret.ResourceVersion
			synced := c.synced
			f.mu.Unlock()
			return f.waitForSync(ctx, c, synced)
		}
		if done, busy := f.building[key]; busy {
			// Another user builds this identity's connection: wait for it, then look again.
			f.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if ok && c.stopped() {
			// Its cache's Start returned: waiting on it again would only time out.
			ctrl.LoggerFrom(ctx).Info("The Harvester cache stopped, reconnecting", "identity", identity, "cluster", cluster)
		}
		namespaces := map[string]bool{namespace: true}
		if ok && c.fingerprint == fingerprint {
			maps.Copy(namespaces, c.namespaces)
		}
		if ok {
			f.retireLocked(c)
		}
		done := make(chan struct{})
		if f.building == nil {
			f.building = map[string]chan struct{}{}
		}
		f.building[key] = done
		factoryCtx, watches := f.ctx, slices.Clone(f.watches)
		f.mu.Unlock()

		built, err := f.connect(factoryCtx, watches, identity, cluster, kubeconfig, fingerprint, namespaces)

		f.mu.Lock()
		delete(f.building, key)
		close(done)
		if err != nil {
			if old := f.connections[key]; old != nil {
				f.retireLocked(old)
			}
			delete(f.connections, key)
			f.mu.Unlock()
			return nil, err
		}
		// The users of the connection it replaces, as they are now (some may have let go
		// meanwhile), move over.
		built.users = map[string]string{}
		if old := f.connections[key]; old != nil {
			maps.Copy(built.users, old.users)
			f.retireLocked(old)
		}
		built.users[user] = namespace
		built.secretVersion = secret.ResourceVersion
		if f.connections == nil {
			f.connections = map[string]*connection{}
		}
		f.connections[key] = built
		f.mu.Unlock()
		return f.waitForSync(ctx, built, false)
	}
}

// Reuse returns user's connection to the identity Secret identity (namespace/name) for cluster
// without the Secret's data, when the last Get saw the Secret at resourceVersion (so its
// kubeconfig is the one the connection was built from), the connection's cache runs and has
// synced, and user already uses it for namespace; ok is false when the caller must read the
// Secret and Get.
func (f *ClientFactory) Reuse(user, identity, cluster, resourceVersion, namespace string) (*Client, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.connections[connectionKey(identity, cluster)]
	if !ok || c.stopped() || !c.synced || resourceVersion == "" || c.secretVersion != resourceVersion ||
		!c.namespaces[namespace] || c.users[user] != namespace {
		return nil, false
	}
	return c.client, true
}

// waitForSync returns c's client once its cache has synced, or ErrNotSynced with the client
// after SyncTimeout.
func (f *ClientFactory) waitForSync(ctx context.Context, c *connection, synced bool) (*Client, error) {
	if !synced {
		timeout := f.SyncTimeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		syncCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// A cache that stops meanwhile will not sync: the next Get rebuilds it.
		defer context.AfterFunc(c.ctx, cancel)()
		if !c.client.Cache.WaitForCacheSync(syncCtx) {
			return c.client, ErrNotSynced
		}
		f.mu.Lock()
		c.synced = true
		f.mu.Unlock()
	}
	return c.client, nil
}

// transportLocked returns identity's shared transport for kubeconfig, built on first use, with
// one more reference; f.mu is held. Building it asks Harvester nothing.
func (f *ClientFactory) transportLocked(identity string, kubeconfig []byte, fingerprint string) (*transport, error) {
	key := identity + "@" + fingerprint
	if t, ok := f.transports[key]; ok {
		t.refs++
		return t, nil
	}
	// Checked before anything is built: a refused kubeconfig never leads to a connection.
	cfg, err := f.Policy.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = f.QPS, f.Burst
	cfg.UserAgent = f.UserAgent
	// Each identity has its own rate limits (QPS, Burst) and its own guard: a Harvester that
	// stops answering holds a few of the shared workers for a few seconds, not all of them for
	// long. The guard's deadline is per request; a whole-client timeout (rest.Config.Timeout)
	// would also cut the caches' watches every time it runs out.
	// The guard's memory of a silent Harvester outlives the transport: a connection that
	// failed because Harvester did not answer is torn down, and the next Get builds a new
	// transport, which must not ask the silent server again at once.
	host := cfg.Host
	silent := f.silenceOfLocked(identity, host)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return newRequestGuard(rt, host, f.RequestTimeout, f.MaxInFlight, silent)
	})
	// Outside the guard, so that the requests it fails at once are counted too.
	if f.Metrics != nil {
		cfg.Wrap(f.Metrics.WrapTransport(identity))
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidKubeconfig, err.Error())
	}
	mapper, err := newLazyMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	live, err := client.New(cfg, client.Options{Scheme: f.Scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("creating the Harvester client: %w", err)
	}
	t := &transport{key: key, cfg: cfg, httpClient: httpClient, mapper: mapper, live: live, refs: 1, silence: silent}
	if f.transports == nil {
		f.transports = map[string]*transport{}
	}
	f.transports[key] = t
	return t, nil
}

// silenceOfLocked returns what the factory remembers of identity's server's silence; f.mu is
// held. Entries of servers that answer again are dropped when no transport uses them.
func (f *ClientFactory) silenceOfLocked(identity, host string) *silence {
	key := identity + "@" + host
	if s, ok := f.silences[key]; ok {
		return s
	}
	if f.silences == nil {
		f.silences = map[string]*silence{}
	}
	for k, s := range f.silences {
		if !s.Silent() && !f.silenceInUseLocked(s) {
			delete(f.silences, k)
		}
	}
	s := newSilence()
	f.silences[key] = s
	return s
}

func (f *ClientFactory) silenceInUseLocked(s *silence) bool {
	for _, t := range f.transports {
		if t.silence == s {
			return true
		}
	}
	return false
}

// connect builds and starts the connection of identity Secret identity for cluster; f.mu is not
// held (it asks Harvester for its API groups), but f.building is set for it.
func (f *ClientFactory) connect(factoryCtx context.Context, watches []cacheWatch, identity, cluster string, kubeconfig []byte, fingerprint string, namespaces map[string]bool) (conn *connection, err error) {
	if factoryCtx == nil {
		return nil, errors.New("the Harvester client factory is not started")
	}
	f.mu.Lock()
	t, err := f.transportLocked(identity, kubeconfig, fingerprint)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// Until the connection exists, its share of the transport is given back on failure.
	defer func() {
		if err != nil {
			f.mu.Lock()
			f.retireLocked(&connection{transport: t, cancel: func() {}})
			f.mu.Unlock()
		}
	}()
	cfg, httpClient, mapper := t.cfg, t.httpClient, t.mapper
	cacheNamespaces := map[string]cache.Config{}
	for ns := range namespaces {
		cacheNamespaces[ns] = cache.Config{}
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, kind := range CachedKinds() {
		byObject[kind] = cacheSelection(kind, cluster)
	}
	// Hosts, for failure domains: all of them, but only what topology needs.
	byObject[&corev1.Node{}] = cache.ByObject{Transform: slimNode}
	c, err := cache.New(cfg, cache.Options{
		Scheme:            f.Scheme,
		Mapper:            mapper,
		HTTPClient:        httpClient,
		DefaultNamespaces: cacheNamespaces,
		ByObject:          byObject,
		DefaultTransform:  slimCached,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the Harvester cache: %w", err)
	}
	ctx, cancel := context.WithCancel(factoryCtx)
	over := &overBudget{}
	limit, cooldown := f.MaxCachedBytes, f.BudgetCooldown
	if limit == 0 {
		limit = DefaultMaxCachedBytes
	}
	if cooldown == 0 {
		cooldown = DefaultBudgetCooldown
	}
	budget := newCacheBudget(limit, func(total int64, objects int, cause budgetCause) {
		until := time.Now().Add(cooldown)
		namespaceList := strings.Join(slices.Sorted(maps.Keys(namespaces)), ", ")
		why := fmt.Sprintf("passed the connection's budget of %d MiB", limit>>20)
		if cause == managerBudget {
			why = fmt.Sprintf("was the largest when the manager's Harvester caches together passed their budget of %d MiB", f.budgets.limit>>20)
		}
		over.set(fmt.Sprintf("the Harvester objects this cluster's connection caches (target namespaces %s; %d objects, %d MiB) %s: "+
			"most often objects a guest made in a target namespace; the connection is stopped until %s",
			namespaceList, objects, total>>20, why, until.UTC().Format(time.RFC3339)), until)
		ctrl.LoggerFrom(ctx).Info("A Harvester cache passed its budget; stopping its connection",
			"identity", identity, "cluster", cluster, "bytes", total, "objects", objects, "manager", cause == managerBudget, "until", until)
		cancel()
	})
	f.budgets.add(budget)
	// The informers of every cached kind exist before the cache starts, so that its sync means
	// all of them, not only those the controllers' watches happened to ask for already.
	for obj := range byObject {
		inf, err := c.GetInformer(factoryCtx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("creating the Harvester cache: %w", err)
		}
		if _, err := inf.AddEventHandler(budget); err != nil {
			cancel()
			f.budgets.remove(budget)
			return nil, fmt.Errorf("creating the Harvester cache: %w", err)
		}
	}
	for _, w := range watches {
		for _, src := range w.sources(c) {
			if err := w.watcher.Watch(connectionSource{src: src, conn: ctx}); err != nil {
				cancel()
				return nil, fmt.Errorf("watching the Harvester cache: %w", err)
			}
		}
	}
	conn = &connection{
		identity:    identity,
		cluster:     cluster,
		transport:   t,
		fingerprint: fingerprint,
		namespaces:  namespaces,
		client:      &Client{Client: t.live, Cache: c, Config: cfg},
		ctx:         ctx,
		cancel:      cancel,
		over:        over,
	}
	key := connectionKey(identity, cluster)
	go func() {
		// A cache whose Start returns ends its connection, so that Get builds a new one, and
		// gives its bytes back to the manager's count; one stopped for a budget is retired at
		// once, so that its cache's memory goes, and Get answers from its cooldown.
		defer func() {
			f.budgets.remove(budget)
			budget.release()
		}()
		defer func() {
			cancel()
			if over.err(time.Now()) == nil {
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.cooling == nil {
				f.cooling = map[string]*overBudget{}
			}
			f.cooling[key] = over
			if f.connections[key] == conn {
				f.retireLocked(conn)
				delete(f.connections, key)
			}
		}()
		if err := c.Start(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Harvester cache stopped")
		}
	}()
	return conn, nil
}

// UsersOf returns the users of the connection whose cache is c (none for a cache whose
// connection was torn down), so that an event of one connection's cache reaches only the
// objects that use that connection.
func (f *ClientFactory) UsersOf(c cache.Cache) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, conn := range f.connections {
		if conn.client != nil && conn.client.Cache == c {
			return slices.Collect(maps.Keys(conn.users))
		}
	}
	return nil
}

// Release tells the factory that user no longer needs its connection; the last user's release
// tears the connection down.
func (f *ClientFactory) Release(user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked(user, "")
}

// releaseLocked removes user from every connection except the one keyed keep; f.mu is held.
func (f *ClientFactory) releaseLocked(user, keep string) {
	for key, c := range f.connections {
		if _, ok := c.users[user]; !ok || key == keep {
			continue
		}
		delete(c.users, user)
		if len(c.users) == 0 {
			f.retireLocked(c)
			delete(f.connections, key)
		}
	}
}

// Connections returns the identity Secrets with a live connection, for tests and metrics.
func (f *ClientFactory) Connections() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.connections {
		out = append(out, c.identity)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// kubeconfigError describes a kubeconfig that does not parse without the parser's message:
// YAML errors quote the offending value, which can be a token.
func kubeconfigError(err error) string {
	if strings.Contains(err.Error(), "no configuration has been provided") || strings.Contains(err.Error(), "invalid configuration") {
		return "it names no usable cluster, user and context"
	}
	return "it does not parse as a kubeconfig (YAML or JSON); check the Secret's kubeconfig key"
}

// newLazyMapper discovers Harvester's API groups as they are needed (building a connection's
// cache needs those of the cached kinds, so it fails while Harvester does not answer).
func newLazyMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	return apiutil.NewDynamicRESTMapper(cfg, httpClient)
}
