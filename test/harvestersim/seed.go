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

package harvestersim

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	"github.com/harvester/harvester/pkg/settings"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Labels and names Harvester uses.
const (
	LabelZone     = "topology.kubernetes.io/zone"
	LabelRegion   = "topology.kubernetes.io/region"
	LabelHostname = "kubernetes.io/hostname"
	// LabelMgmtNetwork marks a host on the `mgmt` cluster network.
	LabelMgmtNetwork = "network.harvesterhci.io/mgmt"

	// LabelGlobalIPPool marks the pool used when no other matches
	// (harvester-load-balancer pkg/utils/const.go).
	LabelGlobalIPPool = "loadbalancer.harvesterhci.io/global-ip-pool"

	// ServerVersionSetting holds the Harvester version.
	ServerVersionSetting = "server-version"

	// SettingOvercommit and SettingOverheadRatio are settings Harvester's VM mutator reads
	// (requests from limits; guest memory less a reservation unless the ratio is set).
	SettingOvercommit    = settings.OvercommitConfigSettingName
	SettingOverheadRatio = settings.AdditionalGuestMemoryOverheadRatioName

	// DefaultStorageClass is Harvester's default storage class for empty volumes.
	DefaultStorageClass = "harvester-longhorn"
	labelControlPlane   = "node-role.kubernetes.io/control-plane"
	// VMStateStorageClass is where KubeVirt keeps VMs' persistent TPM and EFI state on Harvester.
	VMStateStorageClass = "vmstate-persistence"

	// CloudProviderRole and CSIDriverRole are Harvester's ClusterRoles for guest clusters.
	CloudProviderRole = "harvesterhci.io:cloudprovider"
	CSIDriverRole     = "harvesterhci.io:csi-driver"

	// ProviderIdentityNamespace and ProviderIdentityName name the restricted ServiceAccount the
	// provider runs as (config/harvester/provider-identity.yaml).
	ProviderIdentityNamespace = "capi-harvester"
	ProviderIdentityName      = "capi-harvester-provider"
)

func (h *Harvester) seed(ctx context.Context) error {
	c := h.Env.Client
	if err := h.seedClusterRoles(ctx); err != nil {
		return err
	}
	for _, file := range []string{"provider-identity.yaml", "admission-policies.yaml"} {
		if err := h.applyFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "harvester", file), ""); err != nil {
			return err
		}
	}
	// The first namespace holds images and key pairs; the others are guests' target namespaces.
	for i, ns := range h.Options.Namespaces {
		var err error
		if i == 0 {
			err = createIfMissing(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		} else {
			err = h.AddTargetNamespace(ctx, ns)
		}
		if err != nil {
			return err
		}
	}
	for _, host := range h.Options.Hosts {
		if err := h.AddHost(ctx, host); err != nil {
			return err
		}
	}
	if err := createIfMissing(ctx, c, storageClass(DefaultStorageClass, true)); err != nil {
		return err
	}
	// Harvester's chart also makes the class KubeVirt keeps persistent TPM and EFI state on (its
	// vmStateStorageClass): without it virt-controller never starts such a VM.
	if err := createIfMissing(ctx, c, storageClass(VMStateStorageClass, false)); err != nil {
		return err
	}
	if err := createIfMissing(ctx, c, &harvesterv1.Setting{
		ObjectMeta: metav1.ObjectMeta{Name: ServerVersionSetting},
		Value:      h.Options.Version,
	}); err != nil {
		return err
	}
	// Every setting Harvester registers, at its default: Harvester's settings controller creates
	// them so at start, and its webhook fails requests that read one that is missing.
	for _, setting := range harvesterSettings() {
		if err := createIfMissing(ctx, c, &harvesterv1.Setting{ObjectMeta: metav1.ObjectMeta{Name: setting.Name}, Default: setting.Default}); err != nil {
			return err
		}
	}
	for _, n := range h.Options.Networks {
		if err := createIfMissing(ctx, c, networkAttachmentDefinition(n)); err != nil {
			return err
		}
	}
	home := h.Options.Namespaces[0]
	for _, name := range h.Options.Images {
		if err := h.AddImage(ctx, home, name, true); err != nil {
			return err
		}
	}
	for _, name := range h.Options.KeyPairs {
		if err := createIfMissing(ctx, c, keyPair(home, name)); err != nil {
			return err
		}
	}
	return nil
}

