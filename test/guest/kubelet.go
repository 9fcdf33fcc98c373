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

package guest

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// podNodeIndex indexes the guest's pods by the node they are bound to.
const podNodeIndex = "spec.nodeName"

// kubelets plays the kubelets of a guest's nodes for the pods kube-scheduler binds to them: a
// pod bound to a Ready node is started (only our CCM's container really runs, see ccm.go; the
// others are reported running), a pod being deleted is stopped and its deletion confirmed, and
// the pods of a node that stops being Ready (its VM is gone) stop running. A pod nobody binds
// stays Pending with the scheduler's reason, as in a real cluster.
type kubelets struct {
	g         *Cluster
	client    client.Client
	ccmBinary string
	// exits wakes the reconciler when a container's process ends.
	exits chan event.TypedGenericEvent[*corev1.Pod]

	mu sync.Mutex
	// ccm holds the CCM containers by pod.
	ccm map[types.NamespacedName]*ccmContainer
	// pending is the scheduler's reason while the CCM's pod is not bound to a node.
	pending string
	// exited is how the last CCM container ended, kept while none runs.
	exited error
	// stopped: the guest is stopping, no container starts any more.
	stopped bool
}

// startScheduling gives the guest kube-scheduler, kube-controller-manager and kubelets, so that
// the addons' Deployments and DaemonSets get pods placed against the nodes' labels and taints;
// ccmBinary is the CCM image's entrypoint, run for our CCM's pod.
func (c *Cluster) startScheduling(ctx context.Context, ccmBinary string) error {
	if ccmBinary == "" && c.WithCCM {
		return fmt.Errorf("guest %s/%s runs our CCM, but no CCM binary was given", c.Namespace, c.Name)
	}
	if err := c.startSchedulingControlPlane(ctx); err != nil {
		return err
	}
	k := &kubelets{
		g: c, client: c.Env.Manager.GetClient(), ccmBinary: ccmBinary,
		exits: make(chan event.TypedGenericEvent[*corev1.Pod], 16),
		ccm:   map[types.NamespacedName]*ccmContainer{},
	}
	c.kubelets = k
	mgr := c.Env.Manager
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podNodeIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return err
	}
	err := ctrl.ControllerManagedBy(mgr).
		Named("guest-kubelets").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}).
		For(&corev1.Pod{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(k.podsOnNode)).
		// Kubelet keeps Secret volumes in step with their Secrets.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(k.ccmPods)).
		WatchesRawSource(source.Channel(k.exits, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{})).
		Complete(k)
	if err != nil {
		return err
	}
	return c.Env.StartManager(ctx)
}

func (k *kubelets) podsOnNode(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := k.client.List(ctx, pods, client.MatchingFields{podNodeIndex: o.GetName()}); err != nil {
		return nil
	}
	return requestsFor(pods.Items)
}

func (k *kubelets) ccmPods(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != metav1.NamespaceSystem {
		return nil
	}
	pods := &corev1.PodList{}
	if err := k.client.List(ctx, pods, client.InNamespace(metav1.NamespaceSystem)); err != nil {
		return nil
	}
	var ccm []corev1.Pod
	for _, p := range pods.Items {
		if isCCMPod(&p) {
			ccm = append(ccm, p)
		}
	}
	return requestsFor(ccm)
}

func requestsFor(pods []corev1.Pod) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(pods))
	for _, p := range pods {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

// Reconcile does for one pod what the kubelet of its node would.
func (k *kubelets) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := k.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			k.stopCCM(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	ccm := isCCMPod(pod)
	if pod.Spec.NodeName == "" {
		if ccm {
			k.setPending(pod)
		}
		return reconcile.Result{}, nil
	}
	if ccm {
		k.setPending(nil)
	}
	node := &corev1.Node{}
	if err := k.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			// The node is gone: so is everything that ran there; the pod garbage collector
			// deletes the pod.
			k.stopCCM(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	ready := nodeReady(node)
	if pod.DeletionTimestamp != nil || !ready {
		k.stopCCM(req.NamespacedName)
		if pod.DeletionTimestamp == nil {
			return reconcile.Result{}, nil
		}
		// A kubelet confirms that the pod's containers stopped; without one (the VM is gone),
		// the pod stays terminating until the node is deleted.
		if !ready {
			return reconcile.Result{}, nil
		}
		err := k.g.Env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ccm {
		started, retry, err := k.runCCM(ctx, pod)
		if err != nil || !started {
			return reconcile.Result{RequeueAfter: retry}, err
		}
	}
	if pod.Status.Phase == corev1.PodRunning {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, k.g.Env.Client.Status().Update(ctx, runningStatus(pod, node))
}

// runningStatus is the status a kubelet reports once the pod's containers run.
func runningStatus(pod *corev1.Pod, node *corev1.Node) *corev1.Pod {
	pod = pod.DeepCopy()
	now := metav1.Now()
	hostIP := nodeAddress(node)
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.StartTime = &now
	if hostIP != "" {
		st.HostIP, st.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
		podIP := hostIP
		if !pod.Spec.HostNetwork {
			podIP = podNetworkIP(pod.UID)
		}
		st.PodIP, st.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setPodCondition(st, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "containerd://" + string(pod.UID) + "-" + c.Name,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return pod
}

func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// podNetworkIP is a stable address in the pod network for a pod not on the host network.
func podNetworkIP(uid types.UID) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	v := h.Sum32()
	return fmt.Sprintf("10.244.%d.%d", (v>>8)&0xff, v&0xff%250+2)
}

func nodeAddress(node *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
	}
	return ""
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setPending records why the CCM's pod is not bound to a node (the scheduler's condition), or
// clears it.
func (k *kubelets) setPending(pod *corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = ""
	if pod == nil {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			k.pending = fmt.Sprintf("pod %s/%s is Pending: %s: %s", pod.Namespace, pod.Name, c.Reason, c.Message)
		}
	}
}

// ccmLogs keeps the CCM containers' logs for CCMLog after they stop.
var ccmLogs struct {
	mu   sync.Mutex
	logs []*logBuffer
}

// CCMLog returns what every CCM container the bed ran has logged.
func CCMLog() string {
	ccmLogs.mu.Lock()
	defer ccmLogs.mu.Unlock()
	out := ""
	for _, l := range ccmLogs.logs {
		out += l.String()
	}
	return out
}

func newCCMLog() *logBuffer {
	l := &logBuffer{}
	ccmLogs.mu.Lock()
	defer ccmLogs.mu.Unlock()
	ccmLogs.logs = append(ccmLogs.logs, l)
	return l
}

// backoff is the delay before restarting a container that has ended restarts times, as
// kubelet's CrashLoopBackOff (shorter: tests should see a crash loop, not wait it out).
func backoff(restarts int) time.Duration {
	d := 500 * time.Millisecond << min(restarts, 5)
	return min(d, 10*time.Second)
}
