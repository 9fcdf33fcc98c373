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
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// invalid turns a list of field errors into the API error the webhook returns, or nil.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: GroupVersion.Group, Kind: kind}, name, errs)
}

// validateNamespacedName checks a `namespace/name` reference; with allowBare, a plain `name`
// (meaning the cluster's target namespace) is accepted too.
func validateNamespacedName(path *field.Path, value string, allowBare bool) field.ErrorList {
	form := "`namespace/name`"
	if allowBare {
		form = "`name` or `namespace/name`"
	}
	namespace, name, found := strings.Cut(value, "/")
	if !found {
		if !allowBare {
			return field.ErrorList{field.Invalid(path, value, "must have the form "+form)}
		}
		name, namespace = namespace, ""
	}
	var errs field.ErrorList
	if found || namespace != "" {
		for _, msg := range validation.IsDNS1123Label(namespace) {
			errs = append(errs, field.Invalid(path, value, fmt.Sprintf("must have the form %s; namespace: %s", form, msg)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, value, fmt.Sprintf("must have the form %s; name: %s", form, msg)))
	}
	return errs
}

// validateAtLeast checks that a quantity is at least `least` (a quantity literal such as MinMemory).
func validateAtLeast(path *field.Path, q resource.Quantity, least string) field.ErrorList {
	if q.Cmp(resource.MustParse(least)) < 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be at least "+least)}
	}
	return nil
}

// ratchet drops from errs the errors the old object had already: a rule added after an object
// was stored must not refuse the updates that leave the offending field alone (removing a
// finalizer, adding a label), or the object could not even be deleted. The apiserver ratchets
// the CRD schema's rules the same way.
func ratchet(errs, old field.ErrorList) field.ErrorList {
	known := make(map[string]bool, len(old))
	for _, e := range old {
		known[e.Error()] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !known[e.Error()] {
			out = append(out, e)
		}
	}
	return out
}

// validateHTTPSURL checks an https URL with a host.
func validateHTTPSURL(path *field.Path, value string) field.ErrorList {
	u, err := url.Parse(value)
	if err != nil {
		return field.ErrorList{field.Invalid(path, value, "must be a URL: "+err.Error())}
	}
	if u.Scheme != "https" || u.Host == "" {
		return field.ErrorList{field.Invalid(path, value, "must be an https URL with a host, e.g. https://192.168.0.10:6443")}
	}
	return nil
}

// validatePEMCertificates checks that data holds at least one PEM certificate and nothing else.
func validatePEMCertificates(path *field.Path, data []byte) field.ErrorList {
	rest := data
	count := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(path, "<bytes>", fmt.Sprintf("must hold only PEM certificates, found a %q block", block.Type))}
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return field.ErrorList{field.Invalid(path, "<bytes>", "holds a certificate that does not parse: "+err.Error())}
		}
		count++
	}
	if count == 0 || strings.TrimSpace(string(rest)) != "" {
		return field.ErrorList{field.Invalid(path, "<bytes>", "must be PEM-encoded certificates")}
	}
	return nil
}

// validateMAC checks a unicast Ethernet MAC address.
func validateMAC(path *field.Path, value string) field.ErrorList {
	mac, err := net.ParseMAC(value)
	if err != nil || len(mac) != 6 {
		return field.ErrorList{field.Invalid(path, value, "must be a MAC address like 52:54:00:12:34:56")}
	}
	if mac[0]&1 == 1 {
		return field.ErrorList{field.Invalid(path, value, "must be a unicast MAC address (the first octet must be even)")}
	}
	return nil
}
