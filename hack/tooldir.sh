#!/usr/bin/env bash
# Prints the directory a test-bed tool is built into, outside the clone, so that every clone on
# the machine reuses one build (as Go's module cache is shared):
#
#   <cache>/<name>/<version>-<recipe>
#
# <cache> is $BED_TOOLS_CACHE, else $XDG_CACHE_HOME/cluster-api-provider-harvester/tools, else
# ~/.cache/cluster-api-provider-harvester/tools. <recipe> is a digest of the Go toolchain
# (version, OS, architecture) and of the files given (the script that builds the tool and what it
# reads: a directory counts every file under it), so a new version, a changed build script or a
# new Go builds the tool anew in a directory of its own. Old directories are never removed here:
# delete the cache directory to reclaim the space.
#
# Usage: hack/tooldir.sh <name> <version> <file or directory, relative to the repository>...
set -euo pipefail

name=${1:?usage: hack/tooldir.sh <name> <version> <file>...}
version=${2:?usage: hack/tooldir.sh <name> <version> <file>...}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${BED_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/cluster-api-provider-harvester/tools}

recipe=$(
  cd "$root"
  ${GO:-go} env GOVERSION GOOS GOARCH
  for input in "$@"; do
    [ -e "$input" ] || { echo "hack/tooldir.sh: no $input" >&2; exit 1; }
    find "$input" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  done
)
echo "$cache/$name/$version-$(sha256sum <<<"$recipe" | cut -c1-12)"
