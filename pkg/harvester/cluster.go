package harvester

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			return ClassifyError(err, "checking the identity's rights in the target namespace")
		}
		if !review.Status.Allowed {
			resource := attrs.Resource
			if attrs.Group != "" {
				resource += "." + attrs.Group
			}
			return &ConnectionError{Reason: infrav1.ForbiddenReason, Message: fmt.Sprintf(
				"the identity may not %s %s in the target namespace %s: a Harvester admin applies config/harvester/target-namespace.yaml there (docs/harvester-identity.md)",
				attrs.Verb, resource, namespace)}
		}
	}
	return nil
}

// ClassifyError turns an error of a Harvester request into a ConnectionError with the reason a
// user can act on: 401 (token expired or revoked), 403 (a missing permission), or unreachable,
// saying what failed (name resolution, refused, timeout, TLS, an HTTP status) and never quoting
// what the remote end sent: a tenant's kubeconfig may point anywhere, and conditions must not
// become a way to read other services' answers from inside the management cluster.
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
			Message: doing + ": the identity lacks a permission on Harvester (403)" + forbiddenWhat(err) + "; docs/harvester-identity.md lists the rules it needs"}
	}
	return &ConnectionError{Reason: infrav1.HarvesterUnreachableReason, Err: err, Message: doing + ": " + ReachError(err)}
}

// forbiddenWhat names the kind a 403 was about, from the structured part of the answer only.
func forbiddenWhat(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return ""
	}
	d := status.Status().Details
	what := d.Kind
	if d.Group != "" {
		what += "." + d.Group
	}
	if what == "" || len(what) > 100 {
		return ""
	}
	return " on " + what
}

// ReachError says what went wrong on the way to Harvester, by category, without request or
// response content: the server's host, and whether its name did not resolve, the connection was
// refused or timed out, TLS failed (and why, in x509's words about the certificate), or the
// server answered with an unexpected HTTP status.
func ReachError(err error) string {
	host := ""
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		if u, perr := url.Parse(urlErr.URL); perr == nil {
			host = " at " + u.Host
		}
	}
	var (
		dnsErr      *net.DNSError
		unknownCA   x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidCert x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		status      apierrors.APIStatus
	)
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("Harvester's name %s does not resolve", dnsErr.Name)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "Harvester refused the connection" + host
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to Harvester" + host
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "Harvester did not answer in time" + host
	case errors.As(err, &unknownCA):
		return "TLS: Harvester's certificate" + host + " is not signed by the kubeconfig's certificate-authority-data"
	case errors.As(err, &hostnameErr):
		return "TLS: Harvester's certificate" + host + " is not valid for that name"
	case errors.As(err, &invalidCert):
		return "TLS: Harvester's certificate" + host + " is invalid (expired or not yet valid, or not a server certificate)"
	case errors.As(err, &recordErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "TLS: the server" + host + " does not speak TLS"
	case errors.As(err, &alertErr):
		return "TLS: the server" + host + " refused the handshake (does it want a client certificate?)"
	case errors.As(err, &status):
		st := status.Status()
		if st.Code == 0 {
			break
		}
		if fromBody(st) {
			return fmt.Sprintf("the server%s answered HTTP %d: is it Harvester's Kubernetes API?", host, st.Code)
		}
		// A Status the API server wrote (a webhook's or validation's refusal): its words help.
		msg := st.Message
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return fmt.Sprintf("Harvester refused the request (HTTP %d, %s): %s", st.Code, st.Reason, msg)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "the connection" + host + " was closed"
	}
	return "the request to Harvester" + host + " failed"
}

// fromBody tells a Status client-go made up from a response that was not a Kubernetes Status
// (its message quotes the body) from one the server sent.
func fromBody(st metav1.Status) bool {
	if st.Details == nil {
		return strings.HasPrefix(st.Message, "an error on the server")
	}
	for _, c := range st.Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return strings.HasPrefix(st.Message, "an error on the server")
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
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
