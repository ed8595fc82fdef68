"""QueueingHints: per plugin, whether a cluster event may make a pod it rejected schedulable, and the queue's use
of them (upstream kube-scheduler v1.37.2 ``isPodWorthRequeuing`` and each plugin's ``isSchedulableAfter*``).

For every hint, a case that queues and a case that skips, after the cases of the upstream unit tests of that
function (``fit_test.go`` ``TestIsSchedulableAfterPodEvent`` / ``TestIsSchedulableAfterNodeChange`` /
``TestIsSchedulableAfterDeviceClassEvent``, ``dynamicresources_test.go`` ``Test_isSchedulableAfterClaimChange`` /
``Test_isSchedulableAfterPodChange``, interpodaffinity ``plugin_test.go``, podtopologyspread ``plugin_test.go``,
``node_affinity_test.go``, ``taint_toleration_test.go``, ``node_ports_test.go``, ``node_unschedulable_test.go``,
``node_name_test.go``, ``scheduling_gates_test.go``); then the queue: thousands of pods rejected for devices are
not moved by an unrelated event, a deallocation moves them, in-flight pods get the hints at the end of their
attempt, and a hint that raises queues the pod.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Mapping
from typing import Any

import pytest

from plugins.dra.plugin import DynamicResources
from plugins.interpodaffinity.plugin import InterPodAffinity
from plugins.nodeaffinity import NodeAffinity
from plugins.nodename import NodeName
from plugins.nodeports import NodePorts
from plugins.noderesources.fit import NodeResourcesFit
from plugins.nodeunschedulable import NodeUnschedulable
from plugins.podtopologyspread.plugin import PodTopologySpread
from plugins.schedulinggates import SchedulingGates
from plugins.tainttoleration import TaintToleration
from scheduler.api.dra import ResourceClaim, claim_from, class_from, slice_from
from scheduler.api.model import Node, Pod, node_from, pod_from
from scheduler.cache.cache import Cache
from scheduler.config.schedulerconfig import default_config
from scheduler.framework.interface import QueuedPodInfo, QueueingHint
from scheduler.loop.queue import FakeClock, SchedulingQueue
from scheduler.loop.scheduler import Scheduler, profile_hints
from scheduler.simulate.memapi import InMemoryAPI

Raw = dict[str, Any]
QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
DRIVER = "gpu.example.com"
DRA = "DynamicResources"


# --- builders ----------------------------------------------------------------------------------------------------


def pod(
    name: str,
    *,
    ns: str = "default",
    node: str = "",
    labels: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    claims: tuple[str, ...] = (),
    ports: tuple[int, ...] = (),
    status: Raw | None = None,
    uid: str = "",
    **spec: Any,
) -> Pod:
    container: Raw = {"name": "c", "image": "x"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    raw: Raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}", "labels": dict(labels or {})},
        "spec": {"schedulerName": "dra-scheduler", "containers": [container], **spec},
    }
    if node:
        raw["spec"]["nodeName"] = node
    if claims:
        raw["spec"]["resourceClaims"] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    if status:
        raw["status"] = status
    return pod_from(raw)


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    alloc: Mapping[str, str] | None = None,
    taints: tuple[tuple[str, str], ...] = (),
    unschedulable: bool = False,
    conditions: str = "",
) -> Node:
    raw: Raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"unschedulable": unschedulable, "taints": [{"key": k, "effect": e} for k, e in taints]},
        "status": {"allocatable": dict(alloc or {"cpu": "8", "memory": "16Gi", "pods": "110"})},
    }
    if conditions:
        raw["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": conditions}]
    return node_from(raw)


def claim_raw(name: str, *, allocated: bool = False, finalizers: tuple[str, ...] = (), ns: str = "default") -> Raw:
    raw: Raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-claim-{name}", "finalizers": list(finalizers)},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}]}},
    }
    if allocated:
        raw["status"] = {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "g0"}]}}
        }
    return raw


def claim(name: str, **kw: Any) -> ResourceClaim:
    return claim_from(claim_raw(name, **kw))


def klass(name: str, ext: str = "", selector: str = "") -> Any:
    spec: Raw = {"selectors": [{"cel": {"expression": selector or f'device.driver == "{DRIVER}"'}}]}
    if ext:
        spec["extendedResourceName"] = ext
    return class_from(
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    )


def gpu_slice(node_name: str, n: int = 1, gen: int = 1, label: str = "") -> Any:
    raw: Raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus", "labels": {"x": label} if label else {}},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": gen, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(n)],
        },
    }
    return slice_from(raw)


# --- NodeResourcesFit (fit.go) -----------------------------------------------------------------------------------


FIT = NodeResourcesFit()
CPU_POD = pod("p", requests={"cpu": "4"})


def test_fit_pod_deleted_queues_only_assigned_or_nominated() -> None:
    """TestIsSchedulableAfterPodEvent: "backoff-wrong-old-object", "queue-on-deleted", "skip-queue-on-unscheduled"."""
    assert FIT.hint_pod_event(CPU_POD, pod("x", node="n1", requests={"cpu": "1"}), None) == QUEUE
    assert FIT.hint_pod_event(CPU_POD, pod("x", requests={"cpu": "1"}), None) == SKIP
    nominated = pod("x", requests={"cpu": "1"}, status={"nominatedNodeName": "n1"})
    assert FIT.hint_pod_event(CPU_POD, nominated, None) == QUEUE


def test_fit_pod_scale_down() -> None:
    """TestIsSchedulableAfterPodEvent: "skip-queue-on-other-unscheduled-pod", "queue-on-other-pod-scale-down",
    "skip-queue-on-other-pod-unrelated-resource-changed", "queue-on-target-pod-scale-down"."""
    before = pod("x", node="n1", requests={"cpu": "2", "memory": "2Gi"})
    less_cpu = pod("x", node="n1", requests={"cpu": "1", "memory": "2Gi"})
    less_mem = pod("x", node="n1", requests={"cpu": "2", "memory": "1Gi"})
    assert FIT.hint_pod_event(CPU_POD, before, less_cpu) == QUEUE
    assert FIT.hint_pod_event(CPU_POD, before, less_mem) == SKIP  # the waiting pod asks no memory
    unassigned_before = pod("x", requests={"cpu": "2"})
    assert FIT.hint_pod_event(CPU_POD, unassigned_before, pod("x", requests={"cpu": "1"})) == SKIP
    own = pod("p", requests={"cpu": "2"})
    assert FIT.hint_pod_event(CPU_POD, CPU_POD, own) == QUEUE


def test_fit_node_change() -> None:
    """TestIsSchedulableAfterNodeChange: "backoff-wrong-new-object", "queue-on-node-add", "skip-queue-on-node-add",
    "queue-on-node-update" (allocatable grew), "skip-queue-on-node-unrelated-changes", "skip-queue-on-node-changes-
    from-suitable-to-unsuitable", "queue-on-pod-requested-resources-increase" (pods count)."""
    small = node("n", alloc={"cpu": "2", "memory": "8Gi", "pods": "110"})
    big = node("n", alloc={"cpu": "8", "memory": "8Gi", "pods": "110"})
    assert FIT.hint_node_change(CPU_POD, None, big) == QUEUE
    assert FIT.hint_node_change(CPU_POD, None, small) == SKIP
    assert FIT.hint_node_change(CPU_POD, small, big) == QUEUE
    relabelled = node("n", labels={"a": "b"}, alloc={"cpu": "8", "memory": "8Gi", "pods": "110"})
    assert FIT.hint_node_change(CPU_POD, big, relabelled) == SKIP
    assert FIT.hint_node_change(CPU_POD, big, small) == SKIP
    more_pods = node("n", alloc={"cpu": "8", "memory": "8Gi", "pods": "111"})
    assert FIT.hint_node_change(CPU_POD, big, more_pods) == QUEUE
    gpu_pod = pod("g", requests={"cpu": "1", "example.com/gpu": "1"})
    assert FIT.hint_node_change(gpu_pod, None, big) == SKIP  # no such resource on the node
    with_gpu = node("n", alloc={"cpu": "8", "memory": "8Gi", "pods": "110", "example.com/gpu": "2"})
    assert FIT.hint_node_change(gpu_pod, big, with_gpu) == QUEUE


