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

package v1alpha1_test

// These tests run the API's webhooks behind a real kube-apiserver (envtest) together with
// Cluster API's own, so they prove what a user sees: the CRD schema, then our defaulting and
// validation, with the field paths and messages the apiserver returns.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

var ctx = context.Background()

const namespace = "default"

// The control planes start on first use, so that the package's unit tests and fuzz targets run
// without kube-apiserver binaries; TestMain stops whichever started.
var (
	managementOnce, crdOnlyOnce sync.Once
	managementEnv, crdOnlyEnv   *testenv.Environment
	managementErr, crdOnlyErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, e := range []*testenv.Environment{managementEnv, crdOnlyEnv} {
		if e != nil {
			if err := e.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	os.Exit(code)
}

// management is a management cluster with our CRDs and webhooks and Cluster API's, as users run it.
func management(t *testing.T) *testenv.Environment {
	t.Helper()
	managementOnce.Do(func() {
		managementEnv, managementErr = testenv.StartManagement()
		if managementErr == nil {
			managementErr = managementEnv.StartManager(ctx)
		}
	})
	if managementErr != nil {
		t.Fatal(managementErr)
	}
	return managementEnv
}

// crdOnly is an apiserver with our CRDs and no webhook at all: what a cluster whose provider
// runs with --enable-webhooks=false (or whose webhook is down with failurePolicy Ignore) checks.
func crdOnly(t *testing.T) *testenv.Environment {
	t.Helper()
	crdOnlyOnce.Do(func() {
		scheme, err := testenv.ManagementScheme()
		if err != nil {
			crdOnlyErr = err
			return
		}
		crdOnlyEnv, crdOnlyErr = testenv.Start(testenv.Options{
			Name:              "crd-only",
			Scheme:            scheme,
			CRDDirectoryPaths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		})
	})
	if crdOnlyErr != nil {
		t.Fatal(crdOnlyErr)
	}
	return crdOnlyEnv
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

// withDiskSize returns m as an unstructured object whose first disk's size is size as written
// in YAML (a Quantity always marshals as a string, so only this reaches the schema's integer
// branch).
func withDiskSize(t *testing.T, m *infrav1.HarvesterMachine, size any) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("HarvesterMachine"))
	disks, _, _ := unstructured.NestedSlice(u.Object, "spec", "disks")
	disks[0].(map[string]any)["size"] = size
	if err := unstructured.SetNestedSlice(u.Object, disks, "spec", "disks"); err != nil {
		t.Fatal(err)
	}
	return u
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
	env := management(t)
	cert := "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
	disks := func(n int) []infrav1.Disk {
		var out []infrav1.Disk
		for range n {
			out = append(out, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("10Gi")})
		}
		return out
	}
	networks := func(n int) []infrav1.Network {
		var out []infrav1.Network
		for i := range n {
			out = append(out, infrav1.Network{NetworkName: fmt.Sprintf("default/vlan%d", i)})
		}
		return out
	}
	// variantOf names the case whose fault a case repeats (another value breaking the same rule,
	// or the same rule under a template's path): such cases are run but not counted as faults.
	cases := []struct {
		name      string
		obj       client.Object
		field     string
		msg       string
		variantOf string
	}{
		// HarvesterCluster
		// An empty identitySecret is no identity at all (the field is left out).
		{name: "empty identity secret", obj: cluster("c-identity-empty", func(s *infrav1.HarvesterClusterSpec) { s.IdentitySecret.Name = "" }),
			field: "spec", msg: "set exactly one of identityRef and identitySecret"},
		{name: "both identities", obj: cluster("c-identity-both", func(s *infrav1.HarvesterClusterSpec) {
			s.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.HarvesterClusterIdentityKind, Name: "lent"}
		}), field: "spec", msg: "set exactly one of identityRef and identitySecret"},
		{name: "identity of an unknown kind", obj: cluster("c-identity-kind", func(s *infrav1.HarvesterClusterSpec) {
			s.IdentitySecret = infrav1.SecretReference{}
			s.IdentityRef = &infrav1.IdentityReference{Kind: "ConfigMap", Name: "lent"}
		}), field: "spec.identityRef.kind", msg: "Unsupported value"},
		{name: "identity secret name not a DNS name", obj: cluster("c-identity-bad", func(s *infrav1.HarvesterClusterSpec) { s.IdentitySecret.Name = "Harvester_Identity" }),
			field: "spec.identitySecret.name", msg: "RFC 1123"},
		{name: "empty target namespace", obj: cluster("c-ns-empty", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "" }),
			field: "spec.targetNamespace", msg: "at least 1 chars long"},
		{name: "target namespace not a DNS label", obj: cluster("c-ns-bad", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "Guests.Prod" }),
			field: "spec.targetNamespace", msg: "RFC 1123 label"},
		{name: "target namespace kube-system", obj: cluster("c-ns-kube-system", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "kube-system" }),
			field: "spec.targetNamespace", msg: "is a system namespace of Kubernetes, Harvester or Longhorn"},
		{name: "target namespace harvester-system", obj: cluster("c-ns-harvester-system", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "harvester-system" }),
			field: "spec.targetNamespace", msg: "is a system namespace of Kubernetes, Harvester or Longhorn", variantOf: "target namespace kube-system"},
		{name: "target namespace longhorn-system", obj: cluster("c-ns-longhorn-system", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "longhorn-system" }),
			field: "spec.targetNamespace", msg: "is a system namespace of Kubernetes, Harvester or Longhorn", variantOf: "target namespace kube-system"},
		{name: "target namespace of Rancher", obj: cluster("c-ns-cattle", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "cattle-system" }),
			field: "spec.targetNamespace", msg: "is a system namespace of Rancher (cattle-*) or Fleet (fleet-*)"},
		{name: "target namespace of Fleet", obj: cluster("c-ns-fleet", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "fleet-default" }),
			field: "spec.targetNamespace", msg: "is a system namespace of Rancher (cattle-*) or Fleet (fleet-*)", variantOf: "target namespace of Rancher"},
		{name: "unknown ipam mode", obj: cluster("c-ipam-bad", func(s *infrav1.HarvesterClusterSpec) { s.LoadBalancer.IPAM = "static" }),
			field: "spec.loadBalancer.ipam", msg: `supported values: "pool", "dhcp"`},
		{name: "ip pool with dhcp", obj: cluster("c-dhcp-pool", func(s *infrav1.HarvesterClusterSpec) {
			s.LoadBalancer = infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMDHCP, IPPoolName: "pool-a"}
		}), field: "spec.loadBalancer.ipPoolName", msg: "only be named with ipam `pool`"},
		{name: "ip pool name not a DNS name", obj: cluster("c-pool-bad", func(s *infrav1.HarvesterClusterSpec) { s.LoadBalancer.IPPoolName = "Pool_A" }),
			field: "spec.loadBalancer.ipPoolName", msg: "RFC 1123 subdomain"},
		{name: "load balancer network without namespace", obj: cluster("c-net-bad", func(s *infrav1.HarvesterClusterSpec) { s.LoadBalancer.Network = "vlan10" }),
			field: "spec.loadBalancer.network", msg: "`namespace/name`"},
		{name: "endpoint host without port", obj: cluster("c-ep-port", func(s *infrav1.HarvesterClusterSpec) { s.ControlPlaneEndpoint.Host = "10.0.0.10" }),
			field: "spec.controlPlaneEndpoint.port", msg: "between 1 and 65535"},
		{name: "endpoint port out of range", obj: cluster("c-ep-range", func(s *infrav1.HarvesterClusterSpec) {
			s.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 70000}
		}), field: "spec.controlPlaneEndpoint.port", msg: "less than or equal to 65535"},
		{name: "endpoint port without host", obj: cluster("c-ep-host", func(s *infrav1.HarvesterClusterSpec) { s.ControlPlaneEndpoint.Port = 6443 }),
			field: "spec.controlPlaneEndpoint.host", msg: "a port needs a host"},
		{name: "endpoint host not an address", obj: cluster("c-ep-bad", func(s *infrav1.HarvesterClusterSpec) {
			s.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "not a host", Port: 6443}
		}), field: "spec.controlPlaneEndpoint.host", msg: "IP address or a DNS name"},
		{name: "guest API CA without server", obj: cluster("c-api-empty", func(s *infrav1.HarvesterClusterSpec) {
			s.GuestHarvesterAPI = &infrav1.HarvesterAPIEndpoint{CABundle: []byte(cert)}
		}), field: "spec.guestHarvesterAPI.server", msg: "needs the URL"},
		{name: "guest API over http", obj: cluster("c-api-http", func(s *infrav1.HarvesterClusterSpec) {
			s.GuestHarvesterAPI = &infrav1.HarvesterAPIEndpoint{Server: "http://10.0.0.5:6443"}
		}), field: "spec.guestHarvesterAPI.server", msg: "https URL"},
		{name: "guest API CA not a certificate", obj: cluster("c-api-ca", func(s *infrav1.HarvesterClusterSpec) {
			s.GuestHarvesterAPI = &infrav1.HarvesterAPIEndpoint{Server: "https://10.0.0.5:6443", CABundle: []byte(cert)}
		}), field: "spec.guestHarvesterAPI.caBundle", msg: "does not parse"},

		// HarvesterMachine
		{name: "zero CPUs", obj: machine("m-cpu-zero", func(s *infrav1.HarvesterMachineSpec) { s.CPU = 0 }),
			field: "spec.cpu", msg: "greater than or equal to 1"},
		{name: "negative CPUs", obj: machine("m-cpu-neg", func(s *infrav1.HarvesterMachineSpec) { s.CPU = -2 }),
			field: "spec.cpu", msg: "greater than or equal to 1", variantOf: "zero CPUs"},
		{name: "more CPUs than KubeVirt's bound", obj: machine("m-cpu-max", func(s *infrav1.HarvesterMachineSpec) { s.CPU = infrav1.MaxCPU + 1 }),
			field: "spec.cpu", msg: "less than or equal to 512"},
		{name: "memory below 128Mi", obj: machine("m-mem-low", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("127Mi") }),
			field: "spec.memory", msg: "must be at least 128Mi"},
		{name: "zero memory", obj: machine("m-mem-zero", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("0") }),
			field: "spec.memory", msg: "must be at least 128Mi", variantOf: "memory below 128Mi"},
		{name: "negative memory", obj: machine("m-mem-neg", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("-1Gi") }),
			field: "spec.memory", msg: "must be at least 128Mi", variantOf: "memory below 128Mi"},
		{name: "reserved memory above memory", obj: machine("m-reserved", func(s *infrav1.HarvesterMachineSpec) { s.ReservedMemory = ptr.To(resource.MustParse("8Gi")) }),
			field: "spec.reservedMemory", msg: "less than memory (4Gi)"},
		{name: "negative reserved memory", obj: machine("m-reserved-neg", func(s *infrav1.HarvesterMachineSpec) { s.ReservedMemory = ptr.To(resource.MustParse("-1Mi")) }),
			field: "spec.reservedMemory", msg: "must not be negative"},
		{name: "no disks", obj: machine("m-no-disks", func(s *infrav1.HarvesterMachineSpec) { s.Disks = []infrav1.Disk{} }),
			field: "spec.disks", msg: "at least 1 items"},
		{name: "more than 16 disks", obj: machine("m-disks-17", func(s *infrav1.HarvesterMachineSpec) { s.Disks = append(s.Disks, disks(16)...) }),
			field: "spec.disks", msg: "must have at most 16 items"},
		{name: "disk with two sources", obj: machine("m-disk-two", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].StorageClassName = "longhorn" }),
			field: "spec.disks[0].storageClassName", msg: "exactly one of image or storageClassName"},
		{name: "disk without source", obj: machine("m-disk-none", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Image = "" }),
			field: "spec.disks[0]", msg: "exactly one of image or storageClassName"},
		{name: "disk below 1Gi", obj: machine("m-disk-small", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("1023Mi") }),
			field: "spec.disks[0].size", msg: "must be at least 1Gi"},
		{name: "disk without size", obj: machine("m-disk-size", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.Quantity{} }),
			field: "spec.disks[0].size", msg: "must be at least 1Gi", variantOf: "disk below 1Gi"},
		{name: "second disk below 1Gi", obj: machine("m-disk-small-2", func(s *infrav1.HarvesterMachineSpec) {
			s.Disks = append(s.Disks, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("100M")})
		}), field: "spec.disks[1].size", msg: "must be at least 1Gi", variantOf: "disk below 1Gi"},
		{name: "disk named like the cloud-init disk", obj: machine("m-disk-cloudinit", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Name = infrav1.CloudInitDiskName }),
			field: "spec.disks[0].name", msg: "is reserved for the cloud-init disk"},
		{name: "disk name not a DNS label", obj: machine("m-disk-name", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Name = "Root_Disk" }),
			field: "spec.disks[0].name", msg: "RFC 1123 label"},
		{name: "unknown disk bus", obj: machine("m-disk-bus", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Bus = "ide" }),
			field: "spec.disks[0].bus", msg: `supported values: "virtio", "scsi", "sata"`},
		{name: "image reference malformed", obj: machine("m-disk-image", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Image = "default/Ubuntu Noble" }),
			field: "spec.disks[0].image", msg: "`name` or `namespace/name`"},
		{name: "storage class name not a DNS name", obj: machine("m-disk-sc", func(s *infrav1.HarvesterMachineSpec) {
			s.Disks[0] = infrav1.Disk{StorageClassName: "Fast_SSD", Size: resource.MustParse("10Gi")}
		}), field: "spec.disks[0].storageClassName", msg: "RFC 1123 subdomain"},
		{name: "duplicate disk names", obj: machine("m-disk-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Disks = append(s.Disks, infrav1.Disk{Name: "disk-0", StorageClassName: "longhorn", Size: resource.MustParse("10Gi")})
		}), field: "spec.disks[1].name", msg: "Duplicate value"},
		{name: "duplicate boot order", obj: machine("m-boot-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Disks[0].BootOrder = ptr.To[int32](1)
			s.Disks = append(s.Disks, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("10Gi"), BootOrder: ptr.To[int32](1)})
		}), field: "spec.disks[1].bootOrder", msg: "Duplicate value"},
		{name: "boot order zero", obj: machine("m-boot-zero", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].BootOrder = ptr.To[int32](0) }),
			field: "spec.disks[0].bootOrder", msg: "at least 1"},
		{name: "no networks", obj: machine("m-no-nets", func(s *infrav1.HarvesterMachineSpec) { s.Networks = []infrav1.Network{} }),
			field: "spec.networks", msg: "at least 1 items"},
		{name: "more than 8 networks", obj: machine("m-nets-9", func(s *infrav1.HarvesterMachineSpec) { s.Networks = networks(9) }),
			field: "spec.networks", msg: "must have at most 8 items"},
		{name: "network without namespace", obj: machine("m-net-bare", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].NetworkName = "vlan10" }),
			field: "spec.networks[0].networkName", msg: "`namespace/name`"},
		{name: "network namespace not a DNS label", obj: machine("m-net-ns", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].NetworkName = "Default/vlan10" }),
			field: "spec.networks[0].networkName", msg: "namespace: a lowercase RFC 1123 label"},
		{name: "interface name not a DNS label", obj: machine("m-net-name", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].Name = "eth0.100" }),
			field: "spec.networks[0].name", msg: "must not contain dots"},
		{name: "duplicate interface names", obj: machine("m-net-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = []infrav1.Network{{Name: "mgmt", NetworkName: "default/vlan10"}, {Name: "mgmt", NetworkName: "default/vlan20"}}
		}), field: "spec.networks[1].name", msg: "Duplicate value"},
		{name: "malformed MAC", obj: machine("m-mac-bad", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].MACAddress = "52:54:00:zz:00:01" }),
			field: "spec.networks[0].macAddress", msg: "MAC address"},
		{name: "multicast MAC", obj: machine("m-mac-multicast", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].MACAddress = "01:00:5e:00:00:01" }),
			field: "spec.networks[0].macAddress", msg: "unicast"},
		{name: "duplicate MAC", obj: machine("m-mac-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = []infrav1.Network{
				{NetworkName: "default/vlan10", MACAddress: "52:54:00:00:00:01"},
				{NetworkName: "default/vlan20", MACAddress: "52:54:00:00:00:01"},
			}
		}), field: "spec.networks[1].macAddress", msg: "Duplicate value"},
		{name: "IP pool without API group", obj: machine("m-pool-group", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{Kind: "InClusterIPPool", Name: "nodes"}}
		}), field: "spec.networks[0].addressesFromPools[0].apiGroup", msg: "at least 1 chars long"},
		{name: "IP pool kind malformed", obj: machine("m-pool-kind", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "in-cluster pool", Name: "nodes"}}
		}), field: "spec.networks[0].addressesFromPools[0].kind", msg: "must be the pool's kind"},
		{name: "IP pool name malformed", obj: machine("m-pool-name", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "Nodes_A"}}
		}), field: "spec.networks[0].addressesFromPools[0].name", msg: "RFC 1123 subdomain"},
		{name: "IP pool named twice on a NIC", obj: machine("m-pool-dup", func(s *infrav1.HarvesterMachineSpec) {
			ref := infrav1.IPPoolReference{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{ref, ref}
		}), field: "spec.networks[0].addressesFromPools[1]", msg: "Duplicate value"},
		{name: "nameserver not an IP", obj: machine("m-ns-bad", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
			s.Networks[0].Nameservers = []string{"dns.example.com"}
		}), field: "spec.networks[0].nameservers[0]", msg: "must be an IPv4 or IPv6 address"},
		{name: "nameservers without IP pools", obj: machine("m-ns-dhcp", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].Nameservers = []string{"10.0.0.53"} }),
			field: "spec.networks[0].nameservers", msg: "only with addressesFromPools"},
		{name: "networkData together with IP pools", obj: machine("m-pool-netdata", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
			s.NetworkData = "version: 2\n"
		}), field: "spec.networkData", msg: "must be empty when a NIC takes addresses from IP pools"},
		{name: "machine template networkData together with IP pools", obj: machineTemplate("mt-pool-netdata", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
			s.NetworkData = "version: 2\n"
		}), field: "spec.template.spec.networkData", msg: "must be empty when a NIC takes addresses from IP pools", variantOf: "networkData together with IP pools"},
		{name: "unknown boot mode", obj: machine("m-bootmode", func(s *infrav1.HarvesterMachineSpec) { s.Firmware.BootMode = "UEFI" }),
			field: "spec.firmware.bootMode", msg: `supported values: "BIOS", "EFI"`},
		{name: "secure boot without EFI", obj: machine("m-secureboot", func(s *infrav1.HarvesterMachineSpec) { s.Firmware.SecureBoot = true }),
			field: "spec.firmware.secureBoot", msg: "requires bootMode EFI"},
		{name: "persistent UEFI variables without EFI", obj: machine("m-efivars", func(s *infrav1.HarvesterMachineSpec) { s.Firmware.PersistentEFIVars = true }),
			field: "spec.firmware.persistentEFIVars", msg: "require bootMode EFI"},
		{name: "persistent TPM without a TPM", obj: machine("m-tpm", func(s *infrav1.HarvesterMachineSpec) { s.Firmware.PersistentTPM = true }),
			field: "spec.firmware.persistentTPM", msg: "requires tpm"},
		{name: "isolated emulator thread without pinned CPUs", obj: machine("m-emulator", func(s *infrav1.HarvesterMachineSpec) { s.IsolateEmulatorThread = true }),
			field: "spec.isolateEmulatorThread", msg: "requires dedicatedCPUPlacement"},
		{name: "machine template isolated emulator thread without pinned CPUs", obj: machineTemplate("mt-emulator", func(s *infrav1.HarvesterMachineSpec) { s.IsolateEmulatorThread = true }),
			field: "spec.template.spec.isolateEmulatorThread", msg: "requires dedicatedCPUPlacement", variantOf: "isolated emulator thread without pinned CPUs"},
		{name: "network-config version without IP pools", obj: machine("m-ncv", func(s *infrav1.HarvesterMachineSpec) { s.NetworkConfigVersion = 1 }),
			field: "spec.networkConfigVersion", msg: "only with addressesFromPools"},
		{name: "network-config version 3", obj: machine("m-ncv3", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
			s.NetworkConfigVersion = 3
		}), field: "spec.networkConfigVersion", msg: `supported values: "1", "2"`},
		{name: "userData not a mapping", obj: machine("m-userdata", func(s *infrav1.HarvesterMachineSpec) { s.UserData = "#cloud-config\n- runcmd\n" }),
			field: "spec.userData", msg: "must be cloud-config, a YAML mapping"},
		{name: "unknown NIC model", obj: machine("m-nicmodel", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].Model = "virtio-net" }),
			field: "spec.networks[0].model", msg: `supported values: "virtio", "e1000"`},
		{name: "keypair name malformed", obj: machine("m-keypair", func(s *infrav1.HarvesterMachineSpec) { s.SSHKeyPairs = []string{"my key"} }),
			field: "spec.sshKeyPairs[0]", msg: "`name` or `namespace/name`"},
		{name: "keypair named twice", obj: machine("m-keypair-dup", func(s *infrav1.HarvesterMachineSpec) { s.SSHKeyPairs = []string{"ops", "ops"} }),
			field: "spec.sshKeyPairs[1]", msg: "Duplicate value"},
		{name: "unsupported run strategy", obj: machine("m-run", func(s *infrav1.HarvesterMachineSpec) { s.RunStrategy = "Halted" }),
			field: "spec.runStrategy", msg: `supported values: "Always", "RerunOnFailure"`},
		{name: "foreign provider ID", obj: machine("m-providerid", func(s *infrav1.HarvesterMachineSpec) { s.ProviderID = "aws:///i-123" }),
			field: "spec.providerID", msg: "must start with harvester://"},
		{name: "two management NICs", obj: machine("m-mgmt-two", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = []infrav1.Network{{NetworkName: "default/vlan10", Management: true}, {NetworkName: "default/vlan20", Management: true}}
		}), field: "spec.networks", msg: "at most one network can be the management network"},
		{name: "CPU model with a space", obj: machine("m-cpumodel", func(s *infrav1.HarvesterMachineSpec) { s.CPUModel = "host passthrough" }),
			field: "spec.cpuModel", msg: "should match"},
		{name: "host device without a vendor domain", obj: machine("m-hostdev", func(s *infrav1.HarvesterMachineSpec) {
			s.HostDevices = []infrav1.HostDevice{{DeviceName: "I350_GIGABIT_NETWORK_CONNECTION"}}
		}), field: "spec.hostDevices[0].deviceName", msg: "should match"},
		{name: "vGPU in the kubernetes.io domain", obj: machine("m-gpu-k8s", func(s *infrav1.HarvesterMachineSpec) {
			s.GPUs = []infrav1.HostDevice{{DeviceName: "kubernetes.io/gpu"}}
		}), field: "spec.gpus[0].deviceName", msg: "kubernetes.io resources are not devices"},
		{name: "a GPU and a host device of one name", obj: machine("m-dev-dup", func(s *infrav1.HarvesterMachineSpec) {
			s.HostDevices = []infrav1.HostDevice{{Name: "dev", DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"}}
			s.GPUs = []infrav1.HostDevice{{Name: "dev", DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
		}), field: "spec.gpus[0].name", msg: "Duplicate value"},
		{name: "live migration asked of a VM with a vGPU", obj: machine("m-gpu-migrate", func(s *infrav1.HarvesterMachineSpec) {
			s.GPUs = []infrav1.HostDevice{{DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
			s.HostMaintenance.Policy = infrav1.HostMaintenanceLiveMigrate
		}), field: "spec.hostMaintenance.policy", msg: "cannot live-migrate"},
		{name: "maxCPU below cpu", obj: machine("m-maxcpu", func(s *infrav1.HarvesterMachineSpec) { s.MaxCPU = 1 }),
			field: "spec.maxCPU", msg: "must be at least cpu (2)"},
		{name: "maxMemory below memory", obj: machine("m-maxmem", func(s *infrav1.HarvesterMachineSpec) { s.MaxMemory = ptr.To(resource.MustParse("2Gi")) }),
			field: "spec.maxMemory", msg: "must be at least memory (4Gi)"},
		{name: "maxMemory with less than 1Gi of guest memory", obj: machine("m-maxmem-small", func(s *infrav1.HarvesterMachineSpec) {
			s.Memory, s.MaxMemory = resource.MustParse("1Gi"), ptr.To(resource.MustParse("4Gi"))
			s.ReservedMemory = ptr.To(resource.MustParse("100Mi"))
		}), field: "spec.maxMemory", msg: "at least 1Gi"},
		{name: "maxMemory not in whole 2Mi", obj: machine("m-maxmem-odd", func(s *infrav1.HarvesterMachineSpec) { s.MaxMemory = ptr.To(resource.MustParse("4097Mi")) }),
			field: "spec.maxMemory", msg: "whole 2Mi"},
		{name: "maxCPU with a vGPU", obj: machine("m-maxcpu-gpu", func(s *infrav1.HarvesterMachineSpec) {
			s.MaxCPU = 4
			s.GPUs = []infrav1.HostDevice{{DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
		}), field: "spec.maxCPU", msg: "not with hostDevices or gpus"},
		{name: "unknown host maintenance policy", obj: machine("m-maint", func(s *infrav1.HarvesterMachineSpec) { s.HostMaintenance.Policy = "Shutdown" }),
			field: "spec.hostMaintenance.policy", msg: `supported values: "LiveMigrate", "DrainAndRestart"`},
		{name: "machine template live migration with a host device", obj: machineTemplate("mt-dev-migrate", func(s *infrav1.HarvesterMachineSpec) {
			s.HostDevices = []infrav1.HostDevice{{DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"}}
			s.HostMaintenance.Policy = infrav1.HostMaintenanceLiveMigrate
		}), field: "spec.template.spec.hostMaintenance.policy", msg: "cannot live-migrate", variantOf: "live migration asked of a VM with a vGPU"},

		// Templates carry the same checks under spec.template.spec, and refuse what every
		// machine made from them would share.
		{name: "machine template with a provider ID", obj: machineTemplate("mt-providerid", func(s *infrav1.HarvesterMachineSpec) {
			s.ProviderID = "harvester://6f1a5c1e-0000-4000-8000-000000000001"
		}), field: "spec.template.spec.providerID", msg: "must not be set in a template"},
		{name: "machine template with a MAC address", obj: machineTemplate("mt-mac", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = append(s.Networks, infrav1.Network{NetworkName: "default/vlan20", MACAddress: "52:54:00:00:00:01"})
		}), field: "spec.template.spec.networks", msg: "must not fix a MAC address in a template"},
		{name: "machine template with zero CPUs", obj: machineTemplate("mt-cpu", func(s *infrav1.HarvesterMachineSpec) { s.CPU = 0 }),
			field: "spec.template.spec.cpu", msg: "greater than or equal to 1", variantOf: "zero CPUs"},
		{name: "machine template memory below 128Mi", obj: machineTemplate("mt-mem", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("64Mi") }),
			field: "spec.template.spec.memory", msg: "must be at least 128Mi", variantOf: "memory below 128Mi"},
		{name: "machine template disk below 1Gi", obj: machineTemplate("mt-disk-small", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("512Mi") }),
			field: "spec.template.spec.disks[0].size", msg: "must be at least 1Gi", variantOf: "disk below 1Gi"},
		{name: "machine template disk without source", obj: machineTemplate("mt-disk", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Image = "" }),
			field: "spec.template.spec.disks[0]", msg: "exactly one of image or storageClassName", variantOf: "disk without source"},
		{name: "cluster template without target namespace", obj: clusterTemplate("ct-ns", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "" }),
			field: "spec.template.spec.targetNamespace", msg: "at least 1 chars long", variantOf: "empty target namespace"},
		{name: "cluster template in kube-public", obj: clusterTemplate("ct-ns-system", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "kube-public" }),
			field: "spec.template.spec.targetNamespace", msg: "is a system namespace", variantOf: "target namespace kube-system"},
		{name: "cluster template dhcp with pool", obj: clusterTemplate("ct-dhcp", func(s *infrav1.HarvesterClusterSpec) {
			s.LoadBalancer = infrav1.LoadBalancerSpec{IPAM: infrav1.IPAMDHCP, IPPoolName: "pool-a"}
		}), field: "spec.template.spec.loadBalancer.ipPoolName", msg: "only be named with ipam `pool`", variantOf: "ip pool with dhcp"},
	}

	names := map[string]bool{}
	faults := 0
	for _, tc := range cases {
		if names[tc.name] {
			t.Fatalf("two cases are named %q", tc.name)
		}
		names[tc.name] = true
		if tc.variantOf == "" {
			faults++
		}
	}
	for _, tc := range cases {
		if tc.variantOf != "" && !names[tc.variantOf] {
			t.Fatalf("case %q is a variant of %q, which is not in the table", tc.name, tc.variantOf)
		}
	}
	if faults < 40 {
		t.Fatalf("issue 11 asks for at least 40 distinct rejected faults, the table has %d", faults)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tc.obj)
			expectInvalid(g, err, tc.field, tc.msg)
		})
	}
}

