"""Carrying out a preemption: the API calls, after the preemptor's cycle (async preemption).

kubernetes v1.37.2 ``pkg/scheduler/framework/preemption/executor.go`` (``prepareCandidateAsync``,
``PreemptPod``, ``IsPodRunningPreemption``, ``clearNominatedNodeName``; SchedulerAsyncPreemption is beta and
on in 1.37): the preemptor is recorded as "preempting" during its PostFilter; the API work runs after its
cycle ended (live: a task; ``simulate``: awaited inline), in this order:

1. (the preemptor's ``status.nominatedNodeName`` was written with its failure status by the scheduler);
2. lower-priority pods nominated to the same node lose their nomination (``nominatedNodeName`` cleared;
   not critical: an error is logged and the preemption goes on);
3. each victim that is not already being deleted: condition ``DisruptionTarget=True``, reason
   ``PreemptionByScheduler``, message ``<scheduler name>: preempting to accommodate a higher priority pod``
   (status patch, only when the condition changes; ``lastTransitionTime`` kept when the status does not
   change; ``observedGeneration`` = the pod's generation, PodObservedGenerationTracking), then a DELETE with
   the server's default grace period (the pod's ``terminationGracePeriodSeconds``), then the Event
   ``Preempted`` ("Preempted by pod <uid> on node <node>") on the victim. A victim already gone is skipped;
   after a failure the remaining victims are left alone and the preemptor is retried at once;
4. the last victim is remembered before its DELETE: while the work runs, the preemptor's PreEnqueue keeps it
   out of the queue ("waiting for the preemption for this pod to be finished") unless that last victim is
   already gone or being deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from plugins.defaultpreemption.core import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, Candidate
from scheduler.api.clusterapi import ApiError, NotFound
from scheduler.framework.interface import Actuation

if TYPE_CHECKING:
    from scheduler.api.clusterapi import ClusterAPI
    from scheduler.api.model import Pod
    from scheduler.cache.cache import Snapshot

log = structlog.get_logger("dra_scheduler.preemption")


class Preemptor(Protocol):
    """Who preempts: a Pod, or a pod group (``plugins.defaultpreemption.group.GroupPreemptor``)."""

    @property
    def uid(self) -> str: ...

    @property
    def key(self) -> str: ...


def disruption_condition(scheduler_name: str, victim: Pod, kind: str = "pod") -> dict[str, Any]:
    """``kind``: the preemptor's type as upstream's ``ExecutorPreemptor.Type()`` ("pod", "podgroup")."""
    cond: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{scheduler_name}: preempting to accommodate a higher priority {kind}",
    }
    if victim.meta.generation:
        cond["observedGeneration"] = victim.meta.generation
    return cond


async def preempt_pod(
    api: ClusterAPI,
    victim: Pod,
    preemptor: Preemptor,
    node: str,
    scheduler_name: str,
    now: Callable[[], str],
    kind: str = "pod",
) -> None:
    """``PreemptPod``: DisruptionTarget condition, then DELETE, then the Event. Raises ApiError on failure
    (a victim that is already gone is not a failure)."""
    status = victim.raw.get("status")
    conds: list[dict[str, Any]] = [
        dict(c) for c in ((status.get("conditions") or []) if isinstance(status, dict) else []) if isinstance(c, dict)
    ]
    cond = disruption_condition(scheduler_name, victim, kind)
    idx = next((i for i, c in enumerate(conds) if c.get("type") == DISRUPTION_TARGET), None)
    old = conds[idx] if idx is not None else None
    cond["lastTransitionTime"] = (
        old["lastTransitionTime"]
        if old is not None and old.get("status") == cond["status"] and old.get("lastTransitionTime")
        else now()
    )
    changed = old is None or any(old.get(k) != v for k, v in cond.items() if k != "observedGeneration")
    if changed:
        if idx is None:
            conds.append(cond)
        else:
            conds[idx] = cond
        try:
            await api.patch(
                "Pod",
                victim.namespace,
                victim.name,
                {"metadata": {"uid": victim.uid}, "status": {"conditions": conds}},
                subresource="status",
            )
        except NotFound:
            log.info("victim pod is already deleted", victim=victim.key, preemptor=preemptor.key, node=node)
            return
    try:
        await api.delete("Pod", victim.namespace, victim.name)
    except NotFound:
        log.info("victim pod is already deleted", victim=victim.key, preemptor=preemptor.key, node=node)
        return
    log.info("preempted", victim=victim.key, preemptor=preemptor.key, node=node)
    await api.event(dict(victim.raw), "Normal", "Preempted", f"Preempted by {kind} {preemptor.uid} on node {node}",
                    "Preempting")


class Executor:
    def __init__(self) -> None:
        self.preempting: set[str] = set()  # preemptor uids whose API work is under way
        self.last_victim: dict[str, tuple[str, str]] = {}  # preemptor uid -> (node, key) of its last victim

    def is_running(self, uid: str, snapshot: Snapshot) -> bool:
        """``IsPodRunningPreemption``: the work for this preemptor is under way, and its last victim (once
        known) is still on its node and not being deleted."""
        if uid not in self.preempting:
            return False
        last = self.last_victim.get(uid)
        if last is None:
            return True
        node, key = last
        info = snapshot.node_map.get(node)
        if info is None:
            return False
        for p in info.pod_list:
            if p.key == key:
                return not p.meta.deleting
        return False

    def prepare(
        self, preemptor: Pod, candidate: Candidate, scheduler_name: str, lower_nominated: Sequence[Pod]
    ) -> Actuation | None:
        """Record ``preemptor`` as preempting and return the API work (None when every victim is already
        being deleted: nothing to do, as upstream)."""
        victims = [p for p in candidate.pods if not p.meta.deleting]
        if not victims:
            return None
        uid = preemptor.uid
        self.preempting.add(uid)
        node = candidate.node

        async def actuate(api: ClusterAPI, now: Callable[[], str]) -> bool:
            ok = True
            try:
                for p in lower_nominated:
                    try:
                        await api.patch(
                            "Pod",
                            p.namespace,
                            p.name,
                            {"metadata": {"uid": p.uid}, "status": {"nominatedNodeName": None}},
                            subresource="status",
                        )
                    except ApiError as e:  # not critical, as upstream
                        log.warning("cannot clear nominatedNodeName", pod=p.key, node=node, error=str(e))
                for i, v in enumerate(victims):
                    if i == len(victims) - 1:
                        self.last_victim[uid] = (v.node_name, v.key)
                    try:
                        await preempt_pod(api, v, preemptor, node, scheduler_name, now)
                    except ApiError as e:
                        log.warning("preemption failed", victim=v.key, preemptor=preemptor.key, error=str(e))
                        ok = False
                        break
            finally:
                self.preempting.discard(uid)
                self.last_victim.pop(uid, None)
            return ok

        return actuate
