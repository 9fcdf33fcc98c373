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

package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// Kind says what a reconciler does about an Error: the services decide what went wrong, the
// reconcilers only when to look again.
type Kind int

const (
	// KindRefused means Harvester answered the request with an error (a webhook's refusal, a
	// conflict, a server error); retried with the controller's back-off.
	KindRefused Kind = iota
	// KindUnreachable means Harvester did not answer; retried after a fixed short wait, since no
	// event comes when it answers again.
	KindUnreachable
	// KindAccess means the identity cannot do what the provider needs (credentials refused, a
	// permission or the target namespace missing, the identity Secret missing or unusable); a
	// change of the identity Secret retries at once, otherwise a slow recheck.
	KindAccess
	// KindReference means something the spec names on Harvester (an image, keypair, network) is
	// missing or not ready, or the provider's name is taken by another's object; nothing of the
	// provider's watches those, so a recheck.
	KindReference
	// KindInvalid means the input cannot work as it is (a bootstrap format the provider cannot
	// render, an identity's server that is not a Harvester); reported until the input changes.
	KindInvalid
	// KindBusy means the request waited its whole time for one of the connection's request slots
	// while Harvester answers (slowly, say behind a Rancher proxy): queueing, not an outage. It is
	// not reported on the object; the reconcile is done again soon.
	KindBusy
)

// Error is what went wrong on Harvester, as a reconciler reports it: Reason is the condition
// reason and Message the condition message, written for the user and never quoting what a
// remote end sent; Err, the cause, is for logs only.
type Error struct {
	Kind    Kind
	Reason  string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// AsError returns the Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// ReferenceError is a missing or not yet usable object the spec names.
func ReferenceError(reason, format string, args ...any) *Error {
	return &Error{Kind: KindReference, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// NameTaken is an object of the provider's name that someone else made: looked at again, as
// nothing of the provider's watches it go.
func NameTaken(format string, args ...any) *Error {
	return &Error{Kind: KindReference, Reason: infrav1.NameTakenReason, Message: fmt.Sprintf(format, args...)}
}

// ClassifyError turns an error of a Harvester request into an Error with the reason a user can
// act on: 401 (token expired or revoked), 403 (a missing permission), a refusal Harvester's API
// wrote itself, or unreachable, saying what failed (name resolution, refused, timeout, TLS, an
// HTTP status) and never quoting what the remote end sent unless it is a Kubernetes Status of
// the API server's: a tenant's kubeconfig may point anywhere, and conditions must not become a
// way to read other services' answers from inside the management cluster. An Error passes
// through unchanged.
func ClassifyError(err error, doing string) error {
	if err == nil {
		return nil
	}
	if _, ok := AsError(err); ok {
		return err
	}
	var busy *BusyError
	if errors.As(err, &busy) {
		return &Error{Kind: KindBusy, Reason: infrav1.HarvesterUnreachableReason, Err: err, Message: doing + ": " + busy.Error()}
	}
	switch {
	case apierrors.IsUnauthorized(err):
		return &Error{Kind: KindAccess, Reason: infrav1.UnauthorizedReason, Err: err,
			Message: doing + ": Harvester refused the identity's credentials (401): the token expired or was revoked; put a working kubeconfig in the identity Secret"}
	case apierrors.IsForbidden(err):
		return &Error{Kind: KindAccess, Reason: infrav1.ForbiddenReason, Err: err,
			Message: doing + ": the identity lacks a permission on Harvester (403)" + forbiddenWhat(err) + "; docs/harvester-identity.md lists the rules it needs"}
	case refusedByAPI(err):
		return &Error{Kind: KindRefused, Reason: infrav1.HarvesterRefusedReason, Err: err, Message: doing + ": " + ReachError(err)}
	}
	return &Error{Kind: KindUnreachable, Reason: infrav1.HarvesterUnreachableReason, Err: err, Message: doing + ": " + ReachError(err)}
}

// refusedByAPI tells a Status that Harvester's API server wrote from anything else.
func refusedByAPI(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	return st.Code != 0 && !fromBody(st)
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
	var tooLarge *TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return tooLarge.Error()
	case strings.Contains(err.Error(), tooLargeText):
		// Discovery flattens some errors into text: the bound is still named, the server's
		// words are not quoted.
		return fmt.Sprintf("Harvester%s sent an answer larger than the provider reads (%d MiB, %d MiB for one watch event)",
			host, MaxAnswerBytes>>20, MaxWatchEventBytes>>20)
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
