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

// Command demo provisions a whole guest cluster on the simulated Harvester, as `make demo` runs
// it: the test bed (simulated Harvester, management cluster with CAPI core and the kubeadm
// providers, this provider's controllers), a cluster generated from templates/cluster-template.yaml
// with clusterctl's templating, progress as it happens, the end state, then deletion and a leak
// check. Its last line is machine-readable; it exits non-zero on failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

type options struct {
	name, namespace, target, version string
	flavor, managerLog               string
	controlPlanes, workers           int
	timeout                          time.Duration
}

func main() {
	o := options{}
	flag.StringVar(&o.name, "name", "demo", "Name of the guest cluster.")
	flag.StringVar(&o.namespace, "namespace", "demo", "Management-cluster namespace of the guest cluster.")
	flag.StringVar(&o.target, "harvester-namespace", "demo", "Harvester namespace the cluster's VMs go to.")
	flag.StringVar(&o.version, "kubernetes-version", "v1.35.4", "Kubernetes version of the guest cluster.")
	flag.StringVar(&o.flavor, "flavor", "kubeadm", "Cluster template flavour: kubeadm (cluster-template.yaml), rke2 or k3s (cluster-template-<flavor>.yaml, with that distribution's providers).")
	flag.IntVar(&o.controlPlanes, "control-planes", 1, "Control-plane machines: an odd number (the guest's stacked or embedded etcd keeps its quorum).")
	flag.IntVar(&o.workers, "workers", 2, "Worker machines.")
	flag.StringVar(&o.managerLog, "manager-log", "", "File the provider's manager logs to (default: capi-harvester-demo-manager.log in the temporary directory).")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "How long provisioning and deletion may take each.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	switch {
	case o.controlPlanes < 1 || o.controlPlanes%2 == 0:
		return fmt.Errorf("--control-planes=%d: a control plane with stacked etcd needs an odd number of machines to keep its quorum", o.controlPlanes)
	}
	if o.workers < 0 {
		return fmt.Errorf("--workers=%d: must not be negative", o.workers)
	}
	p := &progress{out: out, start: time.Now(), seen: map[string]string{}}
	p.say("starting the simulated Harvester, the management cluster (CAPI core, kubeadm providers) and the provider")
	opts := harvestersim.DefaultOptions()
	// The control-plane load balancer's address is where the guest apiserver listens: loopback.
	opts.IPPools = []harvestersim.IPPoolSpec{{
		Name: "guests", Subnet: "127.77.0.0/24", RangeStart: "127.77.0.10", RangeEnd: "127.77.0.59",
		Namespace: "*",
	}}
	opts.Namespaces = append(opts.Namespaces, o.target)
	// The provider as it ships: the manager binary from its image, installed from the rendered
	// infrastructure-components.yaml with its RBAC, webhooks and arguments.
	work, err := os.MkdirTemp("", "capi-harvester-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	binary, ccmBinary, err := bed.ImageBinaries(work)
	if err != nil {
		return err
	}
	logFile := o.managerLog
	if logFile == "" {
		logFile = filepath.Join(os.TempDir(), "capi-harvester-demo-manager.log")
	}
	_ = os.Remove(logFile)
	b, err := bed.Start(ctx, bed.Options{Harvester: opts, Kubeadm: true, CCMBinary: ccmBinary, Provider: &bed.ProviderOptions{Binary: binary, LogFile: logFile}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Stop(context.WithoutCancel(ctx))) }()
	p.say(fmt.Sprintf("the provider's manager runs from its image: %s %s", binary, strings.Join(b.Provider.Args, " ")))
	p.say("its log: " + logFile)
	p.say("test bed up")

	f, ok := flavors[o.flavor]
	if !ok {
		return fmt.Errorf("unknown flavor %q: kubeadm, rke2 or k3s", o.flavor)
	}
	if f.providers != nil {
		if _, err := b.StartCAPIProviders(ctx, *f.providers); err != nil {
			return err
		}
		p.say(fmt.Sprintf("the %s bootstrap and control-plane providers run as their own processes", f.providers.Name))
	}
	manifest, err := render(ctx, b, o, f)
	if err != nil {
		return err
	}
	objs, err := testenv.DecodeObjects(manifest)
	if err != nil {
		return err
	}
	mgmt := b.Management.Client
	if err := mgmt.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	created := time.Now()
	for _, obj := range objs {
		if err := mgmt.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		p.say(fmt.Sprintf("created %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName()))
	}

	want := o.controlPlanes + o.workers
	var provisioned int
	var endpoint string
	waitErr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.timeout, true, func(ctx context.Context) (bool, error) {
		state, err := observe(ctx, b, o)
		if err != nil {
			return false, nil
		}
		p.update(state.facts)
		provisioned, endpoint = state.provisioned, state.endpoint
		return provisioned == want && state.ready == want, nil
	})
	elapsed := time.Since(created).Round(time.Second)
	if waitErr != nil {
		fmt.Fprintf(out, "demo: %d/%d machines provisioned, endpoint %s, %ds; not finished: %v\n", provisioned, want, orNone(endpoint), int(elapsed.Seconds()), waitErr)
		return fmt.Errorf("the cluster was not provisioned within %s", o.timeout)
	}
	p.say(fmt.Sprintf("all %d machines provisioned in %s", want, elapsed))
	if err := serviceLoadBalancer(ctx, b, o, p); err != nil {
		return err
	}
	if err := printEndState(ctx, b, o, out); err != nil {
		return err
	}

	p.say("deleting the Cluster")
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name}}
	if err := mgmt.Delete(ctx, cluster); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.timeout, true, func(ctx context.Context) (bool, error) {
		if state, err := observe(ctx, b, o); err == nil {
			p.update(state.facts)
		}
		return apierrors.IsNotFound(mgmt.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)), nil
	}); err != nil {
		return fmt.Errorf("the Cluster was not deleted within %s: %w", o.timeout, err)
	}
	p.say("Cluster deleted")
	// Nothing may be left; give Harvester's own cascading deletes a moment to finish.
	var leaks []string
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		leaks, err = b.LeakCheck(ctx, o.target)
		return err == nil && len(leaks) == 0, nil
	})
	if err != nil {
		return err
	}
	for _, l := range leaks {
		fmt.Fprintf(out, "  left on Harvester: %s\n", l)
	}
	fmt.Fprintf(out, "demo: %d/%d machines provisioned, endpoint %s, %ds; after delete: %d objects left on Harvester\n",
		provisioned, want, endpoint, int(elapsed.Seconds()), len(leaks))
	if len(leaks) > 0 {
		return fmt.Errorf("%d objects left on Harvester", len(leaks))
	}
	return nil
}