def test_fit_device_class_event() -> None:
    """TestIsSchedulableAfterDeviceClassEvent: added class with the implicit name / the extended resource name the
    pod requests → queue; unrelated name → skip; update keeping the name → skip; update to a requested name →
    queue."""
    want_ext = pod("e", requests={"example.com/gpu": "1"})
    want_implicit = pod("i", requests={"deviceclass.resource.kubernetes.io/gpu-class": "1"})
    assert FIT.hint_device_class(want_implicit, None, klass("gpu-class")) == QUEUE
    assert FIT.hint_device_class(want_ext, None, klass("gpu-class", "example.com/gpu")) == QUEUE
    assert FIT.hint_device_class(want_ext, None, klass("gpu-class", "example.com/other")) == SKIP
    same = klass("gpu-class", "example.com/gpu", selector="true")
    assert FIT.hint_device_class(want_ext, klass("gpu-class", "example.com/gpu"), same) == SKIP
    assert FIT.hint_device_class(want_ext, klass("gpu-class"), klass("gpu-class", "example.com/gpu")) == QUEUE


# --- DynamicResources (dynamicresources.go; plugins/dra/hints.py) ------------------------------------------------


DRA_PLUGIN = DynamicResources({})
DRA_HINTS = DRA_PLUGIN.queueing_hints()
GPU_POD = pod("g", claims=("mine",))


