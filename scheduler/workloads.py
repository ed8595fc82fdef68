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

PriorityClass and PodDisruptionBudget converters are still placeholders returning the raw dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.labelselector import LabelSelector, selector_from
from scheduler.model import ModelError, meta_from

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


def pdb_from(raw: Raw) -> Any:
    return raw
