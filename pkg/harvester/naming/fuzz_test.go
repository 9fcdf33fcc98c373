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

package naming_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// FuzzNames checks the names the provider gives Harvester objects, for any input: each is what
// its object requires (a Service's and a load balancer's name a DNS-1035 label, a VM's a DNS-1123
// label, a label value a label value, a Secret's or a PVC's a DNS subdomain when the machine's
// name is one), never longer than allowed, and the same on every call (a reconcile after a
// restart must find what the last one made). Names hashed with SHA-256 stay distinct for
// distinct inputs.
func FuzzNames(f *testing.F) {
	f.Add("guest-a", "kube-system", "nginx", "0f8fad5b-d9cb-469f-a165-70867728950e", "cp-abcde", "cp-abcdf")
	f.Add("default.demo", "default", "demo", "", strings.Repeat("workers-gpu-a100-", 8)+"x2kqz", strings.Repeat("workers-gpu-a100-", 8)+"p4r7m")
	f.Add("", "", "", "", "worker.eu-west-1.example", "worker-eu-west-1-example")
	f.Add("9Cluster_Ä", "NS", "-svc-", "uid", "-", ".")
	f.Fuzz(func(t *testing.T, cluster, namespace, name, uid, machine, other string) {
		once := func(what string, fn func() string) string {
			a, b := fn(), fn()
			if a != b {
				t.Fatalf("%s is not stable: %q then %q", what, a, b)
			}
			return a
		}
		expect := func(what, value string, errs []string, maxLen int) {
			if len(errs) > 0 {
				t.Fatalf("%s %q: %v", what, value, errs)
			}
			if len(value) > maxLen {
				t.Fatalf("%s %q is longer than %d", what, value, maxLen)
			}
		}

		lb := once("guestcloud.ServiceLoadBalancerName", func() string { return guestcloud.ServiceLoadBalancerName(cluster, namespace, name, types.UID(uid)) })
		expect("service load balancer", lb, validation.IsDNS1035Label(lb), 63)

		// Clusters of this and earlier versions: with an owner mark, and without.
		guests := []naming.Guest{{Namespace: namespace, Name: name}, {Namespace: namespace, Name: name, Mark: naming.NewOwnerMark(types.UID(uid))}}
		for _, guest := range guests {
			cp := once("LoadBalancerName", guest.LoadBalancerName)
			expect("control-plane load balancer", cp, validation.IsDNS1035Label(cp), 63)

			sa := once("ServiceAccountName", guest.ServiceAccountName)
			expect("guest ServiceAccount", sa, validation.IsDNS1123Label(sa), 63)

			id := once("ID", guest.ID)
			if len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0 {
				expect("cluster ID", id, validation.IsValidLabelValue(id), 63)
			}
			if a, b := namespace+"/"+name, cluster+"/"+other; a != b && cp == (naming.Guest{Namespace: cluster, Name: other, Mark: guest.Mark}).LoadBalancerName() {
				t.Fatalf("clusters %s and %s share load balancer %q", a, b, cp)
			}
		}
		if a, b := guests[0], guests[1]; a.ID() == b.ID() || a.LoadBalancerName() == b.LoadBalancerName() || a.ServiceAccountName() == b.ServiceAccountName() {
			t.Fatalf("cluster %s/%s has the same names with and without an owner mark", namespace, name)
		}

		binding := once("CSIBindingName", func() string { return naming.CSIBindingName(namespace, name) })
		expect("CSI ClusterRoleBinding", binding, validation.IsDNS1123Subdomain(binding), 253)

		value := once("guestcloud.LabelValue", func() string { return guestcloud.LabelValue(cluster) })
		expect("label value", value, validation.IsValidLabelValue(value), 63)

		vm := once("VMName", func() string { return naming.VMName(machine) })
		expect("VM name", vm, validation.IsDNS1123Label(vm), 63)
		if len(validation.IsDNS1123Label(machine)) == 0 && vm != machine {
			t.Fatalf("VM name %q of machine %q: a name that is a label must stay", vm, machine)
		}
		if machine != other && vm == naming.VMName(other) {
			t.Fatalf("machines %q and %q share VM name %q", machine, other, vm)
		}
		label := once("MachineLabelValue", func() string { return naming.MachineLabelValue(machine) })
		expect("machine label", label, validation.IsValidLabelValue(label), 63)

		// Machines' names are DNS subdomains (the apiserver sees to it); the names derived from
		// them must be too, whatever their length.
		if len(validation.IsDNS1123Subdomain(machine)) == 0 {
			secret := once("CloudInitSecretName", func() string { return naming.CloudInitSecretName(machine) })
			expect("cloud-init Secret", secret, validation.IsDNS1123Subdomain(secret), 253)
			m := &infrav1.HarvesterMachine{ObjectMeta: metav1.ObjectMeta{Name: machine, UID: "0f8fad5b-d9cb-469f-a165-70867728950e"}}
			claim := once("ClaimName", func() string { return build.ClaimName(m, "disk-0") })
			expect("volume claim", claim, validation.IsDNS1123Subdomain(claim), 253)
		}
	})
}