// serviceLoadBalancer creates a Service of type LoadBalancer in the guest and waits for the
// address our CCM gets for it from Harvester.
func serviceLoadBalancer(ctx context.Context, b *bed.Bed, o options, p *progress) error {
	g := b.Guest(o.namespace, o.name)
	if g == nil {
		return errors.New("the guest's control plane is not running")
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if err := g.Env.Client.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating a Service in the guest: %w", err)
	}
	p.say("created Service default/web (type LoadBalancer) in the guest")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := g.Env.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, nil
		}
		return len(svc.Status.LoadBalancer.Ingress) > 0, nil
	}); err != nil {
		return fmt.Errorf("the guest's Service got no address from our CCM: %w", err)
	}
	p.say(fmt.Sprintf("Service default/web: address %s (kube-vip announces %s)", svc.Status.LoadBalancer.Ingress[0].IP,
		svc.Annotations[guestcloud.AnnotationKubeVIPLoadBalancerIPs]))
	return nil
}

// flavor is a cluster template and what it needs besides CAPI's kubeadm providers.
type flavor struct {
	template string
	// providers are its bootstrap and control-plane providers when they are not kubeadm's.
	providers *bed.CAPIProviderSpec
	// version is the template variable that names the Kubernetes version, and its value's suffix.
	versionVariable, versionSuffix string
}

var flavors = map[string]flavor{
	"kubeadm": {template: "cluster-template.yaml", versionVariable: "KUBERNETES_VERSION"},
	"rke2":    {template: "cluster-template-rke2.yaml", providers: &bed.RKE2, versionVariable: "RKE2_VERSION", versionSuffix: "+rke2r1"},
	"k3s":     {template: "cluster-template-k3s.yaml", providers: &bed.K3s, versionVariable: "K3S_VERSION", versionSuffix: "+k3s1"},
}

// render generates the cluster from the flavour's template as `clusterctl generate cluster` does.
func render(ctx context.Context, b *bed.Bed, o options, f flavor) ([]byte, error) {
	// The platform admin's part: an identity for the demo's namespace and target namespace.
	if err := b.LendIdentity(ctx, o.namespace, o.namespace, o.target); err != nil {
		return nil, err
	}
	return templates.Render(f.template, map[string]string{
		f.versionVariable:             o.version + f.versionSuffix,
		"CLUSTER_NAME":                o.name,
		"NAMESPACE":                   o.namespace,
		"CONTROL_PLANE_MACHINE_COUNT": fmt.Sprint(o.controlPlanes),
		"WORKER_MACHINE_COUNT":        fmt.Sprint(o.workers),
		"HARVESTER_IDENTITY":          o.namespace,
		"HARVESTER_NAMESPACE":         o.target,
		"HARVESTER_NETWORK":           "default/vlan10",
		"HARVESTER_IMAGE":             "default/ubuntu-24.04",
		"HARVESTER_SSH_KEYPAIRS":      "[default/ops]",
	})
}

