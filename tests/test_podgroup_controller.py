"""The PodGroup status reconciler: writes status only when it changes, Events on phase transitions."""

from __future__ import annotations

import asyncio

from bench.fleet import scale_fleet
from scheduler.gang.status import XK8S_STATUS_FIELDS
from scheduler.kube.podgroup_controller import PodGroupStatusController
from tests.test_gang import Live, pod, podgroup, template


def test_status_follows_the_group_and_writes_only_changes() -> None:
    async def go() -> None:
        live = Live(scale_fleet(2) + [template("one", 1), podgroup("g", 2), pod("p0", "one", "g")])
        ctl = PodGroupStatusController(live.cache, live.api, live.sched.gang)
        await live.run()
        assert await ctl.reconcile("default/g") is True
        pg = live.api.objects[("PodGroup", "default", "g")]
        assert pg["status"]["phase"] == "Pending"
        assert set(pg["status"]) <= set(XK8S_STATUS_FIELDS)  # scheduler-plugins' PodGroupStatus fields only
        [ev] = [e for e in live.api.events if e["involvedObject"]["kind"] == "PodGroup"]
        assert "1 of minMember 2 pods exist" in ev["message"]
        assert await ctl.reconcile("default/g") is False  # nothing changed: no write
        live.add([pod("p1", "one", "g")])
        live.clock.advance(20)
        await live.run()
        assert await ctl.reconcile("default/g") is True
        pg = live.api.objects[("PodGroup", "default", "g")]
        assert pg["status"]["phase"] == "Scheduling" and pg["status"]["running"] == 0  # bound, not yet running
        reasons = [e["reason"] for e in live.api.events if e["involvedObject"]["kind"] == "PodGroup"]
        assert reasons == ["WaitingForMembers", "Scheduled"]
        assert ctl.writes == 2

    asyncio.run(go())
