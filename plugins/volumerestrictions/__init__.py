"""VolumeRestrictions: in-tree disks that cannot be mounted by two pods of one node, and ReadWriteOncePod
claims already in use.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go``:

* PreFilter: every ``persistentVolumeClaim`` volume's claim must exist (else UnschedulableAndUnresolvable
  ``persistentvolumeclaim "x" not found``); the claims with access mode ``ReadWriteOncePod`` that a pod
  already on some node uses (including pods assumed in this run) are counted. Skip when the pod has no
  GCE PD / AWS EBS / RBD / iSCSI volume and no such conflict.
* Filter: ``node(s) had no available disk`` (Unschedulable) when a pod on the node uses the same disk:
  GCE PD same ``pdName`` unless both read-only; AWS EBS same ``volumeID``; iSCSI same ``iqn`` unless both
  read-only; RBD a shared monitor, same pool (default ``rbd``) and image, unless both read-only. Then
  ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by
  another pod`` (Unschedulable) when a ReadWriteOncePod claim of the pod is in use.
* AddPod/RemovePod (preemption's dry run): a pod added or removed changes the count by the number of its
  volumes naming one of the pod's ReadWriteOncePod claims (same namespace: upstream compares names only,
  which would let a victim in another namespace look as if it freed the claim). A new state object is
  written, the one PreFilter wrote is never modified.
* Signature: None for pods with claims (the ReadWriteOncePod check reads pods of every node); otherwise
  the pod's conflict-relevant volumes.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from scheduler.api.storage import READ_WRITE_ONCE_POD, PodVolume, pod_claim_keys, pod_volumes
from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, PreFilterResult, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.api.storage import PersistentVolumeClaim
    from scheduler.cache.cache import NodeInfo, Snapshot

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)
_CONFLICT_KINDS = frozenset({"gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi"})
_NODE_MEMO = "VolumeRestrictions/pvcs"


def needs_restrictions_check(v: PodVolume) -> bool:
    return v.kind in _CONFLICT_KINDS


def is_volume_conflict(v: PodVolume, existing: Sequence[PodVolume]) -> bool:
    """``isVolumeConflict``: does ``v`` conflict with any volume of an existing pod."""
    for e in existing:
        if e.kind != v.kind:
            continue
        both_ro = v.read_only and e.read_only
        if v.kind in ("gcePersistentDisk", "iscsi"):
            if v.disk == e.disk and not both_ro:
                return True
        elif v.kind == "awsElasticBlockStore":
            if v.disk == e.disk:
                return True
        elif (
            v.kind == "rbd"
            and set(v.rbd_monitors) & set(e.rbd_monitors)
            and v.rbd_pool == e.rbd_pool
            and v.disk == e.disk
            and not both_ro
        ):
            return True
    return False


def satisfies_volume_conflicts(pod: Pod, node: NodeInfo) -> bool:
    for v in pod_volumes(pod):
        if not needs_restrictions_check(v):
            continue
        for other in node.pod_list:
            if is_volume_conflict(v, pod_volumes(other)):
                return False
    return True


def _node_pvcs(node: NodeInfo) -> frozenset[str]:
    """``ns/name`` of the claims the node's pods use (upstream NodeInfo.PVCRefCounts), per NodeInfo."""
    cached: frozenset[str] | None = node.memo.get(_NODE_MEMO)
    if cached is None:
        cached = node.memo[_NODE_MEMO] = frozenset(k for p in node.pod_list for k in pod_claim_keys(p))
    return cached


def is_pvc_used_by_pods(snapshot: Snapshot, key: str) -> bool:
    """``StorageInfos().IsPVCUsedByPods``: a pod on some node (bound or assumed) uses the claim."""
    return any(key in _node_pvcs(n) for n in snapshot.nodes)


@dataclass(frozen=True, slots=True)
class _State:
    rwop_claims: frozenset[str]  # names of the pod's ReadWriteOncePod claims
    conflicting: int  # how many of them a scheduled pod uses


class VolumeRestrictions:
    name: ClassVar[str] = NAME

    def __init__(self, args: object = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        vols = pod_volumes(pod)
        needs_check = any(needs_restrictions_check(v) for v in vols)
        pvcs = state.snapshot.objects_of("PersistentVolumeClaim")
        rwop: set[str] = set()
        for v in vols:
            if v.kind != "persistentVolumeClaim":
                continue
            pvc: PersistentVolumeClaim | None = pvcs.get(f"{pod.namespace}/{v.claim_name}")
            if pvc is None:
                return None, Status.unresolvable(f'persistentvolumeclaim "{v.claim_name}" not found')
            if READ_WRITE_ONCE_POD in pvc.access_modes:
                rwop.add(pvc.name)
        conflicting = sum(1 for c in rwop if is_pvc_used_by_pods(state.snapshot, f"{pod.namespace}/{c}"))
        if not needs_check and conflicting == 0:
            return None, Status.skip()
        state.write(NAME, _State(frozenset(rwop), conflicting))
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not satisfies_volume_conflicts(pod, node):
            return Status.unschedulable(ERR_REASON_DISK_CONFLICT)
        s: _State | None = state.read(NAME)
        if s is None:
            return Status.error(f'cannot read "PreFilter{NAME}" from cycleState')
        if s.conflicting > 0:
            return Status.unschedulable(ERR_REASON_RWOP_CONFLICT)
        return Status.ok()

    # --- PreFilterExtensions (preemption's dry run) -------------------------------------------------------

    def _update_with_pod(self, state: CycleState, pod_to_schedule: Pod, other: Pod, multiplier: int) -> Status:
        """``updateWithPod``: the pod added to / removed from a node uses this many of the ReadWriteOncePod
        claims. Claims are matched by namespace and name (upstream compares names only)."""
        s: _State | None = state.read(NAME)
        if s is None:
            return Status.ok()  # PreFilter skipped the plugin: its Filter does not run either
        if other.namespace == pod_to_schedule.namespace:
            n = sum(
                1 for v in pod_volumes(other) if v.kind == "persistentVolumeClaim" and v.claim_name in s.rwop_claims
            )
            if n:
                state.write(NAME, _State(s.rwop_claims, s.conflicting + multiplier * n))
        return Status.ok()

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo) -> Status:
        return self._update_with_pod(state, pod_to_schedule, pod_to_add, 1)

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status:
        return self._update_with_pod(state, pod_to_schedule, pod_to_remove, -1)

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        vols = pod_volumes(pod)
        if any(v.uses_claim for v in vols):
            return None
        return tuple(sorted(v.source_json for v in vols if needs_restrictions_check(v)))

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (
            ("Pod", "Delete"),  # a pod using the disk or the ReadWriteOncePod claim went away
            ("Node", "Add"),
            ("PersistentVolumeClaim", "Add"),  # the claim the pod waits for was created
        )


SPEC = PluginSpec(
    name=NAME,
    factory=VolumeRestrictions,
    points=frozenset({"preFilter", "filter"}),
    validate_args=no_args,
)

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_RWOP_CONFLICT",
    "NAME",
    "SPEC",
    "VolumeRestrictions",
    "is_volume_conflict",
]
