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

package v1alpha1

// With the webhooks on, the CRD schema refuses a floor violation before the validating webhook
// sees it, so the webhook's own checks (what holds when the CRD of an older release is installed
// with this manager) are tested here, by calling them.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/format"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func validMachineSpec() HarvesterMachineSpec {
	return HarvesterMachineSpec{
		CPU:      2,
		Memory:   resource.MustParse("4Gi"),
		Disks:    []Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []Network{{NetworkName: "default/vlan10"}},
	}
}

// fields returns "path: type" of each error, e.g. "spec.cpu: Invalid value".
func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestWebhookRefusesBelowTheFloor(t *testing.T) {
	spec := field.NewPath("spec")
	cases := []struct {
		name   string
		mutate func(*HarvesterMachineSpec)
		want   string
	}{
		{"too many CPUs", func(s *HarvesterMachineSpec) { s.CPU = MaxCPU + 1 }, "spec.cpu: Invalid value"},
		{"memory below the floor", func(s *HarvesterMachineSpec) { s.Memory = resource.MustParse("127Mi") }, "spec.memory: Invalid value"},
		{"disk below the floor", func(s *HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("1023Mi") }, "spec.disks[0].size: Invalid value"},
		{"cloud-init disk name", func(s *HarvesterMachineSpec) { s.Disks[0].Name = CloudInitDiskName }, "spec.disks[0].name: Invalid value"},
		{"pod affinity across namespaces", func(s *HarvesterMachineSpec) {
			s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname", NamespaceSelector: &metav1.LabelSelector{}},
			}}}
		}, "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector: Forbidden"},
		{"pod anti-affinity naming a namespace", func(s *HarvesterMachineSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"tenant-b"}}},
			}}}
		}, "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.namespaces: Forbidden"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := validMachineSpec()
			tc.mutate(&s)
			g.Expect(fields(s.validate(spec))).To(ConsistOf(tc.want))
		})
	}

	g := NewWithT(t)
	s := validMachineSpec()
	s.CPU, s.Memory, s.Disks[0].Size = MaxCPU, resource.MustParse(MinMemory), resource.MustParse(MinDiskSize)
	// Pod affinity within the VM's own namespace, and node affinity, are the user's to set.
	s.Affinity = &corev1.Affinity{
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		}},
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
		}}},
	}
	g.Expect(s.validate(spec)).To(BeEmpty(), "the floors themselves are allowed")
}

func TestWebhookRefusesWhatTemplatesWouldCopy(t *testing.T) {
	g := NewWithT(t)
	s := validMachineSpec()
	s.ProviderID = ProviderIDPrefix + "6f1a5c1e-0000-4000-8000-000000000001"
	s.Networks = append(s.Networks, Network{NetworkName: "default/vlan20", MACAddress: "52:54:00:00:00:01"})
	g.Expect(s.validate(templateSpecPath)).To(BeEmpty(), "a machine may have both")
	g.Expect(fields(s.validateAsTemplate(templateSpecPath))).To(ConsistOf(
		"spec.template.spec.providerID: Forbidden",
		"spec.template.spec.networks[1].macAddress: Forbidden",
	))
}

func TestWebhookRefusesSystemNamespaces(t *testing.T) {
	spec := field.NewPath("spec")
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "harvester-system", "harvester-public",
		"longhorn-system", "cattle-system", "cattle-fleet-system", "fleet-default", "fleet-local"} {
		g := NewWithT(t)
		s := HarvesterClusterSpec{IdentitySecret: SecretReference{Name: "identity"}, TargetNamespace: ns}
		g.Expect(fields(s.validate(spec))).To(ConsistOf("spec.targetNamespace: Invalid value"), ns)
	}
	for _, ns := range []string{"default", "guests", "kube-guests", "cattle", "fleet"} {
		g := NewWithT(t)
		s := HarvesterClusterSpec{IdentitySecret: SecretReference{Name: "identity"}, TargetNamespace: ns}
		g.Expect(s.validate(spec)).To(BeEmpty(), ns)
	}
}

