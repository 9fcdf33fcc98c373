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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// KubeVirt's own virt-controller (the KubeVirt version
// Harvester's go.mod names, built by hack/ensure-kubevirt.sh) runs against the simulated
// Harvester as kubevirt-controller: it makes a VM's VMI, the VMI's virt-launcher pod, hands the
// VMI to its host once the pod runs, writes the VM's status and lifts its finalizers. The
// simulator keeps only the host side: kube-scheduler for launcher pods (the same placement rules
// as before: affinity, devices, CPU manager), their kubelet (Running, then gone once deleted)
// and virt-handler (a Scheduled VMI runs; its guest agent reports addresses).

// startVirtController runs KubeVirt's virt-controller in Harvester's namespace.
func (h *Harvester) startVirtController(ctx context.Context) error {
	dir, err := KubeVirtDir()
	if err != nil {
		return err
	}
	kubeconfig, err := h.kubeconfigAs(kubeVirtControllerUser)
	if err != nil {
		return err
	}
	path, err := h.kubevirt.writeFile("virt-controller.kubeconfig", kubeconfig)
	if err != nil {
		return err
	}
	port, err := testenv.FreeLoopbackPort()
	if err != nil {
		return err
	}
	return h.kubevirt.start(ctx, "virt-controller", filepath.Join(dir, "virt-controller"), []string{
		"--kubeconfig", path, "--listen", "127.0.0.1", "--port", fmt.Sprint(port),
	}, []string{"KUBEVIRT_NAMESPACE=" + harvesterNamespace})
}

// kubeconfigAs is a kubeconfig of the simulated Harvester for one of KubeVirt's service accounts
// (impersonated, with the admin's rights: the bed runs no RBAC for them). KubeVirt's admission
// lets only its own accounts change a VMI's spec, status or kubevirt.io labels.
func (h *Harvester) kubeconfigAs(user string) ([]byte, error) {
	return clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"harvester": {Server: h.Env.Config.Host, CertificateAuthorityData: h.Env.Config.CAData}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"kubevirt": {
			ClientCertificateData: h.Env.Config.CertData, ClientKeyData: h.Env.Config.KeyData,
			Impersonate: user, ImpersonateGroups: kubeVirtGroups,
		}},
		Contexts:       map[string]*clientcmdapi.Context{"harvester": {Cluster: "harvester", AuthInfo: "kubevirt"}},
		CurrentContext: "harvester",
	})
}

// launcherReconciler plays kube-scheduler and the kubelet for virt-launcher pods.
type launcherReconciler struct {
	client.Client
}

func (r *launcherReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-virt-launcher").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[kubevirtv1.AppLabel] == "virt-launcher"
		}))).
		// A host that changes (uncordoned, relabelled, added) may take a waiting pod.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.unbound)).
		// A VMI that goes frees its host's devices (and its anti-affinity) for a waiting pod.
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.unbound),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(event.UpdateEvent) bool { return false },
				DeleteFunc: func(event.DeleteEvent) bool { return true },
			})).
		Complete(r)
}

// unbound lists the launcher pods waiting for a host.
func (r *launcherReconciler) unbound(ctx context.Context, _ client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
		}
	}
	return reqs
}

func (r *launcherReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case pod.DeletionTimestamp != nil:
		// The kubelet stops the containers and confirms.
		return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	case pod.Spec.NodeName == "":
		return ctrl.Result{}, r.bind(ctx, pod)
	case pod.Status.Phase == corev1.PodPending:
		return ctrl.Result{}, r.run(ctx, pod)
	}
	return ctrl.Result{}, nil
}