def dra(kind: str, action: str, p: Pod, old: Any, new: Any) -> QueueingHint:
    return DRA_HINTS[(kind, action)](p, old, new)


def test_dra_claim_added() -> None:
    """Test_isSchedulableAfterClaimChange: "queue-on-add" (the pod's claim created) and "skip-other-claim"."""
    assert dra("ResourceClaim", "Add", GPU_POD, None, claim("mine")) == QUEUE
    assert dra("ResourceClaim", "Add", GPU_POD, None, claim("other")) == SKIP
    assert dra("ResourceClaim", "Add", GPU_POD, None, claim("mine", ns="elsewhere")) == SKIP


def test_dra_claim_updated() -> None:
    """Test_isSchedulableAfterClaimChange: "structured-claim-deallocate" (any claim → queue), "skip-finalizer-
    change" (the pod's claim, status unchanged), "queue-on-status-change"."""
    assert dra("ResourceClaim", "Update", GPU_POD, claim("other", allocated=True), claim("other")) == QUEUE
    with_finalizer = claim("mine", finalizers=("resource.kubernetes.io/delete-protection",))
    assert dra("ResourceClaim", "Update", GPU_POD, claim("mine"), with_finalizer) == SKIP
    assert dra("ResourceClaim", "Update", GPU_POD, claim("mine"), claim("mine", allocated=True)) == QUEUE
    assert dra("ResourceClaim", "Update", GPU_POD, claim("other"), claim("other", allocated=True)) == SKIP


def test_dra_claim_deleted() -> None:
    assert dra("ResourceClaim", "Delete", GPU_POD, claim("other", allocated=True), None) == QUEUE
    assert dra("ResourceClaim", "Delete", GPU_POD, claim("other"), None) == SKIP


def test_dra_generated_claim_and_pod_events() -> None:
    """Test_isSchedulableAfterPodChange: "other-pod" → skip, the pod itself updated (its claim status) → queue.
    A deleted pod frees devices only through claims: a CPU-only pod's deletion → skip."""
    templated = pod("t", **{"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tpl"}]})
    generated = pod_from(
        {**templated.raw, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "t-gpu"}]}}
    )
    assert dra("Pod", "Update", templated, templated, generated) == QUEUE
    assert dra("Pod", "Update", templated, CPU_POD, pod("p", labels={"a": "b"})) == SKIP
    assert dra("ResourceClaim", "Add", generated, None, claim("t-gpu")) == QUEUE  # named in resourceClaimStatuses
    assert dra("Pod", "Delete", GPU_POD, pod("cpu", node="n1", requests={"cpu": "1"}), None) == SKIP
    assert dra("Pod", "Delete", GPU_POD, pod("other-gpu", node="n1", claims=("theirs",)), None) == QUEUE
    # a deleted pod whose claims came from templates: its devices free only when the claim is deallocated (a claim
    # event). Waking every waiting pod at the deletion sent the highest-priority ones into a failed attempt and a
    # backoff just before the deallocation (e2e/backlog).
    assert dra("Pod", "Delete", GPU_POD, generated, None) == SKIP


