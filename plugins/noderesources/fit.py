"""NodeResourcesFit: does the pod's request fit the node's free allocatable; how full would it be.

kube-scheduler v1.37.2 (``pkg/scheduler/framework/plugins/noderesources/fit.go``, ``resource_allocation.go``,
``least_allocated.go``, ``most_allocated.go``, ``requested_to_capacity_ratio.go``; args
``NodeResourcesFitArgs``, defaults ``apis/config/v1/defaults.go``, validation
``apis/config/validation/validation_pluginargs.go``):

* PreFilter computes the pod's effective requests (``resource.PodRequests``: containers, init containers,
  sidecars, pod-level ``spec.resources`` — PodLevelResources, beta, on — and overhead; ``pod.requests``
  here). A pod whose resource quantities the API server would refuse (negative, unparsable, non-integer
  extended resources, requests above limits) is UnschedulableAndUnresolvable with the field named
  (``scheduler.api.model.pod_resource_errors``): such a value never counts, let alone adds capacity.
* Filter (``fitsRequest``): ``Too many pods`` when the node already holds ``allocatable.pods`` pods;
  then, for every resource the pod requests with a non-zero amount, ``Insufficient <resource>`` when
  ``request > allocatable - requested`` (a scalar resource the node does not list has allocatable 0).
  Extended resources in ``ignoredResources`` or whose domain is in ``ignoredResourceGroups`` are not
  checked. A resource a DeviceClass maps (``extendedResourceName`` or ``deviceclass.resource.kubernetes.io/
  <class>``, DRAExtendedResource, GA) is not checked on a node that does not list it with a non-zero
  allocatable: DynamicResources allocates it there (``shouldDelegateResourceToDRA``). All reasons are
  kept; the status is Unschedulable, or UnschedulableAndUnresolvable when some request exceeds the node's
  whole allocatable (preemption cannot help).
* PreScore/Score: ``scoringStrategy`` LeastAllocated (default), MostAllocated or
  RequestedToCapacityRatio over ``resources`` (default cpu and memory, weight 1). cpu and memory count the
  node's non-zero requests plus the pod's request with 100m / 200Mi for every container that requests
  none (``calculatePodResourceRequest``); ephemeral-storage and scalar resources count plain requests; a
  scalar resource the pod does not request, or the node has no allocatable for, is left out. A
  DRA-backed resource the node does not list counts the node's devices of the mapped class and those in
  use (``calculateDRAResourceTotals``). Requests of pods already on the node are max(spec, allocated,
  actuated) (InPlacePodVerticalScaling, GA).
* Signature (``SignPod``): the pod's requests; none (no reuse) when a request may be served through DRA.
* QueueingHints (``EventsToRegister``): a deleted pod frees resources only if it was assigned or nominated
  (``isSchedulableAfterPodEvent``); an assigned pod's in-place scale-down helps only if a resource the waiting
  pod requests went down (``isSchedulableAfterPodScaleDown``); an added or updated node only if the pod fits it
  empty and, for an update, an allocatable it needs (or the pod count) grew (``isSchedulableAfterNodeChange``,
  ``haveAnyRequestedResourcesIncreased``); a DeviceClass only if it maps an extended resource the pod requests
  (``isSchedulableAfterDeviceClassEvent``). DeviceClasses for DRA-served resources are those of the last cycle's
  snapshot (upstream reads the DRA manager's current cache).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

from plugins.dra.extended import (
    DEVICE_CLASS_PREFIX,
    backing_class,
    device_totals,
    is_dra_extended_resource_name,
    should_delegate,
)
from plugins.noderesources.scoring import (
    Scorer,
    least_allocated_scorer,
    most_allocated_scorer,
    requested_to_capacity_ratio_scorer,
    validate_function_shape,
)
from scheduler.api.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, pod_resource_errors, pod_score_requests
from scheduler.api.validation import qualified_name_errors
from scheduler.config.registry import PluginSpec
from scheduler.framework.capacity import UNBOUNDED
from scheduler.framework.interface import Code, CycleState, QueueingHint, QueueingHintFn, Status
from scheduler.framework.nominator import status_nominated_node

if TYPE_CHECKING:
    from plugins.dra.cel import SelectorCache
    from scheduler.api.dra import DeviceClass
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo, Snapshot

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
        errs += [f"{p}: invalid name {v!r}: {e}" for e in qualified_name_errors(v)]
    return errs


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateNodeResourcesFitArgs`` (after ``SetDefaults_NodeResourcesFitArgs``: no or empty
    ``resources`` mean cpu and memory, a weight left out or 0 means 1), field paths under ``path``."""
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
                name = r.get("name", "")
                if not isinstance(name, str):
                    errs.append(f"{rp}.name: must be a string")
                w = r.get("weight") or 1  # SetDefaults: 0 / absent -> 1
                if not _is_int(w) or not 0 < w <= 100:
                    errs.append(f"{rp}.weight: resource weight of {name} not in valid range (0, 100]")
    rtcr = ss.get("requestedToCapacityRatio")
    rp = f"{sp}.requestedToCapacityRatio"
    if typ == REQUESTED_TO_CAPACITY_RATIO:
        if rtcr is None:
            errs.append(f"{rp}: must be specified when type is {REQUESTED_TO_CAPACITY_RATIO}")
        elif not isinstance(rtcr, Mapping):
            errs.append(f"{rp}: must be an object")
        else:
            errs += _unknown(rtcr, ("shape",), rp)
            errs += validate_function_shape(rtcr.get("shape"), f"{rp}.shape")
    elif rtcr is not None and typ in STRATEGIES:
        errs.append(f"{rp}: must be nil when type is not {REQUESTED_TO_CAPACITY_RATIO}")
    return errs