// The CRD's rules repeat the webhook's lists (markers cannot name Go values): this keeps them
// from drifting apart.
func TestCRDRulesNameWhatTheWebhookRefuses(t *testing.T) {
	g := NewWithT(t)
	// A CRD is long; the expected substring says enough.
	defer func(old int) { format.MaxLength = old }(format.MaxLength)
	format.MaxLength = 200
	read := func(plural string) string {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "infrastructure.cluster.x-k8s.io_"+plural+".yaml"))
		g.Expect(err).NotTo(HaveOccurred())
		// Long rules are folded over several lines, and quoted with '' for ' when they start with
		// a character YAML reserves.
		return strings.ReplaceAll(strings.Join(strings.Fields(string(data)), " "), "''", "'")
	}
	for _, plural := range []string{"harvesterclusters", "harvesterclustertemplates"} {
		crd := read(plural)
		for ns := range systemNamespaces {
			g.Expect(crd).To(ContainSubstring("'"+ns+"'"), plural)
		}
		for prefix := range systemNamespacePrefixes {
			g.Expect(crd).To(ContainSubstring("startsWith('"+prefix+"')"), plural)
		}
	}
	for _, plural := range []string{"harvestermachines", "harvestermachinetemplates"} {
		crd := read(plural)
		g.Expect(crd).To(ContainSubstring("rule: self != '"+CloudInitDiskName+"'"), plural)
		g.Expect(crd).To(ContainSubstring("quantity('"+MinMemory+"')"), plural)
		g.Expect(crd).To(ContainSubstring("quantity('"+MinDiskSize+"')"), plural)
		g.Expect(crd).To(MatchRegexp(`maximum: %d minimum: 1`, MaxCPU), plural)
	}
}

// A rule added after an object was stored must not refuse the updates that leave it alone:
// otherwise even removing the object's finalizer, and so its deletion, would be refused.
func TestWebhooksRatchetOldViolations(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	old := &HarvesterMachine{Spec: validMachineSpec()}
	old.Spec.Memory = resource.MustParse("64Mi")
	old.Finalizers = []string{MachineFinalizer}
	changed := old.DeepCopy()
	changed.Finalizers = nil
	_, err := (&HarvesterMachineWebhook{}).ValidateUpdate(ctx, old, changed)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = (&HarvesterMachineWebhook{}).ValidateCreate(ctx, changed)
	g.Expect(err).To(MatchError(ContainSubstring("spec.memory")), "a new object gets the rule")

	oldC := &HarvesterCluster{Spec: HarvesterClusterSpec{IdentitySecret: SecretReference{Name: "identity"}, TargetNamespace: "cattle-guests"}}
	changedC := oldC.DeepCopy()
	changedC.Labels = map[string]string{"team": "a"}
	_, err = (&HarvesterClusterWebhook{}).ValidateUpdate(ctx, oldC, changedC)
	g.Expect(err).NotTo(HaveOccurred())
	changedC.Spec.LoadBalancer.IPAM = "static"
	_, err = (&HarvesterClusterWebhook{}).ValidateUpdate(ctx, oldC, changedC)
	g.Expect(err).To(MatchError(ContainSubstring("spec.loadBalancer.ipam")), "a new fault is still refused")
	g.Expect(err).NotTo(MatchError(ContainSubstring("spec.targetNamespace")))
}

