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

package harvestersim

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Harvester's own admission webhook server (cmd/webhook of github.com/harvester/harvester, the
// version in go.mod) and its VM and VMI controllers run as processes against the simulated
// Harvester's apiserver, built by hack/ensure-harvester-webhook.sh: every validator and mutator
// Harvester registers (VMs, VMIs, PVCs, images, key pairs, settings, storage classes, nodes,
// namespaces, Secrets, ...) sees what the provider, its guests and the simulator write, as on a
// real Harvester (its configurations are `harvester-validator`, failure policy Fail, and
// `harvester-mutator`, Ignore); the controllers create a VM's PVCs from its volumeClaimTemplates
// annotation, delete its removedPersistentVolumeClaims with it, store its run strategy, copy its
// labels to its VMI and record its MAC addresses.
const (
	harvesterNamespace      = "harvester-system"
	harvesterWebhookService = "harvester-webhook"
	// HarvesterValidator and HarvesterMutator are the webhook configurations Harvester's webhook
	// server registers (pkg/webhook/types.go).
	HarvesterValidator = "harvester-validator"
	HarvesterMutator   = "harvester-mutator"
	// kubeVirtName is the KubeVirt custom resource Harvester installs (in harvester-system); the
	// VM mutator reads its default architecture.
	kubeVirtName = "kubevirt"
)

// HarvesterWebhookDir is where hack/ensure-harvester-webhook.sh put Harvester's webhook server
// and the CRDs it watches: $HARVESTER_WEBHOOK_DIR when set (make test sets it), else the script
// is run, which builds it once into bin/.
func HarvesterWebhookDir() (string, error) {
	return testenv.BuiltDir("HARVESTER_WEBHOOK_DIR", "ensure-harvester-webhook.sh")
}

// startHarvesterWebhook runs Harvester's webhook server and waits until it has registered its
// configurations (it does so only after every informer it starts has synced).
func (h *Harvester) startHarvesterWebhook(ctx context.Context) error {
	dir, err := HarvesterWebhookDir()
	if err != nil {
		return err
	}
	p, err := newProcesses("Harvester's webhook server", "harvester-webhook-")
	if err != nil {
		return err
	}
	h.webhook = p
	if err := h.seedKubeVirt(ctx); err != nil {
		return err
	}
	// The server reads its client's CA and bearer token from files (its Upgrade validator calls
	// the apiserver itself with them), so its kubeconfig names both by path; the apiserver
	// authenticates the client certificate first, so the token is never checked.
	caPath, err := p.writeFile("ca.crt", h.Env.Config.CAData)
	if err != nil {
		return err
	}
	tokenPath, err := p.writeFile("token", []byte("unused-by-the-bed"))
	if err != nil {
		return err
	}
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"harvester": {Server: h.Env.Config.Host, CertificateAuthority: caPath}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"admin": {
			ClientCertificateData: h.Env.Config.CertData, ClientKeyData: h.Env.Config.KeyData, TokenFile: tokenPath,
		}},
		Contexts:       map[string]*clientcmdapi.Context{"harvester": {Cluster: "harvester", AuthInfo: "admin"}},
		CurrentContext: "harvester",
	})
	if err != nil {
		return err
	}
	kubeconfigPath, err := p.writeFile("kubeconfig", kubeconfig)
	if err != nil {
		return err
	}
	port, err := testenv.FreeLoopbackPort()
	if err != nil {
		return err
	}
	caPEM, err := h.seedWebhookCertificates(ctx, harvesterNamespace, harvesterWebhookService, "harvester-webhook-ca", "harvester-webhook-tls")
	if err != nil {
		return err
	}
	if err := p.start(ctx, "webhook", filepath.Join(dir, "webhook"), []string{"--profile-listen-address="}, []string{
		"KUBECONFIG=" + kubeconfigPath,
		"NAMESPACE=" + harvesterNamespace,
		fmt.Sprintf("HARVESTER_WEBHOOK_SERVER_HTTPS_PORT=%d", port),
		fmt.Sprintf("HARVESTER_WEBHOOK_URL=https://127.0.0.1:%d", port),
		"HARVESTER_WEBHOOK_SETTLE=0s",
	}); err != nil {
		return err
	}
	if err := p.waitForWebhook(ctx, h.Env.Client, "webhook", port, caPEM, 3*time.Minute,
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: HarvesterValidator}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: HarvesterMutator}}); err != nil {
		return err
	}
	// Harvester's VM and VMI controllers (pkg/controller/master/virtualmachine), which Harvester
	// runs inside its server: the bed's build runs them alone.
	return p.start(ctx, "vmcontroller", filepath.Join(dir, "vmcontroller"), nil, []string{
		"KUBECONFIG=" + kubeconfigPath, "NAMESPACE=" + harvesterNamespace,
	})
}

// seedKubeVirt creates the KubeVirt custom resource Harvester's installation has, deployed, on
// x86-64 hosts, configured as Harvester's chart configures it (Harvester's VM mutator refuses VMs
// while overcommit-config is set and it is missing; KubeVirt's admission reads its configuration).
func (h *Harvester) seedKubeVirt(ctx context.Context) error {
	if err := createIfMissing(ctx, h.Env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harvesterNamespace}}); err != nil {
		return err
	}
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	kv.SetNamespace(harvesterNamespace)
	kv.SetName(kubeVirtName)
	// The configuration Harvester's chart gives KubeVirt (deploy/charts/harvester/values.yaml):
	// KubeVirt's admission (kubevirt.go) validates VMs against it.
	kv.Object["spec"] = map[string]any{
		"certificateRotateStrategy": map[string]any{},
		// KubeVirt's workload updater live-migrates a VMI for a CPU or memory hotplug only
		// with this method.
		"workloadUpdateStrategy": map[string]any{"workloadUpdateMethods": []any{"LiveMigrate"}},
		"configuration": map[string]any{
			"vmStateStorageClass":    VMStateStorageClass,
			"developerConfiguration": map[string]any{"featureGates": anySlice(HarvesterKubeVirtFeatureGates)},
			"vmRolloutStrategy":      "LiveUpdate",
			"network": map[string]any{
				"defaultNetworkInterface":           "bridge",
				"permitSlirpInterface":              true,
				"permitBridgeInterfaceOnPodNetwork": true,
				"binding":                           map[string]any{"managedtap": map[string]any{"domainAttachmentType": "managedTap"}},
			},
		},
	}
	if err := createIfMissing(ctx, h.Env.Client, kv); err != nil {
		return err
	}
	return h.Env.Client.Status().Patch(ctx, kv, client.RawPatch(types.MergePatchType,
		[]byte(`{"status":{"phase":"Deployed","defaultArchitecture":"amd64"}}`)))
}

// anySlice is a []string as unstructured content holds it.
func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
