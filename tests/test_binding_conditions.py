"""Device binding conditions (KEP-5007; gates DRADeviceBindingConditions + DRAResourceClaimDeviceStatus, beta and
on in Kubernetes 1.37) and ``status.allocation.allocationTimestamp``.

Cases from kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go``
(``bind-claim-with-binding-conditions``, ``bound-claim-with-succeeded-binding-conditions``,
``bound-claim-with-failed-binding``, ``bound-claim-with-timed-out-binding``, ``prebind-fail-with-binding-timeout``,
``bound-claim-with-mixed-binding-conditions``, ``bound-claim-without-binding-conditions``,
``multi-claims-binding-conditions-all-success``, ``multi-claims-binding-conditions-one-fail``), of
``pkg/scheduler/apis/config/validation/validation_pluginargs_test.go`` (``TestValidateDynamicResourcesArgs``, the
``bindingTimeout`` cases) and of ``k8s.io/dynamic-resource-allocation`` v0.37.2 ``allocator_testing.go``
(``node-restriction``: ``bindsToNode``). Upstream's outcome after a failed or timed-out wait — Filter marks the
claim unavailable, PostFilter deallocates it, the pod is retried — is checked here as this scheduler reaches it:
PreBind fails, the claim is deallocated in the rollback, the pod goes to backoff and its retry allocates again.

The scheduler runs over the in-memory API server with the plugin's fake binding clock; a task plays the DRA
driver that writes ``status.devices[].conditions``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from plugins.dra.allocator import Allocator, ClaimInput
from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.plugin import DynamicResources
from plugins.dra.pools import Features, gather_pools
from plugins.dra.state import BINDING_TIMEOUT_DEFAULT
from scheduler.api.clusterapi import Conflict, NotFound
from scheduler.api.dra import claim_spec_from, class_from, slice_from
from scheduler.api.goduration import format_go_duration, parse_go_duration
from scheduler.api.model import node_from
from scheduler.cache.cache import Cache, build_slice_index
from scheduler.cache.ledger import DeviceLedger
from scheduler.config.schedulerconfig import ConfigError, SchedulerConfig, default_config, parse_config
from scheduler.framework.hooks import fake_binding_clock, use_binding_clock
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import simulate
from tests.dra_fixtures import (
    CLASS_A,
    DEV1,
    DRIVER_A,
    NODE1,
    POOL1,
    REQ0,
    SLICE1,
    device,
    klass,
    label_selector,
    local_selector,
    request,
    slice_with,
)
from tests.dra_fixtures import claim as fixture_claim
from tests.dra_fixtures import node as fixture_node

Raw = dict[str, Any]

DRIVER = "gpu.example.com"
READY = "attached"  # the binding condition of the fabric devices
FAILED = "attach-failed"  # their binding failure condition
START = 1000.0  # the fake clock's start
EPOCH = datetime(2026, 1, 1, tzinfo=UTC).timestamp() - START  # START is 2026-01-01T00:00:00Z, as in simulate
START_TS = "2026-01-01T00:00:00Z"


# --- objects ------------------------------------------------------------------------------------------------


def node_obj(name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def fabric_device(name: str, conditions: bool = True, binds_to_node: bool = False) -> Raw:
    d: Raw = {"name": name}
    if conditions:
        d["bindingConditions"] = [READY]
        d["bindingFailureConditions"] = [FAILED]
    if binds_to_node:
        d["bindsToNode"] = True
    return d


def slice_obj(node_name: str, *devices: Raw) -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": list(devices) or [fabric_device("gpu-0")],
        },
    }


def class_obj() -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def claim_obj(name: str) -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}]}},
    }


def cond(type_: str, status: str = "True", reason: str = "Driver", message: str = "") -> Raw:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": START_TS,
    }


def allocated_claim_obj(
    name: str,
    node_name: str,
    dev: str = "gpu-0",
    *,
    conditions: Sequence[Raw] | None = None,
    timestamp: str | None = START_TS,
    with_binding_conditions: bool = True,
) -> Raw:
    """A claim allocated before the scheduler looks at it (an earlier attempt, another scheduler): not reserved."""
    c = claim_obj(name)
    c["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    result: Raw = {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": dev}
    if with_binding_conditions:
        result["bindingConditions"] = [READY]
        result["bindingFailureConditions"] = [FAILED]
    alloc: Raw = {
        "devices": {"results": [result]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        },
    }
    if timestamp is not None:
        alloc["allocationTimestamp"] = timestamp
    c["status"] = {"allocation": alloc}
    if conditions is not None:
        c["status"]["devices"] = [{"driver": DRIVER, "pool": node_name, "device": dev, "conditions": list(conditions)}]
    return c


def pod_obj(name: str, *claim_names: str, on: str | None = None) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            **({"nodeSelector": {"kubernetes.io/hostname": on}} if on else {}),
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": f"gpu{i}", "resourceClaimName": c} for i, c in enumerate(claim_names)],
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"claims": [{"name": f"gpu{i}"} for i in range(len(claim_names))]},
                }
            ],
        },
    }


def dra_config(**args: Any) -> SchedulerConfig:
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"schedulerName": "dra-scheduler", "pluginConfig": [{"name": "DynamicResources", "args": args}]}
            ],
        }
    )


# --- the scheduler over the in-memory API, with a driver task ------------------------------------------------


Driver = Callable[["Harness"], Awaitable[None]]


class Harness:
    def __init__(self, objs: Sequence[Raw], config: SchedulerConfig | None = None, inline: bool = True) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.clock = FakeClock(START)
        self.sched = Scheduler(
            self.cache, self.api, config or default_config(), clock=self.clock, inline_binding=inline
        )
        use_binding_clock(self.sched, fake_binding_clock(self.clock, EPOCH))
        self.dra: DynamicResources = self.sched.profiles["dra-scheduler"].instances["DynamicResources"]
        self.done = False
        for o in objs:
            self.api.load(o["kind"], copy.deepcopy(o))

    async def schedule(self, rounds: int) -> None:
        q = self.sched.queue
        n = 0
        while n < rounds:
            info = q.pop()
            if info is None:
                wake = q.next_wakeup()  # time moves only to the end of a backoff, as in simulate
                if wake is None:
                    break
                self.clock.set(max(wake, self.clock.now()))
                q.flush()
                continue
            n += 1
            await self.sched.run_once(info)
        await self.sched.wait_bindings()
        await self.sched.flush_writes()
        self.done = True

    def run(self, rounds: int = 10, driver: Driver | None = None) -> None:
        async def go() -> None:
            self.done = False
            if driver is None:
                await self.schedule(rounds)
                return
            await asyncio.gather(self.schedule(rounds), driver(self))

        asyncio.run(go())

    def stored(self, kind: str, name: str) -> Raw:
        [o] = [o for o in self.api.stored(kind) if o["metadata"]["name"] == name]
        return o

    def node_of(self, pod: str) -> str:
        return str(self.stored("Pod", pod)["spec"].get("nodeName") or "")

    def condition(self, pod: str) -> Mapping[str, Any]:
        return next(c for c in self.stored("Pod", pod)["status"]["conditions"] if c["type"] == "PodScheduled")

    def events(self, reason: str) -> list[Raw]:
        return [e for e in self.api.events if e["reason"] == reason]


async def set_device_conditions(h: Harness, claim_name: str, conditions: Sequence[Raw]) -> Raw:
    """What the DRA driver writes: a ``status.devices`` entry per allocated device with binding conditions."""
    while True:
        obj = await h.api.get("ResourceClaim", "default", claim_name)
        results = obj["status"]["allocation"]["devices"]["results"]
        obj["status"]["devices"] = [
            {"driver": r["driver"], "pool": r["pool"], "device": r["device"], "conditions": list(conditions)}
            for r in results
            if r.get("bindingConditions")
        ]
        try:
            return await h.api.update("ResourceClaim", obj, subresource="status")
        except Conflict:
            continue


def driver_for(claim_name: str, *outcomes: Sequence[Raw], delay: float = 0.0) -> Driver:
    """A driver task: for the n-th allocation of the claim it sees, wait ``delay`` fake seconds, then write the
    n-th list of conditions (none left: leave the allocation alone). It only runs while PreBind polls."""

    async def drive(h: Harness) -> None:
        handled = 0
        last: Raw | None = None
        first_seen: float | None = None
        while not h.done:
            await asyncio.sleep(0)
            try:
                obj = await h.api.get("ResourceClaim", "default", claim_name)
            except NotFound:
                continue
            alloc = (obj.get("status") or {}).get("allocation")
            if not alloc:
                last, first_seen = None, None
                continue
            if alloc == last or handled >= len(outcomes):
                continue
            if first_seen is None:
                first_seen = h.clock.now()
            if h.clock.now() < first_seen + delay:
                continue
            assert h.node_of(pod_of(h, claim_name)) == "", "the pod must not be bound before its conditions"
            await set_device_conditions(h, claim_name, outcomes[handled])
            handled += 1
            last, first_seen = alloc, None

    return drive


def pod_of(h: Harness, claim_name: str) -> str:
    for p in h.api.stored("Pod"):
        if any(c.get("resourceClaimName") == claim_name for c in p["spec"].get("resourceClaims") or []):
            return str(p["metadata"]["name"])
    raise AssertionError(claim_name)


# --- no binding conditions: no wait, allocationTimestamp written ---------------------------------------------


def test_no_binding_conditions_no_wait_and_allocation_timestamp_from_the_wallclock() -> None:
    h = Harness(
        [
            node_obj("a"),
            slice_obj("a", fabric_device("gpu-0", conditions=False)),
            class_obj(),
            claim_obj("c1"),
            pod_obj("p", "c1"),
        ]
    )
    h.clock.set(START + 61.7)
    h.run()
    assert h.node_of("p") == "a"
    alloc = h.stored("ResourceClaim", "c1")["status"]["allocation"]
    assert alloc["allocationTimestamp"] == "2026-01-01T00:01:01Z"  # RFC 3339, seconds, the scheduler's wall clock
    assert list(alloc) == ["devices", "nodeSelector", "allocationTimestamp"]  # AllocationResult's field order
    assert "bindingConditions" not in alloc["devices"]["results"][0]
    assert h.events("BindingConditionsPending") == []
    assert h.clock.now() == START + 61.7  # no poll, no sleep


def test_the_allocation_results_cached_for_equal_pods_are_not_changed_by_the_timestamp() -> None:
    """The per-node allocation cache is shared by equal pods: the timestamp is added to a copy."""
    h = Harness(
        [
            node_obj("a"),
            slice_obj("a", *(fabric_device(f"gpu-{i}", conditions=False) for i in range(2))),
            class_obj(),
            claim_obj("c1"),
            claim_obj("c2"),
            pod_obj("p1", "c1"),
        ]
    )
    h.run()
    h.clock.set(START + 3600)
    h.api.load("Pod", pod_obj("p2", "c2"))
    h.run()
    assert h.node_of("p1") == h.node_of("p2") == "a"
    assert h.stored("ResourceClaim", "c1")["status"]["allocation"]["allocationTimestamp"] == START_TS
    assert h.stored("ResourceClaim", "c2")["status"]["allocation"]["allocationTimestamp"] == "2026-01-01T01:00:00Z"


def test_an_existing_allocation_is_not_given_a_timestamp() -> None:
    """``bound-claim-without-binding-conditions``: upstream adds allocationTimestamp to an allocation it only
    reserves; the API server refuses that (status.allocation is immutable, as the in-memory API checks), so
    the allocation is kept as it is and the pod is bound."""
    c1 = allocated_claim_obj("c1", "a", timestamp=None, with_binding_conditions=False)
    h = Harness(
        [node_obj("a"), slice_obj("a", fabric_device("gpu-0", conditions=False)), class_obj(), c1, pod_obj("p", "c1")]
    )
    h.run()
    assert h.node_of("p") == "a"
    st = h.stored("ResourceClaim", "c1")["status"]
    assert st["allocation"] == c1["status"]["allocation"]
    assert [r["name"] for r in st["reservedFor"]] == ["p"]


def test_gates_off_write_no_timestamp() -> None:
    for gate in ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"):
        h = Harness(
            [
                node_obj("a"),
                slice_obj("a", fabric_device("gpu-0", conditions=False)),
                class_obj(),
                claim_obj("c1"),
                pod_obj("p", "c1"),
            ],
            dra_config(featureGates={gate: False}),
        )
        h.run()
        assert h.node_of("p") == "a"
        assert "allocationTimestamp" not in h.stored("ResourceClaim", "c1")["status"]["allocation"]


# --- waiting for the conditions -----------------------------------------------------------------------------


def test_conditions_become_true_then_the_pod_is_bound() -> None:
    """``bind-claim-with-binding-conditions`` with a driver: allocation written (results carry the device's
    conditions), the pod waits, the driver sets the condition, the pod is bound."""
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1"), pod_obj("p", "c1")])
    h.run(driver=driver_for("c1", [cond(READY)], delay=5))
    assert h.node_of("p") == "a"
    st = h.stored("ResourceClaim", "c1")["status"]
    [r] = st["allocation"]["devices"]["results"]
    assert r["bindingConditions"] == [READY] and r["bindingFailureConditions"] == [FAILED]
    assert st["allocation"]["allocationTimestamp"] == START_TS
    assert [x["name"] for x in st["reservedFor"]] == ["p"]
    [ev] = h.events("BindingConditionsPending")
    assert (ev["type"], ev["message"], ev["action"]) == (
        "Normal",
        "waiting for binding conditions for device on node a",
        "Scheduling",
    )
    assert h.events("Scheduled")
    waited = h.clock.now() - START
    assert 5 <= waited < 10  # polled about every second until the driver wrote; far from the timeout


def test_every_binding_condition_must_be_true() -> None:
    """``bound-claim-with-mixed-binding-conditions``: one of two conditions True is not enough."""
    dev = {"name": "gpu-0", "bindingConditions": ["c1", "c2"], "bindingFailureConditions": [FAILED]}
    h = Harness(
        [node_obj("a"), slice_obj("a", dev), class_obj(), claim_obj("c1"), pod_obj("p", "c1")],
        dra_config(bindingTimeout="20s"),
    )
    h.run(rounds=1, driver=driver_for("c1", [cond("c1"), cond("c2", "False")]))
    assert h.node_of("p") == ""
    msg = h.condition("p")["message"]
    assert "device binding timeout: claim=c1" in msg
    assert "<driver=gpu.example.com, pool=a> gpu-0 pending=[c2]" in msg


def test_failure_condition_rolls_back_and_the_retry_binds() -> None:
    """A True bindingFailureCondition fails PreBind at once: the allocation is undone (claim deallocated,
    reservation and status.devices gone), the pod goes to backoff with the reason; its retry allocates again
    and binds once the driver reports the device ready."""
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1"), pod_obj("p", "c1")])
    failure = [cond(READY, "False"), cond(FAILED, "True", "FabricError", 'no path to "gpu-0"')]
    h.run(rounds=1, driver=driver_for("c1", failure))
    assert h.node_of("p") == ""
    st = h.stored("ResourceClaim", "c1").get("status") or {}
    assert not st.get("allocation") and not st.get("reservedFor") and not st.get("devices")
    c = h.condition("p")
    assert c["reason"] == "SchedulerError"
    assert c["message"] == (
        'binding to a failed: device binding failed: claim=c1, reason=FabricError, message="no path to \\"gpu-0\\""; '
        "devices: <driver=gpu.example.com, pool=a> gpu-0 failed=[attach-failed]"
    )
    assert h.sched.queue.pool("default/p") == "backoff"
    assert h.clock.now() - START < 5  # failed at once, no timeout
    # the retry: allocated again, the driver now reports the device ready
    h.run(driver=driver_for("c1", [cond(READY)]))
    assert h.node_of("p") == "a"
    assert h.stored("ResourceClaim", "c1")["status"]["devices"][0]["conditions"][0]["type"] == READY


def test_timeout_rolls_back() -> None:
    """No driver sets the condition: after ``bindingTimeout`` PreBind fails (``device binding timeout``), the
    claim is deallocated and the pod retried."""
    h = Harness(
        [node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1"), pod_obj("p", "c1")],
        dra_config(bindingTimeout="30s"),
    )
    h.run(rounds=1)
    assert h.node_of("p") == ""
    assert 30 <= h.clock.now() - START < 32
    st = h.stored("ResourceClaim", "c1").get("status") or {}
    assert not st.get("allocation") and not st.get("reservedFor")
    c = h.condition("p")
    assert c["reason"] == "SchedulerError"
    assert c["message"] == (
        "binding to a failed: device binding timeout: claim=c1: binding conditions not met within 30s; "
        "devices: <driver=gpu.example.com, pool=a> gpu-0 pending=[attached]"
    )
    assert h.sched.queue.pool("default/p") == "backoff"
    # the device is free again: the retry allocates it again and binds once the driver reports it ready
    retry_at = h.clock.now()
    h.run(rounds=1, driver=driver_for("c1", [cond(READY)]))
    assert h.node_of("p") == "a"
    stamp = h.stored("ResourceClaim", "c1")["status"]["allocation"]["allocationTimestamp"]
    assert stamp > START_TS and stamp >= datetime.fromtimestamp(EPOCH + retry_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_default_timeout_is_600s() -> None:
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1"), pod_obj("p", "c1")])
    assert h.dra.binding_timeout == BINDING_TIMEOUT_DEFAULT == 600.0
    h.run(rounds=1)
    assert 600 <= h.clock.now() - START < 602
    assert "not met within 10m0s" in h.condition("p")["message"]


def test_claim_allocated_long_ago_times_out_from_its_allocation_timestamp() -> None:
    """``prebind-fail-with-binding-timeout``: a claim allocated earlier (not by this attempt) whose
    allocationTimestamp + bindingTimeout passes 10 s into the wait fails then, not after a full timeout; the
    claim is deallocated (upstream: Filter + PostFilter of the next attempt)."""
    allocated_at = datetime.fromtimestamp(EPOCH + START - 600 + 10, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    c1 = allocated_claim_obj("c1", "a", timestamp=allocated_at, conditions=[])
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")])
    h.run(rounds=1)
    assert h.node_of("p") == ""
    assert 10 <= h.clock.now() - START < 12
    assert "device binding timeout: claim=c1" in h.condition("p")["message"]
    st = h.stored("ResourceClaim", "c1").get("status") or {}
    assert not st.get("allocation") and not st.get("reservedFor")


def test_bound_claim_with_timed_out_binding_fails_at_once_and_is_deallocated() -> None:
    """``bound-claim-with-timed-out-binding``: allocated more than 10 minutes ago, conditions never met (exactly
    10 minutes is not yet late: upstream compares with ``Before``)."""
    c1 = allocated_claim_obj("c1", "a", timestamp="2025-12-31T23:49:59Z", conditions=[])
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")])
    h.run(rounds=1)
    assert h.clock.now() == START
    assert h.node_of("p") == ""
    assert not (h.stored("ResourceClaim", "c1").get("status") or {}).get("allocation")


def test_bound_claim_with_succeeded_binding_conditions_is_bound_without_waiting() -> None:
    """``bound-claim-with-succeeded-binding-conditions``: the conditions are already True (also long after the
    allocation: the timeout only matters while a condition is pending)."""
    c1 = allocated_claim_obj("c1", "a", timestamp="2025-06-01T00:00:00Z", conditions=[cond(READY)])
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")])
    h.run()
    assert h.node_of("p") == "a"
    assert h.clock.now() == START
    st = h.stored("ResourceClaim", "c1")["status"]
    assert st["allocation"] == c1["status"]["allocation"]
    assert [r["name"] for r in st["reservedFor"]] == ["p"]


def test_bound_claim_with_failed_binding_is_deallocated_and_allocated_again() -> None:
    """``bound-claim-with-failed-binding``: allocated by an earlier attempt, the failure condition True. The
    claim is deallocated (its status.devices go with the allocation); the retry allocates it afresh and binds
    once the driver reports the device ready."""
    c1 = allocated_claim_obj("c1", "a", conditions=[cond(FAILED, reason="Broken", message="gone")])
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")])
    h.run(rounds=1)
    assert h.node_of("p") == ""
    assert h.clock.now() == START  # failed at the first look
    assert 'device binding failed: claim=c1, reason=Broken, message="gone"' in h.condition("p")["message"]
    st = h.stored("ResourceClaim", "c1").get("status") or {}
    assert not st.get("allocation") and not st.get("reservedFor") and not st.get("devices")
    h.run(driver=driver_for("c1", [cond(READY)]))
    assert h.node_of("p") == "a"
    st = h.stored("ResourceClaim", "c1")["status"]
    assert st["allocation"]["allocationTimestamp"] != START_TS  # written by the retry


def test_multi_claims_all_success() -> None:
    """``multi-claims-binding-conditions-all-success``."""
    h = Harness(
        [
            node_obj("a"),
            slice_obj("a", fabric_device("gpu-0"), fabric_device("gpu-1")),
            class_obj(),
            claim_obj("c1"),
            claim_obj("c2"),
            pod_obj("p", "c1", "c2"),
        ]
    )

    async def drive(h: Harness) -> None:
        while not h.done:
            await asyncio.sleep(0)
            objs = [await h.api.get("ResourceClaim", "default", n) for n in ("c1", "c2")]
            allocated = all((o.get("status") or {}).get("allocation") for o in objs)
            if allocated and h.clock.now() >= START + 3 and not objs[0]["status"].get("devices"):
                await set_device_conditions(h, "c1", [cond(READY)])
                await set_device_conditions(h, "c2", [cond(READY)])

    h.run(driver=drive)
    assert h.node_of("p") == "a"
    assert len(h.events("BindingConditionsPending")) == 1


def test_multi_claims_one_fails_only_that_claim_is_deallocated() -> None:
    """``multi-claims-binding-conditions-one-fail``: c1 (allocated before, conditions met) keeps its
    allocation and loses the reservation; c2, whose failure condition is True, is deallocated."""
    c1 = allocated_claim_obj("c1", "a", "gpu-0", conditions=[cond(READY)])
    c2 = allocated_claim_obj("c2", "a", "gpu-1", conditions=[cond(FAILED)])
    h = Harness(
        [
            node_obj("a"),
            slice_obj("a", fabric_device("gpu-0"), fabric_device("gpu-1")),
            class_obj(),
            c1,
            c2,
            pod_obj("p", "c1", "c2"),
        ]
    )
    h.run(rounds=1)
    assert h.node_of("p") == ""
    s1 = h.stored("ResourceClaim", "c1")["status"]
    s2 = h.stored("ResourceClaim", "c2").get("status") or {}
    assert s1["allocation"] == c1["status"]["allocation"] and not s1.get("reservedFor")
    assert not s2.get("allocation") and not s2.get("reservedFor") and not s2.get("devices")
    assert "device binding failed: claim=c2" in h.condition("p")["message"]


def test_a_failed_claim_another_pod_reserves_stays_allocated() -> None:
    """Deallocation only when nobody else reserves the claim (upstream PostFilter: reservedFor empty or only
    the pod itself)."""
    c1 = allocated_claim_obj("c1", "a", conditions=[cond(FAILED)])
    c1["status"]["reservedFor"] = [{"resource": "pods", "name": "other", "uid": "other-uid"}]
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")])
    h.run(rounds=1)
    assert h.node_of("p") == ""
    st = h.stored("ResourceClaim", "c1")["status"]
    assert st["allocation"] == c1["status"]["allocation"]
    assert [r["name"] for r in st["reservedFor"]] == ["other"]


def test_a_claim_deleted_while_waiting_fails_at_once() -> None:
    h = Harness([node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1"), pod_obj("p", "c1")])

    async def delete(h: Harness) -> None:
        while not h.done:
            await asyncio.sleep(0)
            obj = await h.api.get("ResourceClaim", "default", "c1")
            if (obj.get("status") or {}).get("allocation") and h.clock.now() >= START + 2:
                obj["metadata"]["finalizers"] = []
                await h.api.update("ResourceClaim", obj)
                await h.api.delete("ResourceClaim", "default", "c1")
                return

    h.run(rounds=1, driver=delete)
    assert h.node_of("p") == ""
    assert "claim default/c1 got deleted in the meantime" in h.condition("p")["message"]
    assert h.clock.now() - START < 5


def test_gate_off_devices_with_binding_conditions_are_not_used() -> None:
    """``binding-conditions-without-feature-gate`` through the plugin: either gate off, such a device cannot
    be allocated (the pod is unschedulable), a plain one can."""
    for gate in ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"):
        h = Harness(
            [node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1"), pod_obj("p", "c1")],
            dra_config(featureGates={gate: False}),
        )
        h.run(rounds=1)
        assert h.node_of("p") == ""
        assert h.condition("p")["reason"] == "Unschedulable"
        assert not h.dra.features.binding_conditions


def test_gate_off_an_allocated_claim_with_conditions_is_not_waited_for() -> None:
    """PreBind returns before the wait when the gates are off (upstream: ``!EnableDRADeviceBindingConditions``)."""
    c1 = allocated_claim_obj("c1", "a", conditions=[])
    h = Harness(
        [node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")],
        dra_config(featureGates={"DRADeviceBindingConditions": False}),
    )
    h.run()
    assert h.node_of("p") == "a"
    assert h.events("BindingConditionsPending") == []


def ext_class_obj() -> Raw:
    obj = class_obj()
    obj["spec"]["extendedResourceName"] = "example.com/gpu"
    return obj


def ext_pod_obj(name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"example.com/gpu": "1"}}}],
        },
    }


async def ready_every_claim(h: Harness) -> None:
    """A driver for claims whose names it does not know (the scheduler's claim for extended resources)."""
    while not h.done:
        await asyncio.sleep(0)
        for obj in h.api.list("ResourceClaim"):
            st = obj.get("status") or {}
            if st.get("allocation") and not st.get("devices"):
                await set_device_conditions(h, obj["metadata"]["name"], [cond(READY)])


def test_the_claim_for_extended_resources_waits_too_and_is_deleted_on_timeout() -> None:
    """The special claim of a pod's DRA-backed extended resource (KEP-5004) is one of the pod's claims for the
    wait (upstream ``state.claims.all()``); when the wait times out, the rollback deletes it."""
    objs = [node_obj("a"), slice_obj("a"), ext_class_obj(), ext_pod_obj("p")]
    h = Harness(objs, dra_config(bindingTimeout="5s"))
    h.run(rounds=1)
    assert h.node_of("p") == ""
    msg = h.condition("p")["message"]
    assert "device binding timeout: claim=p-extended-resources-" in msg and "pending=[attached]" in msg
    assert h.api.list("ResourceClaim") == []
    h.run(driver=ready_every_claim)
    assert h.node_of("p") == "a"
    [claim] = h.api.list("ResourceClaim")
    assert claim["status"]["devices"][0]["conditions"][0]["status"] == "True"


# --- the wait does not block other pods -----------------------------------------------------------------------


def test_a_waiting_pod_does_not_block_other_pods_and_keeps_its_device() -> None:
    """Live, the binding cycle is a task: while p1 waits for its device's condition, p2 is scheduled and bound
    — and not onto p1's device, which stays assumed in the ledger during the wait."""
    objs = [
        node_obj("a"),
        slice_obj("a", fabric_device("gpu-0"), fabric_device("gpu-1", conditions=False)),
        class_obj(),
        claim_obj("c1"),
        claim_obj("c2"),
    ]
    h = Harness(objs, inline=False)
    h.dra.binding_timeout = 10_000.0

    async def go() -> None:
        h.api.load("Pod", pod_obj("p1", "c1"))
        info = h.sched.queue.pop()
        assert info is not None and info.pod.name == "p1"
        await h.sched.run_once(info)
        for _ in range(20):
            await asyncio.sleep(0)  # p1's binding cycle polls (fake time)
        assert h.node_of("p1") == ""
        h.api.load("Pod", pod_obj("p2", "c2"))
        info = h.sched.queue.pop()
        assert info is not None and info.pod.name == "p2"
        await h.sched.run_once(info)
        for _ in range(20):
            await asyncio.sleep(0)
        assert h.node_of("p2") == "a" and h.node_of("p1") == ""
        [r2] = h.stored("ResourceClaim", "c2")["status"]["allocation"]["devices"]["results"]
        [r1] = h.stored("ResourceClaim", "c1")["status"]["allocation"]["devices"]["results"]
        assert (r1["device"], r2["device"]) == ("gpu-0", "gpu-1")
        await set_device_conditions(h, "c1", [cond(READY)])
        await h.sched.wait_bindings()
        assert h.node_of("p1") == "a"

    asyncio.run(go())


# --- simulate ---------------------------------------------------------------------------------------------------


def _by_name(items: Sequence[Raw], kind: str) -> dict[str, Raw]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == kind}


