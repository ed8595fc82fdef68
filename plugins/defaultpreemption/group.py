"""Workload-aware preemption (issue #10 item 3): pod groups as victims and as preemptors.

kubernetes v1.37.2 ``pkg/scheduler/framework/preemption/podgrouppreemption.go`` (``PodGroupEvaluator.Preempt``,
``selectVictimsOnDomain``, ``preemptorEligibleToPreemptOthers``, ``isOngoingPreemption``), ``types.go``
(``newPodGroupPreemptor``, ``resolvePreemptionPolicy``, ``getHighestAllAncestor``, ``getCrossNodesVictims``,
``searchCrossNodesVictimPods``, ``NewPodVictim``), ``util.go`` (``GetPodPriority``, ``MoreImportantVictim``,
``FilterVictimsWithPDBViolation``), ``executor.go`` (``actuatePodGroupPreemption``, ``podGroupExecutorPreemptor``),
``pkg/scheduler/util/utils.go`` (``PodGroupPriority``) and ``plugins/defaultpreemption/default_preemption.go``
(``PodGroupPostFilter``, ``GetVictimsOnNode``), written from their behaviour.

**Victims** (:class:`VictimIndex`, for every preemptor, single pods included):

* a pod outside any ``scheduling.k8s.io`` PodGroup is its own victim with its own priority (a
  ``scheduling.x-k8s.io`` PodGroup has no disruption mode: its members are evicted one by one, as
  scheduler-plugins' coscheduling leaves them; ARCHITECTURE §3.3 allows members deleted after binding);
* a pod of a v1beta1 PodGroup (``spec.schedulingGroup``) has the priority of the root of its group hierarchy
  (``GetPodPriority``: ``spec.priority``, else what the Priority admission plugin would set from
  ``spec.priorityClassName`` or the ``globalDefault`` PriorityClass, else 0 — upstream's ``PodGroupPriority``) and
  the victim type PodGroup
  (``NewPodVictim``: ranked above single pods of equal priority; with its own priority when the PodGroup does
  not exist);
* when that PodGroup or a CompositePodGroup above it has ``spec.disruptionMode.all`` (k8s.io/api v0.37.2
  ``scheduling/v1beta1`` ``DisruptionMode{Single,All}``), the highest such ancestor's scheduled pods (bound or
  assumed, on any node) form **one** victim: evicting one member evicts them all, and the whole group's pods
  count in every cost (``pickOneNodeForPreemption``'s number of victims and sum of priorities, PDB violations);
  the dry run of a single-pod preemptor on a node removes the members on other nodes through the PreFilter
  extensions only (``SelectVictimsOnNode``'s "remote" nodes: :func:`remote_nodes`).

**A pod group as preemptor** (:func:`preempt_group`, through DefaultPreemption's ``pod_group_post_filter``: the
engine's PodGroupPostFilter point, :class:`scheduler.framework.interface.PodGroupPostFilterPlugin`, which the gang
cycle runs when a group does not fit):

1. eligibility: ``preemptionPolicy: Never`` on the PodGroup (``spec.preemptionPolicy``) or, when unset, on any
   pending member: "not eligible due to preemptionPolicy=Never.";
2. ongoing preemption: a member is nominated to a node where a lower-priority pod is terminating because of
   preemption: nothing more is evicted, the nominations stay ("ongoing preemption on nominated nodes");
3. the domain is the whole cluster: every victim of lower priority than the group (for a v1beta1 group its
   priority as above; for an x-k8s group the lowest priority of its pending members), the group's own pods
   excluded; none: "No preemption victims found for incoming preemptor" (UnschedulableAndUnresolvable);
4. the dry run is a private copy of the scheduler cache (:class:`Fork`): victims' pods are taken off their nodes
   and the devices of their claims are freed when no surviving pod reserves the claim — the rule of
   DynamicResources' ``remove_pod`` ledger view (a shared claim stays allocated while another consumer lives);
   the copy's device ledger uses revision numbers of its own so no cache ever serves a copy's result for the
   real cluster. On it the gang cycle's **own placement search** runs (:class:`Oracle`, the engine's
   :class:`~scheduler.framework.interface.PodGroupScheduling`: devices, classes,
   ``minMember`` / ``minCount``, ``schedulingConstraints.topology`` domains, GpuTopology) — upstream's
   ``podGroupSchedulingFunc``. With every potential victim removed and no placement: nothing is evicted;
5. upstream then reprieves victims against that one placement, which holds as many members as fit (beyond
   ``minCount``). Here, first, the placement is searched with only the **least important** victims removed: the
   shortest prefix of the victims in reverse reprieve order (non-PDB-violating ones first, least important
   first) with which the search places as many members as with all of them removed, found by bisection (room
   grows with the prefix for resources and devices; where it does not, e.g. pod affinity to a victim, the prefix
   found is still one the search placed the group with). This goes beyond upstream, whose placement on the
   all-removed cluster may land on higher-priority victims when cheaper ones would do;
6. reprieve (``selectVictimsOnDomain``): the victims of that prefix, PDB-violating first, each most important
   first, are added back one by one and kept when the placement still holds (each member re-placed on its node
   in order: PreFilter, Filter with the nominated pods, Reserve — the pinned check). A victim that cannot
   interact with the placement (no pod on its nodes, its devices in pools local to its own nodes, no volumes,
   no required anti-affinity, and members without pod (anti-)affinity or spread constraints) is kept without
   a check;
7. **never pointless**: on a fresh copy with exactly the chosen victims removed, the full group search must
   place the group (what the retry after the evictions will run); otherwise nobody is evicted. Its placement
   gives each placed member its ``nominatedNodeName`` (upstream: per pod, ``NominatingInfos``; the others are
   cleared);
8. execution (:func:`prepare_actuation`, ``actuatePodGroupPreemption``): after the members' status writes,
   every victim not already terminating gets ``DisruptionTarget=True`` (reason PreemptionByScheduler, message
   "<scheduler>: preempting to accommodate a higher priority podgroup") and is deleted with its grace period,
   the Event says "Preempted by podgroup <PodGroup uid> on node cluster"; the members wait in PreEnqueue until
   the last victim is being deleted. A v1beta1 victim group gets its ``DisruptionTarget`` condition from the
   gang cycle (``scheduler/gang/cycle.py`` ``_on_cache_event``: disruptionMode All, or fewer than ``minCount`` left).
   ``simulate`` releases the victims' claims as kube-controller-manager would
   (``scheduler/simulate/claimcontroller.py``).

Messages are prefixed "pod group preemption: " (``PodGroupPostFilter``); success: "found a placement for podgroup,
preempting N victims". Not done: a CompositePodGroup tree as preemptor (its groups are searched together;
upstream's composite preemptor is alpha), PodGroup preemptors' topology tie-break.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from plugins.defaultpreemption.core import (
    COMPOSITE_POD_GROUP,
    POD_GROUP,
    Eligible,
    Victim,
    filter_victims_with_pdb_violation,
    sort_by_importance,
    terminating_by_preemption,
)
from plugins.defaultpreemption.executor import Executor, preempt_pod
from plugins.dra.state import _claims_of
from scheduler.api.clusterapi import ApiError
from scheduler.api.dra import ResourceClaim
from scheduler.api.model import Pod, PodGroup
from scheduler.api.workload_api import CompositePodGroup, leaves_of, scheduling_group
from scheduler.api.workloads import PodDisruptionBudget
from scheduler.cache.cache import Cache, NodeInfo, Snapshot
from scheduler.cache.ledger import DeviceLedger, Use
from scheduler.framework.interface import (
    Actuation,
    Code,
    PodGroupAssignments,
    PodGroupPostFilterResult,
    PodGroupScheduling,
    Status,
)

if TYPE_CHECKING:
    from scheduler.api.clusterapi import ClusterAPI

log = structlog.get_logger("dra_scheduler.preemption")

PREFIX = "pod group preemption: "
PODGROUP = "podgroup"  # upstream fwk.PodGroupKeyType: the preemptor type in messages and Events
CLUSTER = "cluster"  # the candidate's name for a pod group preemption (the domain is the whole cluster)
NEVER = "Never"
NO_VICTIMS = "No preemption victims found for incoming preemptor"
MAX_DEPTH = 4  # WorkloadMaxTreeDepth
# The built-in PriorityClasses (pkg/apis/scheduling/types.go SystemPriorityClasses), as simulate admits them.
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


# --- priorities -----------------------------------------------------------------------------------------------


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def admitted_priority(spec: Mapping[str, Any], classes: Mapping[str, Any]) -> int:
    """A PodGroup's / CompositePodGroup's priority: ``spec.priority``, else what the Priority admission plugin
    sets from ``spec.priorityClassName`` (or the ``globalDefault`` PriorityClass with the smallest value), else 0
    (upstream ``PodGroupPriority``: a nil priority is the static default 0)."""
    p = _int(spec.get("priority"))
    if p is not None:
        return p
    name = spec.get("priorityClassName")
    if isinstance(name, str) and name:
        if name in SYSTEM_PRIORITY_CLASSES:
            return SYSTEM_PRIORITY_CLASSES[name]
        pc = classes.get(name)
        v = _int(pc.get("value")) if isinstance(pc, Mapping) else None
        return v if v is not None else 0
    defaults = [
        v
        for pc in classes.values()
        if isinstance(pc, Mapping) and pc.get("globalDefault") and (v := _int(pc.get("value"))) is not None
    ]
    return min(defaults) if defaults else 0


def _spec(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    s = raw.get("spec")
    return s if isinstance(s, Mapping) else {}


def podgroup_priority(snap: Snapshot, pg: PodGroup) -> int:
    """``GetPodPriority`` for the members of a v1beta1 PodGroup: the priority of the root of its hierarchy (its
    topmost CompositePodGroup found, else the PodGroup itself)."""
    composites: Mapping[str, CompositePodGroup] = snap.objects_of("CompositePodGroup")
    classes = snap.objects_of("PriorityClass")
    top: PodGroup | CompositePodGroup = pg
    name, seen = pg.parent, 0
    while name and seen < MAX_DEPTH:
        cpg = composites.get(f"{pg.meta.namespace}/{name}")
        if cpg is None:
            break
        top, name, seen = cpg, cpg.parent, seen + 1
    return admitted_priority(_spec(top.raw), classes)


def preemption_never(pg: PodGroup, members: Sequence[Pod]) -> bool:
    """``resolvePreemptionPolicy``: the PodGroup's ``spec.preemptionPolicy`` when set (gate PodGroupPreemptionPolicy),
    else Never when any member says Never."""
    policy = _spec(pg.raw).get("preemptionPolicy")
    if isinstance(policy, str) and policy:
        return policy == NEVER
    for m in members:
        p = _spec(m.raw).get("preemptionPolicy")
        if p == NEVER:
            return True
    return False


# --- victims ----------------------------------------------------------------------------------------------------


class VictimIndex:
    """The preemption units of one snapshot: which pods are evicted together and with which priority."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.node_of: dict[str, NodeInfo] = {}  # pod key -> the NodeInfo it is on (bound or assumed)
        self._scheduled: dict[tuple[str, str], list[Pod]] | None = None
        self._units: dict[str, Victim] = {}  # pod key or group key -> its victim
        self._composites: Mapping[str, CompositePodGroup] = snap.objects_of("CompositePodGroup")
        for info in snap.nodes:
            for p in info.pod_list:
                self.node_of[p.key] = info

    def scheduled(self, namespace: str, group: str) -> list[Pod]:
        """The pods of a PodGroup that are on nodes (upstream ``PodGroupState.ScheduledPods``), by key."""
        if self._scheduled is None:
            idx: dict[tuple[str, str], list[Pod]] = {}
            for info in self.snap.nodes:
                for p in info.pod_list:
                    if p.pod_group:
                        idx.setdefault((p.namespace, p.pod_group), []).append(p)
            self._scheduled = {k: sorted(v, key=lambda p: p.key) for k, v in idx.items()}
        return self._scheduled.get((namespace, group), [])

    def podgroup(self, pod: Pod) -> PodGroup | None:
        if not pod.pod_group:
            return None
        pg = self.snap.podgroups.get(f"{pod.namespace}/{pod.pod_group}")
        return pg if pg is not None and pg.is_upstream else None

    def _all_ancestor(self, pg: PodGroup) -> PodGroup | CompositePodGroup | None:
        """``getHighestAllAncestor``: the highest group of the hierarchy with ``disruptionMode: all``."""
        found: PodGroup | CompositePodGroup | None = pg if pg.disruption_all else None
        name, seen = pg.parent, 0
        while name and seen < MAX_DEPTH:
            cpg = self._composites.get(f"{pg.meta.namespace}/{name}")
            if cpg is None:
                break
            if cpg.disruption_all:
                found = cpg
            name, seen = cpg.parent, seen + 1
        return found

    def unit(self, pod: Pod) -> Victim:
        """The victim ``pod`` belongs to (the same object for every pod of a disruptionMode-all group)."""
        v = self._units.get(pod.key)
        if v is not None:
            return v
        pg = self.podgroup(pod)
        if pg is None:
            # NewPodVictim: a pod with spec.schedulingGroup is of type PodGroup even when the group is not found
            # (then with its own priority)
            v = Victim((pod,), pod.priority, POD_GROUP) if scheduling_group(pod) else Victim.of(pod)
        else:
            prio = podgroup_priority(self.snap, pg)
            top = self._all_ancestor(pg)
            if top is None:
                v = Victim((pod,), prio, POD_GROUP)
            else:
                gkey = f"{'CompositePodGroup' if isinstance(top, CompositePodGroup) else 'PodGroup'}/{top.meta.key}"
                v = self._units.get(gkey)
                if v is None:
                    leaves = (
                        leaves_of(top, self.snap.podgroups, self._composites)
                        if isinstance(top, CompositePodGroup)
                        else [top]
                    )
                    pods = [p for lf in leaves for p in self.scheduled(lf.meta.namespace, lf.meta.name)]
                    if not any(p.key == pod.key for p in pods):
                        pods.append(pod)
                    kind = COMPOSITE_POD_GROUP if isinstance(top, CompositePodGroup) else POD_GROUP
                    v = Victim(tuple(pods), prio, kind)
                    self._units[gkey] = v
                    for p in pods:
                        self._units[p.key] = v
        self._units[pod.key] = v
        return v

    def on_node(self, node: NodeInfo) -> list[Victim]:
        """``GetVictimsOnNode`` with GenericWorkload: each victim once, in the node's pod order."""
        out: list[Victim] = []
        seen: set[int] = set()
        for p in node.pod_list:
            v = self.unit(p)
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return out

    def cluster(self) -> list[Victim]:
        """``getCrossNodesVictims`` over every node: each victim once."""
        out: list[Victim] = []
        seen: set[int] = set()
        for info in self.snap.nodes:
            for p in info.pod_list:
                v = self.unit(p)
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        return out

    def node_name(self, pod: Pod) -> str:
        info = self.node_of.get(pod.key)
        return info.name if info is not None else pod.node_name


