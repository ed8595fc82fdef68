"""DeviceFragmentation: place pods and choose their devices so that the least device capacity is stranded.

The measure and its sources are in :mod:`plugins.fragmentation.core` (Fragmentation Gradient Descent, USENIX
ATC '23, generalised to DRA). This module is the framework adapter:

PreEnqueue  learns the request mix online: the shape (cpu, memory, device requests) of every pod entering the
            queue, once per pod (PreFilter too, for a pod whose claims did not exist yet), over a sliding
            window of the last ``window`` pods: the pending queue and recent arrivals, no hand-written table.
            Never rejects a pod.
PreFilter   Pods whose claims are unallocated get a device-order hook for DynamicResources
            (chained after GpuTopology's): for a request of one device, or of shares of consumable capacity,
            the candidates that leave the node least fragmented come first (ties keep GpuTopology's order, so
            multi-GPU claims keep their NVLink/NUMA choice).
Score       how much placing the pod (its cpu/memory and the devices DynamicResources chose there) lowers the
            node's fragmentation under the mix, in thousandths of a device. CPU-only pods are scored too: cpu
            and memory taken from a node whose free GPUs need them strand those GPUs.
Normalize   min-max over the nodes looked at, with a floor of one whole device (``scale``): differences far
            below a device's worth do not spread to the full 0..100.

A cluster whose mix holds no device request (no DRA claims) gets 0 on every node: its placements are exactly
kube-scheduler's.

Args::

    window: 20000     # pods whose shapes make the mix (the most recent ones); 2000 forgot the rare large shapes
                      # (an 8-GPU task asking 120 cores) of a queue of 10,000 pods
    scale: 100        # thousandths of a device that count as a full score difference at least (a tenth of a
                      # device: a floor of 1000 let LeastAllocated spread pods onto the 128-core GPU nodes)
    strand: 50        # percent: weight of free devices the node's cpu/memory left could not serve (core.Mix)
    multiDevice: 10   # percent of the score kept for a pod asking several devices in one request, on nodes
                      # GpuTopology models: there NVLink/NUMA quality decides and fragmentation breaks ties
                      # (100: fragmentation as for any pod; nodes without a topology model always get 100)
    scarcity: 100     # percent: weight of the scarcity term (core.Scarcity): a device unit that pending pods of
                      # another request key need (their demand at or above the free capacity they can use) costs
                      # up to one whole unit of stranding when a pod that could go elsewhere takes it; 0: off

Reserve / Unreserve  keep the pending part of the window (pods seen and not placed), whose demand per request key
            the scarcity term weighs against the free capacity of the devices that key matches.

No node token: the score reads the device ledger only through DynamicResources' allocation and the ledger's
per-node revision, which DynamicResources' node token already guards for every pod (see GpuTopology).
"""

from __future__ import annotations

import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from plugins.dra.allocator import Allocator, ClaimAllocation, ClaimInput
from plugins.dra.pools import Candidate
from plugins.dra.state import DEVICE_ORDER_KEY, ClaimResolutionError, node_allocation, pod_claims
from plugins.dra.state import NAME as DRA_NAME
from plugins.dra.state import STATE_KEY as DRA_STATE_KEY
from plugins.fragmentation.core import (
    DeviceModel,
    Mix,
    NodeModel,
    ReqShape,
    Scarcity,
    Shape,
    State,
    UnitModel,
    canonical,
    free_amount,
    is_uniform,
    request_amount,
    supply,
    unit_keys,
)
from scheduler.api.dra import ClaimSpec, DeviceRequest, RequestSpec
from scheduler.api.model import CPU, MEMORY, Node, Pod
from scheduler.cache.ledger import DeviceID, DeviceLedger
from scheduler.config.registry import PluginSpec
from scheduler.framework.helpers import min_max_normalize_score, min_max_normalized
from scheduler.framework.interface import MAX_NODE_SCORE, CycleState, NodeScore, PreFilterResult, Status
from scheduler.framework.memo import NodeNameTables

if TYPE_CHECKING:
    from scheduler.cache.cache import NodeInfo, Snapshot

