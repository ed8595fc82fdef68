"""The scheduler's cache of cluster state and the immutable per-cycle snapshot.

The cache is fed raw dicts (informer events, or the in-memory API in ``simulate``), converts them once
into typed values, and keeps per-kind generations. ``snapshot()`` returns an immutable view for one
scheduling cycle; per-kind maps are copied only when that kind changed since the previous snapshot,
so taking a snapshot is cheap when little changed.

Pods assumed onto a node (chosen in a cycle, binding not yet echoed by the watch) count on that node
at once, as kube-scheduler's assume/forget.

A cycle places one pod, so one or two NodeInfos change between snapshots; taking a snapshot must not cost
O(nodes) (upstream ``Cache.UpdateSnapshot`` walks only the NodeInfos changed since the last one, by
generation: ``pkg/scheduler/backend/cache/cache.go``). Here a snapshot's ``node_map`` is a :class:`NodeMap`:
a dict shared by many snapshots plus the few entries changed since it was copied (copy-on-write, re-based
once the changes outnumber about 2·√nodes), its ``nodes`` tuple is built only when asked for, the lists of
nodes with affinity pods are kept as sets of names, and every NodeInfo change is appended to a log the
snapshot can be asked about (``changed_nodes_since``): the framework's reuse of work between equal pods
looks only at the nodes changed since its last look.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import structlog

from scheduler.api.dra import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    claim_from,
    class_from,
    forget_claim_spec,
    slice_from,
    template_from,
)
from scheduler.api.model import (
    CPU,
    MEMORY,
    ModelError,
    Node,
    Pod,
    PodGroup,
    node_from,
    pod_from,
    pod_non_zero_requests,
    podgroup_from,
)
from scheduler.api.objects import OBJECT_KINDS
from scheduler.cache.ledger import DeviceLedger, PoolID

log = structlog.get_logger("dra_scheduler.cache")


_NODE_VERSIONS = itertools.count(1)


@dataclass(frozen=True, slots=True, eq=False)
class NodeInfo:
    """Immutable; replaced whenever the node or the pods on it change (identity = version)."""

    node: Node
    requested: Mapping[str, int]
    non_zero_requested: Mapping[str, int]
    pod_count: int
    pods: tuple[str, ...] = ()  # pod keys on the node
    name: str = ""
    # The Pod objects on the node (same order as ``pods``), and those with pod (anti-)affinity terms /
    # required anti-affinity terms (upstream NodeInfo.Pods, PodsWithAffinity, PodsWithRequiredAntiAffinity).
    pod_list: tuple[Pod, ...] = ()
    pods_with_affinity: tuple[Pod, ...] = ()
    pods_with_required_anti_affinity: tuple[Pod, ...] = ()
    # Scratch space for plugins' derived views of this (immutable) NodeInfo, e.g. used host ports.
    memo: dict[str, Any] = field(default_factory=dict, repr=False)
    # A number unique to this object (each NodeInfo is one version of its node): memos that must know whether a
    # node is still the one they saw keep this number, not the object, which would keep the node's old pods alive
    # for as long as the memo holds the entry. Not copied by dataclasses.replace (a copy is another version).
    version: int = field(default_factory=lambda: next(_NODE_VERSIONS), init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.node.name)


def _node_info(node: Node, pods: Mapping[str, Pod]) -> NodeInfo:
    req: dict[str, int] = {}
    nz_cpu = nz_mem = 0
    for p in pods.values():
        for k, v in p.requests.items():
            req[k] = req.get(k, 0) + v
        nz = pod_non_zero_requests(p)  # per-container 100m / 200Mi defaults (PodInfo.CalculateResource)
        nz_cpu += nz[0]
        nz_mem += nz[1]
    keys = tuple(sorted(pods))
    plist = tuple(pods[k] for k in keys)
    return NodeInfo(
        node,
        req,
        {CPU: nz_cpu, MEMORY: nz_mem},
        len(pods),
        keys,
        pod_list=plist,
        pods_with_affinity=tuple(p for p in plist if p.has_pod_affinity),
        pods_with_required_anti_affinity=tuple(p for p in plist if p.has_required_anti_affinity),
    )


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """ResourceSlices arranged for the allocator; rebuilt whenever any slice changes."""

    generation: int
    by_node: Mapping[str, tuple[ResourceSlice, ...]]
    not_node_local: tuple[ResourceSlice, ...]
    by_pool: Mapping[PoolID, tuple[ResourceSlice, ...]]

    def for_node(self, node: str) -> tuple[ResourceSlice, ...]:
        return self.by_node.get(node, ()) + self.not_node_local


def build_slice_index(slices: Mapping[str, ResourceSlice], generation: int) -> SliceIndex:
    by_node: dict[str, list[ResourceSlice]] = {}
    shared: list[ResourceSlice] = []
    by_pool: dict[PoolID, list[ResourceSlice]] = {}
    for s in sorted(slices.values(), key=lambda s: s.name):
        if s.node_name:
            by_node.setdefault(s.node_name, []).append(s)
        else:
            shared.append(s)
        by_pool.setdefault((s.driver, s.pool), []).append(s)
    return SliceIndex(
        generation,
        {k: tuple(v) for k, v in by_node.items()},
        tuple(shared),
        {k: tuple(v) for k, v in by_pool.items()},
    )


_GONE: Any = object()  # NodeMap delta: the node was deleted
_logs = itertools.count(1)


class OverlayMap(Mapping[str, Any]):
    """A snapshot's read-only map: ``base`` (a dict never mutated once shared) overlaid with ``delta`` (the
    entries changed since ``base`` was copied; ``_GONE`` for deleted ones). Iteration follows ``order`` when
    given (node names, sorted), else ``base``'s order followed by the keys added since."""

    __slots__ = ("_base", "_delta", "_len", "_order")

    def __init__(
        self, base: Mapping[str, Any], delta: Mapping[str, Any], length: int, order: tuple[str, ...] | None = None
    ) -> None:
        self._base = base
        self._delta = delta
        self._len = length
        self._order = order

    def __getitem__(self, key: str) -> Any:
        if self._delta:
            v = self._delta.get(key)
            if v is not None:
                if v is _GONE:
                    raise KeyError(key)
                return v
        return self._base[key]

    def get(self, key: str, default: Any = None) -> Any:
        if self._delta:
            v = self._delta.get(key)
            if v is not None:
                return default if v is _GONE else v
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        if self._delta and key in self._delta:
            return self._delta[key] is not _GONE  # type: ignore[index]
        return key in self._base

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        if self._order is not None:
            return (k for k in self._order if k in self)
        d = self._delta
        if not d:
            return iter(self._base)
        base = self._base
        return itertools.chain(
            (k for k in base if k not in d or d[k] is not _GONE),
            (k for k, v in d.items() if v is not _GONE and k not in base),
        )

    def merged(self) -> dict[str, Any]:
        """A plain dict of the same entries (one C-speed copy)."""
        if not self._delta:
            return dict(self._base)
        out = {**self._base, **self._delta}
        for k, v in self._delta.items():
            if v is _GONE:
                del out[k]
        return out


