"""Extension points of the group capacity bound: how many members of a group fit on a node, at most.

Before searching a placement for a group (gang), the engine (:mod:`scheduler.gang.capacity`) bounds, for every
member class (members asking for the same thing) and node, how many of its members can fit there together, and
sums the bounds over the nodes to reject at once a group that cannot fit, with a message saying what is short
("not enough devices of class gpu.nvidia.com: 1,025 needed, 1,024 free ..."). The engine keeps what is generic:
member classes, a node's room as the minimum over the plugins' contributions, the shortage message, caching.
What only a plugin knows it contributes through these points, discovered with ``isinstance`` over the profile's
plugin instances (``Framework.instances``), like the points of :mod:`scheduler.framework.interface`; only plugins
also enabled at Filter count (the bound models what Filter checks):

* :class:`DeviceCapacityPlugin` (DynamicResources): a member's device demands from its PreFilter state, and per
  node how many members fit by devices and how many devices matching each demand are free;
* :class:`ResourceCapacityPlugin` (NodeResourcesFit): which of a member's requested resources it checks, their
  free amounts on a node, and how many members fit there by them (pod slots included).

Every contribution must be an *upper bound* (the placement still runs PreFilter and Filter for every member and
allocates its devices), exact in the common case. kube-scheduler 1.37.2 has no capacity pre-check for pod groups:
this point is ours. Its closest upstream relative is ``PlacementFeasiblePlugin`` (kubernetes v1.37.2
``pkg/scheduler/framework/interface.go``), asked after each member is evaluated whether a placement can still
succeed; ours answers before any member is evaluated, from counts. The contributions are modelled on the upstream
structured allocator's device selection (``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
incubating/allocator_incubating.go``, ``isSelectable``: the device class's and the request's selectors) and on
NodeResourcesFit's ``fitsRequest`` (``pkg/scheduler/framework/plugins/noderesources/fit.go``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scheduler.api.dra import DeviceClass
    from scheduler.cache.cache import NodeInfo, Snapshot
    from scheduler.framework.interface import CycleState

# "no bound": more members than any group has
UNBOUNDED = 1 << 30

EXACT, ALL, FIRST = "exact", "all", "first"


@dataclass(slots=True)
class DeviceDemand:
    """What one member takes from one group of devices on a node (made by a :class:`DeviceCapacityPlugin`)."""

    key: Hashable  # equal for demands on the same devices (ExactCount: device class and selectors); unique otherwise
    device_class: str
    per_member: int  # devices one member takes (ExactCount); 1 for All and firstAvailable
    mode: str  # EXACT | ALL | FIRST
    probes: list[Any]  # the plugin's own data to count the node's matching free devices (opaque to the engine)
    what: str  # "request gpu: needs 1 device(s)" for messages
    requests: list[str] = field(default_factory=list)  # the names of the claim requests behind it, for messages
    plugin: str = ""  # the plugin that made it (and bounds it per node); set by the engine
    # the claims behind ``per_member`` (ExactCount): claim id -> (name for messages, devices it takes). A claim
    # that several members use (a PodGroup's claim, or one ResourceClaim named by several pods) is allocated once
    # and reserved for all of them, so the engine counts its devices once for the group, not once per member.
    claims: dict[str, tuple[str, int]] = field(default_factory=dict)
    # devices of ``per_member`` from claims the member shares with other members of its group (set by the engine):
    # a node takes them once, however many of those members it takes
    shared: int = 0

    @property
    def needs(self) -> str:
        """'2 device(s) of class gpu.nvidia.com (request gpu)'"""
        names = ", ".join(dict.fromkeys(self.requests))
        if self.mode == ALL:
            return f"all matching devices of class {self.device_class} (request {names})"
        if self.mode == FIRST:
            return f"one of the alternatives of request {names}"
        plural = "s" if "," in names else ""
        return f"{self.per_member} device(s) of class {self.device_class} (request{plural} {names})"


@runtime_checkable
class DeviceCapacityPlugin(Protocol):
    """Bounds members by the devices they take (implemented by DynamicResources)."""

    name: ClassVar[str]

    def member_demands(self, state: CycleState) -> tuple[list[DeviceDemand], int]:
        """A member's device demands after this plugin's PreFilter ran in ``state`` (none when it has nothing to
        allocate), and the devices one member takes over its ExactCount demands (for ordering classes)."""
        ...

    def device_room(
        self, snap: Snapshot, info: NodeInfo, demands: Sequence[DeviceDemand], memo: dict[Hashable, Any]
    ) -> tuple[int, dict[Hashable, int]]:
        """(an upper bound on the members with ``demands`` that fit on the node by devices, the node's free
        devices matching each ExactCount demand, by demand key). ``demands`` are this plugin's; ``memo`` is its
        own, kept across group cycles (e.g. which devices of a node match a demand)."""
        ...


@runtime_checkable
class ResourceCapacityPlugin(Protocol):
    """Bounds members by the node resources they request (implemented by NodeResourcesFit)."""

    name: ClassVar[str]

    def checked_resources(self, requests: Mapping[str, int]) -> list[str]:
        """The resources of a member's ``requests`` this plugin checks (each with a positive request)."""
        ...

    def free_resources(
        self, info: NodeInfo, resources: Sequence[str], classes: Mapping[str, DeviceClass]
    ) -> dict[str, int]:
        """The node's free amount of each of ``resources`` this plugin checks (``UNBOUNDED``: not limited here),
        in a new dict (the engine adds to it). ``classes``: the DeviceClasses (resources DRA devices may serve
        instead of the node)."""
        ...

    def resource_room(self, requests: Mapping[str, int], info: NodeInfo, classes: Mapping[str, DeviceClass]) -> int:
        """An upper bound on the members with ``requests`` that fit on the node by what this plugin checks."""
        ...