def test_dra_node_slice_and_class_updates() -> None:
    """Node: upstream registers Add | UpdateNodeLabel | UpdateNodeAllocatable (a heartbeat is none of them). Slices
    and classes: an update that leaves the spec unchanged cannot help."""
    assert dra("Node", "Add", GPU_POD, None, node("n")) == QUEUE
    assert dra("Node", "Update", GPU_POD, node("n", conditions="t1"), node("n", conditions="t2")) == SKIP
    assert dra("Node", "Update", GPU_POD, node("n"), node("n", labels={"rack": "r1"})) == QUEUE
    assert dra("ResourceSlice", "Add", GPU_POD, None, gpu_slice("n")) == QUEUE
    assert dra("ResourceSlice", "Update", GPU_POD, gpu_slice("n"), gpu_slice("n", label="y")) == SKIP
    assert dra("ResourceSlice", "Update", GPU_POD, gpu_slice("n"), gpu_slice("n", 2, gen=2)) == QUEUE
    assert dra("DeviceClass", "Update", GPU_POD, klass("k"), klass("k", selector="true")) == QUEUE
    assert dra("DeviceClass", "Update", GPU_POD, klass("k"), klass("k")) == SKIP


# --- InterPodAffinity (interpodaffinity/plugin.go) ----------------------------------------------------------------


IPA = InterPodAffinity()


def _term(labels: Mapping[str, str], key: str = "zone") -> Raw:
    return {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}


AFFINITY_POD = pod(
    "a", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "db"})]}}
)
ANTI_POD = pod(
    "b",
    affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "web"}, "host")]}},
)


def test_interpodaffinity_pod_added() -> None:
    """TestIsSchedulableAfterPodChange (interpodaffinity): "add a pod which matches the pod's scheduling
    constraints" → queue; "add an un-scheduled pod" → skip; "add a pod which doesn't match" → skip."""
    assert IPA.hint_pod_change(AFFINITY_POD, None, pod("db", node="n1", labels={"app": "db"})) == QUEUE
    assert IPA.hint_pod_change(AFFINITY_POD, None, pod("db", labels={"app": "db"})) == SKIP
    assert IPA.hint_pod_change(AFFINITY_POD, None, pod("x", node="n1", labels={"app": "web"})) == SKIP


def test_interpodaffinity_pod_updated_and_deleted() -> None:
    """ "update a pod from non-match to match pod affinity" → queue, "the updating pod matches target pod's affinity
    both before and after" → skip, "update a pod from match to non-match the pod anti-affinity" → queue, "delete a
    pod which doesn't match" → skip, "delete a pod which matches the pod's anti-affinity" → queue."""
    web = pod("w", node="n1", labels={"app": "web"})
    db = pod("w", node="n1", labels={"app": "db"})
    assert IPA.hint_pod_change(AFFINITY_POD, web, db) == QUEUE
    assert IPA.hint_pod_change(AFFINITY_POD, db, pod("w", node="n1", labels={"app": "db", "v": "2"})) == SKIP
    assert IPA.hint_pod_change(ANTI_POD, web, db) == QUEUE
    assert IPA.hint_pod_change(ANTI_POD, db, None) == SKIP
    assert IPA.hint_pod_change(ANTI_POD, web, None) == QUEUE
    # wider than upstream: a deleted pod with required anti-affinity may have been what rejected the waiting pod
    holder = pod("h", node="n1", affinity=ANTI_POD.raw["spec"]["affinity"])
    assert IPA.hint_pod_change(pod("plain"), holder, None) == QUEUE
    assert IPA.hint_pod_change(pod("plain"), db, None) == SKIP


def test_interpodaffinity_node_change() -> None:
    """TestIsSchedulableAfterNodeChange (interpodaffinity): a node with a term's topology key → queue; without →
    skip."""
    assert IPA.hint_node_change(AFFINITY_POD, None, node("n", labels={"zone": "z1"})) == QUEUE
    assert IPA.hint_node_change(AFFINITY_POD, None, node("n", labels={"rack": "r1"})) == SKIP
    assert IPA.hint_node_change(ANTI_POD, node("n"), node("n", labels={"host": "n"})) == QUEUE


# --- PodTopologySpread (podtopologyspread/plugin.go) --------------------------------------------------------------


PTS = PodTopologySpread()
SPREAD = pod(
    "s",
    labels={"app": "web"},
    topologySpreadConstraints=[
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        },
        {
            "maxSkew": 1,
            "topologyKey": "node",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        },
    ],
)


