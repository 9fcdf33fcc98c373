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
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// A kubeconfig that does not parse must not have its content echoed into conditions: YAML
// errors quote the offending value, which can be the token.
func TestKubeconfigErrorNeverEchoesContent(t *testing.T) {
	g := NewWithT(t)
	for _, bad := range []string{
		"users: s3cr3t-t0ken-value",
		"apiVersion: v1\nclusters:\n- cluster: s3cr3t-t0ken-value\n",
		"{\"users\": \"s3cr3t-t0ken-value\"",
	} {
		_, err := clientcmd.RESTConfigFromKubeConfig([]byte(bad))
		g.Expect(err).To(HaveOccurred(), bad)
		msg := kubeconfigError(err)
		g.Expect(msg).NotTo(ContainSubstring("s3cr3t"), "parser said: %v", err)
		g.Expect(msg).NotTo(BeEmpty())
	}
}

func TestHashedNamesAreUniqueLabels(t *testing.T) {
	g := NewWithT(t)
	a, b := (naming.Guest{Namespace: "a-b", Name: "c"}).LoadBalancerName(), (naming.Guest{Namespace: "a", Name: "b-c"}).LoadBalancerName()
	g.Expect(a).NotTo(Equal(b))
	g.Expect((naming.Guest{Namespace: "ns", Name: "My_Cluster.1"}).ServiceAccountName()).To(MatchRegexp(`^guest-my-cluster-1-[0-9a-f]{10}$`))
	g.Expect(len((naming.Guest{Namespace: "ns", Name: strings.Repeat("x", 100), Mark: "0123456789"}).LoadBalancerName())).To(BeNumerically("<=", 63))
}

// Connections follow their users: a user that switches identity Secrets, or goes away, does not
// keep a connection (and its watches) alive.
func TestFactoryReleasesConnectionsNoLongerUsed(t *testing.T) {
	g := NewWithT(t)
	stopped := map[string]bool{}
	conn := func(name string, users ...string) *connection {
		c := &connection{identity: name, users: map[string]string{}, cancel: func() { stopped[name] = true }}
		for _, u := range users {
			c.users[u] = "guests"
		}
		return c
	}
	f := &ClientFactory{connections: map[string]*connection{
		"ns/old": conn("ns/old", "cluster-a", "machine-a"),
		"ns/new": conn("ns/new", "cluster-a"),
	}}

	// cluster-a now uses ns/new (what Get does before it connects).
	f.mu.Lock()
	f.releaseLocked("cluster-a", "ns/new")
	f.mu.Unlock()
	g.Expect(f.Connections()).To(Equal([]string{"ns/new", "ns/old"}), "machine-a still uses the old one")
	f.Release("machine-a")
	g.Expect(f.Connections()).To(Equal([]string{"ns/new"}))
	g.Expect(stopped).To(Equal(map[string]bool{"ns/old": true}))
	f.Release("cluster-a")
	g.Expect(f.Connections()).To(BeEmpty())
	g.Expect(stopped).To(HaveKey("ns/new"))

	_, err := f.Get(context.Background(), "x", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}}, "guests", "")
	g.Expect(errors.Is(err, ErrInvalidKubeconfig)).To(BeTrue())
}