def test_simulate_reports_the_pending_conditions_and_does_not_hang() -> None:
    """No DRA driver runs in simulate: the pod waits bindingTimeout of fake time per attempt, is rolled back and
    retried as upstream would, and ends PodScheduled=False naming the pending condition; other pods are placed."""
    objs = [
        node_obj("a"),
        node_obj("b"),
        slice_obj("a"),
        slice_obj("b", fabric_device("gpu-0", conditions=False)),
        class_obj(),
        claim_obj("c1"),
        claim_obj("c2"),
        pod_obj("fabric", "c1", on="a"),
        pod_obj("plain", "c2", on="b"),
    ]
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    pods = _by_name(res.items, "Pod")
    claims = _by_name(res.items, "ResourceClaim")
    assert pods["plain"]["spec"]["nodeName"] == "b"
    assert claims["c2"]["status"]["allocation"]["allocationTimestamp"].startswith("2026-01-01T")
    assert not pods["fabric"]["spec"].get("nodeName")
    [c] = [x for x in pods["fabric"]["status"]["conditions"] if x["type"] == "PodScheduled"]
    assert c["status"] == "False" and c["reason"] == "SchedulerError"
    assert c["message"] == (
        "binding to a failed: device binding timeout: claim=c1: binding conditions not met within 10m0s; "
        "devices: <driver=gpu.example.com, pool=a> gpu-0 pending=[attached]"
    )
    assert not (claims["c1"].get("status") or {}).get("allocation")
    assert any(e["reason"] == "BindingConditionsPending" for e in res.events)


