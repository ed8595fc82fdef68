"""Trace-replay benchmark: the Alibaba GPU trace (cluster-trace-gpu-v2023, "openb") replayed the way the FGD paper
did it, scheduled by the real ``dra-scheduler simulate`` command, scored with the paper's metric.

    python bench/trace_replay.py [--workload default|gpushare100|multigpu50|gpuspec33|all ...] [--seeds 42-51]
                                 [--data DIR] [--config FILE] [--source CHECKOUT] [--json OUT] [--keep DIR]
                                 [--tasks N] [--skip-missing-data]

Defaults: workload ``default``, seed 42 (one run of 10,866 pods on 1,213 nodes / 6,212 GPUs). ``--config`` is
passed to ``simulate --config`` (to compare profiles); ``--source CHECKOUT`` runs ``python -m scheduler`` from
another checkout (e.g. ``git archive <commit> | tar -x -C DIR``) to compare commits; ``--json OUT`` writes every
figure; ``--keep DIR`` keeps the input, output and stderr of each run; ``--tasks N`` replays only the first N tasks.

The data is NOT part of this repository (its terms are research and study use; cite Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23). It is read
from ``--data DIR``, else ``$DRA_TRACE_DATA``, else ``../shared/data/gpu-trace-v2023/`` next to the checkout:
``openb_node_list_gpu_node.csv``, ``openb_pod_list_<workload>.csv`` and the paper's published results
``analysis_allo_discrete_openb4.csv``. Nothing is downloaded; a missing file stops the benchmark with a message
(``--skip-missing-data``: exit 0 instead, as ``make bench`` does).

Workload (as the paper's simulator, hkust-adsl/kubernetes-scheduler-simulator, does with ``-tune 1.3 -tuneseed S
--shuffle-pod=true``; read there in pkg/simulator/core.go and simulator.go):

1. Go ``math/rand`` seeded with S, one ``Int()`` drawn (it is logged there);
2. the tasks sorted by name, then ``Shuffle``d;
3. tuning to 130% of GPU capacity: ``Intn(len(tasks))`` picks from the tasks sorted by name, with replacement,
   appended as ``NAME-tuned-i`` while (arrived GPU milli + the pick's *per-GPU* milli) <= 1.3 x capacity; the
   arrived total grows by the pick's whole GPU milli (per-GPU milli x GPU count), as upstream does; the first pick
   that would pass stops it. (A workload above 1.3 x would lose ``Intn(len)`` picks instead; none of the four is.)
4. every task arrives once, in that order; nothing departs.

The Go random stream comes from a small Go program of ours (bench/trace/gorand/main.go) that ``go build`` compiles
into ``~/.cache/dra-scheduler/`` on first use (Go >= 1.24 ignores ``rand.Seed``; it uses
``rand.New(rand.NewSource(S))``, the same stream).

Cluster and tasks as DRA objects (one JSON ``List`` file): each of the 1,213 trace nodes a Node (allocatable cpu
``cpu_milli``m, memory ``memory_mib``Mi, pods 1001 as in the paper's node YAML), a ResourceSlice (driver
``gpu.nvidia.com``, pool = node name) whose devices ``gpu-<i>`` have attributes ``model`` and ``index``, capacity
``milli: 1000`` and ``allowMultipleAllocations: true`` (consumable capacity); one DeviceClass ``gpu.nvidia.com``.
Each task is a Pod (namespace ``trace``, ``creationTimestamp`` 1 s apart in arrival order, cpu/memory requests from
the trace) and, when ``num_gpu > 0``, a ResourceClaim: ``count: num_gpu``, ``capacity.requests.milli: gpu_milli``
(1000 for whole GPUs; the trace has ``gpu_milli < 1000`` only with ``num_gpu == 1``) and a CEL selector
``device.attributes["gpu.nvidia.com"].model in [...]`` when the task has a ``gpu_spec``.

The command ``dra-scheduler simulate FILE -o json --no-progress`` (``--config`` passed through) is timed as a
whole (wall clock: read, schedule, write). The queue takes pods in ``creationTimestamp`` order and, nothing
departing, a task refused at its turn can never be placed later: the curve by arrival order is what the paper's
one-attempt-per-task replay records. Checked on the output (any failure = exit 1): every GPU task placed has its
claim allocated on its node with ``count`` devices each consuming the requested milli, of an allowed model; no
device over 1000 milli; no node over its cpu, memory or pods; no claim allocated for a pod left pending; placed
pods were bound in arrival order (their resourceVersions increase).

Metric (the paper's analysis: scripts/analysis.py reads one ``[Alloc]`` log line per task, then
experiments/analysis/merge_alloc_discrete.py): after each task (placed, refused, CPU-only alike) the arrived GPU
milli (including that task and every refused one) and the allocated GPU milli; ``arrived% = round(arrived /
total_gpus / 10)`` (half to even), ``alloc% = round(allocated / total_gpus / 10, 2)``; the curve at each whole
arrived% p in 0..130 is the mean alloc% of the tasks with arrived% == p (if none, those with p-1 <= arrived% <=
p+1), rounded to 2 decimals. Printed at 80, 85, ... 130 beside the paper's published curves (mean over the same
seeds, per policy), with the GPUs left unallocated at the end. Validation: the tasks' order alone gives the curve
"nothing refused"; the published curves of all six policies must coincide with it up to where they start to
differ from one another (their first refusals), which only the exact task order achieves.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as `python bench/trace_replay.py`

from bench.procstat import peak_rss_mib  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "gpu-trace-v2023"
DATA_ENV = "DRA_TRACE_DATA"
GORAND_SRC = ROOT / "bench" / "trace" / "gorand"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dra-scheduler"

NODES_CSV = "openb_node_list_gpu_node.csv"
PUBLISHED_CSV = "analysis_allo_discrete_openb4.csv"
WORKLOADS = ("default", "gpushare100", "multigpu50", "gpuspec33")
POLICIES = ("01-Random", "02-DotProd", "03-GpuClustering", "04-GpuPacking", "05-BestFit", "06-FGD")
POINTS = tuple(range(80, 131, 5))
TUNE_RATIO = 1.3
MAX_POINT = 130
MILLI = 1000

DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"
NAMESPACE = "trace"
SCHEDULER_NAME = "dra-scheduler"
NODE_PODS = "1001"  # the paper's node YAML (data/node_yaml/openb_node_list_gpu_node.yaml): never the limit here
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TOLERANCE = 0.011  # published values have 2 decimals; summation order may move the last one


class BenchError(Exception):
    """A clear, user-facing reason to stop (missing data, no Go toolchain, the command failed)."""


# --------------------------------------------------------------------------------------------------
# The trace
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class Task:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0  # per GPU, as the paper's gpu-milli annotation (0 for CPU-only tasks)
    gpu_spec: tuple[str, ...] = ()  # allowed models; empty = any

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli


def data_dir(arg: str | None) -> Path:
    """``--data``, else ``$DRA_TRACE_DATA``, else the shared copy next to the checkout."""
    chosen = arg or os.environ.get(DATA_ENV) or str(DEFAULT_DATA)
    return Path(chosen).expanduser()


def data_file(directory: Path, name: str) -> Path:
    path = directory / name
    if not path.is_file():
        raise BenchError(
            f"trace data not found: {path}\n"
            f"  The benchmark reads the Alibaba cluster-trace-gpu-v2023 CSVs (and the FGD paper's "
            f"{PUBLISHED_CSV}) from a directory you provide: --data DIR or {DATA_ENV}=DIR "
            f"(default {DEFAULT_DATA}). They are not shipped with the project and nothing is downloaded."
        )
    return path


def read_nodes(path: Path) -> list[Node]:
    with open(path, newline="") as fh:
        return [
            Node(row["sn"], int(row["cpu_milli"]), int(row["memory_mib"]), int(row["gpu"]), row["model"])
            for row in csv.DictReader(fh)
        ]


def _spec(value: str | None) -> tuple[str, ...]:
    if value is None or value.strip().lower() in ("", "nan"):
        return ()
    return tuple(x for x in value.strip().split("|") if x)


def task_from_row(row: dict[str, str]) -> Task:
    num_gpu = int(row["num_gpu"])
    milli = 0
    if num_gpu > 0:
        raw = int(float(row.get("gpu_milli") or MILLI))
        if raw <= 0:
            raise BenchError(f"task {row['name']}: {num_gpu} GPU(s) of {raw} milli (not in the published workloads)")
        milli = min(raw, MILLI)  # the paper's conversion caps it at one GPU
    return Task(
        row["name"], int(row["cpu_milli"]), int(row["memory_mib"]), num_gpu, milli,
        _spec(row.get("gpu_spec")) if num_gpu > 0 else (),
    )


def read_tasks(path: Path) -> list[Task]:
    with open(path, newline="") as fh:
        return [task_from_row(row) for row in csv.DictReader(fh)]


# --------------------------------------------------------------------------------------------------
# Go math/rand, through our own Go program
# --------------------------------------------------------------------------------------------------

Draw = Callable[[int, Sequence[str]], list[list[int]]]


def gorand_binary() -> Path:
    """Build bench/trace/gorand into the cache (once per source version); its path."""
    digest = hashlib.sha256()
    for name in ("main.go", "go.mod"):
        digest.update((GORAND_SRC / name).read_bytes())
    out = CACHE / "bin" / f"gorand-{digest.hexdigest()[:12]}"
    if out.is_file():
        return out
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        raise BenchError("the Go toolchain (go) is needed to reproduce Go's math/rand task order; none on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "", "CGO_ENABLED": "0"}
    proc = subprocess.run([go, "build", "-o", str(tmp), "."], cwd=GORAND_SRC, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"go build of {GORAND_SRC} failed:\n{proc.stderr}")
    os.replace(tmp, out)
    return out


def go_draw(seed: int, ops: Sequence[str]) -> list[list[int]]:
    """One line of integers per op (see bench/trace/gorand/main.go) from a fresh Go source seeded with ``seed``."""
    proc = subprocess.run([str(gorand_binary()), str(seed), *ops], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchError(f"gorand failed: {proc.stderr.strip()}")
    lines = proc.stdout.split("\n")
    return [[int(x) for x in line.split()] for line in lines[: len(ops)]]


def arrival_order(tasks: Sequence[Task], seed: int, capacity_milli: int, ratio: float = TUNE_RATIO,
                  draw: Draw = go_draw) -> list[Task]:
    """The paper's task order for ``seed``: shuffled trace, then tuned to ``ratio`` x GPU capacity."""
    by_name = sorted(tasks, key=lambda t: t.name)
    n = len(by_name)
    total = sum(t.total_gpu_milli for t in by_name)
    target = ratio * capacity_milli
    if total > target:
        perm, picks = draw(seed, ["int", f"shuffle:{n}", f"down:{n}x{n}"])[1:]
        order = [by_name[i] for i in perm]
        for idx in picks:  # upstream tuneDownPods: drop random tasks until at or below the target
            if total <= target:
                break
            total -= order.pop(idx).total_gpu_milli
        return order
    k = max(1024, 2 * n)
    while True:
        perm, picks = draw(seed, ["int", f"shuffle:{n}", f"intn:{n}x{k}"])[1:]
        order = [by_name[i] for i in perm]
        if total == target:
            return order
        for added, idx in enumerate(picks):  # upstream tuneUpPods: it tests the pick's per-GPU milli, adds all
            pick = by_name[idx]
            if total + pick.gpu_milli > target:
                return order
            total += pick.total_gpu_milli
            order.append(Task(f"{pick.name}-tuned-{added}", pick.cpu_milli, pick.memory_mib, pick.num_gpu,
                              pick.gpu_milli, pick.gpu_spec))
        k *= 2  # not enough draws: again with more (same stream)


