"""The explicit plugin registry: every plugin the scheduler can run, by name.

Each entry says which extension points the plugin implements (used by config validation to reject a
plugin enabled at a point it does not serve), builds an instance from its args, and validates those
args with field paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

ArgsValidator = Callable[[Mapping[str, Any], str], list[str]]


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    factory: Callable[[Mapping[str, Any]], Any]
    points: frozenset[str]
    validate_args: ArgsValidator | None = None
    default_args: Mapping[str, Any] = field(default_factory=dict)


def no_args(args: Mapping[str, Any], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field" for k in args]


def default_registry() -> dict[str, PluginSpec]:
    # Imported here so that the framework package does not depend on the plugins at import time.
    from plugins.balancedallocation import SPEC as BALANCED_ALLOCATION
    from plugins.defaultbinder import SPEC as DEFAULT_BINDER
    from plugins.defaultpreemption import SPEC as DEFAULT_PREEMPTION
    from plugins.dra.plugin import SPEC as DYNAMIC_RESOURCES
    from plugins.fieldguard import SPEC as UNSUPPORTED_FIELDS
    from plugins.imagelocality import SPEC as IMAGE_LOCALITY
    from plugins.interpodaffinity import SPEC as INTER_POD_AFFINITY
    from plugins.nodeaffinity import SPEC as NODE_AFFINITY
    from plugins.nodedeclaredfeatures import SPEC as NODE_DECLARED_FEATURES
    from plugins.nodename import SPEC as NODE_NAME
    from plugins.nodeports import SPEC as NODE_PORTS
    from plugins.noderesources import SPEC as NODE_RESOURCES_FIT
    from plugins.nodeunschedulable import SPEC as NODE_UNSCHEDULABLE
    from plugins.nodevolumelimits import SPEC as NODE_VOLUME_LIMITS
    from plugins.podtopologyspread import SPEC as POD_TOPOLOGY_SPREAD
    from plugins.queuesort import SPEC as PRIORITY_SORT
    from plugins.schedulinggates import SPEC as SCHEDULING_GATES
    from plugins.tainttoleration import SPEC as TAINT_TOLERATION
    from plugins.topology import SPEC as GPU_TOPOLOGY
    from plugins.volumebinding import SPEC as VOLUME_BINDING
    from plugins.volumerestrictions import SPEC as VOLUME_RESTRICTIONS
    from plugins.volumezone import SPEC as VOLUME_ZONE

    specs = [
        PRIORITY_SORT,
        SCHEDULING_GATES,
        UNSUPPORTED_FIELDS,
        NODE_UNSCHEDULABLE,
        NODE_NAME,
        TAINT_TOLERATION,
        NODE_AFFINITY,
        NODE_PORTS,
        NODE_RESOURCES_FIT,
        VOLUME_RESTRICTIONS,
        NODE_VOLUME_LIMITS,
        VOLUME_BINDING,
        VOLUME_ZONE,
        POD_TOPOLOGY_SPREAD,
        INTER_POD_AFFINITY,
        DYNAMIC_RESOURCES,
        DEFAULT_PREEMPTION,
        BALANCED_ALLOCATION,
        IMAGE_LOCALITY,
        NODE_DECLARED_FEATURES,
        GPU_TOPOLOGY,
        DEFAULT_BINDER,
    ]
    return {s.name: s for s in specs}
