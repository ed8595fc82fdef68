"""Preemption that frees DRA devices (goes beyond upstream kube-scheduler 1.37.2, whose DynamicResources has
no PreFilterExtensions and answers UnschedulableAndUnresolvable for devices in use: see
``../shared/reference/k8s-1.37-facts.md``, "Preemption and DRA devices").

Rules checked: a victim's devices count as free in the dry run only when no surviving pod reserves its
claims (a shared claim stays allocated while another consumer lives); after the eviction, the victims' claims
generated from templates are deleted and claims nobody reserves are deallocated, as kube-controller-manager's
resourceclaim controller does (``pkg/controller/resourceclaim/controller.go`` ``syncClaim``), which
``simulate`` plays with its fake clock; the devices of a nominated pod are held for it; no device is ever
allocated twice. Existing load comes from a first ``simulate`` run whose output is fed to a second one, as a
user would feed ``kubectl get -o yaml`` output.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fleet import scale_fleet
from scheduler.api.dra import DeviceResult
from scheduler.cache.ledger import DeviceLedger, LedgerView
from scheduler.simulate.simulation import SimulationResult, simulate

NODE = "dgx-h100-00000"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


CLASSES = [priority_class("low", 10), priority_class("mid", 500), priority_class("high", 1000),
           priority_class("top", 5000)]


def template(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}}},
    }


def claim(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}},
    }


def gpu_pod(name: str, prio: str, tmpl: str | None = None, shared: str | None = None) -> dict[str, Any]:
    rc: dict[str, Any] = {"name": "gpu"}
    if tmpl:
        rc["resourceClaimTemplateName"] = tmpl
    else:
        rc["resourceClaimName"] = shared
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "dra-scheduler",
            "priorityClassName": prio,
            "resourceClaims": [rc],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def templates() -> list[dict[str, Any]]:
    return [template(f"gpus-{n}", n) for n in (1, 2, 3, 4)]


def run(objs: list[dict[str, Any]]) -> SimulationResult:
    return asyncio.run(simulate(objs))


def then(first: SimulationResult, base: list[dict[str, Any]], more: list[dict[str, Any]]) -> SimulationResult:
    """A second run on the first one's output (pods and claims as the API server holds them)."""
    kept = [o for o in first.items if o["kind"] in ("Pod", "ResourceClaim")]
    return run([*base, *kept, *more])


