"""VolumeBinding: a pod's PersistentVolumeClaims (and generic ephemeral volumes) decide where it can run,
and the scheduler binds the PVs it chose / triggers provisioning before binding the pod.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumebinding/volume_binding.go`` (the decisions are
in :mod:`plugins.volumebinding.binder`):

* PreFilter: Skip when the pod uses no claim (``persistentVolumeClaim`` or ``ephemeral`` volumes); a
  missing claim (``persistentvolumeclaim "x" not found``; for an ephemeral volume ``waiting for ephemeral
  volume controller to create the persistentvolumeclaim "x"``), a ``Lost`` claim, a claim being deleted or
  an ephemeral claim not controlled by the pod is UnschedulableAndUnresolvable with upstream's text; so is
  an unbound Immediate claim (``pod has unbound immediate PersistentVolumeClaims``), which the PV
  controller must bind first.
* Filter: ``FindPodVolumes`` on the node; its conflict reasons, all of them, UnschedulableAndUnresolvable.
* PreScore/Score (the StorageCapacityScoring gate is beta and on by default in 1.37, so the scorer exists):
  for the PVs chosen on the node, per storage class ``requested * 100 / capacity`` through the ``shape``
  (default: utilization 0 -> score 10, 100 -> 0, scores x10), averaged over classes and rounded; without
  static bindings, the CSIStorageCapacity found for the claims to provision (none -> 0). Skip for pods
  without claims (upstream scores them 0 everywhere).
* Reserve: ``AssumePodVolumes`` into the plugin's assume cache (another pod of the same run cannot take
  the same PV or see the claim unselected); Unreserve reverts it.
* PreBind: what kube-scheduler writes: each chosen PV updated with ``spec.claimRef`` (+ annotation
  ``pv.kubernetes.io/bound-by-controller``), each claim to provision updated with
  ``volume.kubernetes.io/selected-node: <node>``; then it polls the API (PVs, PVCs, the pod) until the PV
  controller has bound every claim (``volumeName`` + ``pv.kubernetes.io/bind-completed``), failing on what
  upstream's ``checkBindings`` fails on (claimRef reset, selected-node dropped = provisioning failed, PV
  node affinity not matching, pod deleted) or after ``bindTimeoutSeconds`` (``binding volumes: context
  deadline exceeded``). There is no API rollback, as upstream. Polling starts at once and backs off to one
  second (upstream waits a first second). In ``simulate``, :class:`scheduler.simulate.volumes.VolumeControllers`
  plays kube-controller-manager (and the external provisioner) while PreBind polls.
* Signature: None for a pod with claims (the result depends on PVs, PVCs and classes); pods without claims
  are skipped at PreFilter and keep their reuse.

Args ``VolumeBindingArgs``: ``bindTimeoutSeconds`` (default 600, >= 0), ``shape`` (utilization/score
points, sorted, utilization 0..100, score 0..10; default as above). Validation as
``ValidateVolumeBindingArgsWithOptions`` with the gate on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

from plugins.noderesources.scoring import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    broken_linear_function,
    validate_function_shape,
)
from plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    AssumeCache,
    BinderError,
    Binding,
    PodVolumeClaims,
    PodVolumes,
    Provision,
    StorageView,
    assume_pod_volumes,
    find_pod_volumes,
    get_pod_volume_claims,
    meta_rv,
    pod_has_pvcs,
    revert_assumed_pod_volumes,
)
from scheduler.api.clusterapi import ApiError, NotFound
from scheduler.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    check_node_affinity,
    pod_volumes,
    pv_from,
    pvc_from,
)
from scheduler.config.registry import PluginSpec
from scheduler.framework.interface import CycleState, PreFilterResult, Status

if TYPE_CHECKING:
    from scheduler.api.clusterapi import ClusterAPI, Obj
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

NAME = "VolumeBinding"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
DEFAULT_SHAPE = ({"utilization": 0, "score": MAX_CUSTOM_PRIORITY_SCORE}, {"utilization": 100, "score": 0})

# --- args -------------------------------------------------------------------------------------------------


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidateVolumeBindingArgsWithOptions`` (StorageCapacityScoring on). An empty ``shape`` takes the
    default (defaulting runs before validation upstream)."""
    errs = [f"{path}.{k}: unknown field" for k in args if k not in ("bindTimeoutSeconds", "shape")]
    t = args.get("bindTimeoutSeconds")
    if t is not None:
        if not _is_int(t):
            errs.append(f"{path}.bindTimeoutSeconds: must be an integer")
        elif t < 0:
            errs.append(f"{path}.bindTimeoutSeconds: invalid BindTimeoutSeconds, should not be a negative value")
    shape = args.get("shape")
    if shape is None or shape == []:
        return errs
    sp = f"{path}.shape"
    if not isinstance(shape, list):
        return [*errs, f"{sp}: must be a list"]
    return [*errs, *validate_function_shape(shape, sp)]


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    bind_timeout_seconds: int
    shape: tuple[tuple[int, int], ...]  # (utilization, score 0..10)


