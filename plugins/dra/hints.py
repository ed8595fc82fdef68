"""DynamicResources' QueueingHints: which cluster events may make a pod this plugin rejected schedulable.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``
(``EventsToRegister``, ``isSchedulableAfterClaimChange``, ``isSchedulableAfterPodChange``). Pure functions of
the waiting pod and the event's old/new objects (``scheduler.api.model`` values); no lister is read, so upstream's
first check in ``isSchedulableAfterClaimChange`` (every claim of the pod exists and is usable, else skip) is not
made here: the pod is queued and PreEnqueue / PreFilter answer that, erring on the side of an attempt as the
upstream function says it does.

Beyond upstream, for events this plugin registers that upstream's does not, or registers by action type:

* a ResourceClaim deleted while allocated frees its devices (upstream sees the deallocation first, as an update,
  because of the finalizer; a cache may see only the delete);
* a pod deleted frees devices only through its claims: the deletion of a pod that uses none (a CPU-only pod)
  cannot help;
* a node update counts when labels or allocatable changed (upstream registers Add | UpdateNodeLabel |
  UpdateNodeAllocatable: a status heartbeat is no such update);
* a ResourceSlice or DeviceClass update whose spec is unchanged (metadata only) cannot help.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.dra.extended import EXTENDED_CLAIM_ANNOTATION
from scheduler.api.dra import ResourceClaim
from scheduler.api.model import Node, Pod
from scheduler.framework.interface import QueueingHint

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.SKIP


def _extended_claim_name(pod: Pod) -> str | None:
    status = pod.raw.get("status")
    if isinstance(status, Mapping):
        ext = status.get("extendedResourceClaimStatus")
        if isinstance(ext, Mapping):
            name = ext.get("resourceClaimName")
            if isinstance(name, str) and name:
                return name
    return None


def uses_claim(pod: Pod, claim: ResourceClaim) -> bool:
    """Whether ``claim`` is one of the pod's claims: named in ``spec.resourceClaims``, generated for it (named in
    ``status.resourceClaimStatuses``), or its claim for extended resources backed by DRA (named in
    ``status.extendedResourceClaimStatus``, or annotated as such and controlled by the pod)."""
    if claim.namespace != pod.namespace:
        return False
    name = claim.name
    for pc in pod.claims:
        if pc.claim_name == name or pod.claim_statuses.get(pc.name) == name:
            return True
    if _extended_claim_name(pod) == name:
        return True
    if claim.meta.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true":
        owner = claim.meta.controller()
        if owner is not None and owner.kind == "Pod" and owner.uid == pod.uid:
            return True
    return False


def uses_any_claim(pod: Pod) -> bool:
    return bool(pod.claims) or _extended_claim_name(pod) is not None


def claim_changed(pod: Pod, old: ResourceClaim | None, new: ResourceClaim | None) -> QueueingHint:
    """upstream ``isSchedulableAfterClaimChange`` (claim added or updated): a claim deallocated (any claim: its
    devices are free again) → queue; a claim the pod does not use → skip; the pod's claim created → queue; the
    pod's claim updated with an unchanged status (e.g. a finalizer added) → skip; its status changed → queue."""
    if new is None:
        return claim_deleted(pod, old, new)
    if old is not None and old.allocation is not None and new.allocation is None:
        return QUEUE
    if not uses_claim(pod, new):
        return SKIP
    if old is None:
        return QUEUE
    if old.raw.get("status") == new.raw.get("status"):
        return SKIP
    return QUEUE


def claim_deleted(pod: Pod, old: ResourceClaim | None, new: Any) -> QueueingHint:
    """A claim deleted while still allocated frees its devices → queue; any other deletion cannot help (the pod's
    own claim being deleted makes it wait for a new one: an Add)."""
    del pod, new
    return QUEUE if old is None or old.allocation is not None else SKIP


def pod_updated(pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
    """upstream ``isSchedulableAfterPodChange`` (UpdatePodGeneratedResourceClaim): only an update of the waiting
    pod itself (its claim statuses) can help; another pod's update cannot."""
    del old
    return QUEUE if new is not None and new.uid == pod.uid else SKIP


def pod_deleted(pod: Pod, old: Pod | None, new: Any) -> QueueingHint:
    """A deleted pod frees devices only through its claims. Upstream's DynamicResources registers no pod deletion
    at all: the devices are free once the claim is deallocated, a claim event (``claim_changed``). Here a deletion
    queues only when the deleted pod named a claim directly (``resourceClaimName``, possibly shared: leaving its
    ``reservedFor`` may make room for another consumer). A pod whose claims came from templates → skip: waking
    every waiting pod at the deletion, before kube-controller-manager deallocates, sent them all to a failed
    attempt and a backoff, and the pods of the highest priority, tried first, were still backing off when the
    deallocation arrived (e2e/backlog: freed GPUs went to the lowest priority class most)."""
    del pod, new
    if old is None:
        return QUEUE
    return QUEUE if any(pc.claim_name for pc in old.claims) else SKIP


def node_changed(pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
    """upstream registers Node Add | UpdateNodeLabel | UpdateNodeAllocatable without a hint: an added node →
    queue; an update → queue when labels or allocatable changed (other updates, e.g. status, → skip)."""
    del pod
    if old is None or new is None:
        return QUEUE
    if old.labels != new.labels or old.allocatable != new.allocatable:
        return QUEUE
    return SKIP


def spec_changed(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """ResourceSlice / DeviceClass added or updated (upstream: no hint, always queue): an update that leaves the
    object's ``spec`` as it was → skip."""
    del pod
    if old is None or new is None:
        return QUEUE
    old_raw, new_raw = getattr(old, "raw", None), getattr(new, "raw", None)
    if isinstance(old_raw, Mapping) and isinstance(new_raw, Mapping) and old_raw.get("spec") == new_raw.get("spec"):
        return SKIP
    return QUEUE
