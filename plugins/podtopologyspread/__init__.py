"""PodTopologySpread: spread pods over topology domains (``spec.topologySpreadConstraints`` and the
default constraints of the plugin args).

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/podtopologyspread``; KEP-895 (pod topology
spread), KEP-3022 (minDomains), KEP-3094 (node inclusion policies), KEP-3243 (matchLabelKeys). See
``common.py`` (constraints, default selector, counting), ``filtering.py`` (DoNotSchedule),
``scoring.py`` (ScheduleAnyway) and ``plugin.py`` (the plugin, args, validation, signing).
"""

from __future__ import annotations

from plugins.podtopologyspread.common import (
    LABEL_HOSTNAME,
    LABEL_TOPOLOGY_ZONE,
    NAME,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    default_selector,
)
from plugins.podtopologyspread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from plugins.podtopologyspread.plugin import (
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    SPEC,
    PodTopologySpread,
    validate_args,
)

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "LABEL_HOSTNAME",
    "LABEL_TOPOLOGY_ZONE",
    "NAME",
    "PRE_FILTER_STATE_KEY",
    "PRE_SCORE_STATE_KEY",
    "SPEC",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "Constraint",
    "PodTopologySpread",
    "default_selector",
    "validate_args",
]
