"""The interconnect of the devices of one node, as a networkx graph (ARCHITECTURE §3.4).

Inputs, in order of precedence:

1. the node annotation ``dra-scheduler.io/device-topology``: JSON
   ``{"driver": "gpu.nvidia.com", "devices": ["gpu-0", ...], "matrix": [["X", "NV18", ...], ...]}`` with the
   codes of ``nvidia-smi topo -m`` (``X``, ``NV<n>``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``);
2. profiles from the plugin args, keyed by ``productName`` (an all-to-all NVLink code, or a matrix over the
   node's GPUs in index order);
3. the standard attributes ``resource.kubernetes.io/{pcieRoot,numaNode,pciBusID}`` (same root ≈ PXB, same NUMA
   node ≈ NODE, otherwise SYS).

NVLink comes from (1) or (2). The PCIe/NUMA structure comes from the PCIe codes of (1) or (2) where a pair has
one, otherwise from (3); NVLink pairs hide their PCIe relation in ``topo -m``, so the attributes fill it in.

The graph has one vertex per physical GPU, one per NVSwitch fabric (an all-to-all group of ≥ 4 GPUs with equal
link counts), direct NVLink edges otherwise (attribute ``links``), and the PCIe tree: PCIe switch (PIX level),
root complex (PXB), host bridge (PHB), NUMA node (NODE) and the SMP interconnect (SYS) on top, with NICs of
other drivers hung under their root complex or NUMA node. Every edge has a nominal bandwidth (``bw``, in tenths
of GB/s, one direction), decreasing up the PCIe tree, so that the *widest path* between two GPUs — a path that
never passes through a third GPU: GPUs do not forward — has the bandwidth of the pair's actual connection.

Pairwise bandwidth here means that direct connection (NVLink, through an NVSwitch, or PCIe), not a multi-hop
route through other GPUs: on DGX-1-style meshes the two differ, and NCCL's point-to-point traffic between
non-peers goes over PCIe. Numbers are nominal and used only for relative scoring.

The model of a node depends only on its inputs; nodes of one SKU share it (:func:`build_topology` is cached by
an input key), and the best-subset tables of :mod:`plugins.topology.scoring` are shared by fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import importlib
import json
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.api.dra import Device, ResourceSlice

if TYPE_CHECKING:
    # imported where a graph is built (build_topology): networkx takes ~0.08 s to import, and a scheduler whose
    # pods never ask for a topology never needs it (start-up, issue #16)
    import networkx as nx

ANNOTATION = "dra-scheduler.io/device-topology"
STD = "resource.kubernetes.io"
PCIE_ROOT = f"{STD}/pcieRoot"
NUMA_NODE = f"{STD}/numaNode"
PCI_BUS_ID = f"{STD}/pciBusID"
# Pre-standard NUMA aliases (driver-data.md §4.1), for NICs of other drivers.
NUMA_ALIASES = ("dra.net/numaNode", "numaNode", "numa")

# PCIe levels, closest first, with a nominal point-to-point bandwidth (tenths of GB/s, one direction).
PCIE_LEVELS: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
PCIE_BW: Mapping[str, int] = {"PIX": 240, "PXB": 200, "PHB": 160, "NODE": 120, "SYS": 80}
_BW_PCIE = {v: k for k, v in PCIE_BW.items()}
_NV_RE = re.compile(r"^NV(\d{1,2})$")

# Per-link NVLink bandwidth (tenths of GB/s, as `nvidia-smi nvlink -s`), by product name fragment.
_NVLINK_SPEED: tuple[tuple[str, int], ...] = (
    ("B300", 531),
    ("B200", 531),
    ("GB200", 531),
    ("H100", 266),
    ("H200", 266),
    ("H800", 266),
    ("H20", 266),
    ("A100", 258),
    ("A800", 258),
    ("V100", 250),
    ("P100", 200),
    ("A40", 141),
    ("A6000", 141),
)
DEFAULT_NVLINK_SPEED = 250
SINGLE = 1 << 30  # "bandwidth" of a one-GPU set: no pair, never the bottleneck


class TopologyInputError(ValueError):
    """Malformed topology input (annotation or profile); reported and ignored."""


_prewarm: threading.Thread | None = None


def prewarm_networkx() -> None:
    """Import networkx in a background thread, once per process (a no-op once it is imported).

    The first scheduling cycle that meets a GPU node builds its graph (:func:`build_topology`), and importing
    networkx there was ~0.14 s of the first pod's latency on every start (measured live: the first bind came
    0.25 s after the caches synced). Started when the plugin is built, the import runs while the scheduler
    waits for the API server's discovery and list answers. A failed import is left to the caller's own
    ``import networkx``, which raises it where it matters."""
    global _prewarm
    if _prewarm is not None or "networkx" in sys.modules:
        return

    def run() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module("networkx")

    _prewarm = threading.Thread(target=run, name="import-networkx", daemon=True)
    _prewarm.start()


def nvlink_speed(product: str) -> int:
    for frag, speed in _NVLINK_SPEED:
        if frag in product:
            return speed
    return DEFAULT_NVLINK_SPEED


def parse_code(code: Any, where: str) -> tuple[str, int]:
    """``("NV", links)``, ``(pcie level, 0)`` or ``("X", 0)``; raises TopologyInputError."""
    if not isinstance(code, str):
        raise TopologyInputError(f"{where}: topology code must be a string, got {type(code).__name__}")
    c = code.strip().upper()
    if c in ("X", "-"):
        return "X", 0
    if c in PCIE_BW:
        return c, 0
    m = _NV_RE.match(c)
    if m and int(m.group(1)) > 0:
        return "NV", int(m.group(1))
    raise TopologyInputError(f"{where}: unknown topology code {code!r} (want X, NV<n>, PIX, PXB, PHB, NODE or SYS)")


# --- inputs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuInfo:
    name: str  # DRA device name of the physical GPU ("gpu-3"), also when only its MIG devices are published
    product: str = ""
    pcie_root: str = ""
    numa: int | None = None
    bus_id: str = ""


@dataclass(frozen=True, slots=True)
class NicInfo:
    name: str  # driver/device
    pcie_root: str = ""
    numa: int | None = None


@dataclass(frozen=True, slots=True)
class Profile:
    """Topology of the GPUs of one product (plugin args ``profiles[]``)."""

    product: str
    nvlink: tuple[str, int] | None = None  # all-to-all code between every pair, e.g. ("NV", 18)
    matrix: tuple[tuple[str, ...], ...] | None = None  # over the node's GPUs in index order
    nvlink_speed: int | None = None


def load_annotation(value: str) -> Any:
    """The annotation's JSON value. Raises TopologyInputError when it is no JSON, or JSON nested deeper than
    the decoder's recursion allows (``"[" * 100000``: RecursionError, caught here: any annotation anyone with
    write access to the node can set must never end a scheduling cycle)."""
    try:
        return json.loads(value)
    except ValueError as e:
        raise TopologyInputError(f"annotation {ANNOTATION}: invalid JSON: {e}") from None
    except RecursionError:
        raise TopologyInputError(f"annotation {ANNOTATION}: invalid JSON: nested too deeply") from None


def parse_annotation(value: str) -> tuple[str, tuple[str, ...], tuple[tuple[tuple[str, int], ...], ...]]:
    """(driver, devices, parsed matrix). Raises TopologyInputError with a message a person can act on."""
    doc = load_annotation(value)
    if not isinstance(doc, dict):
        raise TopologyInputError(f"annotation {ANNOTATION}: must be a JSON object with driver, devices, matrix")
    driver = doc.get("driver", "")
    devices = doc.get("devices")
    matrix = doc.get("matrix")
    if not isinstance(driver, str) or not driver:
        raise TopologyInputError(f"annotation {ANNOTATION}: driver must be a non-empty string")
    if not isinstance(devices, list) or not devices or not all(isinstance(d, str) and d for d in devices):
        raise TopologyInputError(f"annotation {ANNOTATION}: devices must be a non-empty list of device names")
    if len(set(devices)) != len(devices):
        raise TopologyInputError(f"annotation {ANNOTATION}: devices has duplicate names")
    return driver, tuple(devices), _parse_matrix(matrix, len(devices), f"annotation {ANNOTATION}")


def _parse_matrix(matrix: Any, n: int, where: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    if not isinstance(matrix, list) or len(matrix) != n:
        raise TopologyInputError(f"{where}: matrix must be a list of {n} rows (one per device)")
    rows: list[tuple[tuple[str, int], ...]] = []
    for i, row in enumerate(matrix):
        if not isinstance(row, list) or len(row) != n:
            raise TopologyInputError(f"{where}: matrix row {i} must have {n} cells")
        rows.append(tuple(parse_code(c, f"{where}: matrix[{i}][{j}]") for j, c in enumerate(row)))
    for i in range(n):
        if rows[i][i][0] != "X":
            raise TopologyInputError(f"{where}: matrix[{i}][{i}] must be X")
        for j in range(n):
            if i != j and rows[i][j][0] == "X":
                raise TopologyInputError(f"{where}: matrix[{i}][{j}]: X only on the diagonal")
            if rows[i][j] != rows[j][i]:
                raise TopologyInputError(
                    f"{where}: matrix is not symmetric: "
                    f"[{i}][{j}] = {_fmt(rows[i][j])}, [{j}][{i}] = {_fmt(rows[j][i])}"
                )
    return tuple(rows)


def _fmt(code: tuple[str, int]) -> str:
    return f"NV{code[1]}" if code[0] == "NV" else code[0]


def parse_profile(raw: Any, where: str) -> Profile:
    if not isinstance(raw, Mapping):
        raise TopologyInputError(f"{where}: must be a map with productName and nvlink or matrix")
    for k in raw:
        if k not in ("productName", "nvlink", "matrix", "nvlinkGBps"):
            raise TopologyInputError(f"{where}.{k}: unknown field")
    product = raw.get("productName")
    if not isinstance(product, str) or not product:
        raise TopologyInputError(f"{where}.productName: must be a non-empty string")
    nvlink = None
    if "nvlink" in raw:
        nvlink = parse_code(raw["nvlink"], f"{where}.nvlink")
        if nvlink[0] != "NV":
            raise TopologyInputError(f"{where}.nvlink: must be NV<n>")
    matrix = None
    if "matrix" in raw:
        m = raw["matrix"]
        n = len(m) if isinstance(m, list) else 0
        parsed = _parse_matrix(m, n, where)
        matrix = tuple(tuple(_fmt(c) for c in row) for row in parsed)
    if (nvlink is None) == (matrix is None):
        raise TopologyInputError(f"{where}: exactly one of nvlink and matrix is required")
    speed = None
    if "nvlinkGBps" in raw:
        v = raw["nvlinkGBps"]
        if not isinstance(v, int | float) or isinstance(v, bool) or v <= 0:
            raise TopologyInputError(f"{where}.nvlinkGBps: must be a positive number")
        speed = round(float(v) * 10)
    return Profile(product, nvlink, matrix, speed)


def _attr(d: Device, driver: str, name: str) -> Any:
    v = d.attributes.get(name)
    if v is None and name.startswith(driver + "/"):
        v = d.attributes.get(name[len(driver) + 1 :])
    return v


_MINOR = re.compile(r"^(?:.*?-)?(\d+)$")


def _gpu_sort_key(name: str) -> tuple[int, str]:
    m = _MINOR.match(name)
    return (int(m.group(1)) if m else 1 << 20, name)


def physical_gpu_name(device: str, gpus: Sequence[str]) -> str | None:
    """The physical GPU (by DRA name) a device belongs to: itself, or ``gpu-N`` for ``gpu-N-mig-...``."""
    best = None
    for g in gpus:
        if device == g:
            return g
        if device.startswith(g + "-") and (best is None or len(g) > len(best)):
            best = g
    return best


def node_inputs(
    slices: Sequence[ResourceSlice], node_name: str, driver: str
) -> tuple[tuple[GpuInfo, ...], tuple[NicInfo, ...], dict[str, list[tuple[str, str, str]]]]:
    """GPUs of ``driver`` on the node (physical GPUs, MIG devices folded into their parent), NICs of other
    drivers, and the device ids (driver, pool, device) of every GPU's devices (full GPU and MIG)."""
    gpus: dict[str, GpuInfo] = {}
    ids: dict[str, list[tuple[str, str, str]]] = {}
    nics: list[NicInfo] = []
    migs: list[tuple[str, Device, ResourceSlice]] = []
    for s in slices:
        if s.node_name != node_name:
            continue
        for d in s.devices:
            if s.driver != driver:
                root = d.attributes.get(PCIE_ROOT)
                numa = _numa_of(d)
                if (isinstance(root, str) and root) or numa is not None:
                    nics.append(NicInfo(f"{s.driver}/{d.name}", root if isinstance(root, str) else "", numa))
                continue
            typ = _attr(d, driver, "type")
            if d.attributes.get("parentUUID") is not None or typ == "mig" or "-mig-" in d.name:
                migs.append((d.name, d, s))
                continue
            if typ not in (None, "gpu"):
                continue
            gpus[d.name] = _gpu_info(d.name, d, driver)
            ids.setdefault(d.name, []).append((s.driver, s.pool, d.name))
    for name, d, s in migs:
        parent = name.split("-mig-", 1)[0] if "-mig-" in name else ""
        if not parent:
            continue
        if parent not in gpus:
            gpus[parent] = _gpu_info(parent, d, driver)
        ids.setdefault(parent, []).append((s.driver, s.pool, name))
    ordered = tuple(sorted(gpus.values(), key=lambda g: _gpu_sort_key(g.name)))
    return ordered, tuple(sorted(nics, key=lambda n: n.name)), ids


