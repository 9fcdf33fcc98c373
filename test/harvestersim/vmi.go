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
	"crypto/sha256"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"
)

// Labels by which Harvester recognises guest-cluster VMs; on their VMIs it keeps the host's
// topology labels as annotations (HARVESTER.md, "Harvester conventions").
const (
	LabelCreator               = "harvesterhci.io/creator"
	CreatorDockerMachineDriver = "docker-machine-driver-harvester"
	LabelGuestCluster          = "guestcluster.harvesterhci.io/name"

	labelNodeName = "kubevirt.io/nodeName"
)

// vmiReconciler plays virt-handler and qemu-guest-agent for VMIs: once KubeVirt's virt-controller
// hands a VMI to its host (its launcher pod runs there: launcher.go), it runs the domain, and once
// the guest has "booted" reports its NICs' addresses.
type vmiReconciler struct {
	client.Client
	h *Harvester
}

func (r *vmiReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-virtualmachineinstance").
		For(&kubevirtv1.VirtualMachineInstance{}).
		Complete(r)
}

func (r *vmiReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Get(ctx, req.NamespacedName, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			r.h.ips.release(req.Namespace + "/" + req.Name + "/")
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vmi.DeletionTimestamp != nil {
		return ctrl.Result{}, r.stopped(ctx, vmi)
	}
	before := vmi.DeepCopy()
	var requeue time.Duration

	switch {
	case vmi.Status.NodeName == "":
		// virt-controller hands the VMI to its host (Scheduled) once its launcher pod runs.
		return ctrl.Result{}, nil
	case vmi.Status.Phase != kubevirtv1.Running:
		r.run(vmi)
		requeue = r.h.Options.BootDelay
	default:
		if booted, wait := r.booted(vmi); !booted {
			requeue = wait
		} else if !r.h.Faults.ipWithheld(vmi.Namespace, vmiOwnerName(vmi)) {
			network, err := r.networkData(ctx, vmi)
			if err != nil {
				return ctrl.Result{}, err
			}
			if err := r.reportAddresses(vmi, network); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.applyTopology(ctx, vmi); err != nil {
		return ctrl.Result{}, err
	}
	if !equalJSON(before, vmi) {
		// The update's own watch event brings the VMI to its next step.
		if err := r.Update(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// stopped plays virt-handler for a VMI being deleted: the guest is shut down (at once: the
// simulated guests have nothing to flush) and the VMI is final; virt-controller then deletes the
// launcher pod and lifts KubeVirt's foreground finalizer, which KubeVirt's VMI mutator puts on
// every VMI at creation.
func (r *vmiReconciler) stopped(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	if !controllerutil.ContainsFinalizer(vmi, kubevirtv1.VirtualMachineInstanceFinalizer) || vmi.IsFinal() {
		return nil
	}
	vmi.Status.Phase = kubevirtv1.Succeeded
	return client.IgnoreNotFound(r.Update(ctx, vmi))
}

// vmiOwnerName is the VM a VMI belongs to (same name, by KubeVirt's convention).
func vmiOwnerName(vmi *kubevirtv1.VirtualMachineInstance) string { return vmi.Name }

// run starts the domain: Running, NICs known to the domain (no addresses until the guest agent
// reports them), Ready and LiveMigratable.
func (r *vmiReconciler) run(vmi *kubevirtv1.VirtualMachineInstance) {
	vmi.Status.Phase = kubevirtv1.Running
	// virt-handler reports the launcher's SELinux context; "none" where SELinux is off.
	// virt-controller copies it to a migration's target pod and refuses to make one without it.
	vmi.Status.SelinuxContext = "none"
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: metav1.Now()})
	// virt-controller owns each interface's pod interface name and its "multus-status" source
	// (from the launcher pod's network-status annotation): kept as it wrote them.
	known := map[string]kubevirtv1.VirtualMachineInstanceNetworkInterface{}
	for _, iface := range vmi.Status.Interfaces {
		known[iface.Name] = iface
	}
	vmi.Status.Interfaces = nil
	for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
		old := known[iface.Name]
		vmi.Status.Interfaces = append(vmi.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{
			Name:             iface.Name,
			MAC:              macFor(vmi, iface),
			InterfaceName:    fmt.Sprintf("enp%ds0", i+1),
			PodInterfaceName: old.PodInterfaceName,
			InfoSource:       withMultusSource("domain", old.InfoSource),
			QueueCount:       1,
		})
	}
	setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue})
	setVMICondition(vmi, liveMigratable(vmi))
}

// liveMigratable is virt-handler's LiveMigratable condition, for what the bed's VMs can have
// (kubevirt pkg/virt-handler/vm.go, calculateLiveMigrationCondition): a PCI host device or GPU
// pins the VM to its host, and so does a volume claim that is not ReadWriteMany (every claim
// the provider makes is).
func liveMigratable(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineInstanceCondition {
	if len(vmi.Spec.Domain.Devices.HostDevices) > 0 || len(vmi.Spec.Domain.Devices.GPUs) > 0 {
		return kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable,
			Status: corev1.ConditionFalse, Reason: kubevirtv1.VirtualMachineInstanceReasonHostDeviceNotMigratable,
			Message: "VMI uses a PCI host devices"}
	}
	return kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}
}

