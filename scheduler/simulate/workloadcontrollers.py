"""The pods kube-controller-manager would create for a Deployment or a Job, for ``simulate``.

Articles and READMEs show GPU workloads as Deployments and Jobs, and ``kubectl apply`` of one gives pods that
the scheduler sees. ``simulate`` reads the same YAML, so it does what the controllers would do before the
scheduler runs (as it already does for claim templates and priorities), with deterministic names:

* ``apps/v1`` Deployment: the deployment controller creates a ReplicaSet named ``<deployment>-<pod-template-hash>``
  (``pkg/controller/deployment/sync.go`` getNewReplicaSet; the hash is ``controller.ComputeHash`` of the pod
  template, a label ``pod-template-hash`` on the ReplicaSet, its selector and its pods), owned by the Deployment;
  the replicaset controller creates ``spec.replicas`` (default 1) pods from the template, ``generateName``
  ``<replicaset>-`` plus five random characters (``pkg/controller/replicaset`` manageReplicas,
  ``controller.GetPodFromTemplate``), owned by the ReplicaSet, in the Deployment's namespace.
* ``batch/v1`` Job (without ``spec.scheduling``, which ``simulate`` still skips): ``min(parallelism,
  completions)`` pods (``parallelism`` default 1; ``completions`` unset means ``parallelism``;
  ``pkg/controller/job/job_controller.go`` manageJob), ``generateName`` ``<job>-``, labels
  ``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name``, ``controller-uid``, ``job-name``
  (``pkg/registry/batch/job/strategy.go`` generateSelector), owned by the Job; Indexed completion mode adds
  ``batch.kubernetes.io/job-completion-index`` (label and annotation) and names ``<job>-<index>-``.
  ``spec.suspend: true`` creates no pod.

As the controllers, only the missing pods are created: pods already in the input that the selector matches in
the same namespace (e.g. ``kubectl get deploy,pods -o yaml`` output) count as replicas. Hashes and random
suffixes are replaced by digests of the object's name, so a run is reproducible (ARCHITECTURE.md §3.2).
Pure: dicts in, dicts out.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from scheduler.api.labelselector import selector_from, selector_from_map

__all__ = ["CONTROLLED", "pods_for"]

# (apiVersion, kind) of the objects whose pods are created here.
CONTROLLED = {("apps/v1", "Deployment"), ("batch/v1", "Job")}

# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated names ("no vowels, no 0/1/3").
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_UID_NS = uuid.UUID("6f1c9a52-5f0e-4b8e-9d7e-3b1e0c2f7a11")


def _chars(seed: str, n: int) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in digest[:n])


def _uid(obj: Mapping[str, Any], kind: str, ns: str, name: str) -> str:
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if isinstance(uid, str) and uid else str(uuid.uuid5(_UID_NS, f"{kind}/{ns}/{name}"))


def _owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(
    template: Mapping[str, Any],
    ns: str,
    name: str,
    labels: Mapping[str, str],
    owner: dict[str, Any],
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``controller.GetPodFromTemplate``: the template's labels, annotations and spec, a controller owner."""
    tmeta = template.get("metadata") or {}
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels), "ownerReferences": [owner]}
    ann = {**(tmeta.get("annotations") or {}), **(annotations or {})}
    if ann:
        meta["annotations"] = ann
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


def _existing(pods: Iterable[Mapping[str, Any]], ns: str, selector: Any) -> int:
    return sum(
        1
        for p in pods
        if ((p.get("metadata") or {}).get("namespace") or "default") == ns
        and selector.matches((p.get("metadata") or {}).get("labels") or {})
    )


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default


def pods_for(obj: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The objects the controllers would create for ``obj`` (a Deployment: its ReplicaSet first, then pods;
    a Job: pods), given the ``pods`` already present. Raises ``ValueError`` naming the field when the object
    is not one the API server would take (no template, a selector that does not match the template's labels)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    name, ns = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
    template = spec.get("template")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise ValueError("spec.template.spec: Required value")
    tlabels = {str(k): str(v) for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()}
    c = _Controlled(obj, name, ns, spec, template, tlabels)
    return _deployment(c, pods) if obj.get("kind") == "Deployment" else _job(c, pods)


class _Controlled(NamedTuple):
    """A Deployment or Job as its controller reads it: the object, its name and namespace, spec, pod template and
    the template's labels."""

    obj: Mapping[str, Any]
    name: str
    ns: str
    spec: Mapping[str, Any]
    template: Mapping[str, Any]
    tlabels: dict[str, str]


def _deployment(c: _Controlled, pods: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    obj, name, ns, spec, template, tlabels = c
    # ValidateDeploymentSpec: a selector is required (apps/v1) and must match the template's labels.
    try:
        selector = selector_from(spec.get("selector"), "spec.selector")
    except Exception as e:
        raise ValueError(str(e)) from None
    if spec.get("selector") is None:
        raise ValueError("spec.selector: Required value")
    if selector.is_empty or not selector.matches(tlabels):
        raise ValueError("spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`")
    replicas = _int(spec.get("replicas"), 1)
    want = max(0, replicas - _existing(pods, ns, selector))
    if want == 0:
        return []
    h = _chars(json.dumps(template, sort_keys=True, default=str), 10)
    rs_name = f"{name}-{h}"[:253]
    uid = _uid(obj, "Deployment", ns, name)
    rs_uid = str(uuid.uuid5(_UID_NS, f"ReplicaSet/{ns}/{rs_name}"))
    labels = {**tlabels, "pod-template-hash": h}
    rs_template = {"metadata": {**(template.get("metadata") or {}), "labels": labels}, "spec": template["spec"]}
    rs_selector = copy.deepcopy(spec["selector"])
    rs_selector.setdefault("matchLabels", {})["pod-template-hash"] = h
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": rs_name,
            "namespace": ns,
            "uid": rs_uid,
            "labels": labels,
            "ownerReferences": [_owner("apps/v1", "Deployment", name, uid)],
        },
        "spec": {"replicas": replicas, "selector": rs_selector, "template": copy.deepcopy(rs_template)},
    }
    owner = _owner("apps/v1", "ReplicaSet", rs_name, rs_uid)
    out: list[dict[str, Any]] = [rs]
    for i in range(want):
        out.append(_pod(template, ns, f"{rs_name}-{_chars(f'{ns}/{rs_name}/{i}', 5)}"[:253], labels, owner))
    return out


def _job(c: _Controlled, pods: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    obj, name, ns, spec, template, tlabels = c
    if spec.get("suspend") is True:
        return []
    parallelism = _int(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    n = min(parallelism, _int(completions, parallelism)) if completions is not None else parallelism
    uid = _uid(obj, "Job", ns, name)
    labels = {
        **tlabels,
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    want = max(0, n - _existing(pods, ns, selector_from_map({"batch.kubernetes.io/job-name": name})))
    owner = _owner("batch/v1", "Job", name, uid)
    indexed = spec.get("completionMode") == "Indexed"
    out: list[dict[str, Any]] = []
    for i in range(want):
        if indexed:
            idx = {"batch.kubernetes.io/job-completion-index": str(i)}
            out.append(
                _pod(template, ns, f"{name}-{i}-{_chars(f'{ns}/{name}/{i}', 5)}"[:253], {**labels, **idx}, owner, idx)
            )
        else:
            out.append(_pod(template, ns, f"{name}-{_chars(f'{ns}/{name}/{i}', 5)}"[:253], labels, owner))
    return out