def test_simulate_binds_when_the_input_already_has_the_conditions_met() -> None:
    c1 = allocated_claim_obj("c1", "a", conditions=[cond(READY)])
    res = asyncio.run(simulate([node_obj("a"), slice_obj("a"), class_obj(), c1, pod_obj("p", "c1")]))
    assert _by_name(res.items, "Pod")["p"]["spec"]["nodeName"] == "a"
    assert res.summary["scheduled"] == 1


def test_simulate_allocation_timestamp_is_deterministic() -> None:
    objs = [
        node_obj("a"),
        slice_obj("a", fabric_device("gpu-0", conditions=False)),
        class_obj(),
        claim_obj("c1"),
        pod_obj("p", "c1"),
    ]
    stamps = {
        _by_name(asyncio.run(simulate(copy.deepcopy(objs))).items, "ResourceClaim")["c1"]["status"]["allocation"][
            "allocationTimestamp"
        ]
        for _ in range(2)
    }
    assert stamps == {START_TS}


# --- bindsToNode (allocator) ---------------------------------------------------------------------------------


def _allocate(features: Features, *devices: Raw) -> Any:
    n = node_from(fixture_node())
    s = slice_with(SLICE1, label_selector("planet", "earth"), POOL1, DRIVER_A, *devices)
    index = build_slice_index({SLICE1: slice_from(s)}, 1)
    pools = gather_pools(n, index.for_node(n.name), index.by_pool, features)
    alloc = Allocator(
        features, DeviceLedger(), {CLASS_A: class_from(klass(CLASS_A, DRIVER_A))}, SelectorCache(get_engine())
    )
    c = fixture_claim("claim-0", request(REQ0, CLASS_A, 1))
    return alloc.allocate(n, [ClaimInput(c.name, "uid-0", claim_spec_from(c.spec))], pools)


