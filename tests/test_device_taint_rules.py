"""DeviceTaintRule (resource.k8s.io/v1, Kubernetes 1.37.2, gate DRADeviceTaintRules GA and on; KEP-5055).

Cases from
* ``k8s.io/dynamic-resource-allocation`` v0.37.2 ``resourceslice/tracker/tracker_test.go`` (which devices a
  rule patches: ``add-taint-for-driver``, ``add-taint-for-pool``, ``add-taint-for-device``,
  ``filter-all-criteria``, ``patch-all-slices``, ``nil-selector-matches-none``, ``merge-taints``,
  ``update-patch``, ``remove-patch-*``);
* the allocator's taint cases of ``structured/internal/allocatortesting`` (``tainted-two-devices``,
  ``tainted-two-devices-tolerated``, ``tainted-two-devices-prioritized-list-tolerated``, ``tainted-no-effect``,
  ``tainted-disabled``, ``tainted-admin-access``, ``tainted-all-devices-single``), here with the taint coming
  from a rule instead of the slice: for the allocator the two are indistinguishable (tracker ``applyPatches``);
* kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go``
  (``tainted-device-enabled`` / ``-disabled``: the gate reaches the allocator),
then end to end through the scheduler and ``simulate`` (placement elsewhere, Unschedulable with a reason,
requeue when the rule goes away, no stale reuse between equal pods).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from plugins.dra.allocator import Allocator, ClaimInput
from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.pools import Features, gather_pools
from plugins.dra.taintrules import (
    NO_RULES,
    TaintRules,
    TaintRuleTracker,
    rules_of,
    untolerated_taint,
)
from scheduler.api.devicetaintrules import DeviceTaintSelector, rule_from
from scheduler.api.dra import claim_spec_from, class_from, slice_from
from scheduler.api.model import ModelError, Taint, node_from
from scheduler.cache.cache import Cache, build_slice_index
from scheduler.cache.ledger import DeviceLedger
from scheduler.config.schedulerconfig import default_config
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import load_objects, simulate
from tests.dra_fixtures import (
    CLASS_A,
    DEV0,
    DEV1,
    DEV2,
    DRIVER_A,
    DRIVER_B,
    NODE1,
    POOL1,
    POOL2,
    REQ0,
    SLICE1,
    SLICE2,
    SUB0,
    SUB1,
    all_request,
    claim,
    dev_result,
    device,
    first_available,
    klass,
    node,
    request,
    slice_with,
    sub,
    taint,
    toleration,
)

Raw = dict[str, Any]

KEY = "example.com/unhealthy"


def rule(
    name: str,
    driver: str | None = None,
    pool: str | None = None,
    device_name: str | None = None,
    *,
    effect: str = "NoSchedule",
    key: str = KEY,
    value: str = "true",
    selector: bool = True,
    conditions: Sequence[Raw] = (),
) -> Raw:
    spec: Raw = {"taint": {"key": key, "value": value, "effect": effect}}
    if selector:
        sel: Raw = {}
        if driver is not None:
            sel["driver"] = driver
        if pool is not None:
            sel["pool"] = pool
        if device_name is not None:
            sel["device"] = device_name
        spec["deviceSelector"] = sel
    obj: Raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name, "generation": 1},
        "spec": spec,
    }
    if conditions:
        obj["status"] = {"conditions": list(conditions)}
    return obj


def rules(*raws: Raw) -> TaintRules:
    return TaintRules(1, rules_of(rule_from(r) for r in raws))


NO_SCHEDULE = Taint(KEY, "true", "NoSchedule")


# --- the typed rule --------------------------------------------------------------------------------------------


def test_rule_from_parses_selector_taint_and_status() -> None:
    r = rule_from(
        rule(
            "r1",
            DRIVER_A,
            POOL1,
            DEV1,
            effect="NoExecute",
            conditions=[
                {
                    "type": "EvictionInProgress",
                    "status": "False",
                    "reason": "NoEffect",
                    "message": "0 pods",
                    "observedGeneration": 1,
                }
            ],
        )
    )
    assert r.name == "r1"
    assert r.selector == DeviceTaintSelector(DRIVER_A, POOL1, DEV1)
    assert r.taint == Taint(KEY, "true", "NoExecute")
    c = r.condition("EvictionInProgress")
    assert c is not None and (c.status, c.reason, c.observed_generation) == ("False", "NoEffect", 1)


def test_empty_selector_matches_everything_and_missing_selector_nothing() -> None:
    """Types: "The empty selector matches all devices. Without a selector, no devices are matched."
    (tracker_test.go ``patch-all-slices`` / ``nil-selector-matches-none``)."""
    everything = rule_from(rule("all"))
    assert everything.selector == DeviceTaintSelector()
    assert everything.applies_to("any.driver", "any-pool", "any-device")
    nothing = rule_from(rule("none", selector=False))
    assert nothing.selector is None
    assert not nothing.applies_to(DRIVER_A, POOL1, DEV1)
    assert rules_of([nothing]) == ()


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"metadata": {"name": "x"}}, "spec"),
        ({"metadata": {"name": "x"}, "spec": {"deviceSelector": {}}}, "spec.taint"),
        ({"metadata": {"name": "x"}, "spec": {"taint": {"effect": "NoSchedule"}}}, "spec.taint.key"),
        ({"metadata": {"name": "x"}, "spec": {"taint": {"key": "k"}}}, "spec.taint.effect"),
        (
            {"metadata": {"name": "x"}, "spec": {"deviceSelector": "all", "taint": {"key": "k", "effect": "None"}}},
            "spec.deviceSelector",
        ),
        (
            {
                "metadata": {"name": "x"},
                "spec": {"deviceSelector": {"driver": 3}, "taint": {"key": "k", "effect": "None"}},
            },
            "spec.deviceSelector.driver",
        ),
    ],
)
def test_invalid_rules_are_refused_with_a_field_path(raw: Raw, path: str) -> None:
    with pytest.raises(ModelError) as e:
        rule_from(raw)
    assert e.value.path == path


def test_unknown_effect_is_kept_and_never_blocks() -> None:
    """types.go: "Consumers must treat unknown effects like None"."""
    r = rule_from(rule("future", effect="NoExecuteWithPodDisruptionBudget"))
    assert r.taint.effect == "NoExecuteWithPodDisruptionBudget"
    assert untolerated_taint([r.taint], ()) is None


# --- which devices a rule taints (tracker_test.go) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "tainted"),
    [
        # add-taint-for-driver: only driver-a's devices, every pool
        (
            "driver",
            rule("r", driver=DRIVER_A),
            {(DRIVER_A, POOL1, DEV0), (DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL2, DEV0)},
        ),
        # add-taint-for-pool: pool-1 of every driver (drivers with node-local pools share pool names)
        ("pool", rule("r", pool=POOL1), {(DRIVER_A, POOL1, DEV0), (DRIVER_A, POOL1, DEV1), (DRIVER_B, POOL1, DEV0)}),
        # add-taint-for-device: the name alone matches in every driver and pool
        (
            "device",
            rule("r", device_name=DEV0),
            {(DRIVER_A, POOL1, DEV0), (DRIVER_A, POOL2, DEV0), (DRIVER_B, POOL1, DEV0)},
        ),
        # filter-all-criteria: all set fields must match
        ("all-criteria", rule("r", DRIVER_A, POOL1, DEV1), {(DRIVER_A, POOL1, DEV1)}),
        # patch-all-slices
        (
            "empty",
            rule("r"),
            {(DRIVER_A, POOL1, DEV0), (DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL2, DEV0), (DRIVER_B, POOL1, DEV0)},
        ),
        # nil-selector-matches-none
        ("nil", rule("r", selector=False), set()),
    ],
)
def test_rule_selects_devices_like_the_tracker(name: str, raw: Raw, tainted: set[tuple[str, str, str]]) -> None:
    devices = [(DRIVER_A, POOL1, DEV0), (DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL2, DEV0), (DRIVER_B, POOL1, DEV0)]
    rs = rules(raw)
    got = {d for d in devices if rs.taints_for(*d)}
    assert got == tainted, name
    for d in got:
        assert rs.taints_for(*d) == (NO_SCHEDULE,)


def test_rule_taints_are_appended_to_the_device_own_taints() -> None:
    """tracker_test.go ``merge-taints``: the slice's taint stays first, each matching rule appends its own."""
    own = Taint("driver.example.com/own", "x", "NoExecute")
    rs = rules(rule("b-second", driver=DRIVER_A, effect="None"), rule("a-first", device_name=DEV1))
    assert rs.effective_taints(DRIVER_A, POOL1, DEV1, (own,)) == (
        own,
        NO_SCHEDULE,
        Taint(KEY, "true", "None"),
    )
    assert rs.effective_taints(DRIVER_B, POOL1, DEV0, (own,)) == (own,)
    assert NO_RULES.effective_taints(DRIVER_A, POOL1, DEV1, (own,)) == (own,)


