"""The volume binder of VolumeBinding: pure decisions over the cycle's snapshot plus the assume cache.

Written from kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumebinding/binder.go`` (the
``SchedulerVolumeBinder``: ``GetPodVolumeClaims``, ``FindPodVolumes``, ``AssumePodVolumes``,
``RevertAssumedPodVolumes``, ``checkBindings``) and ``passive_assume_cache.go``:

* a pod's claims are sorted into *bound* (``volumeName`` and ``pv.kubernetes.io/bind-completed``),
  *unbound with delayed binding* (class ``WaitForFirstConsumer``, no ``volumeName``) and *unbound
  immediate* (everything else, including claims pre-bound by ``volumeName``);
* per node: the PV of each bound claim must exist (else ``ErrReasonPVNotExist``) and its node affinity
  match the node's labels (else ``ErrReasonNodeConflict``); a delayed claim already carrying
  ``volume.kubernetes.io/selected-node`` fits only that node; the others get the smallest matching
  Available PV of their class (claims taken smallest request first, a PV chosen once per pod), and those
  without one need dynamic provisioning: a provisioner (not ``kubernetes.io/no-provisioner``), the class's
  ``allowedTopologies`` matching the node (else ``ErrReasonBindConflict``) and, for CSI drivers with
  ``storageCapacity: true``, a CSIStorageCapacity of the class reachable from the node with a volume limit
  of at least the request (else ``ErrReasonNotEnoughSpace``);
* the assume cache holds, per PV and PVC, the version the scheduler decided on (claimRef + bound-by-
  controller on a PV; selected-node on a PVC) until the watch delivers a newer version of that object, so
  two pods scheduled one after the other never take the same PV.

Not implemented (documented deviations): the translation of in-tree PVs to CSI for the node-affinity checks
(upstream does it only when the node's CSINode lists the plugin as migrated; the PV's own node affinity is
checked here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from scheduler.api.model import Meta
from scheduler.api.storage import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    PVC_LOST,
    ClaimRef,
    CSIDriver,
    CSIStorageCapacity,
    MatchError,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    check_node_affinity,
    find_matching_volume,
    is_volume_bound_to_claim,
    match_topology_terms,
    pod_volumes,
    volume_is_for_pod,
)

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import Snapshot

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


class BinderError(Exception):
    """Something went wrong (upstream returns an error: the pod goes to backoff with status Error)."""


# --- the assume cache ---------------------------------------------------------------------------------


class AssumeCache:
    """``passiveAssumeCache`` for PVs and PVCs: an assumed object wins while the API object (from the
    cycle's snapshot) still has the resourceVersion the assumed one was made from; a newer API object
    expires it."""

    def __init__(self) -> None:
        self.pvs: dict[str, PersistentVolume] = {}
        self.pvcs: dict[str, PersistentVolumeClaim] = {}
        self._class_index: tuple[Mapping[str, Any], dict[str, list[PersistentVolume]]] | None = None

    def _overlay_pv(self, api: PersistentVolume) -> PersistentVolume:
        a = self.pvs.get(api.name)
        if a is None:
            return api
        if a.meta.resource_version == api.meta.resource_version:
            return a
        del self.pvs[api.name]  # the watch delivered a newer version: it wins
        return api

    def _overlay_pvc(self, api: PersistentVolumeClaim) -> PersistentVolumeClaim:
        a = self.pvcs.get(api.key)
        if a is None:
            return api
        if a.meta.resource_version == api.meta.resource_version:
            return a
        del self.pvcs[api.key]
        return api

    def pvs_of_class(self, pvs: Mapping[str, Any], klass: str) -> list[PersistentVolume]:
        """``ListPVs``: the PVs of a class (indexed on the API objects), assumed versions swapped in."""
        idx = self._class_index
        if idx is None or idx[0] is not pvs:
            by_class: dict[str, list[PersistentVolume]] = {}
            for name in sorted(pvs):
                pv = pvs[name]
                by_class.setdefault(pv.storage_class, []).append(pv)
            idx = self._class_index = (pvs, by_class)
        return [self._overlay_pv(pv) for pv in idx[1].get(klass, ())]

    def assume_pv(self, pv: PersistentVolume, api: PersistentVolume | None) -> None:
        if api is None or api.meta.resource_version != pv.meta.resource_version:
            raise BinderError(
                f"{pv.name!r} is out of sync (stored: {api.meta.resource_version if api else ''}, "
                f"assume: {pv.meta.resource_version})"
            )
        self.pvs[pv.name] = pv

    def assume_pvc(self, pvc: PersistentVolumeClaim, api: PersistentVolumeClaim | None) -> None:
        if api is None or api.meta.resource_version != pvc.meta.resource_version:
            raise BinderError(
                f"{pvc.key!r} is out of sync (stored: {api.meta.resource_version if api else ''}, "
                f"assume: {pvc.meta.resource_version})"
            )
        self.pvcs[pvc.key] = pvc

    def restore_pv(self, pv: PersistentVolume) -> None:
        a = self.pvs.get(pv.name)
        if a is not None and a.meta.resource_version == pv.meta.resource_version:
            del self.pvs[pv.name]

    def restore_pvc(self, pvc: PersistentVolumeClaim) -> None:
        a = self.pvcs.get(pvc.key)
        if a is not None and a.meta.resource_version == pvc.meta.resource_version:
            del self.pvcs[pvc.key]


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class StorageView:
    """The storage objects of one cycle: the snapshot's (the informers' listers) and, through the assume
    cache, the scheduler's own decisions not yet echoed by the watch."""

    def __init__(self, snapshot: Snapshot, assumed: AssumeCache) -> None:
        self.assumed = assumed
        self.pv_map: Mapping[str, PersistentVolume] = snapshot.objects_of("PersistentVolume")
        self.pvc_map: Mapping[str, PersistentVolumeClaim] = snapshot.objects_of("PersistentVolumeClaim")
        self.class_map: Mapping[str, StorageClass] = snapshot.objects_of("StorageClass")
        self.driver_map: Mapping[str, CSIDriver] = snapshot.objects_of("CSIDriver")
        self.capacity_map: Mapping[str, CSIStorageCapacity] = snapshot.objects_of("CSIStorageCapacity")

    def pvc_api(self, key: str) -> PersistentVolumeClaim | None:
        return self.pvc_map.get(key)

    def pvc(self, key: str) -> PersistentVolumeClaim | None:
        api = self.pvc_map.get(key)
        return None if api is None else self.assumed._overlay_pvc(api)

    def pv_api(self, name: str) -> PersistentVolume | None:
        return self.pv_map.get(name)

    def pv(self, name: str) -> PersistentVolume | None:
        api = self.pv_map.get(name)
        return None if api is None else self.assumed._overlay_pv(api)

    def pvs_of_class(self, klass: str) -> list[PersistentVolume]:
        return self.assumed.pvs_of_class(self.pv_map, klass)


