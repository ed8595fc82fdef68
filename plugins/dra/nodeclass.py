"""Nodes alike for the allocator: one allocation computed on a node serves every node of the same class.

A cluster is mostly nodes of a few kinds (one SKU, one driver), and at a given moment many of them are in the same
state: no device used, or the same shares on the same devices. The allocator's answer for a claim on such a node
depends only on what it reads:

* the node's pools: their devices (names, attributes, capacities, counters, taints, flags), counter sets and
  slice count, but not the pool's or the node's name;
* the device ledger: which of those devices are allocated, and the capacity each share on a device consumes
  (not which claim holds it);
* the candidate order of the cycle (GpuTopology, DeviceFragmentation), whose providers say what their order on a
  node depends on (``DeviceOrder.class_key``; a provider without it, or that answers None, opts the node out);
* the claims (the caller's signature).

:func:`node_class` is a key of the first two, for nodes where that list is complete: every pool of the node holds
only devices of this node (``spec.nodeName`` slices: node-local GPUs), one pool per driver, complete and valid, no
binding conditions, no DeviceTaintRule taint, no per-device node selection. Network-attached pools shared by
several nodes, or anything else, give None: those nodes are computed one by one as before. :func:`moved` renames
an allocation made on one node of a class for another: the pool names, the node selector (``metadata.name``), the
share IDs (as the allocator makes them, for the claim being allocated), and the device objects.

The semantics are the allocator's own (plugins/dra/allocator.py, after upstream
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/experimental/allocator_experimental.go): nothing
there reads a pool's or node's name except to write it into the result, and tests/test_dra_nodeclass.py checks
that a moved allocation equals the one computed on the node itself.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

from plugins.dra.allocator import SHARE_NAMESPACE, ClaimAllocation, ClaimInput, node_name_selector
from plugins.dra.pools import Candidate, Pool
from scheduler.api.dra import ResourceSlice
from scheduler.cache.ledger import DeviceLedger
from scheduler.framework.memo import NodeNameTables

MEMO_MAX = 512  # allocations kept (claims x class x order), least recently used dropped; and ids per table
_IDS = itertools.count(1)  # class and signature ids, never reused: an id dropped from its table only stops matching


class NodeClasses:
    """DynamicResources' memo of allocations per (claims, node class, candidate order), and of each node's class
    per state of its pools and of the ledger (nodes deleted leave it)."""

    def __init__(self) -> None:
        self.allocs: dict[Hashable, list[ClaimAllocation]] = {}
        # node -> (its pools, ledger, the node's ledger revision, class id or None, its pools' content)
        self.of: dict[str, tuple[list[Pool], DeviceLedger, int, int | None, Hashable | None]] = {}
        self._retained = NodeNameTables(self.of)
        self._ids: dict[Hashable, int] = {}
        self._sigs: dict[Hashable, int] = {}

    def class_id(self, pools: list[Pool], ledger: DeviceLedger, node: str, names: Sequence[str]) -> int | None:
        """The id of the node's class (None: the node is on its own), cached while its pools and use stand."""
        rev = ledger.node_revision(node)
        got = self.of.get(node)
        if got is None or got[0] is not pools or got[1] is not ledger or got[2] != rev:
            content = got[4] if got is not None and got[0] is pools else pools_content(pools, node)
            cid = None if content is None else _intern(self._ids, node_class(pools, content, ledger))
            got = self.of[node] = (pools, ledger, rev, cid, content)
            self._retained.retain(names)
        return got[3]

    def signature_id(self, key: Hashable) -> int:
        """A small id for a claims' signature (hashing it once per cycle, not per node)."""
        return _intern(self._sigs, key)

    def get(
        self, ckey: Hashable, inputs: Sequence[ClaimInput], pools: Sequence[Pool], node: str
    ) -> list[ClaimAllocation] | None:
        """The allocation another node of the class got, moved to ``node`` (None: none yet)."""
        allocs = self.allocs.pop(ckey, None)
        if allocs is None:
            return None
        self.allocs[ckey] = allocs  # most recently used last
        return moved(allocs, inputs, pools, node)

    def put(self, ckey: Hashable, allocs: list[ClaimAllocation]) -> None:
        self.allocs[ckey] = allocs
        if len(self.allocs) > MEMO_MAX:
            del self.allocs[next(iter(self.allocs))]


