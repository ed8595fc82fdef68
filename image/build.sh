#!/usr/bin/env bash
# Build the Dockerfile with buildah, daemonless and without a registry (`make image`; image/README.md):
#   1. tools: buildah and debootstrap, installed with apt-get when missing (as root, or with sudo -n);
#   2. base: a minimal Debian root file system with Debian's python3 (debootstrap --variant=minbase of
#      IMAGE_BASE_RELEASE, BASE_PACKAGES from image.env), trimmed, imported as BASE_NAME:<release>;
#      made once per recipe (a key over the release, the packages and this recipe, kept as a label);
#   3. wheels: the project's dependencies and build requirements, as wheels for the base's Python, in a
#      wheelhouse on the host (pip's own cache makes a second download free);
#   4. image: `buildah bud --isolation chroot` of the Dockerfile with --build-arg PYTHON_IMAGE=<the base>;
#      during RUN, pip sees only the wheelhouse (a pip.conf with no-index + find-links, bind-mounted for
#      the build, not part of the image). Skipped when the image already has the label of the same inputs
#      (the Dockerfile, the files it copies, the base, the wheels); IMAGE_REBUILD=1 builds anyway.
# Everything lives in IMAGE_CACHE (default ~/.cache/dra-scheduler/image): buildah's storage (vfs driver),
# the debootstrap package cache and the wheelhouse. Prints the time of each step and the image's size.
#
#   image/build.sh            make what is missing, then build the image if its inputs changed
#   image/build.sh --print-env   the buildah options and names the checks use (KEY=VALUE lines)
set -euo pipefail
IMAGE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$IMAGE_DIR/.." && pwd)

log() { printf '[%s] image: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: image: %s\n' "$*" >&2; exit 1; }

# image.env, unless the environment already sets a value
while IFS='=' read -r key value; do
  [[ $key =~ ^[A-Z_][A-Z0-9_]*$ ]] || continue
  [ -n "${!key+x}" ] || printf -v "$key" '%s' "$value"
done < "$IMAGE_DIR/image.env"