# --- claims of a pod ------------------------------------------------------------------------------------


def pod_has_pvcs(pod: Pod, view: StorageView) -> tuple[bool, str | None]:
    """VolumeBinding ``podHasPVCs``: whether the pod uses claims, and the first reason it cannot use them
    yet (claim missing, lost, being deleted, or an ephemeral claim not owned by the pod)."""
    has = False
    for v in pod_volumes(pod):
        if not v.uses_claim:
            continue
        has = True
        pvc = view.pvc_api(f"{pod.namespace}/{v.claim_name}")
        if pvc is None:
            if v.ephemeral:
                return has, (
                    f"waiting for ephemeral volume controller to create the persistentvolumeclaim {_q(v.claim_name)}"
                )
            return has, f"persistentvolumeclaim {_q(v.claim_name)} not found"
        if pvc.phase == PVC_LOST:
            return has, (
                f"persistentvolumeclaim {_q(pvc.name)} bound to non-existent persistentvolume {_q(pvc.volume_name)}"
            )
        if pvc.meta.deleting:
            return has, f"persistentvolumeclaim {_q(pvc.name)} is being deleted"
        if v.ephemeral:
            err = volume_is_for_pod(pod, pvc)
            if err:
                return has, err
    return has, None


def _q(s: str) -> str:
    """Go's ``%q`` for plain names."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class PodVolumeClaims:
    bound: tuple[PersistentVolumeClaim, ...]
    delay: tuple[PersistentVolumeClaim, ...]  # unbound, WaitForFirstConsumer
    immediate: tuple[PersistentVolumeClaim, ...]  # unbound, Immediate (or pre-bound by volumeName)
    volumes_by_class: Mapping[str, tuple[PersistentVolume, ...]]  # PVs of the delayed claims' classes


def is_delay_binding(pvc: PersistentVolumeClaim, view: StorageView) -> bool:
    """``IsDelayBindingMode``: the claim's class exists and is WaitForFirstConsumer."""
    if not pvc.storage_class:
        return False
    klass = view.class_map.get(pvc.storage_class)
    return klass is not None and klass.wait_for_first_consumer