def test_tracker_generation_follows_selectors_and_taints_only() -> None:
    """``update-patch`` / ``remove-patch-*``: a changed or deleted rule changes what is tainted, so the
    generation moves; a status-only update (the eviction controller's condition) does not."""
    tracker = TaintRuleTracker()
    assert tracker.current({}) is not None and tracker.current({}).generation == 0
    r1 = rule_from(rule("r", pool=POOL1))
    objs: Mapping[str, Any] = {"r": r1}
    g1 = tracker.current(objs)
    assert g1.generation == 1 and g1.taints_for(DRIVER_A, POOL1, DEV0)
    assert tracker.current(objs) is g1  # same mapping object: identity check only
    status_only = rule_from(rule("r", pool=POOL1, conditions=[{"type": "EvictionInProgress", "status": "True"}]))
    assert tracker.current({"r": status_only}) is g1
    moved = tracker.current({"r": rule_from(rule("r", pool=POOL2))})  # update-patch: pool-1 -> pool-2
    assert moved.generation == 2
    assert not moved.taints_for(DRIVER_A, POOL1, DEV0) and moved.taints_for(DRIVER_A, POOL2, DEV0)
    effect = tracker.current({"r": rule_from(rule("r", pool=POOL2, effect="NoExecute"))})
    assert effect.generation == 3
    removed = tracker.current({})  # remove-patch-known-deleted-rule
    assert removed.generation == 4 and not removed.taints_for(DRIVER_A, POOL2, DEV0)
    # objects the cache could not convert never reach the tracker; anything else is ignored
    assert tracker.current({"x": {"raw": True}}).generation == 4


