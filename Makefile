# dra-scheduler developer entry points. Everything runs from the project's own virtualenv.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint unit e2e demo throughput bench bench-trace run clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check scheduler plugins tests bench
	$(BIN)/mypy

unit: install
	$(BIN)/pytest tests

# End-to-end tests against a real control plane (e2e/README.md), with `dra-scheduler run` as a subprocess.
# Builds the pinned binaries first if they are missing (cold: ~13 min, cached in ~/.cache/dra-scheduler).
e2e: install e2e-build
	$(BIN)/ruff check e2e
	$(BIN)/pytest e2e

# The README's test command: lint (ruff + mypy strict), the fast tests, the image and the end-to-end tests.
test: lint unit image e2e

# The Dockerfile built with buildah on a Debian base made here by debootstrap (no registry, no daemon), then
# checked inside the image (image/build.sh, image/test_image.py; needs root or sudo -n, installs buildah and
# debootstrap with apt-get when missing). Cached in ~/.cache/dra-scheduler/image: cold ~1.5 min, warm ~10 s.
.PHONY: image
image: install
	$(BIN)/ruff check image
	image/build.sh
	$(BIN)/pytest image

# The example workloads scheduled live on the demo fleet (cluster up, scheduler, kubectl apply, cluster down).
demo: install e2e-build
	$(BIN)/python -m e2e.demo

# Live throughput side by side with kube-scheduler 1.37.2 (e2e/throughput.py): 1,000 single-GPU template-claim
# pods on 200 fake 8-GPU nodes, alternating rounds, client QPS 200 and 5000; 7 min on 2 quiet cores (17 when shared).
throughput: install e2e-build
	$(BIN)/python -m e2e.throughput

# Live deep backlog side by side with kube-scheduler 1.37.2 (e2e/backlog.py): 200 fake 8-GPU nodes full, 5,000
# one-GPU pods pending (3 priorities), running pods deleted at 20/s for 60 s; release->bind delay, binds, idle CPU,
# order fidelity. E.g. make backlog BACKLOG_ARGS="--nodes 20 --pods 300 --window 5".
.PHONY: backlog
BACKLOG_ARGS ?=
backlog: install e2e-build
	$(BIN)/python -m e2e.backlog $(BACKLOG_ARGS)

bench: install
	$(BIN)/python bench/bench_simulate.py
	$(BIN)/python bench/bench_gang.py
	$(BIN)/python bench/bench_topology.py --core
	$(BIN)/python bench/bench_preemption.py
	$(BIN)/python bench/trace_replay.py --skip-missing-data

# The Alibaba GPU trace replayed as the FGD paper (USENIX ATC'23) does, through `dra-scheduler simulate`, beside
# the paper's published allocation curves (bench/trace_replay.py). Data read from ../shared/data/gpu-trace-v2023/
# or TRACE_DATA=DIR (never shipped); needs Go (builds bench/trace/gorand into ~/.cache/dra-scheduler/).
# One run = 10,866 pods (default, seed 42): 9 min at 5d1f8b6, 5.6 min at 0cf0494 on this shared 2-core machine.
# E.g. make bench-trace TRACE_ARGS="--workload all --seeds 42-51".
TRACE_ARGS ?= --workload default --seeds 42
bench-trace: install
	$(BIN)/python bench/trace_replay.py $(if $(TRACE_DATA),--data $(TRACE_DATA)) $(TRACE_ARGS)

# The main job: simulate the example workloads on the demo fleet and print the placement table.
run: install
	$(BIN)/dra-scheduler simulate manifests/examples/ -o table

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# ---- e2e control plane (e2e/README.md): etcd + kube-apiserver + kube-controller-manager + kwok on loopback
.PHONY: e2e-build cluster-up cluster-down

# Build the pinned binaries (e2e/versions.env) into ~/.cache/dra-scheduler/bin/<k8s-version>/; cached.
e2e-build:
	e2e/build.sh

cluster-up: e2e-build
	e2e/cluster.sh up

cluster-down:
	e2e/cluster.sh down

# ---- soak (e2e/soak.py): two leader-elected replicas on the e2e control plane for SOAK_MINUTES (own run dir,
# audit log on): churn of GPU/shared-claim/gang/anti-affinity/preemptor pods on 40 kwok nodes x 8 GPUs, node and
# slice maintenance, kill -9 and SIGSTOP of the leader, etcd and kube-apiserver restarts. Fails on any violation
# (double allocation, stale reservation, partial gang, unexplained pending pod, a write without the Lease),
# traceback, or a leader RSS slope above 20 MiB/h after warm-up. Output in /tmp/dra-scheduler-soak/<time>/.
.PHONY: soak
SOAK_MINUTES ?= 20
soak: install e2e-build
	$(BIN)/python -m e2e.soak --minutes $(SOAK_MINUTES)
