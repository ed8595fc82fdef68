"""REST paths of the kinds the scheduler reads and writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


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
PODGROUP_X = Resource("PodGroup", "scheduling.x-k8s.io", "v1alpha1", "podgroups", True)
PODGROUP_UPSTREAM = Resource("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", True)
# Kubernetes 1.36 serves the upstream PodGroup as scheduling.k8s.io/v1alpha2 (gate GenericWorkload).
PODGROUP_UPSTREAM_ALPHA = Resource("PodGroup", "scheduling.k8s.io", "v1alpha2", "podgroups", True)

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
        PODGROUP_X,
    )
}
ALTERNATIVES: dict[str, tuple[Resource, ...]] = {"PodGroup": (PODGROUP_X, PODGROUP_UPSTREAM, PODGROUP_UPSTREAM_ALPHA)}
OPTIONAL = (PODGROUP_X, PODGROUP_UPSTREAM, PODGROUP_UPSTREAM_ALPHA)  # served only where a CRD / a feature gate says so


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
