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
	"context"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestercluster,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvesterclusters,versions=v1alpha1,name=default.harvestercluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-harvestercluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=harvesterclusters,versions=v1alpha1,name=validation.harvestercluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// HarvesterClusterWebhook defaults and validates HarvesterClusters.
type HarvesterClusterWebhook struct{}

var (
	_ admission.Defaulter[*HarvesterCluster] = &HarvesterClusterWebhook{}
	_ admission.Validator[*HarvesterCluster] = &HarvesterClusterWebhook{}
)

// SetupWebhookWithManager registers the webhook with a manager.
func (w *HarvesterClusterWebhook) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &HarvesterCluster{}).WithDefaulter(w).WithValidator(w).Complete()
}

// Default fills in the defaults of a HarvesterCluster, and keeps its owner mark and the name of
// its control-plane load balancer through an update that leaves the annotations out (`kubectl
// replace`, a GitOps tool that writes the whole object, clusterctl move's annotation patch):
// the mark names the cluster's objects on Harvester, the load balancer's name tells the
// provider's endpoint from a user's.
func (w *HarvesterClusterWebhook) Default(ctx context.Context, c *HarvesterCluster) error {
	c.Spec.Default()
	keepProviderAnnotations(ctx, c)
	return nil
}

// keptAnnotations are the provider's records on a HarvesterCluster that an update cannot drop.
var keptAnnotations = []string{OwnerMarkAnnotation, LoadBalancerAnnotation, GuestVolumesAnnotation}

// keepProviderAnnotations copies the old object's provider annotations onto an update that has
// none of them.
func keepProviderAnnotations(ctx context.Context, c *HarvesterCluster) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return
	}
	old := &HarvesterCluster{}
	if json.Unmarshal(req.OldObject.Raw, old) != nil {
		return
	}
	for _, key := range keptAnnotations {
		if _, has := c.Annotations[key]; has {
			continue
		}
		if value, ok := old.Annotations[key]; ok {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[key] = value
		}
	}
}

// ValidateCreate checks a new HarvesterCluster.
func (w *HarvesterClusterWebhook) ValidateCreate(_ context.Context, c *HarvesterCluster) (admission.Warnings, error) {
	errs := c.Spec.validate(field.NewPath("spec"))
	errs = append(errs, validateOwnerMark(nil, c)...)
	errs = append(errs, validateLoadBalancerRecord(nil, c)...)
	return nil, invalid("HarvesterCluster", c.Name, errs)
}

// ValidateUpdate checks a changed HarvesterCluster, including the fields that cannot change.
func (w *HarvesterClusterWebhook) ValidateUpdate(_ context.Context, oldC, newC *HarvesterCluster) (admission.Warnings, error) {
	path := field.NewPath("spec")
	errs := ratchet(newC.Spec.validate(path), oldC.Spec.validate(path))
	provisioned := ptr.Deref(oldC.Status.Initialization.Provisioned, false)
	errs = append(errs, newC.Spec.validateImmutable(path, &oldC.Spec, provisioned)...)
	errs = append(errs, validateOwnerMark(oldC, newC)...)
	errs = append(errs, validateLoadBalancerRecord(oldC, newC)...)
	return nil, invalid("HarvesterCluster", newC.Name, errs)
}

var ownerMarkPattern = regexp.MustCompile(`^([0-9a-f]{16}|[0-9a-f]{10})?$`)

// deleteForMoveAnnotation is clusterctl's mark of an object it deletes from the source
// management cluster after moving it (clusterctl's API, which api/ does not import).
const deleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// validateOwnerMark checks the owner-mark annotation (see OwnerMarkAnnotation): 16 lower-case
// hex characters (10 for a cluster an earlier version marked), or empty; once recorded, never changed nor removed, since it names the
// cluster's objects on Harvester. A cluster that has the provider's finalizer but no mark was
// first reconciled by a version without marks: only the empty mark may be recorded for it.
// On create (old is nil) any well-formed mark is accepted, as clusterctl move brings one; the
// source object of a move may lose it as clusterctl deletes it.
func validateOwnerMark(old, c *HarvesterCluster) field.ErrorList {
	path := field.NewPath("metadata", "annotations").Key(OwnerMarkAnnotation)
	mark, marked := c.Annotations[OwnerMarkAnnotation]
	if marked && !ownerMarkPattern.MatchString(mark) {
		return field.ErrorList{field.Invalid(path, mark, "must be 16 lower-case hexadecimal characters (10 for a cluster marked by an earlier version), or empty")}
	}
	if old == nil {
		return nil
	}
	oldMark, oldMarked := old.Annotations[OwnerMarkAnnotation]
	if _, moving := c.Annotations[deleteForMoveAnnotation]; moving && !marked {
		// clusterctl move replaces the annotations of the source's objects with its
		// delete-for-move annotation, then deletes them: the target has the mark.
		return nil
	}
	switch {
	case oldMarked && (!marked || mark != oldMark):
		return field.ErrorList{field.Forbidden(path, "the owner mark cannot change or be removed once recorded: it names this cluster's objects on Harvester")}
	case !oldMarked && marked && mark != "" && slices.Contains(old.Finalizers, ClusterFinalizer):
		return field.ErrorList{field.Forbidden(path, "this cluster was first reconciled without an owner mark: its objects on Harvester are named without one, so only the empty mark may be recorded")}
	}
	return nil
}

