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
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Paths of CAPI's kubeadm bootstrap data (sigs.k8s.io/cluster-api/bootstrap/kubeadm/internal/cloudinit).
const (
	kubeadmInitConfigPath = "/run/kubeadm/kubeadm.yaml"
	kubeadmJoinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"
	pkiDir                = "/etc/kubernetes/pki/"
)

// KubeadmNode is what a VM's kubeadm bootstrap data tells its kubelet: whether it runs
// `kubeadm init` or `kubeadm join`, as what node, against which endpoint, and the cluster's
// certificates when it initialises the control plane.
type KubeadmNode struct {
	Init, Join   bool
	ControlPlane bool
	// NodeName is nodeRegistration.name; empty means the VM's hostname.
	NodeName string
	// ExternalCloudProvider: kubelet runs with --cloud-provider=external, so it registers
	// its Node with the uninitialized taint and leaves providerID to the CCM.
	ExternalCloudProvider bool
	// Endpoint is the control plane's host:port (controlPlaneEndpoint on init, the discovery
	// endpoint on join).
	Endpoint string
	// Token is the join's bootstrap token ("id.secret").
	Token string
	// ClusterConfiguration is the document kubeadm init stores in kube-system/kubeadm-config.
	ClusterConfiguration string
	// Files are the write_files by path.
	Files map[string][]byte
}

// ParseKubeadmNode reads kubeadm bootstrap data out of cloud-config user data; nil when it
// carries none.
func ParseKubeadmNode(userData []byte) (*KubeadmNode, error) {
	if !isCloudConfig(userData) {
		return nil, nil
	}
	var cc cloudConfig
	if err := yaml.Unmarshal(userData, &cc); err != nil {
		return nil, err
	}
	n := &KubeadmNode{Files: map[string][]byte{}}
	for _, f := range cc.WriteFiles {
		content := []byte(f.Content)
		if strings.Contains(f.Encoding, "b64") || strings.Contains(f.Encoding, "base64") {
			decoded, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return nil, fmt.Errorf("decoding %s: %w", f.Path, err)
			}
			content = decoded
		}
		n.Files[f.Path] = content
	}
	var docs []byte
	switch {
	case n.Files[kubeadmInitConfigPath] != nil:
		n.Init, n.ControlPlane, docs = true, true, n.Files[kubeadmInitConfigPath]
	case n.Files[kubeadmJoinConfigPath] != nil:
		n.Join, docs = true, n.Files[kubeadmJoinConfigPath]
	default:
		return nil, nil
	}
	for doc := range strings.SplitSeq(string(docs), "\n---") {
		if err := n.readDocument(strings.TrimPrefix(strings.TrimSpace(doc), "---")); err != nil {
			return nil, err
		}
	}
	if n.Endpoint == "" {
		return nil, errors.New("the kubeadm configuration names no control-plane endpoint")
	}
	return n, nil
}

