"""Kubernetes 1.37 workload-aware scheduling API: ``scheduling.k8s.io/v1beta1`` Workload and PodGroup,
``scheduling.k8s.io/v1alpha3`` CompositePodGroup (field names of ``k8s.io/api`` v0.37.2 ``scheduling/v1beta1`` and
``scheduling/v1alpha3`` ``types.go``).

What lives here (pure, no I/O):

* typed views: :class:`CompositePodGroup` and :class:`Workload` (converters for the cache's generic object
  store, ``scheduler/api/objects.py``); the v1beta1 PodGroup itself is :class:`scheduler.api.model.PodGroup`;
* validation as the API server does it, with its field paths and messages, so ``simulate`` refuses what the API
  server refuses: the declarative rules of ``pkg/apis/scheduling/v1beta1|v1alpha3/zz_generated.validations.go``
  that matter here (``schedulingPolicy`` is a union of ``basic``/``gang``, ``gang.minCount`` ≥ 1,
  ``schedulingConstraints.topology`` at most 1 item, ``resourceClaims`` at most 4 with unique names and exactly
  one of ``resourceClaimName``/``resourceClaimTemplateName``, CompositePodGroup ``spec.workloadRef`` required,
  ``minGroupCount`` ≥ 1) and the hand-written ones of ``pkg/apis/scheduling/validation/validation.go``
  (``ValidatePodGroup``: ``spec.workloadRef`` "must be set when parentCompositePodGroupName is set";
  ``ValidateWorkloadSpec``: unique template names, depth ≤ 4, one priority, a composite template has children);
* the group hierarchy (``parentCompositePodGroupName`` links, as kube-scheduler's PodGroupManager
  ``GetRootKeyForGroup``: a cycle or a depth beyond ``WorkloadMaxTreeDepth`` is an invalid layout);
* PodGroup status conditions (``PodGroupInitiallyScheduled``, ``DisruptionTarget``) with
  ``apimeta.SetStatusCondition`` semantics: ``lastTransitionTime`` changes only when the status does;
* ``BindTo`` / ``IsReservedForPod`` of ``k8s.io/dynamic-resource-allocation/resourceclaim`` v0.37.2: which object a
  pod's claim is reserved for (the pod, or its PodGroup when the pod's claim matches one of the PodGroup's
  ``resourceClaims`` exactly).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.dra import ResourceClaim
from scheduler.api.model import Meta, ModelError, Pod, PodGroup, meta_from

GROUP = "scheduling.k8s.io"
V1BETA1 = "scheduling.k8s.io/v1beta1"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"

# PodGroupStatus condition types and reasons (scheduling/v1beta1 types.go)
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_SCHEDULED = "Scheduled"  # what kube-scheduler writes with status True (schedule_one_podgroup.go)
REASON_PREEMPTION = "PreemptionByScheduler"

MAX_TREE_DEPTH = 4  # WorkloadMaxTreeDepth
MAX_TEMPLATES = 8  # WorkloadMaxPodGroupTemplates
MAX_PODGROUP_CLAIMS = 4  # MaxPodGroupResourceClaims
CONSUMER_PODGROUPS = "podgroups"

Raw = Mapping[str, Any]


# --- typed views ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompositePodGroup:
    """``scheduling.k8s.io/v1alpha3`` CompositePodGroup: ``spec.schedulingPolicy.gang.minGroupCount`` child groups
    (PodGroups and CompositePodGroups naming it in ``parentCompositePodGroupName``) admitted together, or none;
    ``basic`` (min_group_count None): children admitted independently (kube-scheduler's getMinCount: 1)."""

    meta: Meta
    parent: str
    min_group_count: int | None
    topology_key: str
    disruption_all: bool
    raw: Raw = field(repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.meta.key


@dataclass(frozen=True, slots=True)
class PodGroupTemplate:
    name: str
    policy: str  # "gang" | "basic"
    min_count: int


@dataclass(frozen=True, slots=True)
class Workload:
    """``scheduling.k8s.io/v1beta1`` Workload: ``spec.controllerRef`` (e.g. the Job) and the templates its
    PodGroups are made from (``spec.podGroupTemplates``; PodGroups point back with ``spec.workloadRef``)."""

    meta: Meta
    controller_ref: tuple[str, str, str] | None  # (apiGroup, kind, name)
    templates: tuple[PodGroupTemplate, ...]
    raw: Raw = field(repr=False, compare=False)


def _m(obj: Any, key: str) -> Mapping[str, Any]:
    v = obj.get(key) if isinstance(obj, Mapping) else None
    return v if isinstance(v, Mapping) else {}


def _l(obj: Any, key: str) -> list[Any]:
    v = obj.get(key) if isinstance(obj, Mapping) else None
    return v if isinstance(v, list) else []


def _s(obj: Any, key: str) -> str:
    v = obj.get(key) if isinstance(obj, Mapping) else None
    return v if isinstance(v, str) else ""


def composite_from(raw: Raw) -> CompositePodGroup:
    spec = _m(raw, "spec")
    gang = _m(spec, "schedulingPolicy").get("gang")
    mgc = gang.get("minGroupCount") if isinstance(gang, Mapping) else None
    topology = [t for t in _l(_m(spec, "schedulingConstraints"), "topology") if isinstance(t, Mapping)]
    if isinstance(gang, Mapping) and (not isinstance(mgc, int) or isinstance(mgc, bool)):
        raise ModelError("spec.schedulingPolicy.gang.minGroupCount", "required integer")
    return CompositePodGroup(
        meta=meta_from(raw),
        parent=_s(spec, "parentCompositePodGroupName"),
        min_group_count=mgc if isinstance(gang, Mapping) else None,
        topology_key=_s(topology[0], "key") if topology else "",
        disruption_all=isinstance(_m(spec, "disruptionMode").get("all"), Mapping),
        raw=raw,
    )


def workload_from(raw: Raw) -> Workload:
    spec = _m(raw, "spec")
    ref = _m(spec, "controllerRef")
    templates = []
    for t in _l(spec, "podGroupTemplates"):
        gang = _m(t, "schedulingPolicy").get("gang")
        mc = gang.get("minCount") if isinstance(gang, Mapping) else None
        templates.append(
            PodGroupTemplate(
                _s(t, "name"),
                "gang" if isinstance(gang, Mapping) else "basic",
                mc if isinstance(mc, int) and not isinstance(mc, bool) else 1,
            )
        )
    return Workload(
        meta=meta_from(raw),
        controller_ref=(_s(ref, "apiGroup"), _s(ref, "kind"), _s(ref, "name")) if ref else None,
        templates=tuple(templates),
        raw=raw,
    )


def scheduling_group(pod: Pod) -> str:
    """``spec.schedulingGroup.podGroupName`` (the v1beta1 membership; the x-k8s label is not one)."""
    return _s(_m(_m(pod.raw, "spec"), "schedulingGroup"), "podGroupName")


# --- validation (the API server's, same field paths and messages) -----------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _q(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(v)


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_q(value)}: {detail}"


def _required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def _too_many(path: str, n: int, limit: int) -> str:
    return f"{path}: Too many: {n}: must have at most {limit} item{'s' if limit != 1 else ''}"


def _short_name(path: str, v: Any) -> list[str]:
    if not isinstance(v, str) or not v:
        return [_required(path)]
    if len(v) > 63 or not _DNS_LABEL.match(v):
        return [
            _invalid(
                path,
                v,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            )
        ]
    return []


def _long_name(path: str, v: Any) -> list[str]:
    if not isinstance(v, str) or not v:
        return [_required(path)]
    if len(v) > 253 or not _DNS_SUBDOMAIN.match(v):
        return [
            _invalid(
                path,
                v,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        ]
    return []


def _union(path: str, obj: Mapping[str, Any], members: Sequence[str]) -> list[str]:
    """``validate.Union``: exactly one member set."""
    names = ", ".join(f"`{m}`" for m in members)
    chosen = [m for m in members if obj.get(m) is not None]
    if not chosen:
        return [_invalid(path, "", f"must specify one of: {names}")]
    if len(chosen) > 1:
        return [_invalid(path, "{" + ", ".join(chosen) + "}", f"must specify exactly one of: {names}")]
    return []


def _minimum(path: str, v: Any, low: int) -> list[str]:
    if v is None:
        return [_required(path)]
    if isinstance(v, int) and not isinstance(v, bool) and v < low:
        return [_invalid(path, v, f"must be greater than or equal to {low}")]
    return []


def _topology(path: str, constraints: Any) -> list[str]:
    topo = _l(constraints, "topology")
    if len(topo) > 1:
        return [_too_many(f"{path}.topology", len(topo), 1)]
    errs: list[str] = []
    for i, t in enumerate(topo):
        key = _s(t, "key")
        if not key:
            errs.append(_required(f"{path}.topology[{i}].key"))
    return errs


def _policy(path: str, policy: Any, gang_field: str, low: int = 1) -> list[str]:
    pol = policy if isinstance(policy, Mapping) else {}
    errs = _union(path, pol, ("basic", "gang"))
    gang = pol.get("gang")
    if isinstance(gang, Mapping):
        errs += _minimum(f"{path}.gang.{gang_field}", gang.get(gang_field), low)
    return errs


def _claims(path: str, claims: Any) -> list[str]:
    items = claims if isinstance(claims, list) else []
    if len(items) > MAX_PODGROUP_CLAIMS:
        return [_too_many(path, len(items), MAX_PODGROUP_CLAIMS)]
    errs: list[str] = []
    seen: set[str] = set()
    for i, c in enumerate(items):
        p = f"{path}[{i}]"
        name = _s(c, "name")
        errs += _short_name(f"{p}.name", name)
        if name in seen:
            errs.append(f"{p}: Duplicate value: {{\"name\":{_q(name)}}}")
        seen.add(name)
        errs += _union(p, c if isinstance(c, Mapping) else {}, ("resourceClaimName", "resourceClaimTemplateName"))
    return errs


def _workload_ref(path: str, ref: Any) -> list[str]:
    return _long_name(f"{path}.workloadName", _s(ref, "workloadName")) + _short_name(
        f"{path}.templateName", _s(ref, "templateName")
    )


def validate_podgroup(obj: Raw) -> list[str]:
    """``ValidatePodGroup`` + the declarative rules of ``scheduling/v1beta1`` PodGroup (create)."""
    spec = _m(obj, "spec")
    errs: list[str] = []
    parent = spec.get("parentCompositePodGroupName")
    if parent is not None:
        errs += _long_name("spec.parentCompositePodGroupName", parent)
        if spec.get("workloadRef") is None:
            errs.append(_required("spec.workloadRef", "must be set when parentCompositePodGroupName is set"))
    if spec.get("workloadRef") is not None:
        errs += _workload_ref("spec.workloadRef", spec.get("workloadRef"))
    errs += _policy("spec.schedulingPolicy", spec.get("schedulingPolicy"), "minCount")
    if spec.get("schedulingConstraints") is not None:
        errs += _topology("spec.schedulingConstraints", spec.get("schedulingConstraints"))
    if spec.get("resourceClaims") is not None:
        errs += _claims("spec.resourceClaims", spec.get("resourceClaims"))
    dm = spec.get("disruptionMode")
    if dm is not None:
        errs += _union("spec.disruptionMode", dm if isinstance(dm, Mapping) else {}, ("single", "all"))
    return errs


def validate_composite(obj: Raw) -> list[str]:
    """The declarative rules of ``scheduling/v1alpha3`` CompositePodGroup (create): ``spec.workloadRef`` is required
    (``+k8s:required``), the policy is a ``basic``/``gang`` union and ``gang.minGroupCount`` ≥ 1."""
    spec = _m(obj, "spec")
    errs: list[str] = []
    if spec.get("parentCompositePodGroupName") is not None:
        errs += _long_name("spec.parentCompositePodGroupName", spec.get("parentCompositePodGroupName"))
    if spec.get("workloadRef") is None:
        errs.append(_required("spec.workloadRef"))
    else:
        errs += _workload_ref("spec.workloadRef", spec.get("workloadRef"))
    errs += _policy("spec.schedulingPolicy", spec.get("schedulingPolicy"), "minGroupCount")
    if spec.get("schedulingConstraints") is not None:
        errs += _topology("spec.schedulingConstraints", spec.get("schedulingConstraints"))
    return errs


def validate_workload(obj: Raw) -> list[str]:
    """``ValidateWorkloadSpec`` plus the declarative rules of ``scheduling/v1beta1`` Workload that matter here."""
    spec = _m(obj, "spec")
    errs: list[str] = []
    pgts, cpgts = _l(spec, "podGroupTemplates"), _l(spec, "compositePodGroupTemplates")
    if not pgts and not cpgts:
        errs.append(_invalid("spec", "", "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"))
    elif pgts and cpgts:
        errs.append(
            _invalid(
                "spec",
                "{podGroupTemplates, compositePodGroupTemplates}",
                "must specify exactly one of: `podGroupTemplates`, `compositePodGroupTemplates`",
            )
        )
    if len(pgts) > MAX_TEMPLATES:
        errs.append(_too_many("spec.podGroupTemplates", len(pgts), MAX_TEMPLATES))
    if len(cpgts) > MAX_TEMPLATES:
        errs.append(_too_many("spec.compositePodGroupTemplates", len(cpgts), MAX_TEMPLATES))
    for i, t in enumerate(pgts):
        p = f"spec.podGroupTemplates[{i}]"
        errs += _short_name(f"{p}.name", _s(t, "name"))
        errs += _policy(f"{p}.schedulingPolicy", _m(t, "schedulingPolicy") if t else None, "minCount")
        if _m(t, "schedulingConstraints"):
            errs += _topology(f"{p}.schedulingConstraints", _m(t, "schedulingConstraints"))
    # validateWorkloadTemplateNamesUniqueness (also across the composite tree)
    names: set[str] = set()
    for i, t in enumerate(pgts):
        n = _s(t, "name")
        if n in names:
            errs.append(f"spec.podGroupTemplates[{i}].name: Duplicate value: {_q(n)}")
        names.add(n)
    errs += _composite_template_names("spec", cpgts, names)
    # validateWorkloadTemplatesDepth
    for i, c in enumerate(cpgts):
        if _depth(c) > MAX_TREE_DEPTH:
            errs.append(
                f"spec.compositePodGroupTemplates[{i}]: Invalid value: ...: maximum template hierarchy depth is "
                f"{MAX_TREE_DEPTH}"
            )
    # validateWorkloadPriority
    prios: list[tuple[str, Any]] = [
        (_s(t, "priorityClassName"), t.get("priority")) for t in pgts if isinstance(t, Mapping)
    ]
    _collect_priorities(cpgts, prios)
    if len(set(prios)) > 1:
        detail = (
            "detected multiple priority configurations"
            if not cpgts
            else "all priority and priorityClassName values must be identical, detected multiple values"
        )
        errs.append(f"spec: Invalid value: null: {detail}")
    for i, c in enumerate(cpgts):
        errs += _has_child(f"spec.compositePodGroupTemplates[{i}]", c)
    return errs


def _composite_template_names(path: str, templates: list[Any], names: set[str]) -> list[str]:
    errs: list[str] = []
    listed: set[str] = set()
    for i, c in enumerate(templates):
        n = _s(c, "name")
        if n in names:
            errs.append(f"{path}.compositePodGroupTemplates[{i}].name: Duplicate value: {_q(n)}")
        listed.add(n)
    names |= listed
    for i, c in enumerate(templates):
        p = f"{path}.compositePodGroupTemplates[{i}]"
        sub: set[str] = set()
        for j, child in enumerate(_l(c, "podGroupTemplates")):
            n = _s(child, "name")
            if n in names:
                errs.append(f"{p}.podGroupTemplates[{j}].name: Duplicate value: {_q(n)}")
            sub.add(n)
        names |= sub
        errs += _composite_template_names(p, _l(c, "compositePodGroupTemplates"), names)
    return errs


def _depth(c: Any) -> int:
    return 1 + max((_depth(x) for x in _l(c, "compositePodGroupTemplates")), default=0)


def _collect_priorities(templates: list[Any], out: list[tuple[str, Any]]) -> None:
    for c in templates:
        if not isinstance(c, Mapping):
            continue
        out.append((_s(c, "priorityClassName"), c.get("priority")))
        _collect_priorities(_l(c, "compositePodGroupTemplates"), out)
        for t in _l(c, "podGroupTemplates"):
            if isinstance(t, Mapping):
                out.append((_s(t, "priorityClassName"), t.get("priority")))


def _has_child(path: str, c: Any) -> list[str]:
    errs: list[str] = []
    if not _l(c, "podGroupTemplates") and not _l(c, "compositePodGroupTemplates"):
        errs.append(
            _invalid(path, _s(c, "name"), "must have at least one child PodGroupTemplate or CompositePodGroupTemplate")
        )
    for i, child in enumerate(_l(c, "compositePodGroupTemplates")):
        errs += _has_child(f"{path}.compositePodGroupTemplates[{i}]", child)
    return errs


VALIDATORS: dict[tuple[str, str], Callable[[Raw], list[str]]] = {
    (V1BETA1, "PodGroup"): validate_podgroup,
    (V1BETA1, "Workload"): validate_workload,
    (V1ALPHA3, "CompositePodGroup"): validate_composite,
}


def validate(obj: Raw) -> list[str]:
    """The API server's errors for a workload-API object (empty for other kinds)."""
    fn = VALIDATORS.get((_s(obj, "apiVersion"), _s(obj, "kind")))
    return fn(obj) if fn is not None else []


# --- the hierarchy --------------------------------------------------------------------------------------------------


class LayoutError(ValueError):
    """An invalid group layout found at run time (kube-scheduler's CompositePodGroupInitiallyScheduled reason
    ``Invalid``: a cycle, a depth beyond 4, a missing parent)."""


def root_of(
    namespace: str, pg: PodGroup, composites: Mapping[str, CompositePodGroup]
) -> CompositePodGroup | None:
    """The root CompositePodGroup of ``pg``'s hierarchy (None when ``pg`` has no parent). Raises LayoutError."""
    if not pg.parent:
        return None
    seen: set[str] = set()
    name = pg.parent
    node: CompositePodGroup | None = None
    while name:
        if name in seen:
            raise LayoutError(
                f"composite pod group {namespace}/{name}: the parentCompositePodGroupName links form a cycle"
            )
        seen.add(name)
        if len(seen) > MAX_TREE_DEPTH:
            raise LayoutError(
                f"pod group {namespace}/{pg.meta.name}: the group hierarchy is deeper than {MAX_TREE_DEPTH} levels"
            )
        node = composites.get(f"{namespace}/{name}")
        if node is None:
            raise LayoutError(f"composite pod group {namespace}/{name} does not exist")
        name = node.parent
    return node


def children_of(
    cpg: CompositePodGroup, podgroups: Mapping[str, PodGroup], composites: Mapping[str, CompositePodGroup]
) -> list[PodGroup | CompositePodGroup]:
    """The child PodGroups and CompositePodGroups of ``cpg`` (same namespace), in name order."""
    ns, name = cpg.meta.namespace, cpg.meta.name
    out: list[PodGroup | CompositePodGroup] = [
        pg for pg in podgroups.values() if pg.is_upstream and pg.meta.namespace == ns and pg.parent == name
    ]
    out += [c for c in composites.values() if c.meta.namespace == ns and c.parent == name]
    return sorted(out, key=lambda x: (isinstance(x, CompositePodGroup), x.meta.name))


def leaves_of(
    cpg: CompositePodGroup, podgroups: Mapping[str, PodGroup], composites: Mapping[str, CompositePodGroup]
) -> list[PodGroup]:
    out: list[PodGroup] = []
    for c in children_of(cpg, podgroups, composites):
        if isinstance(c, CompositePodGroup):
            out += leaves_of(c, podgroups, composites)
        else:
            out.append(c)
    return out


def min_groups(cpg: CompositePodGroup) -> int:
    """kube-scheduler's getMinCount for a CompositePodGroup: minGroupCount for gang, 1 for basic."""
    return cpg.min_group_count if cpg.min_group_count is not None else 1


# --- status conditions (metav1.Condition, apimeta.SetStatusCondition) ----------------------------------------------


def set_condition(
    conditions: Sequence[Mapping[str, Any]], cond: Mapping[str, Any], now: str
) -> tuple[list[dict[str, Any]], bool]:
    """``apimeta.SetStatusCondition``: add or update the condition of ``cond['type']``; ``lastTransitionTime``
    is ``now`` for a new condition or a changed status, else kept. Returns (conditions, changed)."""
    out = [dict(c) for c in conditions if isinstance(c, Mapping)]
    for c in out:
        if c.get("type") != cond["type"]:
            continue
        changed = False
        if c.get("status") != cond["status"]:
            c["status"] = cond["status"]
            c["lastTransitionTime"] = now
            changed = True
        for k in ("reason", "message", "observedGeneration"):
            if k in cond and c.get(k) != cond[k]:
                c[k] = cond[k]
                changed = True
        return out, changed
    new = dict(cond)
    new.setdefault("lastTransitionTime", now)
    out.append(new)
    return out, True


def find_condition(conditions: Any, ctype: str) -> Mapping[str, Any] | None:
    for c in conditions if isinstance(conditions, list) else []:
        if isinstance(c, Mapping) and c.get("type") == ctype:
            return c
    return None


def podgroup_conditions(
    pg: PodGroup, scheduled: bool | None, reason: str, message: str, disruption: str, now: str
) -> tuple[list[dict[str, Any]], bool]:
    """The v1beta1 PodGroup's ``status.conditions`` after a scheduling attempt (``scheduled``: True placed, False
    waiting with ``reason`` Unschedulable/SchedulerError, None nothing to say) and, when ``disruption`` is set,
    ``DisruptionTarget=True`` (reason PreemptionByScheduler). As kube-scheduler's updatePodGroupCondition, an
    ``PodGroupInitiallyScheduled`` that is True never goes back to False (a terminal state)."""
    current = _l(_m(pg.raw, "status"), "conditions")
    conds: list[dict[str, Any]] = [dict(c) for c in current if isinstance(c, Mapping)]
    changed = False
    if scheduled is not None:
        existing = find_condition(conds, INITIALLY_SCHEDULED)
        if not (existing is not None and existing.get("status") == "True" and not scheduled):
            cond = {
                "type": INITIALLY_SCHEDULED,
                "status": "True" if scheduled else "False",
                "reason": REASON_SCHEDULED if scheduled else (reason or REASON_UNSCHEDULABLE),
                "message": message,
                "observedGeneration": pg.meta.generation,
            }
            conds, changed = set_condition(conds, cond, now)
    if disruption:
        cond = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": REASON_PREEMPTION,
            "message": disruption,
            "observedGeneration": pg.meta.generation,
        }
        conds, ch = set_condition(conds, cond, now)
        changed = changed or ch
    return conds, changed


# --- which object a claim is reserved for (k8s.io/dynamic-resource-allocation/resourceclaim v0.37.2) -------------


def podgroup_claim_match(pod: Pod, pg: PodGroup | None, claim_ref_name: str) -> bool:
    """``BindTo``'s test: the pod belongs to ``pg`` (``spec.schedulingGroup.podGroupName``) and its claim named
    ``claim_ref_name`` matches one of the PodGroup's ``resourceClaims`` exactly (name, resourceClaimName,
    resourceClaimTemplateName)."""
    if pg is None or not pg.is_upstream or scheduling_group(pod) != pg.meta.name or pod.namespace != pg.meta.namespace:
        return False
    pcs = [pc for pc in pod.claims if pc.name == claim_ref_name]
    if not pcs:
        return False
    pc = pcs[0]
    return any(
        c.name == pc.name and c.claim_name == pc.claim_name and c.template_name == pc.template_name for c in pg.claims
    )


def consumer_for(pod: Pod, pg: PodGroup | None, claim_ref_name: str) -> dict[str, str]:
    """``BindTo``: the ``status.reservedFor`` entry for the pod's claim ``claim_ref_name``: its PodGroup
    (``apiGroup: scheduling.k8s.io, resource: podgroups``) when the claim is a PodGroup claim, else the pod."""
    if pg is not None and podgroup_claim_match(pod, pg, claim_ref_name):
        return {"apiGroup": GROUP, "resource": CONSUMER_PODGROUPS, "name": pg.meta.name, "uid": pg.meta.uid}
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def is_reserved_for_pod(pod: Pod, claim: ResourceClaim) -> bool:
    """``IsReservedForPod`` with PodGroup reservations accepted (DRAWorkloadResourceClaims): the pod's UID, or its
    PodGroup by API group, resource and name (a pod does not know its PodGroup's UID)."""
    group = scheduling_group(pod)
    for r in claim.reserved_for:
        if r.uid == pod.uid:
            return True
        if group and r.api_group == GROUP and r.resource == CONSUMER_PODGROUPS and r.name == group:
            return True
    return False


def is_for_pod_group_by_pod(pod: Pod, claim: ResourceClaim) -> bool:
    """``isForPodGroupByPod``: the claim's controller is the pod's PodGroup (name, kind, API group; not the UID)."""
    group = scheduling_group(pod)
    owner = claim.meta.controller()
    return (
        bool(group)
        and owner is not None
        and owner.name == group
        and owner.kind == "PodGroup"
        and owner.api_version.startswith(GROUP + "/")
    )
