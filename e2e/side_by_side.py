"""Side by side with upstream: one mixed workload sent to kube-scheduler 1.37.2 and to dra-scheduler in turn
on the same nodes, every placement checked by an independent checker (issue #9, item 5).

    python -m e2e.side_by_side [--rounds N] [--serial] [-v] [--keep]   # own control plane (E2E_SBS_RUN_DIR)

The nodes (created once): 8 plain kwok nodes in 3 zones (8-32 CPUs, each a different size, ``disktype=ssd``
on some, the web image present on some, one tainted ``dedicated=infra:NoSchedule``, one
``maintenance=soon:PreferNoSchedule``), a DGX H100 and an HGX A100 of 8 GPUs each (ResourceSlices of the
NVIDIA driver, whose ``gpu.nvidia.com`` DeviceClass maps the extended resource ``nvidia.com/gpu``); a
WaitForFirstConsumer no-provisioner StorageClass and 4 local PVs, each reachable from one node. Every node
differs in size: kube-scheduler breaks ties between equal scores at random.

The workload (:func:`workload`, 50 pods in two namespaces): a db pod and 3 clients with required pod
affinity to it; 4 caches with required hostname anti-affinity; 6 pods spread over zones (DoNotSchedule,
maxSkew 1) and hosts (ScheduleAnyway); 4 pods with hostPorts 8080/8443; 8 web pods (selected by a Service,
so the system default spread constraints apply) with required zone affinity, preferred ``disktype=ssd``,
preferred anti-affinity and a 600 MB image; 4 6-CPU batch pods; 2 pods tolerating the tainted node and
selecting it; 3 pods each with a WaitForFirstConsumer PVC; 6 pods with no constraint and requests from 100m
to 4 CPUs; 5 DRA pods with template claims of 4/2/2/1/1 GPUs and 2 pods asking ``nvidia.com/gpu: 1`` (an
extended resource backed by DRA); and 2 pods nobody can place (1000 CPUs; 16 GPUs in one claim).

Each run: fresh namespaces, pods created one after the other in the same order (``--serial``: each once
the previous one is decided), a pod watch records when each is first seen bound; the run ends when every
pod is bound or the unbound ones all carry PodScheduled=False with no bind for 3 s. Between runs the pods,
claims, PVCs and namespaces are deleted and the PVs made Available again (claimRef removed).

:func:`check_placements` knows nothing of the scheduler's code: it re-reads the API objects and checks node
selector and required node affinity, taints (NoSchedule/NoExecute), required pod affinity and
anti-affinity (both directions), DoNotSchedule spread skew (nodeAffinityPolicy Honor, nodeTaintsPolicy
Ignore: the 1.37 defaults), host ports, resource fit (cpu, memory, ephemeral-storage, pods, extended
resources in allocatable), extended resources backed by DRA (claim of ``status.extendedResourceClaimStatus``
holding that many devices of the node), PVCs bound to PVs whose node affinity admits the node, and the DRA
invariants of :func:`e2e.fleet.check_state` (no device allocated twice, allocation on the pod's node,
reservedFor, finalizer).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench import fleet as gen
from e2e import cluster
from e2e.fleet import (
    JSON,
    Kube,
    KubeError,
    allocated_devices,
    check_state,
    claim_template,
    create_nodes,
    create_scale_fleet,
    namespace,
    plain_node,
    pod_scheduled_condition,
    wait_for,
)

PLAIN_FLEET = "sbs"
RUN_LABEL = "e2e.dra-scheduler.io/sbs-run"
STORAGE_CLASS = "sbs-local-wfc"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
POOL = "e2e.dra-scheduler.io/pool"
UPSTREAM = "default-scheduler"
OURS = "dra-scheduler"
#: pods of :func:`workload` that no scheduler can place
IMPOSSIBLE = frozenset({"apps/too-big", "ml/no-gpu"})

# name, zone, cpu, memory, extra labels, tainted
# (every node a different size: kube-scheduler breaks ties between equal scores at random, so equal nodes
# would make the agreement figure a coin toss)
PLAIN_NODES: tuple[tuple[str, str, str, str, dict[str, str], bool], ...] = (
    ("sbs-a1", "zone-a", "8", "32Gi", {"disktype": "ssd"}, False),
    ("sbs-a2", "zone-a", "10", "40Gi", {}, False),
    ("sbs-a3", "zone-a", "16", "48Gi", {"disktype": "ssd"}, False),
    ("sbs-b1", "zone-b", "12", "36Gi", {"disktype": "ssd"}, False),
    ("sbs-b2", "zone-b", "20", "64Gi", {}, False),
    ("sbs-b3", "zone-b", "14", "44Gi", {}, False),
    ("sbs-c1", "zone-c", "32", "128Gi", {}, False),
    ("sbs-c2", "zone-c", "8", "32Gi", {"dedicated": "infra"}, True),
)
# one DGX H100 (224 CPUs) and one HGX A100 80GB (256 CPUs), 8 GPUs each; fleets sbs-gpu-h, sbs-gpu-a
GPU_NODES: tuple[tuple[str, gen.Sku], ...] = (("sbs-gpu-h", gen.DGX_H100), ("sbs-gpu-a", gen.HGX_A100_80GB))
GPU_PRESENT = "nvidia.com/gpu.present"
PV_NODES = ("sbs-a1", "sbs-b1", "sbs-b2", "sbs-c1")
WEB_IMAGE = "registry.example/web:1.0"
IMAGE_NODES = ("sbs-a1", "sbs-b1", "sbs-c1")  # have WEB_IMAGE (600 MB): ImageLocality
PREFER_NOT = "sbs-a2"  # taint maintenance=soon:PreferNoSchedule: TaintToleration's score


def pv_name(node: str) -> str:
    return f"{node}-local-pv"


# --------------------------------------------------------------------------------------------------
# Nodes, storage
# --------------------------------------------------------------------------------------------------


def create_environment(kube: Kube) -> None:
    """The nodes, the StorageClass and the PVs (once per cluster)."""
    def taints(name: str, tainted: bool) -> list[JSON]:
        if tainted:
            return [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
        return [{"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}] if name == PREFER_NOT else []

    nodes = [plain_node(name, PLAIN_FLEET, zone, cpu=cpu, memory=mem, labels={POOL: "cpu", **extra},
                        taints=taints(name, tainted),
                        images=[{"names": [WEB_IMAGE], "sizeBytes": 600_000_000}] if name in IMAGE_NODES else ())
             for name, zone, cpu, mem, extra, tainted in PLAIN_NODES]
    create_nodes(kube, nodes, PLAIN_FLEET)
    for prefix, sku in GPU_NODES:
        create_scale_fleet(kube, prefix, 1, 8, sku=sku)
    wait_for(lambda: all(any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in (n.get("status") or {}).get("conditions") or [])
                         for n in kube.list("Node", labelSelector=f"{GPU_PRESENT}=true")),
             60, "GPU nodes Ready")
    kube.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
                 "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
                 "reclaimPolicy": "Retain"}, exist_ok=True)
    for node in PV_NODES:
        kube.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name(node)},
                     "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                              "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                              "local": {"path": "/mnt/disks/ssd0"},
                              "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                  {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}}, exist_ok=True)


def delete_environment(kube: Kube) -> None:
    """The cluster-scoped storage objects (nodes and classes go with the test's clean-up)."""
    for node in PV_NODES:
        with contextlib.suppress(KubeError):
            kube.delete("PersistentVolume", pv_name(node))
    with contextlib.suppress(KubeError):
        kube.delete("StorageClass", STORAGE_CLASS)


# --------------------------------------------------------------------------------------------------
# The workload
# --------------------------------------------------------------------------------------------------


def _pod(ns: str, name: str, scheduler: str, tag: str, *, labels: Mapping[str, str] | None = None,
         cpu: str = "100m", memory: str = "64Mi", extra: Mapping[str, str] | None = None,
         ports: Sequence[int] = (), claims: Sequence[str] = (), image: str = "pause", **spec: Any) -> JSON:
    req = {"cpu": cpu, "memory": memory, **(extra or {})}
    container: JSON = {"name": "main", "image": image, "resources": {"requests": dict(req)}}
    if extra:
        container["resources"]["limits"] = dict(extra)
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"} for p in ports]
    if claims:
        container["resources"]["claims"] = [{"name": c} for c in claims]
    body: JSON = {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0, "containers": [container], **spec}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {RUN_LABEL: tag, **(labels or {})}},
            "spec": body}


