"""GpuTopology: topology-aware device choice, node scoring and gang domain preference.

PreFilter   hands DynamicResources the allocator's candidate-order hook for this cycle
            (``DEVICE_ORDER_KEY``): for each ExactCount request the best-connected free GPUs come first
            (table lookup per topology fingerprint, :mod:`plugins.topology.scoring`), so the exhaustive search
            picks them whenever they satisfy every constraint, counter and taint.
Score       raw score of the node for the pod's device set (the allocation DynamicResources found there):
            connectivity (bottleneck bandwidth against the best the node's SKU can give k GPUs, and in absolute
            terms), NUMA locality, and Pack (default: fill fuller nodes, keep whole nodes / NVLink islands free
            for large claims) or Spread. Normalised to 0..100 by the highest.
PreBind     reports malformed topology input found since the last binding as Warning Events on the node
            (they are logged when found).

Group cycle points (:mod:`scheduler.framework.interface`), for the gang scheduler:

PlacementGenerate   :meth:`GpuTopology.placement_levels`, :meth:`GpuTopology.generate_placements` (the smallest
                    domains that can host the group, with the required level from the PodGroup annotations or the
                    plugin args; a PodGroup annotation that names no level is reported, then ignored) and
                    :meth:`GpuTopology.describe_placement` (where a group landed, for its status).
GroupMemberScore    :meth:`GpuTopology.group_score`: a bonus for nodes in the same domains as the members placed so
                    far.
BindingNote         :meth:`GpuTopology.binding_note`: how the pod's GPUs are connected, for the Scheduled Event;
                    also :meth:`GpuTopology.explain_devices` for ``simulate -o table``.

Args::

    mode: Pack | Spread                 # default Pack
    driver: gpu.nvidia.com              # the GPU driver whose devices are modelled
    profiles:                           # by productName; merged over the built-in ones
    - {productName: "NVIDIA H100 80GB HBM3", nvlink: NV18}
    - {productName: "...", matrix: [["X", "NV12"], ["NV12", "X"]], nvlinkGBps: 25}
    levels: [topology.kubernetes.io/zone, cloud.provider.com/topology-block,
             cloud.provider.com/topology-rack, nvidia.com/gpu.clique]   # outermost first; or {name, label}
    requiredLevel: ""                   # gangs must fit one domain of this level (name or label)
    preferredLevel: ""                  # only named in explanations: gangs always prefer the smallest domain
    deviceOrder: true                   # false: leave the device choice to upstream order (first fit)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from plugins.dra.allocator import ClaimAllocation
from plugins.dra.pools import Candidate
from plugins.dra.state import DEVICE_ORDER_KEY, node_allocation
from plugins.dra.state import STATE_KEY as DRA_STATE_KEY
from plugins.topology.domains import DEFAULT_LEVELS
from plugins.topology.graph import (
    ANNOTATION,
    Profile,
    Topology,
    TopologyInputError,
    load_annotation,
    node_inputs,
    parse_profile,
    prewarm_networkx,
    topology_from_inputs,
)
from plugins.topology.scoring import SubsetTable, Value, best_set_value, describe, table_for
from scheduler.api.dra import RequestSpec, ResourceSlice
from scheduler.api.model import Node, Pod, PodGroup
from scheduler.cache.ledger import DeviceID, DeviceLedger
from scheduler.config.registry import PluginSpec
from scheduler.framework.domains import Level, Plan, find_level, plan, shared_depth
from scheduler.framework.helpers import default_normalize_score, max_normalized
from scheduler.framework.interface import MAX_NODE_SCORE, CycleState, NodeScore, PreFilterResult, Status
from scheduler.framework.memo import NodeNameTables

if TYPE_CHECKING:
    from scheduler.api.clusterapi import ClusterAPI
    from scheduler.cache.cache import NodeInfo, Snapshot

log = structlog.get_logger("dra_scheduler.topology")

NAME = "GpuTopology"
PACK, SPREAD = "Pack", "Spread"
REQUIRED_ANNOTATION = "dra-scheduler.io/topology-required"
PREFERRED_ANNOTATION = "dra-scheduler.io/topology-preferred"
REF_BW = 18 * 531  # NV18 at NVLink5 speed: the best pair bandwidth in the profiles (absolute-quality scale)
DOMAIN_BONUS = 100  # group_score per level of domain shared with the members placed so far
EXPLAIN_KEY = "GpuTopology/explain"  # CycleState: the plugin, for binding_note()

# Built-in profiles: 8-GPU HGX/DGX boards whose GPUs are all-to-all through NVSwitch (driver-data.md §3.3-3.4).
DEFAULT_PROFILES: tuple[Mapping[str, Any], ...] = (
    {"productName": "NVIDIA H100 80GB HBM3", "nvlink": "NV18"},
    {"productName": "NVIDIA H200", "nvlink": "NV18"},
    {"productName": "NVIDIA H20", "nvlink": "NV18"},
    {"productName": "NVIDIA B200", "nvlink": "NV18"},
    {"productName": "NVIDIA A100-SXM4-80GB", "nvlink": "NV12"},
    {"productName": "NVIDIA A100-SXM4-40GB", "nvlink": "NV12"},
)


# --- args ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyArgs:
    mode: str = PACK
    driver: str = "gpu.nvidia.com"
    profiles: Mapping[str, Profile] | None = None
    levels: tuple[Level, ...] = DEFAULT_LEVELS
    required_level: str = ""
    preferred_level: str = ""
    device_order: bool = True


_FIELDS = ("mode", "driver", "profiles", "levels", "requiredLevel", "preferredLevel", "deviceOrder")


def _level(raw: Any) -> Level:
    if isinstance(raw, str):
        return Level(raw.rsplit("/", 1)[-1].removeprefix("topology-").removeprefix("gpu."), raw)
    return Level(str(raw["name"]), str(raw["label"]))


def parse_args(args: Mapping[str, Any]) -> TopologyArgs:
    """Args after validation (:func:`validate_args`)."""
    profiles: dict[str, Profile] = {}
    for i, p in enumerate([*DEFAULT_PROFILES, *(args.get("profiles") or [])]):
        prof = parse_profile(p, f"profiles[{i}]")
        profiles[prof.product] = prof
    levels = tuple(_level(x) for x in args["levels"]) if "levels" in args else DEFAULT_LEVELS
    return TopologyArgs(
        mode=str(args.get("mode", PACK)),
        driver=str(args.get("driver", "gpu.nvidia.com")),
        profiles=profiles,
        levels=levels,
        required_level=str(args.get("requiredLevel", "")),
        preferred_level=str(args.get("preferredLevel", "")),
        device_order=bool(args.get("deviceOrder", True)),
    )


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    errs = [f"{path}.{k}: unknown field" for k in args if k not in _FIELDS]
    mode = args.get("mode", PACK)
    if mode not in (PACK, SPREAD):
        errs.append(f"{path}.mode: unsupported value {mode!r}: supported values: {PACK!r}, {SPREAD!r}")
    drv = args.get("driver", "gpu.nvidia.com")
    if not isinstance(drv, str) or not drv:
        errs.append(f"{path}.driver: must be a non-empty string")
    profs = args.get("profiles", [])
    if not isinstance(profs, list):
        errs.append(f"{path}.profiles: must be a list")
    else:
        for i, p in enumerate(profs):
            try:
                parse_profile(p, f"{path}.profiles[{i}]")
            except TopologyInputError as e:
                errs.append(str(e))
    levels: list[Level] = list(DEFAULT_LEVELS)
    if "levels" in args:
        raw = args["levels"]
        if not isinstance(raw, list):
            errs.append(f"{path}.levels: must be a list of node label keys (outermost first)")
            raw = []
        levels = []
        for i, lv in enumerate(raw):
            lp = f"{path}.levels[{i}]"
            if isinstance(lv, str) and lv:
                levels.append(_level(lv))
            elif isinstance(lv, Mapping):
                extra = [k for k in lv if k not in ("name", "label")]
                errs += [f"{lp}.{k}: unknown field" for k in extra]
                if not isinstance(lv.get("name"), str) or not lv.get("name"):
                    errs.append(f"{lp}.name: required")
                elif not isinstance(lv.get("label"), str) or not lv.get("label"):
                    errs.append(f"{lp}.label: required")
                else:
                    levels.append(_level(lv))
            else:
                errs.append(f"{lp}: must be a label key or {{name, label}}")
        names = [lv.name for lv in levels]
        if len(set(names)) != len(names):
            errs.append(f"{path}.levels: level names must be unique, got {names}")
    for key in ("requiredLevel", "preferredLevel"):
        v = args.get(key, "")
        if not isinstance(v, str):
            errs.append(f"{path}.{key}: must be a level name or label")
        elif v and find_level(levels, v) is None:
            errs.append(f"{path}.{key}: {v!r} is not one of the levels ({', '.join(lv.name for lv in levels)})")
    if not isinstance(args.get("deviceOrder", True), bool):
        errs.append(f"{path}.deviceOrder: must be true or false")
    return errs


# --- per-node view ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class NodeView:
    """A node's topology (shared by SKU) with the node's own device ids."""

    topo: Topology
    table: SubsetTable
    gpu_of: Mapping[DeviceID, int]  # full-GPU and MIG device ids -> GPU index
    ids: tuple[tuple[DeviceID, ...], ...]  # per GPU index: its device ids

    @property
    def full(self) -> int:
        return (1 << self.topo.size) - 1


def free_gpus(ledger: DeviceLedger, view: NodeView) -> int:
    """The mask of the node's GPUs none of whose devices (full GPU or MIG) is in use in ``ledger``. Pure."""
    m = 0
    for i, dev_ids in enumerate(view.ids):
        if not any(ledger.in_use(d) for d in dev_ids):
            m |= 1 << i
    return m


