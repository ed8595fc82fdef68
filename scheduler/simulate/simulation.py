"""``dra-scheduler simulate``: schedule, offline, the objects found in YAML files or directories.

The input is what a user would ``kubectl apply`` (or ``kubectl get -o yaml`` output, ``kind: List``
included). The objects are loaded into an in-memory API server; the claim controller creates template
claims; then the same queue, scheduling cycle and binder as the live scheduler run until nothing changes.
A fake clock makes backoff instant.

* **Order.** Every pod is in the queue from the start, as if each had arrived at its ``creationTimestamp``:
  pods are tried by priority, then ``creationTimestamp``, then file order (PrioritySort, kube-scheduler
  1.37.2 ``pkg/scheduler/framework/plugins/queuesort``: priority, then the queue timestamp, which is when
  the informer delivered the pod). A pod whose template claims the claim controller creates first keeps its
  place. A pod without ``creationTimestamp`` gets the API server's default here, 2026-01-01T00:00:00Z (the
  fake clock's start); if some are later than that, all are shifted back by the same amount, so that a
  retried pod (its queue timestamp refreshed at each failed attempt, as upstream) comes after every pod
  not tried yet.
* **End.** A pod that did not fit is tried again when an event one of its rejecting plugins registered
  arrives (after its backoff, instant here), and gives up after ``max_attempts`` failures in a row with no
  pod bound in between; the run ends when no pod is active or backing off. kube-scheduler also retries
  every pod that has waited 5 minutes in its unschedulable pool (``podMaxInUnschedulablePodsDuration``,
  checked every 30 s by ``flushUnschedulablePodsLeftover`` in ``pkg/scheduler/backend/queue/
  scheduling_queue.go``) or behind PreEnqueue. ``simulate`` does not: every change of its cluster reaches the
  queue at once, so such a retry would meet only changes the pod's rejecting plugins declare irrelevant and
  fail the same way, at the cost of a full filter pass per pending pod every 5 minutes of fake time (device
  binding-condition waits move that clock by their ``bindingTimeout``, 10 minutes by default). What this
  leaves out: a rejection that depends on time alone (a PodGroup's ``scheduleTimeoutSeconds`` is noticed only
  when a member is tried after it), and a plugin that registers too few events (its pod stays pending here;
  upstream retries it after 5 minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.api import workload_api
from scheduler.api.model import ModelError, Pod
from scheduler.cache.cache import Cache
from scheduler.config.logging import write_line
from scheduler.config.schedulerconfig import SchedulerConfig, default_config, load_config_text
from scheduler.framework.hooks import device_explainers, fake_binding_clock, input_validators, use_binding_clock
from scheduler.loop.queue import FakeClock
from scheduler.loop.scheduler import Scheduler
from scheduler.simulate import progress
from scheduler.simulate.claimcontroller import (
    DeletionRecorder,
    create_pod_claims,
    create_podgroup_claims,
    release_claims,
)
from scheduler.simulate.memapi import CLUSTER_SCOPED, InMemoryAPI
from scheduler.simulate.report import (
    DEFAULT_SCHEDULER_NAME,
    dumps_indented,
    left_to_other_schedulers,
    reason,
    summary_counts,
    summary_note,
)
from scheduler.simulate.volumes import VolumeControllers
from scheduler.simulate.workloadcontrollers import CONTROLLED, pods_for

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
    ("scheduling.k8s.io/v1beta1", "Workload"),
    ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"),
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
    "Workload",
    "CompositePodGroup",
    "PodGroup",
    "Pod",
]
CONFIG_KEY = "scheduler-config.yaml"
DEFAULT_CREATION = "2026-01-01T00:00:00Z"  # what the in-memory API server gives an object without one: the run's start


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


@contextlib.contextmanager
def fewer_gc_passes() -> Iterator[None]:
    """Collect cycles less often while a run builds millions of long-lived objects (the input, the API server's
    copies, the cache): with the default thresholds the full collections alone were a quarter of the CPU time
    (1,000 nodes and 6,500 pods: 2.4 of 9.7 s). A run makes next to no cyclic garbage; the thresholds come back
    afterwards."""
    old = gc.get_threshold()
    enabled = gc.isenabled()
    gc.set_threshold(max(old[0], 20_000), max(old[1], 50), max(old[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if enabled:
            gc.enable()  # also after a failure while the collector was off (_simulate's loading)


def load_objects(
    paths: Sequence[str], rejected: list[str] | None = None, controllers: bool = False
) -> list[dict[str, Any]]:
    """The objects of the files (bounded YAML: scheduler/api/yamlload.py). A file that is no valid YAML raises
    InputError; an object the API server would refuse (scheduler/api/inputcheck.py) or a duplicate of an earlier
    object is left out with a message naming file, document and field: appended to ``rejected``, or printed
    on stderr when no list is given. The other objects go on.

    Deployments and Jobs are skipped with a note (ARCHITECTURE.md §3.2: kinds that do not affect scheduling),
    unless ``controllers`` (``simulate --controllers``): then their pods are made as kube-controller-manager
    would make them (scheduler/simulate/workloadcontrollers.py) and scheduled with the others."""
    with fewer_gc_passes():
        return _load_objects(paths, rejected, controllers)


def _load_objects(
    paths: Sequence[str], rejected: list[str] | None = None, controllers: bool = False
) -> list[dict[str, Any]]:
    """The body of :func:`load_objects`."""
    from scheduler.api.inputcheck import check_object, describe, drop_nulls
    from scheduler.api.yamlload import YAMLLoadError, load_file

    def refuse(message: str) -> None:
        if rejected is not None:
            rejected.append(message)
        else:
            write_line(f"error: {message} (not loaded)")

    objs: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, str], str] = {}
    controlled: list[tuple[str, dict[str, Any]]] = []
    for f in _files(paths):
        try:
            docs = load_file(f)
        except YAMLLoadError as e:
            raise InputError(str(e)) from None
        for d in docs:
            i, doc = d.index, (drop_nulls(d.data) if d.nulls else d.data)
            if doc is None:
                continue
            if not isinstance(doc, dict):
                refuse(f"{f}: document {i}: object: must be an object, not {type(doc).__name__}")
                continue
            is_list = isinstance(doc.get("kind"), str) and doc["kind"].endswith("List")
            items = doc.get("items") if is_list else [doc]
            if not isinstance(items, list):
                refuse(f"{f}: document {i}: items: must be a list")
                continue
            for j, obj in enumerate(items):
                where = f"{f}: document {i}" + (f" item {j}" if doc is not obj else "")
                if not isinstance(obj, dict):
                    refuse(f"{where}: object: must be an object, not {type(obj).__name__}")
                    continue
                missing = [k for k in ("apiVersion", "kind") if not isinstance(obj.get(k), str) or not obj.get(k)]
                if missing:
                    for k in missing:
                        refuse(f"{where}: {describe(obj)}: {k}: Required value (a non-empty string)")
                    continue
                if (obj["apiVersion"], obj["kind"]) not in KINDS:
                    if obj["kind"] in {k for _, k in KINDS}:
                        refuse(
                            f"{where}: {describe(obj)}: "
                            + (
                                _removed_dra_api(obj)
                                or f"apiVersion: Unsupported value: {obj['apiVersion'][:80]!r} for {obj['kind']}"
                            )
                        )
                        continue
                    # Deployments, Jobs, ... do not take part in scheduling: say so and go on.
                    job_note = _job_scheduling_note(obj)
                    if job_note:
                        write_line(f"note: {where}: {job_note}")
                        continue
                    controlled_kind = (obj["apiVersion"], obj["kind"]) in CONTROLLED
                    if controlled_kind and controllers:
                        controlled.append((where, obj))  # its pods, once every given pod is known
                        continue
                    removed = _removed_dra_api(obj)
                    if removed:
                        refuse(f"{where}: {describe(obj)}: {removed}")
                        continue
                    write_line(
                        f"note: {where}: {obj['apiVersion']}/{obj['kind']} "
                        f"{describe(obj).partition(' ')[2]} does not affect scheduling, skipped"
                        + (_CONTROLLERS_HINT if controlled_kind else "")
                    )
                    continue
                errors = check_object(obj, cluster_scoped=obj["kind"] in CLUSTER_SCOPED) or workload_api.validate(obj)
                if errors:
                    for err in errors:
                        refuse(f"{where}: {describe(obj)}: {err}")
                    continue
                meta = obj["metadata"]
                if not meta.get("namespace"):
                    meta.pop("namespace", None)  # "" is the default namespace, as for kubectl
                ns = "" if obj["kind"] in CLUSTER_SCOPED else (meta.get("namespace") or "default")
                key = (obj["kind"], ns, meta["name"])  # as the in-memory API keys objects
                if key in seen:
                    refuse(f"{where}: {describe(obj)}: metadata.name: Duplicate value: already defined in {seen[key]}")
                    continue
                seen[key] = where
                objs.append(obj)
    pods = [o for o in objs if o["kind"] == "Pod"] if controlled else []
    for where, obj in controlled:
        try:
            created = pods_for(obj, pods)
        except ValueError as e:
            refuse(f"{where}: {describe(obj)}: {e}")
            continue
        made = []
        for new in created:
            errors = check_object(new)
            key = (new["kind"], new["metadata"]["namespace"], new["metadata"]["name"])
            if not errors and key in seen:
                errors = [f"metadata.name: Duplicate value: already defined in {seen[key]}"]
            if errors:
                for err in errors:
                    refuse(f"{where}: {describe(obj)}: {describe(new)} it would create: {err}")
                continue
            seen[key] = where
            objs.append(new)
            if new["kind"] == "Pod":
                pods.append(new)
                made.append(new["metadata"]["name"])
        what = f"{obj['apiVersion']}/{obj['kind']} {describe(obj).partition(' ')[2]}"
        write_line(
            f"note: {where}: {what}: {len(made)} pod(s) created as kube-controller-manager would"
            + (f" ({', '.join(made[:5])}{', ...' if len(made) > 5 else ''})" if made else "")
        )
    return objs


_CONTROLLERS_HINT = " (--controllers creates its pods as kube-controller-manager would)"

# Kinds of the resource.k8s.io/v1alpha2 API (removed in Kubernetes 1.31, when structured parameters, KEP-4381,
# replaced it with v1alpha3) and what took their place in resource.k8s.io/v1.
_REMOVED_DRA_KINDS = {
    "ResourceClass": "DeviceClass",
    "ResourceClaimParameters": "the claim's spec.devices.requests",
    "ResourceClassParameters": "DeviceClass spec.config",
}


def _removed_dra_api(obj: Mapping[str, Any]) -> str:
    """An object of a resource.k8s.io version or kind that Kubernetes 1.37 does not serve (k8s.io/api v0.37.2
    has resource/v1, v1beta1, v1beta2 and v1alpha3 only): ``kubectl apply`` fails with "no matches for kind",
    so the object never exists; say so instead of skipping it as if it did not matter."""
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    if group != "resource.k8s.io":
        return ""
    kind = str(obj.get("kind", ""))
    instead = _REMOVED_DRA_KINDS.get(kind)
    if instead is None and version in ("v1", "v1beta1", "v1beta2", "v1alpha3"):
        return ""
    msg = (
        f"apiVersion: Unsupported value: {str(obj.get('apiVersion'))[:80]!r} for {kind[:80]}: "
        "Kubernetes 1.37 serves resource.k8s.io/v1 (DeviceClass, ResourceClaim, ResourceClaimTemplate, "
        "ResourceSlice, DeviceTaintRule)"
    )
    if instead is not None:
        msg += f"; {kind} was part of the resource.k8s.io/v1alpha2 API removed in 1.31, replaced by {instead}"
    return msg


@dataclass
class SimulationResult:
    items: list[dict[str, Any]]  # the in-memory API server's final objects: read-only
    summary: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    scheduler: Scheduler | None = None
    timing: dict[str, float] = field(default_factory=dict)
    deleted: list[dict[str, Any]] = field(default_factory=list)  # objects deleted during the run, as last seen


# The built-in PriorityClasses the API server creates (pkg/apis/scheduling/types.go SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def admit_priorities(objs: Sequence[dict[str, Any]], refused: list[dict[str, Any]] | None = None) -> None:
    """What the Priority admission plugin does at pod creation (plugin/pkg/admission/priority): a pod without
    ``spec.priority`` gets the value of its ``priorityClassName`` (or of the ``globalDefault`` PriorityClass,
    whose name it also gets, or 0), and the class's ``preemptionPolicy`` (default PreemptLowerPriority). A
    pod naming a class that does not exist is refused, as the API server refuses it: InputError, or, when a
    ``refused`` list is given, the object is appended to it (with ``_refusal``: the message) and the others go on."""

    def refuse(obj: dict[str, Any], message: str) -> None:
        if refused is None:
            raise InputError(message)
        obj["_refusal"] = message
        refused.append(obj)

    classes: dict[str, tuple[int, str]] = {n: (v, "PreemptLowerPriority") for n, v in SYSTEM_PRIORITY_CLASSES.items()}
    default: str | None = None
    for o in objs:
        if o["kind"] == "PriorityClass":
            name = o["metadata"]["name"]
            value = o.get("value")
            if not isinstance(value, int) or isinstance(value, bool):
                refuse(o, f"PriorityClass {name}: value: required integer")
                continue
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
            refuse(
                o,
                f"Pod {o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}: "
                f"spec.priorityClassName: no PriorityClass with name {name} was found",
            )
            continue
        value, policy = classes[name]
        if "priority" in spec and spec["priority"] != value:
            refuse(
                o,
                f"Pod {o['metadata']['name']}: spec.priority: the integer value of priority ({spec['priority']}) "
                f"must not be provided in pod spec; priority admission controller computed {value} from the "
                "given PriorityClass name",
            )
            continue
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


def _wall_seconds(ts: object) -> float | None:
    """An RFC 3339 time (``creationTimestamp``) in seconds since the epoch; None if it is not one."""
    if not isinstance(ts, str):
        return None
    try:
        t = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def creation_order(objs: Iterable[Mapping[str, Any]], now: float, epoch: float) -> Callable[[Pod], float]:
    """The queue timestamp of a pod when it is first queued: its ``creationTimestamp`` on the fake clock, which
    reads ``now`` at the start, when the wall clock reads ``epoch + now`` (a pod without one has the API
    server's default, :data:`DEFAULT_CREATION`; one that is not a time counts as ``now``, after the others).
    If a pod of ``objs`` was created after the start, every pod is shifted back by the same amount: none is
    later than ``now``, so a pod retried at ``now`` or later (its timestamp refreshed) comes after every pod
    not tried yet."""
    latest = max(
        (
            w
            for o in objs
            if o.get("kind") == "Pod"
            and (w := _wall_seconds((o.get("metadata") or {}).get("creationTimestamp") or DEFAULT_CREATION)) is not None
        ),
        default=epoch + now,
    )
    offset = -epoch - max(0.0, latest - (epoch + now))
    memo: dict[str, float] = {}

    def timestamp(pod: Pod) -> float:
        ts = pod.meta.creation_timestamp or DEFAULT_CREATION
        t = memo.get(ts)
        if t is None:
            wall = _wall_seconds(ts)
            t = memo[ts] = now if wall is None else min(now, wall + offset)
        return t

    return timestamp


def _fake_binding_waits(sched: Scheduler, clock: FakeClock, epoch: float) -> None:
    """Binding-cycle waits (DynamicResources' PreBind wait for device binding conditions, KEP-5007) run on the
    fake clock: every plugin that is :class:`~scheduler.framework.hooks.BindingClockAware` gets it. No DRA
    driver runs here to set the conditions: a pod using such devices waits ``bindingTimeout`` of fake time (at
    once), is rolled back and retried as upstream would, and ends PodScheduled=False naming the pending
    conditions. The wall clock is the same as ``wallclock``'s (``allocationTimestamp``)."""
    use_binding_clock(sched, fake_binding_clock(clock, epoch))


def _validated(objs: Sequence[dict[str, Any]], sched: Scheduler) -> Sequence[dict[str, Any]]:
    """The objects the plugins' :class:`~scheduler.framework.hooks.InputValidator` have nothing against; the
    others are refused as the API server refuses them at creation (e.g. a DeviceClass whose CEL selector does
    not compile: ``kubectl apply`` fails, pods using the class find no class), with a line on stderr."""
    validators = input_validators(sched)
    if not validators:
        return objs
    from scheduler.api.inputcheck import describe

    kept: list[dict[str, Any]] = []
    for o in objs:
        errors = [e for v in validators for e in v.validate_input(o)]
        if not errors:
            kept.append(o)
        for e in errors:
            write_line(f"error: {describe(o)}: {e} (not loaded)")
    return kept


def _scheduler_name(pod: Mapping[str, Any]) -> Any:
    """``spec.schedulerName`` as the API server stores it: defaulted to ``default-scheduler`` when unset
    (``SetDefaults_PodSpec``), so a profile of that name takes pods that name none, claims included."""
    return (pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME


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
    with fewer_gc_passes():
        return await _simulate(objs, config, max_attempts)


async def _simulate(
    objs: Sequence[dict[str, Any]],
    config: SchedulerConfig | None,
    max_attempts: int,
) -> SimulationResult:
    start, start_cpu = time.perf_counter(), time.process_time()
    # Loading builds only long-lived objects (the API server's store, the cache's model, the claims): no
    # cyclic collection until scheduling starts (each collection walked the whole growing heap: 0.4 of 0.75 s
    # of collections at 5,000 nodes), and the caller's input kept out of the collector's scans from here on.
    gc.freeze()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    config = config or _config_from(objs) or default_config()
    api = InMemoryAPI()
    cache = Cache()
    api.watchers.append(cache.apply)
    clock = FakeClock(1_000.0)
    epoch = datetime(2026, 1, 1, tzinfo=UTC).timestamp() - clock.now()

    def wallclock() -> str:  # deterministic: the fake clock on a fixed date
        return datetime.fromtimestamp(epoch + clock.now(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    sched = Scheduler(
        cache,
        api,
        config,
        clock=clock,
        inline_binding=True,
        wallclock=wallclock,
        queue_timestamp=creation_order(objs, clock.now(), epoch),
    )
    # preemption's victims: deletionTimestamp, then graceful termination completes at once (fake clock)
    api.graceful_pod_deletion, api.now = True, wallclock
    _fake_binding_waits(sched, clock, epoch)
    names = set(sched.profiles)
    objs = _validated(objs, sched)
    namespaces = {"default"} | {
        (o.get("metadata") or {}).get("namespace", "default")
        for o in objs
        if o["kind"] not in CLUSTER_SCOPED
    }
    declared = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    for ns in sorted(namespaces - declared):
        api.load("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    refused: list[dict[str, Any]] = []
    admit_priorities(objs, refused)  # a pod the Priority admission plugin refuses is left out, not the run
    if refused:
        for o in refused:
            write_line(f"error: {o.pop('_refusal')} (not admitted)")
        objs = [o for o in objs if all(o is not r for r in refused)]
    admit_disruption_budgets(objs)
    admit_match_label_keys(objs)
    for kind in ORDER:
        for o in objs:
            if o["kind"] == kind:
                api.load_shared(kind, o)
    await _create_podgroup_claims(api)
    for pod in api.stored("Pod"):  # read-only: create_pod_claims writes through the API
        if _scheduler_name(pod) in names:
            await create_pod_claims(api, pod)
    # kube-controller-manager's volume controllers (ephemeral PVCs, PV binding) and the provisioners: they
    # run beside the scheduler while VolumeBinding's PreBind waits for the bindings (scheduler/api/storage.py).
    volume_controllers = VolumeControllers(api)
    await volume_controllers.start()
    pods = [p for p in api.stored("Pod") if _scheduler_name(p) in names]
    pending = [p for p in pods if not (p.get("spec") or {}).get("nodeName")]
    progress.set_phase("scheduling", total=len(pending))
    attempts: dict[str, tuple[int, int]] = {}  # pod -> (attempts since the last bind anywhere, binds then)
    # The loaded objects live for the whole run: keep them out of the cyclic GC's scans (its full passes over
    # them were the longest pauses of a big group search, 200-350 ms).
    gc.freeze()
    if gc_was_enabled:
        gc.enable()
    deletions = DeletionRecorder()  # what preemption deletes, and the claims released after it
    api.watchers.append(deletions)
    loaded, loaded_cpu = time.perf_counter(), time.process_time()
    q = sched.queue
    while True:
        info = q.pop()  # moves the pods whose backoff is over; never the unschedulable pool (docstring: End)
        if info is None:
            wake = q.next_wakeup()
            if wake is None:
                break
            clock.set(max(wake, clock.now()))
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
        if deletions.pods:  # kube-controller-manager: the deleted pods' claims are released
            await release_claims(api, deletions)
        progress.update(sched.attempts)
    await volume_controllers.stop()
    gc.unfreeze()  # this run's objects may be collected again once the caller drops them
    await sched.flush_writes()
    await sched.write_gated_conditions(0.0)
    await _write_podgroup_status(api, sched)
    scheduled_at, scheduled_cpu = time.perf_counter(), time.process_time()
    final = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in api.stored("Pod")}
    scheduled = sum(
        1
        for p in pending
        if ((final.get((p["metadata"].get("namespace"), p["metadata"]["name"])) or {}).get("spec") or {}).get(
            "nodeName"
        )
    )
    # pods still pending at the end (a pending pod that was bound, then preempted, is neither)
    unschedulable = sum(
        1
        for p in pending
        if (k := (p["metadata"].get("namespace"), p["metadata"]["name"])) in final
        and not (final[k].get("spec") or {}).get("nodeName")
    )
    # The API server's stored objects themselves (never mutated, and nothing writes any more): read-only.
    items = [
        *api.stored("Pod"),
        *api.stored("ResourceClaim"),
        *api.stored("PodGroup"),
        *api.stored("PersistentVolume"),
        *api.stored("PersistentVolumeClaim"),
    ]
    return SimulationResult(
        items=items,
        summary={
            "pods": len(pending),
            "scheduled": scheduled,
            "unschedulable": unschedulable,
            "preempted": preempted_count(deletions.deleted),
            "seconds": round(time.perf_counter() - start, 3),
            **summary_counts(left_to_other_schedulers(items, names)),
        },
        events=api.events,
        scheduler=sched,
        timing={
            "load": loaded - start,
            "scheduling": scheduled_at - loaded,
            "load_cpu": loaded_cpu - start_cpu,  # CPU seconds of this process (benchmarks on a busy machine)
            "scheduling_cpu": scheduled_cpu - loaded_cpu,
        },
        deleted=[copy.deepcopy(o) for o in deletions.deleted],
    )


def _job_scheduling_note(obj: Mapping[str, Any]) -> str:
    """A Job with ``spec.scheduling`` (gate WorkloadWithJob): the 1.37 Job controller would create a Workload, a
    PodGroup and pods with ``spec.schedulingGroup``, named after a hash of the Job's UID
    (``pkg/controller/job/job_scheduling_manager.go`` computeWorkloadName): not emulated faithfully offline."""
    if obj.get("kind") != "Job" or not str(obj.get("apiVersion", "")).startswith("batch/"):
        return ""
    if not isinstance((obj.get("spec") or {}).get("scheduling"), Mapping):
        return ""
    from scheduler.api.inputcheck import describe

    return (
        f"batch/v1/Job {describe(obj).partition(' ')[2]}: spec.scheduling (WorkloadWithJob) is the Job controller's "
        "to turn into a Workload, a PodGroup and pods; simulate does not run the Job controller, skipped (give the "
        "Workload, PodGroup and pods it creates instead)"
    )


async def _create_podgroup_claims(api: InMemoryAPI) -> None:
    """kube-controller-manager's resourceclaim controller for PodGroup-level claims (DRAWorkloadResourceClaims):
    one claim per PodGroup ``resourceClaims`` template entry, recorded in the PodGroup's and its members' status."""
    pods = list(api.stored("Pod"))  # read-only, as the PodGroups
    for pg in api.stored("PodGroup"):
        if not str(pg.get("apiVersion", "")).startswith("scheduling.k8s.io/"):
            continue
        meta = pg.get("metadata") or {}
        ns = meta.get("namespace", "default")
        members = [
            p
            for p in pods
            if (p.get("metadata") or {}).get("namespace", "default") == ns
            and ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == meta.get("name")
        ]
        await create_podgroup_claims(api, pg, members)


async def _write_podgroup_status(api: InMemoryAPI, sched: Scheduler) -> None:
    from scheduler.gang.status import podgroup_status

    pods = sched.cache.pods()
    for key, pg in sched.cache.podgroups().items():
        ns, name = key.split("/", 1)
        members = [p for p in pods.values() if p.namespace == ns and p.pod_group == name]
        status = podgroup_status(pg, members, sched.gang.groups.get(key))
        await api.patch("PodGroup", ns, name, {"status": status}, subresource="status")


def run_simulation(
    paths: Sequence[str], config: SchedulerConfig | None = None, controllers: bool = False
) -> SimulationResult:
    """The whole offline run. The result leaves the event loop through a box, not as the main task's result:
    when ``asyncio.run`` puts back the SIGINT handler it had set, ``signal.signal`` tries to read the old handler
    (a partial holding the finished task) as a ``Handlers`` enum, and the failed lookup formats the task with
    ``repr``, result included: 1.2 s of the 57 s default trace replay went to printing 10,866 pods into a string
    nobody reads (CPython 3.11 ``asyncio/runners.py`` and ``signal._int_to_enum``)."""
    box: list[SimulationResult] = []

    async def main() -> None:
        box.append(await simulate(load_objects(paths, controllers=controllers), config))

    asyncio.run(main())
    return box[0]


def to_json(result: SimulationResult) -> str:
    return dumps_indented({"items": result.items, "deleted": result.deleted, "summary": result.summary})


def preempted_count(deleted: Iterable[Mapping[str, Any]]) -> int:
    """Deleted pods carrying DisruptionTarget=True, reason PreemptionByScheduler (``summary.preempted``)."""
    return sum(
        1
        for o in deleted
        if o.get("kind") == "Pod"
        and any(
            (c.get("type"), c.get("status"), c.get("reason")) == ("DisruptionTarget", "True", "PreemptionByScheduler")
            for c in (o.get("status") or {}).get("conditions") or []
        )
    )


def admit_disruption_budgets(objs: Sequence[dict[str, Any]]) -> None:
    """A PodDisruptionBudget without ``status.disruptionsAllowed`` gets the status the disruption controller
    would compute from the input's pods (scheduler/api/workloads.py ``pdb_status``)."""
    from scheduler.api.workloads import pdb_status

    pods = [o for o in objs if o["kind"] == "Pod"]
    for o in objs:
        if o["kind"] == "PodDisruptionBudget" and "disruptionsAllowed" not in (o.get("status") or {}):
            try:
                o["status"] = {**(o.get("status") or {}), **pdb_status(o, pods)}
            except ModelError as e:
                raise InputError(f"PodDisruptionBudget {o['metadata'].get('name')}: {e}") from None


def _topology_explainer(result: SimulationResult) -> Any:
    """``(scheduler name, node, [(driver, pool, device)]) -> str`` from the profiles' plugins that are
    :class:`~scheduler.framework.hooks.DeviceExplainer` (GpuTopology), or None."""
    sched = result.scheduler
    if sched is None:
        return None
    explainers = device_explainers(sched)
    if not explainers:
        return None
    snap = sched.cache.snapshot()

    def explain(scheduler_name: str, node: str, devices: list[tuple[str, str, str]]) -> str:
        notes = (e.explain_devices(snap, node, devices) for e in explainers.get(scheduler_name, ()))
        return "; ".join(n for n in notes if n)

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
    others = left_to_other_schedulers(result.items, result.scheduler.profiles if result.scheduler else ())
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
        if f"{ns}/{meta['name']}" in others:  # not ours: another scheduler's pod, not a pending one
            node, why = "<other scheduler>", reason(others[f"{ns}/{meta['name']}"])
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
    lines.append(
        f"{s['scheduled']}/{s['pods']} pods scheduled, {s['unschedulable']} unschedulable{summary_note(others)}, "
        f"{s['seconds']}s"
    )
    return "\n".join(line.rstrip() for line in lines)