# --------------------------------------------------------------------------------------------------
# Kubernetes objects
# --------------------------------------------------------------------------------------------------


def model_selector(models: Sequence[str]) -> str:
    return f'device.attributes["{DRIVER}"].model in [{", ".join(json.dumps(m) for m in models)}]'


def node_objects(node: Node) -> list[dict[str, Any]]:
    resources = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": NODE_PODS}
    objs: list[dict[str, Any]] = [{
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": {"kubernetes.io/hostname": node.name}},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }]
    if node.gpus > 0:
        objs.append({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node.name}-gpu"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node.name,
                "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "allowMultipleAllocations": True,
                        "attributes": {"model": {"string": node.model}, "index": {"int": i}},
                        "capacity": {"milli": {"value": str(MILLI)}},
                    }
                    for i in range(node.gpus)
                ],
            },
        })
    return objs


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def task_objects(task: Task, arrival: int) -> list[dict[str, Any]]:
    """The task's Pod and, for a GPU task, its ResourceClaim (claim first)."""
    stamp = (START + dt.timedelta(seconds=arrival)).strftime("%Y-%m-%dT%H:%M:%SZ")
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": f"{task.cpu_milli}m", "memory": f"{task.memory_mib}Mi"}},
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": task.name, "namespace": NAMESPACE, "creationTimestamp": stamp},
        "spec": {"schedulerName": SCHEDULER_NAME, "containers": [container]},
    }
    if task.num_gpu == 0:
        return [pod]
    exactly: dict[str, Any] = {
        "deviceClassName": DEVICE_CLASS,
        "allocationMode": "ExactCount",
        "count": task.num_gpu,
        "capacity": {"requests": {"milli": str(task.gpu_milli)}},
    }
    if task.gpu_spec:
        exactly["selectors"] = [{"cel": {"expression": model_selector(task.gpu_spec)}}]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": task.name, "namespace": NAMESPACE, "creationTimestamp": stamp},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": task.name}]
    container["resources"]["claims"] = [{"name": "gpu"}]
    return [claim, pod]