// state is what the demo shows of the cluster at one moment.
type state struct {
	// facts are "subject" -> "what it is now", printed when they change.
	facts       [][2]string
	provisioned int // Machines with infrastructure provisioned
	ready       int // Machines with a Node
	endpoint    string
}

func observe(ctx context.Context, b *bed.Bed, o options) (*state, error) {
	s := &state{}
	mgmt, hv := b.Management.Client, b.Harvester.Client()
	fact := func(subject, format string, args ...any) {
		s.facts = append(s.facts, [2]string{subject, fmt.Sprintf(format, args...)})
	}
	hc := &infrav1.HarvesterCluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, hc); err == nil {
		for _, c := range hc.Status.Conditions {
			fact("HarvesterCluster "+o.name+" "+c.Type, "%s (%s)%s", c.Status, c.Reason, message(c.Message))
		}
		if hc.Spec.ControlPlaneEndpoint.Host != "" {
			s.endpoint = fmt.Sprintf("%s:%d", hc.Spec.ControlPlaneEndpoint.Host, hc.Spec.ControlPlaneEndpoint.Port)
			fact("HarvesterCluster "+o.name+" endpoint", "%s", s.endpoint)
		}
	}
	cluster := &clusterv1.Cluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, cluster); err == nil {
		fact("Cluster "+o.name, "phase %s", orNone(cluster.Status.Phase))
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name + "-control-plane"}, kcp); err == nil {
		if kcp.Status.Initialization.ControlPlaneInitialized != nil && *kcp.Status.Initialization.ControlPlaneInitialized {
			fact("KubeadmControlPlane "+kcp.Name, "initialized (kube-system/kubeadm-config exists in the guest)")
		}
	}
	machines := &clusterv1.MachineList{}
	if err := mgmt.List(ctx, machines, client.InNamespace(o.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: o.name}); err != nil {
		return nil, err
	}
	for _, m := range machines.Items {
		node := ""
		if m.Status.NodeRef.IsDefined() {
			node = ", node " + m.Status.NodeRef.Name
			s.ready++
		}
		if m.Status.Initialization.InfrastructureProvisioned != nil && *m.Status.Initialization.InfrastructureProvisioned {
			s.provisioned++
		}
		fact("Machine "+m.Name, "phase %s%s", orNone(m.Status.Phase), node)
	}
	vms := &kubevirtv1.VirtualMachineList{}
	if err := hv.List(ctx, vms, client.InNamespace(o.target)); err != nil {
		return nil, err
	}
	for _, vm := range vms.Items {
		fact("VM "+o.target+"/"+vm.Name, "%s", orNone(string(vm.Status.PrintableStatus)))
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := hv.List(ctx, vmis, client.InNamespace(o.target)); err != nil {
		return nil, err
	}
	for _, vmi := range vmis.Items {
		fact("VMI "+o.target+"/"+vmi.Name, "%s on %s, IP %s", vmi.Status.Phase, orNone(vmi.Status.NodeName), orNone(firstIP(&vmi)))
	}
	lbs := &lbv1.LoadBalancerList{}
	if err := hv.List(ctx, lbs, client.InNamespace(o.target)); err != nil {
		return nil, err
	}
	for _, lb := range lbs.Items {
		fact("LoadBalancer "+o.target+"/"+lb.Name, "address %s", orNone(lbAddress(&lb)))
	}
	return s, nil
}

// progress prints what changed, with the time since the start.
type progress struct {
	out   io.Writer
	start time.Time
	seen  map[string]string
}

func (p *progress) say(msg string) {
	fmt.Fprintf(p.out, "%6.1fs  %s\n", time.Since(p.start).Seconds(), msg)
}

func (p *progress) update(facts [][2]string) {
	for _, f := range facts {
		if p.seen[f[0]] == f[1] {
			continue
		}
		p.seen[f[0]] = f[1]
		p.say(f[0] + ": " + f[1])
	}
}