_last_index: list[VictimIndex] = []


def victim_index(snap: Snapshot) -> VictimIndex:
    """The index of ``snap`` (kept for the last snapshot: one preemption evaluates many nodes of one snapshot)."""
    if _last_index and _last_index[0].snap is snap:
        return _last_index[0]
    idx = VictimIndex(snap)
    _last_index[:] = [idx]
    return idx


def victims_on_node(snap: Snapshot, node: NodeInfo) -> list[Victim]:
    """For :meth:`DefaultPreemption.victims_on_node`: the node's victims, a disruptionMode-all group as one."""
    return victim_index(snap).on_node(node)


def remote_nodes(snap: Snapshot) -> Callable[[Pod], NodeInfo | None]:
    """For ``select_victims_on_node(remote=...)``: the NodeInfo of a victim's pod on another node."""
    idx = victim_index(snap)
    return lambda p: idx.node_of.get(p.key)


# --- the dry run: a private copy of the cache ------------------------------------------------------------------

_fork_ids = itertools.count(1)


class ForkLedger(DeviceLedger):
    """A writable copy of a device ledger for dry runs. Its revisions (global, per pool, per node) start at a
    number of its own, negative and far from any other copy's, so caches keyed by revision (DynamicResources'
    per-node results, the allocator's counters, the framework's reuse memo) never mix the copy's state with the
    cluster's. :meth:`hide` / :meth:`show` take a claim's devices out of use and back."""

    def __init__(self, base: DeviceLedger) -> None:
        super().__init__()
        self._floor = -(next(_fork_ids) << 40)
        self._pool_node = dict(base._pool_node)
        self._api = dict(base._api)
        self._assumed = set(base._assumed)
        self._pending = dict(base._pending)
        for uid in {*self._api, *self._pending}:
            self._reindex(None, self._pending.get(uid) or self._api.get(uid))
        floor = self._floor
        self._pool_rev = dict.fromkeys(self._pool_rev, floor)
        self._node_rev = dict.fromkeys(self._node_rev, floor)
        self.revision = self.shared_revision = floor
        self.hidden: dict[str, tuple[Use | None, Use | None]] = {}  # claim uid -> (api use, pending use)

    def node_revision(self, node: str) -> int:
        return self._node_rev.get(node, self._floor)

    def pool_revision(self, pool: tuple[str, str]) -> int:
        return self._pool_rev.get(pool, self._floor)

    def _reindex(self, old: Use | None, new: Use | None) -> None:
        for use in (old, new):
            for r in use.results if use is not None else ():
                pool = (r.driver, r.pool)
                self._pool_rev.setdefault(pool, self._floor)
                node = self._pool_node.get(pool, "")
                if node:
                    self._node_rev.setdefault(node, self._floor)
        super()._reindex(old, new)

    def hide(self, uid: str) -> None:
        if uid in self.hidden:
            return
        old = self.use_of(uid)
        self.hidden[uid] = (self._api.pop(uid, None), self._pending.pop(uid, None))
        self._reindex(old, None)

    def show(self, uid: str) -> None:
        saved = self.hidden.pop(uid, None)
        if saved is None:
            return
        api, pending = saved
        if api is not None:
            self._api[uid] = api
        if pending is not None:
            self._pending[uid] = pending
        self._reindex(None, self.use_of(uid))