def manifests(nodes: Sequence[Node], order: Sequence[Task]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [device_class()]
    for node in nodes:
        objs.extend(node_objects(node))
    for i, task in enumerate(order):
        objs.extend(task_objects(task, i))
    return objs


# --------------------------------------------------------------------------------------------------
# The paper's metric
# --------------------------------------------------------------------------------------------------


def _round2(x: float) -> float:
    """numpy's round(x, 2) (pandas' mean is a numpy float): half to even on x * 100."""
    return round(x * 100) / 100


def allocation_curve(arrived: Sequence[int], used: Sequence[int], total_gpus: int) -> dict[int, float]:
    """Whole arrived% (0..130) -> mean allocated% of the tasks at that arrived% (merge_alloc_discrete.py)."""
    arr = [round(a / total_gpus / 10, 0) for a in arrived]
    alloc = [round(u / total_gpus / 10, 2) for u in used]
    groups: dict[float, list[float]] = defaultdict(list)
    for a, u in zip(arr, alloc, strict=True):
        groups[a].append(u)
    out: dict[int, float] = {}
    for p in range(MAX_POINT + 1):
        vals = groups.get(float(p))
        if not vals:
            vals = [u for q in (p - 1, p, p + 1) for u in groups.get(float(q), ())]
            if not vals:
                continue
        out[p] = _round2(math.fsum(vals) / len(vals))
    return out


def cumulative(values: Iterable[int]) -> list[int]:
    out, acc = [], 0
    for v in values:
        acc += v
        out.append(acc)
    return out


# --------------------------------------------------------------------------------------------------
# Running the command and reading its answer
# --------------------------------------------------------------------------------------------------


@dataclass
class Command:
    wall: float
    cpu: float
    rss_mib: float | None
    code: int
    stderr: str


def simulate_argv(path: Path, config: str | None, source: str | None = None) -> list[str]:
    """The installed ``dra-scheduler`` next to this Python; ``python -m scheduler`` run from ``source``."""
    exe = Path(sys.executable).parent / "dra-scheduler"
    if source:
        base = [sys.executable, "-m", "scheduler"]
    elif exe.is_file():
        base = [str(exe)]
    else:
        base = ["dra-scheduler"] if shutil.which("dra-scheduler") else [sys.executable, "-m", "scheduler"]
    argv = [*base, "simulate", str(path), "-o", "json", "--no-progress"]
    if config:
        argv += ["--config", config]
    return argv



def run_simulate(argv: Sequence[str], out_path: Path, err_path: Path, cwd: Path = ROOT) -> Command:
    start = time.perf_counter()
    peak: float | None = None
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, cwd=cwd)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = peak_rss_mib(proc.pid) or peak
            time.sleep(0.2)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = err_path.read_text(errors="replace")
    return Command(wall, usage.ru_utime + usage.ru_stime, peak, proc.returncode, stderr)