// Names that no VM name or label value can hold are accepted: refusing them would wedge the
// MachineSet that made them. The provider hashes them (pkg/harvester VMName).
func TestLongNamesAndTheDefaultNamespaceAreAccepted(t *testing.T) {
	env := management(t)
	g := NewWithT(t)
	long := strings.Repeat("workers-gpu-a100-", 8) + "7c9f8-x2kqz"
	g.Expect(len(long)).To(BeNumerically(">", 63))
	g.Expect(env.Client.Create(ctx, machine(long, nil))).To(Succeed())
	g.Expect(env.Client.Create(ctx, machine("worker.eu-west-1.example", nil))).To(Succeed())

	g.Expect(env.Client.Create(ctx, cluster("in-default", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "default" }))).To(Succeed(),
		"default is an ordinary Harvester namespace for VMs")
	g.Expect(env.Client.Create(ctx, cluster("kube-like", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "kube-guests" }))).To(Succeed(),
		"only the listed kube-* namespaces are the system's")

	// The floors themselves are allowed.
	g.Expect(env.Client.Create(ctx, machine("at-the-floor", func(s *infrav1.HarvesterMachineSpec) {
		s.CPU, s.Memory, s.Disks[0].Size = infrav1.MaxCPU, resource.MustParse(infrav1.MinMemory), resource.MustParse(infrav1.MinDiskSize)
	}))).To(Succeed())
}