def fork_cache(cache: Cache) -> Cache:
    """A private copy of ``cache`` (shallow: typed objects are immutable and shared) that a dry-run search may
    change (assume pods, reserve devices) without touching the scheduler's. Nothing feeds it events."""
    cache.snapshot()  # brings the slice index and the ledger's pool-to-node map up to date
    f = Cache()
    f.ledger = ForkLedger(cache.ledger)
    f._nodes = dict(cache._nodes)
    f._node_pods = {n: dict(p) for n, p in cache._node_pods.items()}
    f._node_infos = dict(cache._node_infos)
    f._pods = dict(cache._pods)
    f._assumed = dict(cache._assumed)
    f._slices = dict(cache._slices)
    f._slice_index = cache._slice_index
    f._slices_dirty = False
    f._classes = dict(cache._classes)
    f._claims = dict(cache._claims)
    f._templates = dict(cache._templates)
    f._podgroups = dict(cache._podgroups)
    f._namespaces = dict(cache._namespaces)
    f._objects = {k: dict(v) for k, v in cache._objects.items()}
    f._node_order = cache._node_order
    f.generations = dict(cache.generations)
    return f


class Fork:
    """The cluster with some victims gone: their pods off their nodes, and the devices of each of their claims
    free when every pod that reserves the claim is gone (DynamicResources ``remove_pod``'s rule)."""

    def __init__(self, cache: Cache, index: VictimIndex, keep_claims: frozenset[str]) -> None:
        self.cache = fork_cache(cache)
        ledger = self.cache.ledger
        assert isinstance(ledger, ForkLedger)
        self.ledger = ledger
        self.index = index
        self.keep = keep_claims
        self.removed: dict[str, Pod] = {}
        self._uids: set[str] = set()
        self._claims: dict[str, list[ResourceClaim]] = {}

    def claims_of(self, p: Pod) -> list[ResourceClaim]:
        c = self._claims.get(p.key)
        if c is None:
            c = self._claims[p.key] = _claims_of(self.index.snap, p)
        return c

    def remove(self, v: Victim) -> None:
        for p in v.pods:
            if p.key not in self.removed:
                self.cache._unplace(p.key, self.index.node_name(p))
                self.removed[p.key] = p
                self._uids.add(p.uid)
        self._sync_claims(v.pods)

    def restore(self, v: Victim) -> None:
        for p in v.pods:
            if self.removed.pop(p.key, None) is not None:
                node = self.index.node_name(p)
                if node:
                    self.cache._place(p, node)
                self._uids.discard(p.uid)
        self._sync_claims(v.pods)

    def set_removed(self, victims: Sequence[Victim]) -> None:
        want = {p.key for v in victims for p in v.pods}
        back = [v for v in {id(self.index.unit(p)): self.index.unit(p) for p in self.removed.values()}.values()]
        for v in back:
            if not any(p.key in want for p in v.pods):
                self.restore(v)
        for v in victims:
            self.remove(v)

    def _sync_claims(self, pods: Iterable[Pod]) -> None:
        for p in pods:
            for c in self.claims_of(p):
                uid = c.meta.uid
                if uid in self.keep or c.allocation is None:
                    continue
                consumers = {r.uid for r in c.reserved_for}
                if consumers and consumers <= self._uids:
                    self.ledger.hide(uid)
                else:
                    self.ledger.show(uid)


