"""NodeResourcesFit: does the pod's request fit the node's free allocatable; how full would it be.

kube-scheduler (``pkg/scheduler/framework/plugins/noderesources/fit.go``):

* PreFilter computes the pod's effective requests (containers, init containers, sidecars, overhead —
  ``pod.requests`` here) and stores them in the cycle state.
* Filter (``fitsRequest``): ``Too many pods`` when the node already holds ``allocatable.pods`` pods;
  then, for every resource the pod requests with a non-zero amount, ``Insufficient <resource>`` when
  ``request > allocatable - requested`` (an extended resource the node does not list has allocatable
  0). Extended resources in ``ignoredResources`` or whose domain is in ``ignoredResourceGroups`` are not
  checked. All reasons are kept; the status is Unschedulable, or UnschedulableAndUnresolvable when some
  request exceeds the node's whole allocatable (preemption cannot help).
* PreScore/Score: ``scoringStrategy`` LeastAllocated (default), MostAllocated or
  RequestedToCapacityRatio over ``resources`` (default cpu and memory, weight 1). cpu and memory count
  the node's non-zero requests plus the pod's request defaulted to 100m / 200Mi when zero; other
  resources count plain requests, and a scalar resource the pod does not request is left out.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

from plugins.noderesources.scoring import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    Scorer,
    least_allocated_scorer,
    most_allocated_scorer,
    requested_to_capacity_ratio_scorer,
)
from scheduler.cache import DEFAULT_MEMORY, DEFAULT_MILLI_CPU
from scheduler.framework.interface import Code, CycleState, Status
from scheduler.framework.registry import PluginSpec
from scheduler.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

if TYPE_CHECKING:
    from scheduler.cache import NodeInfo
    from scheduler.model import Pod

NAME = "NodeResourcesFit"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))

HUGEPAGES_PREFIX = "hugepages-"
ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


# --- resource names (k8s.io/kubernetes/pkg/apis/core/v1/helper, scheduler/util) ----------------------------


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """Extended resources: domain-prefixed names outside ``*kubernetes.io/`` (e.g. ``nvidia.com/gpu``)."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """Resources kube-scheduler tracks as ``ScalarResources``: extended, hugepages, prefixed native,
    attachable volumes."""
    return (
        is_extended_resource(name)
        or name.startswith(HUGEPAGES_PREFIX)
        or "kubernetes.io/" in name
        or name.startswith(ATTACHABLE_VOLUMES_PREFIX)
    )


# --- args -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FitArgs:
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    strategy: str = LEAST_ALLOCATED
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    shape: tuple[tuple[int, int], ...] = ()


_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _label_name_error(value: str) -> str | None:
    """``ValidateLabelName``: a qualified name ``[prefix/]name``."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or "/" in prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        return (
            "name part must be non-empty, at most 63 characters, consist of alphanumeric characters, "
            "'-', '_' or '.', and start and end with an alphanumeric character"
        )
    return None


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _unknown(obj: Mapping[str, Any], allowed: Sequence[str], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field" for k in obj if k not in allowed]


def _validate_names(raw: Any, path: str, group: bool) -> list[str]:
    if not isinstance(raw, list):
        return [f"{path}: must be a list of strings"]
    errs: list[str] = []
    for i, v in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(v, str):
            errs.append(f"{p}: must be a string")
            continue
        if group and "/" in v:
            errs.append(f"{p}: resource group name can't contain '/'")
        e = _label_name_error(v)
        if e:
            errs.append(f"{p}: invalid name {v!r}: {e}")
    return errs


def _validate_shape(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, list) or not raw:
        return [f"{path}: at least one point must be specified"]
    errs: list[str] = []
    prev: int | None = None
    ordered = True
    for i, pt in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(pt, Mapping):
            errs.append(f"{p}: must be an object")
            continue
        errs += _unknown(pt, ("utilization", "score"), p)
        u, s = pt.get("utilization"), pt.get("score", 0)
        if not _is_int(u):
            errs.append(f"{p}.utilization: must be an integer")
        else:
            if ordered and prev is not None and prev >= u:
                errs.append(f"{p}.utilization: must be greater than prior point utilization")
                ordered = False
            prev = u
            if not 0 <= u <= MAX_UTILIZATION:
                errs.append(f"{p}.utilization: not in valid range [0, {MAX_UTILIZATION}]")
        if not _is_int(s):
            errs.append(f"{p}.score: must be an integer")
        elif not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(f"{p}.score: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
    return errs


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateNodeResourcesFitArgs`` with field paths under ``path``."""
    errs = _unknown(args, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"), path)
    if args.get("ignoredResources") is not None:
        errs += _validate_names(args["ignoredResources"], f"{path}.ignoredResources", False)
    if args.get("ignoredResourceGroups") is not None:
        errs += _validate_names(args["ignoredResourceGroups"], f"{path}.ignoredResourceGroups", True)
    ss = args.get("scoringStrategy")
    if ss is None:
        return errs
    sp = f"{path}.scoringStrategy"
    if not isinstance(ss, Mapping):
        return [*errs, f"{sp}: must be an object"]
    errs += _unknown(ss, ("type", "resources", "requestedToCapacityRatio"), sp)
    typ = ss.get("type", LEAST_ALLOCATED)
    if typ not in STRATEGIES:
        supported = ", ".join(f'"{s}"' for s in STRATEGIES)
        errs.append(f"{sp}.type: unsupported value {typ!r}: supported values: {supported}")
    res = ss.get("resources")
    if res is not None:
        if not isinstance(res, list):
            errs.append(f"{sp}.resources: must be a list")
        else:
            for i, r in enumerate(res):
                rp = f"{sp}.resources[{i}]"
                if not isinstance(r, Mapping):
                    errs.append(f"{rp}: must be an object")
                    continue
                errs += _unknown(r, ("name", "weight"), rp)
                name = r.get("name")
                if not isinstance(name, str) or not name:
                    errs.append(f"{rp}.name: required")
                w = r.get("weight", 1)
                if not _is_int(w) or not 0 < w <= 100:
                    errs.append(f"{rp}.weight: resource weight of {name} not in valid range (0, 100]")
    rtcr = ss.get("requestedToCapacityRatio")
    rp = f"{sp}.requestedToCapacityRatio"
    if rtcr is not None:
        if not isinstance(rtcr, Mapping):
            errs.append(f"{rp}: must be an object")
        else:
            errs += _unknown(rtcr, ("shape",), rp)
            errs += _validate_shape(rtcr.get("shape"), f"{rp}.shape")
    elif typ == REQUESTED_TO_CAPACITY_RATIO:
        errs.append(f"{rp}: required when type is {REQUESTED_TO_CAPACITY_RATIO}")
    return errs


def parse_args(args: Mapping[str, Any]) -> FitArgs:
    """Defaulted args (assumed valid: the config loader runs ``validate_args`` first)."""
    ss = args.get("scoringStrategy") or {}
    resources = tuple((str(r["name"]), int(r.get("weight") or 1)) for r in ss.get("resources") or ())
    shape = tuple(
        (int(p["utilization"]), int(p.get("score", 0)))
        for p in (ss.get("requestedToCapacityRatio") or {}).get("shape") or ()
    )
    return FitArgs(
        ignored_resources=frozenset(args.get("ignoredResources") or ()),
        ignored_resource_groups=frozenset(args.get("ignoredResourceGroups") or ()),
        strategy=str(ss.get("type") or LEAST_ALLOCATED),
        resources=resources or DEFAULT_RESOURCES,
        shape=shape,
    )


# --- plugin -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Insufficient:
    resource: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool


def fits_request(
    requests: Mapping[str, int],
    node: NodeInfo,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
) -> list[Insufficient]:
    """``fitsRequest``: every resource that does not fit, in kube-scheduler's order (pods, cpu, memory,
    ephemeral-storage, then scalar resources, here sorted by name for determinism)."""
    out: list[Insufficient] = []
    alloc, used = node.node.allocatable, node.requested
    allowed_pods = alloc.get(PODS, 0)
    if node.pod_count + 1 > allowed_pods:
        out.append(Insufficient(PODS, "Too many pods", 1, node.pod_count, allowed_pods, False))
    for res in (CPU, MEMORY, EPHEMERAL_STORAGE):
        want, cap = requests.get(res, 0), alloc.get(res, 0)
        if want > 0 and want > cap - used.get(res, 0):
            out.append(Insufficient(res, f"Insufficient {res}", want, used.get(res, 0), cap, want > cap))
    for res in sorted(requests):
        want = requests[res]
        if want == 0 or not is_scalar_resource(res):
            continue
        if is_extended_resource(res) and (
            res in ignored_resources or (ignored_groups and res.split("/", 1)[0] in ignored_groups)
        ):
            continue
        cap = alloc.get(res, 0)
        if want > cap - used.get(res, 0):
            out.append(Insufficient(res, f"Insufficient {res}", want, used.get(res, 0), cap, want > cap))
    return out


def _scorer(args: FitArgs) -> Scorer:
    weights = [w for _, w in args.resources]
    if args.strategy == MOST_ALLOCATED:
        return most_allocated_scorer(weights)
    if args.strategy == REQUESTED_TO_CAPACITY_RATIO:
        return requested_to_capacity_ratio_scorer(weights, args.shape or ((0, 0), (100, 10)))
    return least_allocated_scorer(weights)


class NodeResourcesFit:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = parse_args(args or {})
        self.resources: tuple[str, ...] = tuple(n for n, _ in self.args.resources)
        self._scorer = _scorer(self.args)

    # --- filtering ---------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[None, Status]:
        state.write(_PRE_FILTER_KEY, pod.requests)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        requests = state.read(_PRE_FILTER_KEY)
        if requests is None:
            requests = pod.requests
        bad = fits_request(requests, node, self.args.ignored_resources, self.args.ignored_resource_groups)
        if not bad:
            return Status.ok()
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(b.unresolvable for b in bad) else Code.UNSCHEDULABLE
        return Status(code, tuple(b.reason for b in bad))

    # --- scoring -----------------------------------------------------------------------------------------

    def pod_score_requests(self, pod: Pod) -> tuple[int, ...]:
        """``calculatePodResourceRequestList`` with non-missing defaults for cpu and memory."""
        out = []
        for res in self.resources:
            v = pod.requests.get(res, 0)
            if res == CPU:
                v = v or DEFAULT_MILLI_CPU
            elif res == MEMORY:
                v = v or DEFAULT_MEMORY
            out.append(v)
        return tuple(out)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_PRE_SCORE_KEY, self.pod_score_requests(pod))
        return Status.ok()

    @staticmethod
    def _allocatable_requested(node: NodeInfo, res: str, pod_request: int) -> tuple[int, int]:
        """``calculateResourceAllocatableRequest``: (allocatable, requested incl. the pod)."""
        if pod_request == 0 and is_scalar_resource(res):
            return 0, 0
        alloc = node.node.allocatable
        if res in (CPU, MEMORY):
            return alloc.get(res, 0), node.non_zero_requested.get(res, 0) + pod_request
        if res == EPHEMERAL_STORAGE or res in alloc:
            return alloc.get(res, 0), node.requested.get(res, 0) + pod_request
        return 0, 0

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        pod_requests = state.read(_PRE_SCORE_KEY)
        if pod_requests is None:
            pod_requests = self.pod_score_requests(pod)
        requested: list[int] = []
        allocatable: list[int] = []
        for res, want in zip(self.resources, pod_requests, strict=True):
            a, r = self._allocatable_requested(node, res, want)
            allocatable.append(a)
            requested.append(r if a else 0)
        return self._scorer(requested, allocatable)

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return tuple(sorted(pod.requests.items()))

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # More allocatable (node added or updated) or a pod on a node deleted.
        return (("Node", "Add"), ("Node", "Update"), ("Pod", "Delete"))


SPEC = PluginSpec(
    name=NAME,
    factory=NodeResourcesFit,
    points=frozenset({"preFilter", "filter", "preScore", "score"}),
    validate_args=validate_args,
    default_args={
        "scoringStrategy": {
            "type": LEAST_ALLOCATED,
            "resources": [{"name": n, "weight": w} for n, w in DEFAULT_RESOURCES],
        }
    },
)