def _load_json(path: Path) -> Any:
    try:
        import orjson

        return orjson.loads(path.read_bytes())
    except ImportError:  # pragma: no cover - orjson is a dependency of the project
        with open(path) as fh:
            return json.load(fh)


_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _milli(q: str) -> int:
    """A plain quantity ("460", "1", "6000m", "12288Mi") in milli-units; enough for what the output carries."""
    q = str(q)
    if q.endswith("m"):
        return int(q[:-1])
    for suffix in ("Ki", "Mi", "Gi", "Ti", "k", "M", "G"):
        if q.endswith(suffix):
            return int(q[: -len(suffix)]) * _UNITS[suffix] * 1000
    return int(float(q) * 1000)


@dataclass
class Replay:
    placed: list[bool]
    nodes: list[str | None]
    used_milli: list[int]  # GPU milli allocated to each task (0 if refused or CPU-only)
    problems: list[str] = field(default_factory=list)
    order_inversions: int = 0


def evaluate(nodes: Sequence[Node], order: Sequence[Task], output: dict[str, Any]) -> Replay:
    """Placements by arrival order, the GPU milli each got, and every check that failed."""
    pods: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, Any]] = {}
    for item in output.get("items", []):
        meta = item.get("metadata", {})
        if meta.get("namespace") != NAMESPACE:
            continue
        if item.get("kind") == "Pod":
            pods[meta["name"]] = item
        elif item.get("kind") == "ResourceClaim":
            claims[meta["name"]] = item
    node_by_name = {n.name: n for n in nodes}
    problems: list[str] = []
    placed: list[bool] = []
    where: list[str | None] = []
    used: list[int] = []
    device_use: Counter[tuple[str, str]] = Counter()
    cpu_use: Counter[str] = Counter()
    mem_use: Counter[str] = Counter()
    pod_count: Counter[str] = Counter()
    last_rv = -1
    inversions = 0

    def problem(msg: str) -> None:
        if len(problems) < 50:
            problems.append(msg)
        elif len(problems) == 50:
            problems.append("... (more problems not listed)")

    for task in order:
        pod = pods.get(task.name)
        if pod is None:
            problem(f"pod {task.name} missing from the output")
            placed.append(False)
            where.append(None)
            used.append(0)
            continue
        node_name = pod.get("spec", {}).get("nodeName") or None
        claim = claims.get(task.name)
        allocation = ((claim or {}).get("status") or {}).get("allocation")
        got = 0
        if node_name is None:
            if allocation:
                problem(f"claim {task.name} allocated but its pod is pending")
        else:
            node = node_by_name.get(node_name)
            if node is None:
                problem(f"pod {task.name} on unknown node {node_name}")
            cpu_use[node_name] += task.cpu_milli
            mem_use[node_name] += task.memory_mib
            pod_count[node_name] += 1
            rv = int(pod.get("metadata", {}).get("resourceVersion") or 0)
            if rv <= last_rv:
                inversions += 1
            last_rv = max(last_rv, rv)
            if task.num_gpu > 0:
                results = ((allocation or {}).get("devices") or {}).get("results") or []
                if len(results) != task.num_gpu:
                    problem(f"pod {task.name} placed with {len(results)} device(s) for {task.num_gpu} GPU(s)")
                seen = set()
                for res in results:
                    key = (res.get("pool", ""), res.get("device", ""))
                    if key in seen:
                        problem(f"claim {task.name} holds device {key} twice")
                    seen.add(key)
                    consumed = (res.get("consumedCapacity") or {}).get("milli")
                    milli = _milli(consumed) // 1000 if consumed is not None else MILLI
                    if milli != task.gpu_milli:
                        problem(f"claim {task.name}: device {key} consumes {milli} milli, requested {task.gpu_milli}")
                    device_use[key] += milli
                    got += milli
                    if res.get("driver") != DRIVER or key[0] != node_name:
                        problem(f"claim {task.name}: device {key} of driver {res.get('driver')} not on {node_name}")
                    elif node is not None and task.gpu_spec and node.model not in task.gpu_spec:
                        problem(f"claim {task.name}: model {node.model} not in {task.gpu_spec}")
        placed.append(node_name is not None)
        where.append(node_name)
        used.append(got)

    for (pool, dev), milli in sorted(device_use.items()):
        if milli > MILLI:
            problem(f"device {pool}/{dev} allocated {milli} milli > {MILLI}")
    for name, cpu in cpu_use.items():
        node = node_by_name.get(name)
        if node is None:
            continue
        if cpu > node.cpu_milli:
            problem(f"node {name}: cpu {cpu}m requested > {node.cpu_milli}m allocatable")
        if mem_use[name] > node.memory_mib:
            problem(f"node {name}: memory {mem_use[name]}Mi requested > {node.memory_mib}Mi allocatable")
        if pod_count[name] > int(NODE_PODS):
            problem(f"node {name}: {pod_count[name]} pods > {NODE_PODS}")
    if inversions:
        problem(f"{inversions} placed pod(s) bound out of arrival order (resourceVersion): the curve by arrival "
                "order would not be what the scheduler saw")
    return Replay(placed, where, used, problems, inversions)


