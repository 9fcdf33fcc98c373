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

package config

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates/addons"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/images"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The images `make images` writes, by archive name: their entrypoint and the program name
// --version prints.
var releaseImages = map[string]struct{ entrypoint, program string }{
	"manager.oci.tar": {"/manager", "cluster-api-provider-harvester"},
	"ccm.oci.tar":     {"/harvester-cloud-controller-manager", "harvester-cloud-controller-manager"},
}

// Shells and the multi-call binaries that carry one: none belongs in the images.
var shells = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true, "zsh": true, "ksh": true,
	"mksh": true, "csh": true, "tcsh": true, "fish": true, "busybox": true, "toybox": true}

// builtImagesDir is where the images are: IMAGES_DIR when `make test` built them first,
// else a temporary directory this test builds them into with `make images`.
func builtImagesDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("IMAGES_DIR"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "images", "IMAGES_DIR="+dir)
	cmd.Dir = testenv.RepoRoot()
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make images: %v\n%s", err, out)
	}
	t.Logf("make images took %s", time.Since(start).Round(time.Second))
	return dir
}

// imageUser is an image's user, resolved through its /etc/passwd and /etc/group.
type imageUser struct{ uid, gid int64 }

// Each image runs its entrypoint as a non-root user of its passwd, has no shell, and its
// binary starts and prints the image's version; the release's components run those images
// with a security context that agrees with the images' user.
func TestReleaseImages(t *testing.T) {
	dir := builtImagesDir(t)
	refs := map[string]string{}
	users := map[string]imageUser{}
	for archive, want := range releaseImages {
		t.Run(archive, func(t *testing.T) {
			g := NewWithT(t)
			img, err := images.Open(filepath.Join(dir, archive))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(img.RefName).NotTo(BeEmpty(), "index.json names the image")
			refs[archive] = img.RefName
			cfg, err := img.Config()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Entrypoint).To(Equal([]string{want.entrypoint}))
			g.Expect(cfg.Cmd).To(BeEmpty())
			version := cfg.Labels["org.opencontainers.image.version"]
			g.Expect(version).To(MatchRegexp(`^v\d+\.\d+\.\d+`))
			g.Expect(cfg.Labels).To(HaveKeyWithValue("org.opencontainers.image.source", "https://github.com/seed-0a7eb009/cluster-api-provider-harvester"))
			g.Expect(cfg.Labels).To(HaveKey("org.opencontainers.image.revision"))

			files, err := img.Files()
			g.Expect(err).NotTo(HaveOccurred())
			var entrypoint *images.File
			for i, f := range files {
				g.Expect(shells[path.Base(f.Path)]).To(BeFalse(), "the image carries a shell: %s", f.Path)
				if f.Path == want.entrypoint {
					entrypoint = &files[i]
				}
			}
			g.Expect(entrypoint).NotTo(BeNil(), "the entrypoint is in the layers")
			g.Expect(entrypoint.Mode.IsRegular()).To(BeTrue())
			g.Expect(entrypoint.Mode.Perm()&0o001).NotTo(BeZero(), "anyone may execute the entrypoint: %s", entrypoint.Mode)

			user := resolveUser(t, img, cfg.User)
			g.Expect(user.uid).NotTo(BeZero(), "the image runs as root (User %q)", cfg.User)
			users[archive] = user

			bin := filepath.Join(t.TempDir(), path.Base(want.entrypoint))
			g.Expect(img.Extract(want.entrypoint, bin)).To(Succeed())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s --version: %s", want.entrypoint, out)
			g.Expect(string(out)).To(Equal(want.program+" "+version+"\n"), "%s --version", want.entrypoint)
		})
	}
	if t.Failed() {
		return
	}

	g := NewWithT(t)
	managerRef, ccmRef := refs["manager.oci.tar"], refs["ccm.oci.tar"]
	assets, err := release.Build(release.Options{Root: testenv.RepoRoot(), Image: managerRef, CCMImage: ccmRef})
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := testenv.DecodeObjects(assets["infrastructure-components.yaml"])
	g.Expect(err).NotTo(HaveOccurred())
	var managers int
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d)).To(Succeed())
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "manager" {
				continue
			}
			managers++
			g.Expect(c.Image).To(Equal(managerRef))
			g.Expect(c.Command).To(Equal([]string{releaseImages["manager.oci.tar"].entrypoint}))
			g.Expect(c.Args).To(ContainElement("--ccm-image=${CAPHV_CCM_IMAGE:=" + ccmRef + "}"))
			expectSecurityContextOfUser(g, d.Spec.Template.Spec.SecurityContext, c.SecurityContext, users["manager.oci.tar"], "the manager Deployment")
		}
	}
	g.Expect(managers).To(Equal(1))

	// The CCM the provider installs into guests runs the CCM image the same way.
	ccm, err := addons.Render(addons.CCM, map[string]string{"CLUSTER_NAME": "c", "CCM_IMAGE": ccmRef})
	g.Expect(err).NotTo(HaveOccurred())
	objs, err = testenv.DecodeObjects([]byte(ccm))
	g.Expect(err).NotTo(HaveOccurred())
	var ccms int
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		var pod struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pod)).To(Succeed())
		for _, c := range pod.Spec.Template.Spec.Containers {
			if c.Image != ccmRef {
				continue
			}
			ccms++
			g.Expect(c.Command).To(Equal([]string{releaseImages["ccm.oci.tar"].entrypoint}))
			expectSecurityContextOfUser(g, pod.Spec.Template.Spec.SecurityContext, c.SecurityContext, users["ccm.oci.tar"], "the guest's CCM "+o.GetKind())
		}
	}
	g.Expect(ccms).To(Equal(1))
}