NodeMap = OverlayMap  # a snapshot's node name -> NodeInfo


class _CowDict:
    """Cheap snapshots of a live dict: a shared copy (``base``) and the entries changed since (``delta``, copied
    into each snapshot), re-based (one O(n) copy) once the changes outnumber about 2·√n, or when the live
    dict was replaced (a fork of the cache)."""

    __slots__ = ("base", "delta", "of")

    def __init__(self) -> None:
        self.base: dict[str, Any] = {}
        self.delta: dict[str, Any] = {}
        self.of: dict[str, Any] | None = None  # the live dict ``base`` was copied from

    def note(self, live: dict[str, Any], key: str, value: Any) -> None:
        """``live[key]`` was set to ``value`` (None: deleted)."""
        if self.of is live:
            self.delta[key] = _GONE if value is None else value

    def view(self, live: dict[str, Any], order: tuple[str, ...] | None = None) -> OverlayMap:
        if self.of is not live or len(self.delta) > 2 * int(len(live) ** 0.5) + 8:
            self.base = dict(live)
            self.delta = {}
            self.of = live
        return OverlayMap(self.base, dict(self.delta), len(live), order)


@dataclass(frozen=True, slots=True)
class NodeLog:
    """Where a snapshot stands in its cache's log of NodeInfo changes (see ``Snapshot.changed_nodes_since``)."""

    source: int  # the log's identity (a cache's, or a fork's)
    entries: list[str]  # names, oldest first; the cache appends to it and replaces it when trimming
    base: int  # absolute sequence number of entries[0]
    seq: int  # absolute sequence number just after the last entry this snapshot saw