# --------------------------------------------------------------------------------------------------
# Published results and the validation
# --------------------------------------------------------------------------------------------------


def read_published(path: Path, workload: str) -> dict[str, dict[int, dict[int, float]]]:
    """policy -> seed -> point -> allocated % (the rows of ``openb_pod_list_<workload>``)."""
    out: dict[str, dict[int, dict[int, float]]] = defaultdict(dict)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["workload"] != f"openb_pod_list_{workload}":
                continue
            curve = {p: float(row[str(p)]) for p in range(MAX_POINT + 1) if row.get(str(p), "") not in ("", None)}
            out[row["sc_policy"]][int(row["seed"])] = curve
    return dict(out)


def mean_curves(curves: Sequence[dict[int, float]]) -> dict[int, float]:
    out: dict[int, float] = {}
    for p in range(MAX_POINT + 1):
        vals = [c[p] for c in curves if p in c]
        if vals and len(vals) == len(curves):
            out[p] = math.fsum(vals) / len(vals)
    return out


def first_difference(a: dict[int, float], b: dict[int, float]) -> int | None:
    """The first point where two curves differ (or one lacks it); None if equal everywhere."""
    for p in range(MAX_POINT + 1):
        if (p in a) != (p in b) or (p in a and abs(a[p] - b[p]) > TOLERANCE):
            return p
    return None


