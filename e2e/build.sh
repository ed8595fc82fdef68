#!/usr/bin/env bash
# Build the e2e control-plane binaries from the committed wrapper modules in e2e/gobuild/ into
#   ~/.cache/dra-scheduler/bin/<K8S_VERSION>/   (override: E2E_BIN_DIR, or E2E_CACHE for the root)
# with GOMODCACHE/GOCACHE under ~/.cache/dra-scheduler/go/. Skips what is already built for the
# pinned versions (a stamp file per binary). Prints the elapsed time of every step.
#
#   e2e/build.sh            build what is missing
#   e2e/build.sh --check    exit 0 if everything is built, 1 (listing what is missing) otherwise
#   e2e/build.sh --force    rebuild everything
#   e2e/build.sh NAME...    only these (etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm kueue)
# kueue also gets its CRDs and webhook manifest, read from its module, in <bin dir>/kueue-config/ (never committed).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ALL=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm kueue)
CHECK=0 FORCE=0 WANT=()
for a in "$@"; do
  case $a in
    --check) CHECK=1 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kwok|helm|kueue) WANT+=("$a") ;;
    *) die "unknown argument: $a (see --help)" ;;
  esac
done
[ ${#WANT[@]} -gt 0 ] || WANT=("${ALL[@]}")

wrapper_of() { case $1 in etcd) echo etcd ;; kwok) echo kwok ;; helm) echo helm ;; kueue) echo kueue ;; *) echo k8s ;; esac; }
version_of() {
  case $1 in
    etcd) echo "$ETCD_VERSION" ;; kwok) echo "$KWOK_VERSION" ;; helm) echo "${HELM_VERSION:?missing in versions.env}" ;;
    kueue) echo "${KUEUE_VERSION:?missing in versions.env}" ;;
    *) echo "$K8S_VERSION" ;;
  esac
}
# The stamp ties a binary to its version and to the exact wrapper go.mod/go.sum it was built from.
stamp_value() {
  local w; w=$E2E_DIR/gobuild/$(wrapper_of "$1")
  echo "$1 $(version_of "$1") $(cat "$w/go.mod" "$w/go.sum" | sha256sum | cut -c1-16)"
}
is_built() {
  [ -x "$E2E_BIN_DIR/$1" ] && [ "$(cat "$E2E_BIN_DIR/.stamp-$1" 2>/dev/null)" = "$(stamp_value "$1")" ] &&
    { [ "$1" != kueue ] || [ -s "$E2E_BIN_DIR/kueue-config/webhook-manifests.yaml" ]; }
}

