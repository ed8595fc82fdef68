"""Node classes for the allocator (plugins/dra/nodeclass.py): an allocation computed on one node serves the nodes
whose pools hold the same devices in the same use, renamed for them, and equals what the allocator computes there
(pool names, node selector ``metadata.name``, share IDs as upstream's allocator makes them for the claim: KEP-5075
``shareID``; semantics: plugins/dra/allocator.py, after upstream structured/internal/experimental/allocator)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest
from dra_fixtures import Share, make_ledger

import plugins.dra.plugin as dra_plugin
from plugins.dra.allocator import Allocator, ClaimAllocation, ClaimInput
from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.nodeclass import NodeClasses, moved, node_class, pools_content
from plugins.dra.pools import Features, Pool, gather_pools
from scheduler.api.dra import claim_spec_from, class_from, slice_from
from scheduler.api.model import Node, node_from
from scheduler.cache.cache import build_slice_index
from scheduler.cache.ledger import DeviceLedger
from scheduler.simulate.simulation import simulate

DRIVER = "gpu.example.com"
Raw = dict[str, Any]
CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}


def _gpu(i: int, multi: bool = True, model: str = "h100") -> Raw:
    d: Raw = {
        "name": f"gpu-{i}",
        "attributes": {"model": {"string": model}, "index": {"int": i}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    if multi:
        d["allowMultipleAllocations"] = True
    return d


def _slice(node: str, devices: list[Raw], driver: str = DRIVER, pool: str | None = None, **where: Any) -> Raw:
    spec: Raw = {
        "driver": driver,
        "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
        **(where or {"nodeName": node}),
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-{pool or node}"},
        "spec": spec,
    }


def _pools(slices: list[Raw], *nodes: str) -> dict[str, tuple[Node, list[Pool]]]:
    index = build_slice_index({f"{i:04d}": slice_from(s) for i, s in enumerate(slices)}, 1)
    out = {}
    for name in nodes:
        node = node_from({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        out[name] = (node, gather_pools(node, index.for_node(name), index.by_pool, Features()))
    return out


def _allocate(ledger: DeviceLedger, node: Node, pools: list[Pool], devices: Raw, uid: str) -> list[ClaimAllocation]:
    alloc = Allocator(Features(), ledger, {"gpu": class_from(CLASS)}, SelectorCache(get_engine()))
    got = alloc.allocate(node, [ClaimInput("default/c", uid, claim_spec_from({"devices": devices}))], pools)
    assert got is not None
    return got


def _exactly(count: int = 1, memory: str | None = None, **more: Any) -> Raw:
    ex: Raw = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count, **more}
    if memory:
        ex["capacity"] = {"requests": {"memory": memory}}
    return ex


CLAIMS = [
    {"requests": [{"name": "r", "exactly": _exactly(1, "20Gi")}]},
    {"requests": [{"name": "r", "exactly": _exactly(2)}]},
    {
        "requests": [{"name": "a", "exactly": _exactly(1, "50Gi")}, {"name": "b", "exactly": _exactly(1, "50Gi")}],
        "constraints": [{"matchAttribute": f"{DRIVER}/model"}],
    },
    {
        "requests": [
            {
                "name": "r",
                "firstAvailable": [{"name": "big", **_exactly(4, "70Gi")}, {"name": "small", **_exactly(1, "10Gi")}],
            }
        ]
    },
]


@pytest.mark.parametrize("devices", CLAIMS, ids=["share", "two-whole", "match-attribute", "first-available"])
def test_an_allocation_moved_to_a_node_of_the_class_is_the_one_the_allocator_computes_there(devices: Raw) -> None:
    slices = [_slice(n, [_gpu(i) for i in range(4)]) for n in ("a", "b")]
    nodes = _pools(slices, "a", "b")
    # the same use on both nodes: a 30Gi share on gpu-1 and gpu-2 taken whole
    ledger = make_ledger(
        allocated=[(DRIVER, "a", "gpu-2"), (DRIVER, "b", "gpu-2")],
        shares=[Share(DRIVER, n, "gpu-1", {"memory": "30Gi"}, share_id=f"s-{n}") for n in ("a", "b")],
    )
    (na, pa), (nb, pb) = nodes["a"], nodes["b"]
    ca, cb = pools_content(pa, "a"), pools_content(pb, "b")
    assert ca is not None and ca == cb
    assert node_class(pa, ca, ledger) == node_class(pb, cb, ledger)
    on_a = _allocate(ledger, na, pa, devices, "uid-1")
    on_b = _allocate(ledger, nb, pb, devices, "uid-2")
    inputs = [ClaimInput("default/c", "uid-2", claim_spec_from({"devices": devices}))]
    got = moved(on_a, inputs, pb, "b")
    assert got == on_b  # results (pools, devices, share IDs, capacity), node selector and raw status alike
    assert got is not None and [d.name for d in got[0].devices] == [d.name for d in on_b[0].devices]
    assert all(r.pool == "b" for r in got[0].results)


def test_the_class_follows_which_device_is_used_not_only_how_many() -> None:
    slices = [_slice(n, [_gpu(i) for i in range(4)]) for n in ("a", "b", "c")]
    nodes = _pools(slices, "a", "b", "c")
    content = pools_content(nodes["a"][1], "a")
    assert content is not None
    ledger = make_ledger(
        shares=[
            Share(DRIVER, "a", "gpu-1", {"memory": "30Gi"}),
            Share(DRIVER, "b", "gpu-2", {"memory": "30Gi"}),
            Share(DRIVER, "c", "gpu-1", {"memory": "40Gi"}),
        ]
    )
    classes = {n: node_class(nodes[n][1], content, ledger) for n in ("a", "b", "c")}
    assert len(set(classes.values())) == 3  # the share on another GPU, a share of another size
    pristine = _pools([_slice("d", [_gpu(i) for i in range(4)])], "d")["d"][1]
    assert node_class(pristine, content, make_ledger()) != classes["a"]


def test_pools_a_class_cannot_stand_for_leave_the_node_on_its_own() -> None:
    gpus = [_gpu(i) for i in range(2)]
    # another model: not the same content
    other = _pools([_slice("a", gpus), _slice("b", [_gpu(0), _gpu(1, model="a100")])], "a", "b")
    assert pools_content(other["a"][1], "a") != pools_content(other["b"][1], "b")
    # a pool for all nodes (network-attached), a per-device node selection, binding conditions, two pools of a driver
    shared = _pools([_slice("x", gpus, pool="fabric", allNodes=True)], "a")["a"][1]
    assert shared and pools_content(shared, "a") is None
    per_device = _pools(
        [_slice("x", [{**g, "nodeName": "a"} for g in gpus], pool="p", perDeviceNodeSelection=True)], "a"
    )["a"][1]
    assert per_device and pools_content(per_device, "a") is None
    conditions = [{**gpus[0], "bindingConditions": ["ready"], "bindingFailureConditions": ["failed"]}]
    assert pools_content(_pools([_slice("a", conditions)], "a")["a"][1], "a") is None
    two = _pools([_slice("a", gpus[:1], pool="p1"), _slice("a", gpus[1:], pool="p2")], "a")["a"][1]
    assert len(two) == 2 and pools_content(two, "a") is None
    assert pools_content([], "a") is None


# --- through the scheduler: the same placements with and without classes -------------------------------------


def _cluster(seed: int) -> list[Raw]:
    rng = random.Random(seed)
    objs: list[Raw] = [CLASS]
    for n in range(8):
        name = f"node-{n}"
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}},
            }
        )
        objs.append(_slice(name, [_gpu(i) for i in range(4)]))
    for p in range(40):
        name = f"p{p:02d}"
        kind = rng.choice(("share", "share", "whole", "two"))
        ex = (
            _exactly(1, rng.choice(("10Gi", "20Gi", "40Gi")))
            if kind == "share"
            else _exactly(1 if kind == "whole" else 2)
        )
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": ex}]}},
            }
        )
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "creationTimestamp": f"2026-01-01T00:{p:02d}:00Z"},
                "spec": {
                    "schedulerName": "dra-scheduler",
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": str(rng.choice((1, 2, 4)))}}}
                    ],
                },
            }
        )
    return objs


def _outcome(objs: list[Raw]) -> tuple[dict[str, str], dict[str, Any], Counter[tuple[str, str, str]]]:
    res = asyncio.run(simulate(objs))
    placed = {o["metadata"]["name"]: o["spec"].get("nodeName", "") for o in res.items if o["kind"] == "Pod"}
    allocs: dict[str, Any] = {}
    shares: Counter[tuple[str, str, str]] = Counter()
    for o in res.items:
        if o["kind"] != "ResourceClaim":
            continue
        a = (o.get("status") or {}).get("allocation")
        if a is None:
            continue
        allocs[o["metadata"]["name"]] = (
            a.get("nodeSelector"),
            [{k: v for k, v in r.items() if k != "shareID"} for r in a["devices"]["results"]],
        )
        for r in a["devices"]["results"]:
            if "shareID" in r:
                shares[(r["pool"], r["device"], r["shareID"])] += 1
    return placed, allocs, shares


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_classes_change_no_placement_and_no_allocation(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same pods on eight nodes of one kind, with node classes and with every node computed on its own: the
    same nodes and devices (share IDs aside: each names the claim it was made for), share IDs unique per
    device, and classes used."""
    hits = []
    real = NodeClasses.get

    def counting(self: Any, *a: Any) -> Any:
        got = real(self, *a)
        hits.append(got is not None)
        return got

    monkeypatch.setattr(NodeClasses, "get", counting)
    with_classes = _outcome(_cluster(seed))
    assert any(hits)
    monkeypatch.setattr(dra_plugin.DynamicResources, "_class_key", lambda *a: None)
    alone = _outcome(_cluster(seed))
    assert with_classes[0] == alone[0]
    assert with_classes[1] == alone[1]
    assert all(n == 1 for n in with_classes[2].values())
    assert sum(1 for v in with_classes[0].values() if v) >= 30
