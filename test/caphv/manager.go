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

package caphv

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// What CAPHV's release installs in the management cluster.
const (
	Namespace  = "caphv-system"
	Deployment = "caphv-controller-manager"
	Webhook    = "caphv-validating-webhook-configuration"
	Version    = "v0.10.1"
)

// Kind is a GVK of CAPHV's kinds in their storage version.
func Kind(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: Group, Version: "v1beta1", Kind: kind}
}

// Manager plays CAPHV v0.10.1's manager for what a take-over meets: it pauses as Cluster API's
// paused helper does (a Paused condition on both kinds), makes a cluster's control-plane load
// balancer and sets its endpoint, and makes each machine's cloud-init Secret and VM, its
// addresses and its providerID, as CAPHV's reconcilers do and in their order (names, labels,
// annotations, devices, volume claim templates; the providerID once the guest has the machine's
// Node). It acts only while its Deployment has a replica, as CAPHV's pod would. It does not
// delete: no test deletes a cluster under CAPHV. It looks every 250 ms where CAPHV requeues
// after 30 s or a minute: the order is CAPHV's, the waits are shortened for the tests.
type Manager struct {
	Management, Harvester client.Client

	mu     sync.Mutex
	guests map[string]client.Client // by kubeconfig
}

// Run acts until ctx ends, while the Deployment has a replica (as its pod would run).
func (m *Manager) Run(ctx context.Context) error {
	for {
		stopped, err := m.stopped(ctx)
		if err == nil && !stopped {
			err = m.reconcile(ctx)
		}
		if err != nil && ctx.Err() == nil {
			fmt.Printf("caphv fixture: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (m *Manager) stopped(ctx context.Context) (bool, error) {
	d := &appsv1.Deployment{}
	if err := m.Management.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Deployment}, d); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	return d.Spec.Replicas != nil && *d.Spec.Replicas == 0, nil
}

func (m *Manager) reconcile(ctx context.Context) error {
	clusters := &unstructured.UnstructuredList{}
	clusters.SetGroupVersionKind(Kind("HarvesterClusterList"))
	if err := m.Management.List(ctx, clusters); err != nil {
		return err
	}
	for i := range clusters.Items {
		if err := m.reconcileCluster(ctx, &clusters.Items[i]); err != nil {
			return err
		}
	}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(Kind("HarvesterMachineList"))
	if err := m.Management.List(ctx, machines); err != nil {
		return err
	}
	for i := range machines.Items {
		if err := m.reconcileMachine(ctx, &machines.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// owner is the Cluster API object of kind that owns o, or nil.
func (m *Manager) owner(ctx context.Context, o *unstructured.Unstructured, kind string, into client.Object) (bool, error) {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == kind {
			err := m.Management.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, into)
			return err == nil, client.IgnoreNotFound(err)
		}
	}
	return false, nil
}

// paused sets the Paused condition as Cluster API's paused helper does and tells whether to stop.
func (m *Manager) paused(ctx context.Context, o *unstructured.Unstructured, cluster *clusterv1.Cluster) (bool, error) {
	paused := ptr.Deref(cluster.Spec.Paused, false)
	want := metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason}
	if paused {
		want = metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue, Reason: clusterv1.PausedReason, Message: "Cluster spec.paused is set to true"}
	}
	return paused, m.setCondition(ctx, o, want)
}

