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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Distribution is what the node agent knows of a Kubernetes distribution that a CAPI bootstrap
// provider installs from cloud-init with a config file and an install command: RKE2 (rke2.go)
// and K3s (k3s.go). Both are built on the same server code (K3s's), so they share this shape.
type Distribution struct {
	// Name is the distribution's ("rke2", "k3s").
	Name string
	// ConfigPath is the config file the bootstrap data writes (server, token, node-name,
	// kubelet-arg, node-label, node-taint, cloud-provider-name, ...).
	ConfigPath string
	// TLSDir holds the cluster's CAs the control-plane provider generated (server-ca, client-ca).
	TLSDir string
	// ServingSecret is the kube-system Secret a server writes its serving certificate to once
	// its control plane runs; the control-plane providers take it as "initialised".
	ServingSecret string
	// IsServer tells a server's (control-plane) bootstrap commands from an agent's.
	IsServer func(runcmd []string) bool
	// Etcd tells whether a server runs embedded etcd, from its config file.
	Etcd func(config map[string]any) bool
	// InstallVersionVariable is the installer's variable that names the version the bootstrap
	// commands install (INSTALL_RKE2_VERSION, INSTALL_K3S_VERSION): the Node's kubelet reports it.
	InstallVersionVariable string
	// EtcdAnnotations is the prefix of the Node annotations of the server's etcd member controller
	// (etcd.<program>.cattle.io): node-name, remove, removed-node-name.
	EtcdAnnotations string
	// EtcdPods says a server runs its embedded etcd as the static pod etcd-<node> (RKE2), with
	// its other control-plane components, which the control-plane provider reaches through
	// port-forward. K3s runs etcd and the control plane inside its own process, listening on the
	// host's etcd port; its provider reaches that through the pods of the etcd-proxy DaemonSet
	// its bootstrap data puts in ManifestsDir. Either way the etcd server CA is
	// TLSDir/etcd/server-ca.{crt,key}.
	EtcdPods bool
	// ManifestsDir is the directory whose manifests a server's deploy controller applies to the
	// cluster (K3s: /var/lib/rancher/k3s/server/manifests); empty when the bed applies none.
	ManifestsDir string
}

// DistributionNode is what a VM's bootstrap data of a Distribution tells the node agent.
type DistributionNode struct {
	Distribution *Distribution
	// Server: the VM runs the distribution's server (control plane); Init: the first server,
	// which starts the cluster (its config names no server to join).
	Server, Init bool
	// JoinURL is the server a joining node registers with (the config's `server`), empty for the
	// first server.
	JoinURL string
	// NodeName is the config's node-name; empty means the VM's hostname.
	NodeName string
	// ExternalCloudProvider: the kubelet runs with --cloud-provider=external (or the config says
	// cloud-provider-name: external).
	ExternalCloudProvider bool
	// Labels and Taints are what the server and kubelet put on the Node: the config's node-label
	// and node-taint, and on servers the distribution's role labels.
	Labels map[string]string
	Taints []corev1.Taint
	// Files are the write_files by path.
	Files map[string][]byte
	// KubeletVersion is the version the install command installs (e.g. v1.35.4+rke2r1), which
	// the kubelet reports; empty when it names none (air-gapped: the image's).
	KubeletVersion string
}