# --- the allocator sees rule taints as device taints ------------------------------------------------------------


CA = klass(CLASS_A, DRIVER_A)
TWO = slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2))
TOL_NO_SCHEDULE = toleration(KEY, "Exists", effect="NoSchedule")


def allocate(
    claims: Sequence[Any],
    slices: Sequence[Raw],
    rule_raws: Sequence[Raw],
    features: Features | None = None,
    allocated: Sequence[tuple[str, str, str]] = (),
) -> list[list[tuple[str, str]]] | None:
    """(request, device) per claim, or None when nothing fits on node-1."""
    n = node_from(node())
    index = build_slice_index({s["metadata"]["name"]: slice_from(s) for s in slices}, 1)
    feats = features or Features()
    pools = gather_pools(n, index.for_node(n.name), index.by_pool, feats, rules(*rule_raws))
    ledger = DeviceLedger()
    for i, (drv, pool, dev) in enumerate(allocated):
        ledger.observe_claim(f"u{i}", f"default/c{i}", (dev_result(drv, pool, dev),), "1")
    alloc = Allocator(feats, ledger, {CLASS_A: class_from(CA)}, SelectorCache(get_engine()))
    out = alloc.allocate(n, [ClaimInput(c.name, f"uid-{c.name}", claim_spec_from(c.spec)) for c in claims], pools)
    if out is None:
        return None
    return [[(r.request, r.device) for r in a.results] for a in out]


def _claim(*tolerations: Raw, count: int = 1) -> Any:
    return claim("claim-0", request(REQ0, CLASS_A, count, tolerations=list(tolerations)))