func (m *Manager) setCondition(ctx context.Context, o *unstructured.Unstructured, want metav1.Condition) error {
	conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for i, c := range conditions {
		c, _ := c.(map[string]any)
		if c["type"] != want.Type {
			continue
		}
		if c["status"] == string(want.Status) && c["reason"] == want.Reason {
			return nil
		}
		conditions = append(conditions[:i], conditions[i+1:]...)
		break
	}
	conditions = append(conditions, map[string]any{"type": want.Type, "status": string(want.Status), "reason": want.Reason, "message": want.Message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	if err := unstructured.SetNestedSlice(o.Object, conditions, "status", "conditions"); err != nil {
		return err
	}
	return m.Management.Status().Update(ctx, o)
}

func (m *Manager) addFinalizer(ctx context.Context, o *unstructured.Unstructured, finalizer string) error {
	for _, f := range o.GetFinalizers() {
		if f == finalizer {
			return nil
		}
	}
	o.SetFinalizers(append(o.GetFinalizers(), finalizer))
	return m.Management.Update(ctx, o)
}

func (m *Manager) reconcileCluster(ctx context.Context, hc *unstructured.Unstructured) error {
	cluster := &clusterv1.Cluster{}
	if ok, err := m.owner(ctx, hc, "Cluster", cluster); !ok || err != nil {
		return err
	}
	if paused, err := m.paused(ctx, hc, cluster); paused || err != nil {
		return err
	}
	if err := m.addFinalizer(ctx, hc, "harvester.infrastructure.cluster.x-k8s.io/finalizer"); err != nil {
		return err
	}
	if ready, _, _ := unstructured.NestedBool(hc.Object, "status", "ready"); ready {
		return nil
	}
	target, _, _ := unstructured.NestedString(hc.Object, "spec", "targetNamespace")
	ipam, _, _ := unstructured.NestedString(hc.Object, "spec", "loadBalancerConfig", "ipamType")
	pool, _, _ := unstructured.NestedString(hc.Object, "spec", "loadBalancerConfig", "ipPoolRef")
	name := LoadBalancerName(hc.GetNamespace(), hc.GetName())
	lb := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: name},
		Spec: lbv1.LoadBalancerSpec{
			Description:  "Load Balancer for cluster " + hc.GetName(),
			WorkloadType: lbv1.VM,
			IPAM:         lbv1.IPAM(ipam),
			IPPool:       pool,
			Listeners:    []lbv1.Listener{{Name: "api-server", Port: 6443, Protocol: corev1.ProtocolTCP, BackendPort: 6443}},
			HealthCheck:  &lbv1.HealthCheck{Port: 6443, SuccessThreshold: 1, FailureThreshold: 3, PeriodSeconds: 30, TimeoutSeconds: 60},
			BackendServerSelector: map[string][]string{
				MachineTypeLabel: {"controlplane-" + cluster.Name},
			},
		},
	}
	if err := m.Harvester.Create(ctx, lb); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating load balancer %s/%s: %w", target, name, err)
	}
	if err := m.Harvester.Get(ctx, client.ObjectKeyFromObject(lb), lb); err != nil || lb.Status.Address == "" {
		return err
	}
	if err := unstructured.SetNestedMap(hc.Object, map[string]any{"host": lb.Status.Address, "port": int64(6443)}, "spec", "controlPlaneEndpoint"); err != nil {
		return err
	}
	if err := m.Management.Update(ctx, hc); err != nil {
		return err
	}
	_ = unstructured.SetNestedField(hc.Object, true, "status", "ready")
	_ = unstructured.SetNestedField(hc.Object, true, "status", "initialization", "provisioned")
	if err := m.Management.Status().Update(ctx, hc); err != nil {
		return err
	}
	return m.setCondition(ctx, hc, metav1.Condition{Type: "LoadBalancerReady", Status: metav1.ConditionTrue, Reason: "LoadBalancerReady"})
}

// MachineTypeLabel selects a cluster's control-plane VMs for CAPHV's load balancer.
const MachineTypeLabel = "harvestercluster/machinetype"

// LoadBalancerName is CAPHV's name of a cluster's control-plane load balancer, for the names
// the tests use (lower-case DNS labels): `<namespace>-<name>-lb`.
func LoadBalancerName(namespace, name string) string { return namespace + "-" + name + "-lb" }