@dataclass
class Validation:
    published_agree_until: int  # points [0, this) where the six published policies all agree
    ideal_matches_until: int  # points [0, this) where our order's no-refusal curve matches them
    ours_matches_until: int  # points [0, this) where our curve equals that no-refusal curve
    ok: bool


def validate(ideal: dict[int, float], ours: dict[int, float], published_seed: dict[str, dict[int, float]],
             complete_until: int = MAX_POINT + 1) -> Validation:
    """``complete_until``: points [0, this) have all their tasks (less when the replay was shortened)."""
    curves = [published_seed[p] for p in POLICIES if p in published_seed]
    agree = complete_until
    for p in range(complete_until):
        vals = [c.get(p) for c in curves]
        if any(v is None for v in vals) or max(v for v in vals if v is not None) - min(
                v for v in vals if v is not None) > TOLERANCE:
            agree = p
            break
    limit = agree  # a shortened replay (--tasks) has no points past its last arrival
    for p in range(agree):
        if p not in ideal:
            limit = p
            break
    match = limit
    for p in range(limit):
        if any(abs(c[p] - ideal[p]) > TOLERANCE for c in curves):
            match = p
            break
    diff = first_difference(ideal, ours)
    ours_until = complete_until if diff is None else min(diff, complete_until)
    return Validation(agree, match, ours_until, ok=bool(curves) and limit > 0 and match == limit)


# --------------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------------


def describe(task: Task) -> str:
    gpus = "CPU only" if task.num_gpu == 0 else (
        f"{task.gpu_milli} milli of 1 GPU" if task.gpu_milli < MILLI else f"{task.num_gpu} GPU(s)")
    spec = f", models {'|'.join(task.gpu_spec)}" if task.gpu_spec else ""
    return f"{task.name} ({gpus}{spec}, cpu {task.cpu_milli}m, memory {task.memory_mib}Mi)"


def kind_of(task: Task) -> str:
    if task.num_gpu == 0:
        return "cpu-only"
    if task.gpu_milli < MILLI:
        return "gpu-share"
    return f"{task.num_gpu}-gpu"


def could_fit(nodes: Sequence[Node], task: Task) -> bool:
    """Whether some node of the cluster, empty, could hold ``task`` (model, GPU count, cpu, memory)."""
    return any(
        n.gpus >= task.num_gpu and n.cpu_milli >= task.cpu_milli and n.memory_mib >= task.memory_mib
        and (not task.gpu_spec or not task.num_gpu or n.model in task.gpu_spec)
        for n in nodes
    )


