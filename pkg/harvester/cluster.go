package harvester

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// ServerVersionSetting is Harvester's setting that holds its version.
const ServerVersionSetting = "server-version"

// ConnectionError is a failed connection check, with the condition reason that explains it.
type ConnectionError struct {
	Reason  string
	Message string
	Err     error
}

func (e *ConnectionError) Error() string { return e.Message }
func (e *ConnectionError) Unwrap() error { return e.Err }

// CheckConnection asks Harvester, live (a cache would never see a revoked token), for its
// version and the target namespace, and classifies what goes wrong.
func CheckConnection(ctx context.Context, c client.Client, namespace string) (string, error) {
	setting := &harvesterv1.Setting{}
	if err := c.Get(ctx, client.ObjectKey{Name: ServerVersionSetting}, setting); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &ConnectionError{Reason: infrav1.HarvesterUnreachableReason, Err: err,
				Message: "the identity's server has no server-version setting: is it a Harvester cluster?"}
		}
		return "", ClassifyError(err, "reading Harvester's version")
	}
	version := setting.Value
	if version == "" {
		version = setting.Default
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return version, &ConnectionError{Reason: infrav1.TargetNamespaceNotFoundReason, Err: err,
				Message: fmt.Sprintf("target namespace %s does not exist on Harvester", namespace)}
		}
		return version, ClassifyError(err, "reading the target namespace")
	}
	return version, nil
}

// ClassifyError turns an error of a Harvester request into a ConnectionError with the reason a
// user can act on: 401 (token expired or revoked), 403 (a missing permission), or unreachable.
func ClassifyError(err error, doing string) error {
	var ce *ConnectionError
	if errors.As(err, &ce) {
		return err
	}
	switch {
	case apierrors.IsUnauthorized(err):
		return &ConnectionError{Reason: infrav1.UnauthorizedReason, Err: err,
			Message: doing + ": Harvester refused the identity's credentials (401): the token expired or was revoked; put a working kubeconfig in the identity Secret"}
	case apierrors.IsForbidden(err):
		return &ConnectionError{Reason: infrav1.ForbiddenReason, Err: err,
			Message: doing + ": the identity lacks a permission on Harvester (403): " + apiMessage(err)}
	}
	return &ConnectionError{Reason: infrav1.HarvesterUnreachableReason, Err: err, Message: doing + ": " + reachError(err)}
}

func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// reachError describes a network error without echoing request details.
func reachError(err error) string {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		var opErr *net.OpError
		if errors.As(urlErr.Err, &opErr) {
			return fmt.Sprintf("Harvester does not answer at %s: %v", urlErr.URL, opErr.Err)
		}
		return fmt.Sprintf("Harvester does not answer at %s: %v", urlErr.URL, urlErr.Err)
	}
	return err.Error()
}

// FailureDomains lists Harvester's zones as failure domains (with their region), or, when no
// host has a zone label, each schedulable host as its own failure domain. byHost tells which.
func FailureDomains(nodes []corev1.Node) (domains []clusterv1.FailureDomain, byHost bool) {
	zones := map[string]string{}
	var hosts []string
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			continue
		}
		if z := n.Labels[LabelZone]; z != "" {
			if _, ok := zones[z]; !ok || zones[z] == "" {
				zones[z] = n.Labels[LabelRegion]
			}
		}
		hosts = append(hosts, n.Name)
	}
	if len(zones) > 0 {
		for z, region := range zones {
			attrs := map[string]string{FailureDomainTopologyKey: LabelZone}
			if region != "" {
				attrs["region"] = region
			}
			domains = append(domains, clusterv1.FailureDomain{Name: z, ControlPlane: ptr.To(true), Attributes: attrs})
		}
	} else {
		byHost = true
		for _, h := range hosts {
			domains = append(domains, clusterv1.FailureDomain{Name: h, ControlPlane: ptr.To(true),
				Attributes: map[string]string{FailureDomainTopologyKey: LabelHostname}})
		}
	}
	slices.SortFunc(domains, func(a, b clusterv1.FailureDomain) int { return cmp.Compare(a.Name, b.Name) })
	return domains, byHost
}
