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

package guest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/yaml"
)

// TaintUninitialized is what kubelet started with --cloud-provider=external puts on its Node
// until the cloud controller manager initialises it.
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// NodeAgent plays the kubelets of the guest VMs. For each running VMI with an address on the
// simulated Harvester it reads the VM's cloud-init user data; if the user data carries the
// bootstrap data of a guest cluster's Machine (the Secrets CAPI's bootstrap providers write in
// the management cluster), it registers a Node named after the VM's hostname in that guest, and
// marks it NotReady when the VMI goes away.
type NodeAgent struct {
	harvester client.Client
	// vmis reads VMIs: the cache of the manager the agent runs on (the direct client until then).
	vmis client.Reader

	// StartKubeadm, when set, brings up the control plane of a cluster whose first VM runs
	// `kubeadm init` (the bed sets it to StartKubeadm and stops what it starts).
	StartKubeadm func(ctx context.Context, namespace, name string, n *KubeadmNode) (*Cluster, error)
	// StartControlPlane, when set, brings up the control plane of a cluster whose first VM's
	// bootstrap data starts one in another distribution (RKE2, K3s: see StartDistribution); it
	// returns nil when the user data starts none.
	StartControlPlane func(ctx context.Context, userData []byte) (*Cluster, error)

	mu          sync.Mutex
	guests      []*Cluster
	managements []client.Client
	// waiting are the running VMIs that had nothing to join, with the wait before their next
	// look; kick wakes them at once when a guest or a management cluster is added.
	waiting map[types.NamespacedName]time.Duration
	kick    chan event.GenericEvent
	// userDataOf is each running VMI's user data, read once as cloud-init reads it at boot:
	// a VMI that waits to join does not reread its Secret on every look.
	userDataOf map[types.NamespacedName]bootUserData
}

type bootUserData struct {
	uid  types.UID
	data []byte
}

// A VMI with nothing to join looks again after firstWait, then twice as long each time, at most
// maxWait: the guest it would join (or its Machine's bootstrap Secret) is normally announced by
// AddGuest or AddManagement, which wake it at once; the looks are for anything else. Looking
// every second, as the agent did, kept every running VMI of a guestless run (the bench) busy:
// two live reads and a YAML parse per VMI per second, more CPU than the provider's reconciles.
const (
	firstWait = time.Second
	maxWait   = 16 * time.Second
	// kickBuffer is how many wake-ups wait for the controller; more are dropped (the VMI then
	// looks again after its wait).
	kickBuffer = 1024
)

// NewNodeAgent returns an agent reading VMIs with harvester and bootstrap data with management.
func NewNodeAgent(harvester, management client.Client) *NodeAgent {
	return &NodeAgent{harvester: harvester, vmis: harvester, managements: []client.Client{management},
		waiting: map[types.NamespacedName]time.Duration{}, kick: make(chan event.GenericEvent, kickBuffer),
		userDataOf: map[types.NamespacedName]bootUserData{}}
}

// backoff records that the VMI req had nothing to join and returns how long it waits.
func (a *NodeAgent) backoff(req types.NamespacedName) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := firstWait
	if last, ok := a.waiting[req]; ok {
		d = min(2*last, maxWait)
	}
	a.waiting[req] = d
	return d
}

// done forgets a VMI that joined or went.
func (a *NodeAgent) done(req types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, req)
}

// wakeLocked makes every waiting VMI look again now, with a fresh back-off; a.mu is held.
func (a *NodeAgent) wakeLocked() {
	for req := range a.waiting {
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
		select {
		case a.kick <- event.GenericEvent{Object: vmi}:
			delete(a.waiting, req)
		default:
			return // full: the rest look again after their wait
		}
	}
}

// AddManagement lets the agent read bootstrap data in another management cluster too (one a
// cluster was moved to).
func (a *NodeAgent) AddManagement(c client.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.managements = append(a.managements, c)
	a.wakeLocked()
}