def test_rule_no_schedule_and_no_execute_block_allocation() -> None:
    """tainted-two-devices: both devices tainted (one NoSchedule, one NoExecute) -> no allocation."""
    rs = [rule("r1", DRIVER_A, POOL1, DEV1), rule("r2", DRIVER_A, POOL1, DEV2, effect="NoExecute", value="2")]
    assert allocate([_claim()], [TWO], rs) is None
    # without the rules the same claim fits
    assert allocate([_claim()], [TWO], []) == [[(REQ0, DEV1)]]


def test_rule_tainted_device_is_skipped_for_an_untainted_one() -> None:
    assert allocate([_claim()], [TWO], [rule("r1", device_name=DEV1)]) == [[(REQ0, DEV2)]]


def test_toleration_in_the_request_allows_the_device_and_is_copied() -> None:
    """tainted-two-devices-tolerated: the tolerated device is allocated, the result carries the toleration."""
    rs = [rule("r1", DRIVER_A, POOL1, DEV1), rule("r2", DRIVER_A, POOL1, DEV2, effect="NoExecute", value="2")]
    tol_exec = toleration(KEY, "Equal", "2", "NoExecute")
    assert allocate([_claim(tol_exec)], [TWO], rs) == [[(REQ0, DEV2)]]
    n = node_from(node())
    index = build_slice_index({SLICE1: slice_from(TWO)}, 1)
    pools = gather_pools(n, index.for_node(NODE1), index.by_pool, Features(), rules(*rs))
    alloc = Allocator(Features(), DeviceLedger(), {CLASS_A: class_from(CA)}, SelectorCache(get_engine()))
    [a] = alloc.allocate(n, [ClaimInput("c", "u", claim_spec_from(_claim(tol_exec).spec))], pools) or []
    assert a.raw["devices"]["results"][0]["tolerations"] == [
        {"key": KEY, "operator": "Equal", "value": "2", "effect": "NoExecute"}
    ]
    # a toleration for another effect or value does not help
    assert (
        allocate(
            [_claim(toleration(KEY, "Exists", effect="NoExecute"))], [TWO], rs[:1] + [rule("r3", device_name=DEV2)]
        )
        is None
    )
    assert allocate([_claim(toleration(KEY, "Equal", "false"))], [TWO], [rule("r", driver=DRIVER_A)]) is None
    assert allocate([_claim(TOL_NO_SCHEDULE)], [TWO], [rule("r", driver=DRIVER_A)]) == [[(REQ0, DEV1)]]


def test_rule_and_slice_taints_must_both_be_tolerated() -> None:
    """tainted-one-device-two-taints(-both-tolerated), one taint from the driver and one from a rule."""
    own = slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[taint("driver-key", "v", "NoExecute")]))
    r = [rule("r", device_name=DEV1)]
    assert allocate([_claim(TOL_NO_SCHEDULE)], [own], r) is None
    assert allocate([_claim(toleration("driver-key", "Exists"))], [own], r) is None
    assert allocate([_claim(TOL_NO_SCHEDULE, toleration("driver-key", "Exists"))], [own], r) == [[(REQ0, DEV1)]]


def test_rule_with_effect_none_or_unknown_does_not_block() -> None:
    """tainted-no-effect: effect None is informational (and an unknown effect is treated like None)."""
    assert allocate([_claim()], [TWO], [rule("r", effect="None"), rule("s", effect="Future")]) == [[(REQ0, DEV1)]]


def test_gates_off_ignore_rules() -> None:
    """tainted-disabled / dynamicresources_test.go tainted-device-disabled: without DRADeviceTaints taints
    are ignored; without DRADeviceTaintRules only the rules' taints are."""
    r = [rule("r")]
    assert allocate([_claim()], [TWO], r, Features(device_taints=False)) == [[(REQ0, DEV1)]]
    assert allocate([_claim()], [TWO], r, Features(device_taint_rules=False)) == [[(REQ0, DEV1)]]
    own = slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[taint()]))
    assert allocate([_claim()], [own], [], Features(device_taint_rules=False)) is None


def test_prioritized_list_takes_the_subrequest_that_tolerates() -> None:
    """tainted-two-devices-prioritized-list-tolerated."""
    c = claim(
        "claim-0", first_available(REQ0, sub(SUB0, CLASS_A, 1), sub(SUB1, CLASS_A, 1, tolerations=[TOL_NO_SCHEDULE]))
    )
    assert allocate([c], [TWO], [rule("r", driver=DRIVER_A)]) == [[(f"{REQ0}/{SUB1}", DEV1)]]