def by_name(items: Sequence[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == kind}


def devices_of(c: dict[str, Any]) -> list[tuple[str, str, str]]:
    alloc = (c.get("status") or {}).get("allocation")
    if not alloc:
        return []
    return [(r["driver"], r["pool"], r["device"]) for r in alloc["devices"]["results"] if not r.get("adminAccess")]


def pod_claim(res: SimulationResult, pod: str) -> dict[str, Any]:
    p = by_name(res.items, "Pod")[pod]
    name = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    return by_name(res.items, "ResourceClaim")[name]


def assert_no_device_twice(items: Sequence[dict[str, Any]]) -> None:
    counts = Counter(d for c in items if c["kind"] == "ResourceClaim" for d in devices_of(c))
    assert not [d for d, n in counts.items() if n > 1], counts


def test_gpu_pod_preempts_lower_priority_gpu_pod() -> None:
    base = [*scale_fleet(1, gpus_per_node=2), *templates(), *CLASSES]
    first = run([*base, gpu_pod("low", "low", "gpus-2")])
    low_claim = pod_claim(first, "low")
    low_devices = devices_of(low_claim)
    assert len(low_devices) == 2
    res = then(first, base, [gpu_pod("high", "high", "gpus-2")])
    pods = by_name(res.items, "Pod")
    assert "low" not in pods and pods["high"]["spec"]["nodeName"] == NODE
    assert sorted(devices_of(pod_claim(res, "high"))) == sorted(low_devices)  # the victim's devices
    assert_no_device_twice(res.items)
    deleted = {(o["kind"], o["metadata"]["name"]): o for o in res.deleted}
    victim = deleted[("Pod", "low")]
    assert victim["metadata"]["deletionTimestamp"]
    assert any(c["type"] == "DisruptionTarget" and c["reason"] == "PreemptionByScheduler"
               for c in victim["status"]["conditions"])
    gone_claim = deleted[("ResourceClaim", low_claim["metadata"]["name"])]
    # deallocated, then its finalizer removed, then deleted (generated for the victim)
    assert "allocation" not in gone_claim["status"] and "reservedFor" not in gone_claim["status"]
    assert "resource.kubernetes.io/delete-protection" not in (gone_claim["metadata"].get("finalizers") or [])
    assert low_claim["metadata"]["name"] not in by_name(res.items, "ResourceClaim")
    assert res.summary["preempted"] == 1 and res.summary["scheduled"] == 1
    failed = next(e for e in res.events if e["reason"] == "FailedScheduling")
    assert failed["message"].endswith(f"preemption: found a potential placement for pod on node {NODE}, "
                                      "preempting 1 victims")


def test_only_as_many_gpu_victims_as_needed_lowest_priority_first() -> None:
    base = [*scale_fleet(1, gpus_per_node=4), *templates(), *CLASSES]
    first = run([*base, gpu_pod("a", "low", "gpus-1"), gpu_pod("b", "mid", "gpus-1"),
                 gpu_pod("c", "low", "gpus-2")])
    assert all(p["spec"].get("nodeName") for p in by_name(first.items, "Pod").values())
    res = then(first, base, [gpu_pod("p", "high", "gpus-2")])
    pods = by_name(res.items, "Pod")
    assert pods["p"]["spec"]["nodeName"] == NODE
    # all three removed in the dry run, then reprieved most important first: b (mid), a (low; a and c have not
    # started, equal importance, node order), then c no longer fits back: c alone is evicted
    assert [o["metadata"]["name"] for o in res.deleted if o["kind"] == "Pod"] == ["c"]
    freed = 4 - sum(len(devices_of(c)) for c in res.items if c["kind"] == "ResourceClaim"
                    and c["metadata"]["name"] != pod_claim(res, "p")["metadata"]["name"])
    assert freed == 2  # exactly the room the preemptor needs: the minimal victim set
    assert_no_device_twice(res.items)


def test_no_eviction_when_devices_do_not_exist_on_the_node() -> None:
    """A pod asking for more GPUs than the node has: DynamicResources says UnschedulableAndUnresolvable (no
    device in use could help), preemption is not tried."""
    base = [*scale_fleet(1, gpus_per_node=2), *templates(), *CLASSES]
    first = run([*base, gpu_pod("low", "low", "gpus-1")])
    res = then(first, base, [gpu_pod("big", "high", "gpus-4")])
    assert res.deleted == [] and by_name(res.items, "Pod")["low"]["spec"]["nodeName"] == NODE
    cond = next(c for c in by_name(res.items, "Pod")["big"]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["message"].endswith("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def test_shared_claim_of_a_surviving_pod_frees_nothing() -> None:
    """The victim's claim is also reserved by a pod that is not a victim: its devices stay in use, so evicting
    the victim would not help and nothing is evicted."""
    base = [*scale_fleet(1, gpus_per_node=2), *templates(), *CLASSES, claim("shared", 2)]
    first = run([*base, gpu_pod("a", "low", shared="shared"), gpu_pod("b", "top", shared="shared")])
    shared = by_name(first.items, "ResourceClaim")["shared"]
    assert len(shared["status"]["reservedFor"]) == 2
    res = then(first, [b for b in base if b["kind"] != "ResourceClaim"], [gpu_pod("p", "high", "gpus-2")])
    pods = by_name(res.items, "Pod")
    assert res.deleted == [] and pods["a"]["spec"]["nodeName"] == NODE and not pods["p"]["spec"].get("nodeName")
    after = by_name(res.items, "ResourceClaim")["shared"]
    assert devices_of(after) == devices_of(shared) and len(after["status"]["reservedFor"]) == 2
    cond = next(c for c in pods["p"]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "preemption: 0/1 nodes are available: 1 claim default/" in cond["message"]
    assert_no_device_twice(res.items)


def test_shared_claim_is_freed_when_every_consumer_is_a_victim() -> None:
    """Both consumers are lower priority: both are evicted, the shared claim (not generated for a pod) is
    deallocated when its last reservation goes, but not deleted."""
    base = [*scale_fleet(1, gpus_per_node=2), *templates(), *CLASSES, claim("shared", 2)]
    first = run([*base, gpu_pod("a", "low", shared="shared"), gpu_pod("b", "low", shared="shared")])
    devs = devices_of(by_name(first.items, "ResourceClaim")["shared"])
    res = then(first, [b for b in base if b["kind"] != "ResourceClaim"], [gpu_pod("p", "high", "gpus-2")])
    pods = by_name(res.items, "Pod")
    assert pods["p"]["spec"]["nodeName"] == NODE
    assert sorted(o["metadata"]["name"] for o in res.deleted) == ["a", "b"]
    shared = by_name(res.items, "ResourceClaim")["shared"]
    assert "allocation" not in shared["status"] and not shared["status"].get("reservedFor")
    assert sorted(devices_of(pod_claim(res, "p"))) == sorted(devs)
    assert_no_device_twice(res.items)


def test_devices_of_a_nominated_pod_are_held_for_it() -> None:
    """After "high" preempted for 2 GPUs, "mid" (lower priority, pending too, tried while high waits in
    backoff) must not take them: the nominated pod's claims are allocated together with mid's on that node."""
    base = [*scale_fleet(1, gpus_per_node=2), *templates(), *CLASSES]
    first = run([*base, gpu_pod("low", "low", "gpus-2")])
    res = then(first, base, [gpu_pod("high", "high", "gpus-2"), gpu_pod("mid", "mid", "gpus-2")])
    pods = by_name(res.items, "Pod")
    assert pods["high"]["spec"]["nodeName"] == NODE and not pods["mid"]["spec"].get("nodeName")
    assert [o["metadata"]["name"] for o in res.deleted if o["kind"] == "Pod"] == ["low"]
    attempts = [e for e in res.events if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "mid"]
    assert attempts, "mid was tried while high was nominated"
    assert_no_device_twice(res.items)


def test_ledger_view_hides_claims_without_touching_the_ledger() -> None:
    def res(dev: str, share: str = "") -> DeviceResult:
        return DeviceResult("r", "drv", "pool", dev, False, share, {})

    ledger = DeviceLedger()
    ledger.set_pool_nodes({("drv", "pool"): "n1"})
    ledger.observe_claim("a", "ns/a", (res("d0"), res("d1")), "1")
    ledger.observe_claim("b", "ns/b", (res("d1"),), "2")  # d1 also used by b (e.g. admin access elsewhere)
    ledger.observe_claim("s", "ns/s", (res("d2", "x"),), "3")
    rev, node_rev = ledger.revision, ledger.node_revision("n1")
    view = LedgerView(ledger, {"a", "s", "unknown"})
    assert view.hidden == {"a", "s"}
    assert not view.is_allocated(("drv", "pool", "d0"))
    assert view.is_allocated(("drv", "pool", "d1"))  # b still holds it
    assert view.exclusive_users(("drv", "pool", "d1")) == {"b"}
    assert view.shared_consumption(("drv", "pool", "d2")) is None and not view.in_use(("drv", "pool", "d2"))
    assert view.pool_devices_in_use(("drv", "pool")) == {"d1": 1}
    assert view.use_of("a") is None and view.use_of("b") is not None
    assert view.node_revision("n1") < 0 and view.pool_revision(("drv", "pool")) < 0
    # the real ledger is untouched
    assert ledger.is_allocated(("drv", "pool", "d0")) and ledger.revision == rev
    assert ledger.node_revision("n1") == node_rev and ledger.pool_devices_in_use(("drv", "pool"))["d1"] == 2
    try:
        view.reserve("c", "ns/c", (res("d0"),))
    except TypeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a view must refuse writes")


# --- property: random GPU clusters -------------------------------------------------------------------------

PRIOS = ["low", "mid", "high", "top"]
VALUE = {"low": 10, "mid": 500, "high": 1000, "top": 5000}

pod_spec = st.tuples(st.sampled_from(PRIOS), st.integers(1, 3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(1, 2),
    gpus=st.integers(2, 4),
    existing=st.lists(pod_spec, min_size=1, max_size=5),
    incoming=st.lists(pod_spec, min_size=1, max_size=4),
)
def test_property_no_device_twice_and_every_victim_had_lower_priority(
    nodes: int, gpus: int, existing: list[tuple[str, int]], incoming: list[tuple[str, int]]
) -> None:
    base = [*scale_fleet(nodes, gpus_per_node=gpus), *templates(), *CLASSES]
    first = run([*base, *(gpu_pod(f"e{i}", p, f"gpus-{n}") for i, (p, n) in enumerate(existing))])
    assert_no_device_twice(first.items)
    res = then(first, base, [gpu_pod(f"n{i}", p, f"gpus-{n}") for i, (p, n) in enumerate(incoming)])
    assert_no_device_twice(res.items)
    pods = by_name(res.items, "Pod")
    all_pods = {**by_name(first.items, "Pod"), **pods, **by_name(res.deleted, "Pod")}
    uid_of = {p["metadata"]["uid"]: p for p in all_pods.values()}
    live_uids = {p["metadata"]["uid"] for p in pods.values()}
    # every claim still allocated is reserved by live pods only
    for c in res.items:
        if c["kind"] == "ResourceClaim" and devices_of(c):
            assert {r["uid"] for r in c["status"].get("reservedFor") or []} <= live_uids
    # every victim had a lower priority than its preemptor, which ended bound (never pointless)
    preempted = [e for e in res.events if e["reason"] == "Preempted"]
    assert len(preempted) == res.summary["preempted"] == len([o for o in res.deleted if o["kind"] == "Pod"])
    for e in preempted:
        victim = all_pods[e["involvedObject"]["name"]]
        preemptor = uid_of[e["message"].split("Preempted by pod ")[1].split(" ")[0]]
        assert preemptor["spec"]["priority"] > victim["spec"]["priority"]
        assert any(c["type"] == "DisruptionTarget" for c in victim["status"]["conditions"])
        assert pods[preemptor["metadata"]["name"]]["spec"].get("nodeName"), "preempted for nothing"


def test_gone_victim_whose_claim_is_still_allocated_does_not_trigger_a_second_preemption() -> None:
    """Found live (e2e/test_live_preemption.py): the victim on the nominated node is gone, but kube-controller-
    manager has not deallocated its claim yet. Upstream's PodEligibleToPreemptOthers only looks for terminating
    victims on the nominated node; we also treat a claim there that is allocated and reserved only by pods no
    longer on the node as "still being released", so the preemptor waits for that claim's update instead of
    evicting a second, higher-priority pod on another node."""
    from tests.test_preemption import Cluster

    base = [*scale_fleet(2, gpus_per_node=2), *templates(), *CLASSES]
    first = run([*base, gpu_pod("low", "low", "gpus-2"), gpu_pod("mid", "mid", "gpus-2")])
    pods = by_name(first.items, "Pod")
    low_node = pods["low"]["spec"]["nodeName"]
    low_claim = pod_claim(first, "low")
    kept = [o for o in first.items if o["kind"] in ("Pod", "ResourceClaim") and o["metadata"]["name"] != "low"]
    assert any(o is low_claim for o in kept)  # the victim's claim: still allocated, reserved for "low"
    high = gpu_pod("high", "high", shared="high-gpus")
    high["spec"]["priority"] = 1000
    kept.append(claim("high-gpus", 2))
    high["status"] = {"nominatedNodeName": low_node}
    c = Cluster([o for o in [*base, *kept, high] if o["kind"] != "PriorityClass"])
    res, st = c.post_filter("high")
    assert res is None or res.nominated_node_name in ("", low_node), res
    assert "still being released" in st.message, st
    # control: once the claim is released (deallocated), preemption is eligible again and needs no victim there
    low_claim["status"] = {}
    c2 = Cluster([o for o in [*base, *kept, high] if o["kind"] != "PriorityClass"])
    _, st2 = c2.post_filter("high")
    assert "still being released" not in st2.message