// RemoveManagement stops looking for bootstrap data in a management cluster.
func (a *NodeAgent) RemoveManagement(c client.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.managements = slices.DeleteFunc(a.managements, func(m client.Client) bool { return m == c })
}

// bootstrapSecrets lists the Secrets of every management cluster that match opts.
func (a *NodeAgent) bootstrapSecrets(ctx context.Context, opts ...client.ListOption) ([]corev1.Secret, error) {
	a.mu.Lock()
	managements := slices.Clone(a.managements)
	a.mu.Unlock()
	var all []corev1.Secret
	for _, c := range managements {
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, opts...); err != nil {
			return nil, err
		}
		for _, s := range secrets.Items {
			if isBootstrapSecret(&s) {
				all = append(all, s)
			}
		}
	}
	return all, nil
}

// AddGuest lets the agent register Nodes in a guest cluster.
func (a *NodeAgent) AddGuest(c *Cluster) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.guests = append(a.guests, c)
	a.wakeLocked()
}

// RemoveGuest stops registering Nodes in a guest cluster.
func (a *NodeAgent) RemoveGuest(c *Cluster) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.guests = slices.DeleteFunc(a.guests, func(g *Cluster) bool { return g == c })
}

// SetupWithManager runs the agent on the simulated Harvester's manager.
func (a *NodeAgent) SetupWithManager(mgr ctrl.Manager) error {
	a.vmis = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).
		Named("guest-node-agent").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}).
		For(&kubevirtv1.VirtualMachineInstance{}).
		WatchesRawSource(source.Channel(a.kick, &handler.EnqueueRequestForObject{})).
		Complete(a)
}

// Reconcile registers or updates the Node of one VMI. A failed look (a management or guest
// apiserver that did not answer) is logged and made again after the agent's own back-off, at
// most maxWait, as a kubelet retries its registration: returned as an error, it would wait
// controller-runtime's back-off, which grows to minutes, and nothing else wakes a running VMI.
func (a *NodeAgent) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := a.reconcile(ctx, req)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the node agent looks again")
		return ctrl.Result{RequeueAfter: a.backoff(req.NamespacedName)}, nil
	}
	return result, nil
}

func (a *NodeAgent) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := a.vmis.Get(ctx, req.NamespacedName, vmi)
	if apierrors.IsNotFound(err) || (err == nil && vmi.DeletionTimestamp != nil) {
		a.done(req.NamespacedName)
		a.mu.Lock()
		delete(a.userDataOf, req.NamespacedName)
		a.mu.Unlock()
		return ctrl.Result{}, a.stopped(ctx, req.Name)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if vmi.Status.Phase != kubevirtv1.Running || firstIP(vmi) == "" {
		return ctrl.Result{}, nil
	}
	userData, err := a.userData(ctx, vmi)
	if err != nil || userData == nil {
		return ctrl.Result{}, err
	}
	a.mu.Lock()
	guests := slices.Clone(a.guests)
	a.mu.Unlock()
	for _, g := range guests {
		ok, err := a.carries(ctx, g.Namespace, g.Name, userData)
		if err != nil {
			return ctrl.Result{}, err
		}
		if ok {
			if reason, err := a.unreachableJoinURL(ctx, userData); err != nil || reason != "" {
				// Like an RKE2 or K3s agent that cannot reach the server it registers with:
				// it retries, and never joins while the address does not serve that port.
				if reason != "" {
					ctrl.LoggerFrom(ctx).Info("the node cannot register", "reason", reason)
				}
				return ctrl.Result{RequeueAfter: a.backoff(req.NamespacedName)}, err
			}
			a.done(req.NamespacedName)
			return a.join(ctx, g, vmi, userData)
		}
	}
	// No running guest yet: a VM that runs `kubeadm init` brings its cluster's control plane up.
	if a.StartKubeadm != nil {
		kn, err := ParseKubeadmNode(userData)
		if err != nil || (kn != nil && kn.Init) {
			if err != nil {
				return ctrl.Result{}, err
			}
			namespace, name, err := a.owner(ctx, userData)
			if err != nil {
				return ctrl.Result{}, err
			}
			if name == "" {
				return ctrl.Result{RequeueAfter: a.backoff(req.NamespacedName)}, nil
			}
			g, err := a.StartKubeadm(ctx, namespace, name, kn)
			if err != nil {
				return ctrl.Result{}, fmt.Errorf("kubeadm init of %s/%s: %w", namespace, name, err)
			}
			a.AddGuest(g)
			a.done(req.NamespacedName)
			return a.join(ctx, g, vmi, userData)
		}
	}
	if a.StartControlPlane != nil {
		g, err := a.StartControlPlane(ctx, userData)
		if err != nil {
			return ctrl.Result{}, err
		}
		if g != nil {
			a.AddGuest(g)
			a.done(req.NamespacedName)
			return a.join(ctx, g, vmi, userData)
		}
	}
	// Like a kubelet that cannot join yet, try again: the guest or the Machine's bootstrap
	// Secret may not be known yet.
	return ctrl.Result{RequeueAfter: a.backoff(req.NamespacedName)}, nil
}

