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
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// KubeVirt's own admission (the validators and mutators virt-api serves, of the KubeVirt version
// Harvester's go.mod names) runs as a process against every simulated Harvester's apiserver,
// built by hack/ensure-kubevirt.sh and registered with the webhook configurations KubeVirt's
// operator generates (`virt-api-validator`, `virt-api-mutator`, failure policy Fail): every VM,
// VMI and migration the provider, a test or the simulator writes is defaulted and validated by
// KubeVirt's code, against the KubeVirt custom resource Harvester installs (seedKubeVirt).
const (
	// KubeVirtValidator and KubeVirtMutator are the webhook configurations KubeVirt's operator
	// creates for virt-api.
	KubeVirtValidator = "virt-api-validator"
	KubeVirtMutator   = "virt-api-mutator"
	// kubeVirtControllerUser is the service account KubeVirt's controllers run as in Harvester's
	// namespace. KubeVirt's admission lets only KubeVirt's own service accounts change a VMI's
	// spec, status or kubevirt.io labels, so virt-controller, and the simulator, which plays
	// virt-handler, write KubeVirt's kinds as it.
	kubeVirtControllerUser = "system:serviceaccount:" + harvesterNamespace + ":kubevirt-controller"
	// kubeVirtAPIUser is virt-api's service account, which its admission runs as.
	kubeVirtAPIUser = "system:serviceaccount:" + harvesterNamespace + ":kubevirt-apiserver"
)

// kubeVirtGroups are the groups KubeVirt's impersonated accounts have: a service account's, and
// the admin's rights (the bed runs no RBAC for them).
var kubeVirtGroups = []string{"system:masters", "system:serviceaccounts", "system:authenticated"}

// HarvesterKubeVirtFeatureGates are the KubeVirt feature gates Harvester's chart turns on
// (deploy/charts/harvester/values.yaml); seedKubeVirt sets them.
var HarvesterKubeVirtFeatureGates = []string{"CPUManager", "DeclarativeHotplugVolumes", "ExpandDisks", "EnableVirtioFsConfigVolumes", "HostDevices"}

// SetKubeVirtFeatureGates sets the feature gates of Harvester's KubeVirt custom resource, as an
// administrator can. KubeVirt's admission reads the change through its informer, a moment later.
func (h *Harvester) SetKubeVirtFeatureGates(ctx context.Context, gates []string) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"configuration": map[string]any{
		"developerConfiguration": map[string]any{"featureGates": gates}}}})
	if err != nil {
		return err
	}
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	kv.SetNamespace(harvesterNamespace)
	kv.SetName(kubeVirtName)
	return h.Env.Client.Patch(ctx, kv, client.RawPatch(types.MergePatchType, patch))
}

// KubeVirtDir is where hack/ensure-kubevirt.sh put KubeVirt's admission program and CRDs:
// $KUBEVIRT_DIR when set (make test sets it), else the script is run, which builds them once into
// bin/.
func KubeVirtDir() (string, error) {
	return testenv.BuiltDir("KUBEVIRT_DIR", "ensure-kubevirt.sh")
}

// startKubeVirtAdmission runs KubeVirt's admission and waits until it has registered its webhook
// configurations and serves them.
func (h *Harvester) startKubeVirtAdmission(ctx context.Context) error {
	dir, err := KubeVirtDir()
	if err != nil {
		return err
	}
	p, err := newProcesses("KubeVirt's admission", "kubevirt-")
	if err != nil {
		return err
	}
	h.kubevirt = p
	// As virt-api's own service account: KubeVirt's VMI mutator reverts status changes by any
	// other (the eviction admitter marks VMIs for evacuation in their status).
	kubeconfig, err := h.kubeconfigAs(kubeVirtAPIUser)
	if err != nil {
		return err
	}
	kubeconfigPath, err := p.writeFile("kubeconfig", kubeconfig)
	if err != nil {
		return err
	}
	cert, err := testenv.NewServingCertificate("virt-api", []string{"virt-api." + harvesterNamespace + ".svc"}, net.ParseIP("127.0.0.1"))
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": cert.CA, "tls.crt": cert.Cert, "tls.key": cert.Key}
	paths := map[string]string{}
	for name, data := range files {
		if paths[name], err = p.writeFile(name, data); err != nil {
			return err
		}
	}
	port, err := testenv.FreeLoopbackPort()
	if err != nil {
		return err
	}
	if err := p.start(ctx, "virt-api-admission", filepath.Join(dir, "virt-api-admission"), []string{
		"--kubeconfig", kubeconfigPath, "--namespace", harvesterNamespace, "--port", fmt.Sprint(port),
		"--tls-cert-file", paths["tls.crt"], "--tls-key-file", paths["tls.key"], "--ca-file", paths["ca.crt"],
	}, nil); err != nil {
		return err
	}
	return p.waitForWebhook(ctx, h.Env.Client, "virt-api-admission", port, cert.CA, 2*time.Minute,
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: KubeVirtValidator}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: KubeVirtMutator}})
}

// kubeVirtClient returns a client that writes as KubeVirt's controllers and reads through the
// simulator's cache.
func (h *Harvester) kubeVirtClient() (client.Client, error) {
	cfg := rest.CopyConfig(h.Env.Manager.GetConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: kubeVirtControllerUser, Groups: kubeVirtGroups}
	return client.New(cfg, client.Options{Scheme: h.Env.Manager.GetScheme(), Cache: &client.CacheOptions{Reader: h.Env.Manager.GetCache()}})
}