NAME = "DeviceFragmentation"
SHAPE_KEY = "DeviceFragmentation/shape"
DEFAULT_WINDOW = 20_000
DEFAULT_SCALE = 100
DEFAULT_STRAND = 50
DEFAULT_MULTI_DEVICE = 10
DEFAULT_SCARCITY = 100
SCARCITY_REFRESH = 128  # placements between two refreshes of the scarcity table (and on every new mix)
_UNSET: Any = object()
ORDER_MEMO_MAX = 20_000  # order_devices memo entries (node kind x state x need x ...) kept for one mix
YOUNG = 256  # a mix of fewer pods than this is rebuilt whenever it has seen a new pod
TOPOLOGY_KEY = "GpuTopology/explain"  # GpuTopology's PreFilter writes itself there (its view() models a node)


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    errs: list[str] = []
    for k, v in args.items():
        if k not in ("window", "scale", "strand", "multiDevice", "scarcity"):
            errs.append(f"{path}.{k}: unknown field")
        elif not isinstance(v, int) or isinstance(v, bool) or v < (1 if k in ("window", "scale") else 0):
            errs.append(f"{path}.{k}: must be a {'positive' if k in ('window', 'scale') else 'non-negative'} integer")
    return errs


def _spec_of(req: DeviceRequest) -> RequestSpec | None:
    if req.exactly is not None:
        return req.exactly
    return req.first_available[0] if req.first_available else None


def _need(spec: RequestSpec) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((name, q.milli_value()) for name, q in spec.capacity))