// resolveUser reads an image config's User (uid[:gid] or a name) against the image's
// /etc/passwd and /etc/group: the user must have an entry, as tools that map the name expect.
func resolveUser(t *testing.T, img *images.Image, user string) imageUser {
	t.Helper()
	g := NewWithT(t)
	g.Expect(user).NotTo(BeEmpty(), "the image names no user: it would run as root")
	passwd := readImageFile(t, img, "/etc/passwd")
	group := readImageFile(t, img, "/etc/group")
	name, grp, _ := strings.Cut(user, ":")
	var u imageUser
	found := false
	for _, line := range strings.Split(passwd, "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || (f[0] != name && f[2] != name) {
			continue
		}
		uid, err1 := strconv.ParseInt(f[2], 10, 64)
		gid, err2 := strconv.ParseInt(f[3], 10, 64)
		g.Expect(err1).NotTo(HaveOccurred())
		g.Expect(err2).NotTo(HaveOccurred())
		u, found = imageUser{uid: uid, gid: gid}, true
		break
	}
	g.Expect(found).To(BeTrue(), "user %q has no /etc/passwd entry:\n%s", user, passwd)
	if grp != "" {
		found = false
		for _, line := range strings.Split(group, "\n") {
			f := strings.Split(line, ":")
			if len(f) >= 3 && (f[0] == grp || f[2] == grp) {
				gid, err := strconv.ParseInt(f[2], 10, 64)
				g.Expect(err).NotTo(HaveOccurred())
				u.gid, found = gid, true
				break
			}
		}
		g.Expect(found).To(BeTrue(), "group %q has no /etc/group entry:\n%s", grp, group)
	}
	return u
}

func readImageFile(t *testing.T, img *images.Image, file string) string {
	t.Helper()
	dest := filepath.Join(t.TempDir(), path.Base(file))
	if err := img.Extract(file, dest); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// expectSecurityContextOfUser checks that a container runs as non-root and, where the pod or
// the container names a user or group, that it is the image's (the container's wins).
func expectSecurityContextOfUser(g Gomega, pod *corev1.PodSecurityContext, c *corev1.SecurityContext, user imageUser, what string) {
	var runAsUser, runAsGroup *int64
	var nonRoot *bool
	if pod != nil {
		runAsUser, runAsGroup, nonRoot = pod.RunAsUser, pod.RunAsGroup, pod.RunAsNonRoot
	}
	if c != nil {
		if c.RunAsUser != nil {
			runAsUser = c.RunAsUser
		}
		if c.RunAsGroup != nil {
			runAsGroup = c.RunAsGroup
		}
		if c.RunAsNonRoot != nil {
			nonRoot = c.RunAsNonRoot
		}
	}
	g.Expect(nonRoot).To(HaveValue(BeTrue()), "%s: runAsNonRoot", what)
	if runAsUser != nil {
		g.Expect(*runAsUser).To(Equal(user.uid), "%s: runAsUser is not the image's user", what)
	}
	if runAsGroup != nil {
		g.Expect(*runAsGroup).To(Equal(user.gid), "%s: runAsGroup is not the image's group", what)
	}
}
