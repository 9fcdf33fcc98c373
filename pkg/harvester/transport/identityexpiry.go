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
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// CredentialExpiry tells when the credential of a kubeconfig's current context expires, when it
// says so itself: the `exp` claim of a JWT bearer token (ServiceAccount tokens from the
// TokenRequest API have one; legacy ServiceAccount-token Secrets and Rancher's tokens do not),
// else the end of validity of an inline client certificate. ok is false when it does not say.
// Nothing of the credential is returned or logged.
func CredentialExpiry(kubeconfig []byte) (expires time.Time, ok bool) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return time.Time{}, false
	}
	kctx, found := cfg.Contexts[cfg.CurrentContext]
	if !found {
		return time.Time{}, false
	}
	auth, found := cfg.AuthInfos[kctx.AuthInfo]
	if !found {
		return time.Time{}, false
	}
	if t, ok := jwtExpiry(auth.Token); ok {
		return t, true
	}
	if block, _ := pem.Decode(auth.ClientCertificateData); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			return cert.NotAfter, true
		}
	}
	return time.Time{}, false
}

// jwtExpiry reads the exp claim of a JWT without checking its signature: it only tells when the
// token will stop working; Harvester decides whether it works.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(exp), 0), true
}
