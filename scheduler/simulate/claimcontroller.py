"""The part of kube-controller-manager's resourceclaim controller that ``simulate`` must play: create
claims for pods' ``resourceClaimTemplateName`` entries and record them in ``pod.status.resourceClaimStatuses``.

Claims are named like the real controller (``generateName: <pod>-<podClaim>-``, both parts truncated in
proportion to fit 57 characters), owned by the pod (controller reference), annotated with
``resource.kubernetes.io/pod-claim-name``, and carry the template's labels and annotations and spec.
"""

from __future__ import annotations

import copy
from typing import Any

import structlog

from scheduler.api.clusterapi import ClusterAPI, NotFound, Obj
from scheduler.api.dra import CLAIM_FINALIZER, POD_CLAIM_NAME_ANNOTATION

log = structlog.get_logger("dra_scheduler.claimcontroller")
MAX_BASE_LEN = 57


def generate_name(pod: str, claim: str) -> str:
    base = f"{pod}-{claim}"
    if len(base) > MAX_BASE_LEN:
        base = pod[: len(pod) * MAX_BASE_LEN // len(base)] + "-" + claim[: len(claim) * MAX_BASE_LEN // len(base)]
    return base + "-"


def claim_from_template(template: Obj, ns: str, owner_name: str, claim_name: str, owner: Obj) -> Obj:
    """The ResourceClaim kube-controller-manager makes from a ResourceClaimTemplate for a pod's (or a PodGroup's)
    claim entry ``claim_name``: the template's labels, annotations and spec, ``generateName`` from the owner's and
    the entry's names, the ``pod-claim-name`` annotation and ``owner`` as controller reference."""
    tmeta = (template.get("spec") or {}).get("metadata") or {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": generate_name(owner_name, claim_name),
            "namespace": ns,
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: claim_name},
            "ownerReferences": [owner],
        },
        "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
    }


async def create_pod_claims(api: ClusterAPI, pod: Obj) -> list[str]:
    """Create missing template claims of ``pod``; returns problems (e.g. a missing template)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if meta.get("deletionTimestamp") or spec.get("nodeName"):
        return []
    ns, name, uid = meta.get("namespace", "default"), meta["name"], meta.get("uid", "")
    statuses: list[dict[str, Any]] = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
    known = {s.get("name") for s in statuses}
    problems: list[str] = []
    changed = False
    for pc in spec.get("resourceClaims") or []:
        tmpl = pc.get("resourceClaimTemplateName")
        if not tmpl or pc.get("name") in known:
            continue
        try:
            template = await api.get("ResourceClaimTemplate", ns, tmpl)
        except NotFound:
            problems.append(f"pod {ns}/{name}: resourceclaimtemplate {ns}/{tmpl} not found")
            continue
        owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True,
                 "blockOwnerDeletion": True}
        created = await api.create("ResourceClaim", claim_from_template(template, ns, name, pc["name"], owner))
        statuses.append({"name": pc["name"], "resourceClaimName": created["metadata"]["name"]})
        changed = True
    if changed:
        await api.patch("Pod", ns, name, {"status": {"resourceClaimStatuses": statuses}}, subresource="status")
    for p in problems:
        log.warning("claim not created", problem=p)
    return problems


# --- after pods are deleted (simulate) ------------------------------------------------------------------
#
# What kube-controller-manager does once a pod is gone (v1.37.2 pkg/controller/resourceclaim/controller.go
# ``syncClaim``, plus the garbage collector for claims owned by a pod that no longer exists): a reservation in
# ``status.reservedFor`` for a pod that is gone (or done: terminal phase, or deleted before it was scheduled)
# is removed; a claim whose last reservation went away is deallocated (``status.allocation`` cleared) when it
# carries the ``resource.kubernetes.io/delete-protection`` finalizer, and the finalizer is then removed; a
# claim generated for a pod (controller owner reference, v1 Pod) that is gone or done and reserved by nobody
# is deleted. ``simulate`` runs this after each scheduling attempt that deleted pods (preemption), with its
# fake clock: the victims' graceful termination has completed at once. Only the consequences of deletions
# during the run are played: claims of the input reserved for pods that are not in the input stay as given.


class DeletionRecorder:
    """A watcher of the in-memory API: every object deleted (as last seen), and the pods deleted since the
    claims were last released."""

    def __init__(self) -> None:
        self.deleted: list[Obj] = []
        self.pods: dict[str, Obj] = {}  # uid -> deleted pod, until release_claims handled it

    def __call__(self, kind: str, event: str, obj: Obj) -> None:
        if event != "DELETED":
            return
        self.deleted.append(obj)  # stored objects are never mutated: keeping the reference is safe
        if kind == "Pod":
            uid = (obj.get("metadata") or {}).get("uid")
            if uid:
                self.pods[uid] = obj


def _pod_done(pod: Obj) -> bool:
    """``isPodDone``: a terminal phase, or deleted and never scheduled."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return True
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


