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

package cloudprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
)

// SyncTopology watches the guest's VMIs on Harvester and keeps the zone and region labels of
// their Nodes equal to the topology Harvester keeps on the VMIs: the cloud node controller sets
// them once, at registration, and after a live migration to a host in another zone they would
// go stale. It runs until ctx ends.
func (c *Cloud) SyncTopology(ctx context.Context, guest kubernetes.Interface) error {
	vmis, err := cache.New(c.config, cache.Options{
		Scheme:            c.client.Scheme(),
		DefaultNamespaces: map[string]cache.Config{c.namespace: {}},
	})
	if err != nil {
		return fmt.Errorf("creating the VMI cache: %w", err)
	}
	informer, err := vmis.GetInformer(ctx, &kubevirtv1.VirtualMachineInstance{})
	if err != nil {
		return err
	}
	sync := func(obj any) {
		if vmi, ok := obj.(*kubevirtv1.VirtualMachineInstance); ok {
			if err := syncNodeTopology(ctx, guest, vmi); err != nil {
				klog.ErrorS(err, "syncing node topology", "vmi", klog.KObj(vmi))
			}
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
	}); err != nil {
		return err
	}
	// A Node that registers after its VMI runs (the usual order) is synced when it appears.
	nodes := informers.NewSharedInformerFactory(guest, 0)
	if _, err := nodes.Core().V1().Nodes().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			node, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := vmis.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: node.Name}, vmi); err == nil {
				sync(vmi)
			}
		},
	}); err != nil {
		return err
	}
	nodes.Start(ctx.Done())
	return vmis.Start(ctx)
}

// syncNodeTopology patches the zone and region labels of a VMI's Node, found by name (the VM's
// hostname) and confirmed by providerID when the Node has one.
func syncNodeTopology(ctx context.Context, guest kubernetes.Interface, vmi *kubevirtv1.VirtualMachineInstance) error {
	name := vmi.Spec.Hostname
	if name == "" {
		name = vmi.Name
	}
	node, err := guest.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if uid, ok := strings.CutPrefix(node.Spec.ProviderID, guestcloud.ProviderIDPrefix); ok && !ownedBy(vmi, uid) {
		return nil // a Node of the same name, but another VM's
	}
	changes := map[string]any{}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion} {
		want, known := vmi.Annotations[key]
		if known && node.Labels[key] != want {
			changes[key] = want
		}
	}
	if len(changes) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": changes}})
	if err != nil {
		return err
	}
	_, err = guest.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return client.IgnoreNotFound(err)
}

func ownedBy(vmi *kubevirtv1.VirtualMachineInstance, vmUID string) bool {
	for _, ref := range vmi.OwnerReferences {
		if ref.Kind == "VirtualMachine" && string(ref.UID) == vmUID {
			return true
		}
	}
	return false
}
