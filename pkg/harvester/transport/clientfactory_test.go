package transport

import (
	"context"
	"errors"
	"strings"
	"testing"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// A kubeconfig that does not parse must not have its content echoed into conditions: YAML
// errors quote the offending value, which can be the token.
func TestKubeconfigErrorNeverEchoesContent(t *testing.T) {
	g := NewWithT(t)
	for _, bad := range []string{
		"users: s3cr3t-t0ken-value",
		"apiVersion: v1\nclusters:\n- cluster: s3cr3t-t0ken-value\n",
		"{\"users\": \"s3cr3t-t0ken-value\"",
	} {
		_, err := clientcmd.RESTConfigFromKubeConfig([]byte(bad))
		g.Expect(err).To(HaveOccurred(), bad)
		msg := kubeconfigError(err)
		g.Expect(msg).NotTo(ContainSubstring("s3cr3t"), "parser said: %v", err)
		g.Expect(msg).NotTo(BeEmpty())
	}
}

func TestHashedNamesAreUniqueLabels(t *testing.T) {
	g := NewWithT(t)
	a, b := (naming.Guest{Namespace: "a-b", Name: "c"}).LoadBalancerName(), (naming.Guest{Namespace: "a", Name: "b-c"}).LoadBalancerName()
	g.Expect(a).NotTo(Equal(b))
	g.Expect((naming.Guest{Namespace: "ns", Name: "My_Cluster.1"}).ServiceAccountName()).To(MatchRegexp(`^guest-my-cluster-1-[0-9a-f]{10}$`))
	g.Expect(len((naming.Guest{Namespace: "ns", Name: strings.Repeat("x", 100), Mark: "0123456789"}).LoadBalancerName())).To(BeNumerically("<=", 63))
}

// Connections follow their users: a user that switches identity Secrets, or goes away, does not
// keep a connection (and its watches) alive.
func TestFactoryReleasesConnectionsNoLongerUsed(t *testing.T) {
	g := NewWithT(t)
	stopped := map[string]bool{}
	conn := func(name string, users ...string) *connection {
		c := &connection{identity: name, users: map[string]string{}, cancel: func() { stopped[name] = true }}
		for _, u := range users {
			c.users[u] = "guests"
		}
		return c
	}
	f := &ClientFactory{connections: map[string]*connection{
		"ns/old": conn("ns/old", "cluster-a", "machine-a"),
		"ns/new": conn("ns/new", "cluster-a"),
	}}

	// cluster-a now uses ns/new (what Get does before it connects).
	f.mu.Lock()
	f.releaseLocked("cluster-a", "ns/new")
	f.mu.Unlock()
	g.Expect(f.Connections()).To(Equal([]string{"ns/new", "ns/old"}), "machine-a still uses the old one")
	f.Release("machine-a")
	g.Expect(f.Connections()).To(Equal([]string{"ns/new"}))
	g.Expect(stopped).To(Equal(map[string]bool{"ns/old": true}))
	f.Release("cluster-a")
	g.Expect(f.Connections()).To(BeEmpty())
	g.Expect(stopped).To(HaveKey("ns/new"))

	_, err := f.Get(context.Background(), "x", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}}, "guests", "")
	g.Expect(errors.Is(err, ErrInvalidKubeconfig)).To(BeTrue())
}

func TestCachedObjectsKeepWhatTheProviderReads(t *testing.T) {
	g := NewWithT(t)
	managed := []metav1.ManagedFieldsEntry{{Manager: "virt-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	meta := metav1.ObjectMeta{Namespace: "guests", Name: "m-1", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{naming.LabelManagedBy: naming.ManagedByValue}, Finalizers: []string{"f"}, ManagedFields: managed}

	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: *meta.DeepCopy(),
		Spec: kubevirtv1.VirtualMachineInstanceSpec{Hostname: "m-1", Networks: []kubevirtv1.Network{{Name: "nic-0"}},
			Volumes: []kubevirtv1.Volume{{Name: "disk-0"}}},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "host-1",
			Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "nic-0", IP: "10.0.0.5"}}},
	}
	out, err := slimCached(vmi)
	g.Expect(err).NotTo(HaveOccurred())
	slim := out.(*kubevirtv1.VirtualMachineInstance)
	g.Expect(slim.Status).To(Equal(vmi.Status), "the status is what machines read: phase, host, addresses, conditions")
	g.Expect(slim.Spec.Hostname).To(Equal("m-1"))
	g.Expect(slim.Spec.Networks).To(Equal(vmi.Spec.Networks))
	g.Expect(slim.Spec.Volumes).To(BeEmpty())
	g.Expect(slim.ManagedFields).To(BeNil())
	g.Expect(slim.Labels).To(Equal(meta.Labels))
	g.Expect(slim.UID).To(Equal(meta.UID))

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: *meta.DeepCopy(), Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}
	out, err = slimCached(pvc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*corev1.PersistentVolumeClaim).ObjectMeta).To(Equal(withoutManagedFields(meta)), "a machine's deletion reads a volume's labels and deletion")
	g.Expect(out.(*corev1.PersistentVolumeClaim).Spec).To(BeZero())

	vm := &kubevirtv1.VirtualMachine{ObjectMeta: *meta.DeepCopy(), Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways)}}
	out, err = slimCached(vm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*kubevirtv1.VirtualMachine).ManagedFields).To(BeNil())
	g.Expect(out.(*kubevirtv1.VirtualMachine).Spec).To(Equal(vm.Spec), "a VM is kept whole but for its managed fields")

	// The control-plane load balancer is the provider's and kept whole; a guest's (which the
	// guest writes, as large as it likes) only as far as its name and labels.
	cp := &lbv1.LoadBalancer{ObjectMeta: *meta.DeepCopy(), Spec: lbv1.LoadBalancerSpec{IPPool: "pool"},
		Status: lbv1.LoadBalancerStatus{Address: "10.0.0.9"}}
	out, err = slimCached(cp)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*lbv1.LoadBalancer).Status.Address).To(Equal("10.0.0.9"))
	g.Expect(out.(*lbv1.LoadBalancer).ManagedFields).To(BeNil())
	guest := &lbv1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guests", Name: "svc", Labels: map[string]string{guestcloud.LabelLBCluster: "ns.prod"},
			Annotations: map[string]string{"big": strings.Repeat("x", 1<<16)}},
		Spec: lbv1.LoadBalancerSpec{Description: strings.Repeat("y", 1<<16)},
	}
	out, err = slimCached(guest)
	g.Expect(err).NotTo(HaveOccurred())
	slimLB := out.(*lbv1.LoadBalancer)
	g.Expect(slimLB.Labels).To(Equal(guest.Labels))
	g.Expect(slimLB.Annotations).To(BeEmpty())
	g.Expect(slimLB.Spec).To(BeZero())
}