// reconcileMachine does what CAPHV v0.10.1's machine reconciler does, in its order: once the
// cluster's infrastructure is ready and the Machine has bootstrap data, it makes the cloud-init
// Secret and the VM (MachineCreated) and reports ready without a providerID; once the VM runs,
// it reports the VMI's addresses, and it sets spec.providerID only when the guest has a Node of
// the machine's name (that Node's providerID, or harvester://<VM UID> when it has none). So Cluster
// API sees the providerID after the Node exists, as with CAPHV. The status is written from what
// it finds on every look, so a write that failed is made again.
func (m *Manager) reconcileMachine(ctx context.Context, hm *unstructured.Unstructured) error {
	machine := &clusterv1.Machine{}
	if ok, err := m.owner(ctx, hm, "Machine", machine); !ok || err != nil {
		return err
	}
	cluster := &clusterv1.Cluster{}
	if err := m.Management.Get(ctx, client.ObjectKey{Namespace: hm.GetNamespace(), Name: machine.Spec.ClusterName}, cluster); err != nil {
		return client.IgnoreNotFound(err)
	}
	if paused, err := m.paused(ctx, hm, cluster); paused || err != nil {
		return err
	}
	if err := m.addFinalizer(ctx, hm, "harvestermachine.infrastructure.cluster.x-k8s.io/finalizer"); err != nil {
		return err
	}
	hc := &unstructured.Unstructured{}
	hc.SetGroupVersionKind(Kind("HarvesterCluster"))
	if err := m.Management.Get(ctx, client.ObjectKey{Namespace: hm.GetNamespace(), Name: cluster.Spec.InfrastructureRef.Name}, hc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ready, _, _ := unstructured.NestedBool(hc.Object, "status", "ready"); !ready || machine.Spec.Bootstrap.DataSecretName == nil {
		return m.setReady(ctx, hm, false, nil)
	}
	target, _, _ := unstructured.NestedString(hc.Object, "spec", "targetNamespace")
	vm := &kubevirtv1.VirtualMachine{}
	err := m.Harvester.Get(ctx, client.ObjectKey{Namespace: target, Name: hm.GetName()}, vm)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if apierrors.IsNotFound(err) {
		if created, _ := conditionTrue(hm, "MachineCreated"); created {
			return m.setReady(ctx, hm, false, nil) // CAPHV: "VM not found in Harvester"
		}
		if err := m.createVM(ctx, hm, machine, cluster.Name, target); err != nil {
			return err
		}
		if err := m.setCondition(ctx, hm, metav1.Condition{Type: "MachineCreated", Status: metav1.ConditionTrue, Reason: "MachineCreated"}); err != nil {
			return err
		}
		return m.setReady(ctx, hm, true, nil)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := m.Harvester.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return m.setReady(ctx, hm, false, nil) // not running yet
		}
		return err
	}
	var addresses []any
	for _, nic := range vmi.Status.Interfaces {
		addresses = append(addresses, map[string]any{"type": string(clusterv1.MachineExternalIP), "address": nic.IP})
	}
	if id, _, _ := unstructured.NestedString(hm.Object, "spec", "providerID"); id == "" {
		node, err := m.guestNode(ctx, cluster, hm.GetName())
		if err != nil || node == nil {
			if err != nil {
				fmt.Printf("caphv fixture: waiting for the Node of %s/%s: %v\n", hm.GetNamespace(), hm.GetName(), err)
			}
			return m.setReady(ctx, hm, false, addresses)
		}
		id = node.Spec.ProviderID
		if id == "" {
			id = "harvester://" + string(vm.UID)
		}
		if err := unstructured.SetNestedField(hm.Object, id, "spec", "providerID"); err != nil {
			return err
		}
		if err := m.Management.Update(ctx, hm); err != nil {
			return err
		}
	}
	return m.setReady(ctx, hm, true, addresses)
}

// createVM makes a machine's cloud-init Secret and VM on Harvester, as CAPHV does.
func (m *Manager) createVM(ctx context.Context, hm *unstructured.Unstructured, machine *clusterv1.Machine, cluster, target string) error {
	bootstrap := &corev1.Secret{}
	if err := m.Management.Get(ctx, client.ObjectKey{Namespace: hm.GetNamespace(), Name: *machine.Spec.Bootstrap.DataSecretName}, bootstrap); err != nil {
		return client.IgnoreNotFound(err)
	}
	spec := &machineSpec{}
	raw, _ := json.Marshal(hm.Object["spec"])
	if err := json.Unmarshal(raw, spec); err != nil {
		return err
	}
	userData, err := mergedUserData(bootstrap.Data["value"])
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: hm.GetName() + "-cloud-init"}, Data: map[string][]byte{"userdata": userData}}
	if err := m.Harvester.Create(ctx, secret); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	_, controlPlane := hm.GetLabels()[clusterv1.MachineControlPlaneLabel]
	vm := buildVM(hm.GetName(), target, cluster, controlPlane, spec)
	if err := m.Harvester.Create(ctx, vm); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating VM %s/%s: %w", target, vm.Name, err)
	}
	return nil
}