async def release_claims(api: Any, recorder: DeletionRecorder) -> int:
    """Play kube-controller-manager for the claims of the pods ``recorder`` saw deleted (``api``: an
    :class:`~scheduler.simulate.memapi.InMemoryAPI`). Returns the number of claims deallocated or deleted."""
    gone = recorder.pods
    if not gone:
        return 0
    recorder.pods = {}
    live = {
        ((p["metadata"].get("namespace") or ""), p["metadata"]["name"]): p for p in api.stored("Pod")
    }

    def pod_gone(ns: str, name: str, uid: str) -> bool:
        p = live.get((ns, name))
        return p is None or p["metadata"].get("uid") != uid or _pod_done(p)

    changed = 0
    for claim in list(api.stored("ResourceClaim")):
        meta = claim["metadata"]
        ns = meta.get("namespace") or ""
        status = claim.get("status") or {}
        reserved = list(status.get("reservedFor") or [])
        owner = next(
            (
                o
                for o in meta.get("ownerReferences") or []
                if o.get("controller") and o.get("apiVersion") == "v1" and o.get("kind") == "Pod"
            ),
            None,
        )
        involved = any(r.get("uid") in gone for r in reserved) or (owner is not None and owner.get("uid") in gone)
        if not involved:
            continue
        remaining = [
            r
            for r in reserved
            if not (
                (r.get("apiGroup") or "") == ""
                and r.get("resource") == "pods"
                and r.get("uid") in gone
                and pod_gone(ns, r.get("name", ""), r.get("uid", ""))
            )
        ]
        current = claim
        if len(remaining) < len(reserved):
            new = copy.deepcopy(claim)
            new["status"] = dict(new.get("status") or {})
            if remaining:
                new["status"]["reservedFor"] = remaining
            else:
                new["status"].pop("reservedFor", None)
                if CLAIM_FINALIZER in (meta.get("finalizers") or []):
                    new["status"].pop("allocation", None)  # deallocate: the last consumer is gone
            current = await api.update("ResourceClaim", new, subresource="status")
            changed += 1
            fins = list(current["metadata"].get("finalizers") or [])
            if CLAIM_FINALIZER in fins and not (current.get("status") or {}).get("allocation"):
                fins.remove(CLAIM_FINALIZER)
                current = await api.update("ResourceClaim", {**current, "metadata": {**current["metadata"],
                                                                                   "finalizers": fins}})
        if remaining or owner is None:
            continue
        if pod_gone(ns, owner.get("name", ""), owner.get("uid", "")):
            # the pod it was generated for is gone: the claim controller (or the garbage collector) deletes it
            try:
                await api.delete("ResourceClaim", ns, meta["name"])
            except NotFound:
                continue
            changed += 1
    return changed


# PodGroup-level claims (KEP-5729 DRAWorkloadResourceClaims, beta in 1.37) ---------------------------------------------