def _numa_of(d: Device) -> int | None:
    for k in (NUMA_NODE, *NUMA_ALIASES):
        v = d.attributes.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def _gpu_info(name: str, d: Device, driver: str) -> GpuInfo:
    product = _attr(d, driver, "productName")
    root = d.attributes.get(PCIE_ROOT)
    bus = d.attributes.get(PCI_BUS_ID)
    return GpuInfo(
        name,
        product if isinstance(product, str) else "",
        root if isinstance(root, str) else "",
        _numa_of(d),
        bus if isinstance(bus, str) else "",
    )


# --- the model -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Topology:
    """The interconnect of one node's GPUs (shared by every node with the same inputs)."""

    driver: str
    gpus: tuple[str, ...]  # physical GPU device names, index order
    bw: tuple[tuple[int, ...], ...]  # pairwise bandwidth (tenths of GB/s); diagonal 0
    codes: tuple[tuple[str, ...], ...]  # pairwise connection ("NV18", "PIX", ... "SYS"); diagonal "X"
    numa: tuple[int, ...]  # NUMA group per GPU (0..g-1)
    numa_labels: tuple[str, ...]  # per NUMA group: the numaNode value, or "?" when unknown
    graph: nx.Graph = field(repr=False)
    source: str = "attributes"  # annotation | profile | attributes
    fingerprint: str = ""

    @property
    def size(self) -> int:
        return len(self.gpus)

    def index(self, gpu: str) -> int | None:
        try:
            return self.gpus.index(gpu)
        except ValueError:
            return None


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[int]:
        roots: dict[int, int] = {}
        out = []
        for i in range(len(self.parent)):
            r = self.find(i)
            out.append(roots.setdefault(r, len(roots)))
        return out


