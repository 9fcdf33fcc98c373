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

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	harvestercloud "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates/addons"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// runCCM measures P4: one guest cluster whose cloud provider (our cloudprovider package,
// in-process, with the guest's own Harvester credential and the CCM's guest RBAC) serves
// LoadBalancer Services through k8s.io/cloud-provider's service controller. For each Service it
// takes the time from the moment Harvester's load balancer has its address (the simulator's
// watch) to the moment the guest Service's status has it; the baseline is a bare client's watch
// of the same load balancers on Harvester.
func runCCM(ctx context.Context, tb *bed.Bed, kubeconfig []byte, s settings, services int) (*Latency, error) {
	// The cloud provider and the service controller log through klog; the figures are the output.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	mgr, err := startManager(ctx, tb, managerScope{}, s)
	if err != nil {
		return nil, err
	}
	defer func() { _ = mgr.Stop() }()
	ns, name := "ccm-0", "bench"
	if err := createCluster(ctx, tb, kubeconfig, ns, name, nil); err != nil {
		return nil, err
	}
	defer func() {
		// Deleting the Cluster deletes the load balancers the cloud provider left, too.
		_ = tb.Management.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		_ = waitDeleted(ctx, tb)
	}()
	g, err := tb.AddGuest(ctx, ns, name, false)
	if err != nil {
		return nil, err
	}
	clusterName, err := guestClusterID(ctx, tb, ns, name)
	if err != nil {
		return nil, err
	}
	cloud, err := guestCloud(ctx, tb, ns, name, clusterName)
	if err != nil {
		return nil, err
	}
	ccmClient, err := ccmGuestClient(ctx, g.Env.Client, g.Env.Config, clusterName)
	if err != nil {
		return nil, err
	}
	ccmCtx, stopCCM := context.WithCancel(ctx)
	defer stopCCM()
	if err := cloud.StartLoadBalancers(ccmCtx, ccmClient); err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(ccmClient, 0)
	controller, err := servicecontroller.New(cloud, ccmClient, factory.Core().V1().Services(), factory.Core().V1().Nodes(), clusterName, utilfeature.DefaultFeatureGate)
	if err != nil {
		return nil, err
	}
	factory.Start(ccmCtx.Done())
	// The workers the CCM ships with (its addon's --concurrent-service-syncs).
	workers, err := testenv.CCMServiceWorkers()
	if err != nil {
		return nil, err
	}
	go controller.Run(ccmCtx, workers, controllersmetrics.NewControllerManagerMetrics("bench-service-controller"))

	// Stamps: Harvester LB has its address (simulator's view), the bare client sees it, and the
	// guest Service's status has it; all keyed by the Service's name.
	allocated, bareSeen, inStatus := newStamps(), newStamps(), newStamps()
	lbAddressed := func(stamp *stamps) func(any) {
		return func(obj any) {
			if lb, ok := obj.(*lbv1.LoadBalancer); ok && lb.DeletionTimestamp == nil && guestcloud.ServiceLoadBalancerAddress(lb) != "" {
				if svc := lb.Labels[guestcloud.LabelLBServiceName]; svc != "" {
					stamp.mark(svc)
				}
			}
		}
	}
	if err := addHandler(ctx, tb.Harvester.Env.Manager.GetCache(), &lbv1.LoadBalancer{}, lbAddressed(allocated)); err != nil {
		return nil, err
	}
	bare, err := bareCache(ctx, kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := addHandler(ctx, bare, &lbv1.LoadBalancer{}, lbAddressed(bareSeen)); err != nil {
		return nil, err
	}
	bareCtx, stopBare := context.WithCancel(ctx)
	defer stopBare()
	go func() { _ = bare.Start(bareCtx) }()
	guestServices := informers.NewSharedInformerFactory(kubernetes.NewForConfigOrDie(g.Env.Config), 0)
	if _, err := guestServices.Core().V1().Services().Informer().AddEventHandler(onAddUpdate(func(obj any) {
		if svc, ok := obj.(*corev1.Service); ok && len(svc.Status.LoadBalancer.Ingress) > 0 && svc.Status.LoadBalancer.Ingress[0].IP != "" {
			inStatus.mark(svc.Name)
		}
	})); err != nil {
		return nil, err
	}
	guestServices.Start(bareCtx.Done())
	if !bare.WaitForCacheSync(ctx) {
		return nil, errors.New("the bare client's load balancer cache did not sync")
	}

	names := make([]string, services)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%03d", i)
	}
	if err := forEach(ctx, names, s.concurrency, func(ctx context.Context, n string) error {
		return g.Env.Client.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: n},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		})
	}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "every guest Service's status to have its address", func() bool {
		return inStatus.count() == services && bareSeen.count() == services
	}); err != nil {
		return nil, err
	}
	var provider, baseline []time.Duration
	for _, n := range names {
		a, ok := allocated.get(n)
		if !ok {
			continue
		}
		st, _ := inStatus.get(n)
		seen, _ := bareSeen.get(n)
		provider = append(provider, max(0, st.Sub(a)))
		baseline = append(baseline, max(0, seen.Sub(a)))
	}
	stopCCM()
	return &Latency{
		What:     "Harvester load balancer has its address -> guest Service's status has it (baseline: -> a bare client's watch of Harvester has it)",
		Provider: percentiles(provider), Baseline: ptr.To(percentiles(baseline)),
	}, nil
}