// seedIPPools creates the options' pools once Harvester's load balancer webhook admits them.
func (h *Harvester) seedIPPools(ctx context.Context) error {
	for _, p := range h.Options.IPPools {
		if err := h.AddIPPool(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// AddTargetNamespace creates a namespace and lets the provider's identity work in it, as a
// Harvester admin does with config/harvester/target-namespace.yaml.
func (h *Harvester) AddTargetNamespace(ctx context.Context, namespace string) error {
	if err := createIfMissing(ctx, h.Env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	return h.applyFile(ctx, filepath.Join(testenv.RepoRoot(), "config", "harvester", "target-namespace.yaml"), namespace)
}

// AddHost registers a Harvester node with its topology labels, Ready and schedulable.
func (h *Harvester) AddHost(ctx context.Context, host Host) error {
	// Harvester's network controller labels every host on the management cluster network; the
	// VM mutator requires it of VMs on networks of that cluster network.
	labels := map[string]string{LabelHostname: host.Name, LabelMgmtNetwork: "true"}
	// Harvester promotes the first three hosts to its control plane; later ones are workers
	// (its maintenance mode counts the control-plane hosts).
	controlPlane := &corev1.NodeList{}
	if err := h.Env.Client.List(ctx, controlPlane, client.HasLabels{labelControlPlane}); err != nil {
		return err
	}
	if len(controlPlane.Items) < 3 {
		labels[labelControlPlane] = "true"
	}
	if host.Zone != "" {
		labels[LabelZone] = host.Zone
	}
	if host.Region != "" {
		labels[LabelRegion] = host.Region
	}
	if host.CPUManager {
		labels[LabelCPUManager] = "true"
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: host.Name, Labels: labels}}
	if err := createIfMissing(ctx, h.Env.Client, node); err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
	}
	for name, count := range host.Devices {
		capacity[corev1.ResourceName(name)] = *resource.NewQuantity(int64(count), resource.DecimalSI)
	}
	status := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	// Harvester's node controllers may write the Node meanwhile: the kubelet's report retries.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Env.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status = status
		return h.Env.Client.Status().Update(ctx, node)
	}); err != nil {
		return err
	}
	// The apiserver taints a new Node not-ready (its TaintNodesByCondition admission);
	// kube-controller-manager's node lifecycle controller lifts the taint once the Node is Ready.
	base := node.DeepCopy()
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	return h.Env.Client.Patch(ctx, node, client.MergeFrom(base))
}

// AddImage creates a VirtualMachineImage; imported false leaves it importing (a fault knob).
func (h *Harvester) AddImage(ctx context.Context, namespace, name string, imported bool) error {
	img := &harvesterv1.VirtualMachineImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: harvesterv1.VirtualMachineImageSpec{
			Backend:     harvesterv1.VMIBackendBackingImage,
			DisplayName: name + ".img",
			SourceType:  harvesterv1.VirtualMachineImageSourceTypeDownload,
			URL:         "https://images.example.invalid/" + name + ".img",
			Retry:       3,
		},
	}
	setImageStatus(img, imported)
	if err := createIfMissing(ctx, h.Env.Client, img); err != nil {
		return err
	}
	if err := h.Env.Client.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
		return err
	}
	// Harvester makes a storage class per image whose backingImage parameter names the image's
	// backing image (vmi-<uid>): any volume of the class is a copy of the image.
	sc := storageClass(img.Status.StorageClassName, false)
	sc.Parameters["backingImage"] = "vmi-" + string(img.UID)
	return createIfMissing(ctx, h.Env.Client, sc)
}