def build_topology(
    driver: str,
    gpus: Sequence[GpuInfo],
    nvlink: Sequence[Sequence[int]] | None,
    pcie: Sequence[Sequence[str | None]] | None,
    nics: Sequence[NicInfo] = (),
    source: str = "attributes",
    nvlink_speed_override: int | None = None,
) -> Topology:
    """Build the graph and the pairwise tables.

    ``nvlink[i][j]``: NVLink link count between GPUs i and j (0: none). ``pcie[i][j]``: PCIe level from an
    explicit input (None: unknown, derived from the attributes)."""
    n = len(gpus)
    names = tuple(g.name for g in gpus)
    speed = nvlink_speed_override or nvlink_speed(next((g.product for g in gpus if g.product), ""))
    # PCIe level per pair: explicit code, else from the standard attributes.
    level = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            code = pcie[i][j] if pcie is not None else None
            if code is None:
                a, b = gpus[i], gpus[j]
                if a.pcie_root and a.pcie_root == b.pcie_root:
                    code = "PXB"
                elif a.numa is not None and a.numa == b.numa:
                    code = "NODE"
                else:
                    code = "SYS"
            level[i][j] = level[j][i] = PCIE_LEVELS.index(code)
    # Hierarchy by transitive closure per level (hardware is a tree; inconsistent inputs get merged upward).
    group_at: list[list[int]] = []
    for lv in range(len(PCIE_LEVELS) - 1):
        uf = _UnionFind(n)
        for i in range(n):
            for j in range(i + 1, n):
                if level[i][j] <= lv:
                    uf.union(i, j)
        group_at.append(uf.groups())
    numa = tuple(group_at[PCIE_LEVELS.index("NODE")])
    numa_labels = []
    for grp_id in range(max(numa, default=-1) + 1):
        vals = {gpus[i].numa for i in range(n) if numa[i] == grp_id}
        numa_labels.append(str(next(iter(vals))) if len(vals) == 1 and None not in vals else "?")

    import networkx as nx

    G: nx.Graph = nx.Graph()
    for i, g in enumerate(gpus):
        G.add_node(("gpu", i), kind="gpu", name=g.name, busID=g.bus_id)
    # PCIe tree
    kinds = ("pcie-switch", "root-complex", "host-bridge", "numa")
    G.add_node(("system",), kind="system")
    for lv, kind in enumerate(kinds):
        for grp in sorted(set(group_at[lv])):
            members = [i for i in range(n) if group_at[lv][i] == grp]
            attrs: dict[str, Any] = {"kind": kind}
            if kind == "root-complex":
                roots = {gpus[i].pcie_root for i in members}
                if len(roots) == 1:
                    attrs["pcieRoot"] = next(iter(roots))
            if kind == "numa":
                attrs["numaNode"] = numa_labels[grp]
            G.add_node((kind, grp), **attrs)
    for i in range(n):
        G.add_edge(("gpu", i), ("pcie-switch", group_at[0][i]), bw=PCIE_BW["PIX"], kind="pcie")
    for lv in range(1, len(kinds)):
        for i in range(n):
            G.add_edge(
                (kinds[lv - 1], group_at[lv - 1][i]),
                (kinds[lv], group_at[lv][i]),
                bw=PCIE_BW[PCIE_LEVELS[lv]],
                kind="pcie",
            )
    for grp in set(numa):
        G.add_edge(("numa", grp), ("system",), bw=PCIE_BW["SYS"], kind="smp")
    # NVLink: NVSwitch fabrics for all-to-all groups of >= 4 GPUs with equal link counts, direct links otherwise.
    if nvlink is not None:
        _add_nvlink(G, n, nvlink, speed)
    # NICs of other drivers, under their root complex (matched by pcieRoot) or NUMA node.
    root_of = {d.get("pcieRoot"): v for v, d in G.nodes(data=True) if d.get("kind") == "root-complex"}
    numa_of = {d.get("numaNode"): v for v, d in G.nodes(data=True) if d.get("kind") == "numa"}
    for nic in nics:
        parent = root_of.get(nic.pcie_root) if nic.pcie_root else None
        if parent is None and nic.numa is not None:
            parent = numa_of.get(str(nic.numa))
        if parent is not None:
            G.add_node(("nic", nic.name), kind="nic", name=nic.name)
            G.add_edge(("nic", nic.name), parent, bw=PCIE_BW["PXB"], kind="pcie")
    bw, codes = _pair_tables(G, n)
    topo = Topology(driver, names, bw, codes, numa, tuple(numa_labels), G, source)
    object.__setattr__(topo, "fingerprint", fingerprint(bw, numa))
    return topo