def test_admin_access_does_not_bypass_a_rule() -> None:
    """tainted-admin-access."""
    c = claim("claim-0", request(REQ0, CLASS_A, 1, admin=True))
    assert allocate([c], [TWO], [rule("r")], allocated=[(DRIVER_A, POOL1, DEV1)]) is None
    assert allocate([c], [TWO], [], allocated=[(DRIVER_A, POOL1, DEV1)]) == [[(REQ0, DEV1)]]


def test_all_mode_fails_when_a_rule_taints_one_device() -> None:
    """tainted-all-devices-single: allocationMode All needs every device, a tainted one fails it (no error)."""
    c = claim("claim-0", all_request(REQ0, CLASS_A))
    assert allocate([c], [TWO], [rule("r", device_name=DEV2)]) is None
    assert allocate([c], [TWO], [rule("r", device_name=DEV2, effect="None")]) == [[(REQ0, DEV1), (REQ0, DEV2)]]


def test_rules_do_not_change_the_slices_or_other_pools() -> None:
    """The rule's taint is held beside the candidate: the ResourceSlice (and its CEL cache key) stay as they are."""
    s1 = slice_from(TWO)
    s2 = slice_from(slice_with(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV1)))
    index = build_slice_index({SLICE1: s1, SLICE2: s2}, 1)
    n = node_from(node())
    pools = gather_pools(n, index.for_node(NODE1), index.by_pool, Features(), rules(rule("r", pool=POOL2)))
    taints = {(c.pool[1], c.device.name): c.rule_taints for p in pools for c in p.candidates}
    assert taints == {(POOL1, DEV1): (), (POOL1, DEV2): (), (POOL2, DEV1): (NO_SCHEDULE,)}
    assert all(d.taints == () for d in s2.devices)


# --- end to end: scheduler, cache, queue -------------------------------------------------------------------------

DRIVER = "gpu.example.com"


def node_obj(name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def slice_obj(node_name: str, n: int = 1) -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(n)],
        },
    }


def class_obj() -> Raw:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def claim_obj(name: str, tolerations: Sequence[Raw] = ()) -> Raw:
    exactly: Raw = {"deviceClassName": DRIVER, "count": 1}
    if tolerations:
        exactly["tolerations"] = list(tolerations)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def pod_obj(name: str, claim_name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def by_name(items: Sequence[Raw], kind: str) -> dict[str, Raw]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == kind}


