"""``dra-scheduler simulate``: schedule, offline, the objects found in YAML files or directories.

The input is what a user would ``kubectl apply`` (or ``kubectl get -o yaml`` output, ``kind: List``
included). The objects are loaded into an in-memory API server; the claim controller creates template
claims; then the same queue, scheduling cycle and binder as the live scheduler run until nothing changes
(every pod bound, or left unschedulable after its retries). A fake clock makes backoff instant.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from scheduler.cache import Cache
from scheduler.claimcontroller import create_pod_claims
from scheduler.config import SchedulerConfig, default_config, load_config_text
from scheduler.memapi import CLUSTER_SCOPED, InMemoryAPI
from scheduler.queue import FakeClock
from scheduler.scheduler import Scheduler
from scheduler.storage import VolumeControllers

KINDS = {
    ("v1", "Node"),
    ("v1", "Pod"),
    ("v1", "Namespace"),
    ("v1", "ConfigMap"),
    ("v1", "PersistentVolume"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Service"),
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSINode"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("storage.k8s.io/v1", "CSIStorageCapacity"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("policy/v1", "PodDisruptionBudget"),
    ("resource.k8s.io/v1", "ResourceSlice"),
    ("resource.k8s.io/v1", "DeviceClass"),
    ("resource.k8s.io/v1", "DeviceTaintRule"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("scheduling.k8s.io/v1beta1", "PodGroup"),
    ("scheduling.k8s.io/v1alpha2", "PodGroup"),
}
# Load order: what pods depend on comes first (as an informer-synced scheduler would see it).
ORDER = [
    "Namespace",
    "PriorityClass",
    "StorageClass",
    "CSIDriver",
    "Node",
    "CSINode",
    "CSIStorageCapacity",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
    "PodDisruptionBudget",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "PodGroup",
    "Pod",
]
CONFIG_KEY = "scheduler-config.yaml"


class InputError(ValueError):
    pass


def _files(paths: Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in sorted(os.walk(p)):
                out.extend(os.path.join(root, n) for n in sorted(names) if n.endswith((".yaml", ".yml", ".json")))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or directory")
    return out


def load_objects(paths: Sequence[str]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for f in _files(paths):
        with open(f, encoding="utf-8") as fh:
            try:
                docs = list(yaml.safe_load_all(fh))
            except yaml.YAMLError as e:
                raise InputError(f"{f}: invalid YAML: {e}") from None
        for i, doc in enumerate(docs):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise InputError(f"{f}: document {i}: expected an object")
            items = doc.get("items") if str(doc.get("kind", "")).endswith("List") else [doc]
            for j, obj in enumerate(items or []):
                where = f"{f}: document {i}" + (f" item {j}" if doc is not obj else "")
                if not isinstance(obj, dict) or not obj.get("kind") or not obj.get("apiVersion"):
                    raise InputError(f"{where}: apiVersion and kind are required")
                if (obj["apiVersion"], obj["kind"]) not in KINDS:
                    if obj["kind"] in {k for _, k in KINDS}:
                        raise InputError(f"{where}: unsupported apiVersion {obj['apiVersion']} for {obj['kind']}")
                    # Deployments, Jobs, ... do not take part in scheduling: say so and go on.
                    print(
                        f"note: {where}: {obj['apiVersion']}/{obj['kind']} "
                        f"{(obj.get('metadata') or {}).get('name', '')} does not affect scheduling, skipped",
                        file=sys.stderr,
                    )
                    continue
                if not (obj.get("metadata") or {}).get("name"):
                    raise InputError(f"{where}: metadata.name is required")
                objs.append(obj)
    return objs


@dataclass
class SimulationResult:
    items: list[dict[str, Any]]
    summary: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    scheduler: Scheduler | None = None
    timing: dict[str, float] = field(default_factory=dict)


# The built-in PriorityClasses the API server creates (pkg/apis/scheduling/types.go SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def admit_priorities(objs: Sequence[dict[str, Any]]) -> None:
    """What the Priority admission plugin does at pod creation (plugin/pkg/admission/priority): a pod without
    ``spec.priority`` gets the value of its ``priorityClassName`` (or of the ``globalDefault`` PriorityClass,
    whose name it also gets, or 0), and the class's ``preemptionPolicy`` (default PreemptLowerPriority). A
    pod naming a class that does not exist is refused, as the API server refuses it."""
    classes: dict[str, tuple[int, str]] = {n: (v, "PreemptLowerPriority") for n, v in SYSTEM_PRIORITY_CLASSES.items()}
    default: str | None = None
    for o in objs:
        if o["kind"] == "PriorityClass":
            name = o["metadata"]["name"]
            value = o.get("value")
            if not isinstance(value, int) or isinstance(value, bool):
                raise InputError(f"PriorityClass {name}: value: required integer")
            classes[name] = (value, str(o.get("preemptionPolicy") or "PreemptLowerPriority"))
            if o.get("globalDefault"):
                default = name
    for o in objs:
        if o["kind"] != "Pod":
            continue
        spec = o.setdefault("spec", {})
        if spec.get("nodeName"):
            continue
        name = spec.get("priorityClassName") or default
        if not name:
            spec.setdefault("priority", 0)
            continue
        if name not in classes:
            raise InputError(
                f"Pod {o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}: "
                f'spec.priorityClassName: no PriorityClass with name {name} was found'
            )
        value, policy = classes[name]
        if "priority" in spec and spec["priority"] != value:
            raise InputError(
                f"Pod {o['metadata']['name']}: spec.priority: the integer value of priority ({spec['priority']}) "
                f"must not be provided in pod spec; priority admission controller computed {value} from the "
                "given PriorityClass name"
            )
        spec["priorityClassName"] = name
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", policy)


def admit_match_label_keys(objs: Sequence[dict[str, Any]]) -> None:
    """What the API server does at pod creation since 1.34 (MatchLabelKeysInPodTopologySpreadSelectorMerge,
    ``pkg/registry/core/pod/strategy.go`` ``mutateTopologySpreadConstraints``): for each topology spread
    constraint with ``matchLabelKeys`` and a ``labelSelector``, append ``key In (pod's value)`` to the
    selector's matchExpressions for every listed key the pod has. Unlike the API server, an identical
    requirement already present (``kubectl get -o yaml`` input, merged once already) is not appended again;
    the scheduler merges matchLabelKeys itself either way, so placements do not depend on this step."""
    for o in objs:
        if o["kind"] != "Pod":
            continue
        labels = (o.get("metadata") or {}).get("labels") or {}
        for c in (o.get("spec") or {}).get("topologySpreadConstraints") or []:
            if not isinstance(c, dict) or not c.get("matchLabelKeys") or not isinstance(c.get("labelSelector"), dict):
                continue
            sel = c["labelSelector"]
            for key in c["matchLabelKeys"]:
                if key in labels:
                    if not isinstance(sel.get("matchExpressions"), list):
                        sel["matchExpressions"] = []
                    req = {"key": key, "operator": "In", "values": [labels[key]]}
                    if req not in sel["matchExpressions"]:
                        sel["matchExpressions"].append(req)


def _fake_binding_waits(sched: Scheduler, clock: FakeClock, epoch: float) -> None:
    """DynamicResources' PreBind wait for device binding conditions (KEP-5007) runs on the fake clock. No DRA
    driver runs here to set the conditions: a pod using such devices waits ``bindingTimeout`` of fake time (at
    once), is rolled back and retried as upstream would, and ends PodScheduled=False naming the pending
    conditions. The wall clock is the same as ``wallclock``'s (``allocationTimestamp``)."""
    from plugins.dra.plugin import fake_binding_clock, use_binding_clock

    use_binding_clock(sched, fake_binding_clock(clock, epoch))


def _config_from(objs: Iterable[Mapping[str, Any]]) -> SchedulerConfig | None:
    for o in objs:
        if o.get("kind") == "ConfigMap" and CONFIG_KEY in (o.get("data") or {}):
            return load_config_text(o["data"][CONFIG_KEY])
    return None


async def simulate(
    objs: Sequence[dict[str, Any]],
    config: SchedulerConfig | None = None,
    max_attempts: int = 6,
) -> SimulationResult:
    start = time.perf_counter()
    config = config or _config_from(objs) or default_config()
    api = InMemoryAPI()
    cache = Cache()
    api.watchers.append(cache.apply)
    clock = FakeClock(1_000.0)
    epoch = datetime(2026, 1, 1, tzinfo=UTC).timestamp() - clock.now()

    def wallclock() -> str:  # deterministic: the fake clock on a fixed date
        return datetime.fromtimestamp(epoch + clock.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    sched = Scheduler(cache, api, config, clock=clock, inline_binding=True, wallclock=wallclock)
    _fake_binding_waits(sched, clock, epoch)
    names = set(sched.profiles)
    namespaces = {"default"} | {
        (o.get("metadata") or {}).get("namespace", "default")
        for o in objs
        if o["kind"] not in CLUSTER_SCOPED
    }
    declared = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    for ns in sorted(namespaces - declared):
        api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    admit_priorities(objs)
    admit_match_label_keys(objs)
    for kind in ORDER:
        for o in objs:
            if o["kind"] == kind:
                api.load_shared(kind, o)
    for pod in api.list("Pod"):
        if (pod.get("spec") or {}).get("schedulerName") in names:
            await create_pod_claims(api, pod)
    # kube-controller-manager's volume controllers (ephemeral PVCs, PV binding) and the provisioners: they
    # run beside the scheduler while VolumeBinding's PreBind waits for the bindings (scheduler/storage.py).
    volume_controllers = VolumeControllers(api)
    await volume_controllers.start()
    pods = [p for p in api.list("Pod") if (p.get("spec") or {}).get("schedulerName") in names]
    pending = [p for p in pods if not (p.get("spec") or {}).get("nodeName")]
    attempts: dict[str, tuple[int, int]] = {}  # pod -> (attempts since the last bind anywhere, binds then)
    # The loaded objects live for the whole run: keep them out of the cyclic GC's scans (its full passes over
    # them were the longest pauses of a big group search, 200-350 ms).
    gc.freeze()
    loaded = time.perf_counter()
    q = sched.queue
    while True:
        info = q.pop()
        if info is None:
            q.flush()
            if q.lengths()["active"]:
                continue
            wake = q.next_wakeup()
            if wake is None:
                break
            clock.set(max(wake, clock.now()))
            q.flush()
            continue
        key = info.pod.key
        # A pod gives up after max_attempts failures in a row with no pod bound in between: a pod
        # waiting for another one (pod affinity, a shared claim) is retried for as long as others bind.
        bound = sched.attempts["scheduled"]
        n, seen = attempts.get(key, (0, -1))
        n = 1 if seen != bound else n + 1
        attempts[key] = (n, bound)
        if n > max_attempts:
            q.delete(key)
            continue
        await sched.run_once(info)
    await volume_controllers.stop()
    gc.unfreeze()  # this run's objects may be collected again once the caller drops them
    await sched.flush_writes()
    await sched.write_gated_conditions(0.0)
    await _write_podgroup_status(api, sched)
    scheduled_at = time.perf_counter()
    final = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in api.stored("Pod")}
    scheduled = sum(
        1
        for p in pending
        if (final[(p["metadata"].get("namespace"), p["metadata"]["name"])].get("spec") or {}).get("nodeName")
    )
    items = [
        *api.list("Pod"),
        *api.list("ResourceClaim"),
        *api.list("PodGroup"),
        *api.list("PersistentVolume"),
        *api.list("PersistentVolumeClaim"),
    ]
    return SimulationResult(
        items=items,
        summary={
            "pods": len(pending),
            "scheduled": scheduled,
            "unschedulable": len(pending) - scheduled,
            "seconds": round(time.perf_counter() - start, 3),
        },
        events=api.events,
        scheduler=sched,
        timing={"load": loaded - start, "scheduling": scheduled_at - loaded},
    )


async def _write_podgroup_status(api: InMemoryAPI, sched: Scheduler) -> None:
    from scheduler.gang import podgroup_status

    pods = sched.cache.pods()
    for key, pg in sched.cache.podgroups().items():
        ns, name = key.split("/", 1)
        members = [p for p in pods.values() if p.namespace == ns and p.pod_group == name]
        status = podgroup_status(pg, members, sched.gang.groups.get(key))
        await api.patch("PodGroup", ns, name, {"status": status}, subresource="status")


def run_simulation(paths: Sequence[str], config: SchedulerConfig | None = None) -> SimulationResult:
    return asyncio.run(simulate(load_objects(paths), config))


def to_json(result: SimulationResult) -> str:
    return json.dumps({"items": result.items, "summary": result.summary}, indent=2, sort_keys=False)


def _topology_explainer(result: SimulationResult) -> Any:
    """``(scheduler name, node, [(driver, pool, device)]) -> str`` from the profiles' GpuTopology, or None."""
    sched = result.scheduler
    if sched is None:
        return None
    from plugins.topology.plugin import GpuTopology

    plugins = {
        name: fw.instances.get(GpuTopology.name)
        for name, fw in sched.profiles.items()
        if isinstance(fw.instances.get(GpuTopology.name), GpuTopology)
    }
    if not plugins:
        return None
    snap = sched.cache.snapshot()

    def explain(scheduler_name: str, node: str, devices: list[tuple[str, str, str]]) -> str:
        topo = plugins.get(scheduler_name)
        return topo.explain_devices(snap, node, devices) if topo is not None else ""

    return explain


def to_table(result: SimulationResult) -> str:
    """A placement table for people: one row per pod, with node, devices, how the devices are connected
    (GpuTopology: e.g. ``gpu-0..3 NV18 all-pairs, NUMA 0``) and the reason if pending."""
    claims = {
        (c["metadata"].get("namespace"), c["metadata"]["name"]): c
        for c in result.items
        if c.get("kind") == "ResourceClaim"
    }
    explain = _topology_explainer(result)
    rows: list[tuple[str, str, str, str, str]] = []
    for p in result.items:
        if p.get("kind") != "Pod":
            continue
        meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        ns = meta.get("namespace", "default")
        gen = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
        devices: list[str] = []
        notes: list[str] = []
        node = spec.get("nodeName", "")
        names = [pc.get("resourceClaimName") or gen.get(pc.get("name")) for pc in spec.get("resourceClaims") or []]
        ext = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if ext:  # the claim the scheduler made for extended resources backed by DRA (KEP-5004)
            names.append(ext)
        for cname in names:
            claim = claims.get((ns, cname))
            alloc = ((claim or {}).get("status") or {}).get("allocation")
            if alloc:
                ids: list[tuple[str, str, str]] = []
                for r in alloc["devices"]["results"]:
                    devices.append(f"{r['request']}={r['pool']}/{r['device']}")
                    ids.append((r["driver"], r["pool"], r["device"]))
                note = explain(spec.get("schedulerName", ""), node, ids) if explain and node else ""
                if note:
                    notes.append(note)
        why = ""
        if not node:
            for c in status.get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("status") == "False":
                    why = f"{c.get('reason')}: {c.get('message')}"
        rows.append(
            (f"{ns}/{meta['name']}", node or "<pending>", " ".join(devices) or "-", "; ".join(notes) or "-", why)
        )
    head = ("POD", "NODE", "DEVICES", "TOPOLOGY", "REASON")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = []
    for r in [head, *rows]:
        lines.append(
            "  ".join(r[i].ljust(widths[i]) for i in range(4))
            + ("  " + r[4] if r[4] else ("  REASON" if r is head else ""))
        )
    s = result.summary
    lines.append("")
    lines.append(f"{s['scheduled']}/{s['pods']} pods scheduled, {s['unschedulable']} unschedulable, {s['seconds']}s")
    return "\n".join(line.rstrip() for line in lines)