def get_pod_volume_claims(pod: Pod, view: StorageView) -> PodVolumeClaims:
    """``GetPodVolumeClaims`` (reads the claims through the assume cache)."""
    bound: list[PersistentVolumeClaim] = []
    delay: list[PersistentVolumeClaim] = []
    immediate: list[PersistentVolumeClaim] = []
    for v in pod_volumes(pod):
        if not v.uses_claim:
            continue
        key = f"{pod.namespace}/{v.claim_name}"
        pvc = view.pvc(key)
        if pvc is None:
            raise BinderError(f"error getting PVC {_q(key)}: persistentvolumeclaims {_q(key)} not found")
        if v.ephemeral:
            err = volume_is_for_pod(pod, pvc)
            if err:
                raise BinderError(err)
        if pvc.fully_bound:
            bound.append(pvc)
        elif is_delay_binding(pvc, view) and not pvc.volume_name:
            delay.append(pvc)
        else:
            immediate.append(pvc)
    by_class = {pvc.storage_class: tuple(view.pvs_of_class(pvc.storage_class)) for pvc in delay}
    return PodVolumeClaims(tuple(bound), tuple(delay), tuple(immediate), by_class)


# --- per node -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Binding:
    """``BindingInfo``: a PV chosen for a claim."""

    pv: PersistentVolume
    pvc: PersistentVolumeClaim


@dataclass(frozen=True, slots=True)
class Provision:
    """``DynamicProvision``: a claim to provision, with the capacity that makes it fit (if tracked)."""

    pvc: PersistentVolumeClaim
    capacity: CSIStorageCapacity | None = None


@dataclass(slots=True)
class PodVolumes:
    static_bindings: list[Binding] = field(default_factory=list)
    dynamic_provisions: list[Provision] = field(default_factory=list)


def _check_bound_claims(
    claims: Iterable[PersistentVolumeClaim], labels: Mapping[str, str], view: StorageView
) -> tuple[bool, bool]:
    """``checkBoundClaims``: (node affinity satisfied, every PV found); stops at the first problem."""
    for pvc in claims:
        pv = view.pv(pvc.volume_name)
        if pv is None:
            return True, False
        if not check_node_affinity(pv, labels):
            return False, True
    return True, True


def _find_matching_volumes(
    claims: Iterable[PersistentVolumeClaim],
    volumes_by_class: Mapping[str, tuple[PersistentVolume, ...]],
    labels: Mapping[str, str],
) -> tuple[bool, list[Binding], list[PersistentVolumeClaim]]:
    """``findMatchingVolumes``: claims by increasing request, each PV chosen at most once."""
    chosen: dict[str, PersistentVolume] = {}
    bindings: list[Binding] = []
    unbound: list[PersistentVolumeClaim] = []
    found = True
    for pvc in sorted(claims, key=lambda c: c.request.value if c.request is not None else 0):
        try:
            pv = find_matching_volume(pvc, volumes_by_class.get(pvc.storage_class, ()), labels, chosen, True)
        except MatchError as e:
            raise BinderError(str(e)) from None
        if pv is None:
            unbound.append(pvc)
            found = False
            continue
        chosen[pv.name] = pv
        bindings.append(Binding(pv, pvc))
    return found, bindings, unbound