def _intern(table: dict[Hashable, int], value: Hashable) -> int:
    got = table.get(value)
    if got is None:
        got = table[value] = next(_IDS)
        if len(table) > MEMO_MAX:
            del table[next(iter(table))]
    return got


def _slice_content(s: ResourceSlice) -> str:
    """The slice's spec without the node's and the pool's names."""
    spec = dict(s.raw.get("spec") or {})
    spec.pop("nodeName", None)
    spec.pop("pool", None)
    return json.dumps(spec, sort_keys=True, default=str)


def pool_content(pool: Pool, node: str) -> Hashable | None:
    """What the allocator reads of ``pool``, without its and the node's names; None when the pool is not one the
    class can stand for (see the module docstring). Costs a JSON dump of the pool's slices: the caller keeps it
    while the node's pools are the same objects."""
    if pool.incomplete or pool.invalid or pool.walk or pool.has_binding_conditions:
        return None
    slices: dict[int, ResourceSlice] = {}
    for c in pool.candidates:
        if c.rule_taints or not c.on_node:
            return None
        slices[c.slice.serial] = c.slice
    if len(pool.all_devices) != len(pool.candidates):
        return None  # devices of the pool that are not this node's
    for s in slices.values():
        if s.node_name != node or s.per_device_node_selection:
            return None
    return (
        pool.id[0],
        tuple(c.device.name for c in pool.candidates),
        tuple(sorted(_slice_content(s) for s in slices.values())),
    )


def pool_usage(pool: Pool, ledger: DeviceLedger) -> Hashable:
    """Which of the pool's devices are allocated, and what each share on them consumes (not whose it is)."""
    out: list[Hashable] = []
    for c in pool.candidates:
        shares = ledger.shared_consumption(c.id)
        used: Hashable = ()
        if shares:
            used = tuple(sorted(tuple(sorted((k, str(q)) for k, q in m.items())) for m in shares.values()))
        out.append((ledger.is_allocated(c.id), used))
    return tuple(out)


def pools_content(pools: Sequence[Pool], node: str) -> Hashable | None:
    """:func:`pool_content` of each pool, by driver (one pool per driver), or None."""
    if not pools:
        return None
    parts: dict[str, Hashable] = {}
    for p in pools:
        content = pool_content(p, node)
        if content is None or p.id[0] in parts:
            return None
        parts[p.id[0]] = content
    return tuple(sorted(parts.items()))


def node_class(pools: Sequence[Pool], content: Hashable, ledger: DeviceLedger) -> Hashable:
    """The node's class for the allocator: its pools' content (:func:`pools_content`, not None) and usage."""
    return content, tuple(sorted((p.id[0], pool_usage(p, ledger)) for p in pools))


def moved(
    allocs: Sequence[ClaimAllocation], inputs: Sequence[ClaimInput], pools: Sequence[Pool], node: str
) -> list[ClaimAllocation] | None:
    """``allocs`` (one per input, made on another node of the same class) for ``node`` with ``pools``; None when a
    device is not found there (not of the same class after all: the caller computes)."""
    by_driver = {p.id[0]: p for p in pools}
    out: list[ClaimAllocation] = []
    sel = node_name_selector(node)
    for alloc, inp in zip(allocs, inputs, strict=True):
        results = []
        devices = []
        raw_results: list[dict[str, Any]] = []
        old_raw = alloc.raw.get("devices") or {}
        for j, (r, rr) in enumerate(zip(alloc.results, old_raw.get("results") or (), strict=True)):
            pool = by_driver.get(r.driver)
            cand = _candidate(pool, r.device) if pool is not None else None
            if pool is None or cand is None:
                return None
            share = ""
            if r.share_id:
                share = str(uuid.uuid5(SHARE_NAMESPACE, f"{inp.uid}/{r.request}/{cand.id}/{j}"))
            results.append(replace(r, pool=pool.id[1], share_id=share))
            devices.append(cand.device)
            entry = {**rr, "pool": pool.id[1]}
            if share:
                entry["shareID"] = share
            raw_results.append(entry)
        raw: dict[str, Any] = {**alloc.raw, "devices": {**old_raw, "results": raw_results}}
        if alloc.node_selector is not None:
            raw["nodeSelector"] = sel.to_raw()
        out.append(
            ClaimAllocation(tuple(results), sel if alloc.node_selector is not None else None, raw, tuple(devices))
        )
    return out


def _candidate(pool: Pool, name: str) -> Candidate | None:
    return next((c for c in pool.candidates if c.device.name == name), None)
