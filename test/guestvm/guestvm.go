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

// Package guestvm runs a real Linux guest for the bed: the Debian image that
// hack/ensure-guest-image.sh builds (GUEST_IMAGE_DIR), under QEMU, booted as KubeVirt boots a
// VM's guest: a NoCloud seed disk (label cidata) made of the user data and network data a VM's
// cloudInitNoCloud volume gives, one virtio NIC per MAC in the VM's order, and the QEMU guest
// agent on the virtio-serial channel KubeVirt names org.qemu.guest_agent.0. Agent asks the guest
// agent what virt-handler asks it.
//
// The guest runs under QEMU's TCG (emulation): nested KVM on the machines this runs on does not
// boot a stock kernel. GUEST_ACCEL overrides the accelerator (kvm where it works).
package guestvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// ImageDirEnv names the directory hack/ensure-guest-image.sh prints.
const ImageDirEnv = "GUEST_IMAGE_DIR"

// Image is a built guest image: kernel, initrd, root file system and the QEMU to run them.
type Image struct{ Dir string }

// ImageFromEnv is the image GUEST_IMAGE_DIR names (make test sets it); an error says why there is
// none.
func ImageFromEnv() (Image, error) {
	dir := os.Getenv(ImageDirEnv)
	if dir == "" {
		return Image{}, fmt.Errorf("%s is not set (make test-real-guest, which make test runs last, sets it)", ImageDirEnv)
	}
	if _, err := os.Stat(filepath.Join(dir, "ready")); err != nil {
		return Image{}, fmt.Errorf("%s=%s holds no finished image: %w", ImageDirEnv, dir, err)
	}
	return Image{Dir: dir}, nil
}

// Config is one guest's boot.
type Config struct {
	// Name is the guest's instance ID and local host name in its meta data, as KubeVirt writes
	// the NoCloud meta data of a VM (its name).
	Name string
	// UserData and NetworkData are the cloud-init documents, as the VM's Secrets hold them; no
	// NetworkData leaves the guest's NICs to cloud-init's fallback (DHCP on the first).
	UserData, NetworkData []byte
	// MACs are the NICs' addresses, in the order of the VM's interfaces (their PCI order).
	MACs []string
	// MemoryMiB is the guest's memory (1024 when 0).
	MemoryMiB int
	// NoAgent masks the image's guest agent (systemd.mask on the kernel's command line): a guest
	// whose image has none. The virtio-serial channel stays, as KubeVirt always adds it.
	NoAgent bool
}