// withMultusSource is virt-handler's sources of an interface's status, plus "multus-status" where
// virt-controller had put it.
func withMultusSource(sources, current string) string {
	for _, s := range strings.Split(current, ",") {
		if strings.TrimSpace(s) == "multus-status" {
			return sources + ", multus-status"
		}
	}
	return sources
}

// booted tells whether the guest finished booting (BootDelay after Running), else how long to wait.
func (r *vmiReconciler) booted(vmi *kubevirtv1.VirtualMachineInstance) (bool, time.Duration) {
	for _, t := range vmi.Status.PhaseTransitionTimestamps {
		if t.Phase == kubevirtv1.Running {
			if left := time.Until(t.PhaseTransitionTimestamp.Add(r.h.Options.BootDelay)); left > 0 {
				return false, left
			}
			return true, 0
		}
	}
	return true, 0
}

// reportAddresses is qemu-guest-agent's report: each NIC's addresses (the first IPv4 as
// ipAddress, all of them, link-local included, in ipAddresses), plus interfaces the guest has
// that are not in the VMI spec (a CNI bridge, as on a Kubernetes node).
// A NIC that the guest's network-data gives static addresses (matched by its MAC, as cloud-init
// matches) reports those instead of a DHCP lease. (The guest's name for a NIC stays the domain's:
// the provider does not read it.)
func (r *vmiReconciler) reportAddresses(vmi *kubevirtv1.VirtualMachineInstance, guest guestNetwork) error {
	networks := map[string]kubevirtv1.Network{}
	for _, n := range vmi.Spec.Networks {
		networks[n.Name] = n
	}
	var ifaces []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for _, iface := range vmi.Status.Interfaces {
		if iface.Name == "" {
			continue // a guest-only interface from an earlier report
		}
		network, ok := networks[iface.Name]
		if !ok {
			continue
		}
		key := "pod"
		if network.Multus != nil {
			key = network.Multus.NetworkName
			if !strings.Contains(key, "/") {
				key = vmi.Namespace + "/" + key
			}
		}
		var addrs []netip.Addr
		if ips, ok := guest.addresses[strings.ToLower(iface.MAC)]; ok {
			for _, ip := range ips {
				addrs = append(addrs, netip.MustParseAddr(ip))
			}
		} else if key != "pod" {
			var err error
			if addrs, err = r.h.ips.lease(key, vmi.Namespace+"/"+vmi.Name+"/"+iface.Name); err != nil {
				return err
			}
		}
		iface.IPs = nil
		for _, a := range addrs {
			iface.IPs = append(iface.IPs, a.String())
		}
		if len(iface.IPs) > 0 {
			iface.IP = iface.IPs[0]
		}
		iface.IPs = append(iface.IPs, linkLocal(iface.MAC))
		iface.InfoSource = withMultusSource("domain, guest-agent", iface.InfoSource)
		ifaces = append(ifaces, iface)
	}
	ifaces = append(ifaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{
		InterfaceName: "cni0", IP: "10.42.0.1", IPs: []string{"10.42.0.1"}, InfoSource: "guest-agent",
	})
	vmi.Status.Interfaces = ifaces
	setVMICondition(vmi, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue})
	vmi.Status.GuestOSInfo = kubevirtv1.VirtualMachineInstanceGuestOSInfo{Name: "Ubuntu", ID: "ubuntu", VersionID: "24.04", KernelRelease: "6.8.0-simulated"}
	return nil
}