_NO_LOG = NodeLog(0, [], 0, 0)


class Snapshot:
    """One scheduling cycle's immutable view of the cluster.

    ``nodes`` (the NodeInfos in node-name order) and the lists of nodes with affinity pods are built on first
    use; ``node_map`` and ``node_names`` cost nothing to take. ``node_objects_generation`` changes only when a
    Node object does (not when pods move), ``changed_nodes_since`` names the nodes whose NodeInfo changed."""

    __slots__ = (
        "_affinity",
        "_anti_affinity",
        "_nodes",
        "claims",
        "class_generation",
        "classes",
        "ledger",
        "ledger_revision",
        "namespaces",
        "node_log",
        "node_map",
        "node_names",
        "node_objects_generation",
        "objects",
        "podgroups",
        "slices",
        "templates",
    )

    def __init__(
        self,
        nodes: tuple[NodeInfo, ...] | None = None,
        node_map: Mapping[str, NodeInfo] | None = None,
        slices: SliceIndex | None = None,
        classes: Mapping[str, DeviceClass] | None = None,
        class_generation: int = 0,
        claims: Mapping[str, ResourceClaim] | None = None,
        templates: Mapping[str, ResourceClaimTemplate] | None = None,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        podgroups: Mapping[str, PodGroup] | None = None,
        ledger: DeviceLedger | None = None,
        ledger_revision: int = 0,
        objects: Mapping[str, Mapping[str, Any]] | None = None,
        nodes_with_affinity_pods: tuple[NodeInfo, ...] | Callable[[], tuple[NodeInfo, ...]] | None = None,
        nodes_with_required_anti_affinity_pods: tuple[NodeInfo, ...] | Callable[[], tuple[NodeInfo, ...]] | None = None,
        *,
        node_names: tuple[str, ...] | None = None,
        node_log: NodeLog = _NO_LOG,
        node_objects_generation: int = 0,
    ) -> None:
        if node_map is None:
            node_map = MappingProxyType({i.name: i for i in nodes or ()})
        self._nodes = nodes
        self.node_map = node_map
        self.node_names = node_names if node_names is not None else tuple(i.name for i in nodes or ())
        self.slices = slices if slices is not None else build_slice_index({}, 0)
        self.classes = classes if classes is not None else _EMPTY
        self.class_generation = class_generation
        self.claims = claims if claims is not None else _EMPTY
        self.templates = templates if templates is not None else _EMPTY
        self.namespaces = namespaces if namespaces is not None else _EMPTY
        self.podgroups = podgroups if podgroups is not None else _EMPTY
        self.ledger = ledger if ledger is not None else DeviceLedger()
        self.ledger_revision = ledger_revision
        self.objects = objects if objects is not None else _EMPTY
        self._affinity = nodes_with_affinity_pods
        self._anti_affinity = nodes_with_required_anti_affinity_pods
        self.node_log = node_log
        self.node_objects_generation = node_objects_generation

    @property
    def nodes(self) -> tuple[NodeInfo, ...]:
        """The NodeInfos in node-name order (built on first use: O(nodes))."""
        nodes = self._nodes
        if nodes is None:
            m = self.node_map
            get = (m.merged() if isinstance(m, OverlayMap) else dict(m)).get
            nodes = self._nodes = tuple(i for i in map(get, self.node_names) if i is not None)
        return nodes

    @property
    def nodes_with_affinity_pods(self) -> tuple[NodeInfo, ...]:
        """Nodes with at least one pod with pod (anti-)affinity (upstream HavePodsWithAffinityList)."""
        v = self._affinity
        if v is None:
            v = self._affinity = tuple(i for i in self.nodes if i.pods_with_affinity)
        elif callable(v):
            v = self._affinity = v()
        return v

    @property
    def nodes_with_required_anti_affinity_pods(self) -> tuple[NodeInfo, ...]:
        """Nodes with at least one pod with required anti-affinity (HavePodsWithRequiredAntiAffinityList)."""
        v = self._anti_affinity
        if v is None:
            v = self._anti_affinity = tuple(i for i in self.nodes if i.pods_with_required_anti_affinity)
        elif callable(v):
            v = self._anti_affinity = v()
        return v

    def changed_nodes_since(self, mark: tuple[int, int] | None) -> tuple[tuple[int, int], Collection[str] | None]:
        """``(this snapshot's mark, names)``: the nodes whose NodeInfo changed (or which were added or deleted)
        between the snapshot of ``mark`` and this one; names None when that is not known (another cache, a
        log trimmed since, no mark)."""
        log = self.node_log
        now = (log.source, log.seq)
        if mark is None or mark[0] != log.source or log.source == 0 or mark[1] < log.base or mark[1] > log.seq:
            return now, None
        return now, log.entries[mark[1] - log.base : log.seq - log.base]

    def objects_of(self, kind: str) -> Mapping[str, Any]:
        return self.objects.get(kind) or _EMPTY


