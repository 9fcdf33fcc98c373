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

package guest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// KCP's own etcd client (port-forward through the guest's apiserver to the etcd pod of a node)
// reaches that node's member through the bed's kubelet endpoint, and nothing else of the node.
func TestKCPReachesStackedEtcdThroughTheKubelet(t *testing.T) {
	e, ca := newTestEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.join(ctx, "cp-a"); err != nil {
		t.Fatal(err)
	}
	network, egress, err := startKubeletNetwork(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{Name: "guest-kubelets", Scheme: scheme, ConfigureAPIServer: func(s *envtest.APIServer) error {
		s.Configure().Set("egress-selector-config-file", egress)
		s.Configure().Set("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname")
		return nil
	}})
	if err != nil {
		network.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Stop()
		network.stop()
	})
	network.serve(env.Client, e, strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/"))

	// Two nodes at VM addresses nothing on this host routes to; each has an etcd pod.
	for _, n := range []string{"cp-a", "cp-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := env.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: map[string]string{"cp-a": "10.99.0.1", "cp-b": "10.99.0.2"}[n]}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = kubeletPort
		if err := env.Client.Status().Update(ctx, node); err != nil {
			t.Fatal(err)
		}
		if err := controlPlanePods(ctx, env.Client, n); err != nil {
			t.Fatal(err)
		}
	}

	certPEM, keyPEM, err := e.ca.issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kcp"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CA)
	// KCP's TLS settings (controlplane/kubeadm/pkg/cluster.go): the pod name is in no SAN.
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	connect := func(pod string) (*etcd.Client, error) {
		return etcd.NewClient(ctx, etcd.ClientConfiguration{
			Endpoint: pod, Proxy: proxy.Proxy{Kind: "pods", Namespace: metav1.NamespaceSystem, KubeConfig: env.Config, Port: etcdPort},
			TLSConfig: tlsConfig, DialTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Logger: zap.NewNop(),
		})
	}
	// reaches says whether an etcd client through pod finds cp-a's member alone, and fails the
	// test when it finds anything else.
	reaches := func(pod string) bool {
		t.Helper()
		c, err := connect(pod)
		if err != nil {
			return false
		}
		members, err := c.Members(ctx)
		_ = c.Close()
		if err != nil || len(members) != 1 || members[0].Name != "cp-a" {
			t.Fatalf("members through %s: %v, %v; want cp-a", pod, members, err)
		}
		return true
	}
	if !reaches("etcd-cp-a") {
		t.Fatal("KCP's etcd client does not reach cp-a's member through cp-a's kubelet")
	}
	// cp-b runs no member: the forward is refused, as a kubelet's is when nothing listens.
	if reaches("etcd-cp-b") {
		t.Fatal("reached an etcd on cp-b, which runs none")
	}
	// K3s's etcd-proxy pods (cluster-api-k3s pkg/etcd/etcd-proxy.yaml: socat relaying 2379 to
	// the host's, where K3s's process serves etcd), which its provider port-forwards to as KCP
	// does: cp-a's reaches cp-a's member, cp-b's finds nothing on its host's port.
	for _, n := range []string{"cp-a", "cp-b"} {
		if err := env.Client.Create(ctx, etcdProxyPod(n)); err != nil {
			t.Fatal(err)
		}
	}
	if !reaches("etcd-proxy-cp-a") {
		t.Fatal("an etcd client does not reach cp-a's member through cp-a's etcd-proxy pod")
	}
	if reaches("etcd-proxy-cp-b") {
		t.Fatal("reached an etcd through cp-b's etcd-proxy, whose host runs none")
	}

	// The apiserver's port of its pod is the guest's apiserver, whose certificate KCP reads for
	// its expiry (GetAPIServerCertificateExpiry dials it so); no other port is served.
	dialer, err := proxy.NewDialer(proxy.Proxy{Kind: "pods", Namespace: metav1.NamespaceSystem, KubeConfig: env.Config, Port: apiserverPort(t, env.Config.Host)})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := dialer.DialContextWithAddr(ctx, "kube-apiserver-cp-a")
	if err != nil {
		t.Fatalf("the apiserver's port through cp-a's kubelet: %v", err)
	}
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
	if err := conn.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS with the apiserver through cp-a's kubelet: %v", err)
	}
	_ = conn.Close()
	if c, err := etcd.NewClient(ctx, etcd.ClientConfiguration{
		Endpoint: "kube-apiserver-cp-a", Proxy: proxy.Proxy{Kind: "pods", Namespace: metav1.NamespaceSystem, KubeConfig: env.Config, Port: 2380},
		TLSConfig: tlsConfig, DialTimeout: 2 * time.Second, CallTimeout: 2 * time.Second, Logger: zap.NewNop(),
	}); err == nil {
		_ = c.Close()
		t.Fatal("reached port 2380 of kube-apiserver-cp-a, which nothing serves")
	}
}

func apiserverPort(t *testing.T, host string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(host, "https://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// etcdProxyPod is a pod of K3s's etcd-proxy DaemonSet on node, as the DaemonSet controller
// makes it from cluster-api-k3s's manifest.
func etcdProxyPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "etcd-proxy-" + node, Labels: map[string]string{"app": "etcd-proxy"}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "etcd-proxy", Image: "alpine/socat:1.8.0.0",
				Env:  []corev1.EnvVar{{Name: "HOSTIP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}},
				Args: []string{"TCP4-LISTEN:2379,fork,reuseaddr", "TCP4:$(HOSTIP):2379"},
			}},
		},
	}
}

// Only a relay to the host's IP, from the port asked for, is one.
func TestHostRelay(t *testing.T) {
	pod := etcdProxyPod("n")
	if port, ok := hostRelay(pod, 2379); !ok || port != 2379 {
		t.Errorf("etcd-proxy: %d, %v; want 2379, true", port, ok)
	}
	if _, ok := hostRelay(pod, 2380); ok {
		t.Error("etcd-proxy relays 2380, which it does not listen on")
	}
	other := pod.DeepCopy()
	other.Spec.Containers[0].Args[1] = "TCP4:10.0.0.1:2379"
	if _, ok := hostRelay(other, 2379); ok {
		t.Error("a relay to a fixed address is taken for one to the host")
	}
	other = pod.DeepCopy()
	other.Spec.Containers[0].Env = nil
	if _, ok := hostRelay(other, 2379); ok {
		t.Error("a relay to an unset variable is taken for one to the host")
	}
}
