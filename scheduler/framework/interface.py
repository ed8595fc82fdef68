"""Extension points, statuses and per-cycle state of the scheduling framework.

Modelled on kube-scheduler's framework: one small protocol per extension point; a plugin implements
only the points it needs and the runtime discovers them with ``isinstance``. "Does not fit" is an
ordinary :class:`Status`; only faults are errors. The group (gang) cycle's points — PodGroupPostFilter,
PlacementGenerate, GroupMemberScore, JointAllocation, BindingNote — and the types they exchange are at the end.

Queue semantics of the codes (as kube-scheduler):

* ``SUCCESS``
* ``ERROR``: internal fault (bad CEL at runtime, API failure). The pod goes to backoff and is retried.
* ``UNSCHEDULABLE``: does not fit now; preemption could help. Pod waits in the unschedulable pool
  until a cluster event that may make it schedulable (or the periodic flush).
* ``UNSCHEDULABLE_AND_UNRESOLVABLE``: like UNSCHEDULABLE, but preemption cannot help.
* ``WAIT``: Permit asks to wait.
* ``SKIP``: PreFilter/PreScore: the plugin's later points do nothing for this pod.
* ``PENDING``: PreEnqueue: keep the pod out of the active queue (gated) until an event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scheduler.api.clusterapi import ClusterAPI
    from scheduler.api.dra import DeviceResult
    from scheduler.api.model import Pod, PodGroup
    from scheduler.cache.cache import Cache, NodeInfo, Snapshot
    from scheduler.cache.ledger import DeviceLedger
    from scheduler.framework.domains import Level, Plan


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


UNSET: Any = object()  # Status.memo before a plugin has written it


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    # what the plugin that made this status derived from it once (DynamicResources' retarget template), kept on
    # the object so it lives and dies with it: a table keyed by the status's identity had to hold every status it
    # had seen (up to 50,000 in a long-running scheduler). Not compared, not copied by ``dataclasses.replace``;
    # set with ``object.__setattr__`` (the status is frozen).
    memo: Any = field(default=UNSET, init=False, compare=False, repr=False)

    @staticmethod
    def ok() -> Status:
        return _OK

    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE, reasons, plugin)

    @staticmethod
    def unresolvable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @staticmethod
    def error(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.ERROR, reasons, plugin)

    @staticmethod
    def skip() -> Status:
        return _SKIP

    @property
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin or self.code == Code.SUCCESS else Status(self.code, self.reasons, plugin)


_OK = Status()
_SKIP = Status(Code.SKIP)


class CycleState:
    """Per-cycle scratchpad keyed by plugin name; also carries the cycle's snapshot."""

    # __weakref__: a plugin may keep a function in the state that needs the state back (a weak reference, so
    # that the state and the function are no reference cycle: a cycle waits for the collector's full passes)
    __slots__ = (
        "__weakref__",
        "_data",
        "node_tokens",
        "record_plugin_metrics",
        "skip_filter",
        "skip_score",
        "snapshot",
    )

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        # scheduler_plugin_execution_duration_seconds is observed in this cycle (upstream samples 10% of the
        # scheduling cycles: pluginMetricsSamplePercent, pkg/scheduler/schedule_one.go)
        self.record_plugin_metrics = True
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        # node name -> the NodeTokenPlugins' token for this cycle (the framework's reuse memo fills it)
        self.node_tokens: dict[str, Hashable] = {}

    def read(self, key: str) -> Any:
        return self._data.get(key)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        """A copy for a dry run (upstream ``CycleState.Clone``): values with a ``clone()`` method are cloned,
        others shared (plugins replace, never mutate, such values in PreFilterExtensions). The reuse memo's
        node tokens are not carried over: a dry run never reuses results."""
        out = CycleState(self.snapshot)
        for k, v in self._data.items():
            c = getattr(v, "clone", None)
            out._data[k] = c() if callable(c) else v
        out.skip_filter = set(self.skip_filter)
        out.skip_score = set(self.skip_score)
        out.record_plugin_metrics = self.record_plugin_metrics  # upstream Clone copies recordPluginMetrics
        return out


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts the nodes the Filter phase considers (``None`` = all)."""

    node_names: frozenset[str] | None = None


@dataclass(slots=True)
class NodeScore:
    name: str
    score: int


@dataclass(slots=True)
class QueuedPodInfo:
    pod: Pod
    timestamp: float  # queue timestamp: when it was added (or its arrival time), refreshed at each failed attempt
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False


class Plugin(Protocol):
    name: ClassVar[str]


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: ClassVar[str]

    def pre_enqueue(self, snapshot: Snapshot, pod: Pod) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    name: ClassVar[str]

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: ClassVar[str]

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: ClassVar[str]

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status: ...


NOMINATE_OVERRIDE = "Override"
NOMINATE_NOOP = "Noop"


# API work a PostFilter plugin decided on (preemption: evict the victims), run after the cycle with the API and the
# scheduler's wall clock (RFC 3339); False when it failed.
Actuation = Callable[["ClusterAPI", Callable[[], str]], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter plugin asks for (upstream ``PostFilterResult`` + ``NominatingInfo``).

    ``mode`` Override sets ``status.nominatedNodeName`` to ``nominated_node_name`` ("" clears it); Noop leaves
    it. ``actuate``, when set, is the API work the plugin decided on (preemption: evict the victims); the
    scheduler runs it after the preemptor's cycle ended and its status was written, as a task live (upstream
    async preemption) or inline in ``simulate``, with the API and the scheduler's wall clock (RFC 3339, for
    condition times). It returns False when it failed (the preemptor is then retried at once, as upstream
    activates it)."""

    nominated_node_name: str = ""
    mode: str = NOMINATE_OVERRIDE
    actuate: Actuation | None = field(default=None, compare=False)


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: ClassVar[str]

    def post_filter(
        self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Optional, with PreFilter (upstream ``PreFilterExtensions``): update the plugin's PreFilter state in a
    (cloned) CycleState as if ``pod_to_add`` were added to / ``pod_to_remove`` removed from ``node``. Used by
    preemption's dry run and to count nominated pods; never called on the cycle's own state."""

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo) -> Status: ...

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status: ...


class FrameworkHandle(Protocol):
    """What a plugin may ask of its framework (upstream ``framework.Handle``), given through ``set_handle``."""

    scheduler_name: str

    def run_filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status: ...

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status: ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo
    ) -> Status: ...

    def nominated_pods_for_node(self, node: str) -> Sequence[Pod]: ...

    def nominated_node_of(self, pod: Pod) -> str: ...

    def dry_run(self, state: CycleState, pod: Pod, node: NodeInfo) -> DryRun: ...


@runtime_checkable
class HandleAware(Protocol):
    """Optional: the framework hands itself to the plugin once, after building every plugin of the profile."""

    def set_handle(self, handle: FrameworkHandle) -> None: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: ClassVar[str]

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: ClassVar[str]

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int: ...


@runtime_checkable
class ScoreNormalizer(Protocol):
    """Optional ScoreExtensions: scale raw scores into 0..100 (MAX_NODE_SCORE)."""

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status: ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: ClassVar[str]

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    name: ClassVar[str]

    def permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    name: ClassVar[str]

    async def pre_bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    name: ClassVar[str]

    async def bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status: ...


@runtime_checkable
class UnreserveWriter(Protocol):
    """Optional: undo API writes made in PreBind when the binding cycle fails (runs after Unreserve)."""

    async def rollback(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> None: ...


@runtime_checkable
class SignPlugin(Protocol):
    """Optional: what of the pod this plugin's Filter and Score depend on (upstream: SignPlugin).

    Pods with equal signatures from every filter and score plugin get the same Filter status and raw
    scores on a node whose state did not change, so the scheduler reuses them (upstream's opportunistic
    batching). ``None`` means "cannot sign this pod": nothing is reused for it. Called after PreFilter."""

    name: ClassVar[str]

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None: ...


@runtime_checkable
class NodeTokenPlugin(Protocol):
    """Optional, with SignPlugin: node state this plugin reads beyond the NodeInfo itself (e.g. the
    device ledger's revision for the node). A reused result is valid only while the token is equal."""

    def node_token(self, state: CycleState, node: NodeInfo) -> Hashable: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    """Optional: the cluster events (kind, action) that may make a pod rejected by this plugin
    schedulable. Actions: Add, Update, Delete."""

    def events_to_register(self) -> Sequence[tuple[str, str]]: ...


class QueueingHint(IntEnum):
    """A plugin's answer for one cluster event and one pod it rejected (upstream ``fwk.QueueingHint``):
    ``QUEUE``, the event may have made the pod schedulable (retry it); ``SKIP``, it cannot have."""

    SKIP = 0
    QUEUE = 1


QueueingHintFn = Callable[["Pod", Any, Any], QueueingHint]
"""``(pod, old, new) -> QueueingHint`` for one registered event (upstream ``QueueingHintFn``). ``pod`` is the
waiting pod the plugin rejected; ``old`` / ``new`` are the event's objects as the cache holds them (typed values
of :mod:`scheduler.api.model`: ``old`` is None for an Add, ``new`` None for a Delete). Pure and quick: it runs for
every waiting pod the plugin rejected, on the event loop, and must not do I/O. Raising counts as ``QUEUE``."""


@runtime_checkable
class QueueingHintExtensions(Protocol):
    """Optional, with :class:`EnqueueExtensions`: a hint per registered event (upstream ``ClusterEventWithHint``).

    The scheduling queue calls the hint of each plugin that rejected a waiting pod and registered the event; the pod
    moves (to backoff or active) only when some hint answers ``QUEUE``. An event registered without a hint always
    queues (upstream: a nil ``QueueingHintFn``). Keys are ``(kind, action)`` pairs from ``events_to_register``;
    a key naming an event the plugin does not register is ignored."""

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]: ...


# --- the PodGroup (gang) cycle -----------------------------------------------------------------------------------
#
# The group cycle (scheduler/gang/cycle.py; upstream kubernetes v1.37.2 pkg/scheduler/schedule_one_podgroup.go, KEP-4671
# gang scheduling, KEP-5732 topology-aware workload scheduling) places a PodGroup's pending members together through
# the pod points above (PreFilter, Filter, Score, Reserve, PreBind, Bind for each member) and through these group
# points. Like the pod points they are discovered with ``isinstance`` over a profile's plugin instances
# (``Framework`` helpers in scheduler/framework/runtime.py), never by a plugin's name or class.

GROUP_PENDING_KEY = "gang/pending-claims"
"""CycleState key, written by the group cycle into every member's state before PreFilter: claim uid -> the
allocation (a :class:`JointAllocationPlugin`'s value, opaque to the engine) reserved for that claim by another
member placed earlier in the same group cycle. A :class:`JointAllocationPlugin` reads it (DynamicResources: such a
claim is used like an allocated claim, pinned to its node)."""

PodGroupAssignments = list[tuple["Pod", str]]
"""Member -> node, in the order the group search placed them (upstream ``fwk.PodGroupAssignments``)."""


@dataclass(frozen=True, slots=True)
class PodGroupInfo:
    """The group a group point is called for (upstream ``fwk.PodGroupInfo``): the PodGroup, its pending members
    the cycle tried to place (``GetUnscheduledPods``), and the keys of all its members, bound ones included."""

    pod_group: PodGroup
    unscheduled: tuple[Pod, ...]
    group_pods: frozenset[str]


class PodGroupScheduling(Protocol):
    """The group cycle's own placement search, run on a copy of the cache that a PodGroupPostFilter plugin changed
    (upstream ``fwk.PodGroupSchedulingFunc`` on the ``MutableSnapshotSharedLister``): what the group cycle will run
    once the victims are gone. Nothing stays placed in ``cache`` after either call."""

    async def search(self, cache: Cache) -> tuple[PodGroupAssignments | None, str]:
        """The group's assignments on ``cache``, or None and why not."""
        ...

    async def check(self, cache: Cache, assignments: PodGroupAssignments) -> bool:
        """Whether each member still goes on its node of ``assignments``, in order (PreFilter, Filter, Reserve)."""
        ...


@dataclass(slots=True)
class PodGroupPostFilterResult:
    """What a PodGroupPostFilter plugin returns (upstream ``fwk.PodGroupPostFilterResult`` + its ``*Status``):
    ``status`` (Success: victims chosen, or a preemption under way; its message is what the members' status says
    about it), ``nominations`` (member key -> node, "" clears; upstream ``NominatingInfos``), the pods to evict,
    the API work (run after the members' status writes, as :attr:`PostFilterResult.actuate`), and ``retry`` (the
    group fits now without the plugin's help: it is retried after a backoff)."""

    status: Status
    nominations: dict[str, str] = field(default_factory=dict)
    victims: tuple[Pod, ...] = ()
    actuate: Actuation | None = field(default=None, compare=False)
    retry: bool = False


@runtime_checkable
class PodGroupPostFilterPlugin(Protocol):
    """PodGroupPostFilter (kubernetes v1.37.2 ``staging/src/k8s.io/kube-scheduler/framework/interface.go``
    ``PodGroupPostFilterPlugin``, run by ``RunPodGroupPostFilterPlugins`` in ``framework/runtime/framework.go``):
    called when a PodGroup's cycle found no placement (not when its search merely ran out of budget), for each
    plugin enabled at ``postFilter`` that implements it. Implemented by DefaultPreemption (workload-aware
    preemption). ``cache`` is the scheduler's cache, to be copied, never changed; ``nominated``: the members'
    current nominations (taken out of the nominator for the group's own search); ``scheduling`` runs the group's
    search on such a copy."""

    name: ClassVar[str]

    async def pod_group_post_filter(
        self,
        cache: Cache,
        group: PodGroupInfo,
        nominated: Mapping[str, str],
        scheduling: PodGroupScheduling,
        scheduler_name: str,
    ) -> PodGroupPostFilterResult: ...


@runtime_checkable
class PlacementGeneratePlugin(Protocol):
    """The topology domains (upstream ``Placement``: a set of nodes) a group is tried in, smallest first
    (kubernetes v1.37.2 ``staging/src/k8s.io/kube-scheduler/framework/interface.go`` ``PlacementGeneratePlugin``,
    ``GeneratePlacements``; KEP-5732). Here for the node-label levels of a plugin's args (GpuTopology: NVLink
    clique, rack, block, zone), beyond upstream's single ``schedulingConstraints.topology`` key, which the engine
    plans itself with the same :func:`scheduler.framework.domains.plan`. The first instance of the profile that
    implements it is used.

    * ``placement_levels``: the levels, outermost first (the group's packing also keeps members in few domains of
      them);
    * ``generate_placements``: the domains to try for ``need`` members, given each feasible node's labels and how
      many members fit there, and a problem with the PodGroup's own topology settings ("" when none; reported,
      then ignored);
    * ``describe_placement``: where a group placed without a chosen domain landed (the labels of its members'
      nodes), for the PodGroup status."""

    name: ClassVar[str]

    def placement_levels(self) -> Sequence[Level]: ...

    def generate_placements(
        self,
        pod_group: PodGroup | None,
        labels: Mapping[str, Mapping[str, str]],
        slots: Mapping[str, int],
        need: int,
    ) -> tuple[Plan, str]: ...

    def describe_placement(self, node_labels: Sequence[Mapping[str, str]], members: int) -> str: ...


@runtime_checkable
class GroupMemberScorePlugin(Protocol):
    """A bonus for a candidate node of one member of a group, given the nodes of the members placed so far in the
    cycle (GpuTopology: the innermost topology domain shared with all of them). Added to the framework's node
    score when a member that is a class of its own is placed. No upstream counterpart: upstream ranks a group's
    nodes with the pod Score plugins and whole placements with PlacementScore (``PlacementScorePlugin``). The
    first instance of the profile that implements it is used."""

    name: ClassVar[str]

    def group_score(self, member: Pod, candidate: NodeInfo, used: Sequence[str]) -> int: ...


class AllocatedDevices(Protocol):
    """What the engine reads of a :class:`JointAllocationPlugin`'s allocation (otherwise opaque): the devices it
    holds, to check that no other claim took one while the group search yielded."""

    @property
    def results(self) -> tuple[DeviceResult, ...]: ...


@runtime_checkable
class JointAllocationPlugin(Protocol):
    """Joint allocation of the members placed on one node (implemented by DynamicResources; kubernetes#138765:
    devices chosen pod by pod without backtracking can leave a node that fits the members together unused). No
    upstream counterpart in the PodGroup cycle. The first instance of the profile that implements it is used.

    * ``joint_resolvable``: may this Filter rejection be resolved by allocating the members on the node together;
    * ``allocate_jointly``: allocate the pods of ``states`` (after PreFilter; the engine released their earlier
      reservations) together on ``node``: per-pod allocations in the same order, or None (no fit, or an
      allocation error);
    * ``member_allocation``: a placed member's allocation on ``node``;
    * ``reserve_member_allocation``: make ``allocations`` the member's on ``node``, reserve their devices in
      ``ledger``, and return (claim uid, allocation) for the group's pending map (:data:`GROUP_PENDING_KEY`);
    * ``member_claims``: after Reserve, the uids of the claims the member allocates, and (claim uid, allocation)
      for the pending map."""

    name: ClassVar[str]

    def joint_resolvable(self, status: Status) -> bool: ...

    def allocate_jointly(
        self, states: Sequence[CycleState], node: NodeInfo
    ) -> Sequence[Sequence[AllocatedDevices]] | None: ...

    def member_allocation(self, state: CycleState, node: str) -> Sequence[AllocatedDevices]: ...

    def reserve_member_allocation(
        self, state: CycleState, node: str, allocations: Sequence[AllocatedDevices], ledger: DeviceLedger
    ) -> Sequence[tuple[str, AllocatedDevices]]: ...

    def member_claims(
        self, state: CycleState, node: str
    ) -> tuple[Sequence[str], Sequence[tuple[str, AllocatedDevices]]]: ...


@runtime_checkable
class BindingNotePlugin(Protocol):
    """A note for the ``Scheduled`` Event of a pod bound to ``node`` (GpuTopology: how its GPUs are connected,
    "gpu-0..3 NV18 all-pairs, NUMA 0"); "" when the plugin has nothing to say. The Event then reads
    "Successfully assigned ns/pod to node: <notes>" (upstream kubernetes v1.37.2 ``pkg/scheduler/schedule_one.go``
    ``finishBinding`` writes "Successfully assigned %v/%v to %v" without a note). Every instance of
    the profile that implements it is asked, for single pods and group members alike."""

    name: ClassVar[str]

    def binding_note(self, state: CycleState, node: str) -> str: ...


MAX_NODE_SCORE = 100


class Metrics(Protocol):
    def observe_extension_point(self, point: str, status: Code, seconds: float) -> None: ...

    def observe_plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None: ...


class NullMetrics:
    def observe_extension_point(self, point: str, status: Code, seconds: float) -> None:
        return None

    def observe_plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        return None


class DryRun:
    """Filter a pod on a node with some pods removed, without touching the cycle (upstream
    ``SelectVictimsOnNode``'s NodeInfo copy and cloned CycleState).

    The NodeInfo is rebuilt through the cache's constructor from the node's pods minus the removed ones (so
    every derived field and memo is fresh); each removal / re-addition goes through the PreFilter plugins'
    ``remove_pod`` / ``add_pod`` on a clone of the cycle state (DynamicResources then treats a victim's claims
    as free when no surviving pod reserves them). A pod on another node (a gang victim spanning nodes) is only
    passed to the extensions, with that node's NodeInfo, as upstream does. ``fits`` runs the filters with the
    nominated pods, never through the equal-pod reuse memo.
    """

    __slots__ = ("_node", "base", "fw", "pod", "removed", "state")

    def __init__(self, fw: FrameworkHandle, state: CycleState, pod: Pod, node: NodeInfo) -> None:
        self.fw = fw
        self.pod = pod
        self.base = node
        self.state = state.clone()
        self.removed: dict[str, Pod] = {}
        self._node: NodeInfo | None = node

    @property
    def node(self) -> NodeInfo:
        if self._node is None:
            from scheduler.cache.cache import _node_info

            self._node = _node_info(
                self.base.node, {p.key: p for p in self.base.pod_list if p.key not in self.removed}
            )
        return self._node

    def remove(self, victim: Pod, remote: NodeInfo | None = None) -> Status:
        if remote is not None and remote.name != self.base.name:
            return self.fw.run_pre_filter_extension_remove_pod(self.state, self.pod, victim, remote)
        self.removed[victim.key] = victim
        self._node = None
        return self.fw.run_pre_filter_extension_remove_pod(self.state, self.pod, victim, self.node)

    def add(self, victim: Pod, remote: NodeInfo | None = None) -> Status:
        if remote is not None and remote.name != self.base.name:
            return self.fw.run_pre_filter_extension_add_pod(self.state, self.pod, victim, remote)
        self.removed.pop(victim.key, None)
        self._node = None
        return self.fw.run_pre_filter_extension_add_pod(self.state, self.pod, victim, self.node)

    def fits(self) -> Status:
        return self.fw.run_filter_with_nominated_pods(self.state, self.pod, self.node)