// bind places the pod as the simulator places VMIs, by the VMI's own constraints.
func (r *launcherReconciler) bind(ctx context.Context, pod *corev1.Pod) error {
	vmiName := ""
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "VirtualMachineInstance" {
			vmiName = ref.Name
		}
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: vmiName}, vmi); err != nil {
		return client.IgnoreNotFound(err)
	}
	nodes := &corev1.NodeList{}
	if err := r.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	others := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.List(ctx, others, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	exclude := ""
	if pod.Labels[kubevirtv1.MigrationJobLabel] != "" {
		exclude = vmi.Status.NodeName // a migration's target pod goes to another host
	}
	host, err := schedule(vmi, nodes.Items, others.Items, exclude)
	if err != nil {
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: err.Error()})
		return r.Status().Update(ctx, pod)
	}
	binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: host}}
	return client.IgnoreNotFound(r.SubResource("binding").Create(ctx, pod, binding))
}

// Multus' annotations: the networks a pod asks for, and what it attached.
const (
	annotationMultusNetworks      = "k8s.v1.cni.cncf.io/networks"
	annotationMultusNetworkStatus = "k8s.v1.cni.cncf.io/network-status"
)

// multusNetworkStatus is what Multus writes on a pod once its sandbox has its networks: the
// cluster network on eth0 (the default) and each network the pod asked for on the interface it
// named. virt-controller reads it for the VMI's interfaces (their pod interface names and the
// "multus-status" source).
func multusNetworkStatus(pod *corev1.Pod) (string, error) {
	type status struct {
		Name      string   `json:"name"`
		Interface string   `json:"interface,omitempty"`
		IPs       []string `json:"ips,omitempty"`
		MAC       string   `json:"mac,omitempty"`
		Default   bool     `json:"default,omitempty"`
	}
	statuses := []status{{Name: "k8s-pod-network", Interface: "eth0", IPs: []string{"10.52.0.10"}, Default: true}}
	if asked := pod.Annotations[annotationMultusNetworks]; asked != "" {
		var elements []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Interface string `json:"interface"`
			MAC       string `json:"mac"`
		}
		if err := json.Unmarshal([]byte(asked), &elements); err != nil {
			return "", fmt.Errorf("pod %s/%s: %s: %w", pod.Namespace, pod.Name, annotationMultusNetworks, err)
		}
		for _, e := range elements {
			namespace := e.Namespace
			if namespace == "" {
				namespace = pod.Namespace
			}
			statuses = append(statuses, status{Name: namespace + "/" + e.Name, Interface: e.Interface, MAC: e.MAC})
		}
	}
	out, err := json.Marshal(statuses)
	return string(out), err
}

// run is the kubelet starting the pod's containers (Multus attaching its networks first).
func (r *launcherReconciler) run(ctx context.Context, pod *corev1.Pod) error {
	if _, ok := pod.Annotations[annotationMultusNetworkStatus]; !ok {
		networkStatus, err := multusNetworkStatus(pod)
		if err != nil {
			return err
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[annotationMultusNetworkStatus] = networkStatus
		if err := r.Update(ctx, pod); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setPodCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
	}
	err := r.Status().Update(ctx, pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	c.LastTransitionTime = metav1.Now()
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// vmGarbageCollector is Kubernetes' garbage collector for what a VM owns (envtest runs none),
// once virt-controller let the VM go: its cloud-init Secrets, its PVCs, the ControllerRevisions
// virt-controller keeps of its specs.
type vmGarbageCollector struct {
	client.Client
}

func (r *vmGarbageCollector) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-vm-garbage-collector").
		For(&kubevirtv1.VirtualMachine{}).
		Complete(r)
}

func (r *vmGarbageCollector) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	err := r.Get(ctx, req.NamespacedName, vm)
	if err == nil || !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	for _, list := range []client.ObjectList{&corev1.SecretList{}, &corev1.PersistentVolumeClaimList{}, &appsv1.ControllerRevisionList{}} {
		if err := r.List(ctx, list, client.InNamespace(req.Namespace)); err != nil {
			return ctrl.Result{}, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, item := range items {
			o := item.(client.Object)
			for _, ref := range o.GetOwnerReferences() {
				if ref.Kind == "VirtualMachine" && ref.Name == req.Name {
					if err := r.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
						return ctrl.Result{}, err
					}
					break
				}
			}
		}
	}
	return ctrl.Result{}, nil
}
