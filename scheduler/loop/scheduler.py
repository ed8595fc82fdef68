"""The scheduling loop: queue → cycle (pure, synchronous) → binding cycle (async, API writes).

The same loop drives the live scheduler and ``simulate``; only the :class:`~scheduler.api.clusterapi.ClusterAPI`
behind it differs. When no node fits, PostFilter (DefaultPreemption) may nominate a node: the nomination is
recorded in the nominator at once and written with the failure status, then the preemption's API work runs
(a task live, as upstream's async preemption; inline in ``simulate``). A nominated pod's resources are held
for it (filters of pods of equal or lower priority count it on its node), and the node it is nominated to is
tried first in its next cycle (upstream ``evaluateNominatedNode``).

The scheduling cycle (PreFilter → Filter → PostFilter → PreScore → Score → select → assume → Reserve →
Permit) runs without awaiting, on one immutable snapshot. The binding cycle (PreBind → Bind) writes in the
order of ARCHITECTURE §4; on failure it undoes its writes, forgets the in-memory reservation and the assumed
pod, and sends the pod to backoff.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from scheduler.api.clusterapi import ApiError, ClusterAPI, NotFound, pod_writes
from scheduler.api.dra import ResourceClaim
from scheduler.api.model import Pod
from scheduler.cache.cache import Cache, NodeInfo
from scheduler.cache.coexistence import DoubleAllocationDetector
from scheduler.config.registry import PluginSpec, default_registry
from scheduler.config.schedulerconfig import SchedulerConfig
from scheduler.framework.helpers import fit_error
from scheduler.framework.interface import (
    Code,
    CycleState,
    Metrics,
    NullMetrics,
    PostFilterResult,
    QueuedPodInfo,
    QueueingHint,
    QueueingHintFn,
    Status,
)
from scheduler.framework.nominator import NOOP, OVERRIDE, Nominator, status_nominated_node
from scheduler.framework.runtime import Framework
from scheduler.gang.cycle import GangScheduler
from scheduler.loop.queue import Clock, MonotonicClock, SchedulingQueue

log = structlog.get_logger("dra_scheduler")

POST_FILTER_RESULT = "framework/post-filter-result"  # CycleState key: the cycle's PostFilterResult
# 1 in this many scheduling cycles observes scheduler_plugin_execution_duration_seconds (upstream's
# pluginMetricsSamplePercent = 10, pkg/scheduler/schedule_one.go: timing every plugin of every cycle costs more
# than the metric is worth)
PLUGIN_METRICS_SAMPLE = 10
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
_ACTIONS = {"ADDED": "Add", "MODIFIED": "Update", "DELETED": "Delete"}


def num_feasible_nodes_to_find(percentage: int, num_all: int) -> int:
    """kube-scheduler's adaptive sampling: all nodes below 100, else a shrinking share (≥ 5%, ≥ 100)."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    pct = percentage
    if pct <= 0:
        pct = max(MIN_FEASIBLE_NODES_PERCENTAGE, 50 - num_all // 125)
    if pct >= 100:
        return num_all
    return max(num_all * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class Outcome:
    pod: str
    node: str = ""
    status: Status | None = None
    group_results: Mapping[str, int] | None = None  # a gang cycle: attempt results of its members


class Scheduler:
    def __init__(
        self,
        cache: Cache,
        api: ClusterAPI,
        config: SchedulerConfig,
        *,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        registry: Mapping[str, PluginSpec] | None = None,
        inline_binding: bool = False,
        wallclock: Callable[[], str] | None = None,
        queue_timestamp: Callable[[Pod], float] | None = None,
    ) -> None:
        """``queue_timestamp``: a pod's queue timestamp when it is first queued (PrioritySort's order after
        priority), on ``clock``'s time line; default the clock's time then (simulate: its creationTimestamp)."""
        self.cache = cache
        self.api = api
        self.config = config
        self.clock = clock or MonotonicClock()
        self.metrics = metrics or NullMetrics()
        self.inline_binding = inline_binding
        # whether this process may write now (a leader-elected replica: while its lease is surely held); writes
        # made outside a scheduling cycle, from watch events, ask it first (GangScheduler's group conditions)
        self.writes_allowed: Callable[[], bool] = lambda: True
        # RFC 3339 time for condition timestamps; simulate passes a deterministic one
        self.wallclock = wallclock or (lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        reg = registry if registry is not None else default_registry()
        # pods nominated to nodes by preemption; their resources are held for them (scheduler/framework/nominator.py)
        self.nominator = Nominator()
        self.profiles: dict[str, Framework] = {
            p.scheduler_name: Framework(p, reg, self.metrics, self.nominator) for p in config.profiles
        }
        first = next(iter(self.profiles.values()))
        events: dict[str, set[tuple[str, str]]] = {}
        for fw in self.profiles.values():
            for name, evs in fw.events_to_register().items():
                events.setdefault(name, set()).update(evs)
        self.queue = SchedulingQueue(
            first.less,
            self.clock,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            pre_enqueue=self._pre_enqueue,
            events=events,
            arrival=queue_timestamp,
            hints=profile_hints(self.profiles),
        )
        self._next_start = 0
        self._binding_tasks: set[asyncio.Task[bool]] = set()
        self._pending_writes: list[tuple[Pod, str, str, bool]] = []  # pod, reason, message, with Event
        self._pending_nominations: dict[str, str] = {}  # pod key -> nominatedNodeName to write ("" clears)
        self._pending_preemptions: list[tuple[str, Callable[[ClusterAPI, Callable[[], str]], Awaitable[bool]]]] = []
        self._preemption_tasks: set[asyncio.Task[bool]] = set()
        self._gated_messages: dict[str, tuple[str, str, float, bool]] = {}  # reason, message, since, written
        self.gang = GangScheduler(self)
        self.attempts = Counter[str]()  # result -> count (scheduled / unschedulable / error)
        self._cycles = 0  # scheduling cycles run: every PLUGIN_METRICS_SAMPLE-th observes plugin durations
        self.coexistence = self._double_allocation_detector()
        cache.handlers.append(self._on_cache_event)

    def _double_allocation_detector(self) -> DoubleAllocationDetector:
        """Devices allocated to two claims (another scheduler beside us): scheduler/cache/coexistence.py."""
        det = DoubleAllocationDetector(self.api.event, self.metrics)
        det.seed(self.cache.claims().values())
        return det

    # --- queue feeding --------------------------------------------------------------------------------

    def responsible(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.profiles and not pod.node_name and not pod.terminated

    def _pre_enqueue(self, pod: Pod) -> Status:
        fw = self.profiles.get(pod.scheduler_name)
        if fw is None:
            return Status.unresolvable(f"no profile for scheduler {pod.scheduler_name}")
        st = fw.run_pre_enqueue(self.cache.view(), pod)
        if not st.is_success:
            self._gated_condition(pod, st)
        else:
            self._gated_messages.pop(pod.key, None)
        return st

    def _gated_condition(self, pod: Pod, st: Status) -> None:
        """Remember why PreEnqueue keeps ``pod`` out of the queue; ``write_gated_conditions`` reports it."""
        if st.plugin == "SchedulingGates":
            reason, message = "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"
        else:
            reason, message = "Unschedulable", st.message or f"waiting for {st.plugin or 'a PreEnqueue plugin'}"
        old = self._gated_messages.get(pod.key)
        if old is not None and old[:2] == (reason, message):
            return
        self._gated_messages[pod.key] = (reason, message, self.clock.now(), False)

    async def write_gated_conditions(self, min_age: float) -> None:
        """A pod kept out of the queue by PreEnqueue for at least ``min_age`` seconds says why in
        PodScheduled=False: ``SchedulingGated`` for scheduling gates (what the API server writes at creation,
        KEP-3521), ``Unschedulable`` with the plugin's message otherwise (e.g. a ResourceClaim that does not
        exist). Pods gated only for a moment (a template claim kube-controller-manager is creating) get no
        write. Once per change of message; no FailedScheduling Event (the pod was not attempted)."""
        now = self.clock.now()
        for key, (reason, message, since, written) in list(self._gated_messages.items()):
            if written or now - since < min_age:
                continue
            pod = self.cache.pod(key)
            self._gated_messages[key] = (reason, message, since, True)
            if pod is None or pod.node_name or self.queue.pool(key) != "gated":
                continue
            await self.write_failure(pod, reason, message, event=False)

    def _on_cache_event(self, kind: str, event: str, old: Any, new: Any) -> None:
        """Feed the queue: pending pods in and out, and every cluster event with its old and new objects, which
        the rejecting plugins' QueueingHints read to decide whether a waiting pod may now fit."""
        action = _ACTIONS.get(event, "Update")
        q = self.queue
        if kind == "Pod":
            nominated = isinstance(old, Pod) and bool(self.nominator.node_of(old) or status_nominated_node(old))
            self._track_nomination(old if isinstance(old, Pod) else None, new if isinstance(new, Pod) else None)
            if event == "DELETED":
                assert isinstance(old, Pod)
                self._forget_pod(old.uid)
                q.delete(old.key)
                self._gated_messages.pop(old.key, None)
                # an assigned pod frees what it held; a nominated one what was held for it (upstream: the deletion
                # of any pod is an event; the hints skip unassigned, unnominated ones, e.g. Fit's
                # isSchedulableAfterPodEvent)
                if old.node_name or nominated:
                    q.on_event("Pod", "Delete", old=old, new=None)
                return
            assert isinstance(new, Pod)
            if new.node_name:
                self._forget_pod(new.uid)
            if self.responsible(new) and not new.meta.deleting:
                if new.key in q:
                    q.update(new)
                else:
                    q.add(new)
            elif new.key in q:
                q.delete(new.key)
            prev = old if isinstance(old, Pod) else None
            assigned = _assigned_pod_action(prev, new)
            if assigned is not None:
                q.on_event("Pod", assigned, old=prev if assigned == "Update" else None, new=new)
            return
        if kind == "ResourceClaim":
            self.coexistence.observe(event, old, new)
            if event == "ADDED":
                claim = new
                assert isinstance(claim, ResourceClaim)
                owner = claim.meta.controller()
                if owner is not None and owner.kind == "Pod":
                    # a generated claim: the pod's status update (resourceClaimStatuses) and the claim arrive on
                    # different watches, in either order; a pod gated by "claim not found" waits for this one
                    q.on_event_for(f"{claim.namespace}/{owner.name}", kind, action)
                    return
                q.on_event(kind, action, lambda p: _refers_to(p, claim), old=None, new=claim)
            elif event == "DELETED" or (
                isinstance(old, ResourceClaim) and old.allocation is not None and new.allocation is None
            ):
                q.on_event(kind, "Update" if event != "DELETED" else "Delete", old=old, new=new)
            elif isinstance(old, ResourceClaim) and old.allocation is None and new.allocation is not None:
                # a shared claim another pod was allocating ("in the process of being allocated") is now
                # allocated: the pods that use it can be placed on its node. A claim generated for one pod
                # (controller = that pod) is not shared: nobody else waits for it.
                claim = new
                owner = claim.meta.controller()
                if owner is None or owner.kind != "Pod":
                    q.on_event(kind, "Update", lambda p: _refers_to(p, claim), old=old, new=new)
            return
        q.on_event(kind, action, old=old, new=new)

    def _forget_pod(self, uid: str) -> None:
        """A pod bound or deleted lends its Filter statuses no more names (Framework.owners)."""
        for fw in self.profiles.values():
            if fw.owners:
                fw.forget_pod(uid)

    def _track_nomination(self, old: Pod | None, new: Pod | None) -> None:
        """Keep the nominator in step with the pods (upstream: the queue's Add/Update/Delete): only pending pods
        this scheduler is responsible for are nominated; an update keeps an in-memory nomination the watch has
        not echoed yet."""
        nom = self.nominator
        if new is None or new.node_name or new.terminated or new.meta.deleting or not self.responsible(new):
            if old is not None:
                nom.delete(old)
            if new is not None:
                nom.delete(new)
            return
        if old is not None and old.uid == new.uid:
            nom.update(old, new)
        else:
            if old is not None:
                nom.delete(old)
            nom.add(new)

    # --- the scheduling cycle -----------------------------------------------------------------------

    def schedule_one(self, info: QueuedPodInfo) -> Outcome | tuple[Outcome, CycleState, Framework]:
        """Run one scheduling cycle. Returns the outcome, plus what the binding cycle needs on success."""
        pod = self.cache.pod(info.pod.key)
        if pod is None or pod.uid != info.pod.uid or not self.responsible(pod) or pod.meta.deleting:
            self.queue.done(info.pod.key)
            return Outcome(info.pod.key)
        fw = self.profiles[pod.scheduler_name]
        cycle = self.queue.scheduling_cycle
        snapshot = self.cache.snapshot()
        state = CycleState(snapshot)
        # upstream: state.SetRecordPluginMetrics(rand.Intn(100) < pluginMetricsSamplePercent) with 10 percent
        # (pkg/scheduler/schedule_one.go); here every 10th cycle, the first included (deterministic runs)
        state.record_plugin_metrics = self._cycles % PLUGIN_METRICS_SAMPLE == 0
        self._cycles += 1
        node, status, rejectors = self._find_node(fw, state, pod)
        if node is not None:
            self.cache.assume_pod(pod, node)
            self.nominator.delete(pod)  # upstream assume(): DeleteNominatedPodIfExists
            st = fw.run_reserve(state, pod, node)
            if st.is_success:
                st, _ = fw.run_permit(state, pod, node)
                if st.code == Code.WAIT:
                    st = Status.error("waiting in Permit is not supported by this scheduler yet")
                if not st.is_success:
                    fw.run_unreserve(state, pod, node)
            if not st.is_success:
                self.cache.forget_pod(pod)
                status, rejectors, node = st, {st.plugin} if st.plugin else set(), None
        self._count_attempt(status)
        if node is None:
            assert status is not None
            nominated = self._nominating(state)
            self.fail(info, pod, status, rejectors, cycle, nominated=nominated)
            ran: tuple[PostFilterResult | None] | None = state.read(POST_FILTER_RESULT)
            result = ran[0] if ran is not None else None
            if result is not None and result.actuate is not None:
                self._pending_preemptions.append((pod.key, result.actuate))
            return Outcome(pod.key, "", status)
        return Outcome(pod.key, node, None), state, fw

    def _find_node(self, fw: Framework, state: CycleState, pod: Pod) -> tuple[str | None, Status | None, set[str]]:
        snap = state.snapshot
        if not snap.node_map:
            return None, Status.unschedulable("0/0 nodes are available: no nodes registered."), set()
        pre, st = fw.run_pre_filter(state, pod)
        if not st.is_success:
            if st.code == Code.UNSCHEDULABLE and fw.post_filter:
                # upstream: every node gets the PreFilter status, and PostFilter (preemption) still runs
                post = self._post_filter(fw, state, pod, {n.name: st for n in snap.nodes})
                if post:
                    msg = f"0/{len(snap.nodes)} nodes are available: {st.message}. {post}"
                    return None, Status(st.code, (msg,), st.plugin), {st.plugin} if st.plugin else set()
            return None, st, {st.plugin} if st.plugin else set()
        sig = fw.signature(state, pod)
        nominated = fw.nominated_node_of(pod)
        if nominated:
            # upstream evaluateNominatedNode: the node preemption made room on is tried first, and taken if it fits
            info = snap.node_map.get(nominated)
            allowed = pre is None or pre.node_names is None or nominated in pre.node_names
            if info is not None and allowed and fw.filter_node(state, pod, info, sig).is_success:
                return nominated, None, set()
        # reuse between equal pods (scheduler/framework/batch.py): the same outcome, without a per-node loop
        batched = None if pre is not None and pre.node_names is not None else fw.find_batched(
            state, pod, sig, self._next_start, lambda n: num_feasible_nodes_to_find(self._percentage(fw), n)
        )
        feasible: list[NodeInfo]
        statuses: dict[str, Status] | Status
        if batched is not None:
            self._next_start, found = batched
            if isinstance(found, tuple):
                return found
            feasible, statuses = [], found
        else:
            nodes: Sequence[NodeInfo] = snap.nodes
            if pre is not None and pre.node_names is not None:
                nodes = [n for n in nodes if n.name in pre.node_names]
            feasible, statuses = self._filter(fw, state, pod, nodes, sig)
        if isinstance(statuses, Status):  # an Error status aborted the cycle
            return None, statuses, {statuses.plugin}
        if not feasible:
            statuses = fw.own_rejections(state, pod, statuses, snap.node_map)
            post = self._post_filter(fw, state, pod, statuses)
            msg = fit_error(len(snap.nodes), statuses)
            if post:
                msg = f"{msg} {post}"
            code = (
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                if statuses and all(s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in statuses.values())
                else Code.UNSCHEDULABLE
            )
            return None, Status(code, (msg,)), {s.plugin for s in statuses.values() if s.plugin}
        if len(feasible) == 1:
            return feasible[0].name, None, set()
        st = fw.run_pre_score(state, pod, feasible)
        if not st.is_success:
            return None, st, {st.plugin}
        scores = fw.run_score(state, pod, feasible, sig)
        best = max(range(len(scores)), key=lambda i: scores[i].score)  # first best in node order
        return scores[best].name, None, set()

    def _filter(
        self, fw: Framework, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], sig: Hashable | None
    ) -> tuple[list[NodeInfo], dict[str, Status] | Status]:
        start = time.perf_counter()
        n = len(nodes)
        if n == 0:
            return [], {}
        want = num_feasible_nodes_to_find(self._percentage(fw), n)
        feasible: list[NodeInfo] = []
        statuses: dict[str, Status] = {}
        offset = self._next_start % n
        checked = 0
        for i in range(n):
            node = nodes[(offset + i) % n]
            checked += 1
            st = fw.filter_node(state, pod, node, sig)
            if st.is_success:
                feasible.append(node)
                if len(feasible) >= want:
                    break
            elif st.code == Code.ERROR:
                fw.metrics.observe_extension_point("Filter", Code.ERROR, time.perf_counter() - start)
                return [], st
            else:
                statuses[node.name] = st
        self._next_start = (offset + checked) % n
        fw.metrics.observe_extension_point("Filter", Code.SUCCESS, time.perf_counter() - start)
        return feasible, statuses

    def _percentage(self, fw: Framework) -> int:
        """percentageOfNodesToScore: the profile's, else the configuration's (0: adaptive)."""
        percentage = fw.profile.percentage_of_nodes_to_score
        return self.config.percentage_of_nodes_to_score if percentage is None else percentage

    def _count_attempt(self, status: Status | None) -> None:
        result = "scheduled" if status is None else ("error" if status.code == Code.ERROR else "unschedulable")
        self.attempts[result] += 1

    # --- failures -----------------------------------------------------------------------------------

    def _post_filter(self, fw: Framework, state: CycleState, pod: Pod, statuses: Mapping[str, Status]) -> str:
        """Run PostFilter (preemption) for a pod no node fits; keep its result on the state for ``schedule_one``
        and return its message for the FitError ("" when there is none)."""
        if not fw.post_filter:
            return ""
        result, st = fw.run_post_filter(state, pod, statuses)
        state.write(POST_FILTER_RESULT, (result,))
        if st.code == Code.ERROR:
            log.warning("PostFilter failed", pod=pod.key, error=st.message, plugin=st.plugin)
        return st.message

    def _nominating(self, state: CycleState) -> str | None:
        """The ``nominatedNodeName`` a failed cycle leaves (upstream ``ScheduleResult.nominatingInfo``): when
        PostFilter ran, its result's node if it overrides, else None (unchanged); "" (cleared) when it did not
        run (upstream ``clearNominatedNode``: errors, no PostFilter plugins, failed Reserve or Permit, and a
        PreFilter rejection, for which upstream's preemption finds no candidate and clears)."""
        ran: tuple[PostFilterResult | None] | None = state.read(POST_FILTER_RESULT)
        if ran is None:
            return ""
        result = ran[0]
        return result.nominated_node_name if result is not None and result.mode == OVERRIDE else None

    def fail(
        self,
        info: QueuedPodInfo,
        pod: Pod,
        status: Status,
        rejectors: set[str],
        cycle: int,
        nominated: str | None = None,
    ) -> None:
        """``handleSchedulingFailure``: requeue, record the nomination (``nominated``: the node, "" to clear,
        None for the pod's own ``status.nominatedNodeName``) and queue the status write."""
        current = self.cache.pod(pod.key)
        if current is not None and current.uid == pod.uid and not current.node_name:
            if nominated is None:
                self.nominator.add(current, None, NOOP)
            else:
                self.nominator.add(current, nominated, OVERRIDE)
                self._pending_nominations[pod.key] = nominated
        reason = "SchedulerError" if status.code == Code.ERROR else "Unschedulable"
        message = status.message or "pod could not be scheduled"
        log.info("pod not scheduled", pod=pod.key, reason=reason, message=message, attempts=info.attempts)
        if status.code == Code.ERROR:
            self.queue.add_backoff(info)
        else:
            self.queue.add_unschedulable(info, rejectors, cycle)
        self.queue.done(pod.key)
        self._pending_writes.append((pod, reason, message, True))

    async def write_failure(
        self, pod: Pod, reason: str, message: str, event: bool = True, nominated: str | None = None
    ) -> None:
        """PodScheduled=False with ``reason`` and ``message``, and ``status.nominatedNodeName`` when ``nominated``
        is not None ("" clears it), in one status patch, only what changed (upstream ``updatePod``)."""
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        conds = [c for c in ((pod.raw.get("status") or {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
        old = [c for c in ((pod.raw.get("status") or {}).get("conditions") or []) if c.get("type") == "PodScheduled"]
        patch: dict[str, Any] = {}
        if nominated is not None and status_nominated_node(pod) != nominated:
            patch["nominatedNodeName"] = nominated or None
        if not (old and all(old[0].get(k) == v for k, v in cond.items())):
            cond["lastTransitionTime"] = self.wallclock()
            if old and old[0].get("status") == "False" and old[0].get("lastTransitionTime"):
                cond["lastTransitionTime"] = old[0]["lastTransitionTime"]  # status did not transition
            patch["conditions"] = [*conds, cond]
        if patch:
            try:
                await self.api.patch(
                    "Pod",
                    pod.namespace,
                    pod.name,
                    {"metadata": {"uid": pod.uid}, "status": patch},
                    subresource="status",
                )
            except ApiError as e:
                log.warning("could not update pod condition", pod=pod.key, error=str(e))
        if event:
            await self.api.event(dict(pod.raw), "Warning", "FailedScheduling", message, "Scheduling")

    # --- the binding cycle -------------------------------------------------------------------------------

    async def bind(self, info: QueuedPodInfo, pod: Pod, node: str, state: CycleState, fw: Framework) -> bool:
        st = await fw.run_pre_bind(state, pod, node, self.api)
        if st.is_success:
            st = await fw.run_bind(state, pod, node, self.api)
        if st.is_success:
            self.queue.done(pod.key)
            explained = fw.binding_note(state, node)  # BindingNote plugins (GpuTopology)
            note = f": {explained}" if explained else ""
            await self.api.event(
                dict(pod.raw), "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}{note}", "Binding"
            )
            log.info("pod bound", pod=pod.key, node=node)
            return True
        log.warning("binding failed", pod=pod.key, node=node, error=st.message, plugin=st.plugin)
        await fw.run_rollback(state, pod, node, self.api)
        fw.run_unreserve(state, pod, node)
        self.cache.forget_pod(pod)
        self.attempts["error"] += 1
        self.attempts["scheduled"] -= 1
        self.queue.add_backoff(info)
        self.queue.done(pod.key)
        try:
            current = await self.api.get("Pod", pod.namespace, pod.name)
        except NotFound:
            return False
        if (current.get("spec") or {}).get("nodeName"):
            return False
        await self.write_failure(pod, "SchedulerError", f"binding to {node} failed: {st.message}")
        return False

    async def flush_writes(self) -> None:
        """Write the PodScheduled=False conditions and FailedScheduling events queued by ``fail``."""
        writes, self._pending_writes = self._pending_writes, []
        for pod, reason, message, event in writes:
            nominated = self._pending_nominations.pop(pod.key, None)
            await self.write_failure(self._fresh(pod), reason, message, event=event, nominated=nominated)

    def _fresh(self, pod: Pod) -> Pod:
        """The cache's current version of ``pod`` (same UID), for status patches computed from it."""
        cur = self.cache.pod(pod.key)
        return cur if cur is not None and cur.uid == pod.uid else pod

    async def run_preemptions(self) -> None:
        """Start the API work of the preemptions decided in the cycles just run (after the preemptors' status
        writes, ARCHITECTURE §4): inline with ``inline_binding`` (simulate), else as tasks (upstream async
        preemption). A failed one sends its preemptor back to the queue at once (upstream ``Activate``)."""
        work, self._pending_preemptions = self._pending_preemptions, []
        for key, actuate in work:
            if self.inline_binding:
                await self._actuate(key, actuate)
            else:
                task = asyncio.create_task(self._actuate(key, actuate))
                self._preemption_tasks.add(task)
                task.add_done_callback(self._preemption_tasks.discard)

    async def _actuate(self, key: str, actuate: Callable[[ClusterAPI, Callable[[], str]], Awaitable[bool]]) -> bool:
        try:
            ok = await actuate(self.api, self.wallclock)
        except Exception as e:  # the preemptor must not be stuck waiting for a preemption that died
            log.exception("preemption failed", pod=key, error=repr(e))
            ok = False
        if not ok:
            self.queue.on_event_for(key, "Pod", "Delete")
        return ok

    async def run_once(self, info: QueuedPodInfo) -> Outcome:
        """One pod: scheduling cycle, then its binding cycle (awaited inline or as a task).
        A member of a PodGroup that has not reached minMember bound pods goes through the gang cycle."""
        if info.pod.pod_group and await self.gang.run(info):
            return Outcome(info.pod.key, group_results=dict(self.gang.last_results))
        res = self.schedule_one(info)
        await self.flush_writes()
        if self._pending_preemptions:
            await self.run_preemptions()
        if isinstance(res, Outcome):
            return res
        outcome, state, fw = res
        pod = self.cache.pod(info.pod.key) or info.pod
        if self.inline_binding:
            ok = await self.bind(info, pod, outcome.node, state, fw)
            if not ok:
                outcome.node = ""
            return outcome
        # the live client's rate limiter serves older pods' writes first (scheduler/api/clusterapi.py)
        with pod_writes():
            task = asyncio.create_task(self.bind(info, pod, outcome.node, state, fw))
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)
        return outcome

    async def wait_bindings(self) -> None:
        while self._binding_tasks or self._preemption_tasks:
            await asyncio.gather(*list(self._binding_tasks), *list(self._preemption_tasks), return_exceptions=True)

    def reconfigure(self, config: SchedulerConfig, registry: Mapping[str, PluginSpec] | None = None) -> None:
        """Apply a new configuration without a restart: rebuild the framework of every profile (plugins,
        args, weights, profiles added or removed); the queue, the cache and the device ledger are kept.

        All frameworks are built before any is swapped in, so a failure (FrameworkError, a plugin factory
        rejecting its args) raises and leaves the running configuration untouched. Binding cycles already
        under way finish with the framework they started with. Pending pods of a new profile are queued,
        and pods parked as unschedulable get another attempt under the new configuration."""
        reg = registry if registry is not None else default_registry()
        for_profile = getattr(self.metrics, "for_profile", None)
        profiles: dict[str, Framework] = {}
        for p in config.profiles:
            metrics = for_profile(p.scheduler_name) if callable(for_profile) else self.metrics
            profiles[p.scheduler_name] = Framework(p, reg, metrics, self.nominator)
        if not profiles:
            raise ValueError("a configuration needs at least one profile")
        q = self.queue
        # The queue's per-plugin event registrations: keep the old ones (pods rejected under the old
        # configuration still carry those plugin names) and add the new plugins'.
        old_events: Mapping[str, frozenset[tuple[str, str]]] | None = getattr(q, "_events", None)
        events: dict[str, frozenset[tuple[str, str]]] | None = None
        if old_events is not None:
            merged: dict[str, set[tuple[str, str]]] = {k: set(v) for k, v in old_events.items()}
            for fw in profiles.values():
                for name, evs in fw.events_to_register().items():
                    merged.setdefault(name, set()).update(evs)
            events = {k: frozenset(v) for k, v in merged.items()}
        self.profiles = profiles
        self.config = config
        if hasattr(q, "_initial_backoff") and hasattr(q, "_max_backoff"):
            q._initial_backoff = config.pod_initial_backoff_seconds
            q._max_backoff = config.pod_max_backoff_seconds
        if hasattr(q, "_events"):
            # every unschedulable or gated pod is interested in "the configuration changed"
            q._events = None
            q.on_event("SchedulerConfiguration", "Update")
            q._events = events
        if isinstance(q, SchedulingQueue):
            q.set_hints(profile_hints(profiles))
        for pod in self.cache.pods().values():
            if self.responsible(pod) and not pod.meta.deleting and pod.key not in q:
                q.add(pod)
        log.info(
            "configuration applied",
            profiles=[p.scheduler_name for p in config.profiles],
            plugins={p.scheduler_name: sorted({r.name for refs in p.plugins.values() for r in refs})
                     for p in config.profiles},
        )


def _assigned_pod_action(old: Pod | None, new: Pod) -> str | None:
    """The queue event of an added/updated pod that is assigned to a node (upstream AssignedPodAdd /
    AssignedPodUpdate with UpdatePodLabel, e.g. for InterPodAffinity and PodTopologySpread, or
    UpdatePodScaleDown, for NodeResourcesFit): "Add" when the pod is newly assigned (created bound, or its
    binding arrived), "Update" when an assigned pod's labels changed or one of its requests went down (an
    in-place resize), else None."""
    if not new.node_name or new.terminated:
        return None
    if old is None or not old.node_name:
        return "Add"
    if old.meta.labels != new.meta.labels:
        return "Update"
    if old.requests != new.requests and any(new.requests.get(r, 0) < q for r, q in old.requests.items()):
        return "Update"
    return None


def profile_hints(profiles: Mapping[str, Framework]) -> dict[str, dict[tuple[str, str], QueueingHintFn]]:
    """The queue's QueueingHints (plugin -> event -> hint) over every profile: a plugin enabled in several
    profiles answers through the instance of the waiting pod's profile (upstream keeps a hint map per profile),
    or the first profile's when the pod's profile has no such plugin (a pod rejected under an older configuration)."""
    per: dict[str, dict[tuple[str, str], dict[str, QueueingHintFn]]] = {}
    for name, fw in profiles.items():
        for plugin, hints in fw.queueing_hints().items():
            for ev, fn in hints.items():
                per.setdefault(plugin, {}).setdefault(ev, {})[name] = fn
    out: dict[str, dict[tuple[str, str], QueueingHintFn]] = {}
    for plugin, evs in per.items():
        for ev, by_profile in evs.items():
            out.setdefault(plugin, {})[ev] = _dispatch(by_profile)
    return out


def _dispatch(by_profile: dict[str, QueueingHintFn]) -> QueueingHintFn:
    first = next(iter(by_profile.values()))
    if len(by_profile) == 1:
        return first

    def hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return by_profile.get(pod.scheduler_name, first)(pod, old, new)

    return hint


def _refers_to(pod: Pod, claim: ResourceClaim) -> bool:
    if pod.namespace != claim.namespace:
        return False
    names = {c.claim_name for c in pod.claims} | set(pod.claim_statuses.values())
    return claim.name in names