def _term(key: str, app: str) -> JSON:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}


def workload(tag: str, scheduler: str) -> tuple[list[JSON], list[JSON], list[JSON]]:
    """(namespaces, objects to create before the pods, pods) of one run; namespaces ``sbs-<tag>-apps`` and
    ``sbs-<tag>-ml``."""
    apps, ml = f"sbs-{tag}-apps", f"sbs-{tag}-ml"
    namespaces = [namespace(apps), namespace(ml)]
    pool = {POOL: "cpu"}
    pods: list[JSON] = []

    def add(ns: str, name: str, **kw: Any) -> None:
        pods.append(_pod(ns, name, scheduler, tag, **kw))

    add(apps, "db", labels={"app": "db"}, cpu="500m", memory="1Gi", nodeSelector=pool)
    for i in range(3):
        add(apps, f"db-client-{i}", labels={"app": "db-client"}, cpu="200m",
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(HOSTNAME, "db")]}})
    for i in range(4):
        add(apps, f"cache-{i}", labels={"app": "cache"}, cpu="500m", memory="2Gi", nodeSelector=pool,
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term(HOSTNAME, "cache")]}})
    for i in range(6):
        add(apps, f"zonal-{i}", labels={"app": "zonal"}, cpu="250m", nodeSelector=pool, topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "zonal"}}},
            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app": "zonal"}}}])
    for i in range(4):
        add(apps, f"ingress-{i}", labels={"app": "ingress"}, nodeSelector=pool, ports=(8080, 8443))
    web_cpu = ("100m", "250m", "500m", "1", "1500m", "100m", "250m", "750m")
    web_mem = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "128Mi", "256Mi", "1Gi")
    for i in range(8):
        add(apps, f"web-{i}", labels={"app": "web"}, cpu=web_cpu[i], memory=web_mem[i], image=WEB_IMAGE, affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": ["zone-a", "zone-b"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "preference": {"matchExpressions": [
                        {"key": "disktype", "operator": "In", "values": ["ssd"]}]}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": _term(HOSTNAME, "web")}]}})
    for i in range(4):
        add(apps, f"batch-{i}", labels={"app": "batch"}, cpu="6", memory="8Gi", nodeSelector=pool)
    for i in range(2):
        add(apps, f"infra-{i}", labels={"app": "infra"}, cpu="500m", nodeSelector={"dedicated": "infra"},
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}])
    # a Service selecting the web pods: kube-scheduler's system default spread constraints apply to them
    objects: list[JSON] = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": apps},
                            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}]
    for i in range(3):
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": f"data-{i}", "namespace": apps},
                        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                                 "resources": {"requests": {"storage": "5Gi"}}}})
        add(apps, f"stateful-{i}", labels={"app": "stateful"}, cpu="250m", nodeSelector=pool,
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{i}"}}])
    any_cpu = ("100m", "500m", "1", "2", "250m", "4")
    any_mem = ("64Mi", "512Mi", "1Gi", "4Gi", "256Mi", "8Gi")
    for i in range(6):
        add(apps, f"anywhere-{i}", cpu=any_cpu[i], memory=any_mem[i])
    add(apps, "too-big", cpu="1000")  # the GPU nodes have 224

    gpus = {"one": 1, "two": 2, "four": 4, "sixteen": 16}
    objects += [claim_template(ml, name, count=n) for name, n in gpus.items()]
    for i, t in enumerate(("four", "two", "two", "one", "one")):
        add(ml, f"train-{i}", labels={"app": "train"}, cpu="1", memory="4Gi", claims=("gpu",),
            nodeSelector={GPU_PRESENT: "true"},
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": t}])
    for i in range(2):
        add(ml, f"infer-{i}", labels={"app": "infer"}, cpu="500m", memory="2Gi", extra={"nvidia.com/gpu": "1"})
    add(ml, "no-gpu", cpu="1", claims=("gpu",),
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "sixteen"}])
    return namespaces, objects, pods