def test_pts_pod_change() -> None:
    """TestPodTopologySpread_isSchedulableAfterPodChange: "add pod with labels match topologySpreadConstraints
    selector" → queue, "add un-scheduled pod" → skip, "update pod but not change labels" → skip, "change pod's labels
    matching" → queue, "delete pod with labels that don't match" → skip, "add pod in different namespace" → skip."""
    assert PTS.hint_pod_change(SPREAD, None, pod("w", node="n1", labels={"app": "web"})) == QUEUE
    assert PTS.hint_pod_change(SPREAD, None, pod("w", labels={"app": "web"})) == SKIP
    assert PTS.hint_pod_change(SPREAD, None, pod("w", ns="other", node="n1", labels={"app": "web"})) == SKIP
    old = pod("w", node="n1", labels={"app": "db"})
    assert PTS.hint_pod_change(SPREAD, old, old) == SKIP
    assert PTS.hint_pod_change(SPREAD, old, pod("w", node="n1", labels={"app": "web"})) == QUEUE
    assert PTS.hint_pod_change(SPREAD, old, pod("w", node="n1", labels={"app": "db", "v": "1"})) == SKIP
    assert PTS.hint_pod_change(SPREAD, old, None) == SKIP
    assert PTS.hint_pod_change(SPREAD, pod("w", node="n1", labels={"app": "web"}), None) == QUEUE


def test_pts_node_change() -> None:
    """TestPodTopologySpread_isSchedulableAfterNodeChange: "node updates label which matches topologyKey" → queue,
    "node that doesn't match topologySpreadConstraints updates non-related label" → skip, "node updates unrelated
    label" → skip, "node is added with matching labels" → queue / without → skip, "node deleted" → queue when it
    had every key, "node updates taints" → queue."""
    both = {"zone": "z1", "node": "n"}
    assert PTS.hint_node_change(SPREAD, None, node("n", labels=both)) == QUEUE
    assert PTS.hint_node_change(SPREAD, None, node("n", labels={"zone": "z1"})) == SKIP
    assert PTS.hint_node_change(SPREAD, node("n", labels=both), node("n", labels={"zone": "z2", "node": "n"})) == QUEUE
    assert PTS.hint_node_change(SPREAD, node("n", labels=both), node("n", labels={**both, "x": "y"})) == SKIP
    assert (
        PTS.hint_node_change(SPREAD, node("n", labels={"zone": "z1"}), node("n", labels={"zone": "z1", "x": "y"}))
        == SKIP
    )
    assert PTS.hint_node_change(SPREAD, node("n", labels={"zone": "z1"}), node("n", labels=both)) == QUEUE
    assert (
        PTS.hint_node_change(SPREAD, node("n", labels=both), node("n", labels=both, taints=(("k", "NoSchedule"),)))
        == QUEUE
    )
    assert PTS.hint_node_change(SPREAD, node("n", labels=both), None) == QUEUE
    assert PTS.hint_node_change(SPREAD, node("n"), None) == SKIP


# --- NodeAffinity, TaintToleration, NodePorts, NodeUnschedulable, NodeName, SchedulingGates ----------------------


def test_nodeaffinity_node_change() -> None:
    """Test_isSchedulableAfterNodeChange (node_affinity_test.go): "node add with matched pod affinity" → queue,
    "node add with unmatched" → skip, "node update from unmatched to matched" → queue, "node update matched both
    before and after" → skip, added affinity (args) not matched → skip."""
    na = NodeAffinity()
    p = pod("p", nodeSelector={"gpu": "h100"})
    assert na.hint_node_change(p, None, node("n", labels={"gpu": "h100"})) == QUEUE
    assert na.hint_node_change(p, None, node("n", labels={"gpu": "a100"})) == SKIP
    assert na.hint_node_change(p, node("n"), node("n", labels={"gpu": "h100"})) == QUEUE
    assert (
        na.hint_node_change(p, node("n", labels={"gpu": "h100"}), node("n", labels={"gpu": "h100", "x": "1"})) == SKIP
    )
    added = NodeAffinity(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]
                }
            }
        }
    )
    assert added.hint_node_change(p, None, node("n", labels={"gpu": "h100"})) == SKIP
    assert added.hint_node_change(p, None, node("n", labels={"gpu": "h100", "pool": "gpu"})) == QUEUE


