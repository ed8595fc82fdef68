#!/usr/bin/env bash
# Regenerate the wrapper Go modules from e2e/versions.env:
#   e2e/gobuild/k8s   k8s.io/kubernetes + one replace per staging module (read from k8s's own go.mod)
#   e2e/gobuild/etcd  go.etcd.io/etcd/server/v3
#   e2e/gobuild/kwok  sigs.k8s.io/kwok
#   e2e/gobuild/helm  helm.sh/helm/v4, its k8s.io/* staging modules at the control plane's version
#   e2e/gobuild/kueue sigs.k8s.io/kueue (cmd/kueue), its own dependency graph unchanged
# and copy kwok's default Stage documents into e2e/kwok/stages/.
#   e2e/gen-wrapper.sh          all of them
#   e2e/gen-wrapper.sh helm     only the helm wrapper (likewise k8s, etcd, kwok, kueue)
# A version bump is: edit e2e/versions.env, run this, run e2e/build.sh, commit e2e/.
# Needs the Go module proxy (the go command's default) once; the result is committed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
go_env
export GOFLAGS="-mod=mod -buildvcs=false"
ONLY=("$@")
want() { [ ${#ONLY[@]} -eq 0 ] || [[ " ${ONLY[*]} " == *" $1 "* ]]; }

# new_module DIR MODPATH: fresh go.mod (the go directive is fixed up by the callers).
new_module() {
  rm -f "$1/go.mod" "$1/go.sum"
  mkdir -p "$1"
  (cd "$1" && go mod init "$2" >/dev/null 2>&1)
}

# gomod_file MODULE@VERSION: path of the downloaded .mod file
gomod_file() { go mod download -json "$1" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'; }
# go_directive GOMOD: its `go` line
go_directive() { sed -n 's/^go \([0-9.]*\)$/\1/p' "$1"; }

# --- Kubernetes ----------------------------------------------------------------------------------
K=$K8S_VERSION
if want k8s; then
W=$E2E_DIR/gobuild/k8s
log "k8s.io/kubernetes v$K -> $W"
new_module "$W" dra-scheduler-e2e/k8s
KMOD=$(cd "$W" && gomod_file "k8s.io/kubernetes@v$K")
[ -s "$KMOD" ] || die "could not download k8s.io/kubernetes@v$K"
STAGING=$(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*|\1|p' "$KMOD")
[ -n "$STAGING" ] || die "no staging replace lines found in $KMOD"
(
  cd "$W"
  args=(-go="$(go_directive "$KMOD")" -require="k8s.io/kubernetes@v$K")
  for m in $STAGING; do args+=(-replace="$m=$m@v0.${K#1.}"); done
  # k8s's own `godebug` block applies when it is the main module; keep the same behaviour here.
  for d in $(sed -n 's/^godebug \(.*\)$/\1/p' "$KMOD"); do args+=(-godebug="$d"); done
  for t in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    args+=(-tool="k8s.io/kubernetes/cmd/$t")
  done
  go mod edit "${args[@]}"
  go mod tidy
)
log "  $(echo "$STAGING" | wc -w) staging modules replaced with v0.${K#1.}"
fi

# --- etcd ----------------------------------------------------------------------------------------
if want etcd; then
W=$E2E_DIR/gobuild/etcd
log "go.etcd.io/etcd/server/v3 v$ETCD_VERSION -> $W"
new_module "$W" dra-scheduler-e2e/etcd
EMOD=$(cd "$W" && gomod_file "go.etcd.io/etcd/server/v3@v$ETCD_VERSION")
(
  cd "$W"
  # etcd's own replace lines point at ../api etc. and are ignored for a dependency; its require
  # lines are real versions, so no replace lines are needed here.
  go mod edit -go="$(go_directive "$EMOD")" -require="go.etcd.io/etcd/server/v3@v$ETCD_VERSION" \
    -tool=go.etcd.io/etcd/server/v3 -tool=go.etcd.io/etcd/etcdctl/v3
  go get "go.etcd.io/etcd/etcdctl/v3@v$ETCD_VERSION" >/dev/null
  go mod tidy
)
fi

# --- kwok ----------------------------------------------------------------------------------------
if want kwok; then
W=$E2E_DIR/gobuild/kwok
log "sigs.k8s.io/kwok v$KWOK_VERSION -> $W"
new_module "$W" dra-scheduler-e2e/kwok
WMOD=$(cd "$W" && gomod_file "sigs.k8s.io/kwok@v$KWOK_VERSION")
(
  cd "$W"
  go mod edit -go="$(go_directive "$WMOD")" -require="sigs.k8s.io/kwok@v$KWOK_VERSION" \
    -tool=sigs.k8s.io/kwok/cmd/kwok
  go mod tidy
)

# Standalone kwok embeds no default stages (only kwokctl does): keep a copy of the "fast" ones.
SRC=$GOMODCACHE/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage
DST=$E2E_DIR/kwok/stages
[ -d "$SRC" ] || die "kwok stages not found at $SRC"
rm -rf "$DST"; mkdir -p "$DST"
for f in node/fast/node-initialize.yaml \
         node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  [ -f "$SRC/$f" ] || die "missing kwok stage $SRC/$f"
  { echo "# Copied by e2e/gen-wrapper.sh from sigs.k8s.io/kwok@v$KWOK_VERSION kustomize/stage/$f"
    cat "$SRC/$f"; } > "$DST/$(basename "$f")"
done
chmod -R u+w "$DST"
log "kwok stages -> $DST ($(ls "$DST" | wc -l) files)"
fi

# --- helm ----------------------------------------------------------------------------------------
if want helm; then
: "${HELM_VERSION:?missing in versions.env}"
W=$E2E_DIR/gobuild/helm
log "helm.sh/helm/v4 v$HELM_VERSION -> $W"
new_module "$W" dra-scheduler-e2e/helm
HMOD=$(cd "$W" && gomod_file "helm.sh/helm/v4@v$HELM_VERSION")
[ -s "$HMOD" ] || die "could not download helm.sh/helm/v4@v$HELM_VERSION"
(
  cd "$W"
  go mod edit -go="$(go_directive "$HMOD")" -require="helm.sh/helm/v4@v$HELM_VERSION" \
    -tool=helm.sh/helm/v4/cmd/helm
  go mod tidy
  # The k8s.io/* staging modules helm uses, raised to the control plane's release (never lowered).
  KS=$(go list -m -f '{{.Path}} {{.Version}}' all | awk '$2 ~ /^v0\./ && $1 ~ /^k8s\.io\// {print $1}')
  ups=()
  for m in $KS; do
    case $m in k8s.io/klog*|k8s.io/utils|k8s.io/kube-openapi|k8s.io/gengo*) continue ;; esac
    ups+=("$m@v0.${K#1.}")
  done
  [ ${#ups[@]} -eq 0 ] || go get "${ups[@]}" >/dev/null
  go mod tidy
)
log "  helm's k8s.io staging modules at v0.${K#1.}"
fi
# --- kueue ---------------------------------------------------------------------------------------
if want kueue; then
: "${KUEUE_VERSION:?missing in versions.env}"
W=$E2E_DIR/gobuild/kueue
log "sigs.k8s.io/kueue v$KUEUE_VERSION -> $W"
new_module "$W" dra-scheduler-e2e/kueue
QMOD=$(cd "$W" && gomod_file "sigs.k8s.io/kueue@v$KUEUE_VERSION")
[ -s "$QMOD" ] || die "could not download sigs.k8s.io/kueue@v$KUEUE_VERSION"
(
  cd "$W"
  # Kueue's go.mod has no replace lines; its k8s.io/* (v0.35) stay as it requires them: it is a client of
  # the 1.37 API server like kwok, and raising them could break its generated clients.
  go mod edit -go="$(go_directive "$QMOD")" -require="sigs.k8s.io/kueue@v$KUEUE_VERSION" \
    -tool=sigs.k8s.io/kueue/cmd/kueue
  go mod tidy
)
fi
log "done; now run e2e/build.sh"
