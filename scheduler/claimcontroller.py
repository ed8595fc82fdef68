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

from scheduler.api import ClusterAPI, NotFound, Obj
from scheduler.model import POD_CLAIM_NAME_ANNOTATION

log = structlog.get_logger("dra_scheduler.claimcontroller")
MAX_BASE_LEN = 57


def generate_name(pod: str, claim: str) -> str:
    base = f"{pod}-{claim}"
    if len(base) > MAX_BASE_LEN:
        base = pod[: len(pod) * MAX_BASE_LEN // len(base)] + "-" + claim[: len(claim) * MAX_BASE_LEN // len(base)]
    return base + "-"


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
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        claim: Obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": generate_name(name, pc["name"]),
                "namespace": ns,
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: pc["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": name,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
        }
        created = await api.create("ResourceClaim", claim)
        statuses.append({"name": pc["name"], "resourceClaimName": created["metadata"]["name"]})
        changed = True
    if changed:
        await api.patch("Pod", ns, name, {"status": {"resourceClaimStatuses": statuses}}, subresource="status")
    for p in problems:
        log.warning("claim not created", problem=p)
    return problems