def _add_nvlink(G: nx.Graph, n: int, nvlink: Sequence[Sequence[int]], speed: int) -> None:
    import networkx as nx

    covered: set[tuple[int, int]] = set()
    by_count: dict[int, nx.Graph] = {}
    for i in range(n):
        for j in range(i + 1, n):
            c = nvlink[i][j]
            if c > 0:
                by_count.setdefault(c, nx.Graph()).add_edge(i, j)
    fabric = 0
    for c in sorted(by_count, reverse=True):
        cliques = sorted((sorted(q) for q in nx.find_cliques(by_count[c]) if len(q) >= 4), key=lambda q: (-len(q), q))
        for q in cliques:
            pairs = {(a, b) for a in q for b in q if a < b}
            if pairs & covered:
                continue
            covered |= pairs
            sw = ("nvswitch", fabric)
            fabric += 1
            G.add_node(sw, kind="nvswitch", links=c)
            for a in q:
                G.add_edge(("gpu", a), sw, bw=c * speed, kind="nvlink", links=c)
    for i in range(n):
        for j in range(i + 1, n):
            c = nvlink[i][j]
            if c > 0 and (i, j) not in covered:
                G.add_edge(("gpu", i), ("gpu", j), bw=c * speed, kind="nvlink", links=c)


def _pair_tables(G: nx.Graph, n: int) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[str, ...], ...]]:
    """Widest path between every two GPUs, never through a third GPU; its bottleneck edge names the code."""
    bw = [[0] * n for _ in range(n)]
    codes = [["X"] * n for _ in range(n)]
    adj = G.adj
    for s in range(n):
        src = ("gpu", s)
        best: dict[Any, int] = {src: SINGLE}
        via: dict[Any, tuple[str, int]] = {src: ("", 0)}
        heap: list[tuple[int, int, Any]] = [(-SINGLE, 0, src)]
        tick = 0
        while heap:
            neg, _, v = heapq.heappop(heap)
            if -neg < best.get(v, -1):
                continue
            if v != src and v[0] == "gpu":
                continue  # reached a GPU: an endpoint, never a transit vertex
            for w, e in adj[v].items():
                b = min(-neg, int(e["bw"]))
                if b > best.get(w, -1):
                    best[w] = b
                    edge = (str(e["kind"]), int(e.get("links", 0)))
                    via[w] = edge if b == int(e["bw"]) else via[v]
                    tick += 1
                    heapq.heappush(heap, (-b, tick, w))
        for t in range(n):
            if t == s:
                continue
            b = best.get(("gpu", t), 0)
            bw[s][t] = b
            kind, links = via.get(("gpu", t), ("", 0))
            codes[s][t] = f"NV{links}" if kind == "nvlink" else _BW_PCIE.get(b, "SYS")
    return tuple(tuple(r) for r in bw), tuple(tuple(r) for r in codes)