// A machine and a template whose NICs take addresses from pools (one pool per family, DNS
// servers) are accepted.
func TestIPPoolReferencesAreAccepted(t *testing.T) {
	env := management(t)
	g := NewWithT(t)
	pools := func(s *infrav1.HarvesterMachineSpec) {
		s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{
			{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes-v4"},
			{APIGroup: infrav1.IPAMAPIGroup, Kind: "GlobalInClusterIPPool", Name: "nodes-v6"},
		}
		s.Networks[0].Nameservers = []string{"10.0.0.53", "fd00::53"}
	}
	g.Expect(env.Client.Create(ctx, machine("with-pools", pools))).To(Succeed())
	g.Expect(env.Client.Create(ctx, machineTemplate("with-pools", pools))).To(Succeed())
	got := &infrav1.HarvesterMachine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "with-pools"}, got)).To(Succeed())
	g.Expect(got.Spec.Networks[0].AddressesFromPools).To(HaveLen(2))
	g.Expect(got.Spec.Networks[0].Nameservers).To(Equal([]string{"10.0.0.53", "fd00::53"}))
}

// The floor holds with no webhook in the path: each of these is refused by the CRD schema alone.
func TestFloorHoldsWithoutWebhooks(t *testing.T) {
	env := crdOnly(t)
	cases := []struct {
		name  string
		obj   client.Object
		field string
		msg   string
	}{
		{"zero CPUs", machine("cpu-zero", func(s *infrav1.HarvesterMachineSpec) { s.CPU = 0 }), "spec.cpu", "greater than or equal to 1"},
		{"too many CPUs", machine("cpu-max", func(s *infrav1.HarvesterMachineSpec) { s.CPU = infrav1.MaxCPU + 1 }), "spec.cpu", "less than or equal to 512"},
		{"memory below the floor", machine("mem-low", func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("64Mi") }),
			"spec.memory", "must be at least " + infrav1.MinMemory},
		{"disk below the floor", machine("disk-small", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("500Mi") }),
			"spec.disks[0].size", "must be at least " + infrav1.MinDiskSize},
		{"disk size as a plain number", withDiskSize(t, machine("disk-int", nil), int64(1000)),
			"spec.disks[0].size", "must be at least " + infrav1.MinDiskSize},
		{"cloud-init disk name", machine("disk-reserved", func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Name = infrav1.CloudInitDiskName }),
			"spec.disks[0].name", "is reserved"},
		{"template provider ID", machineTemplate("t-providerid", func(s *infrav1.HarvesterMachineSpec) { s.ProviderID = "harvester://x" }),
			"spec.template.spec.providerID", "must not be set in a template"},
		{"template MAC", machineTemplate("t-mac", func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].MACAddress = "52:54:00:00:00:01" }),
			"spec.template.spec.networks", "must not fix a MAC address"},
		{"two management NICs", machine("mgmt-two", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks = []infrav1.Network{{NetworkName: "default/vlan10", Management: true}, {NetworkName: "default/vlan20", Management: true}}
		}), "spec.networks", "at most one network can be the management network"},
		{"CPU model with a space", machine("cpumodel", func(s *infrav1.HarvesterMachineSpec) { s.CPUModel = "host passthrough" }),
			"spec.cpuModel", "should match"},
		{"device name without a vendor domain", machineTemplate("t-hostdev", func(s *infrav1.HarvesterMachineSpec) {
			s.HostDevices = []infrav1.HostDevice{{DeviceName: "I350_GIGABIT_NETWORK_CONNECTION"}}
		}), "spec.template.spec.hostDevices[0].deviceName", "should match"},
		{"networkData with IP pools", machine("netdata-pools", func(s *infrav1.HarvesterMachineSpec) {
			s.Networks[0].AddressesFromPools = []infrav1.IPPoolReference{{APIGroup: infrav1.IPAMAPIGroup, Kind: "InClusterIPPool", Name: "nodes"}}
			s.NetworkData = "version: 2\n"
		}), "spec.networkData", "must be empty when a NIC takes addresses from IP pools"},
		{"pod affinity across namespaces", machine("affinity-ns", func(s *infrav1.HarvesterMachineSpec) {
			s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname", NamespaceSelector: &metav1.LabelSelector{}},
			}}}
		}), "spec.affinity", "podAffinity terms may not name namespaces"},
		{"template pod anti-affinity naming a namespace", machineTemplate("t-affinity-ns", func(s *infrav1.HarvesterMachineSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"tenant-b"}}},
			}}}
		}), "spec.template.spec.affinity", "podAntiAffinity terms may not name namespaces"},
		{"kube-system", cluster("ns-kube-system", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "kube-system" }),
			"spec.targetNamespace", "is a system namespace"},
		{"cattle-*", clusterTemplate("ns-cattle", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "cattle-fleet-system" }),
			"spec.template.spec.targetNamespace", "is a system namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// No webhook fills in defaults either: disks and NICs go without names here.
			expectInvalid(g, env.Client.Create(ctx, tc.obj), tc.field, tc.msg)
		})
	}

	// The same apiserver takes valid objects, so the refusals above are the rules' doing.
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, machine("valid", nil))).To(Succeed())
	g.Expect(env.Client.Create(ctx, machineTemplate("valid", nil))).To(Succeed())
	g.Expect(env.Client.Create(ctx, machine("valid-devices", func(s *infrav1.HarvesterMachineSpec) {
		s.CPUModel = "host-passthrough"
		s.Networks = []infrav1.Network{{NetworkName: "default/vlan10"}, {NetworkName: "default/vlan20", Management: true}}
		s.HostDevices = []infrav1.HostDevice{{DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"}}
		s.GPUs = []infrav1.HostDevice{{DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
	}))).To(Succeed(), "devices, a CPU model and a second NIC as management pass the rules")
	g.Expect(env.Client.Create(ctx, withDiskSize(t, machine("valid-int", nil), int64(2<<30)))).To(Succeed(),
		"a size written as a plain number of bytes passes the rule too")
	g.Expect(env.Client.Create(ctx, cluster("valid", func(s *infrav1.HarvesterClusterSpec) { s.TargetNamespace = "default" }))).To(Succeed())
}

func TestDefaultsAreApplied(t *testing.T) {
	env := management(t)
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
	env := management(t)
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
			"spec.identityRef", "cannot change once the cluster is provisioned")

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
		expectInvalid(g, env.Client.Update(ctx, changed), "spec.cpu", "cannot change on a machine made without maxCPU")
		changed = m.DeepCopy()
		changed.Spec.Disks[0].Image = "default/other-image"
		expectInvalid(g, env.Client.Update(ctx, changed), "spec", "change the machine template and let CAPI roll out new machines")

		// The provider fills in providerID once; after that it is fixed.
		m.Spec.ProviderID = "harvester://6f1a5c1e-0000-4000-8000-000000000001"
		g.Expect(env.Client.Update(ctx, m)).To(Succeed())
		changed = m.DeepCopy()
		changed.Spec.ProviderID = "harvester://6f1a5c1e-0000-4000-8000-000000000002"
		expectInvalid(g, env.Client.Update(ctx, changed), "spec.providerID", "cannot change once set")

		// Labels and annotations are not spec: CAPI propagates them in place. Such an update
		// calls neither webhook (the spec was defaulted when the machine was made and cannot
		// change); one that changes the spec still meets the validation.
		validating, mutating := webhookCalls(g, "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine"),
			webhookCalls(g, "/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine")
		m.Labels = map[string]string{"team": "a"}
		m.Finalizers = []string{infrav1.MachineFinalizer}
		g.Expect(env.Client.Update(ctx, m)).To(Succeed())
		g.Expect(webhookCalls(g, "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine")).To(Equal(validating))
		g.Expect(webhookCalls(g, "/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine")).To(Equal(mutating))
		changed = m.DeepCopy()
		changed.Spec.Memory = resource.MustParse("16Gi")
		expectInvalid(g, env.Client.Update(ctx, changed), "spec.memory", "cannot change on a machine made without maxMemory")
		g.Expect(webhookCalls(g, "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine")).To(Equal(validating + 1))
		g.Expect(webhookCalls(g, "/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine")).To(Equal(mutating))
		m.Finalizers = nil
		g.Expect(env.Client.Update(ctx, m)).To(Succeed())
	})
}

