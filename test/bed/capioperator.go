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

package bed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// OperatorGroupVersion is the Cluster API Operator's API.
const OperatorGroupVersion = "operator.cluster.x-k8s.io/v1alpha2"

// OperatorLabels are the labels the Cluster API Operator reads on a ConfigMap that holds a
// provider's release (fetchConfig.selector): the provider's name and type are the ones its docs
// give; the version label is what it installs from the ConfigMap.
func OperatorLabels(name, providerType, version string) map[string]string {
	return map[string]string{
		"provider.cluster.x-k8s.io/name":    name,
		"provider.cluster.x-k8s.io/type":    providerType,
		"provider.cluster.x-k8s.io/version": version,
	}
}

// CAPIOperator is the Cluster API Operator (the program Rancher Turtles compiles in to install
// providers) run as its own process against a management cluster.
type CAPIOperator struct {
	LogFile string

	mgmt    client.Client
	process *process
	workDir string
}

// CAPIOperatorDir is where hack/ensure-capi-operator.sh put the operator's binary (`manager`) and
// CRDs (`crd/`): $CAPI_OPERATOR_DIR when set (make test sets it), else the script builds them.
func CAPIOperatorDir() (string, error) {
	return testenv.BuiltDir("CAPI_OPERATOR_DIR", "ensure-capi-operator.sh")
}

