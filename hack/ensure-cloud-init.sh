#!/usr/bin/env bash
# Fetches cloud-init (Debian's package, with the Python libraries it imports) into the bed's tool
# cache (hack/tooldir.sh), once, without installing anything on the host: `apt-get download` and
# `dpkg-deb -x` into the cache directory. It writes `cloud-init` there, a wrapper that runs
# cloud-init's own command line with Debian's python3, so that the tests can ask cloud-init
# itself (`cloud-init schema --config-file F`) whether the user data the provider gives a VM is
# valid. versions.txt there lists every package and version fetched.
#
# Usage: hack/ensure-cloud-init.sh [--dir | dir] prints the directory holding the wrapper.
set -euo pipefail

# The distribution the packages come from is the host's (Debian bookworm: cloud-init 22.4).
packages=(cloud-init python3-configobj python3-jinja2 python3-markupsafe python3-jsonpatch
  python3-json-pointer python3-jsonschema python3-attr python3-pyrsistent python3-netifaces
  python3-oauthlib python3-requests python3-urllib3 python3-idna python3-certifi python3-chardet
  python3-charset-normalizer python3-serial python3-yaml python3-six python3-importlib-metadata
  python3-zipp python3-typing-extensions)
root=$(cd "$(dirname "$0")/.." && pwd)
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-unknown}")
dest=$("$root/hack/tooldir.sh" cloud-init "$codename" hack/ensure-cloud-init.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one fetch at a time, whichever clone asks

log() { echo "ensure-cloud-init: $*" >&2; }

python=/usr/bin/python3
if [ ! -x "$python" ]; then
  log "needs Debian's python3 ($python): the packages' compiled modules are built for it"
  exit 1
fi

if [ ! -x "$dest/cloud-init" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { log "needs apt-get and dpkg-deb (a Debian host)"; exit 1; }
  # apt's lists are the machine's: one tool script at a time uses apt (make builds tools in
  # parallel).
  exec 8>"$(dirname "$(dirname "$dest")")/apt.lock" && flock 8
  # A fresh machine may have no package lists yet.
  if [ -z "$(apt-cache policy cloud-init 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)')" ]; then
    log "no package lists: apt-get update"
    apt-get update -qq >&2
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  log "fetching ${packages[*]}"
  # apt's download sandbox user cannot write into a root-owned temporary directory.
  chmod 777 "$work"
  (cd "$work" && apt-get download -qq "${packages[@]}" >&2)
  exec 8>&- # apt's part is done
  rm -rf "$dest" && mkdir -p "$dest/root"
  for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$dest/root"
    dpkg-deb -f "$deb" Package Version | paste -sd' ' >>"$dest/versions.txt"
  done
  cat >"$dest/cloud-init.tmp" <<WRAPPER
#!/bin/sh
# cloud-init's command line from Debian's package, unpacked here (hack/ensure-cloud-init.sh).
PYTHONPATH="$dest/root/usr/lib/python3/dist-packages" exec $python -c 'import sys; from cloudinit.cmd.main import main; sys.exit(main())' "\$@"
WRAPPER
  chmod +x "$dest/cloud-init.tmp"
  # It must run: a Python without the packages' ABI fails here, not in a test.
  printf '#cloud-config\nruncmd: ["echo ok"]\n' >"$work/check.yaml"
  "$dest/cloud-init.tmp" schema --config-file "$work/check.yaml" >/dev/null
  mv "$dest/cloud-init.tmp" "$dest/cloud-init"
fi
echo "$dest"