// storageClass is a Longhorn storage class as Harvester makes them (its default class, and one
// per image in pkg/image/backingimage), volume expansion allowed.
func storageClass(name string, isDefault bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          "driver.longhorn.io",
		Parameters:           map[string]string{"numberOfReplicas": "3"},
		AllowVolumeExpansion: ptr.To(true),
	}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return sc
}

// SetImageImported finishes (or restarts) an image's import.
func (h *Harvester) SetImageImported(ctx context.Context, namespace, name string, imported bool) error {
	img := &harvesterv1.VirtualMachineImage{}
	if err := h.Env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, img); err != nil {
		return err
	}
	setImageStatus(img, imported)
	return h.Env.Client.Update(ctx, img)
}

// setImageStatus writes what Harvester's image controller reports: the storage class made for
// the image (`longhorn-<name>`) and the Imported condition.
func setImageStatus(img *harvesterv1.VirtualMachineImage, imported bool) {
	status, progress := corev1.ConditionTrue, 100
	if !imported {
		status, progress = corev1.ConditionUnknown, 42
	}
	img.Status.Progress = progress
	img.Status.StorageClassName = "longhorn-" + img.Name
	img.Status.Size = 2 << 30
	img.Status.VirtualSize = 3 << 30
	img.Status.Conditions = []harvesterv1.Condition{
		{Type: harvesterv1.ImageInitialized, Status: corev1.ConditionTrue},
		{Type: harvesterv1.ImageImported, Status: status},
	}
}

func keyPair(namespace, name string) *harvesterv1.KeyPair {
	return &harvesterv1.KeyPair{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: harvesterv1.KeyPairSpec{
			PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG2U8mjT8B3sBV6uwjvDEScdrsMDDX1acfINcGg6FEOk " + name + "@example",
		},
		Status: harvesterv1.KeyPairStatus{
			FingerPrint: "SHA256:simulated-" + name,
			Conditions:  []harvesterv1.Condition{{Type: harvesterv1.KeyPairValidated, Status: corev1.ConditionTrue}},
		},
	}
}

// networkAttachmentDefinition is a Harvester VLAN network as its UI creates it.
func networkAttachmentDefinition(n Network) *unstructured.Unstructured {
	config, _ := json.Marshal(map[string]any{
		"cniVersion": "0.3.1", "name": n.Name, "type": "bridge", "bridge": "mgmt-br",
		"promiscMode": true, "vlan": n.VLAN, "ipam": map[string]any{},
	})
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("k8s.cni.cncf.io/v1")
	u.SetKind("NetworkAttachmentDefinition")
	u.SetNamespace(n.Namespace)
	u.SetName(n.Name)
	u.SetLabels(map[string]string{
		"network.harvesterhci.io/type":           "L2VlanNetwork",
		"network.harvesterhci.io/clusternetwork": "mgmt",
		"network.harvesterhci.io/vlan-id":        fmt.Sprint(n.VLAN),
	})
	_ = unstructured.SetNestedField(u.Object, string(config), "spec", "config")
	return u
}

// AddKeyPair creates a validated KeyPair.
func (h *Harvester) AddKeyPair(ctx context.Context, namespace, name string) error {
	return createIfMissing(ctx, h.Env.Client, keyPair(namespace, name))
}

// AddNetwork creates a VM network after the start; its guests get addresses from its CIDRs.
func (h *Harvester) AddNetwork(ctx context.Context, n Network) error {
	if err := h.ips.addNetwork(n); err != nil {
		return err
	}
	return createIfMissing(ctx, h.Env.Client, networkAttachmentDefinition(n))
}

// UniquePriority returns a pool priority (10 and up) that no pool of this Harvester was given
// by it before: Harvester's webhook refuses two non-global pools of one non-zero priority, so
// tests that each add a pool preferred over the defaults take their priority here.
func (h *Harvester) UniquePriority() uint32 { return 10 + h.priorities.Add(1) - 1 }