async def create_podgroup_claims(api: ClusterAPI, podgroup: Obj, members: list[Obj]) -> list[str]:
    """kube-controller-manager's resourceclaim controller for one ``scheduling.k8s.io/v1beta1`` PodGroup
    (``pkg/controller/resourceclaim/controller.go`` v1.37.2 ``syncPodGroup`` / ``handlePodGroupClaim`` and, for
    the members, ``handleClaim`` with ``BindTo`` = the PodGroup):

    * one claim per ``spec.resourceClaims`` entry that names a ``resourceClaimTemplateName``, made from the
      template (its labels, annotations and spec), named ``generateName: <podgroup>-<claim>-`` (truncated as for
      pods), owned by the PodGroup (controller reference ``scheduling.k8s.io/v1beta1`` PodGroup, uid), annotated
      ``resource.kubernetes.io/pod-claim-name: <claim>``, recorded in ``status.resourceClaimStatuses``;
    * each member (``spec.schedulingGroup.podGroupName``) whose ``spec.resourceClaims`` entry matches the PodGroup's
      exactly (same name and template / claim name) gets that claim's name in ``status.resourceClaimStatuses``
      instead of a claim of its own. The scheduler reserves it for the PodGroup, allocates it once and every member
      uses the same devices.

    Entries naming ``resourceClaimName`` need no claim (the user made it). Returns problems (e.g. a missing
    template); they leave the members waiting for the claim, as live."""
    meta = podgroup.get("metadata") or {}
    spec = podgroup.get("spec") or {}
    if meta.get("deletionTimestamp") or not spec.get("resourceClaims"):
        return []
    ns, name, uid = meta.get("namespace", "default"), meta["name"], meta.get("uid", "")
    statuses: list[dict[str, Any]] = list((podgroup.get("status") or {}).get("resourceClaimStatuses") or [])
    known = {s.get("name"): s.get("resourceClaimName") for s in statuses}
    problems: list[str] = []
    changed = False
    for pgc in spec.get("resourceClaims") or []:
        tmpl = pgc.get("resourceClaimTemplateName")
        if not tmpl or pgc.get("name") in known:
            continue
        try:
            template = await api.get("ResourceClaimTemplate", ns, tmpl)
        except NotFound:
            problems.append(f"PodGroup {ns}/{name}: resource claim template {tmpl!r} not found")
            continue
        owner = {"apiVersion": str(podgroup.get("apiVersion") or "scheduling.k8s.io/v1beta1"), "kind": "PodGroup",
                 "name": name, "uid": uid, "controller": True}
        created = await api.create("ResourceClaim", claim_from_template(template, ns, name, pgc["name"], owner))
        statuses.append({"name": pgc["name"], "resourceClaimName": created["metadata"]["name"]})
        known[pgc["name"]] = created["metadata"]["name"]
        changed = True
    if changed:
        await api.patch("PodGroup", ns, name, {"status": {"resourceClaimStatuses": statuses}}, subresource="status")
    for pod in members:
        await _record_podgroup_claims(api, pod, spec.get("resourceClaims") or [], known)
    for p in problems:
        log.warning("claim not created", problem=p)
    return problems


async def _record_podgroup_claims(
    api: ClusterAPI, pod: Obj, group_claims: list[Any], generated: dict[Any, Any]
) -> None:
    """The member's ``status.resourceClaimStatuses`` entries for its claims that are the PodGroup's (BindTo)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if meta.get("deletionTimestamp") or spec.get("nodeName"):
        return
    statuses: list[dict[str, Any]] = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
    have = {s.get("name") for s in statuses}
    changed = False
    for pc in spec.get("resourceClaims") or []:
        tmpl = pc.get("resourceClaimTemplateName")
        if not tmpl or pc.get("name") in have:
            continue
        for gc in group_claims:
            if (
                gc.get("name") == pc.get("name")
                and gc.get("resourceClaimTemplateName") == tmpl
                and gc.get("resourceClaimName") == pc.get("resourceClaimName")
                and generated.get(gc.get("name"))
            ):
                statuses.append({"name": pc["name"], "resourceClaimName": generated[gc["name"]]})
                changed = True
                break
    if changed:
        await api.patch(
            "Pod",
            meta.get("namespace", "default"),
            meta["name"],
            {"status": {"resourceClaimStatuses": statuses}},
            subresource="status",
        )
