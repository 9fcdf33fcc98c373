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
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// kubeletPort is the port a kubelet serves its API on, and what a Node posts as its kubelet
// endpoint.
const kubeletPort = 10250

// kubeletNetwork is how a guest's kube-apiserver reaches its nodes' kubelets: the apiserver's
// "cluster" egress goes through it (an HTTP CONNECT proxy on a Unix socket, configured with
// --egress-selector-config-file, as a konnectivity proxy is), and a connection to a Node's
// address on the kubelet port is served by that node's kubelet: its serving certificate
// (self-signed, as a kubelet's is without serving-certificate bootstrap) and its port-forward
// endpoint, kubelet's own streaming code from k8s.io/cri-streaming. What the forward reaches is
// the bed's: on a control-plane node, etcd's client port (see stackedEtcd) and the API server's
// port (the guest's one apiserver, whose serving certificate KCP reads for its expiry); nothing
// else of a guest's pods listens. Other destinations are dialled directly, as without the proxy.
type kubeletNetwork struct {
	guest client.Client
	etcd  *stackedEtcd
	// apiserver is the guest apiserver's host:port.
	apiserver string
	listener  net.Listener
	tls       *tls.Config

	wg sync.WaitGroup
}

// startKubeletNetwork listens on dir/kubelets.sock and writes the apiserver's egress selector
// configuration, returning its path.
func startKubeletNetwork(dir string) (*kubeletNetwork, string, error) {
	serving, err := testenv.NewServingCertificate("kubelet", []string{"localhost"})
	if err != nil {
		return nil, "", err
	}
	cert, err := tls.X509KeyPair(serving.Cert, serving.Key)
	if err != nil {
		return nil, "", err
	}
	socket := filepath.Join(dir, "kubelets.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, "", err
	}
	config := filepath.Join(dir, "egress-selector.yaml")
	err = os.WriteFile(config, fmt.Appendf(nil, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, socket), 0o600)
	if err != nil {
		return nil, "", errors.Join(err, l.Close())
	}
	k := &kubeletNetwork{listener: l, tls: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	return k, config, nil
}

// serve accepts the apiserver's connections until stop; guest is the guest's client, etcd its
// stacked etcd (nil with an external one), apiserver the apiserver's host:port.
func (k *kubeletNetwork) serve(guest client.Client, etcd *stackedEtcd, apiserver string) {
	k.guest, k.etcd, k.apiserver = guest, etcd, apiserver
	k.wg.Go(func() {
		for {
			conn, err := k.listener.Accept()
			if err != nil {
				return
			}
			go k.connect(conn)
		}
	})
}

func (k *kubeletNetwork) stop() {
	_ = k.listener.Close()
	k.wg.Wait()
}

// connect answers one CONNECT request.
func (k *kubeletNetwork) connect(conn net.Conn) {
	r := bufio.NewReader(conn)
	req, err := http.ReadRequest(r)
	if err != nil || req.Method != http.MethodConnect {
		_ = conn.Close()
		return
	}
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		_ = conn.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	node, err := k.nodeAt(ctx, host)
	cancel()
	if err != nil || (node != "" && port != fmt.Sprint(kubeletPort)) {
		// A node's other ports: nothing of the bed listens there.
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		_ = conn.Close()
		return
	}
	if node == "" {
		k.direct(conn, req.Host)
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = conn.Close()
		return
	}
	// The apiserver speaks first (TLS), so nothing is buffered beyond the request.
	tlsConn := tls.Server(conn, k.tls)
	srv := &http.Server{Handler: k.kubelet(node), ReadHeaderTimeout: 10 * time.Second}
	_ = srv.Serve(&oneConn{conn: tlsConn})
}

// direct relays a connection to a destination that is no node, as the apiserver's own dial did.
func (k *kubeletNetwork) direct(conn net.Conn, addr string) {
	target, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		_ = conn.Close()
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = errors.Join(conn.Close(), target.Close())
		return
	}
	relay(conn, target)
}

// nodeAt returns the name of the guest's Node with address (or name) host; empty when none.
func (k *kubeletNetwork) nodeAt(ctx context.Context, host string) (string, error) {
	nodes := &corev1.NodeList{}
	if err := k.guest.List(ctx, nodes); err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		if n.Name == host {
			return n.Name, nil
		}
		for _, a := range n.Status.Addresses {
			if a.Address == host {
				return n.Name, nil
			}
		}
	}
	return "", nil
}

