"""NodeVolumeLimits: at most as many CSI volumes per driver on a node as its CSINode allows.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodevolumelimits/csi.go`` (``CSILimits``):

* PreFilter: Skip unless the pod has a ``persistentVolumeClaim`` or ``ephemeral`` volume or an inline
  in-tree volume csi-translation-lib can migrate (GCE PD, AWS EBS, Azure Disk, Azure File, Cinder,
  vSphere, Portworx).
* Filter: the pod's volumes as unique ``driver/handle`` names: a claim's bound PV (its CSI source, or the
  CSI translation of a GCE PD / AWS EBS / Azure Disk / Cinder / Portworx source when the node has a
  CSINode); an unbound claim (or one whose PV is missing) counts for its StorageClass's provisioner (the
  CSI name of an in-tree provisioner) as one new volume; inline GCE PD / AWS EBS / Azure Disk / Cinder /
  Portworx volumes through their translation (with a CSINode). A missing claim of the new pod is
  UnschedulableAndUnresolvable ``looking up PVC ns/x: persistentvolumeclaim "x" not found``; an ephemeral
  claim not owned by its pod is an error. With VolumeLimitScaling (beta, on in 1.37) a driver whose
  CSIDriver sets ``preventPodSchedulingIfMissing`` must be in the node's CSINode, else Unschedulable
  ``<driver> CSI driver is not installed on the node``. Then, for each driver with an
  ``allocatable.count`` in the CSINode: the unique volumes of the pods on the node plus the pod's volumes
  not already there must not exceed it, else Unschedulable ``node(s) exceed max volume count``.
* Signature: None whenever the filter runs (CSINodes, PVs and PVCs are not part of the NodeInfo); pods
  without such volumes are skipped at PreFilter and keep their reuse.

Not implemented: counting VolumeAttachments of the node that no pod uses any more (the scheduler does
not watch VolumeAttachments): a node still detaching volumes may be considered to have room upstream
would not see. CSI ephemeral inline volumes (``csi:`` in the pod) are not counted, as upstream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.api.storage import (
    CSI_NAME_OF_PLUGIN,
    MIGRATION_ON_PLUGINS,
    PLUGIN_OF_SOURCE,
    inline_csi_volume,
    pod_volumes,
    pv_csi_volume,
    volume_is_for_pod,
)
from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, PreFilterResult, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.api.storage import CSIDriver, CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
    from scheduler.cache.cache import NodeInfo

NAME = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
# Volume handles of claims not bound yet: unique per claim, never equal to a real handle.
_UNBOUND_PREFIX = "<unbound-claim>"
_NODE_MEMO = "NodeVolumeLimits/attached"


class _PVCNotFound(Exception):
    pass


class _VolumeError(Exception):
    pass


class _Lookup:
    """The storage objects of the cycle's snapshot."""

    def __init__(self, state: CycleState) -> None:
        snap = state.snapshot
        self.pvcs: Mapping[str, PersistentVolumeClaim] = snap.objects_of("PersistentVolumeClaim")
        self.pvs: Mapping[str, PersistentVolume] = snap.objects_of("PersistentVolume")
        self.classes: Mapping[str, StorageClass] = snap.objects_of("StorageClass")
        self.csinodes: Mapping[str, CSINode] = snap.objects_of("CSINode")
        self.drivers: Mapping[str, CSIDriver] = snap.objects_of("CSIDriver")