def parse_args(args: Mapping[str, Any] | None) -> VolumeBindingArgs:
    args = args or {}
    t = args.get("bindTimeoutSeconds")
    shape = args.get("shape") or DEFAULT_SHAPE
    return VolumeBindingArgs(
        bind_timeout_seconds=t if _is_int(t) else DEFAULT_BIND_TIMEOUT_SECONDS,
        shape=tuple((int(p.get("utilization", 0)), int(p.get("score", 0))) for p in shape),
    )


# --- plugin -----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _State:
    claims: PodVolumeClaims | None = None  # None: the pod uses no claim
    view: StorageView | None = None
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    has_static_bindings: bool = False
    all_bound: bool = False


class VolumeBinding:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = parse_args(args)
        self.bind_timeout = float(self.args.bind_timeout_seconds)
        scale = 100 // MAX_CUSTOM_PRIORITY_SCORE
        self._shape = broken_linear_function([(u, s * scale) for u, s in self.args.shape])
        self.assumed = AssumeCache()
        # PreBind's waits between two looks at the API (the last one repeats); upstream polls every second.
        self.poll_delays: tuple[float, ...] = (0.0, 0.01, 0.1, 0.5, 1.0)

    # --- filtering ------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        view = StorageView(state.snapshot, self.assumed)
        has, err = pod_has_pvcs(pod, view)
        if err is not None:
            return None, Status.unresolvable(err)
        if not has:
            state.write(NAME, _State())
            return None, Status.skip()
        try:
            claims = get_pod_volume_claims(pod, view)
        except BinderError as e:
            return None, Status.error(str(e))
        if claims.immediate:
            return None, Status.unresolvable(ERR_UNBOUND_IMMEDIATE)
        state.write(NAME, _State(claims=claims, view=view))
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s: _State | None = state.read(NAME)
        if s is None or s.claims is None or s.view is None:
            return Status.error(f"reading {NAME!r} from cycleState: not found")
        try:
            vols, reasons = find_pod_volumes(s.claims, node.name, node.node.labels, s.view)
        except BinderError as e:
            return Status.error(str(e))
        if reasons:
            return Status.unresolvable(*reasons)
        s.by_node[node.name] = vols
        s.has_static_bindings = s.has_static_bindings or bool(vols.static_bindings)
        return Status.ok()

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        if any(v.uses_claim for v in pod_volumes(pod)):
            return None
        return ()

    # --- scoring --------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        s: _State | None = state.read(NAME)
        if s is None or s.claims is None:
            return Status.skip()
        return Status.ok()

    def _class_score(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return self._shape(MAX_UTILIZATION)
        return self._shape(requested * MAX_UTILIZATION // capacity)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s: _State | None = state.read(NAME)
        vols = s.by_node.get(node.name) if s is not None else None
        if vols is None:
            return 0
        classes: dict[str, list[int]] = {}  # class -> [requested, capacity]
        if vols.static_bindings:
            for b in vols.static_bindings:
                r = classes.setdefault(b.pv.storage_class, [0, 0])
                r[0] += b.pvc.request_bytes
                r[1] += b.pv.capacity.int_value() if b.pv.capacity is not None else 0
        else:
            for p in vols.dynamic_provisions:
                if p.capacity is None:
                    continue
                r = classes.setdefault(p.pvc.storage_class, [0, 0])
                # not +=: two claims of one class share the node's capacity of that class
                r[1] = p.capacity.capacity.int_value() if p.capacity.capacity is not None else 0
                r[0] += p.pvc.request_bytes
        if not classes:
            return 0
        total = sum(self._class_score(req, cap) for req, cap in classes.values())
        n = len(classes)
        return (2 * total + n) // (2 * n)  # math.Round(total / n), total >= 0

    # --- reserve ----------------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        s: _State | None = state.read(NAME)
        if s is None:
            return Status.ok()
        vols = s.by_node.get(node)
        if vols is None or s.view is None:
            s.all_bound = True  # the pod uses no claim
            return Status.ok()
        try:
            s.all_bound = assume_pod_volumes(pod, node, vols, s.view)
        except BinderError as e:
            return Status.error(str(e))
        return Status.ok()

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        s: _State | None = state.read(NAME)
        if s is None:
            return
        vols = s.by_node.get(node)
        if vols is not None:
            revert_assumed_pod_volumes(vols, self.assumed)

    # --- binding ----------------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status:
        s: _State | None = state.read(NAME)
        if s is None or s.all_bound:
            return Status.skip()
        vols = s.by_node.get(node)
        if vols is None:
            return Status.error(f"no pod volume found for node {node!r}")
        try:
            await self._bind_api_update(api, vols)
        except ApiError as e:
            return Status.error(str(e))
        info = state.snapshot.node_map.get(node)
        labels = info.node.labels if info is not None else {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bind_timeout
        i = 0
        while True:
            await asyncio.sleep(self.poll_delays[min(i, len(self.poll_delays) - 1)])
            i += 1
            try:
                if await self._check_bindings(api, pod, node, labels, vols):
                    return Status.ok()
            except (ApiError, BinderError) as e:
                return Status.error(f"binding volumes: {e}")
            if loop.time() >= deadline:
                return Status.error("binding volumes: context deadline exceeded")

    async def _bind_api_update(self, api: ClusterAPI, vols: PodVolumes) -> None:
        """``bindAPIUpdate``: the PVs (claimRef), then the claims (selected-node); the assumed versions of
        what was not written are reverted on failure."""
        done_b = done_p = 0
        try:
            for i, b in enumerate(vols.static_bindings):
                new = await api.update("PersistentVolume", dict(b.pv.raw))
                vols.static_bindings[i] = Binding(pv_from(new), b.pvc)
                done_b += 1
            for i, p in enumerate(vols.dynamic_provisions):
                new = await api.update("PersistentVolumeClaim", dict(p.pvc.raw))
                vols.dynamic_provisions[i] = Provision(pvc_from(new), p.capacity)
                done_p += 1
        except ApiError:
            revert_assumed_pod_volumes(
                PodVolumes(vols.static_bindings[done_b:], vols.dynamic_provisions[done_p:]), self.assumed
            )
            raise

    async def _check_bindings(
        self, api: ClusterAPI, pod: Pod, node: str, labels: Mapping[str, str], vols: PodVolumes
    ) -> bool:
        """``checkBindings``: True when every claim the pod's binding depends on is fully bound; raises on
        the conditions that need a new scheduling attempt."""
        try:
            await api.get("Pod", pod.namespace, pod.name)
        except NotFound as e:
            raise BinderError(f"pod does not exist any more: {e}") from None
        for b in vols.static_bindings:
            try:
                pv_raw = await api.get("PersistentVolume", "", b.pv.name)
                pvc_raw = await api.get("PersistentVolumeClaim", b.pvc.namespace, b.pvc.name)
            except NotFound as e:
                raise BinderError(f"failed to check binding: {e}") from None
            if meta_rv(b.pv.raw) > meta_rv(pv_raw):
                return False  # the watch has not shown our own update yet
            pv = pv_from(pv_raw)
            if not check_node_affinity(pv, labels):
                raise BinderError(
                    f'pv "{pv.name}" node affinity doesn\'t match node "{node}": no matching NodeSelectorTerms'
                )
            if pv.claim_ref is None or not pv.claim_ref.uid:
                raise BinderError(f'ClaimRef got reset for pv "{pv.name}"')
            if not _fully_bound(pvc_raw):
                return False
        for p in vols.dynamic_provisions:
            try:
                pvc_raw = await api.get("PersistentVolumeClaim", p.pvc.namespace, p.pvc.name)
            except NotFound as e:
                raise BinderError(f"failed to check provisioning pvc: {e}") from None
            if meta_rv(p.pvc.raw) > meta_rv(pvc_raw):
                return False
            anns = (pvc_raw.get("metadata") or {}).get("annotations")
            if not anns:
                raise BinderError(f'selectedNode annotation reset for PVC "{p.pvc.name}"')
            if anns.get(ANN_SELECTED_NODE, "") != node:
                raise BinderError(f'provisioning failed for PVC "{p.pvc.name}"')
            volume_name = (pvc_raw.get("spec") or {}).get("volumeName")
            if volume_name:
                try:
                    pv = pv_from(await api.get("PersistentVolume", "", volume_name))
                except NotFound:
                    return False  # not seen yet; a deleted PV unbinds the claim eventually
                if not check_node_affinity(pv, labels):
                    raise BinderError(
                        f'pv "{pv.name}" node affinity doesn\'t match node "{node}": no matching NodeSelectorTerms'
                    )
            if not _fully_bound(pvc_raw):
                return False
        return True

    # --- events -----------------------------------------------------------------------------------------

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (
            # missing or mis-configured classes (allowedTopologies, binding mode)
            ("StorageClass", "Add"),
            ("StorageClass", "Update"),
            # claims created or bound, PVs created or freed
            ("PersistentVolumeClaim", "Add"),
            ("PersistentVolumeClaim", "Update"),
            ("PersistentVolume", "Add"),
            ("PersistentVolume", "Update"),
            # node labels matching a PV's node affinity or a class's allowed topologies
            ("Node", "Add"),
            ("Node", "Update"),
            ("CSINode", "Add"),
            ("CSINode", "Update"),
            # storage capacity tracking switched off, or more capacity
            ("CSIDriver", "Update"),
            ("CSIStorageCapacity", "Add"),
            ("CSIStorageCapacity", "Update"),
        )


def _fully_bound(pvc_raw: Obj) -> bool:
    m = pvc_raw.get("metadata") or {}
    return bool((pvc_raw.get("spec") or {}).get("volumeName")) and ANN_BIND_COMPLETED in (m.get("annotations") or {})


SPEC = PluginSpec(
    name=NAME,
    factory=VolumeBinding,
    points=frozenset({"preFilter", "filter", "preScore", "score", "reserve", "preBind"}),
    validate_args=validate_args,
    default_args={
        "bindTimeoutSeconds": DEFAULT_BIND_TIMEOUT_SECONDS,
        "shape": [dict(p) for p in DEFAULT_SHAPE],
    },
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_UNBOUND_IMMEDIATE",
    "NAME",
    "SPEC",
    "VolumeBinding",
    "parse_args",
    "validate_args",
]
