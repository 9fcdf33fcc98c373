package harvestersim

import (
	"context"
	"fmt"
	"strings"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The mutating webhook of Harvester's load balancer (harvester-load-balancer v1.5.0,
// pkg/webhook/loadbalancer/mutator.go): on every create and update it rewrites a load balancer's
// pool-selection annotations, whatever the client wrote:
//   - loadbalancer.harvesterhci.io/namespace: the load balancer's namespace;
//   - .../project: the namespace's Rancher project (annotation field.cattle.io/projectId, "c:p"
//     written "c/p");
//   - .../network: for a guest-cluster (workloadType cluster) load balancer with a cluster
//     annotation, the first Multus network of the first VMI in the namespace labelled
//     harvesterhci.io/creator=docker-machine-driver-harvester whose name starts with that
//     cluster's name; otherwise empty.
//
// Health-check defaults it also sets are not simulated (the provider sets them all).
const (
	lbWebhookPath       = "/mutate-loadbalancer-harvesterhci-io-v1beta1-loadbalancer"
	labelCreator        = "harvesterhci.io/creator"
	nodeDriverCreator   = "docker-machine-driver-harvester"
	annotationProjectID = "field.cattle.io/projectId"
)

type lbMutator struct{ reader client.Reader }

func (m *lbMutator) Default(ctx context.Context, lb *lbv1.LoadBalancer) error {
	if lb.DeletionTimestamp != nil {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := m.reader.Get(ctx, client.ObjectKey{Name: lb.Namespace}, ns); err != nil {
		return fmt.Errorf("get namespace %s failed, error: %w", lb.Namespace, err)
	}
	network := ""
	if cluster := lb.Annotations[AnnotationLBCluster]; lb.Spec.WorkloadType == lbv1.Cluster && cluster != "" {
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		if err := m.reader.List(ctx, vmis, client.InNamespace(lb.Namespace), client.MatchingLabels{labelCreator: nodeDriverCreator}); err != nil {
			return fmt.Errorf("list vmis failed, error: %w", err)
		}
	vmis:
		for _, vmi := range vmis.Items {
			if !strings.HasPrefix(vmi.Name, cluster) {
				continue
			}
			for _, n := range vmi.Spec.Networks {
				if n.Multus != nil {
					network = n.Multus.NetworkName
					break vmis
				}
			}
		}
	}
	if lb.Annotations == nil {
		lb.Annotations = map[string]string{}
	}
	lb.Annotations[AnnotationLBNamespace] = lb.Namespace
	lb.Annotations[AnnotationLBProject] = strings.Replace(ns.Annotations[annotationProjectID], ":", "/", 1)
	lb.Annotations[AnnotationLBNetwork] = network
	return nil
}

// lbWebhook is the webhook's configuration; envtest points it at the simulator's manager.
func lbWebhook() *admissionv1.MutatingWebhookConfiguration {
	return &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "harvester-load-balancer-webhook"},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name: "loadbalancers.loadbalancer.harvesterhci.io",
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
				Namespace: "harvester-system", Name: "harvester-load-balancer-webhook", Path: ptr.To(lbWebhookPath)}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{APIGroups: []string{lbv1.SchemeGroupVersion.Group}, APIVersions: []string{"v1beta1"},
					Resources: []string{"loadbalancers"}, Scope: ptr.To(admissionv1.NamespacedScope)},
			}},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// setupLBWebhook serves the webhook from the simulator's manager.
func setupLBWebhook(mgr ctrl.Manager) error {
	mgr.GetWebhookServer().Register(lbWebhookPath,
		admission.WithDefaulter[*lbv1.LoadBalancer](mgr.GetScheme(), &lbMutator{reader: mgr.GetAPIReader()}))
	return nil
}
