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

import (
	"net"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// quantityOrZero parses s, or returns the zero quantity (what an unset field decodes to).
func quantityOrZero(s string) resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// FuzzMachineSpecValidation feeds arbitrary field values to the HarvesterMachine(Template)
// webhook's validation. It must never panic, and whatever it accepts must be a machine the VM
// builder can build: within the floor, with disk and interface names KubeVirt takes, and still
// accepted (and unchanged by a second pass) once defaulted, since the mutating webhook defaults
// before the validating one checks.
func FuzzMachineSpecValidation(f *testing.F) {
	f.Add(int32(2), "4Gi", "", "", "default/ubuntu", "", "40Gi", "virtio", int32(0), "", "default/vlan10", "", "ops", "", "BIOS", false, "RerunOnFailure", false)
	f.Add(int32(512), "128Mi", "64Mi", "root", "", "longhorn", "1Gi", "scsi", int32(1), "mgmt", "default/vlan10", "52:54:00:12:34:56", "default/ops", "harvester://uid", "EFI", true, "Always", false)
	f.Add(int32(0), "-1", "8Gi", "cloudinitdisk", "a/b/c", "Fast_SSD", "1023Mi", "ide", int32(-1), "eth0.1", "vlan10", "01:00:5e:00:00:01", "my key", "aws:///i-1", "UEFI", true, "Halted", true)
	f.Add(int32(513), "1e3", "", "disk-0", "ubuntu", "", "0", "", int32(1), "nic-0", "/", "zz", "", "", "", false, "", true)
	f.Fuzz(func(t *testing.T, cpu int32, memory, reserved, diskName, image, storageClass, size, bus string, bootOrder int32,
		nicName, networkName, mac, keyPair, providerID, bootMode string, secureBoot bool, runStrategy string, template bool,
	) {
		s := HarvesterMachineSpec{
			ProviderID: providerID,
			CPU:        cpu,
			Memory:     quantityOrZero(memory),
			Disks: []Disk{
				{Name: diskName, Image: image, StorageClassName: storageClass, Size: quantityOrZero(size), Bus: DiskBus(bus)},
				{StorageClassName: "longhorn", Size: resource.MustParse("10Gi")},
			},
			Networks:    []Network{{Name: nicName, NetworkName: networkName, MACAddress: mac}},
			Firmware:    Firmware{BootMode: BootMode(bootMode), SecureBoot: secureBoot},
			RunStrategy: RunStrategy(runStrategy),
		}
		if reserved != "" {
			s.ReservedMemory = ptr.To(quantityOrZero(reserved))
		}
		if bootOrder != 0 {
			s.Disks[0].BootOrder = ptr.To(bootOrder)
		}
		if keyPair != "" {
			s.SSHKeyPairs = []string{keyPair}
		}
		path := field.NewPath("spec")
		validate := s.validate
		if template {
			path = templateSpecPath
			validate = s.validateAsTemplate
		}
		errs := validate(path)
		if len(ratchet(errs, errs)) != 0 {
			t.Fatalf("an unchanged object's errors must all ratchet away: %v", errs)
		}
		if len(errs) > 0 {
			return
		}

		if s.CPU < 1 || s.CPU > MaxCPU {
			t.Fatalf("accepted %d CPUs", s.CPU)
		}
		if s.Memory.Cmp(resource.MustParse(MinMemory)) < 0 {
			t.Fatalf("accepted memory %s", s.Memory.String())
		}
		if r := s.ReservedMemory; r != nil && (r.Sign() < 0 || r.Cmp(s.Memory) >= 0) {
			t.Fatalf("accepted reserved memory %s of %s", r.String(), s.Memory.String())
		}
		for i, d := range s.Disks {
			if d.Size.Cmp(resource.MustParse(MinDiskSize)) < 0 {
				t.Fatalf("accepted disk %d of %s", i, d.Size.String())
			}
			if d.Name == CloudInitDiskName || (d.Name != "" && len(validation.IsDNS1123Label(d.Name)) > 0) {
				t.Fatalf("accepted disk name %q", d.Name)
			}
			if (d.Image == "") == (d.StorageClassName == "") {
				t.Fatalf("accepted disk %d with image %q and storage class %q", i, d.Image, d.StorageClassName)
			}
		}
		for _, n := range s.Networks {
			if n.Name != "" && len(validation.IsDNS1123Label(n.Name)) > 0 {
				t.Fatalf("accepted interface name %q", n.Name)
			}
			if !strings.Contains(n.NetworkName, "/") {
				t.Fatalf("accepted network %q without a namespace", n.NetworkName)
			}
			if n.MACAddress != "" {
				if template {
					t.Fatalf("a template fixed MAC %q", n.MACAddress)
				}
				if hw, err := net.ParseMAC(n.MACAddress); err != nil || len(hw) != 6 || hw[0]&1 == 1 {
					t.Fatalf("accepted MAC %q", n.MACAddress)
				}
			}
		}
		if template && s.ProviderID != "" {
			t.Fatalf("a template fixed providerID %q", s.ProviderID)
		}
		if s.Firmware.SecureBoot && s.Firmware.BootMode != BootModeEFI {
			t.Fatal("accepted secure boot without EFI")
		}

		defaulted := *s.DeepCopy()
		defaulted.Default()
		if errs := defaulted.validate(path); len(errs) > 0 {
			t.Fatalf("an accepted spec is refused once defaulted: %v", errs)
		}
		twice := *defaulted.DeepCopy()
		twice.Default()
		if !reflect.DeepEqual(defaulted, twice) {
			t.Fatalf("defaulting is not idempotent:\n%#v\n%#v", defaulted, twice)
		}
	})
}

// FuzzClusterSpecValidation feeds arbitrary field values to the HarvesterCluster webhook's
// validation. It must never panic, and whatever it accepts must name a user namespace on
// Harvester (a DNS label, not a system namespace) and a usable endpoint and guest API.
func FuzzClusterSpecValidation(f *testing.F) {
	f.Add("harvester-identity", "guests", "pool", "", "", "", int32(0), "", []byte(nil))
	f.Add("identity", "default", "dhcp", "", "default/vlan10", "10.0.0.10", int32(6443), "https://10.0.0.5:6443", []byte(nil))
	f.Add("Identity_", "cattle-system", "static", "Pool_A", "vlan10", "not a host", int32(70000), "http://x", []byte("-----BEGIN CERTIFICATE-----\n"))
	f.Add("identity", "kube-system", "", "pool-a", "a/b/c", "", int32(-1), "https://", []byte("x"))
	f.Fuzz(func(t *testing.T, secret, targetNamespace, ipam, pool, network, host string, port int32, server string, ca []byte) {
		s := HarvesterClusterSpec{
			IdentitySecret:  SecretReference{Name: secret},
			TargetNamespace: targetNamespace,
			LoadBalancer:    LoadBalancerSpec{IPAM: IPAMMode(ipam), IPPoolName: pool, Network: network},
		}
		s.ControlPlaneEndpoint.Host, s.ControlPlaneEndpoint.Port = host, port
		if server != "" || len(ca) > 0 {
			s.GuestHarvesterAPI = &HarvesterAPIEndpoint{Server: server, CABundle: ca}
		}
		errs := s.validate(field.NewPath("spec"))
		if len(ratchet(errs, errs)) != 0 {
			t.Fatalf("an unchanged object's errors must all ratchet away: %v", errs)
		}
		if len(errs) > 0 {
			return
		}

		if len(validation.IsDNS1123Label(s.TargetNamespace)) > 0 {
			t.Fatalf("accepted target namespace %q", s.TargetNamespace)
		}
		if owner := systemNamespaceOwner(s.TargetNamespace); owner != "" {
			t.Fatalf("accepted %s's namespace %q", owner, s.TargetNamespace)
		}
		if len(validation.IsDNS1123Subdomain(s.IdentitySecret.Name)) > 0 {
			t.Fatalf("accepted identity Secret %q", s.IdentitySecret.Name)
		}
		if ep := s.ControlPlaneEndpoint; (ep.Host == "") != (ep.Port == 0) || ep.Port < 0 || ep.Port > 65535 {
			t.Fatalf("accepted endpoint %q:%d", ep.Host, ep.Port)
		}
		if s.LoadBalancer.IPAM == IPAMDHCP && s.LoadBalancer.IPPoolName != "" {
			t.Fatal("accepted an IP pool with dhcp")
		}
		if api := s.GuestHarvesterAPI; api != nil && (api.Server != "" || len(api.CABundle) > 0) {
			u, err := url.Parse(api.Server)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				t.Fatalf("accepted guest API %q", api.Server)
			}
		}

		defaulted := *s.DeepCopy()
		defaulted.Default()
		if errs := defaulted.validate(field.NewPath("spec")); len(errs) > 0 {
			t.Fatalf("an accepted spec is refused once defaulted: %v", errs)
		}
	})
}