// Guest is a running guest.
type Guest struct {
	cfg  Config
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Boot starts the guest and returns at once; Agent tells when it has booted far enough to answer.
// Stop ends it. Each NIC is on a QEMU user-mode network of its own, restricted (the guest reaches
// neither the host nor anything beyond, as a test's guest must not) and IPv4 only, as a
// Harvester VLAN without an IPv6 router is (QEMU's would advertise a prefix, and the guest would
// add an address of it to every NIC).
func Boot(ctx context.Context, img Image, cfg Config) (*Guest, error) {
	if cfg.Name == "" || len(cfg.MACs) == 0 {
		return nil, errors.New("a guest needs a name and at least one NIC")
	}
	dir, err := os.MkdirTemp("", "guestvm-"+cfg.Name+"-")
	if err != nil {
		return nil, err
	}
	g := &Guest{cfg: cfg, dir: dir, done: make(chan struct{})}
	if err := g.writeSeed(ctx, img); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	accel := os.Getenv("GUEST_ACCEL")
	if accel == "" {
		accel = "tcg"
	}
	memory := cfg.MemoryMiB
	if memory == 0 {
		memory = 1024
	}
	kernelArgs := "root=/dev/vda rw console=ttyS0"
	if cfg.NoAgent {
		kernelArgs += " systemd.mask=qemu-guest-agent.service"
	}
	args := []string{
		"-accel", accel, "-m", fmt.Sprint(memory), "-smp", "1",
		"-display", "none", "-serial", "file:" + g.ConsolePath(), "-monitor", "none", "-no-reboot",
		"-kernel", filepath.Join(img.Dir, "vmlinuz"), "-initrd", filepath.Join(img.Dir, "initrd.img"),
		"-append", kernelArgs,
		// The image is shared by every guest: each writes to a temporary overlay (in dir).
		"-drive", "file=" + filepath.Join(img.Dir, "root.img") + ",if=virtio,format=raw,snapshot=on",
		"-drive", "file=" + filepath.Join(dir, "seed.iso") + ",if=virtio,format=raw,readonly=on",
		"-chardev", "socket,path=" + g.agentSocket() + ",server=on,wait=off,id=qga0",
		"-device", "virtio-serial", "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
	}
	for i, mac := range cfg.MACs {
		args = append(args,
			"-netdev", fmt.Sprintf("user,id=n%d,restrict=on,ipv6=off", i),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n%d,mac=%s,romfile=", i, mac))
	}
	g.cmd = testenv.ProtectedCommand(context.WithoutCancel(ctx), filepath.Join(img.Dir, "bin", "qemu-system-x86_64"), args...)
	g.cmd.Dir = dir
	g.cmd.Env = append(os.Environ(), "TMPDIR="+dir) // the -snapshot overlay
	out, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	g.cmd.Stdout, g.cmd.Stderr = out, out
	if err := g.cmd.Start(); err != nil {
		_ = out.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting QEMU: %w", err)
	}
	go func() {
		g.err = g.cmd.Wait()
		_ = out.Close()
		close(g.done)
	}()
	return g, nil
}

// writeSeed makes the NoCloud seed disk: an ISO 9660 image labelled cidata with meta-data,
// user-data and, when given, network-config, as KubeVirt makes it from a cloudInitNoCloud volume.
func (g *Guest) writeSeed(ctx context.Context, img Image) error {
	seed := filepath.Join(g.dir, "seed")
	if err := os.MkdirAll(seed, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{
		"meta-data": fmt.Appendf(nil, "instance-id: %s\nlocal-hostname: %s\n", g.cfg.Name, g.cfg.Name),
		"user-data": g.cfg.UserData,
	}
	if len(g.cfg.NetworkData) > 0 {
		files["network-config"] = g.cfg.NetworkData
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(seed, name), data, 0o644); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(img.Dir, "bin", "genisoimage"),
		"-quiet", "-output", filepath.Join(g.dir, "seed.iso"), "-volid", "cidata", "-joliet", "-rock", seed)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("making the NoCloud seed: %w: %s", err, out)
	}
	return nil
}

// ConsolePath is the file the guest's serial console is written to.
func (g *Guest) ConsolePath() string { return filepath.Join(g.dir, "console.log") }

// Console is the last n lines of the guest's serial console and of QEMU's own output, for a
// failing test's message.
func (g *Guest) Console(n int) string {
	var b strings.Builder
	for _, f := range []string{g.ConsolePath(), filepath.Join(g.dir, "qemu.log")} {
		data, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(data), "\r", ""), "\n"), "\n")
		fmt.Fprintf(&b, "--- %s ---\n%s\n", filepath.Base(f), strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
	return b.String()
}

// ConsoleReport is what the guest last wrote to its serial console on a line of its own that
// starts with prefix and a space (the rest of that line); ok is false while there is none. A
// guest without an agent reports that way: a command of its user data writes the line, again and
// again, so that a kernel message written into the middle of one does not lose it.
func (g *Guest) ConsoleReport(prefix string) (report string, ok bool) {
	data, _ := os.ReadFile(g.ConsolePath())
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\r", ""), "\n") {
		if rest, found := strings.CutPrefix(line, prefix+" "); found {
			report, ok = rest, true
		}
	}
	return report, ok
}

// Exited says whether QEMU has ended, and how.
func (g *Guest) Exited() (bool, error) {
	select {
	case <-g.done:
		return true, g.err
	default:
		return false, nil
	}
}

// Stop ends the guest (at once: its disks are throw-away overlays) and removes its files.
func (g *Guest) Stop() error {
	if g.cmd.Process != nil {
		_ = g.cmd.Process.Kill()
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("QEMU (pid %d) did not end", g.cmd.Process.Pid)
	}
	return os.RemoveAll(g.dir)
}

func (g *Guest) agentSocket() string { return filepath.Join(g.dir, "qga.sock") }
