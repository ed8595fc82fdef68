#!/usr/bin/env bash
# Build e2e/celdiff (the upstream DRA CEL environment and structured allocator of Kubernetes $K8S_VERSION,
# for tests/test_differential.py) into $E2E_BIN_DIR/celdiff, with the module versions pinned by the wrapper
# module e2e/gobuild/celdiff (go.mod + go.sum, committed) and the Go caches of e2e/lib.sh. Prints the
# binary's path on stdout; skips the build when the stamp (sources + go.mod/go.sum) is unchanged.
#
#   e2e/celdiff/build.sh           build if needed, print the path
#   e2e/celdiff/build.sh --gen     regenerate e2e/gobuild/celdiff/go.{mod,sum} (needs the module proxy)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
go_env
command -v go >/dev/null || die "the go command is not on PATH"
SRC=$E2E_DIR/celdiff
W=$E2E_DIR/gobuild/celdiff
BIN=$E2E_BIN_DIR/celdiff
DRA_VERSION=v0.${K8S_VERSION#1.}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = --gen ]; then
  export GOFLAGS="-mod=mod -buildvcs=false"
  cp "$SRC/main.go" "$work/"
  (cd "$work" && go mod init dra-scheduler-e2e/celdiff >/dev/null 2>&1 &&
    go mod edit -go="$(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$/.0/')" \
      -require="k8s.io/dynamic-resource-allocation@$DRA_VERSION" &&
    go mod tidy)
  mkdir -p "$W"
  cp "$work/go.mod" "$work/go.sum" "$W/"
  log "regenerated $W (k8s.io/dynamic-resource-allocation@$DRA_VERSION)"
  exit 0
fi

stamp=$(cat "$SRC/main.go" "$W/go.mod" "$W/go.sum" | sha256sum | cut -c1-16)
if [ -x "$BIN" ] && [ "$(cat "$E2E_BIN_DIR/.stamp-celdiff" 2>/dev/null)" = "$stamp" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$E2E_BIN_DIR"
cp "$SRC/main.go" "$W/go.mod" "$W/go.sum" "$work/"
start=$(date +%s)
log "building celdiff (k8s.io/dynamic-resource-allocation@$DRA_VERSION) ..."
(cd "$work" && go build -p 2 -trimpath -ldflags "-s -w -buildid=" -o "$BIN.tmp" .)
mv -f "$BIN.tmp" "$BIN"
echo "$stamp" > "$E2E_BIN_DIR/.stamp-celdiff"
secs=$(( $(date +%s) - start ))
log "built celdiff in ${secs}s"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) celdiff $DRA_VERSION ${secs}s" >> "$E2E_BIN_DIR/build-times.txt"
echo "$BIN"