func newStamps() *stamps { return &stamps{at: map[string]time.Time{}} }

func addHandler(ctx context.Context, c cache.Cache, obj client.Object, on func(any)) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(onAddUpdate(on))
	return err
}

// bareCache is a plain cache of the target namespace with the provider's Harvester identity and
// the bare client's User-Agent.
func bareCache(_ context.Context, kubeconfig []byte) (cache.Cache, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = bareAgent
	scheme, err := guestcloud.NewScheme()
	if err != nil {
		return nil, err
	}
	return cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{targetNamespace: {}}})
}

// guestCloud builds the cloud provider from the cloud-config the provider made for the guest,
// with its token in a file, as the CCM reads it in the guest.
func guestCloud(ctx context.Context, tb *bed.Bed, ns, name, clusterName string) (*harvestercloud.Cloud, error) {
	secret := &corev1.Secret{}
	if err := waitFor(ctx, "the guest's cloud-config", func() bool {
		return tb.Management.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controllers.CloudConfigSecretName(name)}, secret) == nil
	}); err != nil {
		return nil, err
	}
	guestSecret := &corev1.Secret{}
	if err := yaml.Unmarshal(secret.Data["harvester-cloud-config.yaml"], guestSecret); err != nil {
		return nil, fmt.Errorf("reading the guest's cloud-config Secret: %w", err)
	}
	api, err := clientcmd.Load(guestSecret.Data[harvester.GuestCloudConfigKey])
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-ccm-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, harvester.GuestTokenKey)
	if err := os.WriteFile(file, guestSecret.Data[harvester.GuestTokenKey], 0o600); err != nil {
		return nil, err
	}
	api.AuthInfos[api.Contexts[api.CurrentContext].AuthInfo].TokenFile = file
	patched, err := clientcmd.Write(*api)
	if err != nil {
		return nil, err
	}
	return harvestercloud.New(bytes.NewReader(patched), harvestercloud.Options{ClusterName: clusterName})
}

// ccmGuestClient installs the CCM's ServiceAccount and guest RBAC from templates/addons into the
// guest and returns a client with that ServiceAccount's token.
func ccmGuestClient(ctx context.Context, admin client.Client, cfg *rest.Config, clusterName string) (kubernetes.Interface, error) {
	manifest, err := addons.Render(addons.CCM, map[string]string{"CLUSTER_NAME": clusterName, "CCM_IMAGE": "ccm:bench"})
	if err != nil {
		return nil, err
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			break
		}
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := client.IgnoreAlreadyExists(admin.Create(ctx, obj)); err != nil {
				return nil, err
			}
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	token, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, "harvester-cloud-controller-manager",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	ccm := rest.AnonymousClientConfig(cfg)
	ccm.BearerToken = token.Status.Token
	return kubernetes.NewForConfig(ccm)
}

// guestClusterID waits for the HarvesterCluster ns/name to record its owner mark, and returns
// its guest cluster's ID (the CCM's --cluster-name).
func guestClusterID(ctx context.Context, tb *bed.Bed, ns, name string) (string, error) {
	var id string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		hc := &infrav1.HarvesterCluster{}
		if err := tb.Management.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		g, ok := naming.GuestOf(hc, name)
		id = g.ID()
		return ok, nil
	})
	return id, err
}
