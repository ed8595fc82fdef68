"""The scheduler's cache of cluster state and the immutable per-cycle snapshot.

The cache is fed raw dicts (informer events, or the in-memory API in ``simulate``), converts them once
into typed values, and keeps per-kind generations. ``snapshot()`` returns an immutable view for one
scheduling cycle; per-kind maps are copied only when that kind changed since the previous snapshot,
so taking a snapshot is cheap when little changed.

Pods assumed onto a node (chosen in a cycle, binding not yet echoed by the watch) count on that node
at once, as kube-scheduler's assume/forget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import structlog

from scheduler.ledger import DeviceLedger, PoolID
from scheduler.model import (
    CPU,
    MEMORY,
    DeviceClass,
    ModelError,
    Node,
    Pod,
    PodGroup,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    claim_from,
    class_from,
    node_from,
    pod_from,
    pod_non_zero_requests,
    podgroup_from,
    slice_from,
    template_from,
)
from scheduler.objects import OBJECT_KINDS

log = structlog.get_logger("dra_scheduler.cache")


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


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeInfo, ...]
    node_map: Mapping[str, NodeInfo]
    slices: SliceIndex
    classes: Mapping[str, DeviceClass]
    class_generation: int
    claims: Mapping[str, ResourceClaim]  # "ns/name" -> claim
    templates: Mapping[str, ResourceClaimTemplate]
    namespaces: Mapping[str, Mapping[str, str]]  # namespace -> labels
    podgroups: Mapping[str, PodGroup]
    ledger: DeviceLedger = field(repr=False)
    ledger_revision: int = 0
    # Other kinds (scheduler/objects.py): kind -> key ("ns/name" or "name") -> converted object.
    objects: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    # Nodes with at least one pod with pod (anti-)affinity / required anti-affinity (upstream
    # HavePodsWithAffinityList / HavePodsWithRequiredAntiAffinityList).
    nodes_with_affinity_pods: tuple[NodeInfo, ...] = ()
    nodes_with_required_anti_affinity_pods: tuple[NodeInfo, ...] = ()

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
        self._node_order: tuple[str, ...] = ()
        self.handlers: list[Handler] = []
        self.conversion_errors: dict[str, str] = {}

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
        if event == "DELETED":
            self._nodes.pop(key, None)
            self._node_infos.pop(key, None)
            self._node_order = tuple(sorted(self._nodes))
            self._notify("Node", event, old, None)
            return
        node = node_from(raw)
        self._nodes[key] = node
        if old is None:
            self._node_order = tuple(sorted(self._nodes))
        self._refresh_node(key)
        self._notify("Node", event, old, node)

    def _refresh_node(self, name: str) -> None:
        node = self._nodes.get(name)
        if node is None:
            self._node_infos.pop(name, None)
            return
        self._node_infos[name] = _node_info(node, self._node_pods.get(name, {}))

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
        if old is not None:
            old_node = old.node_name or self._assumed.get(key, "")
            if old_node:
                self._unplace(key, old_node)
        if event == "DELETED":
            self._pods.pop(key, None)
            self._assumed.pop(key, None)
            self._notify("Pod", event, old, None)
            return
        pod = pod_from(raw)
        if old is not None and old.uid != pod.uid:
            self._assumed.pop(key, None)
        self._pods[key] = pod
        node = pod.node_name
        if node:
            self._assumed.pop(key, None)
        else:
            node = self._assumed.get(key, "")
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
            if old is not None:
                self.ledger.forget_claim(old.meta.uid)
            self._notify("ResourceClaim", event, old, None)
            return
        claim = claim_from(raw)
        if old is not None and old.meta.uid != claim.meta.uid:
            self.ledger.forget_claim(old.meta.uid)
        self._claims[key] = claim
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
            objects=MappingProxyType({k: MappingProxyType(v) for k, v in self._objects.items()}),
        )

    def snapshot(self) -> Snapshot:
        def nodes() -> tuple[tuple[NodeInfo, ...], Mapping[str, NodeInfo], tuple[NodeInfo, ...], tuple[NodeInfo, ...]]:
            infos = tuple(self._node_infos[n] for n in self._node_order if n in self._node_infos)
            return (
                infos,
                MappingProxyType({i.name: i for i in infos}),
                tuple(i for i in infos if i.pods_with_affinity),
                tuple(i for i in infos if i.pods_with_required_anti_affinity),
            )

        node_list, node_map, with_affinity, with_anti = self._part("Node", nodes)

        def objects() -> Mapping[str, Mapping[str, Any]]:
            return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self._objects.items()})

        objs = self._part("Objects", objects)
        slices = self._slices_index()
        return Snapshot(
            nodes=node_list,
            node_map=node_map,
            slices=slices,
            classes=self._part("DeviceClass", lambda: MappingProxyType(dict(self._classes))),
            class_generation=self.generations["DeviceClass"],
            claims=self._part("ResourceClaim", lambda: MappingProxyType(dict(self._claims))),
            templates=self._part("ResourceClaimTemplate", lambda: MappingProxyType(dict(self._templates))),
            namespaces=self._part("Namespace", lambda: MappingProxyType(dict(self._namespaces))),
            podgroups=self._part("PodGroup", lambda: MappingProxyType(dict(self._podgroups))),
            ledger=self.ledger,
            ledger_revision=self.ledger.revision,
            objects=objs,
            nodes_with_affinity_pods=with_affinity,
            nodes_with_required_anti_affinity_pods=with_anti,
        )