def run_one(workload: str, seed: int, directory: Path, args: argparse.Namespace,
            published: dict[str, dict[int, dict[int, float]]]) -> dict[str, Any]:
    nodes = read_nodes(data_file(directory, NODES_CSV))
    tasks = read_tasks(data_file(directory, f"openb_pod_list_{workload}.csv"))
    total_gpus = sum(n.gpus for n in nodes)
    order = arrival_order(tasks, seed, total_gpus * MILLI)
    if args.tasks:
        order = order[: args.tasks]
    objs = manifests(nodes, order)
    keep = Path(args.keep) / f"{workload}-{seed}" if args.keep else None
    with tempfile.TemporaryDirectory(prefix="trace-replay-") as tmp:
        where = keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        inp = where / "input.json"
        with open(inp, "w") as fh:
            json.dump({"apiVersion": "v1", "kind": "List", "items": objs}, fh, separators=(",", ":"))
        argv = simulate_argv(inp, args.config, args.source)
        cwd = Path(args.source).resolve() if args.source else ROOT
        print(f"[{workload} seed {seed}] {len(order):,} tasks ({len(nodes):,} nodes, {total_gpus:,} GPUs): "
              f"{' '.join(argv)}" + (f" (in {cwd})" if args.source else "") + " ...", flush=True)
        cmd = run_simulate(argv, where / "output.json", where / "stderr.log", cwd)
        if cmd.code != 0:
            raise BenchError(f"simulate exited {cmd.code}:\n{cmd.stderr[-4000:]}")
        output = _load_json(where / "output.json")
    del objs
    replay = evaluate(nodes, order, output)
    summary = output.get("summary", {})
    arrived = cumulative(t.total_gpu_milli for t in order)
    used = cumulative(replay.used_milli)
    curve = allocation_curve(arrived, used, total_gpus)
    # "no refusal": every task some empty node could hold is placed (a task that no node of the cluster could hold
    # even empty, e.g. 8 GPUs of a model whose nodes have 4, is refused by every policy, the published ones too)
    ideal = allocation_curve(arrived, cumulative(t.total_gpu_milli if could_fit(nodes, t) else 0 for t in order),
                             total_gpus)
    refused = [i for i, ok in enumerate(replay.placed) if not ok]
    first = refused[0] if refused else None
    refused_kinds = Counter(kind_of(order[i]) for i in refused)
    seed_rows = {p: published[p][seed] for p in POLICIES if p in published and seed in published[p]}
    capacity = total_gpus * MILLI
    complete = MAX_POINT + 1
    if args.tasks and arrived:  # shortened: the group of whole % p holds arrivals in [p - 0.5, p + 0.5)
        complete = max(0, min(MAX_POINT + 1, math.floor(100 * arrived[-1] / capacity - 0.5) + 1))
    validation = validate(ideal, curve, seed_rows, complete) if seed_rows else None
    result: dict[str, Any] = {
        "workload": workload,
        "seed": seed,
        "tasks": len(order),
        "nodes": len(nodes),
        "total_gpus": total_gpus,
        "arrived_gpu_pct": round(100 * arrived[-1] / capacity, 2) if arrived else 0.0,
        "placed": sum(replay.placed),
        "refused": len(refused),
        "refused_by_kind": dict(sorted(refused_kinds.items())),
        "first_refusal": None if first is None else {
            "index": first,
            "task": describe(order[first]),
            "arrived_pct": round(100 * arrived[first] / capacity, 2),
        },
        "allocated_gpu_milli": used[-1] if used else 0,
        "unallocated_gpus": round((capacity - (used[-1] if used else 0)) / MILLI, 1),
        "curve": curve,
        "wall_s": round(cmd.wall, 2),
        "cpu_s": round(cmd.cpu, 2),
        "peak_rss_mib": None if cmd.rss_mib is None else round(cmd.rss_mib, 1),
        "pods_per_s": round(len(order) / cmd.wall, 1) if cmd.wall > 0 else None,
        "simulate_summary": summary,
        "checks": {"ok": not replay.problems, "problems": replay.problems,
                   "bind_order_inversions": replay.order_inversions},
        "validation": None if validation is None else vars(validation),
    }
    print_run(result, seed_rows)
    return result


def print_run(r: dict[str, Any], seed_rows: dict[str, dict[int, float]]) -> None:
    print(f"  command: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} CPU-s, {r['pods_per_s']} pods/s, "
          f"peak RSS {r['peak_rss_mib']} MiB; placed {r['placed']:,} / {r['tasks']:,} "
          f"(arrived {r['arrived_gpu_pct']}% of GPU capacity)")
    if r["refused"]:
        fr = r["first_refusal"]
        kinds = ", ".join(f"{k} {v}" for k, v in r["refused_by_kind"].items())
        print(f"  refused {r['refused']:,} ({kinds}); first at task #{fr['index']} = {fr['arrived_pct']}% arrived: "
              f"{fr['task']}")
    print(f"  GPUs unallocated at the end: {r['unallocated_gpus']:,} of {r['total_gpus']:,}")
    v = r["validation"]
    if v is not None:
        state = "OK" if v["ok"] else "MISMATCH"
        agree, match, ours = v["published_agree_until"], v["ideal_matches_until"], v["ours_matches_until"]
        print(f"  validation vs published seed {r['seed']} ({state}): the six policies agree on 0..{agree - 1}%, "
              f"the no-refusal curve of this task order matches them on 0..{match - 1}%, ours equals it on "
              f"0..{ours - 1}%" + (" (then our first refusal)" if r["refused"] else ""))
        if v["ours_matches_until"] > 0:
            p = min(v["ours_matches_until"], v["ideal_matches_until"]) - 1
            pub = ", ".join(f"{name.split('-', 1)[1]} {c[p]:.2f}" for name, c in seed_rows.items() if p in c)
            print(f"    at {p}%: ours {r['curve'].get(p, float('nan')):.2f}; published {pub}")
    checks = r["checks"]
    if checks["ok"]:
        print("  checks: OK (devices <= 1000 milli, nodes within cpu/memory/pods, claims on their pod's node, "
              "allowed models, bound in arrival order)")
    else:
        print("  checks FAILED:")
        for msg in checks["problems"]:
            print(f"    - {msg}")


