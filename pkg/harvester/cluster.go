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

package harvester

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/transport"
)

// ServerVersionSetting is Harvester's setting that holds its version.
const ServerVersionSetting = "server-version"

// CheckConnection asks Harvester, live (a cache would never see a revoked token), for its
// version and the target namespace, and classifies what goes wrong.
func CheckConnection(ctx context.Context, c client.Client, namespace string) (string, error) {
	setting := &harvesterv1.Setting{}
	if err := c.Get(ctx, client.ObjectKey{Name: ServerVersionSetting}, setting); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &transport.Error{Kind: transport.KindInvalid, Reason: infrav1.HarvesterUnreachableReason, Err: err,
				Message: "the identity's server has no server-version setting: is it a Harvester cluster?"}
		}
		return "", transport.ClassifyError(err, "reading Harvester's version")
	}
	version := setting.Value
	if version == "" {
		version = setting.Default
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return version, &transport.Error{Kind: transport.KindAccess, Reason: infrav1.TargetNamespaceNotFoundReason, Err: err,
				Message: fmt.Sprintf("target namespace %s does not exist on Harvester", namespace)}
		}
		return version, transport.ClassifyError(err, "reading the target namespace")
	}
	return version, nil
}

// targetNamespaceAccess is what the provider's identity must be allowed in a target namespace;
// checked when the watches there do not sync, the usual sign of a namespace the admin has not
// bound the identity in.
var targetNamespaceAccess = []authorizationv1.ResourceAttributes{
	{Verb: "list", Group: "kubevirt.io", Resource: "virtualmachines"},
	{Verb: "create", Group: "kubevirt.io", Resource: "virtualmachines"},
	{Verb: "create", Group: "", Resource: "secrets"},
	{Verb: "create", Group: "loadbalancer.harvesterhci.io", Resource: "loadbalancers"},
}

// CheckTargetNamespaceAccess asks Harvester (SelfSubjectAccessReview, which every authenticated
// identity may use) whether the identity may work in namespace, and says which right is missing.
func CheckTargetNamespaceAccess(ctx context.Context, c client.Client, namespace string) error {
	for _, attrs := range targetNamespaceAccess {
		attrs.Namespace = namespace
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		if err := c.Create(ctx, review); err != nil {
			return transport.ClassifyError(err, "checking the identity's rights in the target namespace")
		}
		if !review.Status.Allowed {
			resource := attrs.Resource
			if attrs.Group != "" {
				resource += "." + attrs.Group
			}
			return &transport.Error{Kind: transport.KindAccess, Reason: infrav1.ForbiddenReason, Message: fmt.Sprintf(
				"the identity may not %s %s in the target namespace %s: a Harvester admin applies config/harvester/target-namespace.yaml there (docs/harvester-identity.md)",
				attrs.Verb, resource, namespace)}
		}
	}
	return nil
}

// LabelWitness marks a Harvester witness node (v1.3+): it holds etcd's quorum and runs no VM.
const LabelWitness = transport.HostWitnessLabel

// FailureDomains lists Harvester's zones as failure domains (with their region), or, when no
// host has a zone label, each host as its own failure domain, for worker pools that name one
// (not the control plane: a VM placed in a host's domain is pinned to that host, and a control
// plane spread by our soft anti-affinity instead can still live-migrate off a host in
// maintenance). byHost tells which. Each domain counts its hosts (FailureDomainHostsKey). Witness nodes run no VM and are no failure domain; a
// cordoned host (maintenance, an upgrade) still is, so that the list does not change while
// Harvester drains it.
func FailureDomains(nodes []corev1.Node) (domains []clusterv1.FailureDomain, byHost bool) {
	zones := map[string]string{}
	zoneHosts := map[string]int{}
	var hosts []string
	for _, n := range nodes {
		if _, witness := n.Labels[LabelWitness]; witness || !n.DeletionTimestamp.IsZero() {
			continue
		}
		if z := n.Labels[build.LabelZone]; z != "" {
			if _, ok := zones[z]; !ok || zones[z] == "" {
				zones[z] = n.Labels[build.LabelRegion]
			}
			zoneHosts[z]++
		}
		hosts = append(hosts, n.Name)
	}
	if len(zones) > 0 {
		for z, region := range zones {
			attrs := map[string]string{build.FailureDomainTopologyKey: build.LabelZone, build.FailureDomainHostsKey: strconv.Itoa(zoneHosts[z])}
			if region != "" {
				attrs["region"] = region
			}
			domains = append(domains, clusterv1.FailureDomain{Name: z, ControlPlane: ptr.To(true), Attributes: attrs})
		}
	} else {
		byHost = true
		for _, h := range hosts {
			domains = append(domains, clusterv1.FailureDomain{Name: h, ControlPlane: ptr.To(false),
				Attributes: map[string]string{build.FailureDomainTopologyKey: build.LabelHostname, build.FailureDomainHostsKey: "1"}})
		}
	}
	slices.SortFunc(domains, func(a, b clusterv1.FailureDomain) int { return cmp.Compare(a.Name, b.Name) })
	return domains, byHost
}

// FailureDomainOf is the failure domain a host is in, among domains: its zone, or the host
// itself when the domains are hosts; "" when it is in none of them.
func FailureDomainOf(node *corev1.Node, domains []clusterv1.FailureDomain) string {
	for _, fd := range domains {
		switch fd.Attributes[build.FailureDomainTopologyKey] {
		case build.LabelHostname:
			if fd.Name == node.Name {
				return fd.Name
			}
		default:
			if fd.Name == node.Labels[build.LabelZone] {
				return fd.Name
			}
		}
	}
	return ""
}
