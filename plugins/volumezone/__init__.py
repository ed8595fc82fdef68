"""VolumeZone: the zone and region labels of a pod's bound PersistentVolumes must match the node's.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/volumezone/volume_zone.go``:

* PreFilter: for each ``persistentVolumeClaim`` volume (generic ephemeral volumes are not looked at, as
  upstream): the claim must exist (``persistentvolumeclaim "x" not found``); an unbound claim is skipped
  when its class is WaitForFirstConsumer, otherwise UnschedulableAndUnresolvable (``PersistentVolumeClaim
  had no pv name and storageClass name``, ``storageclass.storage.k8s.io "x" not found``, ``PersistentVolume
  had no name``); the bound PV must exist (``persistentvolume "x" not found``). The PV's labels
  ``failure-domain.beta.kubernetes.io/zone``, ``.../region``, ``topology.kubernetes.io/zone``,
  ``.../region`` give the topologies (a value may list zones separated by ``__``). Skip when there are none.
* Filter: a node without any of those four labels fits (single-zone clusters); otherwise each PV topology
  must find its key on the node (a beta key also matches the node's GA key) with one of the listed values,
  else UnschedulableAndUnresolvable ``node(s) had no available volume zone``.
* Signature: None for pods with claims (the answer depends on PVs and PVCs).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from scheduler.api.storage import (
    LABEL_BETA_REGION,
    LABEL_BETA_ZONE,
    LABEL_REGION,
    LABEL_ZONE,
    pod_volumes,
    pv_zone_topologies,
)
from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, PreFilterResult, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.api.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
    from scheduler.cache.cache import NodeInfo

NAME = "VolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
TOPOLOGY_LABELS = (LABEL_BETA_ZONE, LABEL_BETA_REGION, LABEL_ZONE, LABEL_REGION)
_TO_GA = {LABEL_BETA_ZONE: LABEL_ZONE, LABEL_BETA_REGION: LABEL_REGION}


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


class VolumeZone:
    name: ClassVar[str] = NAME

    def __init__(self, args: object = None) -> None:
        pass

    def _topologies(self, state: CycleState, pod: Pod) -> tuple[list[PVTopology], Status]:
        """``getPVbyPod``."""
        snap = state.snapshot
        pvcs = snap.objects_of("PersistentVolumeClaim")
        pvs = snap.objects_of("PersistentVolume")
        classes = snap.objects_of("StorageClass")
        out: list[PVTopology] = []
        for v in pod_volumes(pod):
            if v.kind != "persistentVolumeClaim":
                continue
            if not v.claim_name:
                return [], Status.unresolvable("PersistentVolumeClaim had no name")
            pvc: PersistentVolumeClaim | None = pvcs.get(f"{pod.namespace}/{v.claim_name}")
            if pvc is None:
                return [], Status.unresolvable(f'persistentvolumeclaim "{v.claim_name}" not found')
            if not pvc.volume_name:
                if not pvc.storage_class:
                    return [], Status.unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                klass: StorageClass | None = classes.get(pvc.storage_class)
                if klass is None:
                    return [], Status.unresolvable(f'storageclass.storage.k8s.io "{pvc.storage_class}" not found')
                if klass.wait_for_first_consumer:
                    continue  # bound later, by VolumeBinding, to a PV that fits the node
                return [], Status.unresolvable("PersistentVolume had no name")
            pv: PersistentVolume | None = pvs.get(pvc.volume_name)
            if pv is None:
                return [], Status.unresolvable(f'persistentvolume "{pvc.volume_name}" not found')
            out.extend(PVTopology(pv.name, k, vals) for k, vals in pv_zone_topologies(pv))
        return out, Status.ok()

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        tops, st = self._topologies(state, pod)
        if not st.is_success:
            return None, st
        if not tops:
            return None, Status.skip()
        state.write(NAME, tops)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod_volumes(pod):
            return Status.ok()
        tops: list[PVTopology] | None = state.read(NAME)
        if tops is None:
            tops, st = self._topologies(state, pod)
            if not st.is_success:
                return st
        labels = node.node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return Status.ok()  # no zone constraints on the node
        for t in tops:
            v = labels.get(t.key)
            if v is None:
                v = labels.get(_TO_GA.get(t.key, t.key))
            if v is None or v not in t.values:
                return Status.unresolvable(ERR_REASON_CONFLICT)
        return Status.ok()

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        if any(v.uses_claim for v in pod_volumes(pod)):
            return None
        return ()

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (
            ("StorageClass", "Add"),  # a WaitForFirstConsumer class the claim names was created
            ("Node", "Add"),
            ("Node", "Update"),
            ("PersistentVolumeClaim", "Add"),
            ("PersistentVolumeClaim", "Update"),
            ("PersistentVolume", "Add"),
            ("PersistentVolume", "Update"),
        )


SPEC = PluginSpec(
    name=NAME,
    factory=VolumeZone,
    points=frozenset({"preFilter", "filter"}),
    validate_args=no_args,
)

__all__ = ["ERR_REASON_CONFLICT", "NAME", "SPEC", "PVTopology", "VolumeZone"]
