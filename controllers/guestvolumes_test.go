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
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

func TestGuestVolumeHandles(t *testing.T) {
	pv := func(name, driver, handle string, policy corev1.PersistentVolumeReclaimPolicy) corev1.PersistentVolume {
		p := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.PersistentVolumeReclaimPolicy = policy
		if driver != "" {
			p.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}
		} else {
			p.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data"}
		}
		return p
	}
	got := GuestVolumeHandles([]corev1.PersistentVolume{
		pv("b", CSIDriverName, "pvc-b", corev1.PersistentVolumeReclaimDelete),
		pv("a", CSIDriverName, "pvc-a", corev1.PersistentVolumeReclaimDelete),
		pv("a2", CSIDriverName, "pvc-a", corev1.PersistentVolumeReclaimDelete), // two PVs, one volume
		pv("kept", CSIDriverName, "pvc-kept", corev1.PersistentVolumeReclaimRetain),
		pv("other", "ebs.csi.aws.com", "vol-1", corev1.PersistentVolumeReclaimDelete),
		pv("host", "", "", corev1.PersistentVolumeReclaimDelete),
		pv("empty", CSIDriverName, "", corev1.PersistentVolumeReclaimDelete),
	})
	want := []string{"pvc-a", "pvc-b"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("GuestVolumeHandles = %v, want %v", got, want)
	}
}

// An externally managed HarvesterCluster is not the provider's to write (CAPI's contract): the
// guest-volume reconciler leaves it as it is, and does not reach for its guest.
func TestGuestVolumesLeaveAnExternallyManagedClusterAlone(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	hc := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "7",
		Annotations:     map[string]string{clusterv1.ManagedByAnnotation: "someone-else"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c", UID: "u"}}}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(hc, cluster).WithStatusSubresource(hc).Build()
	// No ClusterCache: reaching for the guest would panic.
	r := &GuestVolumeReconciler{Client: c}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hc)}); err != nil {
		t.Fatal(err)
	}
	after := &infrav1.HarvesterCluster{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(hc), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != hc.ResourceVersion {
		t.Fatalf("the externally managed cluster was written: %+v", after)
	}
}

// Deletion reads the guest's volumes from the annotation that clusterctl move carries, and from
// status, which a cluster of an earlier version has alone.
func TestRecordedGuestVolumesSurviveAMove(t *testing.T) {
	moved := &infrav1.HarvesterCluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{infrav1.GuestVolumesAnnotation: "pvc-b,pvc-a"}}}
	if got := recordedGuestVolumes(moved); !slices.Equal(got, []string{"pvc-a", "pvc-b"}) {
		t.Fatalf("after a move: %v", got)
	}
	older := &infrav1.HarvesterCluster{Status: infrav1.HarvesterClusterStatus{GuestVolumes: []string{"pvc-a"}}}
	older.Annotations = map[string]string{infrav1.GuestVolumesAnnotation: ""}
	if got := recordedGuestVolumes(older); !slices.Equal(got, []string{"pvc-a"}) {
		t.Fatalf("status only: %v", got)
	}
}
