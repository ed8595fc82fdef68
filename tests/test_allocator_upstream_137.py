"""Allocation outcomes that must match the structured allocator of Kubernetes 1.37.2 (issue 25, items 4c, 5a,
5b, 6c).

Upstream: ``k8s.io/dynamic-resource-allocation`` v0.37.2, the allocator that kube-scheduler 1.37.2 uses with
its default feature gates (``structured/internal/experimental/allocator_experimental.go``: ``isSelectable``,
``validateDeviceRequest``, ``allocateOne``, ``allocateDevice``, ``deviceInUse``, "Populate configs"), and
``k8s.io/kubernetes`` v1.37.2 ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``
``Filter`` (an allocator error is an Error status: the pod's scheduling attempt fails, it is not just
unschedulable on that node). tests/test_differential.py runs random cases of the same kinds against the real
allocator.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

import pytest
from dra_fixtures import Share, make_ledger

from plugins.dra.allocator import AllocationError, Allocator, ClaimAllocation, ClaimInput
from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.pools import Features, gather_pools
from scheduler.api.dra import claim_spec_from, class_from, slice_from
from scheduler.api.model import node_from
from scheduler.cache.cache import build_slice_index
from scheduler.simulate.simulation import simulate

DRIVER = "dra.example.com"
A = f'device.attributes["{DRIVER}"]'
Raw = dict[str, Any]


def dev(name: str, node: str | None = None, multi: bool = False, memory: str = "40Gi", **attrs: Any) -> Raw:
    a = {k: {"string": v} if isinstance(v, str) else {"int": v} for k, v in attrs.items()}
    out: Raw = {"name": name, "attributes": a, "capacity": {"memory": {"value": memory}}}
    if node is not None:
        out["nodeName"] = node
    if multi:
        out["allowMultipleAllocations"] = True
    return out


def slice_(name: str, pool: str, devices: Sequence[Raw], node: str | None = "node-1") -> Raw:
    where: Raw = {"nodeName": node} if node is not None else {"perDeviceNodeSelection": True}
    spec = {"driver": DRIVER, **where, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {**spec, "devices": list(devices)}}


def klass(name: str, *selectors: str, config: str | None = None) -> Raw:
    spec: Raw = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config is not None:
        spec["config"] = [{"opaque": {"driver": DRIVER, "parameters": {"config": config}}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def exactly(cls: str, count: int = 1, mode: str = "ExactCount", memory: str | None = None) -> Raw:
    out: Raw = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        out["count"] = count
    if memory is not None:
        out["capacity"] = {"requests": {"memory": memory}}
    return out


def allocate(
    slices: Sequence[Raw],
    classes: Sequence[Raw],
    claim_devices: Raw,
    allocated: Sequence[tuple[str, str, str]] = (),
    shares: Sequence[Share] = (),
) -> list[ClaimAllocation] | None:
    node = node_from({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
    index = build_slice_index({f"{i:04d}": slice_from(s) for i, s in enumerate(slices)}, 1)
    features = Features()
    pools = gather_pools(node, index.for_node(node.name), index.by_pool, features)
    alloc = Allocator(
        features,
        make_ledger(allocated, shares),
        {c["metadata"]["name"]: class_from(c) for c in classes},
        SelectorCache(get_engine()),
    )
    claim = ClaimInput("default/c", "uid-c", claim_spec_from({"devices": claim_devices}))
    return alloc.allocate(node, [claim], pools)


def configs(a: ClaimAllocation) -> list[tuple[str, tuple[str, ...] | None, str]]:
    return [
        (c["source"], tuple(c["requests"]) if "requests" in c else None, c["opaque"]["parameters"]["config"])
        for c in a.raw["devices"].get("config", [])
    ]


# --- 5a: the class config of a firstAvailable request names the subrequest ---------------------------------


def test_class_config_of_a_first_available_request_names_the_chosen_subrequest() -> None:
    """allocator_experimental.go "Populate configs": ``Requests: []string{requestData.requestName()}`` of the
    selected subrequest, so the config applies to that alternative only ("r0/s1", not "r0")."""
    classes = [klass("a", f'{A}.model == "a100"', config="class-a"), klass("b", config="class-b")]
    devices = {
        "requests": [
            {"name": "r0", "firstAvailable": [{"name": "s0", **exactly("a", 2)}, {"name": "s1", **exactly("b")}]},
            {"name": "r1", "exactly": exactly("a")},
        ]
    }
    [got] = allocate([slice_("s", "p", [dev("d0", model="a100"), dev("d1", model="h100")])], classes, devices) or []
    assert sorted((r.request, r.device) for r in got.results) == [("r0/s1", "d1"), ("r1", "d0")]
    assert configs(got) == [("FromClass", ("r0/s1",), "class-b"), ("FromClass", ("r1",), "class-a")]


def test_one_class_config_for_a_subrequest_and_a_request_applies_to_all() -> None:
    """The same class for the chosen alternative and the other request: one entry naming both, and since that
    covers every request its ``requests`` is dropped ("applies to all")."""
    classes = [klass("a", config="class-a")]
    devices = {
        "requests": [
            {"name": "r0", "firstAvailable": [{"name": "s0", **exactly("a", 5)}, {"name": "s1", **exactly("a")}]},
            {"name": "r1", "exactly": exactly("a")},
        ]
    }
    [got] = allocate([slice_("s", "p", [dev("d0"), dev("d1")])], classes, devices) or []
    assert configs(got) == [("FromClass", None, "class-a")]


# --- 5b: All-mode devices that break a claim constraint -----------------------------------------------------


def test_all_device_breaking_a_constraint_is_an_error_even_without_capacity_left() -> None:
    """allocateDevice checks the claim constraints before the remaining capacity, and an ``All`` device
    (``must``) that breaks one is an error ("cannot add device ... because a claim constraint would not be
    satisfied"), not "does not fit": here r0 takes 30Gi of d0, r1 (All, 30Gi, constrained to d0's lacking
    model) cannot add d0."""
    devices = {
        "requests": [
            {"name": "r0", "exactly": exactly("a", memory="30Gi")},
            {"name": "r1", "exactly": exactly("a", mode="All", memory="30Gi")},
        ],
        "constraints": [{"matchAttribute": f"{DRIVER}/model", "requests": ["r1"]}],
    }
    with pytest.raises(AllocationError, match=r"cannot add device dra\.example\.com/p/d0 because a claim constraint"):
        allocate([slice_("s", "p", [dev("d0", multi=True)])], [klass("a")], devices)


def test_all_list_counts_devices_by_static_capacity() -> None:
    """validateDeviceRequest builds the ``All`` list with static capacity only: a matching device whose
    remaining capacity is too small stays in it and the request does not fit (v0.37.2 table:
    consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient)."""
    devices = {"requests": [{"name": "r0", "exactly": exactly("a", mode="All", memory="30Gi")}]}
    shares = [Share(DRIVER, "p", "d0", {"memory": "20Gi"})]
    slices = [slice_("s", "p", [dev("d0", multi=True), dev("d1", multi=True)])]
    assert allocate(slices, [klass("a")], devices, shares=shares) is None
    assert allocate(slices, [klass("a")], devices) is not None


# --- 4c: selectors run on devices of other nodes in per-device-node-selection slices -----------------------


def _per_device_slice(*devices: Raw) -> Raw:
    return slice_("s", "p", devices, node=None)


@pytest.mark.parametrize("mode", ["ExactCount", "All"])
def test_selector_error_on_another_nodes_device_fails_the_claim(mode: str) -> None:
    """isSelectable evaluates the class and request selectors before the per-device node selection, so a
    runtime error on a device that is for another node (in a slice that also has devices for this node) is an
    allocation error, not "no match"."""
    cls = klass("a", f'{A}.model == "a100"')
    devices = {"requests": [{"name": "r0", "exactly": exactly("a", mode=mode)}]}
    slices = [_per_device_slice(dev("d-other", node="node-2"), dev("d-here", node="node-1", model="a100"))]
    with pytest.raises(AllocationError, match=r"d-other: .*no such key: model"):
        allocate(slices, [cls], devices)


def test_another_nodes_device_is_never_allocated_and_walked_in_order() -> None:
    """The search meets the devices in slice order: a device for this node that comes first satisfies the
    request before the failing one is reached (as upstream), and a device for another node is never taken."""
    cls = klass("a", f'{A}.model == "a100"')
    devices = {"requests": [{"name": "r0", "exactly": exactly("a")}]}
    slices = [_per_device_slice(dev("d-here", node="node-1", model="a100"), dev("d-other", node="node-2"))]
    [got] = allocate(slices, [cls], devices) or []
    assert [r.device for r in got.results] == ["d-here"]
    slices = [_per_device_slice(dev("d-other", node="node-2", model="a100"))]
    assert allocate(slices, [cls], devices) is None


def test_a_shareable_device_held_exclusively_is_skipped_before_its_selectors() -> None:
    """deviceInUse (checked before the selectors) is true for any device the allocated state holds, shareable
    or not: a selector that would fail on it is not evaluated."""
    cls = klass("a", f'{A}.model == "a100"')
    devices = {"requests": [{"name": "r0", "exactly": exactly("a")}]}
    slices = [slice_("s", "p", [dev("d0", multi=True), dev("d1", model="a100")])]
    [got] = allocate(slices, [cls], devices, allocated=[(DRIVER, "p", "d0")]) or []
    assert [r.device for r in got.results] == ["d1"]


def test_semver_compared_with_a_string_fails_the_claim() -> None:
    """Item 4b at the allocator: the selector's runtime error ("no such overload", k8s.io/apiserver v0.37.2
    pkg/cel/semver.go Equal) is an allocation error for the claim, not an unschedulable node."""
    cls = klass("a", f'{A}.driverVersion == "1.2.3"')
    devices = {"requests": [{"name": "r0", "exactly": exactly("a")}]}
    d = dev("d0")
    d["attributes"]["driverVersion"] = {"version": "1.2.3"}
    with pytest.raises(AllocationError, match="no such overload"):
        allocate([slice_("s", "p", [d])], [cls], devices)


# --- through the scheduler (simulate) ---------------------------------------------------------------------


def _node(name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def _claim(name: str, devices: Raw) -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": devices},
    }


def _pod(name: str, claim: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _condition(objs: list[Raw], pod: str = "p") -> Raw:
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    [p] = [o for o in res.items if o["kind"] == "Pod" and o["metadata"]["name"] == pod]
    assert not p["spec"].get("nodeName"), p["spec"]
    cond: Raw = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
    return cond


def test_pod_whose_selector_fails_on_another_nodes_device_gets_a_scheduler_error() -> None:
    """kube-scheduler 1.37.2 DynamicResources.Filter returns an Error status for an allocator error: the
    attempt fails (SchedulerError) even though node-1 has a matching device of its own (node-2, whose device
    fails the selector, is not even in the cluster)."""
    objs = [
        _node("node-1"),
        klass("gpu", f'{A}.model == "a100"'),
        _per_device_slice(dev("d-other", node="node-2"), dev("d-here", node="node-1", model="a100")),
        _claim("c", {"requests": [{"name": "gpu", "exactly": exactly("gpu")}]}),
        _pod("p", "c"),
    ]
    cond = _condition(objs)
    assert cond["reason"] == "SchedulerError"
    assert "no such key: model" in cond["message"] and "d-other" in cond["message"]


# --- 6c: one request that does not fit says what is short ----------------------------------------------------


def _allocated_share(name: str, device: str, memory: str) -> Raw:
    claim = _claim(name, {"requests": [{"name": "gpu", "exactly": exactly("gpu", memory=memory)}]})
    claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "p",
                        "device": device,
                        "shareID": f"00000000-0000-0000-0000-00000000000{len(name)}",
                        "consumedCapacity": {"memory": memory},
                    }
                ]
            }
        }
    }
    return claim


def test_one_request_on_a_full_shared_device_names_the_capacity_left() -> None:
    """A claim with one request for one device on a node whose only (shareable) device has 10Gi of 40Gi left:
    the message gives the requested capacity and the largest remaining one, not "requests fit one by one but
    not together"."""
    objs = [
        _node("node-1"),
        klass("gpu"),
        slice_("s", "p", [dev("d0", multi=True)]),
        _allocated_share("old", "d0", "30Gi"),
        _claim("c", {"requests": [{"name": "gpu", "exactly": exactly("gpu", memory="20Gi")}]}),
        _pod("p", "c"),
    ]
    msg = _condition(objs)["message"]
    assert "fit one by one" not in msg
    assert "request gpu: needs 1 device(s) of class gpu: 1 match(es), 1 free, none with enough left" in msg
    assert "capacity memory: takes 20Gi, at most 10Gi left on a matching device" in msg


