"""Kueue objects for the live Kueue tests (e2e/test_live_kueue.py): ResourceFlavors, ClusterQueues, LocalQueues,
Topologies, and the labels and annotations of Kueue's pod integration, as Kueue v0.17.0 defines them
(sigs.k8s.io/kueue@v0.17.0: apis/kueue/v1beta2, pkg/controller/constants, pkg/controller/jobs/pod/constants).

Kueue itself is started by ``e2e/cluster.sh kueue-up`` (``cluster.kueue_up``); the ``kueue`` fixture of
e2e/conftest.py does that on first use. Only namespaces labelled ``e2e.dra-scheduler.io/kueue=true``
(:func:`kueue_namespace`) are Kueue's: its webhooks and its managedJobsNamespaceSelector name that label.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence

from e2e import cluster
from e2e.fleet import JSON, KINDS, Kind, Kube, KubeError, condition, namespace

GROUP = "kueue.x-k8s.io"
API = f"{GROUP}/v1beta2"

# pkg/controller/constants, pkg/controller/jobs/pod/constants, apis/kueue/v1beta2/topology_types.go
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ADMISSION_GATE = "kueue.x-k8s.io/admission"  # pod integration: removed when the Workload is admitted
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"  # TAS: removed once the pod's nodeSelector names its domain
MANAGED_LABEL = "kueue.x-k8s.io/managed"  # also Kueue's finalizer on the pods it manages
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"

# the logical resources of the harness's default Configuration (e2e/cluster.sh write_kueue_config):
# resources.deviceClassMappings, feature gate DynamicResourceAllocation (alpha in 0.17)
WHOLE_GPUS = "whole-gpus"  # DeviceClass gpu.nvidia.com
MIG_DEVICES = "mig-devices"  # DeviceClass mig.nvidia.com

KINDS.update({
    "ResourceFlavor": Kind(GROUP, "v1beta2", "resourceflavors", False),
    "ClusterQueue": Kind(GROUP, "v1beta2", "clusterqueues", False),
    "LocalQueue": Kind(GROUP, "v1beta2", "localqueues", True),
    "Topology": Kind(GROUP, "v1beta2", "topologies", False),
    f"Workload.{GROUP}": Kind(GROUP, "v1beta2", "workloads", True),
    "Job": Kind("batch", "v1", "jobs", True),
})
WORKLOAD = f"Workload.{GROUP}"  # the KINDS key of Kueue's Workloads (plain "Workload" is scheduling.k8s.io's)


def suffix() -> str:
    return uuid.uuid4().hex[:5]


def kueue_namespace(kube: Kube, prefix: str) -> str:
    """A fresh namespace whose pods and Jobs Kueue manages (label ``cluster.KUEUE_LABEL=true``)."""
    name = f"{prefix}-{suffix()}"
    ns = namespace(name)
    ns["metadata"]["labels"][cluster.KUEUE_LABEL] = "true"
    kube.create(ns)
    return name


def resource_flavor(name: str, node_labels: Mapping[str, str] | None = None, topology: str | None = None) -> JSON:
    """A ResourceFlavor: Kueue adds ``node_labels`` to the nodeSelector of the pods it admits with it; with
    ``topology`` it is a TAS flavor (needs ``node_labels``)."""
    spec: JSON = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if topology:
        spec["topologyName"] = topology
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, flavor: str, quotas: Mapping[str, str | int]) -> JSON:
    """A ClusterQueue with one resource group and one flavor: ``quotas`` = resource -> nominalQuota. Every
    namespace may use it (namespaceSelector {}); no cohort, no preemption."""
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": list(quotas),
                                         "flavors": [{"name": flavor, "resources": [
                                             {"name": r, "nominalQuota": q} for r, q in quotas.items()]}]}]}}


def local_queue(ns: str, name: str, cq: str) -> JSON:
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cq}}


def topology(name: str, levels: Sequence[str]) -> JSON:
    """A Topology (TAS): ``levels`` are node-label keys, from the widest domain to the narrowest."""
    return {"apiVersion": API, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": lbl} for lbl in levels]}}


def queued(pod: JSON, queue: str, group: str | None = None, total: int | None = None,
           required_topology: str | None = None) -> JSON:
    """``pod`` submitted to LocalQueue ``queue``; with ``group`` a member of Kueue pod group ``group`` of
    ``total`` pods (one Workload for all); with ``required_topology`` a TAS PodSet that must fit in one domain of
    that level."""
    meta = pod["metadata"]
    meta.setdefault("labels", {})[QUEUE_LABEL] = queue
    if group is not None:
        meta["labels"][POD_GROUP_NAME_LABEL] = group
        meta.setdefault("annotations", {})[POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(total)
    if required_topology is not None:
        meta.setdefault("annotations", {})[REQUIRED_TOPOLOGY_ANNOTATION] = required_topology
    return pod


def gates(pod: JSON) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def workloads(kube: Kube, ns: str) -> list[JSON]:
    return kube.list(WORKLOAD, ns)


def is_admitted(wl: JSON) -> bool:
    c = condition(wl, "Admitted")
    return bool(c and c.get("status") == "True")


def pending_message(wl: JSON) -> str:
    """Why Kueue has not reserved quota for ``wl`` (its QuotaReserved=False message), "" otherwise."""
    c = condition(wl, "QuotaReserved")
    return str(c.get("message", "")) if c and c.get("status") == "False" else ""


def owner_pods(wl: JSON) -> list[str]:
    """Names of the pods a Workload of the pod integration belongs to (its ownerReferences)."""
    return sorted(r["name"] for r in wl["metadata"].get("ownerReferences") or [] if r.get("kind") == "Pod")


def usage(wl: JSON) -> dict[str, str]:
    """The quota an admitted Workload holds: resource -> quantity, summed over its PodSets' resourceUsage."""
    out: dict[str, str] = {}
    for a in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for r, q in (a.get("resourceUsage") or {}).items():
            out[r] = q if r not in out else f"{out[r]}+{q}"
    return out