// setReady writes the machine's status.ready (and initialization.provisioned, which Cluster API
// reads for a v1beta2 contract) and its addresses, when they differ from what it has.
func (m *Manager) setReady(ctx context.Context, hm *unstructured.Unstructured, ready bool, addresses []any) error {
	was, _, _ := unstructured.NestedBool(hm.Object, "status", "ready")
	provisioned, _, _ := unstructured.NestedBool(hm.Object, "status", "initialization", "provisioned")
	had, _, _ := unstructured.NestedSlice(hm.Object, "status", "addresses")
	if was == ready && provisioned == ready && (addresses == nil || equality.Semantic.DeepEqual(had, addresses)) {
		return nil
	}
	_ = unstructured.SetNestedField(hm.Object, ready, "status", "ready")
	_ = unstructured.SetNestedField(hm.Object, ready, "status", "initialization", "provisioned")
	if addresses != nil {
		_ = unstructured.SetNestedSlice(hm.Object, addresses, "status", "addresses")
	}
	return m.Management.Status().Update(ctx, hm)
}

// conditionTrue tells whether o has the condition t with status True.
func conditionTrue(o *unstructured.Unstructured, t string) (bool, error) {
	conditions, _, err := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == t {
			return c["status"] == string(metav1.ConditionTrue), err
		}
	}
	return false, err
}

// guestNode reads the Node name in the cluster's guest, with the kubeconfig Cluster API keeps
// for it (its <cluster>-kubeconfig Secret), as CAPHV does; nil when the guest has none yet.
func (m *Manager) guestNode(ctx context.Context, cluster *clusterv1.Cluster, name string) (*corev1.Node, error) {
	secret := &corev1.Secret{}
	if err := m.Management.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Name + "-kubeconfig"}, secret); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	c, err := m.guestClient(secret.Data["value"])
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return node, nil
}

// guestClient is a client of the guest a kubeconfig names, made once per kubeconfig.
func (m *Manager) guestClient(kubeconfig []byte) (client.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.guests[string(kubeconfig)]; ok {
		return c, nil
	}
	config, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(config, client.Options{})
	if err != nil {
		return nil, err
	}
	if m.guests == nil {
		m.guests = map[string]client.Client{}
	}
	m.guests[string(kubeconfig)] = c
	return c, nil
}

// machineSpec is the part of CAPHV's HarvesterMachine spec the fixture reads.
type machineSpec struct {
	CPU     uint32 `json:"cpu"`
	Memory  string `json:"memory"`
	Volumes []struct {
		VolumeType   string             `json:"volumeType"`
		ImageName    string             `json:"imageName"`
		StorageClass string             `json:"storageClass"`
		VolumeSize   *resource.Quantity `json:"volumeSize"`
		BootOrder    uint               `json:"bootOrder"`
	} `json:"volumes"`
	Networks []string `json:"networks"`
}

// mergedUserData is CAPHV's user data: its base document (the guest agent and iptables
// installed), then the bootstrap data, lists concatenated, re-marshalled.
func mergedUserData(bootstrap []byte) ([]byte, error) {
	merged := map[string]any{
		"package_update": true,
		"packages":       []any{"qemu-guest-agent", "iptables"},
		"runcmd":         []any{[]any{"systemctl", "enable", "--now", "qemu-guest-agent.service"}},
	}
	data := map[string]any{}
	if err := yaml.Unmarshal(bootstrap, &data); err != nil {
		return nil, fmt.Errorf("CAPHV reads bootstrap data as YAML: %w", err)
	}
	for k, v := range data {
		if list, ok := v.([]any); ok {
			if have, ok := merged[k].([]any); ok {
				merged[k] = append(have, list...)
				continue
			}
		}
		merged[k] = v
	}
	out, err := yaml.Marshal(merged)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), out...), nil
}