def test_one_request_on_a_fragmented_node_names_the_counters_left() -> None:
    """Partitionable devices sharing a counter set: the partitions in use leave 10Gi of the 40Gi counter; a
    20Gi partition is free but cannot be allocated: the message names the counter and what is left."""
    def part(name: str, memory: str) -> Raw:
        d = dev(name, memory=memory)
        d["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]
        return d

    s = slice_("s", "p", [part("p0", "30Gi"), part("p1", "20Gi")])
    s["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    used = _claim("old", {"requests": [{"name": "gpu", "exactly": exactly("gpu")}]})
    used["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    used["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "p", "device": "p0"}]}}
    }
    objs = [
        _node("node-1"),
        klass("gpu"),
        s,
        used,
        _claim("c", {"requests": [{"name": "gpu", "exactly": exactly("gpu")}]}),
        _pod("p", "c"),
    ]
    msg = _condition(objs)["message"]
    assert "fit one by one" not in msg
    assert "needs 1 device(s) of class gpu: 2 match(es), 1 free, none with enough left" in msg
    assert "counter memory of counter set gpu-0: a device takes 20Gi, at most 10Gi left" in msg


def test_one_request_refused_by_a_constraint_says_so() -> None:
    """One request, one free matching device that lacks the attribute of the claim's matchAttribute: the
    message names the constraint."""
    objs = [
        _node("node-1"),
        klass("gpu"),
        slice_("s", "p", [dev("d0")]),
        _claim(
            "c",
            {
                "requests": [{"name": "gpu", "exactly": exactly("gpu")}],
                "constraints": [{"matchAttribute": f"{DRIVER}/model"}],
            },
        ),
        _pod("p", "c"),
    ]
    msg = _condition(objs)["message"]
    assert "fit one by one" not in msg
    assert "request gpu: needs 1 device(s) of class gpu: 1 match(es), 1 free, but none of them can be allocated" in msg
    assert f"the claim's constraints on {DRIVER}/model" in msg
