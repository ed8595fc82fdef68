"""DefaultPreemption (PostFilter, PreEnqueue): see :mod:`plugins.defaultpreemption.plugin`.

Args as upstream ``DefaultPreemptionArgs`` (kubernetes v1.37.2 ``pkg/scheduler/apis/config/v1/defaults.go``
``SetDefaults_DefaultPreemptionArgs``, ``validation/validation_pluginargs.go``
``ValidateDefaultPreemptionArgs``): ``minCandidateNodesPercentage`` (default 10, in [0, 100]) and
``minCandidateNodesAbsolute`` (default 100, >= 0), not both zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.defaultpreemption.plugin import (
    DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
    DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
    NAME,
    DefaultPreemption,
)
from scheduler.config.registry import PluginSpec

PERCENTAGE = "minCandidateNodesPercentage"
ABSOLUTE = "minCandidateNodesAbsolute"


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    errs = [f"{path}.{k}: unknown field" for k in args if k not in (PERCENTAGE, ABSOLUTE)]
    pct = args.get(PERCENTAGE, DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
    absolute = args.get(ABSOLUTE, DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
    typed = True
    for key, v in ((PERCENTAGE, pct), (ABSOLUTE, absolute)):
        if not isinstance(v, int) or isinstance(v, bool):
            errs.append(f"{path}.{key}: Invalid value: {v!r}: must be an integer")
            typed = False
    if not typed:
        return errs
    if pct < 0 or pct > 100:
        errs.append(f"{path}.{PERCENTAGE}: Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        errs.append(f"{path}.{ABSOLUTE}: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        errs.append(f"{path}.{PERCENTAGE}: Invalid value: 0: cannot be zero at the same time as {ABSOLUTE}")
        errs.append(f"{path}.{ABSOLUTE}: Invalid value: 0: cannot be zero at the same time as {PERCENTAGE}")
    return errs


SPEC = PluginSpec(
    name=NAME,
    factory=DefaultPreemption,
    points=frozenset({"preEnqueue", "postFilter"}),
    validate_args=validate_args,
    default_args={
        PERCENTAGE: DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
        ABSOLUTE: DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
    },
)

__all__ = ["NAME", "SPEC", "DefaultPreemption", "validate_args"]
