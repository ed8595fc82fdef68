"""Storage kinds as typed, frozen values and the volume helpers the volume plugins share (what
kube-controller-manager's volume controllers do for ``simulate`` is in :mod:`scheduler.simulate.volumes`).

Kinds (converters registered in :mod:`scheduler.api.objects`): PersistentVolume, PersistentVolumeClaim,
StorageClass, CSINode, CSIDriver, CSIStorageCapacity (the last one is converted here but the cache only sees
it once the kind is watched: see ``csistoragecapacity_from``).

API defaulting the plugins rely on is applied during conversion, as the API server would store the object
(``volumeBindingMode: Immediate``, ``volumeMode: Filesystem``, RBD ``pool: rbd``), so ``simulate`` input
written by hand behaves like the objects of a live cluster.

Semantics follow Kubernetes v1.37.2:

* ``k8s.io/component-helpers/storage/volume`` (``pv_helpers.go``, ``helpers.go``): storage class of a PV/PVC
  (the beta annotation first), ``IsVolumeBoundToClaim``, ``FindMatchingVolume`` (the smallest fitting PV;
  a PV pre-bound to the claim wins), ``CheckAccessModes``, ``CheckVolumeModeMismatches``,
  ``CheckNodeAffinity`` (node labels only: ``matchFields`` see an empty node name);
* ``k8s.io/component-helpers/storage/ephemeral``: the PVC of a generic ephemeral volume is
  ``<pod>-<volume>`` and must be controlled by the pod;
* ``pkg/apis/core/v1/helper.MatchTopologySelectorTerms`` (StorageClass ``allowedTopologies``: terms ORed,
  an empty term list matches everything, an empty term nothing);
* ``k8s.io/csi-translation-lib`` for the in-tree volume types kube-scheduler counts as CSI volumes
  (GCE PD, AWS EBS, Azure Disk, Cinder, Portworx): driver name and volume handle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.api.labelselector import LabelSelector, selector_from
from scheduler.api.model import (
    Meta,
    ModelError,
    NodeSelector,
    meta_from,
    node_selector_from,
    node_selector_matches,
    quantity,
)
from scheduler.api.quantity import Quantity

if TYPE_CHECKING:
    from scheduler.api.model import Pod

Raw = Mapping[str, Any]
log = structlog.get_logger("dra_scheduler.storage")

# Well-known names --------------------------------------------------------------------------------------

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_DEFAULT_STORAGE_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_BETA_DEFAULT_STORAGE_CLASS = "storageclass.beta.kubernetes.io/is-default-class"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
VOLUME_MODE_FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

PV_AVAILABLE = "Available"
PV_BOUND = "Bound"
PVC_PENDING = "Pending"
PVC_BOUND = "Bound"
PVC_LOST = "Lost"

# Node labels of zones and regions (core/v1 well_known_labels.go), and the multi-zone value separator.
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
MULTI_ZONE_DELIMITER = "__"

# In-tree plugins and the CSI drivers they migrated to (csi-translation-lib/plugins).
GCE_PD_PLUGIN = "kubernetes.io/gce-pd"
AWS_EBS_PLUGIN = "kubernetes.io/aws-ebs"
AZURE_DISK_PLUGIN = "kubernetes.io/azure-disk"
AZURE_FILE_PLUGIN = "kubernetes.io/azure-file"
CINDER_PLUGIN = "kubernetes.io/cinder"
VSPHERE_PLUGIN = "kubernetes.io/vsphere-volume"
PORTWORX_PLUGIN = "kubernetes.io/portworx-volume"
CSI_NAME_OF_PLUGIN: Mapping[str, str] = {
    GCE_PD_PLUGIN: "pd.csi.storage.gke.io",
    AWS_EBS_PLUGIN: "ebs.csi.aws.com",
    AZURE_DISK_PLUGIN: "disk.csi.azure.com",
    AZURE_FILE_PLUGIN: "file.csi.azure.com",
    CINDER_PLUGIN: "cinder.csi.openstack.org",
    VSPHERE_PLUGIN: "csi.vsphere.vmware.com",
    PORTWORX_PLUGIN: "pxd.portworx.com",
}
# volume source field (PV spec / pod volume) -> in-tree plugin name, for the migratable sources
PLUGIN_OF_SOURCE: Mapping[str, str] = {
    "gcePersistentDisk": GCE_PD_PLUGIN,
    "awsElasticBlockStore": AWS_EBS_PLUGIN,
    "azureDisk": AZURE_DISK_PLUGIN,
    "azureFile": AZURE_FILE_PLUGIN,
    "cinder": CINDER_PLUGIN,
    "vsphereVolume": VSPHERE_PLUGIN,
    "portworxVolume": PORTWORX_PLUGIN,
}
# nodevolumelimits/utils.go isCSIMigrationOn: the plugins whose migration is always on (given a CSINode)
MIGRATION_ON_PLUGINS = frozenset({AWS_EBS_PLUGIN, PORTWORX_PLUGIN, GCE_PD_PLUGIN, AZURE_DISK_PLUGIN, CINDER_PLUGIN})

# core/v1 VolumeSource and PersistentVolumeSource members (the first one present names the volume's type).
POD_VOLUME_SOURCES = (
    "persistentVolumeClaim",
    "ephemeral",
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "image",
)
PV_SOURCES = (
    "csi",
    "local",
    "hostPath",
    "nfs",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cinder",
    "portworxVolume",
    "vsphereVolume",
    "iscsi",
    "rbd",
    "fc",
    "cephfs",
    "glusterfs",
    "flexVolume",
    "flocker",
    "quobyte",
    "photonPersistentDisk",
    "scaleIO",
    "storageos",
)


# --- small raw accessors ------------------------------------------------------------------------------


def _map(obj: Raw | None, key: str) -> Raw:
    v = obj.get(key) if obj is not None else None
    return v if isinstance(v, Mapping) else {}


def _list(obj: Raw | None, key: str) -> Sequence[Any]:
    v = obj.get(key) if obj is not None else None
    return v if isinstance(v, list | tuple) else ()


def _str(obj: Raw | None, key: str, default: str = "") -> str:
    v = obj.get(key) if obj is not None else None
    return v if isinstance(v, str) else default


def _storage(resources: Raw, path: str) -> Quantity | None:
    v = resources.get("storage")
    return None if v is None else quantity(v, f"{path}.storage")


def _first_source(spec: Raw, names: Sequence[str]) -> str:
    for n in names:
        if isinstance(spec.get(n), Mapping):
            return n
    return ""


# --- PersistentVolume -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    meta: Meta
    capacity: Quantity | None  # spec.capacity.storage
    access_modes: tuple[str, ...]
    storage_class: str  # GetPersistentVolumeClass: the beta annotation, else spec.storageClassName
    claim_ref: ClaimRef | None
    node_affinity: NodeSelector | None  # spec.nodeAffinity.required
    source: str  # the PersistentVolumeSource member set ("csi", "local", "gcePersistentDisk", ...)
    csi_driver: str
    csi_handle: str
    phase: str
    volume_mode: str
    volume_attributes_class: str
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


def pv_from(raw: Raw) -> PersistentVolume:
    meta = meta_from(raw)
    spec, status = _map(raw, "spec"), _map(raw, "status")
    cr = spec.get("claimRef")
    claim_ref = ClaimRef(_str(cr, "namespace"), _str(cr, "name"), _str(cr, "uid")) if isinstance(cr, Mapping) else None
    na = _map(spec, "nodeAffinity").get("required")
    affinity = node_selector_from(na, "spec.nodeAffinity.required") if isinstance(na, Mapping) else None
    csi = _map(spec, "csi")
    klass = meta.annotations.get(ANN_BETA_STORAGE_CLASS)
    return PersistentVolume(
        meta=meta,
        capacity=_storage(_map(spec, "capacity"), "spec.capacity"),
        access_modes=tuple(str(m) for m in _list(spec, "accessModes")),
        storage_class=klass if klass is not None else _str(spec, "storageClassName"),
        claim_ref=claim_ref,
        node_affinity=affinity,
        source=_first_source(spec, PV_SOURCES),
        csi_driver=_str(csi, "driver"),
        csi_handle=_str(csi, "volumeHandle"),
        phase=_str(status, "phase"),
        volume_mode=_str(spec, "volumeMode") or VOLUME_MODE_FILESYSTEM,
        volume_attributes_class=_str(spec, "volumeAttributesClassName"),
        raw=raw,
    )


# --- PersistentVolumeClaim ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    meta: Meta
    storage_class: str  # GetPersistentVolumeClaimClass ("" when none requested)
    has_class: bool  # PersistentVolumeClaimHasClass (the annotation, or spec.storageClassName set, even "")
    volume_name: str
    request: Quantity | None  # spec.resources.requests.storage
    access_modes: tuple[str, ...]
    selector: LabelSelector | None
    selector_error: str  # an invalid spec.selector (FindMatchingVolume then fails with this error)
    phase: str
    volume_mode: str
    volume_attributes_class: str
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def selected_node(self) -> str | None:
        """The ``volume.kubernetes.io/selected-node`` annotation (None when absent)."""
        return self.meta.annotations.get(ANN_SELECTED_NODE)

    @property
    def fully_bound(self) -> bool:
        """volumebinding ``isPVCFullyBound``: a volume name and the bind-completed annotation."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.meta.annotations

    @property
    def request_bytes(self) -> int:
        return self.request.int_value() if self.request is not None else 0