def parse_args(args: Mapping[str, Any]) -> FitArgs:
    """Defaulted args (assumed valid: the config loader runs ``validate_args`` first)."""
    ss = args.get("scoringStrategy") or {}
    resources = tuple((str(r.get("name", "")), int(r.get("weight") or 1)) for r in ss.get("resources") or ())
    shape = tuple(
        (int(p.get("utilization", 0)), int(p.get("score", 0)))
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


_NO_CLASSES: Mapping[str, DeviceClass] = {}


def fits_request(
    requests: Mapping[str, int],
    node: NodeInfo,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
    classes: Mapping[str, DeviceClass] = _NO_CLASSES,
) -> list[Insufficient]:
    """``fitsRequest``: every resource that does not fit, in kube-scheduler's order (pods, cpu, memory,
    ephemeral-storage, then scalar resources, here sorted by name for determinism). ``classes``: the
    DeviceClasses, for resources DynamicResources serves on this node."""
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
        if classes and is_dra_extended_resource_name(res) and should_delegate(res, node.node, classes):
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


def _classes(state: CycleState) -> Mapping[str, DeviceClass]:
    snap: Snapshot | None = state.snapshot
    return snap.classes if snap is not None else _NO_CLASSES


class NodeResourcesFit:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = parse_args(args or {})
        self.resources: tuple[str, ...] = tuple(n for n, _ in self.args.resources)
        self._scorer = _scorer(self.args)
        # scoring of DRA-backed extended resources among ``resources`` (CEL on the class selectors)
        self._dra_scored = any(is_dra_extended_resource_name(r) for r in self.resources)
        self._selectors: SelectorCache | None = None
        # the DeviceClasses of the last cycle's snapshot, for the node hint (resources DRA serves)
        self._hint_classes: Mapping[str, DeviceClass] = _NO_CLASSES

    # --- filtering ---------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[None, Status]:
        errors = pod_resource_errors(pod)
        if errors:
            return None, Status.unresolvable(f'Pod "{pod.key}" is invalid: {"; ".join(errors)}')
        self._hint_classes = _classes(state)
        state.write(_PRE_FILTER_KEY, pod.requests)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        requests = state.read(_PRE_FILTER_KEY)
        if requests is None:
            requests = pod.requests
        bad = fits_request(
            requests, node, self.args.ignored_resources, self.args.ignored_resource_groups, _classes(state)
        )
        if not bad:
            return Status.ok()
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(b.unresolvable for b in bad) else Code.UNSCHEDULABLE
        return Status(code, tuple(b.reason for b in bad))

    # --- scoring -----------------------------------------------------------------------------------------

    def pod_score_requests(self, pod: Pod) -> tuple[int, ...]:
        """``calculatePodResourceRequestList``: cpu and memory with 100m / 200Mi per container without."""
        reqs = pod_score_requests(pod)
        return tuple(reqs.get(res, 0) for res in self.resources)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_PRE_SCORE_KEY, self.pod_score_requests(pod))
        return Status.ok()

    def _dra_totals(self, state: CycleState, node: NodeInfo, res: str) -> tuple[int, int]:
        """``calculateDRAExtendedResourceAllocatableRequest``: devices of the class mapped to ``res``."""
        snap: Snapshot | None = state.snapshot
        if snap is None:
            return 0, 0
        cls = backing_class(snap.classes, res)
        if cls is None:
            return 0, 0
        if self._selectors is None:
            from plugins.dra.cel import SelectorCache, get_engine

            self._selectors = SelectorCache(get_engine(None))
        return device_totals(node.node, snap.slices.for_node(node.name), cls, snap.ledger, self._selectors)

    def _allocatable_requested(self, state: CycleState, node: NodeInfo, res: str, pod_request: int) -> tuple[int, int]:
        """``calculateResourceAllocatableRequest``: (allocatable, requested by the node's pods)."""
        alloc = node.node.allocatable
        if res in (CPU, MEMORY):
            return alloc.get(res, 0), node.non_zero_requested.get(res, 0)
        if res == EPHEMERAL_STORAGE:
            return alloc.get(res, 0), node.requested.get(res, 0)
        if not is_scalar_resource(res):
            return 0, 0
        cap = alloc.get(res, 0)
        if cap == 0 and self._dra_scored:
            total, used = self._dra_totals(state, node, res)
            if total > 0:
                return total, used
        if res in alloc:
            return cap, node.requested.get(res, 0)
        return 0, 0

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        pod_requests = state.read(_PRE_SCORE_KEY)
        if pod_requests is None:
            pod_requests = self.pod_score_requests(pod)
        requested: list[int] = []
        allocatable: list[int] = []
        for res, want in zip(self.resources, pod_requests, strict=True):
            if want == 0 and is_scalar_resource(res):
                requested.append(0)
                allocatable.append(0)
                continue
            a, r = self._allocatable_requested(state, node, res, want)
            allocatable.append(a)
            requested.append(r + want if a else 0)
        return self._scorer(requested, allocatable)

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        classes = _classes(state)
        if classes and any(
            q and is_dra_extended_resource_name(r) and should_delegate(r, None, classes)
            for r, q in pod.requests.items()
        ):
            return None  # "signature disabled when dra extended resources are used in the cluster"
        return (tuple(sorted(pod.requests.items())), self.pod_score_requests(pod))

    # --- group capacity bound (scheduler.framework.capacity.ResourceCapacityPlugin) ----------------------------
    # What Filter's fitsRequest checks, as counts: how many members with equal requests fit on a node together.

    def _checks(self, res: str) -> bool:
        """Filter checks ``res`` (when requested): cpu, memory, ephemeral-storage and the scalar resources, but
        not the extended resources the args ignore."""
        if res in _BASIC:
            return True
        if not is_scalar_resource(res):
            return False
        args = self.args
        return not is_extended_resource(res) or not (
            res in args.ignored_resources
            or (args.ignored_resource_groups and res.split("/", 1)[0] in args.ignored_resource_groups)
        )

    def checked_resources(self, requests: Mapping[str, int]) -> list[str]:
        """The resources of ``requests`` Filter checks, in fitsRequest's order (cpu, memory, ephemeral-storage,
        then scalar resources by name)."""
        out = [r for r in _BASIC if requests.get(r, 0) > 0]
        out += [r for r in sorted(requests) if r not in _BASIC and requests[r] > 0 and self._checks(r)]
        return out

    def free_resources(
        self, info: NodeInfo, resources: Sequence[str], classes: Mapping[str, DeviceClass]
    ) -> dict[str, int]:
        """Allocatable minus requested of each of ``resources`` Filter checks; unbounded for an extended
        resource a DeviceClass maps that the node does not serve (DynamicResources allocates its devices)."""
        alloc, used = info.node.allocatable, info.requested
        out = {r: max(0, alloc.get(r, 0) - used.get(r, 0)) for r in resources if r in _BASIC or self._checks(r)}
        if classes:
            for r in out:
                if should_delegate(r, info.node, classes):
                    out[r] = UNBOUNDED
        return out

    def resource_room(self, requests: Mapping[str, int], info: NodeInfo, classes: Mapping[str, DeviceClass]) -> int:
        """Free pod slots, and the free amount of each checked resource divided by the request."""
        res = self.checked_resources(requests)
        free = _free(info, res, classes)
        cap = max(0, info.node.allocatable.get(PODS, 0) - info.pod_count)
        for r in res:
            cap = min(cap, free[r] // requests[r])
        return cap

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # More allocatable (node added or updated), a pod on a node deleted or scaled down (in-place
        # resize), or a DeviceClass mapping an extended resource the pod asks for.
        return (
            ("Node", "Add"),
            ("Node", "Update"),
            ("Pod", "Delete"),
            ("Pod", "Update"),
            ("DeviceClass", "Add"),
            ("DeviceClass", "Update"),
        )

    # --- queueing hints ----------------------------------------------------------------------------------------

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {
            ("Pod", "Delete"): self.hint_pod_event,
            ("Pod", "Update"): self.hint_pod_event,
            ("Node", "Add"): self.hint_node_change,
            ("Node", "Update"): self.hint_node_change,
            ("DeviceClass", "Add"): self.hint_device_class,
            ("DeviceClass", "Update"): self.hint_device_class,
        }

    def hint_pod_event(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterPodEvent`` (fit.go): a deleted pod that was neither assigned nor nominated
        held nothing; any other deletion may free room. An update is an in-place scale-down
        (``isSchedulableAfterPodScaleDown``): the waiting pod's own → queue; an unassigned pod's → skip; an
        assigned pod's → queue when one of the resources the waiting pod requests went down."""
        if new is None:
            assert old is not None
            if not old.node_name and not status_nominated_node(old):
                return QueueingHint.SKIP
            return QueueingHint.QUEUE
        if old is None:
            return QueueingHint.SKIP  # an added pod takes room, it frees none
        if new.uid == pod.uid:
            return QueueingHint.QUEUE
        if not new.node_name:
            return QueueingHint.SKIP
        for res, want in pod.requests.items():
            if want == 0 or not (res in _BASIC or is_scalar_resource(res)):
                continue
            if old.requests.get(res, 0) > new.requests.get(res, 0):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeChange`` (fit.go): skip unless the pod fits the node with nothing on it
        (``isFit``); a new node that fits → queue; an updated one → queue only when an allocatable the pod requests
        (or the pod count) grew, or a resource it requests is now served by DRA there
        (``haveAnyRequestedResourcesIncreased``)."""
        if new is None or not _fits_empty(pod.requests, new, self._hint_classes):
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if _increased(pod.requests, old, new, self._hint_classes) else QueueingHint.SKIP

    def hint_device_class(self, pod: Pod, old: DeviceClass | None, new: DeviceClass | None) -> QueueingHint:
        """upstream ``isSchedulableAfterDeviceClassEvent`` (fit.go): an update that keeps the extended resource name
        → skip; an added class whose implicit name (``deviceclass.resource.kubernetes.io/<class>``) the pod requests
        → queue; a class whose ``extendedResourceName`` the pod requests → queue; else skip."""
        if new is None:
            return QueueingHint.SKIP
        reqs = pod.requests
        if old is not None:
            if old.extended_resource_name == new.extended_resource_name:
                return QueueingHint.SKIP
        elif DEVICE_CLASS_PREFIX + new.name in reqs:
            return QueueingHint.QUEUE
        if new.extended_resource_name and new.extended_resource_name in reqs:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _fits_empty(requests: Mapping[str, int], node: Node, classes: Mapping[str, DeviceClass]) -> bool:
    """upstream ``isFit``: ``Fits`` on a NodeInfo holding only the node (no pod, nothing requested, no resource
    ignored)."""
    alloc = node.allocatable
    if alloc.get(PODS, 0) < 1:
        return False
    for res, want in requests.items():
        if want <= 0:
            continue
        if res in _BASIC:
            if want > alloc.get(res, 0):
                return False
        elif is_scalar_resource(res):
            if classes and is_dra_extended_resource_name(res) and should_delegate(res, node, classes):
                continue
            if want > alloc.get(res, 0):
                return False
    return True


def _increased(requests: Mapping[str, int], old: Node, new: Node, classes: Mapping[str, DeviceClass]) -> bool:
    """upstream ``haveAnyRequestedResourcesIncreased``."""
    before, after = old.allocatable, new.allocatable
    if after.get(PODS, 0) > before.get(PODS, 0):
        return True
    for res, want in requests.items():
        if want <= 0 or not (res in _BASIC or is_scalar_resource(res)):
            continue
        if after.get(res, 0) > before.get(res, 0):
            return True
        if res not in _BASIC and classes and should_delegate(res, new, classes):
            return True
    return False


_BASIC = (CPU, MEMORY, EPHEMERAL_STORAGE)  # checked whenever requested, in this order, before scalar resources


def _free(info: NodeInfo, resources: Sequence[str], classes: Mapping[str, DeviceClass]) -> dict[str, int]:
    """Allocatable minus requested of each of ``resources`` on the node (unbounded where DRA serves it)."""
    alloc, used = info.node.allocatable, info.requested
    out = {r: max(0, alloc.get(r, 0) - used.get(r, 0)) for r in resources}
    if classes:
        for r in resources:
            if should_delegate(r, info.node, classes):
                out[r] = UNBOUNDED
    return out


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