def whole_gpus(view: NodeView, results: Sequence[tuple[str, str, str]]) -> int | None:
    """The mask of the GPUs whose full-GPU device is among the device ids ``results``; None when one of them is
    a MIG device of a modelled GPU (a MIG claim has no interconnect to choose). Other devices are ignored."""
    m = 0
    for d in results:
        i = view.gpu_of.get(d)
        if i is None:
            continue
        if d[2] != view.topo.gpus[i]:
            return None
        m |= 1 << i
    return m


class GpuTopology:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.args = parse_args(args)
        self.pack = self.args.mode == PACK
        self.profiles: Mapping[str, Profile] = self.args.profiles or {}
        self._inputs: dict[Hashable, tuple[Topology | None, tuple[str, ...]]] = {}
        # node -> (node, slices, view, the view's inputs without the node's and pools' names)
        self._views: dict[str, tuple[Node, tuple[ResourceSlice, ...], NodeView | None, Hashable]] = {}
        self._free: dict[str, tuple[DeviceLedger, int, int]] = {}
        self._per_node = NodeNameTables(self._views, self._free)  # deleted nodes leave both
        self._reported: set[tuple[str, str]] = set()
        self._pending_events: list[tuple[Node, str]] = []
        self._snapshot: Snapshot | None = None
        self.stats = {"views": 0, "topologies": 0, "orders": 0, "problems": 0}
        prewarm_networkx()

    # --- models ---------------------------------------------------------------------------------------------

    def view(self, snap: Snapshot, name: str) -> NodeView | None:
        got = self._view_entry(snap, name)
        return None if got is None else got[2]

    def view_key(self, snap: Snapshot, name: str) -> Hashable | None:
        """What the node's view is made of, without the node's and pools' names (equal for nodes of one make; their
        views then order devices of equal names alike); () without a view, None for an unknown node."""
        got = self._view_entry(snap, name)
        return None if got is None else got[3]

    def _view_entry(
        self, snap: Snapshot, name: str
    ) -> tuple[Node, tuple[ResourceSlice, ...], NodeView | None, Hashable] | None:
        info = snap.node_map.get(name)
        if info is None:
            return None
        node = info.node
        slices = snap.slices.by_node.get(name, ())
        cached = self._views.get(name)
        if cached is not None and cached[0] is node and cached[1] is slices:
            return cached
        self.stats["views"] += 1
        annotation = node.meta.annotations.get(ANNOTATION)
        driver = self.args.driver
        if annotation is not None:
            try:
                doc = load_annotation(annotation)
                if isinstance(doc, dict) and isinstance(doc.get("driver"), str) and doc["driver"]:
                    driver = doc["driver"]
            except TopologyInputError:
                pass  # reported by topology_from_inputs
        gpus, nics, ids = node_inputs(slices, name, driver)
        key = (driver, annotation, gpus, nics)
        got = self._inputs.get(key)
        if got is None:
            self.stats["topologies"] += 1
            built, found = topology_from_inputs(driver, gpus, nics, annotation, self.profiles)
            got = (built, tuple(found))
            if len(self._inputs) > 4096:
                self._inputs.clear()
            self._inputs[key] = got
        topo, problems = got
        for p in problems:
            self._report(node, p)
        view: NodeView | None = None
        if topo is not None:
            gpu_of: dict[DeviceID, int] = {}
            per_gpu: list[tuple[DeviceID, ...]] = []
            for i, g in enumerate(topo.gpus):
                dev_ids = tuple(ids.get(g, ()))
                per_gpu.append(dev_ids)
                for d in dev_ids:
                    gpu_of[d] = i
            view = NodeView(topo, table_for(topo), gpu_of, tuple(per_gpu))
        entry = self._views[name] = (node, slices, view, () if view is None else key)
        return entry

    def _report(self, node: Node, problem: str) -> None:
        k = (node.name, problem)
        if k in self._reported:
            return
        if len(self._reported) > 10_000:
            self._reported.clear()
        self._reported.add(k)
        self.stats["problems"] += 1
        log.warning("malformed device topology input ignored", node=node.name, problem=problem)
        self._pending_events.append((node, problem))

    def free_mask(self, ledger: DeviceLedger, name: str, view: NodeView) -> int:
        """GPUs none of whose devices (full GPU or MIG) is in use."""
        rev = ledger.node_revision(name)
        c = self._free.get(name)
        if c is not None and c[0] is ledger and c[1] == rev:
            return c[2]
        m = free_gpus(ledger, view)
        self._free[name] = (ledger, rev, m)
        return m

    def best_value(self, snap: Snapshot, node: str, ledger: DeviceLedger, k: int) -> Value | None:
        """The score (:func:`~plugins.topology.scoring.best_set_value`) of the best ``k`` whole GPUs a claim gets
        on ``node`` when the GPUs free in ``ledger`` (the snapshot's, or a preemption dry run's view) are
        free; None without a topology model of the node or with fewer than ``k`` free GPUs. Not cached here."""
        view = self.view(snap, node)
        return None if view is None else best_set_value(view.table, free_gpus(ledger, view), k)

    # --- the allocator hook ---------------------------------------------------------------------------------

    def order_devices(
        self, snap: Snapshot, node: Node, cands: Sequence[Candidate], spec: RequestSpec, count: int
    ) -> Sequence[Candidate]:
        """Preferred candidates of a request: the best ``count`` GPUs among the free ones (table lookup)."""
        view = self.view(snap, node.name)
        if view is None:
            return cands
        self.stats["orders"] += 1
        free = self.free_mask(snap.ledger, node.name, view)
        seen = 0
        idx: list[int] = []
        for c in cands:
            i = view.gpu_of.get(c.id)
            if i is None:
                return cands  # not all candidates are modelled GPUs: keep upstream order
            if seen >> i & 1:
                # several devices of one GPU (MIG): fill GPUs already in use first, keep whole GPUs free
                return sorted(cands, key=lambda c: free >> view.gpu_of[c.id] & 1)
            seen |= 1 << i
            idx.append(i)
        avail = seen & free
        best = view.table.best(avail, count) if avail.bit_count() >= count else None
        if best is None:
            return cands
        return [c for c, i in zip(cands, idx, strict=True) if best >> i & 1]

    # --- PreFilter --------------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        snap = state.snapshot
        self._snapshot = snap
        self._per_node.retain(snap.node_names)
        state.write(EXPLAIN_KEY, self)
        if self.args.device_order and pod.claims:

            def order(node: Node, cands: Sequence[Candidate], spec: RequestSpec, count: int) -> Sequence[Candidate]:
                return self.order_devices(snap, node, cands, spec, count)

            def class_key(info: NodeInfo) -> Hashable | None:
                # what the order reads of the node besides its devices' use, for DynamicResources' node classes
                # (plugins/dra/nodeclass.py): the inputs of its topology model (() without one: upstream order)
                return self.view_key(snap, info.name)

            order.class_key = class_key  # type: ignore[attr-defined]
            state.write(DEVICE_ORDER_KEY, order)
        return None, Status.ok()

    # --- Score ------------------------------------------------------------------------------------------------

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        data = state.read(DRA_STATE_KEY)
        return () if data is None else (data.signature,)

    # No node_token: the score reads node state beyond the NodeInfo (the device ledger) only for pods that
    # DynamicResources allocates, through DynamicResources' allocation for the node, and DynamicResources'
    # node_token (the ledger's revision for that node) already guards every reused result. A second, equal
    # token would make the framework build a tuple per node per cycle: measured -18% pods/s on the core bench.

    def _chosen(self, view: NodeView, allocs: Sequence[ClaimAllocation]) -> int:
        m = 0
        for a in allocs:
            for r in a.results:
                i = view.gpu_of.get((r.driver, r.pool, r.device))
                if i is not None:
                    m |= 1 << i
        return m

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        data = state.read(DRA_STATE_KEY)
        if data is None or data.allocator is None:
            return 0
        snap = state.snapshot
        view = self.view(snap, node.name)
        if view is None:
            return 0
        allocs = node_allocation(state, node)
        if not allocs:
            return 0
        chosen = self._chosen(view, allocs)
        if not chosen:
            return 0
        return self.node_score(view, self.free_mask(snap.ledger, node.name, view), chosen)

    def node_score(self, view: NodeView, free: int, chosen: int) -> int:
        """0..1000: connectivity (0..500) + placement (0..400 Pack: fuller after, Spread: emptier after)."""
        table = view.table
        n = view.topo.size
        k = chosen.bit_count()
        quality = 500.0
        if k >= 2:
            b, negspan = table.value(chosen)
            ideal = table.best_value(view.full, k)
            ib, ispan = ideal if ideal is not None else (b, negspan)
            quality = 300.0 * min(1.0, b / ib if ib else 1.0) + 100.0 * min(1.0, b / REF_BW)
            quality += 100.0 * (ispan / negspan if negspan else 1.0)
        left = (free & ~chosen).bit_count()
        placement = 400.0 * ((n - left) / n if self.pack else left / n)
        return round(quality + placement)

    @max_normalized()
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return Status.ok()

    # --- PreBind: report malformed input ------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status:
        pending, self._pending_events = self._pending_events, []
        for n, problem in pending:
            raw = dict(n.raw)
            raw.setdefault("kind", "Node")
            try:
                await api.event(raw, "Warning", "InvalidDeviceTopology", f"{problem}; ignored", "Scheduling")
            except Exception as e:  # an Event is best effort: never fail a binding for it
                log.warning("could not write topology event", node=n.name, error=str(e))
        return Status.skip()

    # --- explanations -------------------------------------------------------------------------------------------

    def explain_devices(self, snap: Snapshot, node: str, devices: Sequence[DeviceID]) -> str:
        view = self.view(snap, node)
        if view is None:
            return ""
        idx = sorted({i for d in devices if (i := view.gpu_of.get(d)) is not None})
        if not idx:
            return ""
        return describe(view.topo, idx)

    def explain(self, state: CycleState, node: str) -> str:
        """Which GPUs the pod got on ``node`` and how they are connected (for the Scheduled event)."""
        data = state.read(DRA_STATE_KEY)
        if data is None:
            return ""
        allocs: Sequence[ClaimAllocation] = data.node_allocations.get(node) or []
        parts = []
        for a in allocs:
            s = self.explain_devices(state.snapshot, node, [(r.driver, r.pool, r.device) for r in a.results])
            if s:
                parts.append(s)
        return "; ".join(parts)

    # --- gangs --------------------------------------------------------------------------------------------------

    def placement_levels(self) -> Sequence[Level]:
        """PlacementGenerate: the topology levels of the args, outermost first."""
        return self.args.levels

    def level_problem(self, pg: PodGroup | None) -> str:
        """A PodGroup topology annotation that names no level (the last such one), else ""."""
        problem = ""
        ann = pg.meta.annotations if pg is not None else {}
        for key in (REQUIRED_ANNOTATION, PREFERRED_ANNOTATION):
            v = ann.get(key)
            if v and find_level(self.args.levels, v) is None:
                names = ", ".join(lv.name for lv in self.args.levels)
                problem = f"annotation {key}: {v!r} is not a topology level ({names})"
        return problem

    def generate_placements(
        self,
        pod_group: PodGroup | None,
        labels: Mapping[str, Mapping[str, str]],
        slots: Mapping[str, int],
        need: int,
    ) -> tuple[Plan, str]:
        """PlacementGenerate: the domains to try for ``need`` members (``slots``: how many fit on each feasible
        node, ``labels`` its labels), smallest first with Pack, up to the required level, then anywhere unless a
        level is required; and a problem with the PodGroup's annotations ("" when fine)."""
        required, _ = self.levels_for(pod_group)
        return (
            plan(self.args.levels, labels, slots, need, required, pack=self.pack),
            self.level_problem(pod_group),
        )

    def describe_placement(self, node_labels: Sequence[Mapping[str, str]], members: int) -> str:
        """PlacementGenerate: where ``members`` placed without a chosen domain landed (their nodes' labels)."""
        for lv in reversed(self.args.levels):
            values = {lab.get(lv.label, "") for lab in node_labels}
            if len(values) == 1 and "" not in values:
                return (
                    f"no single smaller domain had room for {members} members; placed in {lv.name} "
                    f"{next(iter(values))} ({lv.label})"
                )
        return f"no single topology domain had room for {members} members; placed across domains"

    def levels_for(self, pg: PodGroup | None) -> tuple[Level | None, Level | None]:
        """(required, preferred) level: the PodGroup's annotations win over the plugin args."""
        ann = pg.meta.annotations if pg is not None else {}
        req = ann.get(REQUIRED_ANNOTATION, self.args.required_level)
        pref = ann.get(PREFERRED_ANNOTATION, self.args.preferred_level)
        levels = self.args.levels
        return (find_level(levels, req) if req else None), (find_level(levels, pref) if pref else None)

    def gpu_demand(self, state: CycleState, feasible: Sequence[NodeInfo]) -> int:
        """GPUs (modelled devices) a member's claims take: counted on the allocation DynamicResources found on
        the first feasible node with a topology (NICs and other devices of the claims are not counted)."""
        for info in feasible[:8]:
            view = self.view(state.snapshot, info.name)
            if view is None:
                continue
            allocs = node_allocation(state, info)
            if allocs:
                return self._chosen(view, allocs).bit_count()
        return 0

    def domain_plan(
        self,
        state: CycleState,
        pg: PodGroup | None,
        feasible: Sequence[NodeInfo],
        need: int,
    ) -> tuple[Plan, str]:
        """Domains to try for a group of ``need`` members like the one whose cycle state is ``state`` (after
        PreFilter), and a problem with the PodGroup's topology annotations (empty when fine)."""
        snap = state.snapshot
        demand = self.gpu_demand(state, feasible)
        problem = self.level_problem(pg)
        required, _ = self.levels_for(pg)
        slots: dict[str, int] = {}
        labels: dict[str, Mapping[str, str]] = {}
        for info in feasible:
            view = self.view(snap, info.name) if demand > 0 else None
            if view is not None:
                s = self.free_mask(snap.ledger, info.name, view).bit_count() // demand
            else:
                s = 1
            if s > 0:
                slots[info.name] = s
                labels[info.name] = info.node.labels
        return plan(self.args.levels, labels, slots, need, required, pack=self.pack), problem

    def group_score(self, member: Pod, candidate: NodeInfo, used: Sequence[str]) -> int:
        """GroupMemberScore: a bonus for a node in the same domains as every member placed so far (innermost shared
        level)."""
        snap = self._snapshot
        if not used or snap is None:
            return 0
        depth = len(self.args.levels)
        for u in used:
            info = snap.node_map.get(u)
            if info is None:
                return 0
            if u == candidate.name:
                continue
            depth = min(depth, shared_depth(self.args.levels, candidate.node.labels, info.node.labels))
        return DOMAIN_BONUS * depth

    # --- BindingNote ---------------------------------------------------------------------------------------------

    def binding_note(self, state: CycleState, node: str) -> str:
        """BindingNote: how the pod's devices on ``node`` are connected, for the Scheduled event (``Successfully
        assigned ns/pod to node: gpu-0..3 NV18 all-pairs, NUMA 0``); empty when this plugin's PreFilter did not run
        for the pod, or without GPUs."""
        return self.explain(state, node) if state.read(EXPLAIN_KEY) is self else ""


SPEC = PluginSpec(
    name=NAME,
    factory=GpuTopology,
    points=frozenset({"preFilter", "score", "preBind"}),
    validate_args=validate_args,
)
