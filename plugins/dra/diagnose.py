"""Why DynamicResources' Filter rejects a node: the message that names the first request the node cannot meet.

The allocator answers only "no fit"; :func:`diagnose` then counts, request by request, the node's devices that
match (class and selectors), are free (not allocated, not held, no untolerated taint) and still have enough left
(capacity, shared counters), and says which of those falls short; when every request fits on its own it names
what they cannot do together (the claim's constraints, shared counters or capacity). Reasons name claims by
placeholder (:func:`_claim_ref`) because the per-node result cache is shared by pods with equal claim specs;
:func:`_render` puts the pod's own claim keys in. Filter's "would eviction help" check counts with
:func:`_count_devices` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plugins.dra.allocator import Allocator, ClaimInput, capacity_shortfall, counter_shortfall
from plugins.dra.extended import NodeRequests
from plugins.dra.pools import Pool
from plugins.dra.state import _CycleData, _Extended
from plugins.dra.taintrules import describe_taint, untolerated_taint
from scheduler.api.dra import ALLOCATION_MODE_EXACT
from scheduler.cache.cache import NodeInfo


def _claim_ref(i: int) -> str:
    """A placeholder for the i-th claim's key in a cached reason: the per-node result cache is shared by
    pods with equal claim specs, whose claims have other names (see ``_render``)."""
    return f"\x00{i}\x00"


def _render(reason: str, inputs: Sequence[ClaimInput]) -> str:
    if "\x00" not in reason:
        return reason
    parts = reason.split("\x00")
    for j in range(1, len(parts), 2):
        parts[j] = inputs[int(parts[j])].key
    return "".join(parts)


def diagnose(probe: Allocator, data: _CycleData, node: NodeInfo, pools: list[Pool], inputs: list[ClaimInput]) -> str:
    """Name the first request that cannot be met on this node on its own, and why. ``probe``: an allocator over
    the cycle's ledger (its view of it in a dry run), used to count devices only."""
    ext_requests: dict[str, str] = {}  # request name -> extended resource, for the special claim
    if data.ext is not None and len(inputs) > len(data.inputs):
        nr = _ext_node_cached(data.ext, node)
        ext_requests = {m["requestName"]: m["resourceName"] for m in nr.mappings} if nr is not None else {}
    last: tuple[str, str, Any, int, int, str] | None = None  # the last request that fits on its own
    for i, inp in enumerate(inputs):
        is_ext = i >= len(data.inputs)
        for req in inp.spec.requests:
            specs = [req.exactly] if req.exactly is not None else list(req.first_available)
            best = ""
            for s in specs:
                if s is None:
                    continue
                matching, free, tainted = _count_devices(probe, node, pools, inp, s)
                need = s.count if s.allocation_mode == ALLOCATION_MODE_EXACT else max(1, matching)
                what = f"{s.count} device(s)" if s.allocation_mode == ALLOCATION_MODE_EXACT else "all devices"
                where = (
                    f"extended resource {ext_requests.get(s.name, '?')} (request {s.name})"
                    if is_ext
                    else f"claim {_claim_ref(i)}, request {s.name}"
                )
                if free >= need:
                    # free, but is there enough left on them (capacity of shared devices, shared counters)?
                    usable, short = _usable_devices(probe, node, pools, inp, s)
                    if usable >= need:
                        best = ""
                        last = (where, what, s, matching, free, tainted)
                        break
                    left = f"{usable or 'none'} with enough left ({short})"
                    why = f"{matching} match(es), {free} free{tainted}, {left}"
                elif matching == 0:
                    why = f"no device matches class {s.device_class_name} and the request's selectors"
                else:
                    why = f"{matching} match(es), {free} free{tainted}"
                best = best or f"{where}: needs {what} of class {s.device_class_name}: {why}"
            if best:
                return best
    if any(p.incomplete for p in pools):
        return "cannot allocate all claims (some resource pools are being updated)"
    requests = [(inp, req) for inp in inputs for req in inp.spec.requests]
    if len(requests) == 1 and last is not None:
        # one request that fits device by device: what is left is the devices together
        where, what, s, matching, free, tainted = last
        constraints = requests[0][0].spec.constraints
        if constraints:
            attrs = ", ".join(sorted({c.match_attribute or c.distinct_attribute or "?" for c in constraints}))
            because = f"the claim's constraints on {attrs}"
        else:
            because = "shared counters or capacity"
        n = s.count if s.allocation_mode == ALLOCATION_MODE_EXACT else matching
        tail = (
            f"none of them can be allocated ({because})"
            if n == 1
            else f"no {n} of them can be allocated together ({because})"
        )
        found = f"{matching} match(es), {free} free{tainted}"
        return f"{where}: needs {what} of class {s.device_class_name}: {found}, but {tail}"
    return "cannot allocate all claims: requests fit one by one but not together (constraints or shared devices)"


