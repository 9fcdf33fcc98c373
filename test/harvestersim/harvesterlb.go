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
	return testenv.BuiltDir("HARVESTER_LB_DIR", "ensure-harvester-lb.sh")
}

// startLoadBalancer runs the webhook (and waits until the apiserver calls it), then the controller.
func (h *Harvester) startLoadBalancer(ctx context.Context) error {
	dir, err := LoadBalancerDir()
	if err != nil {
		return err
	}
	p, err := newProcesses("Harvester's load balancer", "harvester-lb-")
	if err != nil {
		return err
	}
	h.lb = p
	kubeconfig, err := h.Env.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath, err := p.writeFile("kubeconfig", kubeconfig)
	if err != nil {
		return err
	}
	if err := createIfMissing(ctx, h.Env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lbSystemNamespace}}); err != nil {
		return err
	}
	port, err := testenv.FreeLoopbackPort()
	if err != nil {
		return err
	}
	caPEM, err := h.seedWebhookCertificates(ctx, lbSystemNamespace, lbWebhookName, lbWebhookName+"-ca", lbWebhookName+"-tls")
	if err != nil {
		return err
	}
	base := []string{"KUBECONFIG=" + kubeconfigPath, "NAMESPACE=" + lbSystemNamespace}
	if err := p.start(ctx, "webhook", filepath.Join(dir, "webhook"), nil, append(base,
		fmt.Sprintf("WEBHOOK_SERVER_HTTPS_PORT=%d", port),
		fmt.Sprintf("HARVESTER_WEBHOOK_URL=https://127.0.0.1:%d", port),
		"HARVESTER_WEBHOOK_SETTLE=0s")); err != nil {
		return err
	}
	if err := p.waitForWebhook(ctx, h.Env.Client, "webhook", port, caPEM, 2*time.Minute,
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: lbWebhookName}},
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: lbWebhookName}}); err != nil {
		return err
	}
	return p.start(ctx, "controller", filepath.Join(dir, "controller"), nil, base)
}