class DeviceFragmentation:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.window = int(args.get("window", DEFAULT_WINDOW))
        self.scale = int(args.get("scale", DEFAULT_SCALE))
        self.strand = int(args.get("strand", DEFAULT_STRAND)) / 100
        self.multi_device = int(args.get("multiDevice", DEFAULT_MULTI_DEVICE))
        self.scarcity = int(args.get("scarcity", DEFAULT_SCARCITY)) / 100
        self._seen: OrderedDict[str, Shape] = OrderedDict()  # pod uid -> shape, the window
        self._counts: dict[Shape, int] = {}
        self._shapes: dict[Shape, Shape] = {}  # the window's distinct shapes, interned
        # the pending part of the window: seen, not reserved (a pod deleted while pending leaves with the window)
        self._pending: dict[str, Shape] = {}
        self._pending_counts: dict[Shape, int] = {}
        self.scarce = Scarcity({}, {}, 0)
        self._scarce_at: tuple[int, int] | None = None  # (mix version, placements) at the last refresh
        self._placements = 0
        self._supply: dict[str, tuple[NodeModel, int, dict[Hashable, int], int]] = {}  # node -> its free per key
        # (kind, state, need, cpu/memory left, versions, own keys) -> device -> order_devices' sort key (or None)
        self._order_memo: dict[Hashable, dict[int, tuple[float, int, float, int] | None]] = {}
        self._order_memo_mix: Mix | None = None  # the mix the memo's entries were computed with
        # uniform kinds: (kind, canonical state, need, ranks, versions, own keys) -> (left, free) of the device taken
        # -> the same as _order_memo's entries (cleared with it)
        self._order_canon: dict[Hashable, dict[tuple[tuple[int, ...], bool], tuple[float, int, float, int] | None]] = {}
        self._specs: dict[Hashable, tuple[ClaimInput, RequestSpec]] = {}  # request key -> a spec to match with
        self.mix = Mix(())
        self._since_rebuild = 0
        self._versions = 0
        self._models: dict[str, tuple[Any, frozenset[Hashable], NodeModel]] = {}
        self._allocator: Allocator | None = None
        self._states: dict[str, tuple[DeviceLedger, int, NodeModel, State]] = {}
        self._per_node = NodeNameTables(self._models, self._states)  # deleted nodes leave both
        self._allocator_key: Any = None
        self._dra: Any = None
        self.stats = {"shapes": 0, "mix_versions": 0, "models": 0}

    # --- the mix ---------------------------------------------------------------------------------------------

    def shape_of(self, snap: Snapshot, pod: Pod) -> Shape:
        cached: Shape | None = pod.memo.get(SHAPE_KEY)
        if cached is not None:
            return cached
        reqs: list[ReqShape] = []
        claims = pod_claims(snap, pod) if pod.claims else []  # ClaimResolutionError: not known yet
        for c in claims:
            if c.allocation is not None:
                continue
            for r in c.spec.requests:
                spec = _spec_of(r)
                if spec is None:
                    continue
                key = (spec.device_class_name, spec.selectors)
                if key not in self._specs:
                    if len(self._specs) > 10_000:
                        self._specs.clear()
                    one = ClaimSpec(requests=(DeviceRequest(spec.name, spec, ()),), constraints=(), config=())
                    self._specs[key] = (ClaimInput(c.key, c.meta.uid, one), spec)
                count = spec.count if spec.allocation_mode == "ExactCount" else 1
                reqs.append(ReqShape(key, max(count, 1), _need(spec)))
        shape = Shape(pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0), tuple(reqs))
        pod.memo[SHAPE_KEY] = shape
        return shape

    def observe(self, uid: str, shape: Shape) -> None:
        """Count a pod's shape once (by UID) in the sliding window; rebuild the mix when it has drifted."""
        if uid in self._seen:
            return
        # one Shape object per distinct shape in the window (each pod's own equal copy is not kept)
        shape = self._shapes.setdefault(shape, shape)
        self._seen[uid] = shape
        self._counts[shape] = self._counts.get(shape, 0) + 1
        self._add_pending(uid, shape)
        if len(self._seen) > self.window:
            old_uid, old = self._seen.popitem(last=False)
            self._drop_pending(old_uid)
            n = self._counts[old] - 1
            if n:
                self._counts[old] = n
            else:
                del self._counts[old]
                self._shapes.pop(old, None)
        self._since_rebuild += 1
        new_shape = shape.reqs and not any(s == shape for s, _ in self.mix.shapes)
        # Rebuild at 1, 2, 4, ... observations while the mix is young, then every window/4 pods or on a shape
        # the mix lacks: each rebuild drops the memo and the batches of equal pods, so not on every pod.
        young = len(self._seen) < YOUNG and self._since_rebuild >= max(1, len(self._seen) // 2)
        if young or self._since_rebuild >= max(64, self.window // 4) or (new_shape and self._since_rebuild >= 16):
            self._rebuild()

    def _add_pending(self, uid: str, shape: Shape) -> None:
        if uid not in self._pending and shape.reqs:
            self._pending[uid] = shape
            self._pending_counts[shape] = self._pending_counts.get(shape, 0) + 1

    def _drop_pending(self, uid: str) -> None:
        shape = self._pending.pop(uid, None)
        if shape is not None:
            n = self._pending_counts[shape] - 1
            if n:
                self._pending_counts[shape] = n
            else:
                del self._pending_counts[shape]

    def _rebuild(self) -> None:
        self._since_rebuild = 0
        self._versions += 1
        self.stats["mix_versions"] = self._versions
        self.mix = Mix([(s, float(n)) for s, n in self._counts.items()], self._versions, self.strand)
        self.stats["shapes"] = len(self.mix.shapes)

    # --- node models -----------------------------------------------------------------------------------------

    def set_handle(self, handle: Any) -> None:
        """The framework: DynamicResources' instance (its CEL engine, pools and features) matches the mix's
        requests to devices, also in the cycles of pods without claims."""
        dra = getattr(handle, "instances", {}).get(DRA_NAME)
        if dra is not None:
            self._dra = dra

    def _alloc(self, state: CycleState) -> Allocator | None:
        data = state.read(DRA_STATE_KEY)
        if data is not None and data.owner is not None:
            self._dra = data.owner
        if self._dra is None:
            return None
        snap = state.snapshot
        key = (id(snap.classes), snap.class_generation, snap.slices.generation)
        if self._allocator is None or self._allocator_key != key or self._allocator.ledger is not snap.ledger:
            dra = self._dra
            self._allocator = Allocator(dra.features, snap.ledger, snap.classes, dra.selectors, dra.device_inputs)
            self._allocator_key = key
        return self._allocator

    def model(self, state: CycleState, info: NodeInfo) -> NodeModel | None:
        """The node's devices that the mix's requests match, grouped in units (cached per slices and keys)."""
        mix = self.mix
        if not mix:
            return None
        snap = state.snapshot
        slices = snap.slices.for_node(info.name)
        cached = self._models.get(info.name)
        gen = (snap.slices.generation, snap.class_generation, id(info.node))
        if cached is not None and cached[0] == gen and cached[1] == mix.keys:
            return cached[2]
        alloc = self._alloc(state)
        if alloc is None or self._dra is None:
            return None
        if not slices:
            m = NodeModel((), ())
        else:
            pools = self._dra._node_pools(snap, info)
            m = build_model(info.node, pools, mix.keys, self._specs, alloc)
        self.stats["models"] += 1
        self._models[info.name] = (gen, mix.keys, m)
        return m

    def _ledger_state(self, ledger: DeviceLedger, node: str, model: NodeModel) -> State:
        """The node's state from the ledger, cached per (ledger, node revision, model)."""
        rev = ledger.node_revision(node)
        got = self._states.get(node)
        if got is not None and got[0] is ledger and got[1] == rev and got[2] is model:
            return got[3]
        st = ledger_state(model, ledger)
        self._states[node] = (ledger, rev, model, st)
        return st

    # --- PreEnqueue / PreFilter -----------------------------------------------------------------------------------

    def pre_enqueue(self, snapshot: Snapshot, pod: Pod) -> Status:
        """Never rejects: observes the shape of every pod entering the queue (the pending mix)."""
        with contextlib.suppress(ClaimResolutionError):  # claims not created yet: seen at PreFilter
            self.observe(pod.meta.uid, self.shape_of(snapshot, pod))
        return Status.ok()

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        snap = state.snapshot
        self._per_node.retain(snap.node_names)
        try:
            shape = self.shape_of(snap, pod)
        except ClaimResolutionError:
            return None, Status.ok()  # DynamicResources reports it
        self.observe(pod.meta.uid, shape)
        if self._since_rebuild and len(self._seen) < YOUNG:
            # a young mix takes in every pod seen before this cycle (observe() rebuilds at 1, 2, 4, ... only)
            self._rebuild()
        if self.mix:
            self.refresh_scarcity(state)
        if shape.reqs and self.mix:
            prev = state.read(DEVICE_ORDER_KEY)
            # the function is kept in the state: holding the state weakly keeps the two out of a reference cycle,
            # which plain reference counting cannot free (each cycle's state, snapshot and pods would wait for
            # the collector's rare full passes: issue 24's growth between them)
            state_ref = weakref.ref(state)

            def order(node: Node, cands: Sequence[Candidate], spec: RequestSpec, count: int) -> Sequence[Candidate]:
                base = prev(node, cands, spec, count) if prev is not None else cands
                st = state_ref()
                if st is None:  # the cycle is over
                    return base
                return self.order_devices(st, pod, node, cands, base, spec, count)

            prev_key = getattr(prev, "class_key", None) if prev is not None else None

            def class_key(info: NodeInfo) -> Hashable | None:
                if prev is not None and prev_key is None:
                    return None
                below = prev_key(info) if prev_key is not None else ()
                st = state_ref()
                if below is None or st is None:
                    return None
                return below, self.order_class_key(st, pod, info)

            order.class_key = class_key  # type: ignore[attr-defined]
            state.write(DEVICE_ORDER_KEY, order)
        return None, Status.ok()

    def order_devices(
        self,
        state: CycleState,
        pod: Pod,
        node: Node,
        cands: Sequence[Candidate],
        base: Sequence[Candidate],
        spec: RequestSpec,
        count: int,
    ) -> Sequence[Candidate]:
        """For one device (or shares of consumable capacity): the candidates by the fragmentation they leave."""
        if count != 1 and not (spec.capacity and all(c.device.allow_multiple_allocations for c in cands)):
            return base
        snap = state.snapshot
        info = snap.node_map.get(node.name)
        if info is None:
            return base
        model = self.model(state, info)
        if model is None or not model.devices:
            return base
        cpu_left, mem_left = _left(info, pod)
        st = self._ledger_state(snap.ledger, info.name, model)
        need = _need(spec)
        scarce = self.scarce
        own = frozenset(r.key for r in self.shape_of(snap, pod).reqs) if scarce else frozenset()
        first = {id(c): i for i, c in enumerate(base)}
        # what taking one device leaves, per device: the same for every node of this kind in this state
        ranks = self.mix.ranks(cpu_left, mem_left)
        mkey = (model.memo_key, st, need, ranks, self.mix.version, scarce.view(own) if scarce else ())
        per_dev = self._order_memo.get(mkey)
        if per_dev is None:
            # entries of an older mix are never asked for again: dropped when the mix changes, and at most
            # ORDER_MEMO_MAX kinds x states are kept for one mix (a long-lived mix under churn sees new states)
            if self._order_memo_mix is not self.mix or len(self._order_memo) >= ORDER_MEMO_MAX:
                self._order_memo.clear()
                self._order_canon.clear()
                self._order_memo_mix = self.mix
            per_dev = self._order_memo[mkey] = {}
        # uniform models: what taking device d leaves depends only on the multiset of the units' states and d's own
        # (left, free), so nodes of this kind whose states are permutations of each other share it
        by_pair: dict[tuple[tuple[int, ...], bool], tuple[float, int, float, int] | None] | None = None
        scored: list[tuple[float, int, int, Candidate]] = []
        for i, c in enumerate(cands):
            d = model.index.get(c.id)
            if d is None:
                return base
            got = per_dev.get(d, _UNSET)
            if got is _UNSET:
                if model.uniform:
                    if by_pair is None:
                        ckey = (model.memo_key, canonical(model, st), *mkey[2:])  # mkey, its state canonical
                        by_pair = self._order_canon.get(ckey)
                        if by_pair is None:
                            by_pair = self._order_canon[ckey] = {}
                    pair = (st[0][d], st[1][d])
                    got = by_pair.get(pair, _UNSET)
                    if got is _UNSET:
                        got = by_pair[pair] = self._after_one(model, st, d, need, ranks, own)
                    per_dev[d] = got
                else:
                    got = per_dev[d] = self._after_one(model, st, d, need, ranks, own)
            if got is None:
                continue
            f = self.mix.with_strand(model, got[0], got[1], cpu_left, mem_left)
            if got[2]:
                f += got[2]
            # ties: the unit with the least left (best fit: shares stack), then GpuTopology's preference
            scored.append((round(f, 6), got[3], first.get(id(c), len(base) + i), c))
        if not scored:
            return base
        scored.sort(key=lambda t: t[:3])
        return [t[3] for t in scored]

    def order_class_key(self, state: CycleState, pod: Pod, info: NodeInfo) -> Hashable:
        """What :meth:`order_devices` reads of ``info`` for ``pod`` besides the node's devices and their use, which
        the caller keys by with the claims (plugins/dra/nodeclass.py: nodes with equal keys get the same order of
        the same devices): the node's kind, which cpu/memory shapes fit what the pod leaves, the stranding term's
        cpu and memory when they can matter, the mix and the scarcity view."""
        model = self.model(state, info)
        if model is None or not model.devices:
            return ()  # the order below this plugin's, unchanged
        snap = state.snapshot
        cpu_left, mem_left = _left(info, pod)
        scarce = self.scarce
        own = frozenset(r.key for r in self.shape_of(snap, pod).reqs) if scarce else frozenset()
        mix = self.mix
        return (
            model.memo_key,
            mix.ranks(cpu_left, mem_left),
            mix.strand_key(model, cpu_left, mem_left),
            mix.version,
            scarce.view(own) if scarce else (),
        )

    def _after_one(
        self,
        model: NodeModel,
        st: State,
        d: int,
        need: tuple[tuple[str, int], ...],
        ranks: tuple[int, int],
        own: frozenset[Hashable],
    ) -> tuple[float, int, float, int] | None:
        """Taking one device ``d`` (``need`` of it): the paper's measure left and the free device total after (the
        stranding term, which reads the exact cpu/memory left, is added by the caller), the scarcity cost, and the
        free amount of its unit before; None when it cannot take that."""
        after = _take(model, st, d, need)
        if after is None:
            return None
        u = model.devices[d].unit
        v, total = self.mix.expected(model, after, ranks)
        cost = self.scarcity * self.scarce.cost(model, st, after, own) if self.scarce else 0.0
        return v, total, cost, free_amount(model.units[u], st[0][u])

    # --- Reserve: the pending demand ----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        if pod.meta.uid in self._pending:
            self._drop_pending(pod.meta.uid)
            self._placements += 1
        return Status.ok()

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        shape = self._seen.get(pod.meta.uid)
        if shape is not None and pod.meta.uid not in self._pending:
            self._add_pending(pod.meta.uid, shape)
            self._placements += 1

    def refresh_scarcity(self, state: CycleState) -> None:
        """Recompute the scarcity table: pending demand and free supply per request key (core.Scarcity). Only
        when the mix has several keys (with one, every unit is alike to it)."""
        mix = self.mix
        at = (mix.version, self._placements)
        last = self._scarce_at
        if last is not None and at[0] == last[0] and at[1] - last[1] < SCARCITY_REFRESH:
            return
        self._scarce_at = at
        if not self.scarcity or len(mix.keys) < 2:
            if self.scarce:
                self.scarce = Scarcity({}, {}, 0)
            self._supply.clear()
            return
        snap = state.snapshot
        ledger = snap.ledger
        free: dict[Hashable, int] = {}
        total = 0
        kinds: set[frozenset[Hashable]] = set()
        rep: dict[Hashable, UnitModel] = {}  # key -> a unit it matches (what a request of it takes of one)
        most: dict[Hashable, int] = {}  # key -> the most devices it matches on one node
        seen: dict[str, tuple[NodeModel, int, dict[Hashable, int], int]] = {}
        for info in snap.nodes:
            model = self.model(state, info)
            if model is None or not model.units:
                continue
            rev = ledger.node_revision(info.name)
            got = self._supply.get(info.name)
            if got is None or got[0] is not model or got[1] != rev:
                st = self._ledger_state(ledger, info.name, model)
                node_total = sum(free_amount(u, st[0][i]) for i, u in enumerate(model.units))
                got = (model, rev, supply(model, st), node_total)
            seen[info.name] = got
            for k, v in got[2].items():
                free[k] = free.get(k, 0) + v
            total += got[3]
            for i, keys in enumerate(unit_keys(model)):
                kinds.add(keys)
                for k in keys:
                    if k not in rep:
                        rep[k] = model.units[i]
            for k in mix.keys:
                n = len(model.matching(k))
                if n > most.get(k, 0):
                    most[k] = n
        self._supply = seen  # nodes gone from the snapshot leave the cache
        demand: dict[Hashable, int] = {}
        for shape, n in self._pending_counts.items():
            if any(req.count > most.get(req.key, 0) for req in shape.reqs):
                continue  # no node has that many matching devices: a demand no placement can serve
            for req in shape.reqs:
                unit = rep.get(req.key)
                if unit is not None:
                    demand[req.key] = demand.get(req.key, 0) + n * req.count * request_amount(req, unit)
        new = Scarcity(demand, free, total, frozenset(kinds))
        if new != self.scarce:  # an equal table keeps its memoised views
            self.scarce = new

    # --- Score --------------------------------------------------------------------------------------------------

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        shape = self.shape_of(state.snapshot, pod)
        scarce = self.scarce.view(frozenset(r.key for r in shape.reqs)) if self.scarce and shape.reqs else ()
        return (self.mix.version, scarce, shape)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        mix = self.mix
        if not mix:
            return 0
        model = self.model(state, node)
        if model is None or not model.units:
            return 0
        snap = state.snapshot
        cpu_free, mem_free = _left(node, None)
        before = self._ledger_state(snap.ledger, node.name, model)
        results: list[tuple[DeviceID, Mapping[str, int] | None]] = []
        if state.read(DRA_STATE_KEY) is not None:
            allocs = node_allocation(state, node)
            if allocs is None:
                return 0
            results = _results(allocs)
        after = with_uses(model, before, results)
        shape = self.shape_of(snap, pod)
        f0 = mix.value(model, before, cpu_free, mem_free)
        f1 = mix.value(model, after, cpu_free - shape.cpu, mem_free - shape.mem)
        delta = f0 - f1
        if self.multi_device < 100 and any(r.count > 1 for r in shape.reqs):
            topo = state.read(TOPOLOGY_KEY)
            if topo is not None and topo.view(snap, node.name) is not None:
                # interconnect quality decides for multi-GPU claims where GpuTopology models the node
                delta = delta * self.multi_device / 100
        if self.scarce:
            delta -= self.scarcity * self.scarce.cost(model, before, after, frozenset(r.key for r in shape.reqs))
        return round(delta)

    @min_max_normalized("scale")
    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        min_max_normalize_score(MAX_NODE_SCORE, self.scale, scores)
        return Status.ok()


# --- node models and states (pure helpers) ----------------------------------------------------------------------


def build_model(
    node: Node,
    pools: Sequence[Any],
    keys: frozenset[Hashable],
    specs: Mapping[Hashable, tuple[ClaimInput, RequestSpec]],
    alloc: Allocator,
) -> NodeModel:
    """Units and devices of ``node`` for the request ``keys`` (matched with DynamicResources' CEL engine)."""
    matched: dict[DeviceID, set[Hashable]] = {}
    cands: dict[DeviceID, Candidate] = {}
    for key in keys:
        got = specs.get(key)
        if got is None:
            continue
        claim, spec = got
        for c in alloc.matching(claim, spec, pools, node):
            matched.setdefault(c.id, set()).add(key)
            cands[c.id] = c
    units: list[UnitModel] = []
    unit_of: dict[Hashable, int] = {}
    devices: list[DeviceModel] = []
    ids: list[DeviceID] = []
    counter_sets = {p.id: p.counter_sets for p in pools}
    for dev_id in sorted(matched):
        c = cands[dev_id]
        d = c.device
        if d.consumes_counters:
            cc = d.consumes_counters[0]
            sets = counter_sets.get(c.pool, {})
            cap_map = sets.get(cc.counter_set)
            if cap_map:
                ukey = (c.pool, cc.counter_set)
                dims = tuple(sorted(cap_map))
                u = unit_of.get(ukey)
                if u is None:
                    u = unit_of[ukey] = len(units)
                    units.append(UnitModel(dims, tuple(max(cap_map[n].milli_value(), 1) for n in dims)))
                need = tuple(cc.counters[n].milli_value() if n in cc.counters else 0 for n in dims)
                devices.append(DeviceModel(frozenset(matched[dev_id]), u, False, need))
                ids.append(dev_id)
                continue
        if d.allow_multiple_allocations and d.capacity:
            dims = tuple(sorted(d.capacity))
            cap = tuple(max(d.capacity[n].value.milli_value(), 1) for n in dims)
        else:
            dims, cap = ("",), (1,)
        units.append(UnitModel(dims, cap))
        devices.append(DeviceModel(frozenset(matched[dev_id]), len(units) - 1, d.allow_multiple_allocations))
        ids.append(dev_id)
    shape = (tuple(units), tuple(devices))
    kind = _KINDS.get(shape)
    if kind is None:
        if len(_KINDS) > 100_000:
            _KINDS.clear()
        kind = _KINDS[shape] = object()
    return NodeModel(
        shape[0],
        shape[1],
        tuple(ids),
        {dev_id: i for i, dev_id in enumerate(ids)},
        kind=kind,
        uniform=is_uniform(shape[0], shape[1]),
    )


# (units, devices) -> the token nodes of one kind share (NodeModel.kind): their F memo and rates are shared
_KINDS: dict[tuple[tuple[UnitModel, ...], tuple[DeviceModel, ...]], object] = {}


def _left(info: NodeInfo, pod: Pod | None) -> tuple[int, int]:
    alloc = info.node.allocatable
    cpu = alloc.get(CPU, 0) - info.requested.get(CPU, 0)
    mem = alloc.get(MEMORY, 0) - info.requested.get(MEMORY, 0)
    if pod is not None:
        cpu -= pod.requests.get(CPU, 0)
        mem -= pod.requests.get(MEMORY, 0)
    return cpu, mem


def _results(allocs: Sequence[ClaimAllocation]) -> list[tuple[DeviceID, Mapping[str, int] | None]]:
    out: list[tuple[DeviceID, Mapping[str, int] | None]] = []
    for a in allocs:
        for r in a.results:
            consumed = getattr(r, "consumed_capacity", None)
            out.append(
                ((r.driver, r.pool, r.device), {k: q.milli_value() for k, q in consumed.items()} if consumed else None)
            )
    return out


def ledger_state(model: NodeModel, ledger: DeviceLedger) -> State:
    """The node's state as the ledger has it (allocated, assumed and in-flight claims)."""
    uses: list[tuple[DeviceID, Mapping[str, int] | None]] = []
    for some_id in model.ids:
        dev_id: DeviceID = some_id  # type: ignore[assignment]  # this adapter's models hold DeviceIDs
        if ledger.is_allocated(dev_id):
            uses.append((dev_id, None))
        shares = ledger.shared_consumption(dev_id)
        if shares:
            for c in shares.values():
                uses.append((dev_id, {k: q.milli_value() for k, q in c.items()}))
    return with_uses(model, (tuple(u.cap for u in model.units), (True,) * len(model.devices)), uses)


def with_uses(model: NodeModel, st: State, uses: Sequence[tuple[DeviceID, Mapping[str, int] | None]]) -> State:
    """``st`` with more uses of the node's devices (device id, consumed capacity or None for all of it)."""
    if not uses:
        return st
    lefts = [list(x) for x in st[0]]
    free = list(st[1])
    index = model.index
    for used_id, consumed in uses:
        i = index.get(used_id)
        if i is None:
            continue
        dev = model.devices[i]
        unit = model.units[dev.unit]
        left = lefts[dev.unit]
        if dev.counters is not None:
            if free[i]:
                for j, n in enumerate(dev.counters):
                    left[j] -= n
        elif consumed is None or not dev.shareable or unit.dims == ("",):
            for j in range(len(left)):
                left[j] = 0
        else:
            for j, name in enumerate(unit.dims):
                left[j] -= consumed.get(name, 0)
        free[i] = False
    return tuple(tuple(x) for x in lefts), tuple(free)


def _take(model: NodeModel, st: State, d: int, need: tuple[tuple[str, int], ...]) -> State | None:
    """``st`` with one device of a request taken from device ``d`` (``need``: per-device capacity; empty: whole)."""
    dev = model.devices[d]
    unit = model.units[dev.unit]
    lefts = [list(x) for x in st[0]]
    left = lefts[dev.unit]
    free = list(st[1])
    if dev.counters is not None:
        if not free[d]:
            return None
        for j, n in enumerate(dev.counters):
            left[j] -= n
    elif dev.shareable and need and unit.dims != ("",):
        for name, amount in need:
            if name not in unit.dims:
                return None
            j = unit.dims.index(name)
            if left[j] < amount:
                return None
            left[j] -= amount
    else:
        if not free[d]:
            return None
        for j in range(len(left)):
            left[j] = 0
    free[d] = False
    return tuple(tuple(x) for x in lefts), tuple(free)


SPEC = PluginSpec(
    name=NAME,
    factory=DeviceFragmentation,
    points=frozenset({"preEnqueue", "preFilter", "score", "reserve"}),
    validate_args=validate_args,
)

__all__ = ["NAME", "SPEC", "DeviceFragmentation", "build_model", "ledger_state", "validate_args", "with_uses"]
