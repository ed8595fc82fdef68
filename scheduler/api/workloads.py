"""Services, workload controllers, PriorityClasses and PodDisruptionBudgets, as the scheduler reads them.

Services, ReplicationControllers, ReplicaSets and StatefulSets matter to the scheduler only through their
selectors: kube-scheduler's ``helper.DefaultSelector`` (``pkg/scheduler/framework/plugins/helper/spread.go``,
v1.37.2) builds the selector of PodTopologySpread's default constraints from the Services selecting a pod
and the controller owning it. The typed values below keep exactly that (namespace, name, selector) plus the
raw object.

* Service and ReplicationController: ``spec.selector`` is a plain label map. ``None`` when absent: a Service
  with a nil selector selects nothing (``GetPodServices`` skips it), not everything.
* ReplicaSet and StatefulSet: ``spec.selector`` is a metav1.LabelSelector. Upstream converts it with
  ``LabelSelectorAsSelector`` and adds its requirements only when that succeeds and the selector is not nil;
  ``selector`` is therefore ``None`` when it is absent or invalid (the object itself is still cached:
  upstream's lister holds it too).

PodDisruptionBudget (``policy/v1``): what preemption reads (``pkg/scheduler/framework/preemption/util.go``
``FilterVictimsWithPDBViolation``): the namespace, the selector, ``status.disruptionsAllowed`` and
``status.disruptedPods``. A nil, empty or invalid selector matches no pod there (unlike the disruption
controller, for which ``{}`` selects every pod of the namespace); a pod without labels matches no PDB.
:func:`pdb_status` is what the disruption controller (``pkg/controller/disruption/disruption.go``) writes,
for ``simulate`` inputs without a status.

The PriorityClass converter is still a placeholder returning the raw dict (``simulate`` resolves priorities
at admission).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.labelselector import LabelSelector, selector_from
from scheduler.api.model import ModelError, meta_from

Raw = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    selector: Mapping[str, str] | None  # None: no selector, selects no pod
    raw: Raw = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ReplicationController:
    namespace: str
    name: str
    selector: Mapping[str, str] | None
    raw: Raw = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    namespace: str
    name: str
    selector: LabelSelector | None  # None: absent or not convertible (contributes nothing)
    raw: Raw = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class StatefulSet:
    namespace: str
    name: str
    selector: LabelSelector | None
    raw: Raw = field(repr=False, compare=False)


def _spec(raw: Raw) -> Raw:
    spec = raw.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _label_map(raw: Raw, path: str) -> Mapping[str, str] | None:
    sel = _spec(raw).get("selector")
    if sel is None:
        return None
    if not isinstance(sel, Mapping):
        raise ModelError(path, "must be a map of label keys to values")
    out: dict[str, str] = {}
    for k, v in sel.items():
        if v is None:  # Go's JSON decoding: a null map[string]string value is ""
            v = ""
        if not isinstance(v, str):
            raise ModelError(f"{path}.{k}", "must be a string")
        out[str(k)] = v
    return out


def _label_selector(raw: Raw) -> LabelSelector | None:
    sel = _spec(raw).get("selector")
    if sel is None:
        return None
    try:
        return selector_from(sel, "spec.selector")
    except ModelError:
        return None


def service_from(raw: Raw) -> Service:
    m = meta_from(raw)
    return Service(m.namespace, m.name, _label_map(raw, "spec.selector"), raw)


def replicationcontroller_from(raw: Raw) -> ReplicationController:
    m = meta_from(raw)
    return ReplicationController(m.namespace, m.name, _label_map(raw, "spec.selector"), raw)


def replicaset_from(raw: Raw) -> ReplicaSet:
    m = meta_from(raw)
    return ReplicaSet(m.namespace, m.name, _label_selector(raw), raw)


def statefulset_from(raw: Raw) -> StatefulSet:
    m = meta_from(raw)
    return StatefulSet(m.namespace, m.name, _label_selector(raw), raw)


def priorityclass_from(raw: Raw) -> Any:
    return raw


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None  # None: nil or not convertible (matches no pod)
    disruptions_allowed: int
    disrupted_pods: frozenset[str]  # pod names whose eviction the API server already processed
    raw: Raw = field(repr=False, compare=False)

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether preemption counts a pod with these labels against this budget."""
        if namespace != self.namespace or not labels:
            return False
        sel = self.selector
        return sel is not None and not sel.is_empty and sel.matches(labels)


def pdb_from(raw: Raw) -> PodDisruptionBudget:
    m = meta_from(raw)
    status = raw.get("status")
    status = status if isinstance(status, Mapping) else {}
    allowed = status.get("disruptionsAllowed")
    disrupted = status.get("disruptedPods")
    return PodDisruptionBudget(
        m.namespace,
        m.name,
        _label_selector(raw),
        allowed if isinstance(allowed, int) and not isinstance(allowed, bool) else 0,
        frozenset(str(k) for k in disrupted) if isinstance(disrupted, Mapping) else frozenset(),
        raw,
    )


def _scaled(v: Any, total: int, path: str) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)``."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and v.endswith("%"):
        try:
            pct = int(v[:-1])
        except ValueError:
            raise ModelError(path, f"invalid value for IntOrString: invalid value {v!r}") from None
        return -(-pct * total // 100)
    raise ModelError(path, f"invalid value for IntOrString: invalid type: string is not a percentage: {v!r}")


def pdb_status(raw: Raw, pods: Sequence[Raw]) -> dict[str, Any]:
    """The status the disruption controller computes for ``raw`` given the namespace's ``pods`` (raw dicts).

    ``getPodsForPdb``: the pods of the PDB's namespace its selector matches (``{}`` = all, nil = none);
    ``getExpectedPodCount``: integer ``minAvailable`` → desired = minAvailable, expected = matching pods;
    a percentage, or ``maxUnavailable`` (integer or percentage, desired = expected - maxUnavailable, at
    least 0), scale the count of pods (upstream: the sum of the scales of the pods' controllers; offline the
    matching pods stand for it), percentages rounded up; ``countHealthyPods``: pods not being deleted and
    ready, where offline a pod bound to a node counts as ready unless its Ready condition says otherwise;
    ``disruptionsAllowed`` = healthy - desired, 0 when negative or nothing is expected."""
    m = meta_from(raw)
    spec = _spec(raw)
    sel_raw = spec.get("selector")
    selector = None if sel_raw is None else selector_from(sel_raw, "spec.selector")
    matching = [
        p
        for p in pods
        if (p.get("metadata") or {}).get("namespace", "default") == (m.namespace or "default")
        and selector is not None
        and selector.matches((p.get("metadata") or {}).get("labels") or {})
    ]
    expected = len(matching)
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, "spec.maxUnavailable"))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, "spec.minAvailable")
    else:
        desired = 0

    def healthy(p: Raw) -> bool:
        if (p.get("metadata") or {}).get("deletionTimestamp"):
            return False
        st = p.get("status") or {}
        if st.get("phase") in ("Succeeded", "Failed") or not (p.get("spec") or {}).get("nodeName"):
            return False
        ready = [c for c in st.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == "Ready"]
        return not ready or ready[0].get("status") == "True"

    current = sum(1 for p in matching if healthy(p))
    allowed = current - desired
    if expected <= 0 or allowed < 0:
        allowed = 0
    return {
        "observedGeneration": (raw.get("metadata") or {}).get("generation", 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
