#!/usr/bin/env bash
# Builds the provider's previous release from this repository's history into the bed's tool
# cache (hack/tooldir.sh: previous-release/<commit>-<recipe>/), once per commit: the e2e scenario that upgrades the provider
# with clusterctl installs it first, with a cluster running, and upgrades to the code checked out.
# The previous release is a commit (PREVIOUS_RELEASE_COMMIT, pinned in the Makefile) until tags
# are published: what a user of that version has is what that commit's own tools make.
#
# Usage: hack/ensure-previous-release.sh <commit> [--dir | dir]    prints the directory it built
# into (--dir: prints it, builds nothing).
#
# In that directory: src/ (the commit's tree: its config/harvester files, as a user's checkout
# of that version has them), manager (its manager binary, built as `make images` builds it) and
# release/ (its clusterctl assets, written by its own hack/release with its default images).
set -euo pipefail

commit=${1:?usage: hack/ensure-previous-release.sh <commit> [--dir | dir]}
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$("$root/hack/tooldir.sh" previous-release "$commit" hack/ensure-previous-release.sh)
case ${2:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$2 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks

log() { echo "ensure-previous-release: $*" >&2; }

if [ -x "$dest/manager" ] && [ -f "$dest/release/infrastructure-components.yaml" ]; then
  echo "$dest"
  exit 0
fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  # A shallow clone: fetch the history from where it was cloned.
  log "commit $commit is not in this clone's history; fetching it"
  git -C "$root" fetch --quiet --unshallow 2>/dev/null || git -C "$root" fetch --quiet origin "$commit" 2>/dev/null || true
  if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
    log "commit $commit is not in this clone's history and could not be fetched: run 'git fetch --unshallow' and retry"
    exit 1
  fi
fi
log "building the previous release $commit (once; a minute or two on 2 cores)"
rm -rf "$dest"
mkdir -p "$dest/src"
git -C "$root" archive "$commit" | tar -x -C "$dest/src"
export GOWORK=off CGO_ENABLED=0
(cd "$dest/src" && go build -trimpath -o "$dest/manager.tmp" . && mv "$dest/manager.tmp" "$dest/manager")
(cd "$dest/src" && go run -trimpath ./hack/release -out "$dest/release.tmp" >&2 && mv "$dest/release.tmp" "$dest/release")
echo "$dest"