def test_tainttoleration_hints() -> None:
    """TestIsSchedulableAfterNodeChange (taint_toleration_test.go): "node with untolerated taint added" → skip,
    "node with tolerated / no taint added" → queue, "taint removed" → queue, "tolerated before and after" → skip;
    TestIsSchedulableAfterPodTolerationChange: the pod's own toleration added → queue, another pod → skip."""
    tt = TaintToleration()
    p = pod("p", tolerations=[{"key": "ok", "operator": "Exists", "effect": "NoSchedule"}])
    assert tt.hint_node_change(p, None, node("n", taints=(("bad", "NoSchedule"),))) == SKIP
    assert tt.hint_node_change(p, None, node("n", taints=(("ok", "NoSchedule"),))) == QUEUE
    assert tt.hint_node_change(p, node("n", taints=(("bad", "NoSchedule"),)), node("n")) == QUEUE
    assert tt.hint_node_change(p, node("n"), node("n", labels={"x": "y"})) == SKIP
    more = pod("p", tolerations=[*p.raw["spec"]["tolerations"], {"key": "bad", "operator": "Exists"}])
    assert tt.hint_pod_update(p, p, more) == QUEUE
    assert tt.hint_pod_update(p, pod("q"), pod("q", tolerations=more.raw["spec"]["tolerations"])) == SKIP


def test_nodeports_pod_deleted() -> None:
    """TestNodePortsIsSchedulableAfterPodDeleted (node_ports_test.go): "backoff-wrong-old-object", "skip-queue-on-
    unscheduled", "skip-queue-on-non-hostport", "skip-queue-on-unrelated-hostport", "queue-on-released-hostport"."""
    np = NodePorts()
    p = pod("p", ports=(8080,))
    assert np.hint_pod_deleted(p, pod("x", node="n1", ports=(8080,)), None) == QUEUE
    assert np.hint_pod_deleted(p, pod("x", ports=(8080,)), None) == SKIP
    assert np.hint_pod_deleted(p, pod("x", node="n1"), None) == SKIP
    assert np.hint_pod_deleted(p, pod("x", node="n1", ports=(9090,)), None) == SKIP


def test_nodeunschedulable_hints() -> None:
    """TestIsSchedulableAfterNodeChange (node_unschedulable_test.go): "node added, schedulable" → queue, "added,
    unschedulable" → skip, "updated unschedulable → schedulable" → queue, "schedulable → schedulable" → skip;
    TestIsSchedulableAfterPodTolerationChange: own pod now tolerating → queue."""
    nu = NodeUnschedulable()
    p = pod("p")
    assert nu.hint_node_change(p, None, node("n")) == QUEUE
    assert nu.hint_node_change(p, None, node("n", unschedulable=True)) == SKIP
    assert nu.hint_node_change(p, node("n", unschedulable=True), node("n")) == QUEUE
    assert nu.hint_node_change(p, node("n"), node("n", labels={"x": "y"})) == SKIP
    tolerating = pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert nu.hint_pod_update(p, p, tolerating) == QUEUE
    assert nu.hint_pod_update(p, p, pod("p", labels={"a": "b"})) == SKIP


def test_nodename_and_schedulinggates_hints() -> None:
    """TestIsSchedulableAfterNodeAdd (node_name_test.go): a node the pod may use added → queue, a node update →
    skip; TestIsSchedulableAfterUpdatePodSchedulingGatesEliminated: the pod's own gates removed → queue, another
    pod → skip, gates still present → skip."""
    nn, sg = NodeName(), SchedulingGates()
    p = pod("p")
    assert nn.hint_node_change(p, None, node("n")) == QUEUE
    assert nn.hint_node_change(p, node("n"), node("n", labels={"x": "y"})) == SKIP
    gated = pod("p", schedulingGates=[{"name": "g1"}, {"name": "g2"}])
    one_left = pod("p", schedulingGates=[{"name": "g1"}])
    assert sg.hint_pod_update(gated, gated, pod("p")) == QUEUE
    assert sg.hint_pod_update(gated, gated, one_left) == SKIP
    assert sg.hint_pod_update(gated, pod("q", schedulingGates=[{"name": "g1"}]), pod("q")) == SKIP


# --- the queue ---------------------------------------------------------------------------------------------------


