package v1alpha1_test

// These tests run the API's webhooks behind a real kube-apiserver (envtest) together with
// Cluster API's own, so they prove what a user sees: the CRD schema, then our defaulting and
// validation, with the field paths and messages the apiserver returns.

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

var (
	env *testenv.Environment
	ctx = context.Background()
)

const namespace = "default"

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.StartManagement()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := env.StartManager(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func validClusterSpec() infrav1.HarvesterClusterSpec {
	return infrav1.HarvesterClusterSpec{
		IdentitySecret:  infrav1.SecretReference{Name: "harvester-identity"},
		TargetNamespace: "guests",
	}
}

func validMachineSpec() infrav1.HarvesterMachineSpec {
	return infrav1.HarvesterMachineSpec{
		CPU:      2,
		Memory:   resource.MustParse("4Gi"),
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
	}
}

func cluster(name string, mutate func(*infrav1.HarvesterClusterSpec)) *infrav1.HarvesterCluster {
	c := &infrav1.HarvesterCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       validClusterSpec(),
	}
	if mutate != nil {
		mutate(&c.Spec)
	}
	return c
}

func machine(name string, mutate func(*infrav1.HarvesterMachineSpec)) *infrav1.HarvesterMachine {
	m := &infrav1.HarvesterMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       validMachineSpec(),
	}
	if mutate != nil {
		mutate(&m.Spec)
	}
	return m
}

func machineTemplate(name string, mutate func(*infrav1.HarvesterMachineSpec)) *infrav1.HarvesterMachineTemplate {
	t := &infrav1.HarvesterMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: infrav1.HarvesterMachineTemplateSpec{
			Template: infrav1.HarvesterMachineTemplateResource{Spec: validMachineSpec()},
		},
	}
	if mutate != nil {
		mutate(&t.Spec.Template.Spec)
	}
	return t
}

func clusterTemplate(name string, mutate func(*infrav1.HarvesterClusterSpec)) *infrav1.HarvesterClusterTemplate {
	t := &infrav1.HarvesterClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: infrav1.HarvesterClusterTemplateSpec{
			Template: infrav1.HarvesterClusterTemplateResource{Spec: validClusterSpec()},
		},
	}
	if mutate != nil {
		mutate(&t.Spec.Template.Spec)
	}
	return t
}

