"""GpuTopology's default topology levels (node labels, outermost first; plugin arg ``levels``).

The generic domain planning (:class:`Level`, :class:`Attempt`, :class:`Plan`, :func:`find_level`, :func:`plan`,
:func:`shared_depth`) lives in the engine, :mod:`scheduler.framework.domains` (it also plans a
``scheduling.k8s.io/v1beta1`` PodGroup's ``schedulingConstraints.topology``); re-exported here.
"""

from __future__ import annotations

from scheduler.framework.domains import Attempt, Level, Plan, find_level, plan, shared_depth

ZONE = "topology.kubernetes.io/zone"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
CLIQUE = "nvidia.com/gpu.clique"

DEFAULT_LEVELS: tuple[Level, ...] = (
    Level("zone", ZONE),
    Level("block", BLOCK),
    Level("rack", RACK),
    Level("clique", CLIQUE),
)

__all__ = [
    "BLOCK",
    "CLIQUE",
    "DEFAULT_LEVELS",
    "RACK",
    "ZONE",
    "Attempt",
    "Level",
    "Plan",
    "find_level",
    "plan",
    "shared_depth",
]