# --- the evaluator -------------------------------------------------------------------------------------------

Placement = PodGroupAssignments  # member -> node, in the search's order (an engine type)
Oracle = PodGroupScheduling  # the gang cycle's placement search, run on a copy of the cache (an engine type)


@dataclass(frozen=True, slots=True)
class GroupPreemptor:
    """The pod group that preempts (upstream ``podGroupPreemptor``): its object's uid and key, its priority, its
    pending members, and every member's key (bound ones included: never victims of their own group)."""

    uid: str
    key: str
    priority: int
    members: tuple[Pod, ...]
    group_pods: frozenset[str]
    never: bool = False


def group_preemptor(snap: Snapshot, pg: PodGroup, members: Sequence[Pod], group_pods: Iterable[str]) -> GroupPreemptor:
    """v1beta1: the group's priority (:func:`podgroup_priority`); x-k8s (no priority of its own): the lowest
    priority of its pending members."""
    prio = podgroup_priority(snap, pg) if pg.is_upstream else min((m.priority for m in members), default=0)
    return GroupPreemptor(
        pg.meta.uid or pg.meta.key, pg.meta.key, prio, tuple(members), frozenset(group_pods),
        preemption_never(pg, members),
    )


GroupPreemption = PodGroupPostFilterResult
"""The outcome (an engine type): ``status`` (Success: victims chosen, or an ongoing preemption; else why not; its
message without the :data:`PREFIX`, which ``DefaultPreemption.pod_group_post_filter`` adds), the members'
nominations (pod key -> node, "" clears), the pods to evict, the API work, and ``retry`` (the group fits without
evicting anything: retried later)."""