// expectInvalid checks that err is the apiserver's Invalid error with a cause on field whose
// message contains msg.
func expectInvalid(g Gomega, err error, field, msg string) {
	g.ExpectWithOffset(1, err).To(HaveOccurred())
	g.ExpectWithOffset(1, apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	status, ok := err.(apierrors.APIStatus)
	g.ExpectWithOffset(1, ok).To(BeTrue())
	var causes []string
	for _, c := range status.Status().Details.Causes {
		causes = append(causes, c.Field+": "+c.Message)
	}
	g.ExpectWithOffset(1, causes).To(ContainElement(And(HavePrefix(field+": "), ContainSubstring(msg))),
		"want a cause on %s containing %q", field, msg)
}

func TestInvalidObjectsAreRejected(t *testing.T) {
	cert := "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
	cases := []struct {
		name  string
		obj   client.Object
		field string
		msg   string
	}{
		// HarvesterCluster
		{"empty identity secret", cluster("c-identity-empty", func(s *infrav1.HarvesterClusterSpec) { s.IdentitySecret.Name = "" }),
			"spec.identitySecret.name", "at least 1 chars long"},
		{"identity secret name not a DNS name", cluster("c-identity-bad", func(s *infrav1.HarvesterClusterSpec) { s.IdentitySecret.Name = "Harvester_Identity" }),
			"spec.identitySecret.name", "RFC 1123"},
		{"empty target namespace", cluster("c-ns-empty", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "" }),
			"spec.targetNamespace", "at least 1 chars long"},
		{"target namespace not a DNS label", cluster("c-ns-bad", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "Guests.Prod" }),
			"spec.targetNamespace", "RFC 1123 label"},
		{"unknown ipam mode", cluster("c-ipam-bad", func(s *infrav1.HarvesterClusterSpec) { s.LoadBalancer.IPAM = "static" }),
			"spec.loadBalancer.ipam", `supported values: "pool", "dhcp"`},
		{"ip pool with dhcp", cluster("c-dhcp-pool", func(s *infrav1.HarvesterClusterSpec) {
			s.LoadBalancer = infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMDHCP, IPPoolName: "pool-a"}
		}), "spec.loadBalancer.ipPoolName", "only be named with ipam `pool`"},
		{"load balancer network without namespace", cluster("c-net-bad", func(s *infrav1.HarvesterClusterSpec) { s.LoadBalancer.Network = "vlan10" }),
			"spec.loadBalancer.network", "`namespace/name`"},
		{"endpoint host without port", cluster("c-ep-port", func(s *infrav1.HarvesterClusterSpec) { s.ControlPlaneEndpoint.Host = "10.0.0.10" }),
			"spec.controlPlaneEndpoint.port", "between 1 and 65535"},
		{"endpoint port without host", cluster("c-ep-host", func(s *infrav1.HarvesterClusterSpec) { s.ControlPlaneEndpoint.Port = 6443 }),
			"spec.controlPlaneEndpoint.host", "a port needs a host"},
		{"endpoint host not an address", cluster("c-ep-bad", func(s *infrav1.HarvesterClusterSpec) {
			s.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "not a host", Port: 6443}
		}), "spec.controlPlaneEndpoint.host", "IP address or a DNS name"},
		{"guest API over http", cluster("c-api-http", func(s *infrav1.HarvesterClusterSpec) {
			s.GuestHarvesterAPI = &infrav1.HarvesterAPIEndpoint{Server: "http://10.0.0.5:6443"}
		}), "spec.guestHarvesterAPI.server", "https URL"},
		{"guest API CA not a certificate", cluster("c-api-ca", func(s *infrav1.HarvesterClusterSpec) {
			s.GuestHarvesterAPI = &infrav1.HarvesterAPIEndpoint{Server: "https://10.0.0.5:6443", CABundle: []byte(cert)}
		}), "spec.guestHarvesterAPI.caBundle", "does not parse"},

		// HarvesterMachine
		{"zero CPUs", machine("m-cpu-zero", func(s *infrav1.HarvesterMachineSpec) { s.CPU = 0 }),
			"spec.cpu", "at least 1"},
		{"negative CPUs", machine("m-cpu-neg", func(s *infrav1.HarvesterMachineSpec) { s.CPU = -2 }),
			"spec.cpu", "at least 1"},
		{"zero memory", machine("m-mem-zero", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("0") }),
			"spec.memory", "greater than zero"},
		{"negative memory", machine("m-mem-neg", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("-1Gi") }),
			"spec.memory", "greater than zero"},
		{"reserved memory above memory", machine("m-reserved", func(s *infrav1.HarvesterMachineSpec) { s.ReservedMemory = ptr.To(resource.MustParse("8Gi")) }),
			"spec.reservedMemory", "less than memory (4Gi)"},
		{"no disks", machine("m-no-disks", func(s *infrav1.HarvesterMachineSpec) { s.Disks = []infrav1.Disk{} }),
			"spec.disks", "at least 1 items"},
		{"disk with two sources", machine("m-disk-two", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].StorageClassName = "longhorn" }),
			"spec.disks[0].storageClassName", "exactly one of image or storageClassName"},
		{"disk without source", machine("m-disk-none", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Image = "" }),
			"spec.disks[0]", "exactly one of image or storageClassName"},
		{"disk without size", machine("m-disk-size", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.Quantity{} }),
			"spec.disks[0].size", "greater than zero"},
		{"unknown disk bus", machine("m-disk-bus", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Bus = "ide" }),
			"spec.disks[0].bus", `supported values: "virtio", "scsi", "sata"`},
		{"image reference malformed", machine("m-disk-image", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Image = "default/Ubuntu Noble" }),
			"spec.disks[0].image", "`name` or `namespace/name`"},
		{"duplicate disk names", machine("m-disk-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Disks = append(s.Disks, infrav1.Disk{Name: "disk-0", StorageClassName: "longhorn", Size: resource.MustParse("10Gi")})
		}), "spec.disks[1].name", "Duplicate value"},
		{"duplicate boot order", machine("m-boot-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Disks[0].BootOrder = ptr.To[int32](1)
			s.Disks = append(s.Disks, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("10Gi"), BootOrder: ptr.To[int32](1)})
		}), "spec.disks[1].bootOrder", "Duplicate value"},
		{"boot order zero", machine("m-boot-zero", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].BootOrder = ptr.To[int32](0) }),
			"spec.disks[0].bootOrder", "at least 1"},
		{"no networks", machine("m-no-nets", func(s *infrav1.HarvesterMachineSpec) { s.Networks = []infrav1.Network{} }),
			"spec.networks", "at least 1 items"},
		{"network without namespace", machine("m-net-bare", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].NetworkName = "vlan10" }),
			"spec.networks[0].networkName", "`namespace/name`"},
		{"duplicate interface names", machine("m-net-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = []infrav1.Network{{Name: "mgmt", NetworkName: "default/vlan10"}, {Name: "mgmt", NetworkName: "default/vlan20"}}
		}), "spec.networks[1].name", "Duplicate value"},
		{"malformed MAC", machine("m-mac-bad", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].MACAddress = "52:54:00:zz:00:01" }),
			"spec.networks[0].macAddress", "MAC address"},
		{"multicast MAC", machine("m-mac-multicast", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].MACAddress = "01:00:5e:00:00:01" }),
			"spec.networks[0].macAddress", "unicast"},
		{"duplicate MAC", machine("m-mac-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = []infrav1.Network{
				{NetworkName: "default/vlan10", MACAddress: "52:54:00:00:00:01"},
				{NetworkName: "default/vlan20", MACAddress: "52:54:00:00:00:01"},
			}
		}), "spec.networks[1].macAddress", "Duplicate value"},
		{"secure boot without EFI", machine("m-secureboot", func(s *infrav1.HarvesterMachineSpec) { s.Firmware.SecureBoot = true }),
			"spec.firmware.secureBoot", "requires bootMode EFI"},
		{"keypair name malformed", machine("m-keypair", func(s *infrav1.HarvesterMachineSpec) { s.SSHKeyPairs = []string{"my key"} }),
			"spec.sshKeyPairs[0]", "`name` or `namespace/name`"},
		{"unsupported run strategy", machine("m-run", func(s *infrav1.HarvesterMachineSpec) { s.RunStrategy = "Halted" }),
			"spec.runStrategy", `supported values: "Always", "RerunOnFailure"`},
		{"foreign provider ID", machine("m-providerid", func(s *infrav1.HarvesterMachineSpec) { s.ProviderID = "aws:///i-123" }),
			"spec.providerID", "must start with harvester://"},

		// Templates carry the same checks under spec.template.spec.
		{"machine template with zero CPUs", machineTemplate("mt-cpu", func(s *infrav1.HarvesterMachineSpec) { s.CPU = 0 }),
			"spec.template.spec.cpu", "at least 1"},
		{"machine template disk without source", machineTemplate("mt-disk", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Image = "" }),
			"spec.template.spec.disks[0]", "exactly one of image or storageClassName"},
		{"cluster template without target namespace", clusterTemplate("ct-ns", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "" }),
			"spec.template.spec.targetNamespace", "at least 1 chars long"},
		{"cluster template dhcp with pool", clusterTemplate("ct-dhcp", func(s *infrav1.HarvesterClusterSpec) {
			s.LoadBalancer = infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMDHCP, IPPoolName: "pool-a"}
		}), "spec.template.spec.loadBalancer.ipPoolName", "only be named with ipam `pool`"},
	}
	if len(cases) < 30 {
		t.Fatalf("the foundation promises at least 30 rejected objects, the table has %d", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tc.obj)
			expectInvalid(g, err, tc.field, tc.msg)
		})
	}
}