def fingerprint(bw: Sequence[Sequence[int]], numa: Sequence[int]) -> str:
    h = hashlib.sha1()
    h.update(repr((tuple(tuple(r) for r in bw), tuple(numa))).encode())
    return h.hexdigest()[:16]


# --- node -> topology ------------------------------------------------------------------------------------


def topology_from_inputs(
    driver: str,
    gpus: Sequence[GpuInfo],
    nics: Sequence[NicInfo],
    annotation: str | None,
    profiles: Mapping[str, Profile],
) -> tuple[Topology | None, list[str]]:
    """The node's topology and the problems found in its inputs (malformed inputs are reported, then the next
    source in the order of precedence is used)."""
    problems: list[str] = []
    if not gpus:
        return None, problems
    n = len(gpus)
    index = {g.name: i for i, g in enumerate(gpus)}
    nv: list[list[int]] | None = None
    pcie: list[list[str | None]] | None = None
    source = "attributes"
    speed: int | None = None
    if annotation is not None:
        try:
            adriver, devices, matrix = parse_annotation(annotation)
            if adriver != driver:
                raise TopologyInputError(
                    f"annotation {ANNOTATION}: driver {adriver!r} publishes no GPU on this node (GPUs are {driver!r})"
                )
            rows = [index.get(d) for d in devices]
            unknown = [d for d, r in zip(devices, rows, strict=True) if r is None]
            if len(unknown) == len(devices):
                raise TopologyInputError(
                    f"annotation {ANNOTATION}: names none of the node's GPUs ({', '.join(g.name for g in gpus[:4])}"
                    f"{', ...' if n > 4 else ''})"
                )
            if unknown:
                problems.append(
                    f"annotation {ANNOTATION}: devices not published on this node, ignored: {', '.join(unknown)}"
                )
            nv = [[0] * n for _ in range(n)]
            pcie = [[None] * n for _ in range(n)]
            for a, ra in enumerate(rows):
                for b, rb in enumerate(rows):
                    if ra is None or rb is None or ra == rb:
                        continue
                    kind, links = matrix[a][b]
                    if kind == "NV":
                        nv[ra][rb] = links
                    else:
                        pcie[ra][rb] = kind
            source = "annotation"
        except TopologyInputError as e:
            problems.append(str(e))
            nv, pcie = None, None
    if nv is None:
        products = {g.product for g in gpus}
        prof = profiles.get(next(iter(products))) if len(products) == 1 else None
        if prof is not None:
            try:
                nv, pcie = _from_profile(prof, n)
                source = "profile"
                speed = prof.nvlink_speed
            except TopologyInputError as e:
                problems.append(str(e))
    return build_topology(driver, gpus, nv, pcie, nics, source, speed), problems