def _fail(code: Code, msg: str, members: Sequence[Pod]) -> GroupPreemption:
    return GroupPreemption(Status(code, (msg,)), {m.key: "" for m in members})


def _uses_volumes(p: Pod) -> bool:
    for v in _spec(p.raw).get("volumes") or []:
        if isinstance(v, Mapping) and ("persistentVolumeClaim" in v or "ephemeral" in v):
            return True
    return False


def _members_local(members: Sequence[Pod]) -> bool:
    """Members whose Filter reads only their own node (no pod (anti-)affinity, no topology spread constraints)."""
    return not any(m.has_pod_affinity or _spec(m.raw).get("topologySpreadConstraints") for m in members)


async def preempt_group(
    executor: Executor,
    eligible: Eligible | None,
    cache: Cache,
    preemptor: GroupPreemptor,
    nominated: Mapping[str, str],
    oracle: Oracle,
    scheduler_name: str,
) -> GroupPreemption:
    """``PodGroupEvaluator.Preempt`` (see the module docstring). ``nominated``: the members' nominations (taken out
    of the nominator for the group's own search). Never evicts unless the group's search places it on the
    cluster without the chosen victims. ``executor`` and ``eligible``: DefaultPreemption's (its preemptions in
    flight; its rule on victims, beyond "lower priority")."""
    members = preemptor.members
    if preemptor.never:
        return _fail(Code.UNSCHEDULABLE, "not eligible due to preemptionPolicy=Never.", members)
    snap = cache.snapshot()
    index = victim_index(snap)
    # isOngoingPreemption
    for node in sorted(set(nominated.values())):
        info = snap.node_map.get(node)
        for p in info.pod_list if info is not None else ():
            if terminating_by_preemption(p) and index.unit(p).priority < preemptor.priority:
                return GroupPreemption(
                    Status(Code.SUCCESS, ("ongoing preemption on nominated nodes",)), dict(nominated)
                )
    potential = [
        v
        for v in index.cluster()
        if v.priority < preemptor.priority
        and not any(p.key in preemptor.group_pods for p in v.pods)
        and (eligible is None or eligible(v))
    ]
    if not potential:
        return _fail(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS, members)
    keep = frozenset(c.meta.uid for m in members for c in _claims_of(snap, m))
    pdbs = [p for p in snap.objects_of("PodDisruptionBudget").values() if isinstance(p, PodDisruptionBudget)]
    ordered = sort_by_importance(potential)
    violating, non_violating = filter_victims_with_pdb_violation(ordered, pdbs)
    reprieve_order = [v for v, _ in violating] + non_violating  # upstream: PDB-violating first, most important first
    counts = {id(v): n for v, n in violating}
    removal = list(reversed(reprieve_order))  # least important (and non-violating) first

    fork = Fork(cache, index, keep)
    fork.set_removed(removal)
    placement, why = await oracle.search(fork.cache)
    if placement is None:
        return _fail(
            Code.UNSCHEDULABLE,
            f"Preemption is not helpful for scheduling: the group does not fit even with all {len(removal)} "
            f"lower-priority victim(s) evicted: {why}",
            members,
        )
    # The shortest prefix of ``removal`` with which the search places as many members as with every victim gone
    # (upstream places as many members as it can, beyond minCount: "Gang scheduling: schedule as many pods as
    # possible without preempting higher priority pods"); bisection, prefix 0 failed in the group cycle.
    most = len(placement)
    lo, hi = 0, len(removal)
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        fork.set_removed(removal[:mid])
        got, _ = await oracle.search(fork.cache)
        if got is not None and len(got) >= most:
            hi, placement = mid, got
        else:
            lo = mid
    prefix = removal[:hi]
    fork.set_removed(prefix)
    # reprieve against the placement, upstream's order
    in_prefix = {id(v) for v in prefix}
    nodes = {n for _, n in placement}
    local = _members_local(members)
    victims: list[Victim] = []
    violations = 0
    checks = 0
    for v in reprieve_order:
        if id(v) not in in_prefix:
            continue
        fork.restore(v)
        if local and _independent(fork, v, nodes, cache.ledger):
            continue
        checks += 1
        if await oracle.check(fork.cache, placement):
            continue
        fork.remove(v)
        victims.append(v)
        violations += counts.get(id(v), 0)
    log.info(
        "pod group preemption dry run",
        group=preemptor.key,
        potential=len(potential),
        prefix=len(prefix),
        checks=checks,
        victims=len(victims),
        pdb_violations=violations,
    )
    if not victims:
        return GroupPreemption(
            Status(Code.UNSCHEDULABLE, ("the group fits without evicting anything now; it is retried",)),
            dict(nominated),
            retry=True,
        )
    # never pointless: the group's own search on the cluster without exactly these victims
    final_fork = Fork(cache, index, keep)
    final_fork.set_removed(victims)
    final, why = await oracle.search(final_fork.cache)
    if final is None:
        return _fail(
            Code.UNSCHEDULABLE,
            f"Preemption is not helpful for scheduling: the group would not fit after evicting the "
            f"{sum(len(v.pods) for v in victims)} chosen victim(s): {why}",
            members,
        )
    victims = sort_by_importance(victims)
    pods = [p for v in victims for p in v.pods]
    noms = {m.key: "" for m in members}
    noms.update({m.key: n for m, n in final})
    return GroupPreemption(
        Status(Code.SUCCESS, (f"found a placement for podgroup, preempting {len(pods)} victims",)),
        noms,
        tuple(pods),
        prepare_actuation(executor, preemptor, pods, scheduler_name, {p.key: index.node_name(p) for p in pods}),
    )