def key(pod: JSON) -> str:
    """The pod's name across runs: ``apps/web-0`` (namespace suffix / name)."""
    return f"{pod['metadata']['namespace'].rsplit('-', 1)[1]}/{pod['metadata']['name']}"


# --------------------------------------------------------------------------------------------------
# A run
# --------------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    scheduler: str
    namespaces: list[str]
    pods: dict[str, JSON]  # key -> final pod
    bound_after: dict[str, float]  # key -> seconds from the first create until first seen bound
    created_in: float  # seconds creating the pods
    violations: list[str] = field(default_factory=list)

    @property
    def bound(self) -> dict[str, str]:
        return {k: p["spec"]["nodeName"] for k, p in self.pods.items() if p["spec"].get("nodeName")}

    @property
    def time_to_bind_all(self) -> float:
        return max(self.bound_after.values(), default=0.0)

    @property
    def time_to_bind_all_but_volumes(self) -> float:
        """Without the WaitForFirstConsumer PVC pods (kube-scheduler's PreBind polls the PV binding every
        second, so those bind about 1 s late)."""
        return max((t for k, t in self.bound_after.items() if not k.startswith("apps/stateful-")), default=0.0)

    def pending(self) -> dict[str, str]:
        out = {}
        for k, p in self.pods.items():
            if not p["spec"].get("nodeName"):
                c = pod_scheduled_condition(p) or {}
                out[k] = f"{c.get('status', '?')} {c.get('reason', '')}: {c.get('message', '(no condition)')}"
        return out