// validateLoadBalancerRecord checks the name of the control-plane load balancer recorded in
// LoadBalancerAnnotation: a DNS-1035 label (Harvester makes a Service of that name), which may be
// given on create (clusterctl move and a take-over from another provider bring it) but, once
// recorded, not changed: the provider would make a second load balancer and forget the first.
// The webhooks' defaulting keeps it through updates that leave it out.
func validateLoadBalancerRecord(old, c *HarvesterCluster) field.ErrorList {
	path := field.NewPath("metadata", "annotations").Key(LoadBalancerAnnotation)
	name, recorded := c.Annotations[LoadBalancerAnnotation]
	if recorded {
		if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
			return field.ErrorList{field.Invalid(path, name, strings.Join(msgs, "; "))}
		}
	}
	if old == nil {
		return nil
	}
	if _, moving := c.Annotations[deleteForMoveAnnotation]; moving && !recorded {
		return nil
	}
	if oldName := old.Annotations[LoadBalancerAnnotation]; oldName != "" && name != oldName {
		return field.ErrorList{field.Forbidden(path, fmt.Sprintf("the control-plane load balancer %s is recorded; it cannot change", oldName))}
	}
	return nil
}

// ValidateDelete allows every deletion.
func (w *HarvesterClusterWebhook) ValidateDelete(context.Context, *HarvesterCluster) (admission.Warnings, error) {
	return nil, nil
}

// Default fills in the defaults of a HarvesterCluster spec.
func (s *HarvesterClusterSpec) Default() {
	if s.LoadBalancer.IPAM == "" {
		s.LoadBalancer.IPAM = IPAMPool
	}
	if s.Addons.CloudProvider == nil {
		s.Addons.CloudProvider = ptr.To(true)
	}
	if s.Addons.CSI == nil {
		s.Addons.CSI = ptr.To(true)
	}
}

func (s *HarvesterClusterSpec) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList

	secretPath := path.Child("identitySecret", "name")
	switch ref := s.IdentityRef; {
	case ref != nil && s.IdentitySecret.Name != "":
		errs = append(errs, field.Forbidden(path.Child("identitySecret"), "set exactly one of identityRef and identitySecret"))
	case ref != nil:
		refPath := path.Child("identityRef")
		switch ref.Kind {
		case HarvesterClusterIdentityKind, "Secret":
		default:
			errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, []string{HarvesterClusterIdentityKind, "Secret"}))
		}
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
	case s.IdentitySecret.Name == "":
		errs = append(errs, field.Required(path.Child("identityRef"), "name a HarvesterClusterIdentity, or a Secret whose `kubeconfig` key reaches Harvester"))
	default:
		for _, msg := range validation.IsDNS1123Subdomain(s.IdentitySecret.Name) {
			errs = append(errs, field.Invalid(secretPath, s.IdentitySecret.Name, msg))
		}
	}

	nsPath := path.Child("targetNamespace")
	if s.TargetNamespace == "" {
		errs = append(errs, field.Required(nsPath, "name the Harvester namespace for this cluster's VMs"))
	} else {
		for _, msg := range validation.IsDNS1123Label(s.TargetNamespace) {
			errs = append(errs, field.Invalid(nsPath, s.TargetNamespace, msg))
		}
		if owner := systemNamespaceOwner(s.TargetNamespace); owner != "" {
			errs = append(errs, field.Invalid(nsPath, s.TargetNamespace, "is a system namespace of "+owner+"; give the cluster a namespace of its own"))
		}
	}

	errs = append(errs, validateEndpoint(path.Child("controlPlaneEndpoint"), s.ControlPlaneEndpoint.Host, s.ControlPlaneEndpoint.Port)...)

	lbPath := path.Child("loadBalancer")
	switch s.LoadBalancer.IPAM {
	case "", IPAMPool:
	case IPAMDHCP:
		if s.LoadBalancer.IPPoolName != "" {
			errs = append(errs, field.Forbidden(lbPath.Child("ipPoolName"), "an IP pool can only be named with ipam `pool`"))
		}
	default:
		errs = append(errs, field.NotSupported(lbPath.Child("ipam"), s.LoadBalancer.IPAM, []IPAMMode{IPAMPool, IPAMDHCP}))
	}
	if s.LoadBalancer.IPPoolName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.LoadBalancer.IPPoolName) {
			errs = append(errs, field.Invalid(lbPath.Child("ipPoolName"), s.LoadBalancer.IPPoolName, msg))
		}
	}
	if s.LoadBalancer.Network != "" {
		errs = append(errs, validateNamespacedName(lbPath.Child("network"), s.LoadBalancer.Network, false)...)
	}

	if api := s.GuestHarvesterAPI; api != nil {
		apiPath := path.Child("guestHarvesterAPI")
		switch {
		case api.Server != "":
			errs = append(errs, validateHTTPSURL(apiPath.Child("server"), api.Server)...)
		case len(api.CABundle) > 0:
			errs = append(errs, field.Required(apiPath.Child("server"), "a CA bundle needs the URL of Harvester's API as the guest reaches it"))
		}
		if len(api.CABundle) > 0 {
			errs = append(errs, validatePEMCertificates(apiPath.Child("caBundle"), api.CABundle)...)
		}
	}
	return errs
}

