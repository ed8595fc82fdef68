"""REST paths of the kinds the scheduler reads and writes, and their JSON on the wire (:func:`loads`,
:func:`dumps`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

try:
    import orjson
except ImportError:  # pragma: no cover - a dependency; the standard library decodes the same documents
    orjson = None  # type: ignore[assignment]

# The JSON codec of API bodies and watch events. orjson decodes the API server's objects ~2.5x and encodes them
# ~10x faster than the standard library; json.loads/dumps were 9% of a live run's CPU (1,000 pods on 200 nodes:
# 7,390 documents, 16.6 MB decoded, 4,000 request bodies). The standard library takes what orjson refuses.
JSON_ENGINE = "orjson" if orjson is not None else "json"


def loads(data: bytes | str) -> Any:
    """A JSON document (an API response body, a watch event line) as Python values: the same as
    ``json.loads``, including what orjson refuses (integers beyond 64 bits, ``NaN``)."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def trim(obj: dict[str, Any]) -> None:
    """Drop ``metadata.managedFields``: nothing here reads them, and they are a quarter of a Node as the API
    server sends it (776 of 2,936 bytes on the benchmark's fleet), more of objects several managers write (a bound
    Pod, an allocated ResourceClaim); kept, they would be copied into every deep copy and PUT body. kube-scheduler
    trims them from its Pods the same way (kubernetes v1.37.2 pkg/scheduler/scheduler.go, ``newPodInformer``'s
    transform); a PUT without them keeps the stored ones (k8s.io/apimachinery v0.37.2
    pkg/util/managedfields/internal/fieldmanager.go, ``decodeLiveOrNew``)."""
    meta = obj.get("metadata")
    if type(meta) is dict:
        meta.pop("managedFields", None)


def dumps(obj: Any) -> bytes:
    """A request body: compact JSON (UTF-8). What orjson cannot encode (integers beyond 64 bits, keys that are
    not strings) goes through ``json.dumps``."""
    if orjson is not None:
        try:
            return orjson.dumps(obj)
        except TypeError:
            pass
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str
    group: str  # "" = core
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        """``namespace`` empty on a namespaced kind = all namespaces (list/watch only)."""
        p = self.group_version_path
        if self.namespaced and namespace:
            p += f"/namespaces/{quote(namespace, safe='')}"
        p += f"/{self.plural}"
        if name:
            p += f"/{quote(name, safe='')}"
        if subresource:
            p += f"/{subresource}"
        return p

    @property
    def is_custom(self) -> bool:
        """Served by a CRD (no strategic merge patch)."""
        return self.group.endswith(".x-k8s.io")