def _less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    return a.timestamp < b.timestamp


def _default_profile() -> tuple[dict[str, set[tuple[str, str]]], Any]:
    sched = Scheduler(Cache(), InMemoryAPI(), default_config(), clock=FakeClock(0.0), inline_binding=True)
    events: dict[str, set[tuple[str, str]]] = {}
    for fw in sched.profiles.values():
        for name, evs in fw.events_to_register().items():
            events.setdefault(name, set()).update(evs)
    return events, profile_hints(sched.profiles)


EVENTS, HINTS = _default_profile()


def _rejected_queue(n: int, plugins: set[str], **kw: Any) -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock(1000.0)
    q = SchedulingQueue(_less, clock, events=EVENTS, hints=HINTS, **kw)
    for i in range(n):
        q.add(pod(f"g{i}", claims=(f"claim-{i}",)))
    for _ in range(n):
        info = q.pop()
        assert info is not None
        q.add_unschedulable(info, set(plugins), q.scheduling_cycle)
        q.done(info.pod.key)
    clock.advance(60.0)  # past every backoff
    assert q.lengths()["unschedulable"] == n
    return q, clock


def test_five_thousand_device_rejected_pods_stay_on_an_unrelated_pod_deletion() -> None:
    """The case of issue 24: every deletion of an assigned pod moved every pod DynamicResources (or Fit...) had
    rejected. A CPU-only pod that held no device cannot help pods rejected for devices only."""
    q, _ = _rejected_queue(5_000, {DRA})
    cpu_only = pod("web", node="n1", requests={"cpu": "1"})
    t0 = time.perf_counter()
    assert q.on_event("Pod", "Delete", old=cpu_only, new=None) == 0
    elapsed = time.perf_counter() - t0
    assert q.lengths()["unschedulable"] == 5_000
    # a node status heartbeat is not an update DynamicResources registers either
    assert q.on_event("Node", "Update", old=node("n1", conditions="t1"), new=node("n1", conditions="t2")) == 0
    # a deallocated claim frees devices: every one of them may fit now
    assert q.on_event("ResourceClaim", "Update", old=claim("held", allocated=True), new=claim("held")) == 5_000
    assert q.lengths()["unschedulable"] == 0
    print(f"\n5,000 hint calls for one unrelated deletion: {elapsed * 1000:.1f} ms")


def test_pods_rejected_by_fit_and_dra_move_when_either_says_queue() -> None:
    q, _ = _rejected_queue(10, {DRA, "NodeResourcesFit"})
    assert q.on_event("Pod", "Delete", old=pod("web", node="n1", requests={"cpu": "1"}), new=None) == 10  # Fit: queue
    q2, _ = _rejected_queue(10, {DRA, "NodeResourcesFit"})
    assert q2.on_event("Pod", "Delete", old=pod("pending-web", requests={"cpu": "1"}), new=None) == 0  # both skip


def test_event_without_objects_and_pod_without_rejectors_queue() -> None:
    q, _ = _rejected_queue(3, {DRA})
    assert q.on_event("Pod", "Delete") == 3  # no objects: the hints are not consulted (old callers)
    q2, _ = _rejected_queue(3, set())
    assert q2.on_event("Pod", "Delete", old=pod("web", node="n1"), new=None) == 3  # no rejecting plugin


def test_in_flight_pod_gets_the_hint_at_the_end_of_its_attempt() -> None:
    """upstream determineSchedulingHintForInFlightPod: the events seen during the attempt go through the hints of
    the plugins that rejected the pod in that attempt."""
    clock = FakeClock(1000.0)
    q = SchedulingQueue(_less, clock, events=EVENTS, hints=HINTS)
    q.add(pod("a", claims=("ca",)))
    q.add(pod("b", claims=("cb",)))
    info = q.pop()
    assert info is not None
    cycle = q.scheduling_cycle
    q.on_event("Pod", "Delete", old=pod("web", node="n1", requests={"cpu": "1"}), new=None)
    q.add_unschedulable(info, {DRA}, cycle)
    q.done(info.pod.key)
    assert q.pool("default/a") == "unschedulable"  # before: backoff (DRA registered Pod/Delete)
    info = q.pop()
    assert info is not None and info.pod.key == "default/b"
    cycle = q.scheduling_cycle
    q.on_event("ResourceClaim", "Update", old=claim("held", allocated=True), new=claim("held"))
    q.add_unschedulable(info, {DRA}, cycle)
    q.done(info.pod.key)
    assert q.pool("default/b") == "backoff"