class _BindWatch:
    """Records when each pod of a run is first seen with a nodeName (watch on every namespace)."""

    def __init__(self, kube: Kube, tag: str) -> None:
        self.kube, self.sel = kube, f"{RUN_LABEL}={tag}"
        self.rv = kube.request("GET", "/api/v1/pods", params={"labelSelector": self.sel})["metadata"][
            "resourceVersion"]
        self.bound: dict[str, float] = {}
        self.unschedulable: set[str] = set()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                for ev in self.kube.watch("Pod", "", resource_version=self.rv, timeout=2, labelSelector=self.sel):
                    obj = ev.get("object") or {}
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    if ev.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                        self.bound.setdefault(key(obj), time.monotonic())
                    elif ev.get("type") == "MODIFIED" and (c := pod_scheduled_condition(obj)) and c.get(
                            "status") == "False":
                        self.unschedulable.add(key(obj))
                    if self.stop.is_set():
                        return
            except Exception as e:  # reported with the result; the watch resumes
                self.errors.append(repr(e))
                time.sleep(0.2)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def run(kube: Kube, scheduler: str, tag: str, timeout: float = 60.0, quiet: float = 3.0,
        serial: bool = False) -> RunResult:
    """Send the workload to ``scheduler`` (its schedulerName) and wait until it settles. ``serial``: create
    a pod only once the previous one is bound or marked unschedulable, so that both schedulers decide each
    pod on the same cluster state as long as their earlier choices agreed (agreement then measures filters
    and scores alone, ties apart)."""
    namespaces, objects, pods = workload(tag, scheduler)
    for ns in namespaces:
        kube.create(ns)
    for obj in objects:
        kube.create(obj)
    watch = _BindWatch(kube, tag)
    t0 = time.monotonic()
    for p in pods:  # one after the other: the same order for both schedulers
        kube.create(p)
        if serial:
            k = key(p)

            def decided(k: str = k) -> bool:
                return k in watch.bound or k in watch.unschedulable

            wait_for(decided, timeout, f"{k} decided", interval=0.01)
    created_in = time.monotonic() - t0
    names = [ns["metadata"]["name"] for ns in namespaces]
    total = len(pods)

    def settled() -> bool:
        if len(watch.bound) == total:
            return True
        last = max(watch.bound.values(), default=t0)
        if time.monotonic() - last < quiet:
            return False
        unbound = [p for ns in names for p in kube.list("Pod", ns) if not p["spec"].get("nodeName")]
        return all((c := pod_scheduled_condition(p)) and c.get("status") == "False" for p in unbound)

    try:
        wait_for(settled, timeout, f"{scheduler}: every pod bound or marked unschedulable", interval=0.2)
    finally:
        watch.close()
    final = {key(p): p for ns in names for p in kube.list("Pod", ns)}
    return RunResult(scheduler, names, final, {k: t - t0 for k, t in watch.bound.items()}, created_in)


def reset(kube: Kube, namespaces: Sequence[str], timeout: float = 90.0) -> None:
    """Delete a run's pods, claims, PVCs and namespaces; make the PVs Available again."""
    for ns in namespaces:
        kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods",
                     {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    wait_for(lambda: not any(kube.list("Pod", ns) for ns in namespaces), timeout, "the run's pods deleted")
    for ns in namespaces:
        kube.delete_collection("PersistentVolumeClaim", ns)
        kube.delete("Namespace", ns)
    wait_for(lambda: not any(kube.list("ResourceClaim", ns) or kube.list("PersistentVolumeClaim", ns)
                             for ns in namespaces), timeout, "the run's claims and PVCs deleted")
    for node in PV_NODES:
        kube.patch("PersistentVolume", pv_name(node), {
            "metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": None}},
            "spec": {"claimRef": None}})
    wait_for(lambda: all((kube.get("PersistentVolume", pv_name(n)).get("status") or {}).get("phase") == "Available"
                         for n in PV_NODES), timeout, "the PVs Available again")


def state(kube: Kube, result: RunResult) -> dict[str, Any]:
    """Everything :func:`check_placements` reads, from the API server, after a run."""
    return {
        "nodes": kube.list("Node"),
        "pods": list(result.pods.values()),
        "namespaces": kube.list("Namespace"),
        "pvcs": [c for ns in result.namespaces for c in kube.list("PersistentVolumeClaim", ns)],
        "pvs": kube.list("PersistentVolume"),
        "claims": [c for ns in result.namespaces for c in kube.list("ResourceClaim", ns)],
        "slices": kube.list("ResourceSlice"),
        "classes": kube.list("DeviceClass"),
    }


# --------------------------------------------------------------------------------------------------
# The independent checker
# --------------------------------------------------------------------------------------------------

_SUFFIX = {"m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
           "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18), "Ki": Decimal(2**10),
           "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
           "Ei": Decimal(2**60)}


def quantity(q: str | int | float) -> Decimal:
    """A resource.Quantity string as a number (``100m`` = 0.1, ``2Gi`` = 2147483648, ``1e3`` = 1000)."""
    s = str(q).strip()
    for suf in sorted(_SUFFIX, key=len, reverse=True):
        if s.endswith(suf) and s[: -len(suf)]:
            return Decimal(s[: -len(suf)]) * _SUFFIX[suf]
    return Decimal(s)