// join registers the VMI's Node in g, as kubelet does once kubeadm init or join has run; a
// kubeadm join waits for its bootstrap token, and a control-plane node gets kubeadm's labels,
// taint and static pods.
func (a *NodeAgent) join(ctx context.Context, g *Cluster, vmi *kubevirtv1.VirtualMachineInstance, userData []byte) (ctrl.Result, error) {
	var kn *KubeadmNode
	if g.Kubeadm {
		var err error
		if kn, err = ParseKubeadmNode(userData); err != nil {
			return ctrl.Result{}, err
		}
	}
	if kn != nil && kn.Join {
		ok, err := hasBootstrapToken(ctx, g.Env.Client, kn.Token)
		if err != nil || !ok {
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
	}
	var nc *NodeConfig
	if g.NodeConfigFor != nil {
		var err error
		if nc, err = g.NodeConfigFor(userData); err != nil {
			return ctrl.Result{}, err
		}
	}
	name, err := a.register(ctx, g, vmi, kn, nc)
	if err != nil {
		return ctrl.Result{}, err
	}
	kubeadmControlPlane := kn != nil && kn.ControlPlane
	// An RKE2 or K3s server with embedded etcd (the guest has a stacked etcd only then).
	etcdServer := g.etcd != nil && nc != nil && nc.ControlPlane && nc.Labels[etcdRoleLabel] == "true"
	if g.etcd != nil && (kubeadmControlPlane || etcdServer) {
		// kubeadm's etcd phase, or the server's embedded etcd: the node's member starts (init)
		// or joins (join).
		if err := g.etcd.join(ctx, name); err != nil {
			// As kubeadm does: etcd refuses a new member for a few seconds after the last
			// one joined ("unhealthy cluster"), and a learner is promoted once it caught up.
			ctrl.LoggerFrom(ctx).Info("the node's etcd member has not joined yet", "node", name, "reason", err.Error())
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if etcdServer {
			// An RKE2 or K3s server names its member on its Node.
			if err := annotate(ctx, g.Env.Client, name, g.distribution.EtcdAnnotations+etcdNodeNameAnnotation, g.etcd.memberOf(name)); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	// kubeadm and RKE2 run their control plane as static pods, whose mirror pods the kubelet
	// posts; K3s runs its control plane and etcd inside its own process.
	if kubeadmControlPlane || (etcdServer && g.distribution.EtcdPods) {
		if err := controlPlanePods(ctx, g.Env.Client, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if nc != nil && nc.ControlPlane && len(nc.Manifests) > 0 {
		// The server's deploy controller applies its manifests directory: an object it cannot
		// apply (of a kind the cluster does not serve yet) is tried again later, and holds up
		// neither the node nor the other objects.
		if err := applyManifests(ctx, g.Env.Client, nc.Manifests); err != nil {
			ctrl.LoggerFrom(ctx).Info("the server's manifests are not all applied yet", "node", name, "reason", err.Error())
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	return ctrl.Result{}, nil
}

// Owner returns the management cluster (its client) and the namespace and name of the Cluster
// whose Machine's bootstrap data the user data carries; empty when none.
func (a *NodeAgent) Owner(ctx context.Context, userData []byte) (client.Client, string, string, error) {
	a.mu.Lock()
	managements := slices.Clone(a.managements)
	a.mu.Unlock()
	for _, c := range managements {
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, client.HasLabels{"cluster.x-k8s.io/cluster-name"}); err != nil {
			return nil, "", "", err
		}
		for _, s := range secrets.Items {
			if isBootstrapSecret(&s) && CarriesBootstrapData(userData, s.Data["value"]) {
				return c, s.Namespace, s.Labels["cluster.x-k8s.io/cluster-name"], nil
			}
		}
	}
	return nil, "", "", nil
}

// owner is Owner without the management cluster.
func (a *NodeAgent) owner(ctx context.Context, userData []byte) (string, string, error) {
	_, namespace, name, err := a.Owner(ctx, userData)
	return namespace, name, err
}

func isBootstrapSecret(s *corev1.Secret) bool {
	return s.Type == "cluster.x-k8s.io/secret" && len(s.Data["value"]) > 0 && !strings.HasSuffix(s.Name, "-kubeconfig")
}

// userData is the VMI's cloud-init user data, inline or from its Secret (read once per VMI), or nil
// when it has none.
func (a *NodeAgent) userData(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) ([]byte, error) {
	key := client.ObjectKeyFromObject(vmi)
	a.mu.Lock()
	known, ok := a.userDataOf[key]
	a.mu.Unlock()
	if ok && known.uid == vmi.UID {
		return known.data, nil
	}
	data, err := a.readUserData(ctx, vmi)
	if err == nil && data != nil {
		a.mu.Lock()
		a.userDataOf[key] = bootUserData{uid: vmi.UID, data: data}
		a.mu.Unlock()
	}
	return data, err
}

// readUserData reads a VMI's cloud-init user data, inline or from its Secret.
func (a *NodeAgent) readUserData(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) ([]byte, error) {
	for _, v := range vmi.Spec.Volumes {
		var ref *corev1.LocalObjectReference
		var inline string
		switch {
		case v.CloudInitNoCloud != nil:
			ref, inline = v.CloudInitNoCloud.UserDataSecretRef, v.CloudInitNoCloud.UserData
		case v.CloudInitConfigDrive != nil:
			ref, inline = v.CloudInitConfigDrive.UserDataSecretRef, v.CloudInitConfigDrive.UserData
		default:
			continue
		}
		if ref == nil {
			return []byte(inline), nil
		}
		secret := &corev1.Secret{}
		if err := a.harvester.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: ref.Name}, secret); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		for _, key := range []string{"userdata", "userData"} {
			if data, ok := secret.Data[key]; ok {
				return data, nil
			}
		}
	}
	return nil, nil
}

// carries tells whether user data delivers the bootstrap data of one of a cluster's Machines.
func (a *NodeAgent) carries(ctx context.Context, namespace, cluster string, userData []byte) (bool, error) {
	secrets, err := a.bootstrapSecrets(ctx, client.InNamespace(namespace),
		client.MatchingLabels{"cluster.x-k8s.io/cluster-name": cluster})
	if err != nil {
		return false, err
	}
	for _, s := range secrets {
		if CarriesBootstrapData(userData, s.Data["value"]) {
			return true, nil
		}
	}
	return false, nil
}

// CarriesBootstrapData tells whether cloud-init user data delivers bootstrap data: for
// cloud-config, every command and file of the bootstrap data is in the user data (a provider may
// merge in more, and reorder); for any other format, the data is there unchanged.
func CarriesBootstrapData(userData, bootstrap []byte) bool {
	if !isCloudConfig(bootstrap) {
		return bytes.Contains(userData, bytes.TrimSpace(bootstrap))
	}
	if !isCloudConfig(userData) {
		return false
	}
	var want, have cloudConfig
	if yaml.Unmarshal(bootstrap, &want) != nil || yaml.Unmarshal(userData, &have) != nil {
		return false
	}
	for _, cmd := range want.RunCmd {
		if !slices.ContainsFunc(have.RunCmd, func(c any) bool { return equalYAML(c, cmd) }) {
			return false
		}
	}
	for _, f := range want.WriteFiles {
		if !slices.ContainsFunc(have.WriteFiles, func(h writeFile) bool { return h.Path == f.Path && h.Content == f.Content }) {
			return false
		}
	}
	return len(want.RunCmd)+len(want.WriteFiles) > 0
}

type cloudConfig struct {
	RunCmd     []any       `json:"runcmd"`
	WriteFiles []writeFile `json:"write_files"`
}

type writeFile struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

// isCloudConfig tells cloud-config, also as a Jinja template (CAPI's kubeadm bootstrap data).
func isCloudConfig(data []byte) bool {
	data = bytes.TrimSpace(data)
	if rest, ok := bytes.CutPrefix(data, []byte("## template: jinja")); ok {
		data = bytes.TrimSpace(rest)
	}
	return bytes.HasPrefix(data, []byte("#cloud-config"))
}

func equalYAML(a, b any) bool {
	ja, errA := yaml.Marshal(a)
	jb, errB := yaml.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// register creates or refreshes the Node of a VMI in a guest, as its kubelet would, and
// returns the Node's name. kn, when the VM runs kubeadm, decides the name, whether a CCM is
// expected, and the control-plane role; nc does for other distributions.
func (a *NodeAgent) register(ctx context.Context, g *Cluster, vmi *kubevirtv1.VirtualMachineInstance, kn *KubeadmNode, nc *NodeConfig) (string, error) {
	name := vmi.Spec.Hostname
	if name == "" {
		name = vmi.Name
	}
	withCCM := g.WithCCM
	if kn != nil {
		withCCM = kn.ExternalCloudProvider
		if kn.NodeName != "" {
			name = kn.NodeName
		}
	}
	if nc != nil {
		withCCM = nc.ExternalCloudProvider
		if nc.Name != "" {
			name = nc.Name
		}
	}
	c := g.Env.Client
	node := &corev1.Node{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, node)
	if apierrors.IsNotFound(err) {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		}}}
		if kn != nil && kn.ControlPlane {
			KubeadmRoles.markControlPlane(node)
		}
		if nc != nil {
			maps.Copy(node.Labels, nc.Labels)
			node.Spec.Taints = append(node.Spec.Taints, nc.Taints...)
		}
		if withCCM {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		} else {
			// No CCM: set what it would have set, so that CAPI can match the Machine.
			node.Spec.ProviderID = "harvester://" + vmOwnerUID(vmi)
		}
		if err := c.Create(ctx, node); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
	if vmi.Spec.Domain.CPU != nil && vmi.Spec.Domain.CPU.Cores > 0 {
		capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(vmi.Spec.Domain.CPU.Cores), resource.DecimalSI)
	}
	if vmi.Spec.Domain.Memory != nil && vmi.Spec.Domain.Memory.Guest != nil {
		capacity[corev1.ResourceMemory] = *vmi.Spec.Domain.Memory.Guest
	}
	kubeletVersion := ""
	if nc != nil {
		kubeletVersion = nc.KubeletVersion
	}
	if kubeletVersion == "" {
		if kubeletVersion, err = a.kubeletVersion(ctx, vmi); err != nil {
			return "", err
		}
	}
	// The CCM's addresses stay; the rest is what the kubelet posts.
	addresses := node.Status.Addresses
	node.Status = corev1.NodeStatus{
		Addresses:   addresses,
		Capacity:    capacity,
		Allocatable: capacity,
		// What a healthy kubelet reports; CAPI's NodeHealthy reads all four.
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: "amd64",
			OSImage: "Ubuntu 24.04 LTS", ContainerRuntimeVersion: "containerd://2.1.0"},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
	}
	if !withCCM {
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: firstIP(vmi)},
			{Type: corev1.NodeHostName, Address: name},
		}
	}
	if err := c.Status().Update(ctx, node); err != nil {
		return "", err
	}
	return name, clearNotReadyTaint(ctx, c, node)
}

