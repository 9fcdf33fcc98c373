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

package controllers

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// Without our cloud controller manager the templates' kubelets still run with
// --cloud-provider=external (CAPI matches Nodes to Machines by the providerID a cloud
// controller sets): AddonsReady says that another one must be installed, with or without CSI.
func TestAddonsSayWhatAGuestWithoutOurCCMNeeds(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, csi := range []bool{true, false} {
		hc := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"},
			Spec: infrav1.HarvesterClusterSpec{Addons: infrav1.AddonsSpec{CloudProvider: ptr.To(false), CSI: ptr.To(csi)}}}
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Labels: map[string]string{infrav1.AddonsLabel: "c"}}}
		r := &HarvesterClusterReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(hc, cluster).Build()}
		s := &clusterScope{cluster: cluster, hc: hc, guest: naming.Guest{Namespace: "ns", Name: "c"}}
		if err := r.reconcileAddons(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		c := conditions.Get(hc, infrav1.AddonsReadyCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Message == "" {
			t.Fatalf("csi %v: AddonsReady %+v", csi, c)
		}
		for _, want := range []string{"spec.addons.cloudProvider is false", "providerID", "harvester://<VM UID>"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("csi %v: AddonsReady's message %q does not say %q", csi, c.Message, want)
			}
		}
	}
}