POD = Resource("Pod", "", "v1", "pods", True)
NODE = Resource("Node", "", "v1", "nodes", False)
NAMESPACE = Resource("Namespace", "", "v1", "namespaces", False)
CONFIGMAP = Resource("ConfigMap", "", "v1", "configmaps", True)
EVENT = Resource("Event", "", "v1", "events", True)
LEASE = Resource("Lease", "coordination.k8s.io", "v1", "leases", True)
RESOURCE_CLAIM = Resource("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True)
RESOURCE_CLAIM_TEMPLATE = Resource("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True)
RESOURCE_SLICE = Resource("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False)
DEVICE_CLASS = Resource("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False)
# v1 since 1.37 (gate DRADeviceTaintRules, GA and on by default): taints that count as the devices' own
DEVICE_TAINT_RULE = Resource("DeviceTaintRule", "resource.k8s.io", "v1", "devicetaintrules", False)

# What kube-scheduler's default plugins read besides the above (volumes, priorities, disruption budgets
# for preemption, owners for the default spreading), all GA and always served.
PERSISTENT_VOLUME = Resource("PersistentVolume", "", "v1", "persistentvolumes", False)
PERSISTENT_VOLUME_CLAIM = Resource("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True)
SERVICE = Resource("Service", "", "v1", "services", True)
REPLICATION_CONTROLLER = Resource("ReplicationController", "", "v1", "replicationcontrollers", True)
STORAGE_CLASS = Resource("StorageClass", "storage.k8s.io", "v1", "storageclasses", False)
CSI_NODE = Resource("CSINode", "storage.k8s.io", "v1", "csinodes", False)
CSI_DRIVER = Resource("CSIDriver", "storage.k8s.io", "v1", "csidrivers", False)
CSI_STORAGE_CAPACITY = Resource("CSIStorageCapacity", "storage.k8s.io", "v1", "csistoragecapacities", True)
PRIORITY_CLASS = Resource("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False)
POD_DISRUPTION_BUDGET = Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True)
REPLICA_SET = Resource("ReplicaSet", "apps", "v1", "replicasets", True)
STATEFUL_SET = Resource("StatefulSet", "apps", "v1", "statefulsets", True)

PODGROUP_X = Resource("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True)
# Kubernetes 1.37 serves the upstream PodGroup and Workload as scheduling.k8s.io/v1beta1 (gate
# GenericWorkload, beta but off by default, and --runtime-config=scheduling.k8s.io/v1beta1=true).
PODGROUP_UPSTREAM = Resource("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", True)
# Kubernetes 1.36 served the same shape as v1alpha2 (gone in 1.37). Kept as an alternative for 1.36
# clusters: discovery of an unserved group version is a 404, i.e. "not served", never an error.
PODGROUP_UPSTREAM_ALPHA = Resource("PodGroup", "scheduling.k8s.io", "v1alpha2", "podgroups", True)
WORKLOAD = Resource("Workload", "scheduling.k8s.io", "v1beta1", "workloads", True)
# gate CompositePodGroup (alpha in 1.37, needs GenericWorkload and TopologyAwareWorkloadScheduling) and
# --runtime-config=scheduling.k8s.io/v1alpha3=true
COMPOSITE_POD_GROUP = Resource("CompositePodGroup", "scheduling.k8s.io", "v1alpha3", "compositepodgroups", True)

# kind -> the resource used when nothing else (an object's apiVersion) says which
BY_KIND: dict[str, Resource] = {
    r.kind: r
    for r in (
        POD,
        NODE,
        NAMESPACE,
        CONFIGMAP,
        EVENT,
        LEASE,
        RESOURCE_CLAIM,
        RESOURCE_CLAIM_TEMPLATE,
        RESOURCE_SLICE,
        DEVICE_CLASS,
        DEVICE_TAINT_RULE,
        PERSISTENT_VOLUME,
        PERSISTENT_VOLUME_CLAIM,
        SERVICE,
        REPLICATION_CONTROLLER,
        STORAGE_CLASS,
        CSI_NODE,
        CSI_DRIVER,
        CSI_STORAGE_CAPACITY,
        PRIORITY_CLASS,
        POD_DISRUPTION_BUDGET,
        REPLICA_SET,
        STATEFUL_SET,
        PODGROUP_X,
        WORKLOAD,
        COMPOSITE_POD_GROUP,
    )
}
ALTERNATIVES: dict[str, tuple[Resource, ...]] = {"PodGroup": (PODGROUP_X, PODGROUP_UPSTREAM, PODGROUP_UPSTREAM_ALPHA)}
OPTIONAL = (PODGROUP_X, PODGROUP_UPSTREAM, PODGROUP_UPSTREAM_ALPHA)  # served only where a CRD / a feature gate says so
# Also served only with a feature gate and runtime-config (see above). Not in OPTIONAL, which
# LiveAPI.discover() and run.py treat as "the PodGroup APIs"; check them with LiveAPI.serves() before
# watching them.
GATED = (WORKLOAD, COMPOSITE_POD_GROUP)


def resource_for(kind: str, api_version: str = "") -> Resource:
    for r in ALTERNATIVES.get(kind, ()):
        if r.api_version == api_version:
            return r
    try:
        return BY_KIND[kind]
    except KeyError:
        raise ValueError(f"unsupported kind {kind!r}") from None


def object_key(obj: dict[str, Any]) -> str:
    """The cache's key: ``namespace/name`` or ``name``."""
    m = obj.get("metadata") or {}
    ns = m.get("namespace")
    return f"{ns}/{m.get('name')}" if ns else str(m.get("name"))


def resource_version(obj: dict[str, Any] | None) -> int | None:
    """metadata.resourceVersion as an int (etcd revisions); None when absent or not a number."""
    if not obj:
        return None
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(rv)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