// annotate sets an annotation on the guest's Node name.
func annotate(ctx context.Context, c client.Client, name, key, value string) error {
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	if node.Annotations[key] == value {
		return nil
	}
	base := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[key] = value
	return c.Patch(ctx, node, client.MergeFrom(base))
}

// clearNotReadyTaint removes the not-ready taint the apiserver puts on every new Node
// (TaintNodesByCondition), as kube-controller-manager's node lifecycle controller does once the
// node reports Ready. The bed does not run that controller: it would also evict everything from
// nodes whose kubelets renew no Lease, and the bed's kubelets do not.
func clearNotReadyTaint(ctx context.Context, c client.Client, node *corev1.Node) error {
	kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
		return t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule
	})
	if len(kept) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = kept
	return c.Update(ctx, node)
}

// stopped marks the Nodes of a gone VMI NotReady in every guest, as a node controller would
// once the kubelet stops posting its status.
func (a *NodeAgent) stopped(ctx context.Context, name string) error {
	a.mu.Lock()
	guests := slices.Clone(a.guests)
	a.mu.Unlock()
	for _, g := range guests {
		node := &corev1.Node{}
		if err := g.Env.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if g.etcd != nil {
			g.etcd.stop(name)
		}
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == corev1.NodeReady && node.Status.Conditions[i].Status != corev1.ConditionUnknown {
				node.Status.Conditions[i].Status = corev1.ConditionUnknown
				node.Status.Conditions[i].Reason = "NodeStatusUnknown"
				node.Status.Conditions[i].Message = "Kubelet stopped posting node status."
				node.Status.Conditions[i].LastTransitionTime = metav1.Now()
				if err := g.Env.Client.Status().Update(ctx, node); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func vmOwnerUID(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, ref := range vmi.OwnerReferences {
		if ref.Kind == "VirtualMachine" {
			return string(ref.UID)
		}
	}
	return string(vmi.UID)
}

func firstIP(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, iface := range vmi.Status.Interfaces {
		if iface.Name != "" && iface.IP != "" {
			return iface.IP
		}
	}
	return ""
}

// unreachableJoinURL says why an RKE2 or K3s node could not reach the server its bootstrap data
// names, or "": when that server's host is a load balancer's address on Harvester, the load
// balancer must listen on its port (Harvester's load balancer forwards only its listeners' ports;
// RKE2 registers on 9345, not the API server's 6443). Other hosts (a machine's own address) are
// taken as reachable.
func (a *NodeAgent) unreachableJoinURL(ctx context.Context, userData []byte) (string, error) {
	for _, d := range []*Distribution{RKE2, K3s} {
		n, err := d.ParseNode(userData)
		if err != nil || n == nil || n.JoinURL == "" {
			continue
		}
		u, err := url.Parse(n.JoinURL)
		if err != nil {
			return "", err
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			return "", fmt.Errorf("the join URL %s names no port", n.JoinURL)
		}
		lbs := &lbv1.LoadBalancerList{}
		if err := a.harvester.List(ctx, lbs); err != nil {
			return "", err
		}
		for _, lb := range lbs.Items {
			if lb.Status.Address != u.Hostname() {
				continue
			}
			if !slices.ContainsFunc(lb.Spec.Listeners, func(l lbv1.Listener) bool { return int(l.Port) == port }) {
				return fmt.Sprintf("load balancer %s/%s at %s has no listener on port %d", lb.Namespace, lb.Name, u.Hostname(), port), nil
			}
		}
	}
	return "", nil
}