// systemNamespaces are the Harvester namespaces a guest cluster's VMs, load balancers and
// credentials must not land in, by owner. The CRD's rules on targetNamespace repeat them.
var systemNamespaces = map[string]string{
	"kube-system":      "Kubernetes", // the control plane's own components
	"kube-public":      "Kubernetes", // readable by every user, even anonymous ones
	"kube-node-lease":  "Kubernetes", // the hosts' heartbeats
	"harvester-system": "Harvester",  // Harvester's components and their secrets
	"harvester-public": "Harvester",  // images and templates shared with every user
	"longhorn-system":  "Longhorn",   // the storage every VM's volumes live on
}

// systemNamespacePrefixes start the namespaces of components Rancher installs, by owner.
var systemNamespacePrefixes = map[string]string{
	"cattle-": "Rancher (cattle-*)", // Rancher's agents and its system charts
	"fleet-":  "Fleet (fleet-*)",    // Fleet's GitOps workspaces and agents
}

// systemNamespaceOwner returns who owns a system namespace, or "" for a namespace of users
// (`default` is one: Harvester's VMs often live there).
func systemNamespaceOwner(namespace string) string {
	if owner, ok := systemNamespaces[namespace]; ok {
		return owner
	}
	for prefix, owner := range systemNamespacePrefixes {
		if strings.HasPrefix(namespace, prefix) {
			return owner
		}
	}
	return ""
}

// validateEndpoint checks a control-plane endpoint: both parts or neither.
func validateEndpoint(path *field.Path, host string, port int32) field.ErrorList {
	var errs field.ErrorList
	if host == "" {
		if port != 0 {
			errs = append(errs, field.Required(path.Child("host"), "a port needs a host"))
		}
		return errs
	}
	if net.ParseIP(host) == nil {
		for _, msg := range validation.IsDNS1123Subdomain(host) {
			errs = append(errs, field.Invalid(path.Child("host"), host, "must be an IP address or a DNS name: "+msg))
		}
	}
	if port < 1 || port > 65535 {
		errs = append(errs, field.Invalid(path.Child("port"), port, "must be between 1 and 65535"))
	}
	return errs
}

func (s *HarvesterClusterSpec) validateImmutable(path *field.Path, old *HarvesterClusterSpec, provisioned bool) field.ErrorList {
	var errs field.ErrorList
	if s.TargetNamespace != old.TargetNamespace {
		errs = append(errs, field.Forbidden(path.Child("targetNamespace"), "cannot change: the cluster's VMs live in the old namespace"))
	}
	// Once provisioned, the identity stays, but for the move from a Secret of the namespace to a
	// HarvesterClusterIdentity (docs/harvester-identity.md, "Moving to HarvesterClusterIdentity").
	if now, was := s.Identity(), old.Identity(); provisioned && now != was &&
		!(was.Kind == "Secret" && now.Kind == HarvesterClusterIdentityKind) {
		errs = append(errs, field.Forbidden(path.Child("identityRef"), "cannot change once the cluster is provisioned, but from a Secret to a HarvesterClusterIdentity; rotate the kubeconfig inside the Secret instead"))
	}
	if old.ControlPlaneEndpoint.Host != "" && s.ControlPlaneEndpoint != old.ControlPlaneEndpoint {
		errs = append(errs, field.Forbidden(path.Child("controlPlaneEndpoint"), "cannot change once set: the guest cluster's certificates and kubeconfigs name it"))
	}
	if old.LoadBalancer.IPAM != "" && s.LoadBalancer.IPAM != old.LoadBalancer.IPAM {
		errs = append(errs, field.Forbidden(path.Child("loadBalancer", "ipam"), "cannot change: Harvester cannot switch a load balancer's IPAM mode"))
	}
	if provisioned && s.LoadBalancer != old.LoadBalancer {
		errs = append(errs, field.Forbidden(path.Child("loadBalancer"), "cannot change once the load balancer has its address"))
	}
	if !reflect.DeepEqual(s.Addons, old.Addons) {
		errs = append(errs, field.Forbidden(path.Child("addons"), "cannot change: a ClusterResourceSet never uninstalls what it applied"))
	}
	return errs
}
