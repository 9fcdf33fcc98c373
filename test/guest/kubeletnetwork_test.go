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
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // as KCP
	connect := func(pod string) (*etcd.Client, error) {
		return etcd.NewClient(ctx, etcd.ClientConfiguration{
			Endpoint: pod, Proxy: proxy.Proxy{Kind: "pods", Namespace: metav1.NamespaceSystem, KubeConfig: env.Config, Port: etcdPort},
			TLSConfig: tlsConfig, DialTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Logger: zap.NewNop(),
		})
	}
	c, err := connect("etcd-cp-a")
	if err != nil {
		t.Fatalf("KCP's etcd client through cp-a's kubelet: %v", err)
	}
	members, err := c.Members(ctx)
	_ = c.Close()
	if err != nil || len(members) != 1 || members[0].Name != "cp-a" {
		t.Fatalf("members %v, %v; want cp-a", members, err)
	}

	// cp-b runs no member: the forward is refused, as a kubelet's is when nothing listens.
	if c, err := connect("etcd-cp-b"); err == nil {
		_ = c.Close()
		t.Fatal("reached an etcd on cp-b, which runs none")
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
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // as KCP
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