// The webhook's own checks of devices, CPU model and the management NIC: what holds when the
// CRD of an older release (without these rules' markers) is installed with this manager.
func TestWebhookChecksDevicesCPUModelAndManagementNIC(t *testing.T) {
	spec := field.NewPath("spec")
	nic := func(name string, management bool) Network {
		return Network{NetworkName: "default/" + name, Management: management}
	}
	cases := []struct {
		name   string
		mutate func(*HarvesterMachineSpec)
		want   []string
	}{
		{"host-passthrough", func(s *HarvesterMachineSpec) { s.CPUModel = "host-passthrough" }, nil},
		{"a named CPU model", func(s *HarvesterMachineSpec) { s.CPUModel = "Cascadelake-Server" }, nil},
		{"CPU model with a space", func(s *HarvesterMachineSpec) { s.CPUModel = "host passthrough" }, []string{"spec.cpuModel: Invalid value"}},
		{"CPU model too long", func(s *HarvesterMachineSpec) { s.CPUModel = strings.Repeat("x", 65) }, []string{"spec.cpuModel: Invalid value"}},
		{"the second NIC as management", func(s *HarvesterMachineSpec) {
			s.Networks = []Network{nic("vlan10", false), nic("vlan20", true)}
		}, nil},
		{"two management NICs", func(s *HarvesterMachineSpec) {
			s.Networks = []Network{nic("vlan10", true), nic("vlan20", true)}
		}, []string{"spec.networks[1].management: Duplicate value"}},
		{"a PCI device as pcidevices names it", func(s *HarvesterMachineSpec) {
			s.HostDevices = []HostDevice{{DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"}}
		}, nil},
		{"a PCI device by its device ID", func(s *HarvesterMachineSpec) {
			s.HostDevices = []HostDevice{{DeviceName: "nvidia.com/2236"}}
		}, nil},
		{"a vGPU profile", func(s *HarvesterMachineSpec) { s.GPUs = []HostDevice{{DeviceName: "nvidia.com/NVIDIA_A2-4Q"}} }, nil},
		{"device without a name", func(s *HarvesterMachineSpec) { s.HostDevices = []HostDevice{{}} },
			[]string{"spec.hostDevices[0].deviceName: Required value"}},
		{"device without a vendor domain", func(s *HarvesterMachineSpec) { s.GPUs = []HostDevice{{DeviceName: "NVIDIA_A2-4Q"}} },
			[]string{"spec.gpus[0].deviceName: Invalid value"}},
		{"device name with a space", func(s *HarvesterMachineSpec) { s.GPUs = []HostDevice{{DeviceName: "nvidia.com/NVIDIA A2-4Q"}} },
			[]string{"spec.gpus[0].deviceName: Invalid value"}},
		{"device in the kubernetes.io domain", func(s *HarvesterMachineSpec) {
			s.HostDevices = []HostDevice{{DeviceName: "devices.kubernetes.io/x"}}
		}, []string{"spec.hostDevices[0].deviceName: Invalid value"}},
		{"device name that is not a DNS label", func(s *HarvesterMachineSpec) {
			s.HostDevices = []HostDevice{{Name: "NIC_1", DeviceName: "intel.com/X"}}
		}, []string{"spec.hostDevices[0].name: Invalid value"}},
		{"one name for a GPU and a host device", func(s *HarvesterMachineSpec) {
			s.HostDevices = []HostDevice{{Name: "dev", DeviceName: "intel.com/X"}}
			s.GPUs = []HostDevice{{Name: "dev", DeviceName: "nvidia.com/Y"}}
		}, []string{"spec.gpus[0].name: Duplicate value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := validMachineSpec()
			tc.mutate(&s)
			if tc.want == nil {
				g.Expect(s.validate(spec)).To(BeEmpty())
				return
			}
			g.Expect(fields(s.validate(spec))).To(ConsistOf(tc.want))
		})
	}
}

func TestDefaultNamesDevices(t *testing.T) {
	g := NewWithT(t)
	s := validMachineSpec()
	s.HostDevices = []HostDevice{{DeviceName: "intel.com/X"}, {Name: "mine", DeviceName: "intel.com/X"}}
	s.GPUs = []HostDevice{{DeviceName: "nvidia.com/Y"}}
	s.Default()
	g.Expect(s.HostDevices[0].Name).To(Equal("hostdevice-0"))
	g.Expect(s.HostDevices[1].Name).To(Equal("mine"))
	g.Expect(s.GPUs[0].Name).To(Equal("gpu-0"))
	g.Expect(s.validate(field.NewPath("spec"))).To(BeEmpty())
}

func TestDeviceNamesAreCheckedAsDefaultingWillNameThem(t *testing.T) {
	g := NewWithT(t)
	s := validMachineSpec()
	s.HostDevices = []HostDevice{{DeviceName: "intel.com/X"}}
	s.GPUs = []HostDevice{{Name: "hostdevice-0", DeviceName: "nvidia.com/Y"}}
	g.Expect(fields(s.validate(field.NewPath("spec")))).To(ConsistOf("spec.gpus[0].name: Duplicate value"))
}

// The CRD rule refuses networkData with IP pools before the webhook sees it; the webhook's own
// check (for a CRD of an older release) says the same on the same field.
func TestWebhookRefusesNetworkDataWithIPPools(t *testing.T) {
	g := NewWithT(t)
	s := validMachineSpec()
	s.Networks[0].AddressesFromPools = []IPPoolReference{{APIGroup: IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
	g.Expect(s.validate(field.NewPath("spec"))).To(BeEmpty())
	s.NetworkData = "version: 2\n"
	errs := s.validate(field.NewPath("spec"))
	g.Expect(fields(errs)).To(ConsistOf("spec.networkData: Forbidden"))
	g.Expect(errs[0].Detail).To(ContainSubstring("networks[0].addressesFromPools"))
}

// Without qemu-guest-agent Harvester learns no address: `guestAgent: None` is for a management
// NIC with static addresses only.
func TestWebhookRefusesNoGuestAgentWithoutStaticAddresses(t *testing.T) {
	g := NewWithT(t)
	s := validMachineSpec()
	s.GuestAgent = GuestAgentNone
	errs := s.validate(field.NewPath("spec"))
	g.Expect(fields(errs)).To(ConsistOf("spec.guestAgent: Forbidden"))
	g.Expect(errs[0].Detail).To(ContainSubstring("addressesFromPools"))
	s.Networks[0].AddressesFromPools = []IPPoolReference{{APIGroup: IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
	g.Expect(s.validate(field.NewPath("spec"))).To(BeEmpty())
	s.GuestAgent = GuestAgentEnable
	s.Networks[0].AddressesFromPools = nil
	g.Expect(s.validate(field.NewPath("spec"))).To(BeEmpty())
}

// The owner mark names the cluster's objects on Harvester: once recorded it is neither changed
// nor removed, a malformed one is refused, and a cluster that an earlier version reconciled
// (the finalizer, no mark) may only record the empty mark, which keeps its objects' names.
func TestWebhookKeepsTheOwnerMark(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := &HarvesterClusterWebhook{}
	spec := HarvesterClusterSpec{IdentitySecret: SecretReference{Name: "identity"}, TargetNamespace: "guests"}
	withMark := func(mark *string, finalizers ...string) *HarvesterCluster {
		c := &HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Finalizers: finalizers}, Spec: spec}
		if mark != nil {
			c.Annotations = map[string]string{OwnerMarkAnnotation: *mark}
		}
		return c
	}
	mark, other, empty, bad := "0123456789", "9876543210", "", "../other"
	moving := func(mark *string) *HarvesterCluster {
		c := withMark(mark, ClusterFinalizer)
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[clusterctlv1.DeleteForMoveAnnotation] = ""
		return c
	}

	_, err := w.ValidateCreate(ctx, withMark(&mark))
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl move creates clusters with their mark")
	_, err = w.ValidateCreate(ctx, withMark(&bad))
	g.Expect(err).To(MatchError(ContainSubstring(OwnerMarkAnnotation)))
	current := "0123456789abcdef"
	_, err = w.ValidateCreate(ctx, withMark(&current))
	g.Expect(err).NotTo(HaveOccurred(), "a mark of this version's length")
	for _, odd := range []string{"0123456789a", "0123456789ABCDEF", "0123456789abcdef0"} {
		_, err = w.ValidateCreate(ctx, withMark(&odd))
		g.Expect(err).To(MatchError(ContainSubstring(OwnerMarkAnnotation)), odd)
	}

	for _, tc := range []struct {
		name     string
		old, new *HarvesterCluster
		refused  bool
	}{
		{"the manager's first mark", withMark(nil), withMark(&mark, ClusterFinalizer), false},
		{"unchanged", withMark(&mark, ClusterFinalizer), withMark(&mark, ClusterFinalizer), false},
		{"the empty mark of a cluster an earlier version made", withMark(nil, ClusterFinalizer), withMark(&empty, ClusterFinalizer), false},
		{"changed", withMark(&mark, ClusterFinalizer), withMark(&other, ClusterFinalizer), true},
		{"removed", withMark(&mark, ClusterFinalizer), withMark(nil, ClusterFinalizer), true},
		{"the empty mark replaced", withMark(&empty, ClusterFinalizer), withMark(&mark, ClusterFinalizer), true},
		{"a mark given to a cluster an earlier version made", withMark(nil, ClusterFinalizer), withMark(&mark, ClusterFinalizer), true},
		{"removed by clusterctl move from the source, before deleting it", withMark(&mark, ClusterFinalizer), moving(nil), false},
		{"changed under clusterctl's annotation", withMark(&mark, ClusterFinalizer), moving(&other), true},
	} {
		_, err := w.ValidateUpdate(ctx, tc.old, tc.new)
		if tc.refused {
			g.Expect(err).To(MatchError(ContainSubstring("metadata.annotations["+OwnerMarkAnnotation+"]")), tc.name)
		} else {
			g.Expect(err).NotTo(HaveOccurred(), tc.name)
		}
	}
}

// An update that leaves the annotation out (kubectl replace, a tool writing the whole object,
// clusterctl move's patch of the source's annotations) keeps the mark: the defaulting webhook
// copies it from the old object, so the validating one has nothing to refuse.
func TestDefaultingKeepsTheOwnerMark(t *testing.T) {
	g := NewWithT(t)
	old := &HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Annotations: map[string]string{
		OwnerMarkAnnotation: "0123456789", LoadBalancerAnnotation: "cp-prod-0123456789"}}}
	old.Spec.Default()
	raw, err := json.Marshal(old)
	g.Expect(err).NotTo(HaveOccurred())
	update := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, OldObject: runtime.RawExtension{Raw: raw}}}
	replaced := &HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Annotations: map[string]string{"team": "a"}}}
	g.Expect((&HarvesterClusterWebhook{}).Default(admission.NewContextWithRequest(context.Background(), update), replaced)).To(Succeed())
	g.Expect(replaced.Annotations).To(HaveKeyWithValue(OwnerMarkAnnotation, "0123456789"))
	g.Expect(replaced.Annotations).To(HaveKeyWithValue(LoadBalancerAnnotation, "cp-prod-0123456789"))
	g.Expect(replaced.Annotations).To(HaveKeyWithValue("team", "a"))
	_, err = (&HarvesterClusterWebhook{}).ValidateUpdate(context.Background(), old, replaced)
	g.Expect(err).NotTo(HaveOccurred())

	changed := &HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Annotations: map[string]string{OwnerMarkAnnotation: "9876543210"}}}
	g.Expect((&HarvesterClusterWebhook{}).Default(admission.NewContextWithRequest(context.Background(), update), changed)).To(Succeed())
	g.Expect(changed.Annotations).To(HaveKeyWithValue(OwnerMarkAnnotation, "9876543210"), "a change is left for the validating webhook to refuse")
}