def _requirement(labels: Mapping[str, str], key_: str, op: str, values: Sequence[str]) -> bool:
    has = key_ in labels
    v = labels.get(key_)
    if op == "In":
        return has and v in values
    if op == "NotIn":
        return not has or v not in values
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt"):
        try:
            n, ref = int(v or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return n > ref if op == "Gt" else n < ref
    raise ValueError(f"unknown operator {op}")


def selector_matches(sel: JSON | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: None selects nothing, {} everything."""
    if sel is None:
        return False
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    return all(_requirement(labels, e["key"], e["operator"], e.get("values") or [])
               for e in sel.get("matchExpressions") or [])


def node_selector_term_matches(term: JSON, node: JSON) -> bool:
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    if not term.get("matchExpressions") and not term.get("matchFields"):
        return False  # an empty term selects no node
    return all(_requirement(labels, e["key"], e["operator"], e.get("values") or [])
               for e in term.get("matchExpressions") or []) and all(
        _requirement(fields, e["key"], e["operator"], e.get("values") or []) for e in term.get("matchFields") or [])


def node_matches_pod(pod: JSON, node: JSON) -> bool:
    """spec.nodeSelector and required node affinity (what nodeAffinityPolicy Honor means too)."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
        return False
    req = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if req is None:
        return True
    return any(node_selector_term_matches(t, node) for t in req.get("nodeSelectorTerms") or [])


def tolerates(tolerations: Sequence[JSON], taint: JSON) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def pod_requests(pod: JSON) -> dict[str, Decimal]:
    """max(sum of containers, each init container) + overhead, per resource (requests; limits where a
    request is missing, as the API server's defaulting does)."""
    def of(c: JSON) -> dict[str, Decimal]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: quantity(v) for k, v in merged.items()}

    total: dict[str, Decimal] = defaultdict(Decimal)
    for c in pod["spec"].get("containers") or []:
        for k, v in of(c).items():
            total[k] += v
    for c in pod["spec"].get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total[k], v)
    for k, v in (pod["spec"].get("overhead") or {}).items():
        total[k] += quantity(v)
    return dict(total)