def pvc_from(raw: Raw) -> PersistentVolumeClaim:
    meta = meta_from(raw)
    spec, status = _map(raw, "spec"), _map(raw, "status")
    klass = meta.annotations.get(ANN_BETA_STORAGE_CLASS)
    sc = spec.get("storageClassName")
    has_class = klass is not None or isinstance(sc, str)
    if klass is None:
        klass = sc if isinstance(sc, str) else ""
    sel_raw = spec.get("selector")
    selector: LabelSelector | None = None
    selector_error = ""
    if sel_raw is not None:
        try:
            selector = selector_from(sel_raw, "spec.selector")
        except ModelError as e:
            selector_error = str(e)
    return PersistentVolumeClaim(
        meta=meta,
        storage_class=klass,
        has_class=has_class,
        volume_name=_str(spec, "volumeName"),
        request=_storage(_map(_map(spec, "resources"), "requests"), "spec.resources.requests"),
        access_modes=tuple(str(m) for m in _list(spec, "accessModes")),
        selector=selector,
        selector_error=selector_error,
        phase=_str(status, "phase"),
        volume_mode=_str(spec, "volumeMode") or VOLUME_MODE_FILESYSTEM,
        volume_attributes_class=_str(spec, "volumeAttributesClassName"),
        raw=raw,
    )


