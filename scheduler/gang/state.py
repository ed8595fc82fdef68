"""The group cycle's tunables and the values one search passes around (pure data, no logic but
``group_key``): :class:`GroupState` between cycles, ``_Search`` / ``_Frame`` / ``_Leaf`` / ``_Placed`` / ``_Result``
within one, and ``_restrict`` (a class's room cut to a topology domain).

The tunables are read as ``state.NAME`` by the modules of the cycle, so that a test can change them here.
"""


from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.model import Pod, PodGroup
from scheduler.cache.cache import NodeInfo
from scheduler.framework.interface import (
    AllocatedDevices,
    CycleState,
)
from scheduler.framework.runtime import Framework
from scheduler.gang.capacity import (
    ClassRoom,
    MemberClass,
)

GANG = "Coscheduling"  # the pseudo-plugin name recorded for gang rejections (matches every event)
MAX_CANDIDATES_PER_MEMBER = 4  # nodes tried for a member that is a class of its own
MAX_DOMAIN_ATTEMPTS = 3  # topology domains searched before the unrestricted search
MAX_EVAL_DOMAINS = 8  # domains of a schedulingConstraints.topology key placed and scored per group cycle
MAX_PACKINGS = 3  # alternative packings of a class when later classes fail
SEARCH_BUDGET = 400  # packings retried per group cycle when a later class did not fit (then: retried later)
SLICE_SECONDS = 0.02  # work between two yields to the event loop
JOINT_MAX_MEMBERS = 8  # joint re-allocation on a node only with at most this many members already there
MAX_RESTARTS = 2  # searches repeated in one cycle when the cluster changed under the placement
SCAN_CHUNK = 32  # nodes scanned between two checks of the time slice

GroupScore = Callable[[Pod, NodeInfo, Sequence[str]], int]  # (member, candidate, nodes used so far) -> bonus


@dataclass(slots=True)
class GroupState:
    """What the scheduler knows about a group between cycles (for status and timeouts)."""

    first_attempt: float
    message: str = ""
    scheduled_at: float | None = None
    timed_out: bool = False
    attempts: int = 0
    topology: str = ""  # where the group was placed in the topology and why (PlacementGenerate), for the status
    started: str = ""  # RFC 3339 wall time of the first attempt (x-k8s status.scheduleStartTime)
    # scheduling.k8s.io/v1beta1: the PodGroupInitiallyScheduled condition to write (placed?, reason, message)
    condition: tuple[bool, str, str] | None = None
    victims: list[str] = field(default_factory=list)  # members preempted by the scheduler (DisruptionTarget)
    disruption: str = ""  # DisruptionTarget=True message, once the group is disrupted
    disruption_time: str = ""


@dataclass(slots=True)
class _Placed:
    pod: Pod
    node: str
    state: CycleState
    claim_uids: list[str]
    # members re-allocated jointly with this one on its node, with their allocations before (JointAllocation point)
    joint_with: list[tuple[_Placed, Sequence[AllocatedDevices]]] = field(default_factory=list)


class _Budget(Exception):
    pass


@dataclass(slots=True)
class _Result:
    placed: list[_Placed] | None
    reason: str = ""
    retry: bool = False  # nothing proves the group cannot fit (budget, cluster changed): retry after a backoff


@dataclass(slots=True)
class _Search:
    """One group search: the framework, what is placed so far, and the counters."""

    fw: Framework
    order: dict[str, int]  # node -> position in the snapshot (determinism)
    levels: tuple[str, ...]  # topology level labels, outermost first
    labels: dict[str, Any]  # node -> labels
    placed: list[_Placed] = field(default_factory=list)
    pending: dict[str, AllocatedDevices] = field(default_factory=dict)  # claim uid -> allocation (this search)
    on_node: dict[str, list[_Placed]] = field(default_factory=dict)
    steps: int = 0  # packings tried
    backtracks: int = 0  # packings tried after the first one of a class (what SEARCH_BUDGET limits)
    failures: int = 0  # counts a node did not take (allocation verified fewer than its bound)
    failure_budget: int = 0


@dataclass(slots=True)
class _Frame:
    cls: MemberClass
    room: ClassRoom
    packings: list[list[tuple[str, int]] | None]  # None: leave the member pending (allowed by minMember)
    pos: int = 0
    got: list[_Placed] | None = None
    short: int = 0  # members of the class left pending by the packing in use
    reason: str = ""


@dataclass(slots=True)
class _Leaf:
    """One v1beta1 PodGroup in a group cycle (alone, or a leaf of a CompositePodGroup tree)."""

    pg: PodGroup
    key: str
    gs: GroupState
    bound: list[Pod]
    pending: list[Pod]
    placeable: list[Pod] = field(default_factory=list)
    placed: list[_Placed] | None = None
    reason: str = ""
    retry: bool = False


def group_key(pod: Pod) -> str | None:
    return f"{pod.namespace}/{pod.pod_group}" if pod.pod_group else None


def _restrict(room: ClassRoom, scope: frozenset[str]) -> ClassRoom:
    return ClassRoom(
        caps={n: v for n, v in room.caps.items() if n in scope},
        fits={n: v for n, v in room.fits.items() if n in scope},
        free={k: {n: v for n, v in d.items() if n in scope} for k, d in room.free.items()},
        resources={n: v for n, v in room.resources.items() if n in scope},
        scores={n: v for n, v in room.scores.items() if n in scope},
        joint={n for n in room.joint if n in scope},
        rejected={n: v for n, v in room.rejected.items() if n in scope},
        nodes_in_scope=len(scope),
        state=room.state,
        sig=room.sig,
        scored=False,
    )