def test_binds_to_node_restricts_the_allocation_to_the_node() -> None:
    """``node-restriction``: a device of a slice shared by nodes (a label selector) that ``bindsToNode`` pins
    the allocation to the chosen node; without it the slice's selector is used. Upstream does not gate
    ``bindsToNode`` in the allocator (the API server drops the field when the gate is off)."""
    for feats in (Features(), Features(binding_conditions=False)):
        [a] = _allocate(feats, device(DEV1, binds_to_node=True))
        assert a.raw["nodeSelector"] == local_selector(NODE1)
        [b] = _allocate(feats, device(DEV1))
        assert b.raw["nodeSelector"] == label_selector("planet", "earth")


# --- args: bindingTimeout ------------------------------------------------------------------------------------


def _arg_errors(args: Mapping[str, Any]) -> list[str]:
    try:
        dra_config(**args)
    except ConfigError as e:
        return e.errors
    return []


P = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ({"bindingTimeout": "600s"}, []),  # valid args (default)
        ({}, []),  # valid args (disabled): nothing set
        ({"bindingTimeout": "30s"}, []),  # valid BindingTimeout
        ({"bindingTimeout": "1s"}, []),
        ({"bindingTimeout": "0s"}, [f'{P}.bindingTimeout: Invalid value: "0s": must be at least 1 second']),
        ({"bindingTimeout": "-1s"}, [f'{P}.bindingTimeout: Invalid value: "-1s": must be at least 1 second']),
        ({"bindingTimeout": "999ms"}, [f'{P}.bindingTimeout: Invalid value: "999ms": must be at least 1 second']),
        (
            {"bindingTimeout": "1s", "featureGates": {"DRADeviceBindingConditions": False}},
            [
                f"{P}.bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus "
                "feature gate is disabled"
            ],
        ),
        (
            {"bindingTimeout": "1s", "featureGates": {"DRAResourceClaimDeviceStatus": False}},
            [
                f"{P}.bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus "
                "feature gate is disabled"
            ],
        ),
        ({"featureGates": {"DRAResourceClaimDeviceStatus": False}}, []),
        ({"bindingTimeout": "ten minutes"}, [f'{P}.bindingTimeout: time: invalid duration "ten minutes"']),
        ({"bindingTimeout": "10"}, [f'{P}.bindingTimeout: time: missing unit in duration "10"']),
        ({"bindingTimeout": 600}, [f"{P}.bindingTimeout: must be a duration string such as 600s or 10m"]),
        (
            {"featureGates": {"DRAResourceClaimDeviceStatus": "no"}},
            [f"{P}.featureGates.DRAResourceClaimDeviceStatus: must be true or false"],
        ),
    ],
)
def test_binding_timeout_validation(args: Mapping[str, Any], want: list[str]) -> None:
    assert _arg_errors(args) == want


def test_binding_timeout_arg_reaches_the_plugin() -> None:
    assert DynamicResources({"bindingTimeout": "1m30s"}).binding_timeout == 90.0
    assert DynamicResources({}).binding_timeout == 600.0
    h = Harness([node_obj("a")], dra_config(bindingTimeout="45s"))
    assert h.dra.binding_timeout == 45.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("600s", 600.0),
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("-1s", -1.0),
        ("0", 0.0),
        ("+2m3s", 123.0),
        ("1h0m0s", 3600.0),
        (".5s", 0.5),
        ("2us", 2e-6),
        ("3µs", 3e-6),
    ],
)
def test_parse_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "1", "1x", "1s2", "--1s", ".s", "1 s"])
def test_parse_go_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_format_go_duration() -> None:
    assert [format_go_duration(s) for s in (600, 30, 3600, 90, 1.5, 5400)] == [
        "10m0s",
        "30s",
        "1h0m0s",
        "1m30s",
        "1.5s",
        "1h30m0s",
    ]