// buildVM is the VM CAPHV's machine reconciler creates.
func buildVM(name, target, cluster string, controlPlane bool, spec *machineSpec) *kubevirtv1.VirtualMachine {
	labels := map[string]string{"harvesterhci.io/creator": "harvester", "harvesterhci.io/vmName": name, "harvesterhci.io/vmNamePrefix": name}
	if controlPlane {
		labels[MachineTypeLabel] = "controlplane-" + cluster
	}
	var claims []corev1.PersistentVolumeClaim
	var claimNames []string
	var disks []kubevirtv1.Disk
	var volumes []kubevirtv1.Volume
	for i, v := range spec.Volumes {
		claim := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-disk-%d-%s", name, i, randomID()), Annotations: map[string]string{}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				VolumeMode:  ptr.To(corev1.PersistentVolumeBlock),
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *v.VolumeSize}},
			},
		}
		if v.VolumeType == "image" {
			image := v.ImageName[strings.Index(v.ImageName, "/")+1:]
			claim.Annotations["harvesterhci.io/imageId"] = v.ImageName
			claim.Spec.StorageClassName = ptr.To("longhorn-" + image)
		} else {
			claim.Spec.StorageClassName = ptr.To(v.StorageClass)
		}
		claims = append(claims, claim)
		claimNames = append(claimNames, claim.Name)
		disk := fmt.Sprintf("disk-%d", i)
		d := kubevirtv1.Disk{Name: disk, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}
		if v.BootOrder > 0 {
			d.BootOrder = ptr.To(v.BootOrder)
		}
		disks = append(disks, d)
		volumes = append(volumes, kubevirtv1.Volume{Name: disk, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}})
	}
	disks = append(disks, kubevirtv1.Disk{Name: "cloudinitdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
	secretRef := &corev1.LocalObjectReference{Name: name + "-cloud-init"}
	volumes = append(volumes, kubevirtv1.Volume{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{
		CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: secretRef, NetworkDataSecretRef: secretRef}}})
	var interfaces []kubevirtv1.Interface
	var networks []kubevirtv1.Network
	for i, n := range spec.Networks {
		nic := fmt.Sprintf("nic-%d", i+1)
		iface := *kubevirtv1.DefaultBridgeNetworkInterface()
		iface.Name, iface.Model = nic, "virtio"
		interfaces = append(interfaces, iface)
		networks = append(networks, kubevirtv1.Network{Name: nic, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: n}}})
	}
	claimsJSON, _ := json.Marshal(claims)
	namesJSON, _ := json.Marshal(claimNames)
	memory := resource.MustParse(spec.Memory)
	templateAnnotations := map[string]string{"harvesterhci.io/diskNames": string(namesJSON), "harvesterhci.io/sshNames": "[]", MachineTypeLabel: "controlplane-" + cluster}
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: name, Labels: labels, Annotations: map[string]string{
			"harvesterhci.io/volumeClaimTemplates": string(claimsJSON), "networks.harvesterhci.io/ips": "[]",
		}},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: templateAnnotations},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Hostname: name,
					Domain: kubevirtv1.DomainSpec{
						CPU:    &kubevirtv1.CPU{Cores: spec.CPU, Sockets: 1, Threads: 1},
						Memory: &kubevirtv1.Memory{Guest: &memory},
						Resources: kubevirtv1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceMemory: memory},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: memory, corev1.ResourceCPU: *resource.NewQuantity(int64(spec.CPU), resource.DecimalSI)},
						},
						Devices: kubevirtv1.Devices{
							Inputs:     []kubevirtv1.Input{{Name: "tablet", Type: kubevirtv1.InputTypeTablet, Bus: kubevirtv1.InputBusUSB}},
							Disks:      disks,
							Interfaces: interfaces,
						},
					},
					Networks: networks,
					Volumes:  volumes,
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"harvesterhci.io/vmNamePrefix": name}}},
					}}}},
				},
			},
		},
	}
}

// randomID is CAPHV's claim suffix: three letters, a digit, a letter.
func randomID() string {
	const letters, digits = "abcdefghijklmnopqrstuvwxyz", "0123456789"
	b := []byte{letters[rand.IntN(26)], letters[rand.IntN(26)], letters[rand.IntN(26)], digits[rand.IntN(10)], letters[rand.IntN(26)]}
	return string(b)
}
