package harvestersim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Harvester's load balancer (github.com/harvester/harvester-load-balancer, the version in go.mod)
// runs as its own two processes against the simulated Harvester's apiserver, built by
// hack/ensure-harvester-lb.sh: the controller (IPPools, LoadBalancers and, for vm-type load
// balancers, a Service of type LoadBalancer and its EndpointSlice) and the admission webhook
// (mutation and validation of both kinds). What needs a real network is played by the simulator
// (kubevip.go): kube-vip, which gives those Services their address, and Kubernetes' garbage
// collector for them.
const (
	lbSystemNamespace = "harvester-system"
	lbWebhookName     = "harvester-load-balancer-webhook"
)

// LoadBalancerDir is where hack/ensure-harvester-lb.sh put the load balancer's binaries:
// $HARVESTER_LB_DIR when set (make test sets it), else the script is run, which builds them once
// into bin/.
func LoadBalancerDir() (string, error) {
	if dir := os.Getenv("HARVESTER_LB_DIR"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "ensure-harvester-lb.sh")).Output() //nolint:gosec // our own script
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("hack/ensure-harvester-lb.sh: %w: %s", err, exit.Stderr)
		}
		return "", fmt.Errorf("hack/ensure-harvester-lb.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// loadBalancerProcesses are the running controller and webhook.
type loadBalancerProcesses struct {
	work string
	mu   sync.Mutex
	cmds []*lbProcess
}

type lbProcess struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  string
}

// startLoadBalancer runs the webhook (and waits until the apiserver calls it), then the controller.
func (h *Harvester) startLoadBalancer(ctx context.Context) error {
	dir, err := LoadBalancerDir()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "harvester-lb-")
	if err != nil {
		return err
	}
	p := &loadBalancerProcesses{work: work}
	h.lb = p
	kubeconfig, err := h.Env.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	if err := createIfMissing(ctx, h.Env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lbSystemNamespace}}); err != nil {
		return err
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	caPEM, err := h.seedLBWebhookCertificates(ctx)
	if err != nil {
		return err
	}
	base := []string{"KUBECONFIG=" + kubeconfigPath, "NAMESPACE=" + lbSystemNamespace}
	if err := p.start(ctx, "webhook", filepath.Join(dir, "webhook"), append(base,
		fmt.Sprintf("WEBHOOK_SERVER_HTTPS_PORT=%d", port),
		fmt.Sprintf("HARVESTER_WEBHOOK_URL=https://127.0.0.1:%d", port),
		"HARVESTER_WEBHOOK_SETTLE=0s")); err != nil {
		return err
	}
	if err := p.waitForWebhook(ctx, h.Env.Client, port, caPEM); err != nil {
		return err
	}
	return p.start(ctx, "controller", filepath.Join(dir, "controller"), base)
}

func (p *loadBalancerProcesses) start(ctx context.Context, name, path string, env []string) error {
	logPath := filepath.Join(p.work, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), path)
	cmd.Dir = p.work
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting Harvester's load balancer %s: %w", name, err)
	}
	proc := &lbProcess{name: name, cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() {
		proc.done <- cmd.Wait()
		_ = logFile.Close()
	}()
	p.mu.Lock()
	p.cmds = append(p.cmds, proc)
	p.mu.Unlock()
	return nil
}

// waitForWebhook waits for the webhook to register its configurations at its loopback URL and
// to serve TLS with the certificate they trust.
func (p *loadBalancerProcesses) waitForWebhook(ctx context.Context, c client.Client, port int, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		for _, cfg := range []client.Object{&admissionv1.ValidatingWebhookConfiguration{}, &admissionv1.MutatingWebhookConfiguration{}} {
			if err := c.Get(ctx, client.ObjectKey{Name: lbWebhookName}, cfg); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Harvester's load balancer webhook (log: %s): %w", filepath.Join(p.work, "webhook.log"), err)
	}
	return nil
}

// exited reports a process that ended before it was stopped.
func (p *loadBalancerProcesses) exited() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, proc := range p.cmds {
		select {
		case err := <-proc.done:
			proc.done <- err
			return fmt.Errorf("Harvester's load balancer %s exited: %v (log: %s)", proc.name, err, proc.log) //nolint:staticcheck // a name
		default:
		}
	}
	return nil
}

func (p *loadBalancerProcesses) stop() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	cmds := p.cmds
	p.mu.Unlock()
	for _, proc := range cmds {
		_ = proc.cmd.Process.Kill()
		<-proc.done
	}
	if os.Getenv("HARVESTER_LB_KEEP_LOGS") != "" { // for reading what Harvester's code did
		return nil
	}
	return os.RemoveAll(p.work)
}

// seedLBWebhookCertificates plays what the webhook's dynamiclistener would generate: its CA
// Secret (which it injects into its configurations) and a serving certificate marked static
// (used as is), for 127.0.0.1 as well as its Service's name, since the bed calls it by address.
func (h *Harvester) seedLBWebhookCertificates(ctx context.Context) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "harvester-load-balancer-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: lbWebhookName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		DNSNames:    []string{lbWebhookName + "." + lbSystemNamespace + ".svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	pemKey := func(k *ecdsa.PrivateKey) ([]byte, error) {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b}), err
	}
	caKeyPEM, err := pemKey(caKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pemKey(key)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, s := range []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: lbSystemNamespace, Name: lbWebhookName + "-ca"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: caPEM, corev1.TLSPrivateKeyKey: caKeyPEM},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: lbSystemNamespace, Name: lbWebhookName + "-tls",
				Annotations: map[string]string{"listener.cattle.io/static": "true"}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		},
	} {
		if err := h.Env.Client.Create(ctx, s); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close() //nolint:errcheck // a probe
	return l.Addr().(*net.TCPAddr).Port, nil
}