def test_a_hint_that_raises_queues_the_pod_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(p: Pod, old: Any, new: Any) -> QueueingHint:
        calls.append(p.name)
        raise RuntimeError("boom")

    clock = FakeClock(1000.0)
    q = SchedulingQueue(_less, clock, events={"Broken": {("Node", "Add")}}, hints={"Broken": {("Node", "Add"): broken}})
    for name in ("a", "b"):
        q.add(pod(name))
        info = q.pop()
        assert info is not None
        q.add_unschedulable(info, {"Broken"}, q.scheduling_cycle)
        q.done(info.pod.key)
    clock.advance(60.0)
    assert q.on_event("Node", "Add", old=None, new=node("n")) == 2
    assert calls == ["a", "b"] and q.hint_errors == 2
    assert len(q._hint_faults) == 1  # logged once for (plugin, kind, action)


def test_a_registered_event_without_hint_still_queues() -> None:
    clock = FakeClock(1000.0)
    q = SchedulingQueue(_less, clock, events=EVENTS, hints=HINTS)
    q.add(pod("a", claims=("ca",)))
    info = q.pop()
    assert info is not None
    q.add_unschedulable(info, {DRA}, q.scheduling_cycle)
    q.done(info.pod.key)
    assert q.on_event("DeviceTaintRule", "Delete", old=object(), new=None) == 1


# --- the scheduler's event plumbing (scheduler.py _on_cache_event) ------------------------------------------------


def _obj(kind: str, raw: Raw) -> Raw:
    return {**raw, "kind": kind}


class Harness:
    def __init__(self, objs: list[Raw]) -> None:
        self.api = InMemoryAPI()
        self.cache = Cache()
        self.api.watchers.append(self.cache.apply)
        self.clock = FakeClock(1000.0)
        self.sched = Scheduler(self.cache, self.api, default_config(), clock=self.clock, inline_binding=True)
        for o in objs:
            self.api.load(o["kind"], copy.deepcopy(o))

    def run(self, rounds: int) -> None:
        async def go() -> None:
            for _ in range(rounds):
                info = self.sched.queue.pop()
                if info is None:
                    return
                await self.sched.run_once(info)
            await self.sched.flush_writes()

        asyncio.run(go())


def test_scheduler_feeds_old_and_new_objects_to_the_hints() -> None:
    """One GPU, held by an assigned pod's allocated claim; 20 GPU pods rejected by DynamicResources. Deleting a
    CPU-only pod on the node moves none of them (before: all 20); deallocating the held claim moves them all."""
    n = 20
    node_raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "a", "labels": {"kubernetes.io/hostname": "a"}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }
    objs: list[Raw] = [
        node_raw,
        _obj("ResourceSlice", gpu_slice("a").raw),
        _obj("DeviceClass", klass(DRIVER).raw),
        claim_raw("held", allocated=True),
        _obj("Pod", pod("holder", node="a", claims=("held",)).raw),
        _obj("Pod", pod("web", node="a", requests={"cpu": "1"}).raw),
    ]
    held = objs[3]
    held["status"]["allocation"]["devices"]["results"][0].update(pool="a", device="gpu-0")
    held["status"]["reservedFor"] = [{"resource": "pods", "name": "holder", "uid": "uid-default-holder"}]
    for i in range(n):
        objs.append(claim_raw(f"c{i}"))
        objs.append(_obj("Pod", pod(f"g{i}", claims=(f"c{i}",)).raw))
    h = Harness(objs)
    h.run(rounds=n)
    q = h.sched.queue
    assert q.lengths()["unschedulable"] == n
    assert all(q.info(f"default/g{i}").unschedulable_plugins == {DRA} for i in range(n))  # type: ignore[union-attr]
    asyncio.run(h.api.delete("Pod", "default", "web"))
    assert q.lengths()["unschedulable"] == n  # before: every pod moved

    async def deallocate() -> None:
        obj = await h.api.get("ResourceClaim", "default", "held")
        obj["status"] = {}
        await h.api.update("ResourceClaim", obj, subresource="status")

    asyncio.run(deallocate())
    assert q.lengths()["unschedulable"] == 0