def _host_ports(pod: JSON) -> list[tuple[str, str, int]]:
    out = []
    for c in [*(pod["spec"].get("initContainers") or []), *(pod["spec"].get("containers") or [])]:
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.append((p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0", int(p["hostPort"])))
    return out


def _term_namespaces(pod: JSON, term: JSON, ns_labels: Mapping[str, Mapping[str, str]]) -> set[str] | None:
    """Namespaces a pod (anti-)affinity term applies to; None = all."""
    names = set(term.get("namespaces") or [])
    sel = term.get("namespaceSelector")
    if sel is not None:
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            return None
        names |= {n for n, labels in ns_labels.items() if selector_matches(sel, labels)}
    elif not names:
        names = {pod["metadata"]["namespace"]}
    return names


def _term_selects(term: JSON, namespaces: set[str] | None, other: JSON) -> bool:
    if namespaces is not None and other["metadata"]["namespace"] not in namespaces:
        return False
    return selector_matches(term.get("labelSelector"), other["metadata"].get("labels") or {})


def check_placements(
    nodes: Sequence[JSON], pods: Sequence[JSON], *, namespaces: Sequence[JSON] = (), pvcs: Sequence[JSON] = (),
    pvs: Sequence[JSON] = (), claims: Sequence[JSON] = (), slices: Sequence[JSON] = (),
    classes: Sequence[JSON] = (),
) -> list[str]:
    """Every constraint violated by the bound pods of ``pods`` on ``nodes`` (an empty list: all satisfied).

    ``pods`` must be every pod bound to these nodes (resources, ports and anti-affinity are checked against
    all of them)."""
    problems: list[str] = []
    node_by = {n["metadata"]["name"]: n for n in nodes}
    ns_labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in namespaces}
    bound = [p for p in pods if p["spec"].get("nodeName")]
    on_node: dict[str, list[JSON]] = defaultdict(list)
    for p in bound:
        on_node[p["spec"]["nodeName"]].append(p)
    ext_names = {c["spec"]["extendedResourceName"] for c in classes
                 if (c.get("spec") or {}).get("extendedResourceName")}
    claim_by = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    pvc_by = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in pvcs}
    pv_by = {v["metadata"]["name"]: v for v in pvs}

    def label(p: JSON) -> str:
        return f"{p['metadata']['namespace']}/{p['metadata']['name']}@{p['spec'].get('nodeName')}"

    def topo(p: JSON, key_: str) -> str | None:
        return (node_by[p["spec"]["nodeName"]]["metadata"].get("labels") or {}).get(key_)

    for p in bound:
        name = label(p)
        node = node_by.get(p["spec"]["nodeName"])
        if node is None:
            problems.append(f"{name}: node does not exist")
            continue
        if node["spec"].get("unschedulable"):
            problems.append(f"{name}: node is unschedulable")
        if not node_matches_pod(p, node):
            problems.append(f"{name}: node selector / required node affinity not satisfied")
        for t in node["spec"].get("taints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(p["spec"].get("tolerations") or [], t):
                problems.append(f"{name}: taint {t.get('key')}={t.get('value', '')}:{t['effect']} not tolerated")
        aff = p["spec"].get("affinity") or {}
        for t in (aff.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            nss = _term_namespaces(p, t, ns_labels)
            others = [q for q in bound if q is not p and _term_selects(t, nss, q)]
            here = topo(p, t["topologyKey"])
            # upstream's exception: no pod matches anywhere and the pod matches its own term
            if (here is None or not any(topo(q, t["topologyKey"]) == here for q in others)) and (
                    others or not _term_selects(t, nss, p)):
                problems.append(f"{name}: required pod affinity {t.get('labelSelector')} on "
                                f"{t['topologyKey']} not satisfied")
        for t in (aff.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            nss = _term_namespaces(p, t, ns_labels)
            here = topo(p, t["topologyKey"])
            if here is None:
                continue
            for q in bound:
                if q is not p and _term_selects(t, nss, q) and topo(q, t["topologyKey"]) == here:
                    problems.append(f"{name}: required anti-affinity {t.get('labelSelector')} on "
                                    f"{t['topologyKey']}={here} violated by {label(q)}")
        # PVCs: bound to a PV whose node affinity admits the node
        for v in p["spec"].get("volumes") or []:
            src = v.get("persistentVolumeClaim")
            if not src:
                continue
            pvc = pvc_by.get((p["metadata"]["namespace"], src["claimName"]))
            if pvc is None:
                problems.append(f"{name}: PVC {src['claimName']} does not exist")
                continue
            pv = pv_by.get(pvc["spec"].get("volumeName") or "")
            if pv is None or (pvc.get("status") or {}).get("phase") != "Bound":
                problems.append(f"{name}: PVC {src['claimName']} not Bound to an existing PV "
                                f"({(pvc.get('status') or {}).get('phase')}, {pvc['spec'].get('volumeName')})")
                continue
            ref = pv["spec"].get("claimRef") or {}
            if ref.get("uid") != pvc["metadata"]["uid"]:
                problems.append(f"{name}: PV {pv['metadata']['name']} claimRef {ref} is not PVC {src['claimName']}")
            terms = (((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms"))
            if terms is not None and not any(node_selector_term_matches(t, node) for t in terms):
                problems.append(f"{name}: PV {pv['metadata']['name']} node affinity does not admit the node")
        # extended resources backed by DRA: the claim of status.extendedResourceClaimStatus has the devices
        req = pod_requests(p)
        allocatable = node["status"].get("allocatable") or {}
        dra_ext = {r: n for r, n in req.items() if r not in allocatable and n > 0
                   and (r in ext_names or r.startswith("deviceclass.resource.kubernetes.io/"))}
        for r, n in req.items():
            if n > 0 and r not in allocatable and r not in dra_ext and "/" in r and "kubernetes.io/" not in r:
                problems.append(f"{name}: extended resource {r} neither allocatable on the node nor backed by DRA")
        if dra_ext:
            st = (p.get("status") or {}).get("extendedResourceClaimStatus") or {}
            c = claim_by.get((p["metadata"]["namespace"], st.get("resourceClaimName", "")))
            if c is None:
                problems.append(f"{name}: asks {dict(dra_ext)} (DRA) but has no extended-resource claim")
            else:
                devs = allocated_devices(c)
                if len(devs) != int(sum(dra_ext.values())):
                    problems.append(f"{name}: extended-resource claim has {len(devs)} devices, "
                                    f"{int(sum(dra_ext.values()))} asked")
                if any(d[1] != node["metadata"]["name"] for d in devs):
                    problems.append(f"{name}: extended-resource claim devices {devs} not on the node")
                reserved = (c.get("status") or {}).get("reservedFor") or []
                if not any(r.get("uid") == p["metadata"]["uid"] for r in reserved):
                    problems.append(f"{name}: extended-resource claim not reserved for the pod")

    # per node: resources and ports
    for node_name, ps in on_node.items():
        node = node_by.get(node_name)
        if node is None:
            continue
        allocatable = {k: quantity(v) for k, v in (node["status"].get("allocatable") or {}).items()}
        used: dict[str, Decimal] = defaultdict(Decimal)
        for p in ps:
            for k, v in pod_requests(p).items():
                used[k] += v
        used["pods"] = Decimal(len(ps))
        for k, v in used.items():
            if k in allocatable and v > allocatable[k]:
                problems.append(f"node {node_name}: {k} requested {v.normalize():f} > allocatable "
                                f"{allocatable[k].normalize():f}")
        seen: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
        for p in ps:
            for proto, ip, port in _host_ports(p):
                for other_ip, who in seen[(proto, port)]:
                    if ip == other_ip or "0.0.0.0" in (ip, other_ip):
                        problems.append(f"node {node_name}: host port {proto}/{port} used by {who} and {label(p)}")
                seen[(proto, port)].append((ip, label(p)))

    # DoNotSchedule spread: final skew per (namespace, constraint, node filter)
    done: set[str] = set()
    for p in bound:
        for c in p["spec"].get("topologySpreadConstraints") or []:
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            ident = repr((p["metadata"]["namespace"], sorted(c.items()), p["spec"].get("nodeSelector"),
                          (p["spec"].get("affinity") or {}).get("nodeAffinity")))
            if ident in done:
                continue
            done.add(ident)
            tk = c["topologyKey"]
            honor_affinity = c.get("nodeAffinityPolicy", "Honor") == "Honor"
            honor_taints = c.get("nodeTaintsPolicy", "Ignore") == "Honor"
            eligible = [n for n in nodes if tk in (n["metadata"].get("labels") or {})
                        and (not honor_affinity or node_matches_pod(p, n))
                        and (not honor_taints or all(tolerates(p["spec"].get("tolerations") or [], t)
                                                     for t in n["spec"].get("taints") or []
                                                     if t.get("effect") in ("NoSchedule", "NoExecute")))]
            counts: Counter[str] = Counter({n["metadata"]["labels"][tk]: 0 for n in eligible})
            eligible_names = {n["metadata"]["name"] for n in eligible}
            for q in bound:
                if (q["metadata"]["namespace"] == p["metadata"]["namespace"] and q["spec"]["nodeName"] in eligible_names
                        and selector_matches(c.get("labelSelector"), q["metadata"].get("labels") or {})):
                    counts[topo(q, tk) or ""] += 1
            if not counts:
                continue
            lo = min(counts.values()) if len(counts) >= int(c.get("minDomains") or 1) else 0
            skew = max(counts.values()) - lo
            if skew > int(c["maxSkew"]):
                problems.append(f"spread {p['metadata']['namespace']} {c.get('labelSelector')} on {tk}: skew {skew} > "
                                f"maxSkew {c['maxSkew']} ({dict(counts)})")

    # DRA (pod claims) and no device twice over every claim; every allocated device is published
    problems += check_state(list(pods), list(claims))
    if slices:
        published = {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
                     for s in slices for d in s["spec"].get("devices") or []}
        for c in claims:
            for d in allocated_devices(c):
                if d not in published:
                    problems.append(f"claim {c['metadata']['namespace']}/{c['metadata']['name']}: device "
                                    f"{'/'.join(d)} is in no ResourceSlice")
    return problems


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "-"


@dataclass
class Comparison:
    upstream: RunResult
    ours: RunResult
    nodes: int

    def missing(self) -> dict[str, str]:
        """Pods kube-scheduler bound and dra-scheduler did not: their PodScheduled condition."""
        pend = self.ours.pending()
        return {k: pend.get(k, "?") for k in sorted(set(self.upstream.bound) - set(self.ours.bound))}

    def agreement(self, zone_of: Mapping[str, str] | None = None) -> tuple[int, int]:
        both = set(self.upstream.bound) & set(self.ours.bound)
        if zone_of is None:
            same = sum(1 for k in both if self.upstream.bound[k] == self.ours.bound[k])
        else:
            same = sum(1 for k in both if zone_of.get(self.upstream.bound[k]) == zone_of.get(self.ours.bound[k]))
        return same, len(both)

    def table(self, zone_of: Mapping[str, str]) -> str:
        u, o = self.upstream, self.ours
        n = len(u.pods)
        same, both = self.agreement()
        zsame, _ = self.agreement(zone_of)
        rows = [
            ("", "kube-scheduler 1.37.2", "dra-scheduler"),
            ("pods bound", f"{len(u.bound)}/{n}", f"{len(o.bound)}/{n}"),
            ("time to bind all (first create -> last bind)", f"{u.time_to_bind_all:.2f} s",
             f"{o.time_to_bind_all:.2f} s"),
            ("  the same without the 3 PVC pods", f"{u.time_to_bind_all_but_volumes:.2f} s",
             f"{o.time_to_bind_all_but_volumes:.2f} s"),
            ("constraint violations (independent checker)", str(len(u.violations)), str(len(o.violations))),
            ("bound by kube-scheduler, not by dra-scheduler", "", str(len(self.missing()))),
            ("same node (of pods bound by both)", f"{same}/{both} = {pct(same, both)}", ""),
            ("same zone (of pods bound by both)", f"{zsame}/{both} = {pct(zsame, both)}", ""),
        ]
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        lines = [f"{r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]}".rstrip() for r in rows]
        groups: dict[str, list[str]] = defaultdict(list)
        for k in sorted(set(u.bound) & set(o.bound)):
            groups[k.split("/", 1)[1].rsplit("-", 1)[0] if k.rsplit("-", 1)[-1].isdigit() else k].append(k)
        per = ", ".join(f"{g} {sum(1 for k in ks if u.bound[k] == o.bound[k])}/{len(ks)}"
                        for g, ks in groups.items())
        lines.append(f"same node per group: {per}")
        return "\n".join(lines)


def compare(kube: Kube, run_dir: str, tag: str = "", serial: bool = False) -> Comparison:
    """kube-scheduler (started for its run, then stopped), reset, then dra-scheduler (must be running)."""
    tag = tag or f"{int(time.time()) % 100000:05d}"
    with cluster.kube_scheduler(run_dir):
        upstream = run(kube, UPSTREAM, f"ks{tag}", serial=serial)
    upstream.violations = check_placements(**_checker_args(kube, upstream))
    reset(kube, upstream.namespaces)
    ours = run(kube, OURS, f"ds{tag}", serial=serial)
    ours.violations = check_placements(**_checker_args(kube, ours))
    return Comparison(upstream, ours, len(kube.list("Node")))


def _checker_args(kube: Kube, result: RunResult) -> dict[str, Any]:
    s = state(kube, result)
    return {"nodes": s["nodes"], "pods": s["pods"], "namespaces": s["namespaces"], "pvcs": s["pvcs"],
            "pvs": s["pvs"], "claims": s["claims"], "slices": s["slices"], "classes": s["classes"]}


def zones(kube: Kube) -> dict[str, str]:
    return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE, "") for n in kube.list("Node")}


def report(cmp: Comparison, zone_of: Mapping[str, str], verbose: bool = False) -> str:
    out = [f"side by side: {cmp.nodes} nodes ({len(PLAIN_NODES)} plain in 3 zones, 2 with 8 GPUs), "
           f"{len(cmp.upstream.pods)} pods ({len(cmp.upstream.pods) - len(IMPOSSIBLE)} placeable)",
           cmp.table(zone_of)]
    for who, r in (("kube-scheduler", cmp.upstream), ("dra-scheduler", cmp.ours)):
        if r.violations:
            out.append(f"{who} violations:\n  " + "\n  ".join(r.violations))
    up_pending, our_pending = cmp.upstream.pending(), cmp.ours.pending()
    for k in sorted(set(up_pending) | set(our_pending)):
        out.append(f"pending {k}:\n  kube-scheduler: {up_pending.get(k, '(bound)')}\n"
                   f"  dra-scheduler:  {our_pending.get(k, '(bound)')}")
    if cmp.missing():
        out.append("bound by kube-scheduler only:\n  " + "\n  ".join(f"{k}: {v}" for k, v in cmp.missing().items()))
    if verbose:
        u, o = cmp.upstream.bound, cmp.ours.bound
        ut, ot = cmp.upstream.bound_after, cmp.ours.bound_after
        out.append("placements (kube-scheduler -> dra-scheduler; bound after s):\n  " + "\n  ".join(
            f"{k:<18} {u.get(k, '-'):<13} {'==' if u.get(k) == o.get(k) else '->'} {o.get(k, '-'):<13} "
            f"{ut.get(k, float('nan')):5.2f} {ot.get(k, float('nan')):5.2f}"
            for k in cmp.upstream.pods))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    from e2e.fleet import SchedulerProcess

    ap = argparse.ArgumentParser(prog="python -m e2e.side_by_side", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="repeat the comparison (same nodes)")
    ap.add_argument("--keep", action="store_true", help="leave the control plane running")
    ap.add_argument("--serial", action="store_true",
                    help="one pod at a time (each decided before the next is created): agreement of the "
                         "filters and scores alone; the times then include the waits")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every pod's node under both schedulers")
    args = ap.parse_args(argv)
    run_dir = os.environ.get("E2E_SBS_RUN_DIR", "/tmp/dra-scheduler-e2e-sbs")
    t0 = time.monotonic()
    cluster.stop(run_dir)
    info = cluster.start(run_dir, env={"E2E_PORTS": "auto"})
    print(f"control plane up in {time.monotonic() - t0:.1f}s (Kubernetes {info.k8s_version})", flush=True)
    kube = Kube.from_info(info)
    sched = SchedulerProcess(info, Path(run_dir) / "logs" / "dra-scheduler.log")
    failed = False
    try:
        create_environment(kube)
        sched.start()
        rounds: list[Comparison] = []
        for i in range(args.rounds):
            cmp = compare(kube, info.run_dir, tag=f"{i:02d}{int(time.time()) % 1000:03d}", serial=args.serial)
            print(report(cmp, zones(kube), args.verbose), flush=True)
            failed |= bool(cmp.missing() or cmp.ours.violations)
            reset(kube, cmp.ours.namespaces)
            rounds.append(cmp)
        if len(rounds) > 1:
            same = [c.agreement() for c in rounds]
            print(f"{len(rounds)} rounds: same node {sum(a for a, _ in same)}/{sum(b for _, b in same)} = "
                  f"{pct(sum(a for a, _ in same), sum(b for _, b in same))} (per round "
                  f"{', '.join(pct(a, b) for a, b in same)}); time to bind all: kube-scheduler "
                  f"{', '.join(f'{c.upstream.time_to_bind_all:.2f}' for c in rounds)} s, dra-scheduler "
                  f"{', '.join(f'{c.ours.time_to_bind_all:.2f}' for c in rounds)} s")
    finally:
        sched.stop()
        if not args.keep:
            cluster.stop(run_dir)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