if [ $CHECK = 1 ]; then
  missing=()
  for b in "${WANT[@]}"; do is_built "$b" || missing+=("$b"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "not built in $E2E_BIN_DIR: ${missing[*]} (run e2e/build.sh)"; exit 1
  fi
  echo "all built in $E2E_BIN_DIR"; exit 0
fi

go_env
command -v go >/dev/null || die "the go command is not on PATH"
mkdir -p "$E2E_BIN_DIR"

# Version stamps, as upstream hack/lib/version.sh sets them. The module zip is no git archive, so
# without these the binaries report v0.0.0-master. buildDate = the tag time, for reproducibility.
modinfo_time() { go mod download -json "$1" | sed -n 's/.*"Time": "\(.*\)".*/\1/p'; }
k8s_ldflags() {
  local date; date=$(cd "$E2E_DIR/gobuild/k8s" && modinfo_time "k8s.io/kubernetes@v$K8S_VERSION")
  local f="" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
    f+=" -X $p.gitTreeState=clean -X $p.buildDate=$date -X $p.gitCommit=module-v$K8S_VERSION"
  done
  echo "$f"
}

TIMES=$E2E_BIN_DIR/build-times.txt
TOTAL_START=$(date +%s)
built_any=0
for b in "${WANT[@]}"; do
  if [ $FORCE = 0 ] && is_built "$b"; then
    log "$b $(version_of "$b"): already built, skipping"
    continue
  fi
  w=$(wrapper_of "$b")
  case $b in
    etcd)    pkgs=(go.etcd.io/etcd/server/v3); tags=""; ldf="" ;;
    kwok)    pkgs=(sigs.k8s.io/kwok/cmd/kwok); tags=""; ldf="-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" ;;
    # version stamps as helm's Makefile sets them for a tagged release
    helm)    pkgs=(helm.sh/helm/v4/cmd/helm); tags=""
             hv=helm.sh/helm/v4/internal/version
             ldf="-X $hv.version=v$HELM_VERSION -X $hv.metadata= -X $hv.gitCommit=module-v$HELM_VERSION -X $hv.gitTreeState=clean" ;;
    # version stamps as Kueue's Makefile sets them (LD_FLAGS of sigs.k8s.io/kueue/pkg/version); date = tag time
    kueue)   pkgs=(sigs.k8s.io/kueue/cmd/kueue); tags=""
             qv=sigs.k8s.io/kueue/pkg/version
             qdate=$(cd "$E2E_DIR/gobuild/kueue" && modinfo_time "sigs.k8s.io/kueue@v$KUEUE_VERSION")
             ldf="-X $qv.GitVersion=v$KUEUE_VERSION -X $qv.GitCommit=module-v$KUEUE_VERSION -X $qv.BuildDate=$qdate" ;;
    *)       pkgs=("k8s.io/kubernetes/cmd/$b"); tags="selinux,notest"; ldf=$(k8s_ldflags) ;;
  esac
  log "building $b $(version_of "$b") (wrapper e2e/gobuild/$w) ..."
  start=$(date +%s)
  tmp=$E2E_BIN_DIR/.tmp-$b
  (cd "$E2E_DIR/gobuild/$w" &&
    go build -p 2 -trimpath ${tags:+-tags "$tags"} -ldflags "-s -w -buildid= $ldf" -o "$tmp" "${pkgs[@]}")
  if [ "$b" = etcd ]; then   # etcdctl too: handy for debugging, shares almost everything
    (cd "$E2E_DIR/gobuild/etcd" &&
      go build -p 2 -trimpath -ldflags "-s -w -buildid=" -o "$E2E_BIN_DIR/etcdctl" go.etcd.io/etcd/etcdctl/v3)
  fi
  if [ "$b" = kueue ]; then  # its CRDs and webhook configurations, as the module ships them (read by e2e/kueue.py)
    qdir=$(cd "$E2E_DIR/gobuild/kueue" && go list -m -f '{{.Dir}}' "sigs.k8s.io/kueue")
    rm -rf "$E2E_BIN_DIR/kueue-config"; mkdir -p "$E2E_BIN_DIR/kueue-config/crds"
    cp "$qdir"/config/components/crd/bases/*.yaml "$E2E_BIN_DIR/kueue-config/crds/"
    cp "$qdir/config/components/webhook/manifests.yaml" "$E2E_BIN_DIR/kueue-config/webhook-manifests.yaml"
    chmod -R u+w "$E2E_BIN_DIR/kueue-config"
  fi
  mv -f "$tmp" "$E2E_BIN_DIR/$b"
  stamp_value "$b" > "$E2E_BIN_DIR/.stamp-$b"
  secs=$(( $(date +%s) - start ))
  log "built $b in ${secs}s"
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $b $(version_of "$b") ${secs}s" >> "$TIMES"
  built_any=1
done
log "total $(( $(date +%s) - TOTAL_START ))s; binaries in $E2E_BIN_DIR"
if [ $built_any = 1 ]; then
  "$E2E_BIN_DIR/kube-apiserver" --version 2>/dev/null || true
  du -sh "$E2E_BIN_DIR" "$GOMODCACHE" "$GOCACHE" 2>/dev/null || true
fi