def _migration_on(csinode: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn``."""
    return csinode is not None and plugin in MIGRATION_ON_PLUGINS


def _driver_from_class(pvc: PersistentVolumeClaim, csinode: CSINode | None, lk: _Lookup) -> tuple[str, str]:
    """``getCSIDriverInfoFromSC``."""
    if not pvc.storage_class:
        return "", ""
    klass = lk.classes.get(pvc.storage_class)
    if klass is None:
        return "", ""
    handle = f"{_UNBOUND_PREFIX}-{pvc.namespace}/{pvc.name}"
    provisioner = klass.provisioner
    if provisioner in CSI_NAME_OF_PLUGIN:
        if not _migration_on(csinode, provisioner):
            return "", ""
        return CSI_NAME_OF_PLUGIN[provisioner], handle
    return provisioner, handle


def _driver_info(pvc: PersistentVolumeClaim, csinode: CSINode | None, lk: _Lookup) -> tuple[str, str]:
    """``getCSIDriverInfo``: (driver, volume handle) of a claim, ("", "") when it is not a CSI volume."""
    if not pvc.volume_name:
        return _driver_from_class(pvc, csinode, lk)
    pv = lk.pvs.get(pvc.volume_name)
    if pv is None:
        return _driver_from_class(pvc, csinode, lk)
    if pv.source == "csi":
        return pv.csi_driver, pv.csi_handle
    plugin = PLUGIN_OF_SOURCE.get(pv.source)
    if plugin is None or not _migration_on(csinode, plugin):
        return "", ""
    translated = pv_csi_volume(pv)
    return translated if translated is not None else ("", "")


def attachable_volumes(pod: Pod, csinode: CSINode | None, new_pod: bool, lk: _Lookup, result: dict[str, str]) -> None:
    """``filterAttachableVolumes``: adds ``driver/handle`` -> driver for the pod's CSI volumes."""
    for v in pod_volumes(pod):
        if not v.uses_claim:
            plugin = PLUGIN_OF_SOURCE.get(v.kind)
            if plugin is not None and _migration_on(csinode, plugin):
                translated = inline_csi_volume(v)
                if translated is not None:
                    result[f"{translated[0]}/{translated[1]}"] = translated[0]
            continue
        if not v.claim_name:
            raise _VolumeError("PersistentVolumeClaim had no name")
        pvc = lk.pvcs.get(f"{pod.namespace}/{v.claim_name}")
        if pvc is None:
            if new_pod:
                raise _PVCNotFound(
                    f'looking up PVC {pod.namespace}/{v.claim_name}: persistentvolumeclaim "{v.claim_name}" not found'
                )
            continue  # not counted: no guarantee it belongs to the running pod
        if v.ephemeral:
            err = volume_is_for_pod(pod, pvc)
            if err:
                raise _VolumeError(err)
        driver, handle = _driver_info(pvc, csinode, lk)
        if not driver or not handle:
            continue
        result[f"{driver}/{handle}"] = driver


def _is_inline_migratable(kind: str) -> bool:
    return kind in PLUGIN_OF_SOURCE


class NodeVolumeLimits:
    name: ClassVar[str] = NAME

    def __init__(self, args: object = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        for v in pod_volumes(pod):
            if v.uses_claim or _is_inline_migratable(v.kind):
                return None, Status.ok()
        return None, Status.skip()

    def _attached(self, node: NodeInfo, csinode: CSINode | None, lk: _Lookup) -> dict[str, str]:
        """The unique CSI volumes of the node's pods, memoised on the NodeInfo while the storage objects
        (the snapshot's maps) and the CSINode are the same objects."""
        key: tuple[Any, ...] = (lk.pvcs, lk.pvs, lk.classes, csinode)
        hit = node.memo.get(_NODE_MEMO)
        if hit is not None and all(a is b for a, b in zip(hit[0], key, strict=True)):
            result: dict[str, str] = hit[1]
            return result
        attached: dict[str, str] = {}
        for p in node.pod_list:
            attachable_volumes(p, csinode, False, lk, attached)
        node.memo[_NODE_MEMO] = (key, attached)
        return attached

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        if not pod_volumes(pod):
            return Status.ok()
        lk = _Lookup(state)
        csinode = lk.csinodes.get(node.name)
        new: dict[str, str] = {}
        try:
            attachable_volumes(pod, csinode, True, lk, new)
        except _PVCNotFound as e:
            return Status.unresolvable(str(e))
        except _VolumeError as e:
            return Status.error(str(e))
        if not new:
            return Status.ok()
        for driver in sorted(set(new.values())):
            if not self._driver_installed(driver, csinode, lk):
                return Status.unschedulable(f"{driver} CSI driver is not installed on the node")
        limits = csinode.volume_limits() if csinode is not None else {}
        if not limits:
            return Status.ok()
        try:
            attached = self._attached(node, csinode, lk)
        except (_PVCNotFound, _VolumeError) as e:
            return Status.error(str(e))
        attached_count: dict[str, int] = {}
        for unique, driver in attached.items():
            new.pop(unique, None)  # a volume already used on the node is not attached again
            attached_count[driver] = attached_count.get(driver, 0) + 1
        new_count: dict[str, int] = {}
        for driver in new.values():
            new_count[driver] = new_count.get(driver, 0) + 1
        for driver, count in new_count.items():
            limit = limits.get(driver)
            if limit is not None and attached_count.get(driver, 0) + count > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return Status.ok()

    @staticmethod
    def _driver_installed(driver: str, csinode: CSINode | None, lk: _Lookup) -> bool:
        """``checkCSIDriverOnNode``: only drivers whose CSIDriver opts in must be on the node's CSINode."""
        d = lk.drivers.get(driver)
        if d is None or not d.prevent_pod_scheduling_if_missing:
            return True
        return csinode is not None and csinode.driver(driver) is not None

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        if any(v.uses_claim or _is_inline_migratable(v.kind) for v in pod_volumes(pod)):
            return None
        return ()

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (
            ("CSINode", "Add"),
            ("CSINode", "Update"),  # a higher limit
            ("Pod", "Delete"),  # volumes released on the node
            ("PersistentVolumeClaim", "Add"),  # the claim the pod waits for was created
        )


SPEC = PluginSpec(
    name=NAME,
    factory=NodeVolumeLimits,
    points=frozenset({"preFilter", "filter"}),
    validate_args=no_args,
)

__all__ = ["ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED", "NAME", "SPEC", "NodeVolumeLimits"]