// ParseNode reads the distribution's bootstrap data out of cloud-config user data; nil when it
// carries none.
func (d *Distribution) ParseNode(userData []byte) (*DistributionNode, error) {
	if !isCloudConfig(userData) {
		return nil, nil
	}
	files, runcmd, err := cloudConfigFiles(userData)
	if err != nil {
		return nil, err
	}
	raw, ok := files[d.ConfigPath]
	if !ok {
		return nil, nil
	}
	config := map[string]any{}
	if err := yaml.Unmarshal(raw, &config); err != nil {
		return nil, fmt.Errorf("reading %s: %w", d.ConfigPath, err)
	}
	n := &DistributionNode{Distribution: d, Files: files, Labels: map[string]string{}}
	n.Server = d.IsServer(runcmd)
	n.KubeletVersion = installVersion(runcmd, d.InstallVersionVariable)
	n.Init = n.Server && configString(config, "server") == ""
	n.NodeName = configString(config, "node-name")
	n.JoinURL = configString(config, "server")
	n.ExternalCloudProvider = configString(config, "cloud-provider-name") == "external"
	for _, arg := range configStrings(config, "kubelet-arg") {
		if strings.TrimLeft(arg, "-") == "cloud-provider=external" {
			n.ExternalCloudProvider = true
		}
	}
	if n.Server {
		// What the server puts on its own Node (k3s pkg/server: ControlPlaneRoleLabelKey,
		// MasterRoleLabelKey, and ETCDRoleLabelKey with embedded etcd), all "true".
		n.Labels["node-role.kubernetes.io/control-plane"] = "true"
		n.Labels["node-role.kubernetes.io/master"] = "true"
		if d.Etcd(config) {
			n.Labels[etcdRoleLabel] = "true"
		}
	}
	for _, l := range configStrings(config, "node-label") {
		k, v, _ := strings.Cut(l, "=")
		n.Labels[k] = v
	}
	for _, t := range configStrings(config, "node-taint") {
		// key[=value]:Effect
		kv, effect, _ := strings.Cut(t, ":")
		k, v, _ := strings.Cut(kv, "=")
		n.Taints = append(n.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return n, nil
}

// NodeConfig is how a Node registers in a guest: the hook a Cluster's NodeConfigFor gives the
// node agent for distributions other than kubeadm.
type NodeConfig struct {
	// Name is the Node's name; empty means the VM's hostname.
	Name                  string
	ControlPlane          bool
	ExternalCloudProvider bool
	Labels                map[string]string
	Taints                []corev1.Taint
	// KubeletVersion is what the Node's kubelet reports; empty means the version of the image
	// the VM boots.
	KubeletVersion string
	// Manifests are what a server's deploy controller applies to the cluster once it runs (the
	// files of the distribution's ManifestsDir).
	Manifests [][]byte
}

// NodeConfig is n as the node agent registers it.
func (n *DistributionNode) NodeConfig() *NodeConfig {
	nc := &NodeConfig{Name: n.NodeName, ControlPlane: n.Server, ExternalCloudProvider: n.ExternalCloudProvider,
		Labels: maps.Clone(n.Labels), Taints: n.Taints, KubeletVersion: n.KubeletVersion}
	if n.Server {
		nc.Manifests = manifestsIn(n.Files, n.Distribution.ManifestsDir)
	}
	return nc
}

// StartDistribution starts the control plane the first server of a distribution brings up from
// n: a kube-apiserver listening on the control-plane endpoint (a loopback address here) whose
// serving certificate is signed by the cluster's server CA and which trusts client certificates
// of its client CA (both from the bootstrap data, as the control-plane provider generated them,
// so the kubeconfig Secret it wrote works), and the kube-system serving Secret the server writes
// once it runs. Nodes of the cluster then register with the distribution's labels.
func StartDistribution(ctx context.Context, namespace, name, endpoint string, n *DistributionNode) (*Cluster, error) {
	if !n.Init {
		return nil, errors.New("only the first server starts a control plane")
	}
	d := n.Distribution
	serverCA, err := parseClusterCA(n.Files[d.TLSDir+"/server-ca.crt"], n.Files[d.TLSDir+"/server-ca.key"])
	if err != nil {
		return nil, fmt.Errorf("the server CA: %w", err)
	}
	clientCA, err := parseClusterCA(n.Files[d.TLSDir+"/client-ca.crt"], n.Files[d.TLSDir+"/client-ca.key"])
	if err != nil {
		return nil, fmt.Errorf("the client CA: %w", err)
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, fmt.Errorf("the control-plane endpoint %q: %w", endpoint, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("the control-plane endpoint %s is not a loopback address: the simulated pool must hand out 127.0.0.0/8 addresses", host)
	}
	certDir, err := os.MkdirTemp("", "guest-"+name+"-")
	if err != nil {
		return nil, err
	}
	// The server generates its service-account key itself; so does the stand-in.
	saKey, saPub, err := serviceAccountKeyPair()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	if err := serverCA.writeServingFiles(certDir, host, saKey, saPub); err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	var etcd *stackedEtcd
	if n.Labels[etcdRoleLabel] == "true" {
		etcd, err = newStackedEtcd(n.Files[d.TLSDir+"/etcd/server-ca.crt"], n.Files[d.TLSDir+"/etcd/server-ca.key"],
			filepath.Join(certDir, "etcd"), embeddedEtcdMemberName)
		if err != nil {
			return nil, errors.Join(err, os.RemoveAll(certDir))
		}
	}
	network, egressConfig, err := startKubeletNetwork(certDir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	env, err := testenv.Start(testenv.Options{
		Name: "guest-" + namespace + "-" + name, Scheme: scheme,
		ConfigureAPIServer: func(s *envtest.APIServer) error {
			s.CertDir = certDir
			s.SecureServing.ListenAddr = envtest.ListenAddr{Address: host, Port: port}
			s.SecureServing.CA = serverCA.certPEM
			s.SecureServing.Authn = &clusterCAAuthn{ca: clientCA}
			// The kubelets through the bed's network (see kubeletNetwork), as for kubeadm.
			s.Configure().Set("egress-selector-config-file", egressConfig)
			s.Configure().Set("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname")
			return nil
		},
	})
	if err != nil {
		network.stop()
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	network.serve(env.Client, etcd, endpoint)
	g := &Cluster{Namespace: namespace, Name: name, Env: env, WithCCM: n.ExternalCloudProvider, certDir: certDir,
		etcd: etcd, network: network, distribution: d,
		NodeConfigFor: func(userData []byte) (*NodeConfig, error) {
			dn, err := d.ParseNode(userData)
			if err != nil || dn == nil {
				return nil, err
			}
			return dn.NodeConfig(), nil
		},
	}
	if etcd != nil {
		if err := setUpEtcdRemoval(env.Manager, etcd, d.EtcdAnnotations); err != nil {
			return nil, errors.Join(err, g.Stop())
		}
	}
	cert, certErr := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	key, keyErr := os.ReadFile(filepath.Join(certDir, "apiserver.key"))
	if err := errors.Join(certErr, keyErr); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	serving := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: d.ServingSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
	if err := env.Client.Create(ctx, serving); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, errors.Join(fmt.Errorf("creating %s: %w", d.ServingSecret, err), g.Stop())
	}
	return g, nil
}

// serviceAccountKeyPair is a key pair for signing ServiceAccount tokens, in PEM.
func serviceAccountKeyPair() (key, pub []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// cloudConfigFiles returns a cloud-config's write_files by path (decoded) and its commands.
func cloudConfigFiles(userData []byte) (map[string][]byte, []string, error) {
	var cc cloudConfig
	if err := yaml.Unmarshal(userData, &cc); err != nil {
		return nil, nil, err
	}
	files, err := decodeWriteFiles(cc.WriteFiles)
	if err != nil {
		return nil, nil, err
	}
	var runcmd []string
	for _, c := range cc.RunCmd {
		switch c := c.(type) {
		case string:
			runcmd = append(runcmd, c)
		case []any:
			parts := make([]string, 0, len(c))
			for _, p := range c {
				parts = append(parts, fmt.Sprint(p))
			}
			runcmd = append(runcmd, strings.Join(parts, " "))
		}
	}
	return files, runcmd, nil
}

// installVersion is the value the commands give the installer's variable (VAR=value), quotes
// removed; empty when none does.
func installVersion(runcmd []string, variable string) string {
	if variable == "" {
		return ""
	}
	for _, c := range runcmd {
		for _, field := range strings.Fields(c) {
			if v, ok := strings.CutPrefix(field, variable+"="); ok {
				return strings.Trim(v, `"'`)
			}
		}
	}
	return ""
}

func configString(config map[string]any, key string) string {
	s, _ := config[key].(string)
	return s
}

func configStrings(config map[string]any, key string) []string {
	switch v := config[key].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			out = append(out, fmt.Sprint(s))
		}
		return out
	}
	return nil
}

// decodeWriteFiles returns write_files by path, base64 content decoded.
func decodeWriteFiles(files []writeFile) (map[string][]byte, error) {
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		content := []byte(f.Content)
		if strings.Contains(f.Encoding, "b64") || strings.Contains(f.Encoding, "base64") {
			decoded, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return nil, fmt.Errorf("decoding %s: %w", f.Path, err)
			}
			content = decoded
		}
		out[f.Path] = content
	}
	return out, nil
}
