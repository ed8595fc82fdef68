# Shared settings for e2e/*.sh. Source it; do not run it.
# shellcheck shell=bash

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$E2E_DIR/.." && pwd)

# shellcheck source=versions.env
. "$E2E_DIR/versions.env"
: "${K8S_VERSION:?missing in versions.env}" "${ETCD_VERSION:?missing in versions.env}" "${KWOK_VERSION:?missing in versions.env}"

K8S_MINOR=${K8S_VERSION#*.}; K8S_MINOR=${K8S_MINOR%%.*}

# Everything that is built or downloaded lives outside the repo.
E2E_CACHE=${E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-scheduler}
E2E_BIN_DIR=${E2E_BIN_DIR:-$E2E_CACHE/bin/$K8S_VERSION}
E2E_RUN_DIR=${E2E_RUN_DIR:-/tmp/dra-scheduler-e2e}

# Go: own module and build caches, no toolchain downloads, static binaries. The proxy and checksum
# database are the go command's defaults (or whatever the environment sets).
go_env() {
  export GOMODCACHE=${E2E_GOMODCACHE:-$E2E_CACHE/go/mod}
  export GOCACHE=${E2E_GOCACHE:-$E2E_CACHE/go/build}
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
  export GOFLAGS=${E2E_GOFLAGS:--mod=readonly -buildvcs=false}
  mkdir -p "$GOMODCACHE" "$GOCACHE"
}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