// The recorded control-plane load balancer is the cluster's from then on: a create may bring
// one (clusterctl move, a take-over from another provider), a malformed name is refused, and an
// update cannot change it (the provider would make a second load balancer and lose the first).
func TestWebhookKeepsTheRecordedLoadBalancer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := &HarvesterClusterWebhook{}
	recording := func(name *string) *HarvesterCluster {
		c := &HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Finalizers: []string{ClusterFinalizer}},
			Spec: HarvesterClusterSpec{IdentitySecret: SecretReference{Name: "identity"}, TargetNamespace: "guests"}}
		if name != nil {
			c.Annotations = map[string]string{LoadBalancerAnnotation: *name}
		}
		return c
	}
	ours, caphvs, bad, long, empty := "cp-prod-0123456789", "default-prod-lb", "Default_prod", strings.Repeat("a", 64), ""

	for _, name := range []string{ours, caphvs} {
		_, err := w.ValidateCreate(ctx, recording(&name))
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
	for _, name := range []string{bad, long, "1-starts-with-a-digit"} {
		_, err := w.ValidateCreate(ctx, recording(&name))
		g.Expect(err).To(MatchError(ContainSubstring("metadata.annotations["+LoadBalancerAnnotation+"]")), name)
	}
	moving := recording(nil)
	moving.Annotations = map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}
	for _, tc := range []struct {
		name     string
		old, new *HarvesterCluster
		refused  bool
	}{
		{"recorded by the manager", recording(nil), recording(&ours), false},
		{"unchanged", recording(&caphvs), recording(&caphvs), false},
		{"changed", recording(&caphvs), recording(&ours), true},
		{"emptied", recording(&ours), recording(&empty), true},
		{"removed by clusterctl move from the source", recording(&ours), moving, false},
	} {
		_, err := w.ValidateUpdate(ctx, tc.old, tc.new)
		if tc.refused {
			g.Expect(err).To(MatchError(ContainSubstring("metadata.annotations["+LoadBalancerAnnotation+"]")), tc.name)
		} else {
			g.Expect(err).NotTo(HaveOccurred(), tc.name)
		}
	}
}