def delete_cluster_objects(kube: Kube, names: Mapping[str, Sequence[str]]) -> None:
    """Delete cluster-scoped Kueue objects (kind -> names), ClusterQueues first; not awaited (a ClusterQueue
    keeps Kueue's resource-in-use finalizer until its Workloads are gone)."""
    for kind in ("ClusterQueue", "ResourceFlavor", "Topology"):
        for name in names.get(kind, ()):
            kube.delete(kind, name)


def scheduler_events(kube: Kube, ns: str) -> list[JSON]:
    """Events in ``ns`` reported by dra-scheduler."""
    return [e for e in kube.list("Event", ns)
            if "dra-scheduler" in (e.get("reportingComponent") or (e.get("source") or {}).get("component") or "")]


def managers(obj: JSON) -> set[str]:
    return {m.get("manager", "") for m in obj["metadata"].get("managedFields") or []}



def release_pods(kube: Kube, ns: str, timeout: float = 30.0) -> None:
    """Delete every pod of ``ns`` and wait until they are gone. Kueue keeps its finalizer (``kueue.x-k8s.io/managed``)
    on a deleted member of a pod group until the pod has terminated; no kubelet terminates pods here (kwok deletes
    them), so after a moment the finalizer is dropped as Kueue would once the kubelet had stopped the pod."""
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods",
                 {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    deadline = time.monotonic() + timeout
    while True:
        pods = kube.list("Pod", ns)
        if not pods:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of {ns} not deleted after {timeout:g}s: {[p['metadata']['name'] for p in pods]}")
        time.sleep(1.0)
        for p in pods:
            fins = p["metadata"].get("finalizers") or []
            if p["metadata"].get("deletionTimestamp") and MANAGED_LABEL in fins:
                with contextlib.suppress(KubeError):
                    kube.patch("Pod", p["metadata"]["name"],
                               {"metadata": {"finalizers": [f for f in fins if f != MANAGED_LABEL] or None,
                                             "resourceVersion": p["metadata"]["resourceVersion"]}}, ns)
