"""Kinds the scheduler caches beyond the core DRA/pod kinds, each with its converter (raw JSON -> typed).

The cache stores them generically (``Cache.objects(kind)``, ``Snapshot.objects_of(kind)``); the module that
owns a kind's typed value provides its converter. A converter raises :class:`scheduler.api.model.ModelError`
on invalid input (the object is then rejected and logged, as every other kind).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.api import devicetaintrules, storage, workload_api, workloads

Converter = Callable[[Mapping[str, Any]], Any]

OBJECT_KINDS: dict[str, Converter] = {
    # storage (VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits)
    "PersistentVolume": storage.pv_from,
    "PersistentVolumeClaim": storage.pvc_from,
    "StorageClass": storage.storageclass_from,
    "CSINode": storage.csinode_from,
    "CSIDriver": storage.csidriver_from,
    "CSIStorageCapacity": storage.csistoragecapacity_from,
    # workload controllers and services (PodTopologySpread's system default constraints)
    "Service": workloads.service_from,
    "ReplicationController": workloads.replicationcontroller_from,
    "ReplicaSet": workloads.replicaset_from,
    "StatefulSet": workloads.statefulset_from,
    # priorities and disruption budgets (admission in simulate, preemption)
    "PriorityClass": workloads.priorityclass_from,
    "PodDisruptionBudget": workloads.pdb_from,
    # DRA: taints of DeviceTaintRules count as device taints (plugins/dra/taintrules.py)
    "DeviceTaintRule": devicetaintrules.rule_from,
    # Kubernetes 1.37 workload-aware scheduling: CompositePodGroup (v1alpha3) admission, Workload (v1beta1)
    "CompositePodGroup": workload_api.composite_from,
    "Workload": workload_api.workload_from,
}
