"""Builders for the volume plugin tests: raw storage objects, pods with volumes, and a cache-backed world
that gives snapshots, cycle states and NodeInfos (modelled on upstream's binder_test.go fixtures)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api.model import Pod, pod_from
from scheduler.cache.cache import Cache, NodeInfo
from scheduler.framework.interface import CycleState

Obj = dict[str, Any]

NODE_KEY = "nodeKey"  # binder_test.go nodeLabelKey
WAIT = "waitClass"  # WaitForFirstConsumer, kubernetes.io/no-provisioner
IMMEDIATE = "immediateClass"
WAIT_PROV = "waitClassWithProvisioner"  # WaitForFirstConsumer, test-provisioner, topology nodeKey in node1
TOPO_MISMATCH = "topoMismatchClass"  # WaitForFirstConsumer, test-provisioner, topology nodeKey in other
PROVISIONER = "test-provisioner"


def node(name: str, labels: Mapping[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels if labels is not None else {NODE_KEY: name})},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def storage_class(
    name: str,
    provisioner: str = "",
    mode: str | None = "WaitForFirstConsumer",
    topologies: Sequence[Mapping[str, Sequence[str]]] | None = None,
    default: bool = False,
) -> Obj:
    o: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name}}
    if provisioner:
        o["provisioner"] = provisioner
    if mode:
        o["volumeBindingMode"] = mode
    if topologies is not None:
        o["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in t.items()]} for t in topologies
        ]
    if default:
        o["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return o


def upstream_classes() -> list[Obj]:
    return [
        storage_class(WAIT_PROV, PROVISIONER, topologies=[{NODE_KEY: ["node1", "reference-value"]}]),
        storage_class(IMMEDIATE, mode="Immediate"),
        storage_class(WAIT, "kubernetes.io/no-provisioner"),
        storage_class(TOPO_MISMATCH, PROVISIONER, topologies=[{NODE_KEY: ["reference-value"]}]),
    ]


def pvc(
    name: str,
    size: str | None = "1G",
    cls: str | None = WAIT,
    *,
    volume_name: str = "",
    bound: bool = False,
    selected_node: str | None = None,
    modes: Sequence[str] = (),
    ns: str = "default",
    phase: str | None = None,
    owner: tuple[str, str] | None = None,
    selector: Obj | None = None,
    annotations: Mapping[str, str] | None = None,
    deleting: bool = False,
    volume_mode: str | None = None,
    rv: str | None = None,
) -> Obj:
    anns = dict(annotations or {})
    if bound:
        anns["pv.kubernetes.io/bind-completed"] = "yes"
    if selected_node is not None:
        anns["volume.kubernetes.io/selected-node"] = selected_node
    meta: Obj = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "annotations": anns}
    if rv is not None:
        meta["resourceVersion"] = rv
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner[0], "uid": owner[1], "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: Obj = {}
    if size is not None:
        spec["resources"] = {"requests": {"storage": size}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume_name:
        spec["volumeName"] = volume_name
    if modes:
        spec["accessModes"] = list(modes)
    if selector is not None:
        spec["selector"] = selector
    if volume_mode:
        spec["volumeMode"] = volume_mode
    o: Obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
    if phase:
        o["status"] = {"phase": phase}
    elif bound:
        o["status"] = {"phase": "Bound"}
    return o


def pv(
    name: str,
    node_value: str | None = "node1",
    size: str = "1G",
    cls: str = WAIT,
    *,
    claim: Obj | None = None,
    phase: str = "Available",
    modes: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    affinity_key: str = NODE_KEY,
    source: Obj | None = None,
    volume_mode: str | None = None,
    rv: str | None = None,
) -> Obj:
    meta: Obj = {"name": name, "labels": dict(labels or {}), "annotations": {}}
    if rv is not None:
        meta["resourceVersion"] = rv
    spec: Obj = {"capacity": {"storage": size}, "storageClassName": cls}
    spec.update(source if source is not None else {"local": {"path": "/mnt"}})
    if node_value is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": affinity_key, "operator": "In", "values": [node_value]}]}
                ]
            }
        }
    if claim is not None:
        m = claim["metadata"]
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": m["namespace"],
            "name": m["name"],
            "uid": m.get("uid", ""),
        }
        meta["annotations"]["pv.kubernetes.io/bound-by-controller"] = "yes"
    if modes:
        spec["accessModes"] = list(modes)
    if volume_mode:
        spec["volumeMode"] = volume_mode
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def csinode(name: str, drivers: Mapping[str, int | None], annotations: Mapping[str, str] | None = None) -> Obj:
    ds = []
    for d, count in drivers.items():
        entry: Obj = {"name": d, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        ds.append(entry)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {"drivers": ds},
    }


def csidriver(name: str, *, storage_capacity: bool = False, prevent_if_missing: bool = False) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": storage_capacity, "preventPodSchedulingIfMissing": prevent_if_missing},
    }


def claim_volume(claim: str, name: str | None = None, read_only: bool = False) -> Obj:
    src: Obj = {"claimName": claim}
    if read_only:
        src["readOnly"] = True
    return {"name": name or f"vol-{claim}", "persistentVolumeClaim": src}


def ephemeral_volume(name: str, cls: str = WAIT, size: str = "1G") -> Obj:
    return {
        "name": name,
        "ephemeral": {
            "volumeClaimTemplate": {"spec": {"storageClassName": cls, "resources": {"requests": {"storage": size}}}}
        },
    }


def pod_raw(
    name: str,
    volumes: Sequence[Obj] = (),
    *,
    ns: str = "default",
    node_name: str = "",
    uid: str | None = None,
    scheduler: str = "dra-scheduler",
) -> Obj:
    spec: Obj = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}
    if volumes:
        spec["volumes"] = list(volumes)
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-pod-{ns}-{name}"},
        "spec": spec,
    }


def make_pod(name: str, volumes: Sequence[Obj] = (), **kw: Any) -> Pod:
    return pod_from(pod_raw(name, volumes, **kw))


class World:
    """Objects fed to a real Cache (through the converters of scheduler.api.objects), snapshots on demand."""

    def __init__(self, *objs: Obj) -> None:
        self.cache = Cache()
        self._rv = 0
        for o in objs:
            self.add(o)

    def add(self, o: Obj, event: str = "ADDED") -> None:
        m = o.setdefault("metadata", {})
        if "resourceVersion" not in m:
            self._rv += 1
            m["resourceVersion"] = str(self._rv)
        self.cache.apply(o["kind"], event, o)

    def update(self, o: Obj) -> None:
        self._rv += 1
        o["metadata"]["resourceVersion"] = str(self._rv + 1000)
        self.cache.apply(o["kind"], "MODIFIED", o)

    def state(self) -> CycleState:
        return CycleState(self.cache.snapshot())

    def node_info(self, state: CycleState, name: str) -> NodeInfo:
        return state.snapshot.node_map[name]