// printEndState prints kubectl-style tables of the management objects and the Harvester objects.
func printEndState(ctx context.Context, b *bed.Bed, o options, out io.Writer) error {
	mgmt, hv := b.Management.Client, b.Harvester.Client()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()

	fmt.Fprintf(w, "\n$ kubectl get clusters,harvesterclusters -n %s\n", o.namespace)
	cluster := &clusterv1.Cluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, cluster); err != nil {
		return err
	}
	hc := &infrav1.HarvesterCluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, hc); err != nil {
		return err
	}
	fmt.Fprintln(w, "NAME\tPHASE\tENDPOINT\tHARVESTER\tFAILURE DOMAINS")
	fmt.Fprintf(w, "cluster/%s\t%s\t%s:%d\t%s\t%d\n", cluster.Name, cluster.Status.Phase,
		cluster.Spec.ControlPlaneEndpoint.Host, cluster.Spec.ControlPlaneEndpoint.Port, hc.Status.HarvesterVersion, len(hc.Status.FailureDomains))

	fmt.Fprintf(w, "\n$ kubectl get machines,harvestermachines -n %s\n", o.namespace)
	fmt.Fprintln(w, "NAME\tNODE\tPROVIDER ID\tPHASE\tHOST\tADDRESS")
	machines := &clusterv1.MachineList{}
	if err := mgmt.List(ctx, machines, client.InNamespace(o.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: o.name}); err != nil {
		return err
	}
	for _, m := range machines.Items {
		hm := &infrav1.HarvesterMachine{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: m.Spec.InfrastructureRef.Name}, hm); err != nil {
			return err
		}
		address := ""
		if len(hm.Status.Addresses) > 0 {
			address = hm.Status.Addresses[0].Address
		}
		fmt.Fprintf(w, "machine/%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Status.NodeRef.Name, m.Spec.ProviderID, m.Status.Phase, hm.Status.VirtualMachine.Host, address)
	}

	if g := b.Guest(o.namespace, o.name); g != nil {
		fmt.Fprintf(w, "\n$ kubectl --kubeconfig %s.kubeconfig get nodes   # the guest, initialised by our CCM\n", o.name)
		fmt.Fprintln(w, "NAME\tPROVIDER ID\tZONE\tINTERNAL IP\tROLE")
		nodes := &corev1.NodeList{}
		if err := g.Env.Client.List(ctx, nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			ip, role := "", "worker"
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP && ip == "" {
					ip = a.Address
				}
			}
			if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
				role = "control-plane"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.Spec.ProviderID, n.Labels[corev1.LabelTopologyZone], ip, role)
		}
	}

	fmt.Fprintf(w, "\n$ kubectl --kubeconfig harvester get vm,lb,pvc,secret,sa,rolebinding -n %s\n", o.target)
	fmt.Fprintln(w, "KIND\tNAME\tSTATUS")
	vms := &kubevirtv1.VirtualMachineList{}
	if err := hv.List(ctx, vms, client.InNamespace(o.target)); err != nil {
		return err
	}
	for _, vm := range vms.Items {
		fmt.Fprintf(w, "VirtualMachine\t%s\t%s\n", vm.Name, vm.Status.PrintableStatus)
	}
	lbs := &lbv1.LoadBalancerList{}
	if err := hv.List(ctx, lbs, client.InNamespace(o.target)); err != nil {
		return err
	}
	for _, lb := range lbs.Items {
		fmt.Fprintf(w, "LoadBalancer\t%s\t%s from pool %s (%s)\n", lb.Name, lbAddress(&lb), lb.Status.AllocatedAddress.IPPool, lb.Spec.WorkloadType)
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := hv.List(ctx, pvcs, client.InNamespace(o.target)); err != nil {
		return err
	}
	for _, pvc := range pvcs.Items {
		fmt.Fprintf(w, "PersistentVolumeClaim\t%s\t%s\n", pvc.Name, pvc.Status.Phase)
	}
	secrets := &corev1.SecretList{}
	if err := hv.List(ctx, secrets, client.InNamespace(o.target)); err != nil {
		return err
	}
	for _, s := range secrets.Items {
		fmt.Fprintf(w, "Secret\t%s\t%s\n", s.Name, s.Type)
	}
	sas := &corev1.ServiceAccountList{}
	if err := hv.List(ctx, sas, client.InNamespace(o.target)); err != nil {
		return err
	}
	for _, sa := range sas.Items {
		fmt.Fprintf(w, "ServiceAccount\t%s\t\n", sa.Name)
	}
	fmt.Fprintln(w)
	return nil
}

// lbAddress is a load balancer's address: status.address for VM load balancers, the allocated
// one for guest-cluster load balancers (which kube-vip announces).
func lbAddress(lb *lbv1.LoadBalancer) string {
	if lb.Status.Address != "" {
		return lb.Status.Address
	}
	return lb.Status.AllocatedAddress.IP
}

func firstIP(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, iface := range vmi.Status.Interfaces {
		if iface.IP != "" {
			return iface.IP
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func message(m string) string {
	if m == "" {
		return ""
	}
	if i := strings.IndexByte(m, '\n'); i >= 0 {
		m = m[:i]
	}
	return ": " + m
}