IMAGE_CACHE=${IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-scheduler/image}
IMAGE_RUNROOT=${IMAGE_RUNROOT:-/tmp/dra-scheduler-image-run}
if [ -z "$IMAGE_BASE_RELEASE" ]; then
  IMAGE_BASE_RELEASE=$( (. /etc/os-release 2>/dev/null && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-}") || true)
  IMAGE_BASE_RELEASE=${IMAGE_BASE_RELEASE:-bookworm}
fi
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/pyproject.toml" | head -1)
[ -n "$VERSION" ] || die "no version in pyproject.toml"
IMAGE=$IMAGE_NAME:$VERSION
BASE=$BASE_NAME:$IMAGE_BASE_RELEASE

if [ "${1:-}" = --print-env ]; then
  printf '%s\n' "IMAGE=$IMAGE" "BASE=$BASE" "IMAGE_CACHE=$IMAGE_CACHE" "IMAGE_RUNROOT=$IMAGE_RUNROOT" \
    "IMAGE_SIZE_LIMIT_MIB=$IMAGE_SIZE_LIMIT_MIB"
  exit 0
fi
[ $# -eq 0 ] || die "unknown argument: $1 (see the head of $0)"

# ---- 1. tools
SUDO=()
if [ "$(id -u)" != 0 ]; then
  sudo -n true 2>/dev/null || die "debootstrap and buildah (rootful, vfs storage) need root: run as root, or \
give this user passwordless sudo (sudo -n true failed)"
  SUDO=(sudo -n)
fi
STEP_START=$(date +%s) TOTAL_START=$(date +%s)
step_done() { log "$1 ($(( $(date +%s) - STEP_START )) s)"; STEP_START=$(date +%s); }

missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get to install them: install \
${missing[*]} (Debian/Ubuntu packages of those names) and run make image again"
  log "installing ${missing[*]} with apt-get"
  apt_install() { "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}" >&2; }
  apt_install || { "${SUDO[@]}" apt-get update -q >&2 || true; apt_install; } \
    || die "apt-get could not install ${missing[*]} (see its output above): install them by hand"
  step_done "installed ${missing[*]}"
fi
BUILDAH=("${SUDO[@]}" buildah --root "$IMAGE_CACHE/storage" --runroot "$IMAGE_RUNROOT" --storage-driver vfs)
mkdir -p "$IMAGE_CACHE"

label_of() {  # IMAGE LABEL -> the label's value, empty if the image or the label is missing
  "${BUILDAH[@]}" inspect --type image --format "{{index .OCIv1.Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}

# ---- 2. base
# The recipe: this function's text is part of the key, so changing it makes a new base.
make_base() {  # ROOTFS
  local rootfs=$1
  mkdir -p "$IMAGE_CACHE/debs"
  "${SUDO[@]}" debootstrap --variant=minbase --include="$BASE_PACKAGES" --cache-dir="$IMAGE_CACHE/debs" \
    "$IMAGE_BASE_RELEASE" "$rootfs" ${DEBOOTSTRAP_MIRROR:+"$DEBOOTSTRAP_MIRROR"} >"$IMAGE_CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$IMAGE_CACHE/debootstrap.log" >&2; die "debootstrap of $IMAGE_BASE_RELEASE failed (log: \
$IMAGE_CACHE/debootstrap.log); a mirror other than debootstrap's default can be given as DEBOOTSTRAP_MIRROR"; }
  # what an image does not need: package lists and downloads, docs (copyright files stay), man pages, locales
  "${SUDO[@]}" bash -c 'cd "$1" && rm -rf var/cache/apt/* var/lib/apt/lists/* var/cache/debconf/*-old \
    var/log/* usr/share/man/* usr/share/info/* usr/share/locale/* usr/share/lintian debootstrap \
    && find usr/share/doc -mindepth 2 ! -name copyright ! -type d -delete \
    && find usr/share/doc -mindepth 1 -type d -empty -delete' _ "$rootfs"
}
BASE_KEY=$(printf '%s\n' "$IMAGE_BASE_RELEASE" "$BASE_PACKAGES" "$(declare -f make_base)" | sha256sum | cut -c1-16)
if [ "$(label_of "$BASE" dra-scheduler.base-key)" = "$BASE_KEY" ]; then
  log "base $BASE (key $BASE_KEY): already made"
else
  log "base $BASE (key $BASE_KEY): debootstrap --variant=minbase $IMAGE_BASE_RELEASE + $BASE_PACKAGES"
  work=$(mktemp -d "$IMAGE_CACHE/base-XXXXXX")
  trap '"${SUDO[@]}" rm -rf "$work"' EXIT
  make_base "$work/rootfs"
  "${SUDO[@]}" tar -C "$work/rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  step_done "debootstrap (root file system $("${SUDO[@]}" du -sh "$work/rootfs" | cut -f1))"
  ctr=$("${BUILDAH[@]}" from scratch)
  "${BUILDAH[@]}" add "$ctr" "$work/rootfs.tar" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd '["python3"]' --label dra-scheduler.base-key="$BASE_KEY" \
    --label org.opencontainers.image.description="Debian $IMAGE_BASE_RELEASE minbase + $BASE_PACKAGES" "$ctr"
  "${BUILDAH[@]}" commit --rm -q "$ctr" "$BASE" >/dev/null
  "${SUDO[@]}" rm -rf "$work"; trap - EXIT
  step_done "base $BASE committed"
fi

# ---- 3. wheels for the base's Python, from the package index as pip on this machine is set up; kept per
# Python version and pyproject.toml (a new dependency or pin downloads them again)
ctr=$("${BUILDAH[@]}" from --pull-never -q "$BASE")
PYVER=$("${BUILDAH[@]}" run --isolation chroot "$ctr" -- python3 -c \
  'import sys; print("%d.%d" % sys.version_info[:2])') || PYVER=""
"${BUILDAH[@]}" rm "$ctr" >/dev/null
[ -n "$PYVER" ] || die "python3 does not run in $BASE (buildah run --isolation chroot failed)"
HOST_PY=${HOST_PYTHON:-$REPO_ROOT/.venv/bin/python}
[ -x "$HOST_PY" ] || HOST_PY=python3
WHEELS=$IMAGE_CACHE/wheels/py$PYVER-$(sha256sum "$REPO_ROOT/pyproject.toml" | cut -c1-16)
if [ -f "$WHEELS/.complete" ]; then
  log "wheels for Python $PYVER: $(ls "$WHEELS" | wc -l) in $WHEELS"
else
  rm -rf "$IMAGE_CACHE/wheels" && mkdir -p "$WHEELS/self"
  # the project's wheel only to read its dependencies from; the image builds its own from the sources
  "$HOST_PY" -m pip wheel --no-deps -q -w "$WHEELS/self" "$REPO_ROOT" >&2
  build_requires=$("$HOST_PY" -c 'import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))' "$REPO_ROOT/pyproject.toml")
  mapfile -t build_requires <<<"$build_requires"
  "$HOST_PY" -m pip download -q --only-binary=:all: --python-version "$PYVER" -d "$WHEELS" \
    "$WHEELS"/self/*.whl "${build_requires[@]}" >&2 || die "pip could not download the wheels for Python \
$PYVER (the package index must be reachable, or its files in pip's cache)"
  rm -rf "$WHEELS/self" "$WHEELS"/dra_scheduler-*.whl
  touch "$WHEELS/.complete"
  step_done "wheels for Python $PYVER: $(ls "$WHEELS" | wc -l) in $WHEELS"
fi
printf '[global]\nno-index = true\nfind-links = /wheels\n' > "$IMAGE_CACHE/pip.conf"

# ---- 4. image
sources=$(awk 'toupper($1)=="COPY" { f=0; for (i=2;i<=NF;i++) if ($i ~ /^--from/) f=1; if (!f) for (i=2;i<NF;i++)
  if ($i !~ /^--/) print $i }' "$REPO_ROOT/Dockerfile")
# shellcheck disable=SC2086
inputs=$(cd "$REPO_ROOT" && { cat Dockerfile .dockerignore; find $sources -type f ! -path '*/__pycache__/*' \
  ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum; ls "$WHEELS";
  "${BUILDAH[@]}" inspect --type image --format '{{.FromImageID}}' "$BASE"; } | sha256sum | cut -c1-16)
if [ "${IMAGE_REBUILD:-0}" != 1 ] && [ "$(label_of "$IMAGE" dra-scheduler.build-inputs)" = "$inputs" ]; then
  log "$IMAGE: already built from the same inputs ($inputs)"
else
  log "$IMAGE: buildah bud --isolation chroot (inputs $inputs)"
  "${BUILDAH[@]}" bud --isolation chroot --pull-never --build-arg PYTHON_IMAGE="$BASE" \
    --volume "$WHEELS:/wheels:ro" --volume "$IMAGE_CACHE/pip.conf:/etc/pip.conf:ro" \
    --label dra-scheduler.build-inputs="$inputs" -t "$IMAGE" -f "$REPO_ROOT/Dockerfile" "$REPO_ROOT" >&2
  "${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true   # the image this one replaced, the build stage
  step_done "$IMAGE built"
fi
# the size as a registry's manifest lists it before compression: the sum of the layers (uncompressed tars)
size=$("${BUILDAH[@]}" inspect --type image "$IMAGE" | "$HOST_PY" -c 'import json, sys
print(sum(layer["size"] for layer in json.loads(json.load(sys.stdin)["Manifest"])["layers"]))')
log "$IMAGE: $(( size / 1048576 )) MiB uncompressed (limit ${IMAGE_SIZE_LIMIT_MIB} MiB), total $(( $(date +%s) - TOTAL_START )) s"
