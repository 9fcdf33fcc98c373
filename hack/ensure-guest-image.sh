#!/usr/bin/env bash
# Builds the bed's real guest into the tool cache (hack/tooldir.sh), once, from Debian's packages:
#
#   qemu/       QEMU (qemu-system-x86, its firmware and the libraries the host lacks) and
#               genisoimage, unpacked with `dpkg-deb -x`, not installed;
#   bin/        qemu-system-x86_64 and genisoimage wrappers that run them from qemu/;
#   vmlinuz, initrd.img, root.img
#               a minimal Debian guest (kernel, systemd, cloud-init, qemu-guest-agent, ifupdown,
#               openssh-server, and the en_US.UTF-8 locale cloud-init sets, as Debian's cloud
#               images have it) built by mmdebstrap, its root file system an ext4 image made by
#               `mke2fs -d` (no loop mount); the tests boot it with QEMU's -snapshot, so it is
#               never written;
#   versions.txt
#               every package and version in the guest and in qemu/.
#
# Nothing is installed on the host. The guest's packages are the suite's current versions on the
# host's Debian mirror: versions.txt says which ones a build took.
#
# Usage: hack/ensure-guest-image.sh [--dir | dir] prints the directory.
set -euo pipefail

# What the host runs and the guest is made of: the host's distribution (Debian bookworm).
host_packages=(qemu-system-x86 qemu-system-common qemu-system-data seabios genisoimage mmdebstrap)
guest_packages=systemd-sysv,udev,linux-image-cloud-amd64,cloud-init,qemu-guest-agent,ifupdown,isc-dhcp-client,iproute2,openssh-server,locales
root=$(cd "$(dirname "$0")/.." && pwd)
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-unknown}")
dest=$("$root/hack/tooldir.sh" guest-image "$codename" hack/ensure-guest-image.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks

log() { echo "ensure-guest-image: $*" >&2; }

if [ ! -f "$dest/ready" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null && command -v mke2fs >/dev/null ||
    { log "needs apt-get, dpkg-deb and mke2fs (a Debian host)"; exit 1; }
  [ "$(id -u)" = 0 ] || command -v unshare >/dev/null || { log "mmdebstrap needs root or unshare"; exit 1; }
  # apt's lists are the machine's: one tool script at a time uses apt (make builds tools in
  # parallel).
  exec 8>"$(dirname "$(dirname "$dest")")/apt.lock" && flock 8
  # A fresh machine may have no package lists yet.
  if [ -z "$(apt-cache policy qemu-system-x86 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)')" ]; then
    log "no package lists: apt-get update"
    apt-get update -qq >&2
  fi
  work=$(mktemp -d)
  # mmdebstrap mounts file systems into the root it builds while it runs: never delete through
  # one that an interrupted build left mounted.
  trap 'rm -rf --one-file-system "$work"' EXIT
  # apt's download sandbox user cannot write into a root-owned temporary directory.
  chmod 777 "$work"
  mkdir -p "$work/debs" && chmod 777 "$work/debs"
  log "fetching ${host_packages[*]} and the libraries the host lacks"
  (cd "$work/debs" && apt-get download -qq "${host_packages[@]}" >&2)
  apt-get install -qq -y --download-only --no-install-recommends \
    -o Dir::Cache::archives="$work/debs" "${host_packages[@]}" >&2
  exec 8>&- # apt's part is done
  rm -rf "$dest" && mkdir -p "$dest/qemu" "$dest/bin"
  for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dest/qemu"
    dpkg-deb -f "$deb" Package Version | paste -sd' ' | sed 's/^/host /' >>"$dest/versions.txt"
  done
  libs="$dest/qemu/usr/lib/x86_64-linux-gnu:$dest/qemu/lib/x86_64-linux-gnu"
  cat >"$dest/bin/qemu-system-x86_64" <<WRAPPER
#!/bin/sh
# QEMU from Debian's packages, unpacked here (hack/ensure-guest-image.sh), with their firmware.
LD_LIBRARY_PATH="$libs" exec "$dest/qemu/usr/bin/qemu-system-x86_64" -L "$dest/qemu/usr/share/seabios" -L "$dest/qemu/usr/share/qemu" "\$@"
WRAPPER
  cat >"$dest/bin/genisoimage" <<WRAPPER
#!/bin/sh
LD_LIBRARY_PATH="$libs" exec "$dest/qemu/usr/bin/genisoimage" "\$@"
WRAPPER
  chmod +x "$dest/bin/"*
  "$dest/bin/qemu-system-x86_64" --version >/dev/null

  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  log "building the guest's root file system from ${mirror:-http://deb.debian.org/debian} ($codename)"
  perl "$dest/qemu/usr/bin/mmdebstrap" --quiet --mode=auto --variant=minbase \
    --include="$guest_packages" \
    --customize-hook='echo "en_US.UTF-8 UTF-8" >"$1/etc/locale.gen" && chroot "$1" locale-gen >/dev/null' \
    --customize-hook='echo "LANG=en_US.UTF-8" >"$1/etc/default/locale"' \
    "$codename" "$work/rootfs" "${mirror:-http://deb.debian.org/debian}" >&2
  dpkg-query --admindir="$work/rootfs/var/lib/dpkg" -W -f='guest ${Package} ${Version}\n' >>"$dest/versions.txt"
  cp "$work"/rootfs/boot/vmlinuz-* "$dest/vmlinuz"
  cp "$work"/rootfs/boot/initrd.img-* "$dest/initrd.img"
  # The root file system as an image, made from the directory (sparse: about half its size).
  mke2fs -q -t ext4 -L root -d "$work/rootfs" "$dest/root.img" 1500M >&2
  touch "$dest/ready"
fi
echo "$dest"
