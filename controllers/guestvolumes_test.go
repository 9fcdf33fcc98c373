package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
