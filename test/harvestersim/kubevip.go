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

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// labelServiceLB marks the Services Harvester's load balancer controller makes for vm-type load
// balancers (harvester-load-balancer pkg/lb/servicelb).
const labelServiceLB = "loadbalancer.harvesterhci.io/servicelb"

// kubeVIPReconciler plays what runs on Harvester's hosts for those Services:
//   - kube-vip, which announces a Service's spec.loadBalancerIP on the host network and writes it
//     as the Service's ingress, or, for "0.0.0.0", takes a lease from the network's DHCP server
//     and writes that;
//   - Kubernetes' garbage collector (envtest has no kube-controller-manager), which deletes the
//     Service and its EndpointSlice once the load balancer owning them is gone.
type kubeVIPReconciler struct {
	client.Client
	h *Harvester
}

func (r *kubeVIPReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controllerOptions).
		Named("sim-kube-vip").
		For(&corev1.Service{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[labelServiceLB] == "true"
		}))).
		// The Service is named as its load balancer: a deleted load balancer leaves it to collect.
		Watches(&lbv1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		})).
		Complete(r)
}

func (r *kubeVIPReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	svc := &corev1.Service{}
	if err := r.Get(ctx, req.NamespacedName, svc); err != nil {
		if apierrors.IsNotFound(err) {
			r.h.ips.release(dhcpOwner(req.Namespace, req.Name))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if svc.Labels[labelServiceLB] != "true" {
		return ctrl.Result{}, nil
	}
	if gone, err := r.ownerGone(ctx, svc); err != nil || gone {
		if err == nil {
			err = r.collect(ctx, svc)
		}
		return ctrl.Result{}, err
	}
	if svc.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	ip := svc.Spec.LoadBalancerIP
	switch ip {
	case "":
		return ctrl.Result{}, nil
	case AddressAskDHCP:
		addr, err := r.h.ips.leaseDHCP(dhcpOwner(svc.Namespace, svc.Name))
		if err != nil {
			return ctrl.Result{}, err
		}
		ip = addr.String()
	}
	want := corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer, want) {
		return ctrl.Result{}, nil
	}
	base := svc.DeepCopy()
	svc.Status.LoadBalancer = want
	return ctrl.Result{}, r.Status().Patch(ctx, svc, client.MergeFrom(base))
}

// ownerGone reports whether the load balancer that owns the Service no longer exists.
func (r *kubeVIPReconciler) ownerGone(ctx context.Context, svc *corev1.Service) (bool, error) {
	for _, ref := range svc.OwnerReferences {
		if ref.Kind != "LoadBalancer" {
			continue
		}
		lb := &lbv1.LoadBalancer{}
		err := r.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: ref.Name}, lb)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return lb.UID != ref.UID, nil
	}
	return false, nil
}

// collect deletes the Service and the EndpointSlice of the same name, as the garbage collector
// would, and frees the DHCP lease.
func (r *kubeVIPReconciler) collect(ctx context.Context, svc *corev1.Service) error {
	slice := &discoveryv1.EndpointSlice{}
	slice.Namespace, slice.Name = svc.Namespace, svc.Name
	if err := r.Delete(ctx, slice); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := r.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
		return err
	}
	r.h.ips.release(dhcpOwner(svc.Namespace, svc.Name))
	return nil
}

// dhcpOwner ends in "/": the allocator releases by prefix.
func dhcpOwner(namespace, name string) string { return "kube-vip/" + namespace + "/" + name + "/" }