func TestDefaultsAreApplied(t *testing.T) {
	g := NewWithT(t)

	c := cluster("defaults", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(c.Spec.LoadBalancer.IPAM).To(Equal(infrav1.IPAMPool))
	g.Expect(c.Spec.Addons.CloudProvider).To(Equal(ptr.To(true)))
	g.Expect(c.Spec.Addons.CSI).To(Equal(ptr.To(true)))

	m := machine("defaults", func(s *infrav1.HarvesterMachineSpec) {
		s.Disks = append(s.Disks, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("10Gi"), Bus: infrav1.DiskBusSCSI})
		s.Networks = append(s.Networks, infrav1.Network{Name: "storage", NetworkName: "default/vlan20"})
	})
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	g.Expect(m.Spec.Disks[0].Name).To(Equal("disk-0"))
	g.Expect(m.Spec.Disks[0].Bus).To(Equal(infrav1.DiskBusVirtio))
	g.Expect(m.Spec.Disks[0].BootOrder).To(Equal(ptr.To[int32](1)))
	g.Expect(m.Spec.Disks[1].Name).To(Equal("disk-1"))
	g.Expect(m.Spec.Disks[1].Bus).To(Equal(infrav1.DiskBusSCSI), "a bus the user chose is kept")
	g.Expect(m.Spec.Disks[1].BootOrder).To(BeNil())
	g.Expect(m.Spec.Networks[0].Name).To(Equal("nic-0"))
	g.Expect(m.Spec.Networks[1].Name).To(Equal("storage"))
	g.Expect(m.Spec.Firmware.BootMode).To(Equal(infrav1.BootModeBIOS))
	g.Expect(m.Spec.RunStrategy).To(Equal(infrav1.RunStrategyRerunOnFailure))

	mt := machineTemplate("defaults", nil)
	g.Expect(env.Client.Create(ctx, mt)).To(Succeed())
	g.Expect(mt.Spec.Template.Spec.Disks[0].BootOrder).To(Equal(ptr.To[int32](1)))

	ct := clusterTemplate("defaults", nil)
	g.Expect(env.Client.Create(ctx, ct)).To(Succeed())
	g.Expect(ct.Spec.Template.Spec.LoadBalancer.IPAM).To(Equal(infrav1.IPAMPool))
}