def print_table(workload: str, runs: Sequence[dict[str, Any]],
                published: dict[str, dict[int, dict[int, float]]]) -> dict[str, Any]:
    seeds = [r["seed"] for r in runs]
    ours = mean_curves([r["curve"] for r in runs])
    pub: dict[str, dict[int, float]] = {}
    for policy in POLICIES:
        rows = [published.get(policy, {}).get(s) for s in seeds]
        if rows and all(row is not None for row in rows):
            pub[policy] = mean_curves([row for row in rows if row is not None])
    label = f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of seeds {','.join(map(str, seeds))}"
    print(f"\n{workload}, {label}: allocated % of GPU capacity at arrived % (published: FGD paper, same seeds)")
    names = ["ours", *[p.split("-", 1)[1] for p in pub]]
    print("arrived% " + "".join(f"{n:>14}" for n in names))
    points = sorted(set(POINTS) | {100, 130})
    for p in points:
        cells = [ours.get(p), *[c.get(p) for c in pub.values()]]
        print(f"{p:>7}% " + "".join(f"{'-' if v is None else f'{v:.2f}':>14}" for v in cells))
    total_gpus = runs[0]["total_gpus"]
    unalloc = [math.fsum(r["unallocated_gpus"] for r in runs) / len(runs)]
    unalloc += [total_gpus * (1 - c[MAX_POINT] / 100) if MAX_POINT in c else float("nan") for c in pub.values()]
    print("unalloc. " + "".join(f"{u:>14,.0f}" for u in unalloc) + "   GPUs (ours: at the end; published: from 130%)")
    pods_s = [r["pods_per_s"] for r in runs if r["pods_per_s"]]
    walls = [r["wall_s"] for r in runs]
    print(f"pods/s (whole command): {', '.join(f'{x:.1f}' for x in pods_s)}; wall s: "
          f"{', '.join(f'{x:.1f}' for x in walls)}")
    return {
        "workload": workload,
        "seeds": seeds,
        "points": {str(p): {"ours": ours.get(p), **{k: v.get(p) for k, v in pub.items()}} for p in points},
        "unallocated_gpus": {"ours": unalloc[0], **{k: u for k, u in zip(pub, unalloc[1:], strict=True)}},
    }


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if hi < lo:
                raise argparse.ArgumentTypeError(f"empty seed range {part}")
            seeds.extend(range(lo, hi + 1))
        else:
            seeds.append(int(part))
    if not seeds:
        raise argparse.ArgumentTypeError("no seed")
    return seeds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", action="append", choices=[*WORKLOADS, "all"],
                    help="trace workload (repeatable; 'all' = the four); default: default")
    ap.add_argument("--seeds", type=parse_seeds, default=[42], help="e.g. 42, 42-51, 42,45 (default 42)")
    ap.add_argument("--data", help=f"directory of the trace CSVs (default ${DATA_ENV} or {DEFAULT_DATA})")
    ap.add_argument("--config", help="KubeSchedulerConfiguration passed to simulate --config")
    ap.add_argument("--json", dest="json_out", help="write the results as JSON to this file")
    ap.add_argument("--keep", help="keep each run's input.json, output.json and stderr.log under DIR/WORKLOAD-SEED")
    ap.add_argument("--source", help="run `python -m scheduler` from this checkout (e.g. a `git worktree` or "
                    "`git archive` of another commit) instead of the installed dra-scheduler, to compare")
    ap.add_argument("--tasks", type=int, default=0, help="replay only the first N tasks (smoke test)")
    ap.add_argument("--skip-missing-data", action="store_true",
                    help="exit 0 with a message when the trace data is not there (make bench)")
    args = ap.parse_args(argv)
    chosen = args.workload or ["default"]
    args.workloads = list(WORKLOADS) if "all" in chosen else list(dict.fromkeys(chosen))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    directory = data_dir(args.data)
    try:
        for name in (NODES_CSV, PUBLISHED_CSV, *(f"openb_pod_list_{w}.csv" for w in args.workloads)):
            data_file(directory, name)
    except BenchError as exc:
        if args.skip_missing_data:
            print(f"trace replay skipped: {exc}")
            return 0
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.source and not (Path(args.source) / "scheduler" / "__main__.py").is_file():
        print(f"error: --source {args.source}: no scheduler/__main__.py there", file=sys.stderr)
        return 1
    results: dict[str, Any] = {"data": str(directory), "config": args.config, "source": args.source,
                               "runs": [], "tables": []}
    failed = False
    try:
        for workload in args.workloads:
            published = read_published(directory / PUBLISHED_CSV, workload)
            runs = []
            for seed in args.seeds:
                run = run_one(workload, seed, directory, args, published)
                runs.append(run)
                failed |= not run["checks"]["ok"]
                failed |= run["validation"] is not None and not run["validation"]["ok"]
            results["runs"].extend(runs)
            results["tables"].append(print_table(workload, runs, published))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(results, fh, indent=1)
    if failed:
        print("\nFAILED: a check or the validation did not pass (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