def _from_profile(prof: Profile, n: int) -> tuple[list[list[int]], list[list[str | None]]]:
    nv = [[0] * n for _ in range(n)]
    pcie: list[list[str | None]] = [[None] * n for _ in range(n)]
    if prof.nvlink is not None:
        for i in range(n):
            for j in range(n):
                if i != j:
                    nv[i][j] = prof.nvlink[1]
        return nv, pcie
    assert prof.matrix is not None
    if len(prof.matrix) != n:
        raise TopologyInputError(
            f"profile {prof.product!r}: matrix has {len(prof.matrix)} rows but the node has {n} GPUs of that product"
        )
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            kind, links = parse_code(prof.matrix[i][j], f"profile {prof.product!r}")
            if kind == "NV":
                nv[i][j] = links
            else:
                pcie[i][j] = kind
    return nv, pcie


def topology_from_matrix(
    rows: Sequence[Sequence[str]],
    names: Sequence[str] | None = None,
    numa: Sequence[int | None] | None = None,
    roots: Sequence[str] | None = None,
    product: str = "",
    driver: str = "gpu.nvidia.com",
) -> Topology:
    """A topology straight from a ``topo -m`` style GPU matrix (tests, fixtures, benchmarks)."""
    n = len(rows)
    names = list(names) if names is not None else [f"gpu-{i}" for i in range(n)]
    gpus = [
        GpuInfo(
            names[i],
            product,
            roots[i] if roots is not None else "",
            numa[i] if numa is not None else None,
        )
        for i in range(n)
    ]
    parsed = _parse_matrix([list(r) for r in rows], n, "matrix")
    nv = [[parsed[i][j][1] if parsed[i][j][0] == "NV" else 0 for j in range(n)] for i in range(n)]
    pcie: list[list[str | None]] = [
        [parsed[i][j][0] if parsed[i][j][0] not in ("NV", "X") else None for j in range(n)] for i in range(n)
    ]
    return build_topology(driver, gpus, nv, pcie, source="annotation")