// applyTopology copies the host's topology labels onto guest-cluster VMIs as annotations, as
// Harvester does for VMs labelled as guest-cluster VMs.
func (r *vmiReconciler) applyTopology(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	if vmi.Status.NodeName == "" {
		return nil
	}
	if vmi.Labels[LabelCreator] != CreatorDockerMachineDriver && vmi.Labels[LabelGuestCluster] == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: vmi.Status.NodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	for _, key := range []string{LabelZone, LabelRegion, LabelHostname} {
		if v, ok := node.Labels[key]; ok {
			vmi.Annotations[key] = v
		} else {
			delete(vmi.Annotations, key)
		}
	}
	return nil
}

// macFor returns the MAC of an interface: the spec's, or a stable one in QEMU's 52:54:00 range.
func macFor(vmi *kubevirtv1.VirtualMachineInstance, iface kubevirtv1.Interface) string {
	if iface.MacAddress != "" {
		return iface.MacAddress
	}
	sum := sha256.Sum256([]byte(vmi.Namespace + "/" + vmi.Name + "/" + iface.Name))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", sum[0], sum[1], sum[2])
}

// linkLocal is the EUI-64 IPv6 link-local address a guest derives from its MAC.
func linkLocal(mac string) string {
	var b [6]byte
	if _, err := fmt.Sscanf(mac, "%02x:%02x:%02x:%02x:%02x:%02x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]); err != nil {
		return "fe80::1"
	}
	addr := netip.AddrFrom16([16]byte{0xfe, 0x80, 8: b[0] ^ 2, b[1], b[2], 0xff, 0xfe, b[3], b[4], b[5]})
	return addr.String()
}

func setVMICondition(vmi *kubevirtv1.VirtualMachineInstance, c kubevirtv1.VirtualMachineInstanceCondition) {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == c.Type {
			if vmi.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = vmi.Status.Conditions[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.Now()
			}
			vmi.Status.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	vmi.Status.Conditions = append(vmi.Status.Conditions, c)
}

// guestNetwork is what cloud-init in the guest makes of a VM's network-data (version 1 or 2),
// by the MAC (lower case) of each NIC an entry matches: the static addresses it gives the NIC,
// and the name it gives it (v2's set-name, v1's name). A real guest's reading of the same data
// is compared with it in realguest_test.go.
type guestNetwork struct {
	addresses map[string][]string
	names     map[string]string
}

// networkData reads the VM's network-data Secret; a VM without one has an empty guestNetwork.
func (r *vmiReconciler) networkData(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (guestNetwork, error) {
	var secret string
	for _, v := range vmi.Spec.Volumes {
		if v.CloudInitNoCloud != nil && v.CloudInitNoCloud.NetworkDataSecretRef != nil {
			secret = v.CloudInitNoCloud.NetworkDataSecretRef.Name
		}
	}
	if secret == "" {
		return guestNetwork{}, nil
	}
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: secret}, s); err != nil {
		return guestNetwork{}, client.IgnoreNotFound(err)
	}
	return readNetworkData(s.Data["networkdata"]), nil
}

// readNetworkData is the simulated guest's reading of network-data; data that is not
// network-config gives nothing (the guest's NICs fall back to DHCP).
func readNetworkData(networkData []byte) guestNetwork {
	var config struct {
		Version   int `json:"version"`
		Ethernets map[string]struct {
			Match struct {
				MACAddress string `json:"macaddress"`
			} `json:"match"`
			SetName   string   `json:"set-name"`
			Addresses []string `json:"addresses"`
		} `json:"ethernets"`
		// Version 1: physical entries with their MAC and static subnets.
		Config []struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			MACAddress string `json:"mac_address"`
			Subnets    []struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			} `json:"subnets"`
		} `json:"config"`
	}
	out := guestNetwork{addresses: map[string][]string{}, names: map[string]string{}}
	if err := yaml.Unmarshal(networkData, &config); err != nil || (config.Version != 1 && config.Version != 2) {
		return out
	}
	add := func(mac, cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil && mac != "" {
			out.addresses[strings.ToLower(mac)] = append(out.addresses[strings.ToLower(mac)], p.Addr().String())
		}
	}
	name := func(mac, name string) {
		if mac != "" && name != "" {
			out.names[strings.ToLower(mac)] = name
		}
	}
	for _, e := range config.Ethernets {
		name(e.Match.MACAddress, e.SetName)
		for _, a := range e.Addresses {
			add(e.Match.MACAddress, a)
		}
	}
	for _, c := range config.Config {
		if c.Type != "physical" {
			continue
		}
		name(c.MACAddress, c.Name)
		for _, sub := range c.Subnets {
			if sub.Type == "static" || sub.Type == "static6" {
				add(c.MACAddress, sub.Address)
			}
		}
	}
	return out
}