// StartCAPIOperator installs the operator's CRDs into the management cluster, runs the operator
// as a process (until the management cluster stops) and records the management cluster's Cluster
// API core, which runs in-process, as the operator's CoreProvider `cluster-api` at the version
// the bed runs: Rancher Turtles' chart installs that CoreProvider, and the operator installs no
// other provider before it is Ready. Its components are one Deployment standing for the core's
// manager, which the bed marks Available as the Deployment controller would.
//
// The operator's webhooks only default two namespaces (the tests set them) and are not
// registered; the operator still serves them, with a certificate of the bed's.
func (m *Management) StartCAPIOperator(ctx context.Context) (*CAPIOperator, error) {
	dir, err := CAPIOperatorDir()
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(m.Env.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "crd")}, ErrorIfPathMissing: true, MaxTime: testenv.InstallWait,
	}); err != nil {
		return nil, fmt.Errorf("installing the Cluster API Operator's CRDs: %w", err)
	}
	work, err := os.MkdirTemp("", "capi-operator-")
	if err != nil {
		return nil, err
	}
	o := &CAPIOperator{mgmt: m.Env.Client, workDir: work, LogFile: filepath.Join(work, "operator.log")}
	if err := o.start(ctx, m.Env, filepath.Join(dir, "manager")); err != nil {
		return nil, errors.Join(err, o.Stop())
	}
	m.capiMu.Lock()
	m.operator = o
	m.capiMu.Unlock()
	if err := o.recordCore(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *CAPIOperator) start(ctx context.Context, env *testenv.Environment, binary string) error {
	kubeconfig, err := env.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath := filepath.Join(o.workDir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	ports, err := testenv.FreeLoopbackPorts(2)
	if err != nil {
		return err
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[0])
	certDir := filepath.Join(o.workDir, "serving-certs")
	if _, err := writeServingCertificate(certDir, []string{"localhost"}, net.ParseIP("127.0.0.1")); err != nil {
		return err
	}
	home := filepath.Join(o.workDir, "home") // clusterctl's library reads (and makes) its config there
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd := testenv.ProtectedCommand(context.WithoutCancel(ctx), binary,
		"--kubeconfig="+kubeconfigPath,
		"--health-addr="+health,
		"--diagnostics-address=0", // no metrics server
		"--profiler-address=",
		fmt.Sprintf("--webhook-port=%d", ports[1]),
		"--webhook-cert-dir="+certDir,
		"--watch-configmap=true",
		"--watch-configsecret=true",
	)
	cmd.Dir = o.workDir
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	o.process, err = startProcess(ctx, "Cluster API Operator", cmd, o.LogFile, time.Minute, httpReady("http://"+health+"/readyz"))
	return err
}

// recordCore creates the CoreProvider for the in-process Cluster API core, from a ConfigMap
// holding the core's metadata.yaml (from the cluster-api module the bed runs) and a Deployment
// standing for its manager, and waits until the operator has it Ready.
func (o *CAPIOperator) recordCore(ctx context.Context) error {
	capi, err := testenv.ModuleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return err
	}
	metadata, err := os.ReadFile(filepath.Join(capi, "metadata.yaml"))
	if err != nil {
		return err
	}
	const namespace, deployment = "capi-system", "capi-controller-manager"
	components := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
  annotations:
    capi-harvester.bed/stands-for: Cluster API's core, which the bed runs in-process
spec:
  replicas: 1
  selector:
    matchLabels: {control-plane: controller-manager}
  template:
    metadata:
      labels: {control-plane: controller-manager}
    spec:
      containers:
      - name: manager
        image: registry.k8s.io/cluster-api/cluster-api-controller:%s
`, deployment, namespace, inventoryVersion)
	if err := apply(ctx, o.mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	if err := apply(ctx, o.mgmt, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cluster-api-" + inventoryVersion,
			Labels: OperatorLabels("cluster-api", "core", inventoryVersion)},
		Data: map[string]string{"metadata": string(metadata), "components": components},
	}); err != nil {
		return err
	}
	core := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": OperatorGroupVersion, "kind": "CoreProvider",
		"metadata": map[string]any{"namespace": namespace, "name": "cluster-api"},
		"spec": map[string]any{
			"version": inventoryVersion,
			"fetchConfig": map[string]any{"selector": map[string]any{
				"matchLabels": map[string]any{"provider.cluster.x-k8s.io/version": inventoryVersion},
			}},
		},
	}}
	if err := apply(ctx, o.mgmt, core); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := MarkDeploymentAvailable(ctx, o.mgmt, namespace, deployment)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("waiting for the operator to install the core's Deployment (log: %s): %w", o.LogFile, err)
	}
	if err := WaitOperatorProviderReady(ctx, o.mgmt, "CoreProvider", namespace, "cluster-api", inventoryVersion); err != nil {
		return fmt.Errorf("%w (log: %s)", err, o.LogFile)
	}
	return nil
}

// MarkDeploymentAvailable sets a Deployment's Available condition, as the Deployment controller
// does once the pods the bed plays are ready. It sets no replica counts: clusterctl's upgrade
// waits for status.replicas to drop to 0 after scaling a Deployment down.
func MarkDeploymentAvailable(ctx context.Context, c client.Client, namespace, name string) error {
	patch := []byte(fmt.Sprintf(`{"status":{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"the test bed runs the manager","lastTransitionTime":%q,"lastUpdateTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339)))
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	d.SetNamespace(namespace)
	d.SetName(name)
	return c.Status().Patch(ctx, d, client.RawPatch("application/merge-patch+json", patch))
}

// WaitOperatorProviderReady waits until an operator provider object reports Ready with version
// installed.
func WaitOperatorProviderReady(ctx context.Context, c client.Client, kind, namespace, name, version string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion(OperatorGroupVersion)
		p.SetKind(kind)
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		installed, _, _ := unstructured.NestedString(p.Object, "status", "installedVersion")
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		last = fmt.Sprintf("installedVersion %q, conditions %v", installed, conds)
		if installed != version {
			return false, nil
		}
		for _, cond := range conds {
			if c, ok := cond.(map[string]any); ok && c["type"] == "Ready" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s %s/%s to be Ready at %s: %w; last seen: %s", kind, namespace, name, version, err, last)
	}
	return nil
}

// Log returns the operator's output so far.
func (o *CAPIOperator) Log() ([]byte, error) { return os.ReadFile(o.LogFile) }

// Stop ends the operator (SIGTERM, SIGKILL after 10 s) and removes its files.
func (o *CAPIOperator) Stop() error {
	o.process.stop()
	return os.RemoveAll(o.workDir)
}