def condition(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def test_simulate_places_the_pod_on_the_node_whose_device_is_not_tainted() -> None:
    objs = [
        node_obj("a"),
        node_obj("b"),
        slice_obj("a"),
        slice_obj("b"),
        class_obj(),
        claim_obj("c1"),
        pod_obj("p", "c1"),
    ]
    for tainted, free in (("a", "b"), ("b", "a")):
        res = asyncio.run(simulate(copy.deepcopy([*objs, rule("bad-gpu", DRIVER, tainted, "gpu-0")])))
        p = by_name(res.items, "Pod")["p"]
        assert p["spec"]["nodeName"] == free
        [r] = by_name(res.items, "ResourceClaim")["c1"]["status"]["allocation"]["devices"]["results"]
        assert r["pool"] == free


def test_simulate_unschedulable_names_the_taint() -> None:
    objs = [node_obj("a"), slice_obj("a", 2), class_obj(), claim_obj("c1"), pod_obj("p", "c1"), rule("maint", DRIVER)]
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    p = by_name(res.items, "Pod")["p"]
    assert not p["spec"].get("nodeName")
    cond = condition(p)
    assert cond["reason"] == "Unschedulable"
    assert (
        "claim default/c1, request gpu: needs 1 device(s) of class gpu.example.com: 2 match(es), 0 free, "
        f"2 tainted ({KEY}=true:NoSchedule not tolerated)"
    ) in cond["message"]


def test_simulate_toleration_allows_the_tainted_device() -> None:
    tol = {"key": KEY, "operator": "Exists", "effect": "NoSchedule"}
    objs = [node_obj("a"), slice_obj("a"), class_obj(), claim_obj("c1", [tol]), pod_obj("p", "c1"), rule("maint")]
    res = asyncio.run(simulate(copy.deepcopy(objs)))
    assert by_name(res.items, "Pod")["p"]["spec"]["nodeName"] == "a"
    [r] = by_name(res.items, "ResourceClaim")["c1"]["status"]["allocation"]["devices"]["results"]
    assert r["tolerations"] == [{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}]


def test_simulate_reads_a_yaml_rule_and_effect_none_is_informational(tmp_path: Any) -> None:
    docs = [
        node_obj("a"),
        slice_obj("a"),
        class_obj(),
        claim_obj("c1"),
        pod_obj("p", "c1"),
        rule("info-only", DRIVER, "a", effect="None"),
    ]
    f = tmp_path / "cluster.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    objs = load_objects([str(f)])
    assert [o["kind"] for o in objs].count("DeviceTaintRule") == 1
    res = asyncio.run(simulate(objs))
    assert by_name(res.items, "Pod")["p"]["spec"]["nodeName"] == "a"
    # the same file with NoExecute: nothing to place the pod on
    docs[-1] = rule("evict", DRIVER, "a", effect="NoExecute")
    f.write_text(yaml.safe_dump_all(docs))
    res = asyncio.run(simulate(load_objects([str(f)])))
    assert "NoExecute not tolerated" in condition(by_name(res.items, "Pod")["p"])["message"]


class Harness:
    """The live scheduler's pieces over the in-memory API (what simulate drives), step by step."""

    def __init__(self, objs: Sequence[Raw]) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.clock = FakeClock(1000.0)
        self.sched = Scheduler(self.cache, self.api, default_config(), clock=self.clock, inline_binding=True)
        for o in objs:
            self.load(o)

    def load(self, o: Raw) -> None:
        self.api.load(o["kind"], copy.deepcopy(o))

    def run(self, rounds: int = 10) -> None:
        async def go() -> None:
            for _ in range(rounds):
                info = self.sched.queue.pop()
                if info is None:
                    self.clock.set(self.clock.now() + 30)  # past backoff, not past the unschedulable timeout
                    self.sched.queue.flush()
                    info = self.sched.queue.pop()
                    if info is None:
                        return
                await self.sched.run_once(info)
            await self.sched.flush_writes()

        asyncio.run(go())

    def node_of(self, pod: str) -> str:
        [p] = [o for o in self.api.stored("Pod") if o["metadata"]["name"] == pod]
        return str(p["spec"].get("nodeName") or "")


def test_deleting_the_rule_requeues_the_pod_and_it_schedules() -> None:
    h = Harness(
        [node_obj("a"), slice_obj("a"), class_obj(), rule("maint", DRIVER), claim_obj("c1"), pod_obj("p", "c1")]
    )
    h.run()
    assert h.node_of("p") == ""
    assert h.sched.queue.pool("default/p") == "unschedulable"
    assert ("DeviceTaintRule", "Delete") in h.sched.profiles["dra-scheduler"].events_to_register()["DynamicResources"]
    asyncio.run(h.api.delete("DeviceTaintRule", "", "maint"))
    assert h.sched.queue.pool("default/p") in ("active", "backoff")  # moved by the event, not by a timeout
    h.run()
    assert h.node_of("p") == "a"


def test_updating_the_rule_to_effect_none_requeues_the_pod() -> None:
    h = Harness(
        [node_obj("a"), slice_obj("a"), class_obj(), rule("maint", DRIVER), claim_obj("c1"), pod_obj("p", "c1")]
    )
    h.run()
    assert h.sched.queue.pool("default/p") == "unschedulable"

    async def relax() -> None:
        obj = await h.api.get("DeviceTaintRule", "", "maint")
        obj["spec"]["taint"]["effect"] = "None"
        await h.api.update("DeviceTaintRule", obj)

    asyncio.run(relax())
    assert h.sched.queue.pool("default/p") in ("active", "backoff")
    h.run()
    assert h.node_of("p") == "a"


def test_a_new_rule_is_seen_by_the_next_equal_pod() -> None:
    """Equal pods reuse per-node results (runtime memo, DRA per-node cache, per-node pools) while the node and
    its devices are unchanged. A rule created between two equal pods changes neither the NodeInfo nor the
    ledger: without the rules' generation in the keys the second pod would reuse "b fits" and land on b."""
    h = Harness(
        [node_obj("a"), node_obj("b"), slice_obj("a"), slice_obj("b"), class_obj(), claim_obj("c1"), claim_obj("c2")]
    )
    h.load(pod_obj("p1", "c1"))
    h.run()
    first = h.node_of("p1")
    other = "b" if first == "a" else "a"
    assert first
    h.load(rule("maint", DRIVER, other))
    h.load(pod_obj("p2", "c2"))
    h.run(rounds=3)
    assert h.node_of("p2") == ""
    [p2] = [o for o in h.api.stored("Pod") if o["metadata"]["name"] == "p2"]
    assert "tainted" in condition(p2)["message"]
    dra = h.sched.profiles["dra-scheduler"].instances["DynamicResources"]
    assert dra.taint_rules(h.cache.snapshot()).generation == 1
    # and once the rule is gone the pod takes the device
    asyncio.run(h.api.delete("DeviceTaintRule", "", "maint"))
    h.run()
    assert h.node_of("p2") == other


def test_a_status_update_of_a_rule_keeps_the_caches() -> None:
    h = Harness([node_obj("a"), slice_obj("a", 2), class_obj(), rule("maint", DRIVER, effect="None"), claim_obj("c1")])
    dra = h.sched.profiles["dra-scheduler"].instances["DynamicResources"]
    gen = dra.taint_rules(h.cache.snapshot()).generation

    async def set_status() -> None:
        obj = await h.api.get("DeviceTaintRule", "", "maint")
        obj["status"] = {"conditions": [{"type": "EvictionInProgress", "status": "False", "reason": "NoEffect"}]}
        await h.api.update("DeviceTaintRule", obj)

    asyncio.run(set_status())
    assert dra.taint_rules(h.cache.snapshot()).generation == gen


def test_cache_and_simulate_know_the_kind() -> None:
    from scheduler.api.objects import OBJECT_KINDS
    from scheduler.kube.resources import resource_for
    from scheduler.kube.run import ALWAYS
    from scheduler.simulate.memapi import CLUSTER_SCOPED
    from scheduler.simulate.simulation import KINDS, ORDER
    from tests.fake_apiserver import KINDS as FAKE_KINDS

    r = resource_for("DeviceTaintRule")
    assert (r.group, r.version, r.plural, r.namespaced) == ("resource.k8s.io", "v1", "devicetaintrules", False)
    assert r.path(name="x") == "/apis/resource.k8s.io/v1/devicetaintrules/x"
    assert r in ALWAYS
    assert "DeviceTaintRule" in OBJECT_KINDS and "DeviceTaintRule" in CLUSTER_SCOPED
    assert ("resource.k8s.io/v1", "DeviceTaintRule") in KINDS
    assert ORDER.index("DeviceTaintRule") < ORDER.index("Pod")
    assert FAKE_KINDS[("resource.k8s.io", "v1", "devicetaintrules")] == ("DeviceTaintRule", False)
    cache = Cache()
    cache.apply("DeviceTaintRule", "ADDED", rule("r", DRIVER))
    cache.apply("DeviceTaintRule", "ADDED", {"metadata": {"name": "bad"}, "spec": {"taint": {"key": "k"}}})
    assert set(cache.snapshot().objects_of("DeviceTaintRule")) == {"r"}
    assert "DeviceTaintRule bad" in cache.conversion_errors


def test_rbac_lets_the_scheduler_watch_rules() -> None:
    with open("manifests/rbac.yaml", encoding="utf-8") as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d and d.get("kind") == "ClusterRole"]
    granted = {
        (g, r, v)
        for d in docs
        for rl in d["rules"]
        for g in rl["apiGroups"]
        for r in rl["resources"]
        for v in rl["verbs"]
    }
    for verb in ("get", "list", "watch"):
        assert ("resource.k8s.io", "devicetaintrules", verb) in granted
    assert not any(r == "devicetaintrules" and v not in ("get", "list", "watch") for _, r, v in granted)