func TestImmutableFieldsAreRefusedOnUpdate(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		g := NewWithT(t)
		c := cluster("immutable", nil)
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())

		update := func(mutate func(*infrav1.HarvesterCluster)) error {
			changed := c.DeepCopy()
			mutate(changed)
			return env.Client.Update(ctx, changed)
		}
		expectInvalid(g, update(func(c *infrav1.HarvesterCluster) { c.Spec.TargetNamespace = "elsewhere" }),
			"spec.targetNamespace", "cannot change")
		expectInvalid(g, update(func(c *infrav1.HarvesterCluster) { c.Spec.LoadBalancer.IPAM = infrav1.IPAMDHCP }),
			"spec.loadBalancer.ipam", "cannot change")
		expectInvalid(g, update(func(c *infrav1.HarvesterCluster) { c.Spec.Addons.CSI = ptr.To(false) }),
			"spec.addons", "never uninstalls")

		// The controller sets the endpoint once; after that it is fixed.
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443}
		g.Expect(env.Client.Update(ctx, c)).To(Succeed())
		expectInvalid(g, update(func(c *infrav1.HarvesterCluster) { c.Spec.ControlPlaneEndpoint.Host = "10.0.0.11" }),
			"spec.controlPlaneEndpoint", "cannot change once set")

		// The identity may be fixed before the cluster is provisioned, not after.
		g.Expect(update(func(c *infrav1.HarvesterCluster) { c.Spec.IdentitySecret.Name = "other-identity" })).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Status.Initialization.Provisioned = ptr.To(true)
		g.Expect(env.Client.Status().Update(ctx, c)).To(Succeed())
		expectInvalid(g, update(func(c *infrav1.HarvesterCluster) { c.Spec.IdentitySecret.Name = "third-identity" }),
			"spec.identitySecret", "cannot change once the cluster is provisioned")

		// What may change still can.
		g.Expect(update(func(c *infrav1.HarvesterCluster) {
			c.Spec.GuestHarvesterAPI = &infrav1.HarvesterAPIEndpoint{Server: "https://10.0.0.5:6443"}
		})).To(Succeed())
	})

	t.Run("machine", func(t *testing.T) {
		g := NewWithT(t)
		m := machine("immutable", nil)
		g.Expect(env.Client.Create(ctx, m)).To(Succeed())

		changed := m.DeepCopy()
		changed.Spec.CPU = 4
		expectInvalid(g, env.Client.Update(ctx, changed), "spec", "cannot change")

		// The provider fills in providerID once; after that it is fixed.
		m.Spec.ProviderID = "harvester://6f1a5c1e-0000-4000-8000-000000000001"
		g.Expect(env.Client.Update(ctx, m)).To(Succeed())
		changed = m.DeepCopy()
		changed.Spec.ProviderID = "harvester://6f1a5c1e-0000-4000-8000-000000000002"
		expectInvalid(g, env.Client.Update(ctx, changed), "spec.providerID", "cannot change once set")

		// Labels and annotations are not spec: CAPI propagates them in place.
		m.Labels = map[string]string{"team": "a"}
		g.Expect(env.Client.Update(ctx, m)).To(Succeed())
	})
}