def _has_enough_capacity(
    provisioner: str, pvc: PersistentVolumeClaim, klass: StorageClass, labels: Mapping[str, str], view: StorageView
) -> tuple[bool, CSIStorageCapacity | None]:
    """``hasEnoughCapacity``: only for CSI drivers with ``storageCapacity: true``; capacities tried in
    namespace/name order."""
    if pvc.request is None:
        return True, None
    driver = view.driver_map.get(provisioner)
    if driver is None or not driver.storage_capacity:
        return True, None
    size = pvc.request.int_value()
    for key in sorted(view.capacity_map):
        cap = view.capacity_map[key]
        if cap.storage_class != klass.name:
            continue
        limit = cap.volume_limit
        if limit is None or limit.int_value() < size:
            continue
        if cap.node_topology is None or not cap.node_topology.matches(labels):
            continue
        return True, cap
    return False, None


def _check_volume_provisions(
    claims: Iterable[PersistentVolumeClaim], labels: Mapping[str, str], view: StorageView
) -> tuple[bool, bool, list[Provision]]:
    """``checkVolumeProvisions``: (provisioning possible, storage sufficient, the provisions)."""
    provisions: list[Provision] = []
    for pvc in claims:
        if not pvc.storage_class:
            raise BinderError(f'no class for claim "{pvc.key}"')
        klass = view.class_map.get(pvc.storage_class)
        if klass is None:
            raise BinderError(f"failed to find storage class {_q(pvc.storage_class)}")
        if not klass.provisioner or klass.provisioner == NOT_SUPPORTED_PROVISIONER:
            return False, True, []
        if not match_topology_terms(klass.allowed_topologies, labels):
            return False, True, []
        enough, cap = _has_enough_capacity(klass.provisioner, pvc, klass, labels, view)
        if not enough:
            return True, False, []
        provisions.append(Provision(pvc, cap))
    return True, True, provisions