// kubelet is node's kubelet API: port-forwarding to the pods bound to it.
func (k *kubeletNetwork) kubelet(node string) http.Handler {
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, req *http.Request) {
		namespace, name, uid := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("uid")
		pod := &corev1.Pod{}
		if err := k.guest.Get(req.Context(), client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil || pod.Spec.NodeName != node {
			http.Error(w, fmt.Sprintf("pod %s/%s not found on node %s", namespace, name, node), http.StatusNotFound)
			return
		}
		var opts *portforward.V4Options
		if strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			var err error
			if opts, err = portforward.NewV4Options(req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		// kubelet's defaults: streamingConnectionIdleTimeout 4h, stream creation 30s.
		portforward.ServePortForward(w, req, &podPorts{network: k, node: node, pod: pod}, name, uid, opts,
			4*time.Hour, 30*time.Second, portforward.SupportedProtocols)
	}
	mux.HandleFunc("POST /portForward/{namespace}/{pod}", serve)
	mux.HandleFunc("POST /portForward/{namespace}/{pod}/{uid}", serve)
	mux.HandleFunc("GET /portForward/{namespace}/{pod}", serve)
	mux.HandleFunc("GET /portForward/{namespace}/{pod}/{uid}", serve)
	return mux
}

// podPorts is what listens in a pod of one node: etcd's client port in its etcd pod, the
// apiserver's port in its kube-apiserver pod, and in a pod that relays a port to its host's (as
// K3s's etcd-proxy does with socat) whatever listens on that host port: etcd's client port on a
// K3s server, whose process runs etcd.
type podPorts struct {
	network *kubeletNetwork
	node    string
	pod     *corev1.Pod
}

func (p *podPorts) PortForward(ctx context.Context, name, _ string, port int32, stream io.ReadWriteCloser) error {
	defer runtime.HandleCrash()
	addr, ok := "", false
	hostPort, relays := hostRelay(p.pod, port)
	switch {
	case p.pod.Namespace != metav1.NamespaceSystem:
	case p.network.etcd != nil && name == "etcd-"+p.node && port == etcdPort:
		addr, ok = p.network.etcd.clientAddr(p.node)
	case name == "kube-apiserver-"+p.node && strings.HasSuffix(p.network.apiserver, fmt.Sprintf(":%d", port)):
		addr, ok = p.network.apiserver, true
	case relays && hostPort == etcdPort && p.network.etcd != nil:
		addr, ok = p.network.etcd.clientAddr(p.node)
	}
	if !ok {
		return fmt.Errorf("failed to connect to localhost:%d inside the pod %s: connection refused", port, name)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to connect to localhost:%d inside the pod %s: %w", port, name, err)
	}
	relay(stream, conn)
	return nil
}

// relay copies both ways until either side ends, then closes both.
func relay(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	copyTo := func(dst io.Writer, src io.Reader) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go copyTo(a, b)
	go copyTo(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

// oneConn is a listener that hands out one connection, then waits for it to close.
type oneConn struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	done := l.done
	l.mu.Unlock()
	var c net.Conn
	l.once.Do(func() { c = &closeNotifier{Conn: l.conn, closed: done} })
	if c != nil {
		return c, nil
	}
	<-done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

type closeNotifier struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeNotifier) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// hostRelay tells whether pod runs a socat relay from port to a port of its host's IP (the
// Downward API's status.hostIP in an environment variable), as K3s's etcd-proxy pods do
// (`TCP4-LISTEN:2379,fork,reuseaddr TCP4:$(HOSTIP):2379`), and which host port.
func hostRelay(pod *corev1.Pod, port int32) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		hostIPVars := map[string]bool{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP" {
				hostIPVars[e.Name] = true
			}
		}
		if len(c.Args) != 2 {
			continue
		}
		listen, _, _ := strings.Cut(c.Args[0], ",")
		if listen != fmt.Sprintf("TCP4-LISTEN:%d", port) && listen != fmt.Sprintf("TCP-LISTEN:%d", port) {
			continue
		}
		// TCP4:$(VAR):port
		kind, target, ok := strings.Cut(c.Args[1], ":")
		if !ok || (kind != "TCP4" && kind != "TCP") {
			continue
		}
		host, to, err := net.SplitHostPort(strings.SplitN(target, ",", 2)[0])
		if err != nil || !strings.HasPrefix(host, "$(") || !strings.HasSuffix(host, ")") || !hostIPVars[host[2:len(host)-1]] {
			continue
		}
		n, err := strconv.ParseInt(to, 10, 32)
		if err != nil {
			continue
		}
		return int32(n), true
	}
	return 0, false
}