func TestTemplatesAllowTopologyDryRun(t *testing.T) {
	g := NewWithT(t)
	mt := machineTemplate("dry-run", nil)
	g.Expect(env.Client.Create(ctx, mt)).To(Succeed())
	ct := clusterTemplate("dry-run", nil)
	g.Expect(env.Client.Create(ctx, ct)).To(Succeed())

	// A plain change is refused: templates are immutable.
	changedMT := mt.DeepCopy()
	changedMT.Spec.Template.Spec.CPU = 8
	expectInvalid(g, env.Client.Update(ctx, changedMT), "spec.template.spec", "cannot change")
	changedCT := ct.DeepCopy()
	changedCT.Spec.Template.Spec.TargetNamespace = "elsewhere"
	expectInvalid(g, env.Client.Update(ctx, changedCT), "spec.template.spec", "cannot change")

	// The annotation alone does not open the door: only a dry run with it does.
	changedMT.Annotations = map[string]string{clusterv1.TopologyDryRunAnnotation: ""}
	expectInvalid(g, env.Client.Update(ctx, changedMT), "spec.template.spec", "cannot change")
	changedCT.Annotations = map[string]string{clusterv1.TopologyDryRunAnnotation: ""}
	expectInvalid(g, env.Client.Update(ctx, changedCT), "spec.template.spec", "cannot change")

	// The topology controller's dry run passes, and changes nothing.
	g.Expect(env.Client.Update(ctx, changedMT, client.DryRunAll)).To(Succeed())
	g.Expect(env.Client.Update(ctx, changedCT, client.DryRunAll)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mt), mt)).To(Succeed())
	g.Expect(mt.Spec.Template.Spec.CPU).To(Equal(int32(2)))

	// A dry run still gets the ordinary validation.
	changedMT.Spec.Template.Spec.CPU = 0
	expectInvalid(g, env.Client.Update(ctx, changedMT, client.DryRunAll), "spec.template.spec.cpu", "at least 1")
}

func TestCRDsCarryTheContractLabel(t *testing.T) {
	g := NewWithT(t)
	for _, plural := range []string{"harvesterclusters", "harvesterclustertemplates", "harvestermachines", "harvestermachinetemplates"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: plural + ".infrastructure.cluster.x-k8s.io"}, crd)).To(Succeed())
		g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), plural)
		g.Expect(crd.Spec.Versions).To(HaveLen(1))
		g.Expect(crd.Spec.Versions[0].Name).To(Equal("v1alpha1"))
	}
}
