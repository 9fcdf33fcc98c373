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
	"path/filepath"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// Kubernetes' own token controller (kube-controller-manager's serviceaccount-token-controller,
// built with kube-apiserver by hack/ensure-control-plane.sh) runs against every simulated
// Harvester, as Harvester's RKE2 runs it: a `kubernetes.io/service-account-token` Secret gets
// its token (signed with the apiserver's service-account key, so the apiserver accepts it), the
// CA and the namespace. Only that controller: Harvester's others are simulated (harvester.go).
func (h *Harvester) startTokenController(ctx context.Context) error {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return err
	}
	p, err := newProcesses("Kubernetes' token controller", "harvester-kcm-")
	if err != nil {
		return err
	}
	h.kcm = p
	kubeconfig, err := h.Env.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfigPath, err := p.writeFile("admin.kubeconfig", kubeconfig)
	if err != nil {
		return err
	}
	caPath, err := p.writeFile("ca.crt", h.Env.Config.CAData)
	if err != nil {
		return err
	}
	return p.start(ctx, "kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), []string{
		"--kubeconfig=" + kubeconfigPath,
		"--leader-elect=false", "--secure-port=0",
		"--controllers=serviceaccount-token-controller",
		"--service-account-private-key-file=" + h.Env.ServiceAccountSigningKeyFile(),
		"--root-ca-file=" + caPath,
	}, nil)
}