# --- StorageClass --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyTerm:
    """A TopologySelectorTerm: every (key, values) requirement ANDed, each ``key In values``."""

    requirements: tuple[tuple[str, frozenset[str]], ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.requirements:
            return False  # a nil or empty term selects nothing
        for key, values in self.requirements:
            v = labels.get(key)
            if v is None or v not in values:
                return False
        return True


@dataclass(frozen=True, slots=True)
class StorageClass:
    meta: Meta
    provisioner: str
    binding_mode: str  # defaulted to Immediate, as the API server does
    allowed_topologies: tuple[TopologyTerm, ...]
    reclaim_policy: str
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def wait_for_first_consumer(self) -> bool:
        return self.binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER

    @property
    def is_default(self) -> bool:
        a = self.meta.annotations
        return a.get(ANN_DEFAULT_STORAGE_CLASS) == "true" or a.get(ANN_BETA_DEFAULT_STORAGE_CLASS) == "true"


def match_topology_terms(terms: Sequence[TopologyTerm], labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms match everything; otherwise any term (ORed)."""
    if not terms:
        return True
    return any(t.matches(labels) for t in terms)


def storageclass_from(raw: Raw) -> StorageClass:
    meta = meta_from(raw)
    terms = []
    for t in _list(raw, "allowedTopologies"):
        if not isinstance(t, Mapping):
            continue
        reqs = tuple(
            (_str(e, "key"), frozenset(str(v) for v in _list(e, "values")))
            for e in _list(t, "matchLabelExpressions")
            if isinstance(e, Mapping)
        )
        terms.append(TopologyTerm(reqs))
    return StorageClass(
        meta=meta,
        provisioner=_str(raw, "provisioner"),
        binding_mode=_str(raw, "volumeBindingMode") or BINDING_IMMEDIATE,
        allowed_topologies=tuple(terms),
        reclaim_policy=_str(raw, "reclaimPolicy") or "Delete",
        raw=raw,
    )


# --- CSINode, CSIDriver, CSIStorageCapacity ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CSINodeDriver:
    name: str
    node_id: str
    topology_keys: tuple[str, ...]
    allocatable_count: int | None  # spec.drivers[].allocatable.count (None: no limit published)


@dataclass(frozen=True, slots=True)
class CSINode:
    meta: Meta
    drivers: tuple[CSINodeDriver, ...]
    migrated_plugins: frozenset[str]  # annotation storage.alpha.kubernetes.io/migrated-plugins
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    def driver(self, name: str) -> CSINodeDriver | None:
        for d in self.drivers:
            if d.name == name:
                return d
        return None

    def volume_limits(self) -> dict[str, int]:
        """nodevolumelimits ``getVolumeLimits``: driver -> allocatable count, for drivers that publish one."""
        return {d.name: d.allocatable_count for d in self.drivers if d.allocatable_count is not None}


def csinode_from(raw: Raw) -> CSINode:
    meta = meta_from(raw)
    drivers = []
    for i, d in enumerate(_list(_map(raw, "spec"), "drivers")):
        if not isinstance(d, Mapping):
            continue
        count = _map(d, "allocatable").get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise ModelError(f"spec.drivers[{i}].allocatable.count", f"must be an integer, got {count!r}")
        drivers.append(
            CSINodeDriver(
                name=_str(d, "name"),
                node_id=_str(d, "nodeID"),
                topology_keys=tuple(str(k) for k in _list(d, "topologyKeys")),
                allocatable_count=count,
            )
        )
    mpa = meta.annotations.get(ANN_MIGRATED_PLUGINS, "")
    return CSINode(
        meta=meta,
        drivers=tuple(drivers),
        migrated_plugins=frozenset(p for p in mpa.split(",") if p),
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class CSIDriver:
    meta: Meta
    storage_capacity: bool  # spec.storageCapacity
    prevent_pod_scheduling_if_missing: bool  # spec.preventPodSchedulingIfMissing (VolumeLimitScaling)
    raw: Raw = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


def csidriver_from(raw: Raw) -> CSIDriver:
    spec = _map(raw, "spec")
    return CSIDriver(
        meta=meta_from(raw),
        storage_capacity=spec.get("storageCapacity") is True,
        prevent_pod_scheduling_if_missing=spec.get("preventPodSchedulingIfMissing") is True,
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    meta: Meta
    storage_class: str
    node_topology: LabelSelector | None  # None: accessible from no node
    capacity: Quantity | None
    maximum_volume_size: Quantity | None
    raw: Raw = field(repr=False, compare=False)

    @property
    def volume_limit(self) -> Quantity | None:
        """volumebinding ``volumeLimit``: maximumVolumeSize when set (more precise), else capacity."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


def csistoragecapacity_from(raw: Raw) -> CSIStorageCapacity:
    """storage.k8s.io/v1 CSIStorageCapacity. Not yet a watched kind: register it in
    ``scheduler.api.objects.OBJECT_KINDS`` (and watch/serve it) for VolumeBinding to see capacities."""
    nt = raw.get("nodeTopology")
    cap, mvs = raw.get("capacity"), raw.get("maximumVolumeSize")
    return CSIStorageCapacity(
        meta=meta_from(raw),
        storage_class=_str(raw, "storageClassName"),
        node_topology=selector_from(nt, "nodeTopology") if isinstance(nt, Mapping) else None,
        capacity=None if cap is None else quantity(cap, "capacity"),
        maximum_volume_size=None if mvs is None else quantity(mvs, "maximumVolumeSize"),
        raw=raw,
    )


# --- volume helpers (component-helpers/storage/volume) --------------------------------------------------


def check_node_affinity(pv: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: the PV's required node affinity against the node's labels (no node name)."""
    if pv.node_affinity is None:
        return True
    return node_selector_matches(pv.node_affinity, labels, "")


def is_volume_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``: claimRef names the claim (and its UID, when the ref has one)."""
    ref = pv.claim_ref
    if ref is None or ref.name != pvc.name or ref.namespace != pvc.namespace:
        return False
    return not ref.uid or ref.uid == pvc.meta.uid


def check_access_modes(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    """``CheckAccessModes``: the PV offers every access mode the claim asks for."""
    return set(pvc.access_modes) <= set(pv.access_modes)


_ZERO = Quantity.from_int(0)


class MatchError(Exception):
    """``FindMatchingVolume`` could not evaluate the claim (e.g. an invalid selector)."""


def find_matching_volume(
    pvc: PersistentVolumeClaim,
    volumes: Iterable[PersistentVolume],
    node_labels: Mapping[str, str] | None,
    excluded: Mapping[str, Any] | None,
    delay_binding: bool,
) -> PersistentVolume | None:
    """``FindMatchingVolume`` (VolumeAttributesClass on, as in 1.37). ``node_labels`` set = scheduler path
    (the PV's node affinity and the access modes are checked); ``delay_binding`` with no node = PV controller
    path for a WaitForFirstConsumer claim (only a PV pre-bound to the claim is returned).

    A PV bound or pre-bound to this claim is returned at once (None when its node affinity does not match);
    otherwise the smallest Available PV of the claim's class that satisfies it, first one on ties."""
    if pvc.selector_error:
        raise MatchError(f"error creating internal label selector for claim: {pvc.key}: {pvc.selector_error}")
    requested = pvc.request if pvc.request is not None else _ZERO
    smallest: PersistentVolume | None = None
    smallest_qty = _ZERO
    for pv in volumes:
        if excluded and pv.name in excluded:
            continue
        bound_here = is_volume_bound_to_claim(pv, pvc)
        if pv.claim_ref is not None and not bound_here:
            continue
        qty = pv.capacity if pv.capacity is not None else _ZERO
        if qty.cmp(requested) < 0:
            continue
        if pvc.volume_mode != pv.volume_mode:
            continue
        if pvc.volume_attributes_class != pv.volume_attributes_class:
            continue
        if pv.meta.deleting:
            continue
        affinity_ok = True
        if node_labels is not None:
            affinity_ok = check_node_affinity(pv, node_labels)
        if bound_here:
            return pv if affinity_ok else None
        if node_labels is None and delay_binding:
            continue
        if pv.phase != PV_AVAILABLE:
            continue
        if pvc.selector is not None and not pvc.selector.matches(pv.meta.labels):
            continue
        if pv.storage_class != pvc.storage_class:
            continue
        if not affinity_ok:
            continue
        if node_labels is not None and not check_access_modes(pvc, pv):
            continue
        if smallest is None or smallest_qty.cmp(qty) > 0:
            smallest, smallest_qty = pv, qty
    return smallest


def pv_zone_topologies(pv: PersistentVolume) -> list[tuple[str, frozenset[str]]]:
    """volumezone ``getPVTopologies``: (label key, zones) for each zone/region label of the PV, in the
    order beta zone, beta region, zone, region; a value is a ``__``-separated set, unparsable ones ignored."""
    out = []
    for key in (LABEL_BETA_ZONE, LABEL_BETA_REGION, LABEL_ZONE, LABEL_REGION):
        value = pv.meta.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
        if any(not z for z in zones):
            continue
        out.append((key, frozenset(zones)))
    return out


# --- pod volumes ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One entry of ``spec.volumes``, reduced to what the volume plugins read."""

    name: str
    kind: str  # the VolumeSource member set ("persistentVolumeClaim", "ephemeral", "csi", ...)
    claim_name: str  # persistentVolumeClaim.claimName, or <pod>-<volume> for a generic ephemeral volume
    read_only: bool
    # identity of in-tree disks: gcePersistentDisk.pdName, awsElasticBlockStore.volumeID, iscsi.iqn,
    # rbd.image, azureDisk.diskURI, cinder.volumeID, portworxVolume.volumeID
    disk: str = ""
    rbd_monitors: tuple[str, ...] = ()
    rbd_pool: str = ""
    azure_kind: str = ""
    source_json: str = ""  # the volume source as canonical JSON (pod signatures)

    @property
    def uses_claim(self) -> bool:
        return self.kind in ("persistentVolumeClaim", "ephemeral")

    @property
    def ephemeral(self) -> bool:
        return self.kind == "ephemeral"


_MEMO_KEY = "storage/volumes"


def pod_volumes(pod: Pod) -> tuple[PodVolume, ...]:
    """The pod's volumes, parsed once per Pod object (``pod.memo``)."""
    cached: tuple[PodVolume, ...] | None = pod.memo.get(_MEMO_KEY)
    if cached is not None:
        return cached
    out = []
    for v in _list(_map(pod.raw, "spec"), "volumes"):
        if not isinstance(v, Mapping):
            continue
        name = _str(v, "name")
        kind = _first_source(v, POD_VOLUME_SOURCES)
        src = _map(v, kind) if kind else {}
        claim = ""
        if kind == "persistentVolumeClaim":
            claim = _str(src, "claimName")
        elif kind == "ephemeral":
            claim = f"{pod.name}-{name}"  # ephemeral.VolumeClaimName
        ro = src.get("readOnly") is True
        disk, pool, azure_kind = "", "", ""
        monitors: tuple[str, ...] = ()
        if kind == "gcePersistentDisk":
            disk = _str(src, "pdName")
        elif kind in ("awsElasticBlockStore", "cinder", "portworxVolume"):
            disk = _str(src, "volumeID")
        elif kind == "iscsi":
            disk = _str(src, "iqn")
        elif kind == "rbd":
            disk = _str(src, "image")
            monitors = tuple(str(m) for m in _list(src, "monitors"))
            pool = _str(src, "pool") or "rbd"  # API default
        elif kind == "azureDisk":
            disk = _str(src, "diskURI")
            azure_kind = _str(src, "kind") or "Managed"  # API default
        source_json = json.dumps({kind: src}, sort_keys=True, separators=(",", ":")) if kind else ""
        out.append(PodVolume(name, kind, claim, ro, disk, monitors, pool, azure_kind, source_json))
    result = tuple(out)
    pod.memo[_MEMO_KEY] = result
    return result


def pod_claim_keys(pod: Pod) -> tuple[str, ...]:
    """framework ``PodPVCKeys``: ``ns/claimName`` of the pod's persistentVolumeClaim volumes (not ephemeral)."""
    return tuple(f"{pod.namespace}/{v.claim_name}" for v in pod_volumes(pod) if v.kind == "persistentVolumeClaim")


def volume_is_for_pod(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """``ephemeral.VolumeIsForPod``: None when the PVC is controlled by the pod, else the error text."""
    owner = pvc.meta.controller()
    if pvc.namespace != pod.namespace or owner is None or owner.uid != pod.uid:
        return f"PVC {pvc.namespace}/{pvc.name} was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"
    return None


# --- in-tree volumes as CSI volumes (csi-translation-lib) ----------------------------------------------

_AWS_VOLUME_RE = re.compile(r"^vol-[^/]*$")


def _ebs_volume_id(kubernetes_id: str) -> str | None:
    """``KubernetesVolumeIDToEBSVolumeID``: ``aws://<zone>/<vol-id>`` or a bare ``vol-...``."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    aws_id = kubernetes_id[len("aws://") :].partition("/")[2].strip("/")
    return aws_id if _AWS_VOLUME_RE.match(aws_id) else None


def _gce_region(zones: Sequence[str]) -> str | None:
    regions = set()
    for z in zones:
        parts = z.split("-")
        if len(parts) != 3:
            return None
        regions.add("-".join(parts[:2]))
    return next(iter(regions)) if len(regions) == 1 else None


def inline_csi_volume(vol: PodVolume) -> tuple[str, str] | None:
    """(CSI driver, volume handle) of an inline in-tree volume whose migration kube-scheduler counts
    (nodevolumelimits ``checkAttachableInlineVolume``), or None."""
    plugin = PLUGIN_OF_SOURCE.get(vol.kind)
    if plugin is None or plugin not in MIGRATION_ON_PLUGINS:
        return None
    driver = CSI_NAME_OF_PLUGIN[plugin]
    if vol.kind == "gcePersistentDisk":
        return driver, f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{vol.disk}"
    if vol.kind == "awsElasticBlockStore":
        handle = _ebs_volume_id(vol.disk)
        return (driver, handle) if handle is not None else None
    if vol.kind == "azureDisk" and vol.azure_kind.lower() != "managed":
        return None  # "kind is not supported in csi migration"
    return driver, vol.disk


def pv_csi_volume(pv: PersistentVolume) -> tuple[str, str] | None:
    """(CSI driver, volume handle) of a PV: its CSI source, or the translation of a migratable in-tree
    source (nodevolumelimits ``getCSIDriverInfo`` with a CSINode present), or None."""
    if pv.source == "csi":
        return pv.csi_driver, pv.csi_handle
    plugin = PLUGIN_OF_SOURCE.get(pv.source)
    if plugin is None or plugin not in MIGRATION_ON_PLUGINS:
        return None
    driver = CSI_NAME_OF_PLUGIN[plugin]
    src = _map(_map(pv.raw, "spec"), pv.source)
    if pv.source == "gcePersistentDisk":
        pd = _str(src, "pdName")
        zones_label = pv.meta.labels.get(LABEL_BETA_ZONE) or pv.meta.labels.get(LABEL_ZONE) or ""
        zones = zones_label.split(MULTI_ZONE_DELIMITER)
        if len(zones) == 1 and zones[0]:
            return driver, f"projects/UNSPECIFIED/zones/{zones[0]}/disks/{pd}"
        if len(zones) > 1:
            region = _gce_region(zones)
            return (driver, f"projects/UNSPECIFIED/regions/{region}/disks/{pd}") if region else None
        return driver, f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd}"
    if pv.source == "awsElasticBlockStore":
        handle = _ebs_volume_id(_str(src, "volumeID"))
        return (driver, handle) if handle is not None else None
    if pv.source == "azureDisk":
        return driver, _str(src, "diskURI")
    return driver, _str(src, "volumeID")  # cinder, portworxVolume