// The defaulting of a HarvesterMachine is called only when one of HarvesterMachineSpec.Default's
// fields is missing (the shipped configuration's match condition): a machine made, as Cluster API
// makes one, from a template its own defaulting filled in is validated and not defaulted again;
// a machine missing any one default is defaulted as before. A default added to Default without
// the condition fails the first case.
func TestDefaultingIsCalledOnlyWhenADefaultIsMissing(t *testing.T) {
	env := management(t)
	const mutate, validate = "/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine",
		"/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestermachine"
	defaulted := func() infrav1.HarvesterMachineSpec {
		s := validMachineSpec()
		s.Disks = append(s.Disks, infrav1.Disk{Image: "default/ubuntu-24.04", Size: resource.MustParse("10Gi")})
		s.HostDevices = []infrav1.HostDevice{{DeviceName: "intel.com/I350_GIGABIT_NETWORK_CONNECTION"}}
		s.GPUs = []infrav1.HostDevice{{DeviceName: "nvidia.com/NVIDIA_A2-4Q"}}
		s.Default()
		return s
	}
	for i, tc := range []struct {
		missing string
		unset   func(*infrav1.HarvesterMachineSpec)
	}{
		{missing: "nothing"},
		{missing: "a disk's name", unset: func(s *infrav1.HarvesterMachineSpec) { s.Disks[1].Name = "" }},
		{missing: "a disk's bus", unset: func(s *infrav1.HarvesterMachineSpec) { s.Disks[1].Bus = "" }},
		{missing: "every boot order", unset: func(s *infrav1.HarvesterMachineSpec) {
			for i := range s.Disks {
				s.Disks[i].BootOrder = nil
			}
		}},
		{missing: "a NIC's name", unset: func(s *infrav1.HarvesterMachineSpec) { s.Networks[0].Name = "" }},
		{missing: "a host device's name", unset: func(s *infrav1.HarvesterMachineSpec) { s.HostDevices[0].Name = "" }},
		{missing: "a GPU's name", unset: func(s *infrav1.HarvesterMachineSpec) { s.GPUs[0].Name = "" }},
		{missing: "the firmware's boot mode", unset: func(s *infrav1.HarvesterMachineSpec) { s.Firmware.BootMode = "" }},
		{missing: "the run strategy", unset: func(s *infrav1.HarvesterMachineSpec) { s.RunStrategy = "" }},
	} {
		t.Run(tc.missing, func(t *testing.T) {
			g := NewWithT(t)
			m := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("defaults-%d", i), Namespace: namespace}, Spec: defaulted()}
			if tc.unset != nil {
				tc.unset(&m.Spec)
			}
			mutating, validating := webhookCalls(g, mutate), webhookCalls(g, validate)
			g.Expect(env.Client.Create(ctx, m)).To(Succeed())
			wantMutating := mutating
			if tc.unset != nil {
				wantMutating++
			}
			g.Expect(webhookCalls(g, mutate)).To(Equal(wantMutating), "defaulting calls")
			g.Expect(webhookCalls(g, validate)).To(Equal(validating+1), "validation calls")
			g.Expect(equality.Semantic.DeepEqual(m.Spec, defaulted())).To(BeTrue(), "stored spec %+v", m.Spec)
			g.Expect(env.Client.Delete(ctx, m)).To(Succeed())
		})
	}
}

