"""NodeResourcesBalancedAllocation: prefer nodes whose resource use stays balanced with the pod.

kube-scheduler v1.37.2 (``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go``,
``resource_allocation.go``; args ``NodeResourcesBalancedAllocationArgs``, defaults
``pkg/scheduler/apis/config/v1/defaults.go``, validation
``pkg/scheduler/apis/config/validation/validation_pluginargs.go``):

* Args: ``resources`` (default ``cpu`` and ``memory``, weight 1); a weight left out or 0 is defaulted to
  1; validation rejects a repeated name (``Duplicate value``) and any weight other than 1 (``must be 1``).
* Requests are the *plain* requests (``useRequested``): the pod's effective requests (containers, init
  containers, sidecars, pod-level resources, overhead; ``pod.requests``) without the 100m / 200Mi
  defaults NodeResourcesFit uses for scoring, and the node's ``requested`` (not ``non_zero_requested``).
* PreScore: the pod's request for each configured resource; **Skip** when all are 0 (best-effort pods;
  kubernetes#129138: otherwise they would all pile onto one node).
* Per resource: a scalar resource (extended, hugepages, prefixed native, attachable volumes) the pod does
  not request is left out, and so is a resource the node has no allocatable for (allocatable 0, or a
  scalar resource the node does not list; a non-scalar name other than cpu / memory /
  ephemeral-storage, e.g. ``pods``, has no allocatable either).
* ``balancedResourceScore(requested, allocatable)``: fractions ``requested / allocatable`` capped at 1;
  ``std`` = ``|f0 - f1| / 2`` for two resources, the population standard deviation for more, 0 for fewer;
  ``int((1 - std) * 100)``.
* Score (new in 1.36+): the balance *change* the pod causes, ``with`` (node requests plus the pod) versus
  ``without`` (node requests alone): ``50 + (50 + with - without) / 2`` (Go integer division), so 75 when
  the pod does not change the balance, towards 100 when it improves it, towards 50 when it worsens it.
  No NormalizeScore.

Not implemented: upstream's DRA-backed extended resources (``DRAExtendedResource``: a configured
extended resource that the node does not list in allocatable but a DeviceClass maps through
``extendedResourceName`` counts the node's matching devices and the allocated ones). It only matters for
pods whose extended-resource request NodeResourcesFit delegates to DRA, which this scheduler does not do
yet (such pods fail Fit on nodes without the allocatable), so no feasible node would reach that branch.
Pod-level resources (``spec.resources``, PodLevelResources, beta, on) and in-place resize status count
as ``scheduler.api.model.pod_requests`` counts them (``resource.PodRequests`` of component-helpers).

Reuse between equal pods: the score reads the pod's requests for the configured resources and the
node's NodeInfo (``requested``, allocatable), so those requests are the signature.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

from plugins.noderesources.fit import is_scalar_resource
from plugins.noderesources.scoring import go_div
from scheduler.api.model import CPU, EPHEMERAL_STORAGE, MEMORY
from scheduler.config.registry import PluginSpec
from scheduler.framework.interface import MAX_NODE_SCORE, CycleState, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

NAME = "NodeResourcesBalancedAllocation"
_PRE_SCORE_KEY = "PreScore" + NAME
DEFAULT_RESOURCES: tuple[str, ...] = (CPU, MEMORY)


# --- args -------------------------------------------------------------------------------------------------


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateNodeResourcesBalancedAllocationArgs`` (after defaulting), field paths under ``path``."""
    errs = [f"{path}.{k}: unknown field" for k in args if k != "resources"]
    res = args.get("resources")
    if res is None:
        return errs
    rp = f"{path}.resources"
    if not isinstance(res, list):
        return [*errs, f"{rp}: must be a list"]
    seen: set[str] = set()
    for i, r in enumerate(res):
        ip = f"{rp}[{i}]"
        if not isinstance(r, Mapping):
            errs.append(f"{ip}: must be an object with name and weight")
            continue
        errs += [f"{ip}.{k}: unknown field" for k in r if k not in ("name", "weight")]
        name = r.get("name", "")
        if not isinstance(name, str):
            errs.append(f"{ip}.name: must be a string")
            continue
        if name in seen:
            errs.append(f'{ip}.name: Duplicate value: "{name}"')
        else:
            seen.add(name)
        w = r.get("weight")
        if w is None or w == 0:  # SetDefaults_NodeResourcesBalancedAllocationArgs
            w = 1
        if not _is_int(w) or w != 1:
            errs.append(f"{ip}.weight: Invalid value: {w!r}: must be 1")
    return errs


def parse_args(args: Mapping[str, Any]) -> tuple[str, ...]:
    """The configured resource names (assumed valid); none given = cpu and memory."""
    names = tuple(str(r["name"]) for r in args.get("resources") or () if isinstance(r, Mapping))
    return names or DEFAULT_RESOURCES


# --- scoring ----------------------------------------------------------------------------------------------


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScore``: ``(1 - std of the used fractions) * 100``, truncated."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        f = min(float(req) / float(alloc), 1.0)
        total += f
        fractions.append(f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_score(requested: Sequence[int], allocated: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScorer``: the balance with the pod compared with the balance without it."""
    with_pod = balanced_resource_score(requested, allocatable)
    without_pod = balanced_resource_score(allocated, allocatable)
    half = MAX_NODE_SCORE // 2
    return half + go_div(half + with_pod - without_pod, 2)


def node_allocatable_allocated(node: NodeInfo, res: str) -> tuple[int, int]:
    """``calculateResourceAllocatableRequest`` with plain requests: (allocatable, requested on the node)."""
    alloc = node.node.allocatable
    if res in (CPU, MEMORY, EPHEMERAL_STORAGE):
        return alloc.get(res, 0), node.requested.get(res, 0)
    if is_scalar_resource(res) and res in alloc:
        return alloc[res], node.requested.get(res, 0)
    return 0, 0


class BalancedAllocation:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.resources = parse_args(args or {})

    def pod_requests(self, pod: Pod) -> tuple[int, ...]:
        """``calculatePodResourceRequestList`` with ``useRequested`` (no defaults for zero requests)."""
        req = pod.requests
        return tuple(req.get(r, 0) for r in self.resources)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        reqs = self.pod_requests(pod)
        if not any(reqs):
            return Status.skip()
        state.write(_PRE_SCORE_KEY, reqs)
        return Status.ok()

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        reqs: tuple[int, ...] | None = state.read(_PRE_SCORE_KEY)
        if reqs is None:
            reqs = self.pod_requests(pod)
            if not any(reqs):
                return 0
        n = len(self.resources)
        requested, allocated, allocatable = [0] * n, [0] * n, [0] * n
        for i, (res, want) in enumerate(zip(self.resources, reqs, strict=True)):
            if want == 0 and is_scalar_resource(res):
                continue
            a, used = node_allocatable_allocated(node, res)
            if a == 0:
                continue
            allocatable[i] = a
            allocated[i] = used
            requested[i] = used + want
        return balanced_score(requested, allocated, allocatable)

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return self.pod_requests(pod)


SPEC = PluginSpec(
    name=NAME,
    factory=BalancedAllocation,
    points=frozenset({"preScore", "score"}),
    validate_args=validate_args,
    default_args={"resources": [{"name": r, "weight": 1} for r in DEFAULT_RESOURCES]},
)

__all__ = [
    "NAME",
    "SPEC",
    "BalancedAllocation",
    "balanced_resource_score",
    "balanced_score",
    "parse_args",
    "validate_args",
]