def find_pod_volumes(
    claims: PodVolumeClaims, node_name: str, labels: Mapping[str, str], view: StorageView
) -> tuple[PodVolumes, list[str]]:
    """``FindPodVolumes``: what the pod's claims need on this node, and why the node does not fit
    (reasons in upstream's order: node conflict, bind conflict, not enough space, PV missing)."""
    unbound_ok = bound_ok = storage_ok = pvs_found = True
    bindings: list[Binding] = []
    provisions: list[Provision] = []
    if claims.bound:
        bound_ok, pvs_found = _check_bound_claims(claims.bound, labels, view)
    if claims.delay:
        to_match: list[PersistentVolumeClaim] = []
        to_provision: list[PersistentVolumeClaim] = []
        fast_fail = False
        for pvc in claims.delay:
            selected = pvc.selected_node
            if selected is not None:
                if selected != node_name:
                    unbound_ok = False  # fast path: only the selected node
                    fast_fail = True
                    break
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        if not fast_fail:
            if to_match:
                unbound_ok, bindings, unmatched = _find_matching_volumes(to_match, claims.volumes_by_class, labels)
                to_provision.extend(unmatched)
            if to_provision:
                unbound_ok, storage_ok, provisions = _check_volume_provisions(to_provision, labels, view)
    reasons = []
    if not bound_ok:
        reasons.append(ERR_REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(ERR_REASON_BIND_CONFLICT)
    if not storage_ok:
        reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
    if not pvs_found:
        reasons.append(ERR_REASON_PV_NOT_EXIST)
    return PodVolumes(bindings, provisions), reasons


# --- assume / revert ------------------------------------------------------------------------------------


def _with_annotation(meta: Meta, key: str, value: str) -> Meta:
    return replace(meta, annotations={**meta.annotations, key: value})


def bind_volume_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """``GetBindVolumeToClaim``: the PV with claimRef to the claim (and ``bound-by-controller`` when it was
    not bound or pre-bound to it), and whether anything changed. ``raw`` is rewritten to match."""
    set_by_controller = not is_volume_bound_to_claim(pv, pvc)
    ref = pv.claim_ref
    raw = dict(pv.raw)
    meta = pv.meta
    dirty = False
    if ref is None or ref.name != pvc.name or ref.namespace != pvc.namespace or ref.uid != pvc.meta.uid:
        claim_ref = {
            "kind": "PersistentVolumeClaim",
            "namespace": pvc.namespace,
            "name": pvc.name,
            "uid": pvc.meta.uid,
            "apiVersion": "v1",
            "resourceVersion": pvc.meta.resource_version,
        }
        raw["spec"] = {**(raw.get("spec") or {}), "claimRef": claim_ref}
        ref = ClaimRef(pvc.namespace, pvc.name, pvc.meta.uid)
        dirty = True
    if set_by_controller and ANN_BOUND_BY_CONTROLLER not in meta.annotations:
        meta = _with_annotation(meta, ANN_BOUND_BY_CONTROLLER, "yes")
        m = dict(raw.get("metadata") or {})
        m["annotations"] = {**(m.get("annotations") or {}), ANN_BOUND_BY_CONTROLLER: "yes"}
        raw["metadata"] = m
        dirty = True
    if not dirty:
        return pv, False
    return replace(pv, meta=meta, claim_ref=ref, raw=raw), True


def claim_with_selected_node(pvc: PersistentVolumeClaim, node: str) -> PersistentVolumeClaim:
    """The claim with ``volume.kubernetes.io/selected-node: <node>`` (what triggers provisioning)."""
    raw = dict(pvc.raw)
    m = dict(raw.get("metadata") or {})
    m["annotations"] = {**(m.get("annotations") or {}), ANN_SELECTED_NODE: node}
    raw["metadata"] = m
    return replace(pvc, meta=_with_annotation(pvc.meta, ANN_SELECTED_NODE, node), raw=raw)


def pod_volumes_bound(pod: Pod, view: StorageView) -> bool:
    """``arePodVolumesBound`` (through the assume cache)."""
    for v in pod_volumes(pod):
        if not v.uses_claim:
            continue
        pvc = view.pvc(f"{pod.namespace}/{v.claim_name}")
        if pvc is None or not pvc.fully_bound:
            return False
        if v.ephemeral and volume_is_for_pod(pod, pvc):
            return False
    return True


def assume_pod_volumes(pod: Pod, node: str, volumes: PodVolumes, view: StorageView) -> bool:
    """``AssumePodVolumes``: True when every claim is already bound (nothing to do); otherwise the chosen
    PVs (claimRef set) and the claims to provision (selected-node set) go into the assume cache and
    ``volumes`` is rewritten with the assumed objects. Raises BinderError (after reverting) on a stale
    object."""
    if pod_volumes_bound(pod, view):
        return True
    cache = view.assumed
    new_bindings: list[Binding] = []
    new_provisions: list[Provision] = []
    try:
        for b in volumes.static_bindings:
            new_pv, dirty = bind_volume_to_claim(b.pv, b.pvc)
            if dirty:
                cache.assume_pv(new_pv, view.pv_api(new_pv.name))
            new_bindings.append(Binding(new_pv, b.pvc))
        for p in volumes.dynamic_provisions:
            claim = claim_with_selected_node(p.pvc, node)
            cache.assume_pvc(claim, view.pvc_api(claim.key))
            new_provisions.append(Provision(claim))
    except BinderError:
        for b in new_bindings:
            cache.restore_pv(b.pv)
        for p in new_provisions:
            cache.restore_pvc(p.pvc)
        raise
    volumes.static_bindings = new_bindings
    volumes.dynamic_provisions = new_provisions
    return False


def revert_assumed_pod_volumes(volumes: PodVolumes, cache: AssumeCache) -> None:
    """``RevertAssumedPodVolumes``."""
    for b in volumes.static_bindings:
        cache.restore_pv(b.pv)
    for p in volumes.dynamic_provisions:
        cache.restore_pvc(p.pvc)


def meta_rv(obj: Mapping[str, Any]) -> int:
    """metadata.resourceVersion as an int (0 when missing or not a number)."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(rv) if rv is not None else 0
    except (TypeError, ValueError):
        return 0
