# Container image of `dra-scheduler run` (manifests/deployment.yaml, charts/dra-scheduler).
#   docker build -t REGISTRY/dra-scheduler:0.1.0 .
# Without a registry: `make image` (image/build.sh) builds this file with buildah on a base made locally with
# debootstrap (--build-arg PYTHON_IMAGE=localhost/dra-scheduler-base:<debian release>) and checks the image.
# The base image is pinned to an exact Python patch release and Debian release. For byte-for-byte
# reproducible builds also pin its digest: python:3.11.14-slim-trixie@sha256:<digest> (from
# `docker buildx imagetools inspect python:3.11.14-slim-trixie`). tests/test_dockerfile.py checks this file,
# image/test_image.py the image built from it.
ARG PYTHON_IMAGE=python:3.11.14-slim-trixie

# --- build: the project and its dependencies in a virtualenv (wheels only, no compiler in the image)
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY scheduler ./scheduler
COPY plugins ./plugins
RUN python3 -m venv /opt/dra-scheduler \
 && /opt/dra-scheduler/bin/pip install --only-binary=:all: --no-binary=dra-scheduler . \
 && /opt/dra-scheduler/bin/dra-scheduler --help >/dev/null

# --- runtime: the virtualenv on the same base, an unprivileged user, nothing else
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="dra-scheduler" \
      org.opencontainers.image.description="Secondary Kubernetes scheduler: DRA, topology, gangs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
RUN useradd --uid 65532 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin scheduler
COPY --from=build /opt/dra-scheduler /opt/dra-scheduler
COPY LICENSE /licenses/LICENSE
ENV PATH=/opt/dra-scheduler/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Numeric, so Kubernetes' runAsNonRoot can verify it (the Deployment and the chart run as 65532 too).
USER 65532:65532
ENTRYPOINT ["dra-scheduler"]
CMD ["run"]