_EMPTY: Mapping[str, Any] = MappingProxyType({})

Handler = Callable[[str, str, Any, Any], None]  # (kind, event, old, new)


class Cache:
    """Typed cluster state. All mutation goes through ``apply`` (one raw event at a time)."""

    KINDS = (
        "Node",
        "Pod",
        "ResourceSlice",
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "PodGroup",
        "Namespace",
        *OBJECT_KINDS,
    )

    def __init__(self) -> None:
        self.ledger = DeviceLedger()
        self._nodes: dict[str, Node] = {}
        self._node_pods: dict[str, dict[str, Pod]] = {}
        self._node_infos: dict[str, NodeInfo] = {}
        self._pods: dict[str, Pod] = {}
        self._assumed: dict[str, str] = {}  # pod key -> node (not yet confirmed by the watch)
        self._slices: dict[str, ResourceSlice] = {}
        self._classes: dict[str, DeviceClass] = {}
        self._claims: dict[str, ResourceClaim] = {}
        self._templates: dict[str, ResourceClaimTemplate] = {}
        self._podgroups: dict[str, PodGroup] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._objects: dict[str, dict[str, Any]] = {k: {} for k in OBJECT_KINDS}
        self.generations: dict[str, int] = dict.fromkeys((*self.KINDS, "Objects"), 0)
        self._snap_parts: dict[str, tuple[int, Any]] = {}
        self._slice_index = build_slice_index({}, 0)
        self._slices_dirty = False
        self._node_order_cached: tuple[str, ...] | None = ()  # sorted node names; None: to sort again
        self.handlers: list[Handler] = []
        self.conversion_errors: dict[str, str] = {}
        # Snapshots' node and claim maps (OverlayMap): a shared copy and what changed since it was taken.
        self._node_cow = _CowDict()
        self._claim_cow = _CowDict()
        self._live_objects: tuple[dict[str, dict[str, Any]], Mapping[str, Mapping[str, Any]]] | None = None
        # The log of NodeInfo changes (names), read by Snapshot.changed_nodes_since.
        self._log_source = next(_logs)
        self._node_log: list[str] = []
        self._node_log_base = 0
        # Node objects changed (not pods moving): a generation of its own (ImageLocality's spread, ...).
        self.generations["NodeObjects"] = 0
        # Names of the nodes with affinity pods / required anti-affinity pods, for the snapshots' lists.
        self._affinity_names: set[str] = set()
        self._anti_names: set[str] = set()
        self._aff_of: dict[str, NodeInfo] | None = None  # the _node_infos dict the two sets describe
        self.generations["AffinityNodes"] = 0

    def _bump(self, kind: str) -> None:
        self.generations[kind] = self.generations.get(kind, 0) + 1

    # --- reads -------------------------------------------------------------------------------------

    def pod(self, key: str) -> Pod | None:
        return self._pods.get(key)

    def claim(self, key: str) -> ResourceClaim | None:
        return self._claims.get(key)

    def pods(self) -> Mapping[str, Pod]:
        return self._pods

    def claims(self) -> Mapping[str, ResourceClaim]:
        return self._claims

    def nodes(self) -> Mapping[str, Node]:
        return self._nodes

    def podgroups(self) -> Mapping[str, PodGroup]:
        return self._podgroups

    # --- events ------------------------------------------------------------------------------------

    def apply(self, kind: str, event: str, raw: Mapping[str, Any]) -> None:
        """Apply one informer event (ADDED / MODIFIED / DELETED) for a raw object of ``kind``."""
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        try:
            if kind in OBJECT_KINDS:
                self._on_object(kind, event, key, raw)
            else:
                getattr(self, f"_on_{kind.lower()}")(event, key, raw)
        except ModelError as e:
            self.conversion_errors[f"{kind} {key}"] = str(e)
            log.warning("object rejected", kind=kind, object=key, error=str(e))
            return
        self.conversion_errors.pop(f"{kind} {key}", None)
        self.generations[kind] += 1
        if kind in OBJECT_KINDS:
            self.generations["Objects"] += 1

    def _notify(self, kind: str, event: str, old: Any, new: Any) -> None:
        for h in self.handlers:
            h(kind, event, old, new)

    def _on_node(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        old = self._nodes.get(key)
        self._bump("NodeObjects")
        if event == "DELETED":
            self._nodes.pop(key, None)
            self._node_order_cached = None
            self._refresh_node(key)
            self._notify("Node", event, old, None)
            return
        node = node_from(raw)
        self._nodes[key] = node
        if old is None:
            self._node_order_cached = None  # sorted when next read (sorting at each add: quadratic at load)
        self._refresh_node(key)
        self._notify("Node", event, old, node)

    @property
    def _node_order(self) -> tuple[str, ...]:
        order = self._node_order_cached
        if order is None:
            order = self._node_order_cached = tuple(sorted(self._nodes))
        return order

    @_node_order.setter
    def _node_order(self, order: tuple[str, ...]) -> None:
        self._node_order_cached = order

    def _refresh_node(self, name: str) -> None:
        """Rebuild (or drop) ``name``'s NodeInfo; every change goes to the snapshots' overlay and the log."""
        node = self._nodes.get(name)
        old = self._node_infos.get(name)
        info: NodeInfo | None = None
        if node is None:
            self._node_infos.pop(name, None)
        else:
            info = self._node_infos[name] = _node_info(node, self._node_pods.get(name, {}))
        self._node_cow.note(self._node_infos, name, info)
        self._node_log.append(name)
        if len(self._node_log) > 4 * len(self._node_infos) + 4096:
            keep = len(self._node_log) // 2  # a new list: snapshots keep reading the one they saw
            self._node_log_base += len(self._node_log) - keep
            self._node_log = self._node_log[-keep:]
        if self._aff_of is not self._node_infos:
            return  # the sets are rebuilt at the next snapshot
        with_affinity = info is not None and bool(info.pods_with_affinity)
        with_anti = info is not None and bool(info.pods_with_required_anti_affinity)
        if with_affinity or (old is not None and old.pods_with_affinity) or name in self._affinity_names:
            self._bump("AffinityNodes")
            (self._affinity_names.add if with_affinity else self._affinity_names.discard)(name)
        if with_anti or (old is not None and old.pods_with_required_anti_affinity) or name in self._anti_names:
            self._bump("AffinityNodes")
            (self._anti_names.add if with_anti else self._anti_names.discard)(name)

    def _place(self, pod: Pod, node: str) -> None:
        self._node_pods.setdefault(node, {})[pod.key] = pod
        self._refresh_node(node)
        self.generations["Node"] += 1

    def _unplace(self, key: str, node: str) -> None:
        pods = self._node_pods.get(node)
        if pods is not None and pods.pop(key, None) is not None:
            self._refresh_node(node)
            self.generations["Node"] += 1

    def _on_pod(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        old = self._pods.get(key)
        old_node = (old.node_name or self._assumed.get(key, "")) if old is not None else ""
        if event == "DELETED":
            if old_node:
                self._unplace(key, old_node)
            self._pods.pop(key, None)
            self._assumed.pop(key, None)
            self._notify("Pod", event, old, None)
            return
        try:
            pod = pod_from(raw)
        except ModelError:
            if old_node:
                self._unplace(key, old_node)
            raise
        if old is not None and old.uid != pod.uid:
            self._assumed.pop(key, None)
        self._pods[key] = pod
        node = pod.node_name
        if node:
            self._assumed.pop(key, None)
        else:
            node = self._assumed.get(key, "")
        here = self._node_pods.get(node) if node and node == old_node and not pod.terminated else None
        if here is not None and key in here:
            # still on the same node (the binding of an assumed pod, a status update): one NodeInfo rebuild
            here[key] = pod
            self._refresh_node(node)
            self.generations["Node"] += 1
        else:
            if old_node:
                self._unplace(key, old_node)
            if node and not pod.terminated:
                self._place(pod, node)
        self._notify("Pod", event, old, pod)

    def assume_pod(self, pod: Pod, node: str) -> None:
        """The pod was chosen for ``node`` in a cycle: count it there until the binding is confirmed."""
        self._assumed[pod.key] = node
        self._place(pod, node)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def forget_pod(self, pod: Pod) -> None:
        node = self._assumed.pop(pod.key, None)
        if node:
            self._unplace(pod.key, node)

    def _on_resourceslice(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        old = self._slices.get(key)
        new = None
        if event == "DELETED":
            self._slices.pop(key, None)
        else:
            new = slice_from(raw)
            self._slices[key] = new
        self._slices_dirty = True
        self._notify("ResourceSlice", event, old, new)

    def _slices_index(self) -> SliceIndex:
        """Rebuilt lazily: loading N slices costs one rebuild, not N."""
        if self._slices_dirty:
            self._slices_dirty = False
            self._slice_index = build_slice_index(self._slices, self._slice_index.generation + 1)
            pool_node: dict[PoolID, str] = {}
            for pool, slices in self._slice_index.by_pool.items():
                nodes = {s.node_name for s in slices}
                pool_node[pool] = next(iter(nodes)) if len(nodes) == 1 else ""
            self.ledger.set_pool_nodes(pool_node)
        return self._slice_index

    def _on_deviceclass(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        old = self._classes.get(key)
        new = None
        if event == "DELETED":
            self._classes.pop(key, None)
        else:
            new = class_from(raw)
            self._classes[key] = new
        self._notify("DeviceClass", event, old, new)

    def _on_resourceclaim(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        old = self._claims.get(key)
        if event == "DELETED":
            self._claims.pop(key, None)
            self._claim_cow.note(self._claims, key, None)
            if old is not None:
                self.ledger.forget_claim(old.meta.uid)
                forget_claim_spec(old.meta.uid)
            self._notify("ResourceClaim", event, old, None)
            return
        claim = claim_from(raw)
        if old is not None and old.meta.uid != claim.meta.uid:
            self.ledger.forget_claim(old.meta.uid)
            forget_claim_spec(old.meta.uid)
        self._claims[key] = claim
        self._claim_cow.note(self._claims, key, claim)
        self.ledger.observe_claim(
            claim.meta.uid,
            key,
            claim.allocation.results if claim.allocation else None,
            claim.meta.resource_version,
        )
        self._notify("ResourceClaim", event, old, claim)

    def _on_resourceclaimtemplate(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        if event == "DELETED":
            self._templates.pop(key, None)
        else:
            self._templates[key] = template_from(raw)
        self._notify("ResourceClaimTemplate", event, None, self._templates.get(key))

    def _on_podgroup(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        old = self._podgroups.get(key)
        if event == "DELETED":
            self._podgroups.pop(key, None)
        else:
            self._podgroups[key] = podgroup_from(raw)
        self._notify("PodGroup", event, old, self._podgroups.get(key))

    def _on_namespace(self, event: str, key: str, raw: Mapping[str, Any]) -> None:
        if event == "DELETED":
            self._namespaces.pop(key, None)
        else:
            labels = (raw.get("metadata") or {}).get("labels") or {}
            self._namespaces[key] = {str(k): str(v) for k, v in labels.items()}
        self._notify("Namespace", event, None, None)

    def _on_object(self, kind: str, event: str, key: str, raw: Mapping[str, Any]) -> None:
        store = self._objects[kind]
        old = store.get(key)
        if event == "DELETED":
            store.pop(key, None)
            new = None
        else:
            new = store[key] = OBJECT_KINDS[kind](raw)
        self._notify(kind, event, old, new)

    def objects(self, kind: str) -> Mapping[str, Any]:
        return self._objects.get(kind) or _EMPTY

    # --- snapshot ----------------------------------------------------------------------------------

    def _part(self, kind: str, make: Callable[[], Any]) -> Any:
        gen = self.generations[kind]
        cached = self._snap_parts.get(kind)
        if cached is not None and cached[0] == gen:
            return cached[1]
        value = make()
        self._snap_parts[kind] = (gen, value)
        return value

    def view(self) -> Snapshot:
        """A non-copying view for work outside a scheduling cycle (PreEnqueue checks)."""
        return Snapshot(
            nodes=(),
            node_map=MappingProxyType(self._node_infos),
            slices=self._slices_index(),
            classes=MappingProxyType(self._classes),
            class_generation=self.generations["DeviceClass"],
            claims=MappingProxyType(self._claims),
            templates=MappingProxyType(self._templates),
            namespaces=MappingProxyType(self._namespaces),
            podgroups=MappingProxyType(self._podgroups),
            ledger=self.ledger,
            ledger_revision=self.ledger.revision,
            objects=self._objects_view(),
        )

    def _objects_view(self) -> Mapping[str, Mapping[str, Any]]:
        """Read-only views of the live per-kind stores (built once per ``_objects`` dict)."""
        cached = self._live_objects
        if cached is None or cached[0] is not self._objects:
            cached = self._live_objects = (
                self._objects,
                MappingProxyType({k: MappingProxyType(v) for k, v in self._objects.items()}),
            )
        return cached[1]

    def _node_map(self) -> OverlayMap:
        return self._node_cow.view(self._node_infos, self._node_order)

    def _affinity_lists(self, node_map: Mapping[str, NodeInfo]) -> tuple[tuple[NodeInfo, ...], tuple[NodeInfo, ...]]:
        return (
            tuple(node_map[n] for n in sorted(self._affinity_names) if n in node_map),
            tuple(node_map[n] for n in sorted(self._anti_names) if n in node_map),
        )

    def snapshot(self) -> Snapshot:
        node_map = self._part("Node", self._node_map)
        if self._aff_of is not self._node_infos:
            infos = self._node_infos
            self._affinity_names = {n for n, i in infos.items() if i.pods_with_affinity}
            self._anti_names = {n for n, i in infos.items() if i.pods_with_required_anti_affinity}
            self._aff_of = infos
            self._bump("AffinityNodes")
        gen = self.generations["AffinityNodes"]
        cached = self._snap_parts.get("AffinityNodes")
        if cached is not None and cached[0] == gen:
            with_affinity, with_anti = cached[1]
        else:
            with_affinity, with_anti = self._affinity_lists(node_map)
            self._snap_parts["AffinityNodes"] = (gen, (with_affinity, with_anti))

        def objects() -> Mapping[str, Mapping[str, Any]]:
            return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self._objects.items()})

        objs = self._part("Objects", objects)
        slices = self._slices_index()
        log = self._node_log
        return Snapshot(
            node_map=node_map,
            node_names=self._node_order,
            slices=slices,
            classes=self._part("DeviceClass", lambda: MappingProxyType(dict(self._classes))),
            class_generation=self.generations["DeviceClass"],
            claims=self._part("ResourceClaim", lambda: self._claim_cow.view(self._claims)),
            templates=self._part("ResourceClaimTemplate", lambda: MappingProxyType(dict(self._templates))),
            namespaces=self._part("Namespace", lambda: MappingProxyType(dict(self._namespaces))),
            podgroups=self._part("PodGroup", lambda: MappingProxyType(dict(self._podgroups))),
            ledger=self.ledger,
            ledger_revision=self.ledger.revision,
            objects=objs,
            nodes_with_affinity_pods=with_affinity,
            nodes_with_required_anti_affinity_pods=with_anti,
            node_log=NodeLog(self._log_source, log, self._node_log_base, self._node_log_base + len(log)),
            node_objects_generation=self.generations.get("NodeObjects", 0),
        )