def _ext_node_cached(ext: _Extended, node: NodeInfo) -> NodeRequests | None:
    got = ext.nodes.get(node.name)
    return got[1] if got is not None and got[0] is node.node else None


def _count_devices(
    probe: Allocator, node: NodeInfo, pools: list[Pool], inp: ClaimInput, spec: Any
) -> tuple[int, int, str]:
    """(devices on the node matching the request's class and selectors, how many of them are free, a note on
    the unallocated ones a device taint the request does not tolerate keeps from being free)."""
    matching = free = tainted = 0
    first_taint = None
    for c in probe.matching(inp, spec, pools, node.node):
        matching += 1
        if not probe.ledger.is_allocated(c.id) and (
            c.device.allow_multiple_allocations or not probe.ledger.has_shares(c.id)
        ):
            t = (
                untolerated_taint((*c.device.taints, *c.rule_taints), spec.tolerations)
                if probe.features.device_taints
                else None
            )
            if t is not None:
                tainted += 1
                first_taint = first_taint or t
                continue
            free += 1
    note = f", {tainted} tainted ({describe_taint(first_taint)} not tolerated)" if first_taint is not None else ""
    return matching, free, note


def _usable_devices(probe: Allocator, node: NodeInfo, pools: list[Pool], inp: ClaimInput, spec: Any) -> tuple[int, str]:
    """(how many of the free matching devices ``spec`` could take right now, what is short on the others):
    the remaining capacity of a shareable device (or a dedicated device's capacity) against what the request
    consumes, and the shared counters left in a device's pool against what the device consumes."""
    by_id = {p.id: p for p in pools}
    usable = 0
    capacity: dict[str, tuple[Any, Any]] = {}  # capacity name -> (consumed by the request, most left)
    counters: dict[tuple[str, str], tuple[Any, Any]] = {}  # (counter set, counter) -> (consumed, most left)
    f = probe.features
    for c in probe.matching(inp, spec, pools, node.node):
        if probe.ledger.is_allocated(c.id) or (
            not c.device.allow_multiple_allocations and probe.ledger.has_shares(c.id)
        ):
            continue
        if f.device_taints and untolerated_taint((*c.device.taints, *c.rule_taints), spec.tolerations) is not None:
            continue
        cap = capacity_shortfall(probe.ledger, spec, c) if f.consumable_capacity else None
        if cap is not None:
            name, used, left = cap
            prev = capacity.get(name)
            capacity[name] = (used, left if prev is None or left > prev[1] else prev[1])
            continue
        cnt = counter_shortfall(probe, by_id[c.pool], c) if f.partitionable_devices else None
        if cnt is not None:
            set_name, cname, used, left = cnt
            prev = counters.get((set_name, cname))
            counters[(set_name, cname)] = (used, left if prev is None or left > prev[1] else prev[1])
            continue
        usable += 1
    notes = [
        f"capacity {name}: takes {used}, at most {left} left on a matching device"
        for name, (used, left) in capacity.items()
    ]
    notes += [
        f"counter {cname} of counter set {set_name}: a device takes {used}, at most {left} left"
        for (set_name, cname), (used, left) in counters.items()
    ]
    return usable, "; ".join(notes) or "no shortfall found"