// A machine made with maximums grows its CPUs and memory up to them in place (what Cluster API's
// in-place updates write into it), and any machine its image disks; nothing shrinks, and nothing
// else changes with them.
func TestResizableMachinesGrowWithinTheirMaximums(t *testing.T) {
	env := management(t)
	g := NewWithT(t)
	m := machine("resizable", func(s *infrav1.HarvesterMachineSpec) {
		s.CPU, s.MaxCPU = 2, 4
		s.Memory, s.MaxMemory = resource.MustParse("4Gi"), ptr.To(resource.MustParse("8Gi"))
	})
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	// As Cluster API's in-place update writes it: the new spec with its update-in-progress mark.
	update := func(mutate func(*infrav1.HarvesterMachineSpec)) error {
		changed := m.DeepCopy()
		changed.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
		mutate(&changed.Spec)
		return env.Client.Update(ctx, changed)
	}
	// By hand: refused, so that a machine never drifts from its MachineSet's template, which
	// the next in-place update starts from; a dry run (KubeadmControlPlane's check) passes.
	byHand := m.DeepCopy()
	byHand.Spec.CPU = 3
	expectInvalid(g, env.Client.Update(ctx, byHand.DeepCopy()), "spec", "resized only by Cluster API's in-place update")
	g.Expect(env.Client.Update(ctx, byHand, client.DryRunAll)).To(Succeed())

	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 5 }), "spec.cpu", "can grow only up to maxCPU (4)")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 1 }), "spec.cpu", "cannot shrink from 2")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.CPU, s.MaxCPU = 6, 8 }), "spec.maxCPU", "fixed when it was made")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.MaxCPU = 8 }), "spec", "change the machine template")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("10Gi") }), "spec.memory", "can grow only up to maxMemory (8Gi)")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.Memory = resource.MustParse("2Gi") }), "spec.memory", "cannot shrink from 4Gi")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) {
		s.Memory, s.ReservedMemory = resource.MustParse("6Gi"), ptr.To(resource.MustParse("256Mi"))
	}), "spec.reservedMemory", "cannot change while the memory changes in place")
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) {
		s.CPU = 3
		s.Disks[0].Image = "default/other-image"
	}), "spec", "change the machine template")

	g.Expect(update(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 3 })).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	g.Expect(update(func(s *infrav1.HarvesterMachineSpec) { s.CPU, s.Memory = 4, resource.MustParse("8Gi") })).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	g.Expect(m.Spec.CPU).To(Equal(int32(4)))
	g.Expect(m.Spec.Memory.String()).To(Equal("8Gi"))
	expectInvalid(g, update(func(s *infrav1.HarvesterMachineSpec) { s.CPU = 3 }), "spec.cpu", "cannot shrink from 4")

	// Image disks grow on any machine; nothing else of a disk changes with it.
	plain := machine("growing-disks", func(s *infrav1.HarvesterMachineSpec) {
		s.Disks = append(s.Disks, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("10Gi")})
	})
	g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
	updatePlain := func(mutate func(*infrav1.HarvesterMachineSpec)) error {
		changed := plain.DeepCopy()
		changed.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
		mutate(&changed.Spec)
		return env.Client.Update(ctx, changed)
	}
	expectInvalid(g, updatePlain(func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("20Gi") }), "spec.disks[0].size", "cannot shrink from 40Gi")
	expectInvalid(g, updatePlain(func(s *infrav1.HarvesterMachineSpec) { s.Disks[1].Size = resource.MustParse("20Gi") }), "spec.disks[1].size", "only image disks grow in place")
	expectInvalid(g, updatePlain(func(s *infrav1.HarvesterMachineSpec) {
		s.Disks[0].Size, s.Disks[0].Image = resource.MustParse("50Gi"), "default/other-image"
	}), "spec", "change the machine template")
	g.Expect(updatePlain(func(s *infrav1.HarvesterMachineSpec) { s.Disks[0].Size = resource.MustParse("50Gi") })).To(Succeed())
}

// webhookCalls is how many requests the in-process webhook server has answered on path.
func webhookCalls(g Gomega, path string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

func TestTemplatesAllowTopologyDryRun(t *testing.T) {
	env := management(t)
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
	expectInvalid(g, env.Client.Update(ctx, changedMT, client.DryRunAll), "spec.template.spec.cpu", "greater than or equal to 1")
}

func TestCRDsCarryTheContractLabel(t *testing.T) {
	env := management(t)
	g := NewWithT(t)
	for _, plural := range []string{"harvesterclusters", "harvesterclustertemplates", "harvestermachines", "harvestermachinetemplates"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: plural + ".infrastructure.cluster.x-k8s.io"}, crd)).To(Succeed())
		g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), plural)
		g.Expect(crd.Spec.Versions).To(HaveLen(1))
		g.Expect(crd.Spec.Versions[0].Name).To(Equal("v1alpha1"))
	}
}
