"""InterPodAffinity: required and preferred pod affinity / anti-affinity (kube-scheduler v1.37.2).

Upstream: ``pkg/scheduler/framework/plugins/interpodaffinity`` (``plugin.go``, ``filtering.go``,
``scoring.go``); term parsing in :mod:`scheduler.api.podaffinity`.

* PreFilter/Filter (:mod:`.filtering`): the incoming pod's required affinity (UnschedulableAndUnresolvable
  "node(s) didn't match pod affinity rules", with the first-pod-of-a-self-affine-group exception), its required
  anti-affinity (Unschedulable "node(s) didn't match pod anti-affinity rules") and existing pods' required
  anti-affinity against it (Unschedulable "node(s) didn't satisfy existing pods anti-affinity rules"), all by
  topology domain; PreFilter Skip when nothing applies; a pod whose terms do not parse fails PreFilter,
  UnschedulableAndUnresolvable "parsing pod: ...".
* PreScore/Score/NormalizeScore (:mod:`.scoring`): preferred terms of the pod and of existing pods,
  ``hardPodAffinityWeight`` for existing pods' required affinity, min-max normalisation of signed scores.
* Events: assigned pods added / updated / deleted, nodes added / relabelled, namespaces added / relabelled.

Args (``InterPodAffinityArgs``, ``pkg/scheduler/apis/config/v1/defaults.go`` and
``validation/validation_pluginargs.go``): ``hardPodAffinityWeight`` (default 1, valid 0..100),
``ignorePreferredTermsOfExistingPods`` (default false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
)
from plugins.interpodaffinity.plugin import DEFAULT_HARD_POD_AFFINITY_WEIGHT, NAME, InterPodAffinity
from scheduler.config.registry import PluginSpec

MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateInterPodAffinityArgs``: ``hardPodAffinityWeight`` in [0, 100]; plus types and unknown fields."""
    errs = [
        f"{path}.{k}: unknown field"
        for k in args
        if k not in ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")
    ]
    w = args.get("hardPodAffinityWeight")
    wp = f"{path}.hardPodAffinityWeight"
    if w is not None:
        if not isinstance(w, int) or isinstance(w, bool):
            errs.append(f"{wp}: Invalid value: {w!r}: must be an integer")
        elif not MIN_HARD_POD_AFFINITY_WEIGHT <= w <= MAX_HARD_POD_AFFINITY_WEIGHT:
            errs.append(
                f"{wp}: Invalid value: {w}: not in valid range "
                f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]"
            )
    ig = args.get("ignorePreferredTermsOfExistingPods")
    if ig is not None and not isinstance(ig, bool):
        errs.append(f"{path}.ignorePreferredTermsOfExistingPods: Invalid value: {ig!r}: must be a boolean")
    return errs


SPEC = PluginSpec(
    name=NAME,
    factory=InterPodAffinity,
    points=frozenset({"preFilter", "filter", "preScore", "score"}),
    validate_args=validate_args,
    default_args={
        "hardPodAffinityWeight": DEFAULT_HARD_POD_AFFINITY_WEIGHT,
        "ignorePreferredTermsOfExistingPods": False,
    },
)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "SPEC",
    "InterPodAffinity",
    "validate_args",
]