// AddIPPool creates a load-balancer IP pool.
func (h *Harvester) AddIPPool(ctx context.Context, p IPPoolSpec) error {
	pool := &lbv1.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: lbv1.IPPoolSpec{
			Ranges: []lbv1.Range{{Subnet: p.Subnet, RangeStart: p.RangeStart, RangeEnd: p.RangeEnd, Gateway: p.Gateway}},
			Selector: lbv1.Selector{
				Priority: p.Priority,
				Network:  p.Network,
			},
		},
	}
	if p.Namespace != "" {
		cluster := p.GuestCluster
		switch cluster {
		case "":
			cluster = "*"
		case "none":
			cluster = ""
		}
		pool.Spec.Selector.Scope = []lbv1.Tuple{{Project: "*", Namespace: p.Namespace, GuestCluster: cluster}}
	}
	if p.Global {
		// Harvester's webhook labels a pool global when its scope is all projects, namespaces
		// and clusters (and takes the label off any other).
		pool.Spec.Selector.Scope = []lbv1.Tuple{{Project: "*", Namespace: "*", GuestCluster: "*"}}
	}
	return createIfMissing(ctx, h.Env.Client, pool)
}

// seedClusterRoles installs Harvester's two ClusterRoles for guest clusters exactly as its chart
// defines them (github.com/harvester/harvester deploy/charts/harvester/templates/rbac.yaml).
func (h *Harvester) seedClusterRoles(ctx context.Context) error {
	dir, err := testenv.ModuleDir("github.com/harvester/harvester")
	if err != nil {
		return err
	}
	data, err := readFile(filepath.Join(dir, "deploy", "charts", "harvester", "templates", "rbac.yaml"))
	if err != nil {
		return err
	}
	found := 0
	for _, doc := range strings.Split(string(data), "\n---") {
		if !strings.Contains(doc, "name: "+CloudProviderRole+"\n") && !strings.Contains(doc, "name: "+CSIDriverRole+"\n") {
			continue
		}
		var lines []string
		for _, line := range strings.Split(doc, "\n") {
			if !strings.Contains(line, "{{") { // helm's label include
				lines = append(lines, line)
			}
		}
		objs, err := testenv.DecodeObjects([]byte(strings.Join(lines, "\n")))
		if err != nil {
			return fmt.Errorf("decoding Harvester's ClusterRoles: %w", err)
		}
		for _, u := range objs {
			role := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
				return err
			}
			if err := createIfMissing(ctx, h.Env.Client, role); err != nil {
				return err
			}
			found++
		}
	}
	if found != 2 {
		return fmt.Errorf("found %d of Harvester's 2 guest ClusterRoles in its chart", found)
	}
	return nil
}

// applyFile creates every object of a YAML file.
// applyFile creates the objects of a manifest; namespace, when set, is that of its namespaced
// objects (as `kubectl --namespace` gives it).
func (h *Harvester) applyFile(ctx context.Context, path, namespace string) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	objs, err := testenv.DecodeObjects(data)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	for _, u := range objs {
		if namespace != "" {
			u.SetNamespace(namespace)
		}
		if err := createIfMissing(ctx, h.Env.Client, u); err != nil {
			return err
		}
	}
	return nil
}

func createIfMissing(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// harvesterSettings are the settings Harvester's own registry (pkg/settings) holds, with their
// defaults, as its settings controller receives them (Provider.SetAll).
func harvesterSettings() []settings.Setting {
	var all settingsCollector
	_ = settings.SetProvider(&all) // only calls SetAll
	out := make([]settings.Setting, 0, len(all))
	for _, s := range all {
		out = append(out, s)
	}
	return out
}

type settingsCollector map[string]settings.Setting

func (c *settingsCollector) SetAll(m map[string]settings.Setting) error {
	*c = make(settingsCollector, len(m))
	for k, v := range m {
		(*c)[k] = v
	}
	return nil
}
func (c *settingsCollector) Get(string) string               { return "" }
func (c *settingsCollector) Set(string, string) error        { return nil }
func (c *settingsCollector) SetIfUnset(string, string) error { return nil }