// FuzzDeviceValidation feeds arbitrary CPU models, device names and management flags to the
// machine webhook's validation. Whatever it accepts is what KubeVirt and the hosts' device
// plugins take: a CPU model of the CRD's shape, device names that are DNS labels and unique,
// extended resource names outside kubernetes.io, at most one management NIC; and defaulting
// keeps an accepted spec accepted.
func FuzzDeviceValidation(f *testing.F) {
	f.Add("host-passthrough", "", "intel.com/I350_GIGABIT_NETWORK_CONNECTION", "", "nvidia.com/NVIDIA_A2-4Q", false, true)
	f.Add("host passthrough", "dev", "I350", "dev", "kubernetes.io/gpu", true, true)
	f.Add("", "NIC_1", "a/b/c", "gpu-0", "nvidia.com/", false, false)
	f.Add("Skylake-Client", "", "intel.com/X", "hostdevice-0", "nvidia.com/Y", false, false)
	f.Fuzz(func(t *testing.T, cpuModel, hostDeviceName, hostDeviceResource, gpuName, gpuResource string, firstManagement, secondManagement bool) {
		s := HarvesterMachineSpec{
			CPU:         2,
			Memory:      resource.MustParse("4Gi"),
			Disks:       []Disk{{Image: "default/ubuntu", Size: resource.MustParse("40Gi")}},
			Networks:    []Network{{NetworkName: "default/vlan10", Management: firstManagement}, {NetworkName: "default/vlan20", Management: secondManagement}},
			CPUModel:    cpuModel,
			HostDevices: []HostDevice{{Name: hostDeviceName, DeviceName: hostDeviceResource}},
			GPUs:        []HostDevice{{Name: gpuName, DeviceName: gpuResource}},
		}
		path := field.NewPath("spec")
		errs := s.validate(path)
		if len(ratchet(errs, errs)) != 0 {
			t.Fatalf("an unchanged object's errors must all ratchet away: %v", errs)
		}
		if len(errs) > 0 {
			return
		}
		if s.CPUModel != "" && !cpuModelPattern.MatchString(s.CPUModel) {
			t.Fatalf("accepted CPU model %q", s.CPUModel)
		}
		if firstManagement && secondManagement {
			t.Fatal("accepted two management NICs")
		}
		for _, d := range []HostDevice{s.HostDevices[0], s.GPUs[0]} {
			domain, name, ok := strings.Cut(d.DeviceName, "/")
			if !ok || len(validation.IsDNS1123Subdomain(domain)) > 0 || len(validation.IsQualifiedName(d.DeviceName)) > 0 ||
				name == "" || strings.HasSuffix(domain, "kubernetes.io") {
				t.Fatalf("accepted device resource %q", d.DeviceName)
			}
			if d.Name != "" && len(validation.IsDNS1123Label(d.Name)) > 0 {
				t.Fatalf("accepted device name %q", d.Name)
			}
		}
		if s.HostDevices[0].Name != "" && s.HostDevices[0].Name == s.GPUs[0].Name {
			t.Fatalf("accepted two devices named %q", s.GPUs[0].Name)
		}
		defaulted := *s.DeepCopy()
		defaulted.Default()
		if errs := defaulted.validate(path); len(errs) > 0 {
			t.Fatalf("an accepted spec is refused once defaulted: %v", errs)
		}
	})
}
