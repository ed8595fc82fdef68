"""Running next to kube-scheduler (scheduler/cache/coexistence.py, issue #13 item 4): the double-allocation detector
(an Event ``DeviceAllocatedTwice`` on each claim and the metrics, once per conflict), its hook in the
scheduler's cache events, and the device partition (DynamicResources args ``nodeSelector``), validated with
field paths like upstream's plugin args (v1.37.2 ``pkg/scheduler/apis/config/validation/validation_pluginargs.go``).

What may share a device (not a conflict): admin access (KEP-5018, ``adminAccess: true`` results do not
consume the device) and consumable-capacity shares (KEP-5075, results with a ``shareID``)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

import pytest

from scheduler.api.dra import claim_from
from scheduler.cache.cache import Cache
from scheduler.cache.coexistence import (
    EVENT_REASON,
    PARTITION_MESSAGE,
    DoubleAllocationDetector,
    find_double_allocations,
)
from scheduler.config.schedulerconfig import ConfigError, default_config, parse_config
from scheduler.kube.metrics import SchedulerMetrics
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import simulate

Raw = dict[str, Any]
DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"


def result(device: str, pool: str = "n1", *, admin: bool = False, share: str = "", request: str = "gpu") -> Raw:
    r: Raw = {"request": request, "driver": DRIVER, "pool": pool, "device": device}
    if admin:
        r["adminAccess"] = True
    if share:
        r["shareID"] = share
    return r


def claim(name: str, *results: Raw, ns: str = "default", reserved: Sequence[str] = ()) -> Raw:
    status: Raw = {}
    if results:
        status["allocation"] = {
            "devices": {"results": list(results)},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [results[0]["pool"]]}]}]},
        }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-pod-{p}"} for p in reserved]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
            "status": status}


# --- which holdings conflict ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "conflict"),
    [
        ([result("gpu-0")], [result("gpu-0")], True),  # two exclusive allocations of one device
        ([result("gpu-0")], [result("gpu-1")], False),
        ([result("gpu-0", "n1")], [result("gpu-0", "n2")], False),  # same name, other pool
        ([result("gpu-0")], [result("gpu-0", admin=True)], False),  # admin access shares anything
        ([result("gpu-0", admin=True)], [result("gpu-0", admin=True)], False),
        ([result("gpu-0", share="s1")], [result("gpu-0", share="s2")], False),  # consumable capacity shares
        ([result("gpu-0", share="s1")], [result("gpu-0")], True),  # a share beside an exclusive allocation
        ([result("gpu-0")], [], False),  # the other claim is not allocated
    ],
)
def test_find_double_allocations_pairs(a: list[Raw], b: list[Raw], conflict: bool) -> None:
    got = find_double_allocations([claim_from(claim("a", *a)), claim_from(claim("b", *b))])
    if conflict:
        assert [(c.device, c.claims) for c in got] == [((DRIVER, "n1", "gpu-0"), ("default/a", "default/b"))]
    else:
        assert got == []


def test_admin_access_beside_two_exclusive_holders_names_only_the_exclusive_ones() -> None:
    got = find_double_allocations([claim_from(claim("a", result("gpu-0"))),
                                   claim_from(claim("b", result("gpu-0"))),
                                   claim_from(claim("admin", result("gpu-0", admin=True)))])
    assert [c.claims for c in got] == [("default/a", "default/b")]


def test_one_claim_with_two_shares_of_a_device_is_not_a_conflict() -> None:
    got = find_double_allocations([claim_from(claim("a", result("gpu-0", share="s1"),
                                                          result("gpu-0", share="s2", request="more")))])
    assert got == []


# --- the incremental detector ---------------------------------------------------------------------------------


class _Metrics:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def set_double_allocated(self, devices: int, new_conflicts: int) -> None:
        self.calls.append((devices, new_conflicts))


def _events() -> tuple[list[tuple[str, str, str, str]], Any]:
    sent: list[tuple[str, str, str, str]] = []

    async def event(obj: dict[str, Any], type_: str, reason: str, message: str, action: str) -> None:
        sent.append((f"{obj['kind']}/{obj['metadata']['name']}", type_, reason, message))

    return sent, event


def test_detector_reports_each_conflict_once_and_tracks_the_gauge() -> None:
    sent, event = _events()
    m = _Metrics()
    det = DoubleAllocationDetector(event, m)
    a, b = claim_from(claim("a", result("gpu-0"))), claim_from(claim("b", result("gpu-0")))
    assert det.observe("ADDED", None, a) == []
    found = det.observe("ADDED", None, b)
    assert [c.claims for c in found] == [("default/a", "default/b")]
    assert m.calls[-1] == (1, 1)
    asyncio.run(det.flush())  # no running loop during observe: the Events wait for flush
    assert sorted(s[0] for s in sent) == ["ResourceClaim/a", "ResourceClaim/b"]
    assert {s[1:3] for s in sent} == {("Warning", EVENT_REASON)}
    assert "gpu.example.com/n1/gpu-0" in sent[0][3] and "default/a, default/b" in sent[0][3]
    # an update that does not change the holdings (e.g. reservedFor written) reports nothing new
    b2 = claim_from(claim("b", result("gpu-0"), reserved=["p"]))
    assert det.observe("MODIFIED", b, b2) == []
    asyncio.run(det.flush())
    assert len(sent) == 2
    assert m.calls[-1] == (1, 0)
    # a third claim on the same device is a new conflict (a new set of claims)
    c = claim_from(claim("c", result("gpu-0")))
    assert [x.claims for x in det.observe("ADDED", None, c)] == [("default/a", "default/b", "default/c")]
    # deallocation and deletion clear the gauge
    det.observe("DELETED", c, c)
    det.observe("MODIFIED", b2, claim_from(claim("b")))
    assert m.calls[-1] == (0, 0)
    assert det.current() == []
    assert len(det.detected) == 2


def test_detector_sends_events_from_a_task_on_the_running_loop() -> None:
    sent, event = _events()
    det = DoubleAllocationDetector(event)

    async def main() -> None:
        det.observe("ADDED", None, claim_from(claim("a", result("gpu-0"))))
        det.observe("ADDED", None, claim_from(claim("b", result("gpu-0"))))
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert len(sent) == 2


def test_a_reallocated_device_is_not_a_conflict() -> None:
    """The watch delivers the first claim's deallocation before the second claim's allocation."""
    det = DoubleAllocationDetector()
    a = claim_from(claim("a", result("gpu-0")))
    det.observe("ADDED", None, a)
    det.observe("MODIFIED", a, claim_from(claim("a")))
    assert det.observe("ADDED", None, claim_from(claim("b", result("gpu-0")))) == []


# --- the hook in the scheduler -------------------------------------------------------------------------------


def _sched(cache: Cache, api: InMemoryAPI, metrics: SchedulerMetrics | None = None) -> Scheduler:
    return Scheduler(cache, api, default_config(), clock=FakeClock(1000.0), metrics=metrics, inline_binding=True)


def test_scheduler_reports_claims_allocated_by_another_scheduler_as_events_and_metrics() -> None:
    api, cache, metrics = InMemoryAPI(), Cache(), SchedulerMetrics()
    api.watchers.append(cache.apply)

    async def main() -> None:
        sched = _sched(cache, api, metrics)
        api.load("ResourceClaim", claim("ours", result("gpu-0")))
        api.load("ResourceClaim", claim("theirs", result("gpu-0"), ns="other"))
        api.load("ResourceClaim", claim("fine", result("gpu-1")))
        await sched.coexistence.flush()
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(main())
    twice = [e for e in api.events if e["reason"] == EVENT_REASON]
    assert sorted((e["involvedObject"]["namespace"], e["involvedObject"]["name"]) for e in twice) == [
        ("default", "ours"), ("other", "theirs")]
    assert all(e["type"] == "Warning" and e["involvedObject"]["kind"] == "ResourceClaim" for e in twice)
    reg = metrics.registry
    assert reg.get_sample_value("dra_scheduler_double_allocated_devices") == 1
    assert reg.get_sample_value("dra_scheduler_double_allocations_detected_total") == 1
    assert b"dra_scheduler_double_allocated_devices 1.0" in metrics.exposition()


def test_claims_cached_before_the_scheduler_started_are_checked() -> None:
    api, cache = InMemoryAPI(), Cache()
    api.watchers.append(cache.apply)
    api.load("ResourceClaim", claim("a", result("gpu-3")))
    api.load("ResourceClaim", claim("b", result("gpu-3")))
    sched = _sched(cache, api)
    assert [c.device for c in sched.coexistence.detected] == [(DRIVER, "n1", "gpu-3")]


# --- the partition: DynamicResources args nodeSelector ---------------------------------------------------------


def dra_config(**args: Any) -> Any:
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "dra-scheduler",
                      "pluginConfig": [{"name": "DynamicResources", "args": args}]}]})


OURS = {"matchLabels": {"scheduler.example.com/devices": "dra-scheduler"}}


def node(name: str, ours: bool) -> Raw:
    labels = {"kubernetes.io/hostname": name}
    if ours:
        labels["scheduler.example.com/devices"] = "dra-scheduler"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def gpu_slice(node_name: str, n: int) -> Raw:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(n)]}}


def device_class() -> Raw:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def pod(name: str, claim_name: str | None = None, node_selector: dict[str, str] | None = None) -> Raw:
    spec: Raw = {"schedulerName": "dra-scheduler",
                 "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def unallocated(name: str) -> Raw:
    c = claim(name)
    del c["status"]
    del c["metadata"]["uid"], c["metadata"]["resourceVersion"]
    return c


def _run(objs: Sequence[Raw], config: Any) -> dict[str, Raw]:
    res = asyncio.run(simulate(copy.deepcopy(list(objs)), config=config))
    return {o["metadata"]["name"]: o for o in res.items if o.get("kind") == "Pod"}


def _condition(p: Raw) -> str:
    return str(next(c["message"] for c in p["status"]["conditions"] if c["type"] == "PodScheduled"))


def test_partition_keeps_allocations_on_our_nodes() -> None:
    # "theirs" has more free devices, so without the partition the pods would spread there too
    objs = [device_class(), node("mine", True), node("theirs", False), gpu_slice("mine", 2), gpu_slice("theirs", 8)]
    objs += [unallocated(f"c{i}") for i in range(3)] + [pod(f"p{i}", f"c{i}") for i in range(3)]
    pods = _run(objs, dra_config(nodeSelector=OURS))
    assert sorted(p["spec"].get("nodeName", "") for p in pods.values()) == ["", "mine", "mine"]
    waiting = next(p for p in pods.values() if not p["spec"].get("nodeName"))
    assert PARTITION_MESSAGE in _condition(waiting)
    assert "1 " + PARTITION_MESSAGE in _condition(waiting)  # one reason for all nodes outside: counted
    # without the partition all three are placed
    free = _run(objs, dra_config())
    assert all(p["spec"].get("nodeName") for p in free.values())


def test_partition_does_not_restrict_pods_without_claims_or_with_allocated_claims() -> None:
    allocated_there = claim("shared", result("gpu-0", "theirs"))
    allocated_there["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    objs = [device_class(), node("mine", True), node("theirs", False), gpu_slice("mine", 1), gpu_slice("theirs", 1),
            allocated_there,
            pod("plain", node_selector={"kubernetes.io/hostname": "theirs"}),
            pod("user", "shared")]
    pods = _run(objs, dra_config(nodeSelector=OURS))
    assert pods["plain"]["spec"]["nodeName"] == "theirs"
    assert pods["user"]["spec"]["nodeName"] == "theirs"  # the claim was allocated by someone else


def test_empty_partition_selector_admits_every_node() -> None:
    objs = [device_class(), node("theirs", False), gpu_slice("theirs", 1), unallocated("c"), pod("p", "c")]
    pods = _run(objs, dra_config(nodeSelector={}))
    assert pods["p"]["spec"]["nodeName"] == "theirs"


def test_partition_by_match_expressions() -> None:
    sel = {"matchExpressions": [{"key": "scheduler.example.com/devices", "operator": "Exists"}]}
    objs = [device_class(), node("mine", True), node("theirs", False), gpu_slice("mine", 1), gpu_slice("theirs", 4)]
    objs += [unallocated(f"c{i}") for i in range(2)] + [pod(f"p{i}", f"c{i}") for i in range(2)]
    pods = _run(objs, dra_config(nodeSelector=sel))
    assert sorted(p["spec"].get("nodeName", "") for p in pods.values()) == ["", "mine"]


P = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        (OURS, None),
        ({}, None),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}, None),
        ("pool-a", f"{P}.nodeSelector: must be an object"),
        ({"matchLabels": {"a": 1}}, f"{P}.nodeSelector.matchLabels.a: must be a string"),
        ({"matchExpressions": [{"key": "a", "operator": "Near"}]},
         f"{P}.nodeSelector.matchExpressions[0].operator: unsupported value 'Near'"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]},
         f"{P}.nodeSelector.matchExpressions[0].values: must be specified when operator is In"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
         f"{P}.nodeSelector.matchExpressions[0].values: may not be specified when operator is Exists"),
        ({"matchExpressions": [{"operator": "Exists"}]}, f"{P}.nodeSelector.matchExpressions[0].key: required"),
        ({"matchLabel": {"a": "b"}}, f"{P}.nodeSelector.matchLabel: unknown field"),
    ],
)
def test_partition_selector_validation_names_the_field(selector: Any, want: str | None) -> None:
    if want is None:
        dra_config(nodeSelector=selector)
        return
    with pytest.raises(ConfigError) as e:
        dra_config(nodeSelector=selector)
    assert any(err.startswith(want) for err in e.value.errors), e.value.errors