def _independent(fork: Fork, v: Victim, nodes: set[str], ledger: DeviceLedger) -> bool:
    """Whether ``v`` cannot change whether the (node-local) members fit on ``nodes``: no pod of it there, no
    required anti-affinity, no volumes, its devices in pools local to its own nodes."""
    pool_node = ledger._pool_node
    for p in v.pods:
        node = fork.index.node_name(p)
        if not node or node in nodes or p.has_required_anti_affinity or _uses_volumes(p):
            return False
        for c in fork.claims_of(p):
            use = ledger.use_of(c.meta.uid)
            for r in use.results if use is not None else ():
                if pool_node.get((r.driver, r.pool), "") != node:
                    return False
    return True


def prepare_actuation(
    executor: Executor,
    preemptor: GroupPreemptor,
    victims: Sequence[Pod],
    scheduler_name: str,
    nodes: Mapping[str, str],
) -> Actuation | None:
    """``actuatePodGroupPreemption`` (async preemption): every member waits in PreEnqueue
    (``IsPodGroupRunningPreemption``) while the victims that are not already terminating get DisruptionTarget and
    are deleted; the last victim is recorded before its DELETE. None when there is nothing to delete."""
    todo = [p for p in victims if not p.meta.deleting]
    if not todo:
        return None
    uids = [m.uid for m in preemptor.members]
    executor.preempting.update(uids)

    async def actuate(api: ClusterAPI, now: Callable[[], str]) -> bool:
        ok = True
        try:
            for i, v in enumerate(todo):
                if i == len(todo) - 1:
                    for u in uids:
                        executor.last_victim[u] = (nodes.get(v.key) or v.node_name, v.key)
                try:
                    await preempt_pod(api, v, preemptor, CLUSTER, scheduler_name, now, PODGROUP)
                except ApiError as e:
                    log.warning("preemption failed", victim=v.key, preemptor=preemptor.key, error=str(e))
                    ok = False
                    break
        finally:
            for u in uids:
                executor.preempting.discard(u)
                executor.last_victim.pop(u, None)
        return ok

    return actuate
