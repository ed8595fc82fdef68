"""Gang scheduling: PodGroups placed all-or-nothing, devices included."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from bench.fleet import scale_fleet
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.gang.status import XK8S_STATUS_FIELDS, podgroup_reason
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate.claimcontroller import create_pod_claims
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import simulate

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def template(
    name: str, count: int, selectors: list[str] | None = None, constraint: str | None = None
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if constraint:
        devices["constraints"] = [{"matchAttribute": constraint}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": devices}},
    }


def podgroup(name: str, min_member: int, timeout: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def pod(name: str, tmpl: str, group: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["labels"] = {GROUP_LABEL: group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "dra-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": tmpl}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def _by_kind(items: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == kind}


def _devices(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for c in items:
        if c["kind"] == "ResourceClaim" and c.get("status", {}).get("allocation"):
            out += [(r["driver"], r["pool"], r["device"]) for r in c["status"]["allocation"]["devices"]["results"]]
    return out


def test_group_of_eight_full_nodes_is_placed_whole() -> None:
    objs = scale_fleet(8) + [template("eight", 8), podgroup("train", 8)]
    objs += [pod(f"w{i}", "eight", "train") for i in range(8)]
    res = asyncio.run(simulate(objs))
    pods = _by_kind(res.items, "Pod")
    assert all(p["spec"].get("nodeName") for p in pods.values())
    assert len({p["spec"]["nodeName"] for p in pods.values()}) == 8
    devs = _devices(res.items)
    assert len(devs) == 64 and len(set(devs)) == 64
    pg = _by_kind(res.items, "PodGroup")["train"]
    # scheduler-plugins' PodGroupStatus (its CRD is ours): bound, not yet running = phase Scheduling
    assert pg["status"]["phase"] == "Scheduling" and pg["status"]["running"] == 0
    assert set(pg["status"]) <= set(XK8S_STATUS_FIELDS)


def test_group_with_one_node_missing_places_nobody_and_says_why() -> None:
    objs = scale_fleet(7) + [template("eight", 8), podgroup("train", 8)]
    objs += [pod(f"w{i}", "eight", "train") for i in range(8)]
    res = asyncio.run(simulate(objs))
    pods = _by_kind(res.items, "Pod")
    assert not any(p["spec"].get("nodeName") for p in pods.values())
    assert _devices(res.items) == []
    for p in pods.values():
        [cond] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert cond["reason"] == "Unschedulable"
        assert "pod group default/train: cannot place minMember 8" in cond["message"]
        assert "request gpu: needs 8 device(s)" in cond["message"]
    pg = _by_kind(res.items, "PodGroup")["train"]
    assert pg["status"]["phase"] == "Scheduling" and set(pg["status"]) <= set(XK8S_STATUS_FIELDS)
    assert res.scheduler is not None
    _, reason, message = podgroup_reason(
        res.scheduler.cache.podgroups()["default/train"],
        list(res.scheduler.cache.pods().values()),
        res.scheduler.gang.groups["default/train"],
    )
    assert reason == "Unschedulable" and "cannot place" in message


def test_group_waits_for_missing_members() -> None:
    objs = scale_fleet(4) + [template("one", 1), podgroup("g", 3)]
    objs += [pod("a", "one", "g"), pod("b", "one", "g")]
    res = asyncio.run(simulate(objs))
    pods = _by_kind(res.items, "Pod")
    assert not any(p["spec"].get("nodeName") for p in pods.values())
    [cond] = [c for c in pods["a"]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "2 of minMember 3 pods exist" in cond["message"]


def test_greedy_device_choice_fails_but_joint_choice_exists() -> None:
    """One node: gpu-0 (numa 1), gpu-1 (numa 0), gpu-2 (numa 1). Member a needs any GPU, member b two GPUs
    on one NUMA node. Pod by pod, a takes gpu-0 and b cannot fit; jointly a takes gpu-1 and b gets 0+2."""
    fleet = scale_fleet(1, 3)
    for o in fleet:
        if o["kind"] == "ResourceSlice":
            for d, numa in zip(o["spec"]["devices"], (1, 0, 1), strict=True):
                d["attributes"]["numaNode"] = {"int": numa}
    objs = fleet + [template("any", 1), template("pair", 2, constraint="gpu.nvidia.com/numaNode"), podgroup("g", 2)]
    objs += [pod("a", "any", "g"), pod("b", "pair", "g")]
    res = asyncio.run(simulate(objs))
    pods = _by_kind(res.items, "Pod")
    assert pods["a"]["spec"].get("nodeName") and pods["b"]["spec"].get("nodeName")
    devs = sorted(d for _, _, d in _devices(res.items))
    assert devs == ["gpu-0", "gpu-1", "gpu-2"]


class Live:
    """The scheduler loop over the in-memory API, for tests that change the cluster between rounds."""

    def __init__(self, objs: list[dict[str, Any]]) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.clock = FakeClock(1000.0)
        self.sched = Scheduler(self.cache, self.api, default_config(), clock=self.clock, inline_binding=True)
        self.api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        self.add(objs)
        self.invariant_checks = 0
        self.shrunk: set[str] = set()  # groups that lost bound members by deletion (the allowed exception)

    def add(self, objs: list[dict[str, Any]]) -> None:
        order = ["Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "PodGroup", "Pod"]
        for kind in order:
            for o in objs:
                if o["kind"] == kind:
                    self.api.load(kind, o)

    async def run(self, rounds: int = 200) -> None:
        for p in self.api.list("Pod"):
            await create_pod_claims(self.api, p)
        q = self.sched.queue
        for _ in range(rounds):
            info = q.pop()
            if info is None:
                q.flush()
                if q.lengths()["active"]:
                    continue
                wake = q.next_wakeup()
                if wake is None:
                    return
                self.clock.set(max(wake, self.clock.now()))
                continue
            await self.sched.run_once(info)
            self.check_invariants()

    def check_invariants(self) -> None:
        self.invariant_checks += 1
        bound: dict[str, int] = {}
        for p in self.api.objects.values():
            group = p["metadata"].get("labels", {}).get(GROUP_LABEL)
            if p["kind"] == "Pod" and group and p["spec"].get("nodeName"):
                bound[group] = bound.get(group, 0) + 1
        for g in self.api.stored("PodGroup"):
            name, mm = g["metadata"]["name"], g["spec"]["minMember"]
            n = bound.get(name, 0)
            assert n == 0 or n >= mm or name in self.shrunk, (name, n, mm)
        devs = _devices(list(self.api.stored("ResourceClaim")))
        assert len(devs) == len(set(devs)), "a device is allocated twice"

    def bound(self, group: str) -> list[str]:
        return [
            p["metadata"]["name"]
            for p in self.api.stored("Pod")
            if p["metadata"].get("labels", {}).get(GROUP_LABEL) == group and p["spec"].get("nodeName")
        ]


def test_two_competing_groups_one_whole_then_the_other_after_capacity_frees() -> None:
    async def go() -> None:
        objs = scale_fleet(4) + [template("eight", 8), podgroup("g1", 4), podgroup("g2", 4)]
        objs += [pod(f"a{i}", "eight", "g1") for i in range(4)] + [pod(f"b{i}", "eight", "g2") for i in range(4)]
        live = Live(objs)
        await live.run()
        first, second = sorted([live.bound("g1"), live.bound("g2")], key=len, reverse=True)
        assert len(first) == 4 and len(second) == 0
        winner = "g1" if live.bound("g1") else "g2"
        # the winner finishes: its pods are deleted and the claim controller would deallocate their claims
        for name in live.bound(winner):
            await live.api.delete("Pod", "default", name)
        for c in live.api.list("ResourceClaim"):
            owner = c["metadata"]["ownerReferences"][0]["name"]
            if owner in first:
                await live.api.delete("ResourceClaim", "default", c["metadata"]["name"])
        live.clock.advance(20)
        await live.run()
        loser = "g2" if winner == "g1" else "g1"
        assert len(live.bound(loser)) == 4

    asyncio.run(go())


def test_group_created_before_its_pods_waits_then_succeeds() -> None:
    async def go() -> None:
        live = Live(scale_fleet(2) + [template("one", 1), podgroup("g", 3), pod("p0", "one", "g")])
        await live.run()
        assert live.bound("g") == []
        live.add([pod("p1", "one", "g"), pod("p2", "one", "g")])
        live.clock.advance(20)
        await live.run()
        assert sorted(live.bound("g")) == ["p0", "p1", "p2"]

    asyncio.run(go())


def test_schedule_timeout_is_reported() -> None:
    async def go() -> None:
        live = Live(scale_fleet(1) + [template("one", 1), podgroup("g", 3, timeout=30), pod("p0", "one", "g")])
        await live.run()
        live.clock.advance(60)
        live.sched.queue.on_event("PodGroup", "Update")
        await live.run()
        [p] = live.api.list("Pod")
        [cond] = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert "scheduleTimeoutSeconds 30 expired" in cond["message"]
        from scheduler.gang.status import podgroup_status

        pg = live.cache.podgroups()["default/g"]
        members = list(live.cache.pods().values())
        st = podgroup_status(pg, members, live.sched.gang.groups["default/g"])
        assert st["phase"] == "Failed"
        assert podgroup_reason(pg, members, live.sched.gang.groups["default/g"])[1] == "Timeout"

    asyncio.run(go())


def test_member_deleted_after_binding_is_reported() -> None:
    async def go() -> None:
        live = Live(
            scale_fleet(2) + [template("one", 1), podgroup("g", 2), pod("p0", "one", "g"), pod("p1", "one", "g")]
        )
        await live.run()
        assert len(live.bound("g")) == 2
        await live.api.delete("Pod", "default", "p1")
        from scheduler.gang.status import podgroup_status

        pg = live.cache.podgroups()["default/g"]
        members = list(live.cache.pods().values())
        st = podgroup_status(pg, members, live.sched.gang.groups["default/g"])
        assert st["phase"] == "Failed"
        _, reason, message = podgroup_reason(pg, members, live.sched.gang.groups["default/g"])
        assert reason == "MembersLost" and "only 1 of minMember 2 members remain bound" in message

    asyncio.run(go())


def test_invariants_under_churn() -> None:
    """Random groups and single pods created and deleted (500+ events, fixed seed): every group always has
    0 or >= minMember bound members and no device is ever allocated twice."""

    async def go() -> None:
        rng = random.Random(20261121)
        live = Live(scale_fleet(6, 8) + [template("one", 1), template("two", 2), template("four", 4)])
        events = 0
        serial = 0
        groups: list[str] = []
        while events < 520:
            action = rng.random()
            if action < 0.35:
                serial += 1
                g = f"g{serial}"
                size = rng.randint(2, 5)
                tmpl = rng.choice(["one", "two", "four"])
                live.add([podgroup(g, size)] + [pod(f"{g}-{i}", tmpl, g) for i in range(size)])
                groups.append(g)
                events += size + 1
            elif action < 0.6:
                serial += 1
                live.add([pod(f"s{serial}", rng.choice(["one", "two"]))])
                events += 1
            else:
                stored = list(live.api.stored("Pod"))
                if stored:
                    victim = rng.choice(stored)["metadata"]["name"]
                    group = live.api.objects[("Pod", "default", victim)]["metadata"].get("labels", {}).get(GROUP_LABEL)
                    if group and victim in live.bound(group):
                        live.shrunk.add(group)  # deleting a bound member is the allowed exception
                    await live.api.delete("Pod", "default", victim)
                    for c in list(live.api.stored("ResourceClaim")):
                        if c["metadata"]["ownerReferences"][0]["name"] == victim:
                            await live.api.delete("ResourceClaim", "default", c["metadata"]["name"])
                    events += 1
            live.clock.advance(rng.random() * 3)
            await live.run(rounds=60)
        assert live.invariant_checks > 100
        assert any(len(live.bound(g)) for g in groups)

    asyncio.run(go())


def test_group_waits_for_members_that_cannot_be_scheduled_yet() -> None:
    """A member whose claim template does not exist yet is gated: the group says whom it waits for
    instead of searching and reporting 'no placement'."""
    objs = [*scale_fleet(2), template("one", 1), podgroup("g", 2), pod("a", "one", "g"), pod("b", "later", "g")]
    res = asyncio.run(simulate(objs))
    pods = _by_kind(res.items, "Pod")
    assert not any(p["spec"].get("nodeName") for p in pods.values())
    [cond] = [c for c in pods["a"]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "1 of minMember 2 pods are ready to schedule; waiting for default/b" in cond["message"]


def test_gang_cycle_reports_one_attempt_result_per_member() -> None:
    async def go() -> None:
        live = Live([*scale_fleet(2), template("one", 1), podgroup("g", 2), pod("p0", "one", "g")])
        for p in live.api.list("Pod"):
            await create_pod_claims(live.api, p)
        info = live.sched.queue.pop()
        assert info is not None
        out = await live.sched.run_once(info)
        assert out.group_results == {"unschedulable": 1}  # waits for its second member
        live.add([pod("p1", "one", "g")])
        for p in live.api.list("Pod"):
            await create_pod_claims(live.api, p)
        live.clock.advance(20)
        live.sched.queue.flush()
        info = live.sched.queue.pop()
        assert info is not None
        out = await live.sched.run_once(info)
        assert out.group_results == {"scheduled": 2}

    asyncio.run(go())


def test_failed_claim_write_of_one_member_leaves_no_claim_written() -> None:
    """ARCHITECTURE §4 step 4 for a gang: members with two claims each; the first member's second claim write
    fails after its first claim was allocated. Every allocation written for the group is undone — including
    the failing member's own first claim — and no member is bound (all-or-nothing, nothing half-written)."""
    from bench.fleet import scale_fleet
    from scheduler.api.clusterapi import ApiError
    from scheduler.cache.cache import Cache
    from scheduler.config.schedulerconfig import default_config
    from scheduler.loop.queue import FakeClock
    from scheduler.loop.scheduler import Scheduler
    from scheduler.simulate.claimcontroller import create_pod_claims
    from scheduler.simulate.memapi import InMemoryAPI

    async def go() -> None:
        api = InMemoryAPI()
        cache = Cache()
        api.watchers.append(cache.apply)
        clock = FakeClock(100.0)
        sched = Scheduler(cache, api, default_config(), clock=clock, inline_binding=True)
        api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        for o in [*scale_fleet(2, 8), template("one", 1), podgroup("g", 2)]:
            api.load(o["kind"], o)
        for i in range(2):
            p = pod(f"m{i}", "one", "g")
            p["spec"]["resourceClaims"].append({"name": "gpu2", "resourceClaimTemplateName": "one"})
            api.load("Pod", p)
        for p in api.list("Pod"):
            await create_pod_claims(api, p)
        # the first status write succeeds, the second fails
        real_update = api.update
        calls = {"n": 0}

        async def flaky_update(kind: str, obj: dict[str, Any], subresource: str = "") -> dict[str, Any]:
            if kind == "ResourceClaim" and subresource == "status":
                calls["n"] += 1
                if calls["n"] == 2:
                    raise ApiError("etcd unavailable")
            return await real_update(kind, obj, subresource)

        api.update = flaky_update  # type: ignore[method-assign]
        info = sched.queue.pop()
        assert info is not None
        await sched.run_once(info)
        assert calls["n"] >= 2
        for c in api.list("ResourceClaim"):
            assert not (c.get("status") or {}).get("allocation"), c["metadata"]["name"]
            assert not (c.get("status") or {}).get("reservedFor"), c["metadata"]["name"]
        assert not any(p["spec"].get("nodeName") for p in api.list("Pod"))

    asyncio.run(go())
