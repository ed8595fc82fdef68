"""The default profile's plugins live, on the Kubernetes 1.37.2 control plane, with ``dra-scheduler run``:
each case of issue #9 ("Why") that used to be a silent wrong placement, now checked on real API objects.

* InterPodAffinity (``pkg/scheduler/framework/plugins/interpodaffinity/filtering.go``): required
  anti-affinity on ``kubernetes.io/hostname`` (3 pods, 2 nodes: the third stays pending with
  ``ErrReasonAntiAffinityRulesNotMatch``); required affinity to a running ``app=db`` pod.
* PodTopologySpread (``podtopologyspread/filtering.go``): ``DoNotSchedule`` zone spread, maxSkew 1, zones of
  2 and 1 nodes: 6 pods end 3/3; with 2 matching pods already in zone A the next 2 go to zone B.
* NodePorts (``nodeports/node_ports.go``): two pods with hostPort 8080 on one node: one pending with
  ``ErrReason``; another port on the same node is fine.
* VolumeBinding (``volumebinding/binder.go``, KEP-1845 "WaitForFirstConsumer"): a no-provisioner
  StorageClass with ``volumeBindingMode: WaitForFirstConsumer`` and a local PV whose node affinity allows one
  node: the pod lands there, the scheduler's PreBind writes the PV's claimRef and kube-controller-manager's
  PV binder completes the binding (PVC ``Bound`` to that PV).
* DynamicResources, extended resources backed by DRA (KEP-5004,
  ``dynamicresources/extendeddynamicresources.go``): a DeviceClass with ``spec.extendedResourceName:
  example.com/gpu``, a node publishing 4 devices in a ResourceSlice and no ``example.com/gpu`` in its
  allocatable; a pod asking ``example.com/gpu: 2`` is bound, the claim the scheduler creates
  (``<pod>-extended-resources-*``, annotation ``resource.kubernetes.io/extended-resource-claim``, owned by the
  pod) holds 2 devices and is reserved for the pod, and ``pod.status.extendedResourceClaimStatus`` names it;
  a pod asking 3 of the 2 left stays pending until the first pod (and so its claim) is gone.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from e2e.fleet import (
    FLEET_LABEL,
    JSON,
    Kube,
    KubeError,
    SchedulerProcess,
    allocated_devices,
    create_nodes,
    device_slice,
    fresh_namespace,
    plain_node,
    pod_scheduled_condition,
    wait_for,
)

FLEET = "dp"  # plain nodes dp-a1, dp-a2 (zone-a), dp-b1 (zone-b)
DEV_FLEET = "dp-dev"  # dp-dev-0 (zone-c), 4 devices of gpu.example.com
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
STORAGE_CLASS = "dp-local-wfc"
PV = "dp-pv-a2"
DEVICE_CLASS = "dp-example-gpu"
EXT_RESOURCE = "example.com/gpu"
DRIVER = "gpu.example.com"
EXT_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

# upstream's failure reasons (v1.37.2)
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"  # interpodaffinity/filtering.go
PORTS = "node(s) didn't have free ports for the requested pod ports"  # nodeports/node_ports.go


@pytest.fixture(scope="module")
def nodes(kube: Kube, scheduler: SchedulerProcess) -> Iterator[dict[str, JSON]]:
    """The module's nodes (after the clean-up of the ``scheduler`` fixture); removes the cluster-scoped
    storage objects and the DeviceClass afterwards."""
    plain = create_nodes(kube, [plain_node("dp-a1", FLEET, "zone-a"), plain_node("dp-a2", FLEET, "zone-a"),
                                plain_node("dp-b1", FLEET, "zone-b")], FLEET)
    dev = create_nodes(kube, [plain_node("dp-dev-0", DEV_FLEET, "zone-c")], DEV_FLEET)
    yield {n["metadata"]["name"]: n for n in plain.nodes + dev.nodes}
    for kind, name in (("PersistentVolume", PV), ("StorageClass", STORAGE_CLASS), ("DeviceClass", DEVICE_CLASS)):
        with contextlib.suppress(KubeError):
            kube.delete(kind, name)


def pod(
    ns: str,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    cpu: str = "100m",
    fleet: str | None = FLEET,
    selector: Mapping[str, str] | None = None,
    **spec: Any,
) -> JSON:
    """A pause pod for dra-scheduler pinned to ``fleet`` (plus ``selector``); ``spec`` adds pod spec fields;
    ``containers`` entries given there replace the default one."""
    node_selector = {**({FLEET_LABEL: fleet} if fleet else {}), **(selector or {})}
    body: JSON = {"schedulerName": "dra-scheduler", "terminationGracePeriodSeconds": 0,
                  "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if node_selector:
        body["nodeSelector"] = node_selector
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})}, "spec": body}


def term(key: str, labels: Mapping[str, str]) -> JSON:
    return {"topologyKey": key, "labelSelector": {"matchLabels": dict(labels)}}


def settle(kube: Kube, ns: str, bound: int, pending: int, timeout: float = 30.0) -> tuple[list[JSON], list[JSON]]:
    """Wait until ``bound`` pods of ``ns`` are bound and ``pending`` carry PodScheduled=False; then check it
    stays so for a second (no late wrong binding). Returns (bound pods, pending pods)."""

    def state() -> tuple[list[JSON], list[JSON]]:
        pods = kube.list("Pod", ns)
        b = [p for p in pods if p["spec"].get("nodeName")]
        u = [p for p in pods if not p["spec"].get("nodeName")]
        return b, u

    def done() -> tuple[list[JSON], list[JSON]] | None:
        b, u = state()
        marked = [p for p in u if (c := pod_scheduled_condition(p)) and c.get("status") == "False"]
        return (b, u) if len(b) == bound and len(marked) == pending == len(u) else None

    try:
        wait_for(done, timeout, f"{bound} pods bound and {pending} unschedulable in {ns}", interval=0.25)
    except TimeoutError as e:
        b, u = state()
        detail = {p["metadata"]["name"]: p["spec"].get("nodeName") or pod_scheduled_condition(p) for p in b + u}
        raise AssertionError(f"{e}: {detail}") from None
    time.sleep(1.0)
    b, u = state()
    assert (len(b), len(u)) == (bound, pending), {p["metadata"]["name"]: p["spec"].get("nodeName") for p in b + u}
    return b, u


def by_name(pods: Sequence[JSON]) -> dict[str, JSON]:
    return {p["metadata"]["name"]: p for p in pods}


# --- InterPodAffinity -----------------------------------------------------------------------------------


def test_required_anti_affinity_on_hostname_keeps_the_third_pod_pending(
    kube: Kube, nodes: dict[str, JSON]
) -> None:
    ns = fresh_namespace(kube, "anti")
    two_nodes = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["dp-a1", "dp-a2"]}]}]}}}
    affinity = {**two_nodes, "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, {"app": "cache"})]}}
    for i in range(3):
        kube.create(pod(ns, f"cache-{i}", labels={"app": "cache"}, affinity=affinity))
    bound, [pending] = settle(kube, ns, bound=2, pending=1)
    assert sorted(p["spec"]["nodeName"] for p in bound) == ["dp-a1", "dp-a2"]
    cond = pod_scheduled_condition(pending)
    assert cond is not None and cond["reason"] == "Unschedulable", cond
    assert f"2 {ANTI_AFFINITY}" in cond["message"], cond["message"]


def test_required_pod_affinity_follows_the_running_db_pod(kube: Kube, nodes: dict[str, JSON]) -> None:
    ns = fresh_namespace(kube, "aff")
    kube.create(pod(ns, "db", labels={"app": "db"}, selector={HOSTNAME: "dp-b1"}))
    wait_for(lambda: (kube.get("Pod", "db", ns).get("status") or {}).get("phase") == "Running", 30,
             "the db pod Running")
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOSTNAME, {"app": "db"})]}}
    for i in range(3):  # one of three nodes: landing there by chance three times is 1/27
        kube.create(pod(ns, f"web-{i}", labels={"app": "web"}, affinity=affinity))
    bound, _ = settle(kube, ns, bound=4, pending=0)
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in bound} == {
        "db": "dp-b1", "web-0": "dp-b1", "web-1": "dp-b1", "web-2": "dp-b1"}


def test_required_pod_affinity_without_a_matching_pod_stays_pending(kube: Kube, nodes: dict[str, JSON]) -> None:
    ns = fresh_namespace(kube, "aff-none")
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOSTNAME, {"app": "db"})]}}
    kube.create(pod(ns, "web", labels={"app": "web"}, affinity=affinity))
    _, [pending] = settle(kube, ns, bound=0, pending=1)
    cond = pod_scheduled_condition(pending)
    assert cond is not None and "node(s) didn't match pod affinity rules" in cond["message"], cond


# --- PodTopologySpread ----------------------------------------------------------------------------------


def _zone_spread(labels: Mapping[str, str]) -> list[JSON]:
    return [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": dict(labels)}}]


def _zones(pods: Sequence[JSON], node_objs: Mapping[str, JSON]) -> Counter[str]:
    return Counter(node_objs[p["spec"]["nodeName"]]["metadata"]["labels"][ZONE] for p in pods)


def test_zone_spread_do_not_schedule_over_zones_of_two_and_one_nodes_ends_3_3(
    kube: Kube, nodes: dict[str, JSON]
) -> None:
    ns = fresh_namespace(kube, "spread")
    for i in range(6):
        kube.create(pod(ns, f"s-{i}", labels={"app": "spread"},
                        topologySpreadConstraints=_zone_spread({"app": "spread"})))
    bound, _ = settle(kube, ns, bound=6, pending=0)
    assert _zones(bound, nodes) == {"zone-a": 3, "zone-b": 3}
    assert Counter(p["spec"]["nodeName"] for p in bound)["dp-b1"] == 3


def test_zone_spread_counts_pods_already_running(kube: Kube, nodes: dict[str, JSON]) -> None:
    ns = fresh_namespace(kube, "spread-run")
    for i, node in enumerate(("dp-a1", "dp-a2")):  # two matching pods already in zone A, no constraint
        kube.create(pod(ns, f"old-{i}", labels={"app": "s"}, selector={HOSTNAME: node}))
    settle(kube, ns, bound=2, pending=0)
    for i in range(2):
        kube.create(pod(ns, f"new-{i}", labels={"app": "s"}, topologySpreadConstraints=_zone_spread({"app": "s"})))
    bound, _ = settle(kube, ns, bound=4, pending=0)
    assert {p["spec"]["nodeName"] for p in bound if p["metadata"]["name"].startswith("new-")} == {"dp-b1"}
    # a fifth may go to either zone (2/2 before it); a sixth after that must balance again: 3/3
    kube.create(pod(ns, "new-2", labels={"app": "s"}, topologySpreadConstraints=_zone_spread({"app": "s"})))
    settle(kube, ns, bound=5, pending=0)
    kube.create(pod(ns, "new-3", labels={"app": "s"}, topologySpreadConstraints=_zone_spread({"app": "s"})))
    bound, _ = settle(kube, ns, bound=6, pending=0)
    assert _zones(bound, nodes) == {"zone-a": 3, "zone-b": 3}


# --- NodePorts ------------------------------------------------------------------------------------------


def _port_container(port: int) -> list[JSON]:
    return [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "100m"}},
             "ports": [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]}]


def test_two_pods_with_host_port_8080_on_one_node(kube: Kube, nodes: dict[str, JSON]) -> None:
    ns = fresh_namespace(kube, "ports")
    kube.create(pod(ns, "p-0", selector={HOSTNAME: "dp-a1"}, containers=_port_container(8080)))
    settle(kube, ns, bound=1, pending=0)
    kube.create(pod(ns, "p-1", selector={HOSTNAME: "dp-a1"}, containers=_port_container(8080)))
    kube.create(pod(ns, "other-port", selector={HOSTNAME: "dp-a1"}, containers=_port_container(8081)))
    kube.create(pod(ns, "anywhere", containers=_port_container(8080)))
    bound, [pending] = settle(kube, ns, bound=3, pending=1)
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in bound}
    assert pending["metadata"]["name"] == "p-1"
    assert placed["p-0"] == placed["other-port"] == "dp-a1"
    assert placed["anywhere"] in {"dp-a2", "dp-b1"}
    cond = pod_scheduled_condition(pending)
    assert cond is not None and cond["reason"] == "Unschedulable", cond
    assert f"1 {PORTS}" in cond["message"], cond["message"]


# --- VolumeBinding: WaitForFirstConsumer + a local PV ---------------------------------------------------


def test_wait_for_first_consumer_local_pv_binds_on_its_node(kube: Kube, nodes: dict[str, JSON]) -> None:
    ns = fresh_namespace(kube, "wfc")
    kube.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": STORAGE_CLASS},
                 "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
                 "reclaimPolicy": "Retain"})
    kube.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": PV},
                 "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                          "persistentVolumeReclaimPolicy": "Retain", "storageClassName": STORAGE_CLASS,
                          "local": {"path": "/mnt/disks/vol1"},
                          "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                              {"key": HOSTNAME, "operator": "In", "values": ["dp-a2"]}]}]}}}})
    kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": ns},
                 "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": STORAGE_CLASS,
                          "resources": {"requests": {"storage": "5Gi"}}}})
    time.sleep(1.0)  # WaitForFirstConsumer: the PV binder leaves the claim alone until a pod uses it
    pvc = kube.get("PersistentVolumeClaim", "data", ns)
    assert pvc["status"].get("phase") == "Pending" and not pvc["spec"].get("volumeName"), pvc["status"]
    kube.create(pod(ns, "uses-pv", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]))
    [bound], _ = settle(kube, ns, bound=1, pending=0, timeout=60)
    assert bound["spec"]["nodeName"] == "dp-a2"
    pvc = wait_for(lambda: (c := kube.get("PersistentVolumeClaim", "data", ns))["status"].get("phase") == "Bound"
                   and c, 30, "the PVC Bound (PV binder of kube-controller-manager)")
    assert pvc["spec"]["volumeName"] == PV
    pv = kube.get("PersistentVolume", PV)
    assert pv["status"]["phase"] == "Bound"
    ref = pv["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == (ns, "data", pvc["metadata"]["uid"])


# --- DynamicResources: an extended resource backed by DRA -----------------------------------------------


def _ext_pod(ns: str, name: str, count: int) -> JSON:
    res = {"cpu": "100m", EXT_RESOURCE: str(count)}
    return pod(ns, name, fleet=None,
               containers=[{"name": "main", "image": "pause", "resources": {"requests": res, "limits": res}}])


def test_extended_resource_backed_by_dra(kube: Kube, nodes: dict[str, JSON]) -> None:
    ns = fresh_namespace(kube, "ext")
    node = nodes["dp-dev-0"]
    assert EXT_RESOURCE not in node["status"]["allocatable"]
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DEVICE_CLASS},
                 "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}],
                          "extendedResourceName": EXT_RESOURCE}})
    kube.create(device_slice(node, DRIVER, [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}}
                                            for i in range(4)], DEV_FLEET))
    kube.create(_ext_pod(ns, "two", 2))
    [p], _ = settle(kube, ns, bound=1, pending=0)
    assert p["spec"]["nodeName"] == "dp-dev-0"

    # the claim the scheduler created for the pod, and the pod's status naming it
    def claim_and_status() -> tuple[list[JSON], JSON] | None:
        cur = kube.get("Pod", "two", ns)
        st = (cur.get("status") or {}).get("extendedResourceClaimStatus")
        claims = kube.list("ResourceClaim", ns)
        return (claims, cur) if st and claims else None

    claims, cur = wait_for(claim_and_status, 20, "the extended-resource claim and the pod's status")
    [claim] = claims
    meta = claim["metadata"]
    assert meta["name"].startswith("two-extended-resources-"), meta["name"]
    assert meta.get("annotations", {}).get(EXT_CLAIM_ANNOTATION) == "true", meta
    assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in meta.get("ownerReferences", [])] == [
        ("Pod", "two", cur["metadata"]["uid"], True)]
    devices = allocated_devices(claim)
    assert len(devices) == 2 == len(set(devices)), devices
    assert all(d[0] == DRIVER and d[1] == "dp-dev-0" for d in devices), devices
    reserved = claim["status"].get("reservedFor") or []
    assert [(r.get("resource"), r.get("name"), r.get("uid")) for r in reserved] == [
        ("pods", "two", cur["metadata"]["uid"])]
    [req] = claim["spec"]["devices"]["requests"]
    assert (req["exactly"]["deviceClassName"], req["exactly"].get("count"),
            req["exactly"].get("allocationMode", "ExactCount")) == (DEVICE_CLASS, 2, "ExactCount")
    st = cur["status"]["extendedResourceClaimStatus"]
    assert st["resourceClaimName"] == meta["name"]
    assert [(m["containerName"], m["resourceName"], m["requestName"]) for m in st["requestMappings"]] == [
        ("main", EXT_RESOURCE, req["name"])]

    # 3 more do not fit in the 2 left; they do once the first pod and its claim are gone
    kube.create(_ext_pod(ns, "three", 3))
    _, [pending] = settle(kube, ns, bound=1, pending=1)
    assert pending["metadata"]["name"] == "three"
    kube.delete("Pod", "two", ns, grace=0)
    [p3], _ = settle(kube, ns, bound=1, pending=0, timeout=60)
    assert p3["metadata"]["name"] == "three" and p3["spec"]["nodeName"] == "dp-dev-0"
    claims = wait_for(lambda: [c for c in kube.list("ResourceClaim", ns) if allocated_devices(c)]
                      if len(kube.list("ResourceClaim", ns)) == 1 else None, 30,
                      "only the second pod's claim left")
    assert len(allocated_devices(claims[0])) == 3