// kubeadmDocument is the part of kubeadm's v1beta4 configuration the stand-in reads.
type kubeadmDocument struct {
	Kind                 string `json:"kind"`
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
	NodeRegistration     struct {
		Name             string `json:"name"`
		KubeletExtraArgs []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"kubeletExtraArgs"`
	} `json:"nodeRegistration"`
	Discovery struct {
		BootstrapToken struct {
			APIServerEndpoint string `json:"apiServerEndpoint"`
			Token             string `json:"token"`
		} `json:"bootstrapToken"`
	} `json:"discovery"`
	ControlPlane *struct{} `json:"controlPlane"`
}

func (n *KubeadmNode) readDocument(doc string) error {
	if doc == "" {
		return nil
	}
	var d kubeadmDocument
	if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
		return fmt.Errorf("reading the kubeadm configuration: %w", err)
	}
	switch d.Kind {
	case "ClusterConfiguration":
		n.ClusterConfiguration = doc + "\n"
		n.Endpoint = d.ControlPlaneEndpoint
	case "InitConfiguration", "JoinConfiguration":
		n.NodeName = d.NodeRegistration.Name
		for _, a := range d.NodeRegistration.KubeletExtraArgs {
			if a.Name == "cloud-provider" && a.Value == "external" {
				n.ExternalCloudProvider = true
			}
		}
		if d.Kind == "JoinConfiguration" {
			n.Endpoint = d.Discovery.BootstrapToken.APIServerEndpoint
			n.Token = d.Discovery.BootstrapToken.Token
			n.ControlPlane = d.ControlPlane != nil
		}
	}
	return nil
}

// StartKubeadm starts the control plane `kubeadm init` would bring up from n: a kube-apiserver
// listening on the control-plane endpoint (a loopback address here) with the cluster's CA and
// service-account keys from the bootstrap data, and the kube-system/kubeadm-config ConfigMap
// that tells CAPI's KubeadmControlPlane the control plane is initialised. CAPI reaches it through
// the kubeconfig Secret KCP wrote, signed by the same CA.
func StartKubeadm(ctx context.Context, namespace, name string, n *KubeadmNode) (*Cluster, error) {
	if !n.Init {
		return nil, errors.New("only kubeadm init starts a control plane")
	}
	ca, err := parseClusterCA(n.Files[pkiDir+"ca.crt"], n.Files[pkiDir+"ca.key"])
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(n.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("the control-plane endpoint %q: %w", n.Endpoint, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("the control-plane endpoint %s is not a loopback address: the simulated pool must hand out 127.0.0.0/8 addresses", host)
	}
	certDir, err := os.MkdirTemp("", "guest-"+name+"-")
	if err != nil {
		return nil, err
	}
	if err := ca.writeServingFiles(certDir, host, n.Files[pkiDir+"sa.key"], n.Files[pkiDir+"sa.pub"]); err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	etcd, err := kubeadmEtcd(n.ClusterConfiguration, n.Files, filepath.Join(certDir, "etcd"))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	network, egressConfig, err := startKubeletNetwork(certDir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env, err := testenv.Start(testenv.Options{
		Name: "guest-" + namespace + "-" + name, Scheme: scheme,
		ConfigureAPIServer: func(s *envtest.APIServer) error {
			s.CertDir = certDir
			s.SecureServing.ListenAddr = envtest.ListenAddr{Address: host, Port: port}
			s.SecureServing.CA = ca.certPEM
			s.SecureServing.Authn = &clusterCAAuthn{ca: ca}
			// The kubelets are reached through the bed's network (see kubeletNetwork), at the
			// addresses kubeadm has the apiserver prefer.
			s.Configure().Set("egress-selector-config-file", egressConfig)
			s.Configure().Set("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname")
			return nil
		},
	})
	if err != nil {
		network.stop()
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	network.serve(env.Client, etcd, n.Endpoint)
	g := &Cluster{Namespace: namespace, Name: name, Env: env, WithCCM: n.ExternalCloudProvider, Kubeadm: true, certDir: certDir,
		etcd: etcd, network: network}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"},
		Data:       map[string]string{"ClusterConfiguration": n.ClusterConfiguration},
	}
	if err := env.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, errors.Join(fmt.Errorf("creating kubeadm-config: %w", err), g.Stop())
	}
	return g, nil
}

// hasBootstrapToken tells whether the join token is known to the guest, as kubeadm join's TLS
// bootstrap checks: CAPI's KubeadmConfig controller creates it in kube-system.
func hasBootstrapToken(ctx context.Context, c client.Client, token string) (bool, error) {
	id, tokenSecret, ok := strings.Cut(token, ".")
	if !ok {
		return false, nil
	}
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id}, secret)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Equal(secret.Data["token-id"], []byte(id)) && bytes.Equal(secret.Data["token-secret"], []byte(tokenSecret)), nil
}

// controlPlanePods creates the mirror Pods of the static pods kubeadm puts on a control-plane
// node, running and ready, where KCP looks for them.
func controlPlanePods(ctx context.Context, c client.Client, nodeName string) error {
	for _, component := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: metav1.NamespaceSystem, Name: component + "-" + nodeName,
				Labels: map[string]string{"component": component, "tier": "control-plane"},
				// A mirror pod: the ServiceAccount admission plugin leaves it alone.
				Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "stand-in"},
			},
			Spec: corev1.PodSpec{
				NodeName:    nodeName,
				HostNetwork: true,
				Containers:  []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":v1.35.4"}},
			},
		}
		err := c.Create(ctx, pod)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("creating the %s pod: %w", component, err)
		}
		now := metav1.Now()
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			StartTime: &now,
		}
		if err := c.Status().Update(ctx, pod); err != nil {
			return fmt.Errorf("reporting the %s pod running: %w", component, err)
		}
	}
	return nil
}
