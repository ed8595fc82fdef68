"""DeviceTaintRule (resource.k8s.io/v1 since Kubernetes 1.37; KEP-5055, feature gate DRADeviceTaintRules,
GA and on by default in 1.37): taints put on devices by an administrator instead of the DRA driver.

API (``k8s.io/api`` v0.37.2 ``resource/v1/types.go``, cluster-scoped)::

    spec:
      deviceSelector:      # *DeviceTaintSelector: all set fields must match; {} = every device; absent = none
        driver: gpu.example.com    # slice.spec.driver
        pool: node-1               # slice.spec.pool.name (any generation)
        device: gpu-0              # slice.spec.devices[].name
      taint: {key, value, effect: None|NoSchedule|NoExecute, timeAdded}
    status:
      conditions: [metav1.Condition]   # type EvictionInProgress, <= 8 (DeviceTaintRuleStatusMaxConditions)

``deviceSelector.deviceClassName`` and ``.selectors`` are tombstoned since 1.35 and ignored here.

How kube-scheduler 1.37.2 uses them: the scheduler does not read rules itself; the ResourceSlice tracker
(``k8s.io/dynamic-resource-allocation`` v0.37.2 ``resourceslice/tracker/tracker.go``, ``applyPatches``)
hands the allocator copies of the slices in which every device matched by a rule has the rule's taint
*appended* to its own taints (``ListWithDeviceTaintRules``, used by ``dynamicresources.go`` PreFilter). For
the allocator a rule's taint is therefore indistinguishable from a driver's: a ``NoSchedule`` or
``NoExecute`` taint that no toleration of the request tolerates makes the device unallocatable
(``taintPreventsAllocation``); ``None`` and unknown effects are informational. A rule change makes the
tracker emit ResourceSlice update events, which requeue pods waiting for devices.

Here the same happens without copying slices: :class:`TaintRules` gives the rule taints of a device by
(driver, pool, device name); the allocator's pool builder (:func:`plugins.dra.allocator.gather_pools`)
stores them beside each candidate and checks them together with the device's own taints. Rules are applied
in name order (upstream's order is the informer's, i.e. unspecified; it does not change what is allocatable).
:class:`TaintRuleTracker` turns the snapshot's rules into a :class:`TaintRules` whose ``generation`` changes
whenever what the allocator reads changes (a selector or a taint), never on status-only updates: the DRA
plugin keys its per-node caches with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.model import (
    DeviceToleration,
    Meta,
    ModelError,
    Taint,
    meta_from,
)

KIND = "DeviceTaintRule"
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})  # None and unknown effects never block
EFFECT_NONE, EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE = "None", "NoSchedule", "NoExecute"
CONDITION_EVICTION_IN_PROGRESS = "EvictionInProgress"  # DeviceTaintConditionEvictionInProgress
MAX_CONDITIONS = 8  # DeviceTaintRuleStatusMaxConditions

Raw = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DeviceTaintSelector:
    """``DeviceTaintSelector``: None for a field = any value. All set fields must match."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def matches(self, driver: str, pool: str, device: str) -> bool:
        return (
            (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or self.device == device)
        )


@dataclass(frozen=True, slots=True)
class RuleCondition:
    type: str
    status: str
    reason: str
    message: str
    observed_generation: int


@dataclass(frozen=True, slots=True, eq=False)
class DeviceTaintRule:
    meta: Meta
    selector: DeviceTaintSelector | None  # None: the rule matches no device
    taint: Taint
    time_added: str  # RFC 3339, "" when not set (the API server sets it on create)
    conditions: tuple[RuleCondition, ...]
    raw: Raw = field(repr=False)

    @property
    def name(self) -> str:
        return self.meta.name

    def applies_to(self, driver: str, pool: str, device: str) -> bool:
        return self.selector is not None and self.selector.matches(driver, pool, device)

    def condition(self, type_: str) -> RuleCondition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None


def _opt_str(raw: Raw, key: str, path: str) -> str | None:
    v = raw.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise ModelError(f"{path}.{key}", "must be a string")
    return v


def _req_str(raw: Raw, key: str, path: str) -> str:
    v = raw.get(key)
    if v is None or v == "":
        raise ModelError(f"{path}.{key}", "required")
    if not isinstance(v, str):
        raise ModelError(f"{path}.{key}", "must be a string")
    return v


def rule_from(raw: Raw) -> DeviceTaintRule:
    """Converter for ``scheduler.objects.OBJECT_KINDS``. Raises :class:`ModelError` on input the API server
    would refuse (no taint key or effect, wrong types); an unknown effect is kept (treated as ``None``)."""
    meta = meta_from(raw)
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        raise ModelError("spec", "required")
    sel_raw = spec.get("deviceSelector")
    selector: DeviceTaintSelector | None = None
    if sel_raw is not None:
        if not isinstance(sel_raw, Mapping):
            raise ModelError("spec.deviceSelector", "must be an object")
        p = "spec.deviceSelector"
        selector = DeviceTaintSelector(
            _opt_str(sel_raw, "driver", p), _opt_str(sel_raw, "pool", p), _opt_str(sel_raw, "device", p)
        )
    taint_raw = spec.get("taint")
    if not isinstance(taint_raw, Mapping):
        raise ModelError("spec.taint", "required")
    value = taint_raw.get("value") or ""
    if not isinstance(value, str):
        raise ModelError("spec.taint.value", "must be a string")
    taint = Taint(_req_str(taint_raw, "key", "spec.taint"), value, _req_str(taint_raw, "effect", "spec.taint"))
    time_added = taint_raw.get("timeAdded")
    conditions: list[RuleCondition] = []
    status = raw.get("status")
    for c in (status.get("conditions") if isinstance(status, Mapping) else None) or ():
        if not isinstance(c, Mapping):
            continue
        og = c.get("observedGeneration")
        conditions.append(
            RuleCondition(
                str(c.get("type") or ""),
                str(c.get("status") or ""),
                str(c.get("reason") or ""),
                str(c.get("message") or ""),
                og if isinstance(og, int) and not isinstance(og, bool) else 0,
            )
        )
    return DeviceTaintRule(
        meta=meta,
        selector=selector,
        taint=taint,
        time_added=time_added if isinstance(time_added, str) else "",
        conditions=tuple(conditions),
        raw=raw,
    )


# --- matching ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaintRules:
    """An immutable set of rules (those with a selector, in name order) and its generation."""

    generation: int
    rules: tuple[DeviceTaintRule, ...]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def taints_for(self, driver: str, pool: str, device: str) -> tuple[Taint, ...]:
        """The taints the rules add to device ``driver``/``pool``/``device`` (not its own)."""
        if not self.rules:
            return ()
        return tuple(r.taint for r in self.rules if r.applies_to(driver, pool, device))

    def effective_taints(self, driver: str, pool: str, device_name: str, own: Sequence[Taint]) -> tuple[Taint, ...]:
        """What the allocator sees: the device's own taints, then the rules' (tracker ``applyPatches``)."""
        return (*own, *self.taints_for(driver, pool, device_name))


NO_RULES = TaintRules(0, ())


def rules_of(objects: Iterable[DeviceTaintRule]) -> tuple[DeviceTaintRule, ...]:
    """The rules that can match a device (a rule without selector matches none), sorted by name."""
    return tuple(sorted((r for r in objects if r.selector is not None), key=lambda r: r.name))


def _fingerprint(rules: Sequence[DeviceTaintRule]) -> tuple[tuple[str, DeviceTaintSelector | None, Taint], ...]:
    return tuple((r.name, r.selector, r.taint) for r in rules)


class TaintRuleTracker:
    """The current :class:`TaintRules` of a stream of snapshots. ``current`` costs an identity check while
    the snapshot's DeviceTaintRule mapping is the same object, else O(rules); the generation only moves
    when a selector or taint changed (status updates by the eviction controller do not invalidate caches)."""

    def __init__(self) -> None:
        self._source: Mapping[str, Any] | None = None  # kept alive: compared by identity
        self._fingerprint: tuple[Any, ...] = ()
        self._current = NO_RULES

    def current(self, objects: Mapping[str, Any]) -> TaintRules:
        if objects is self._source:
            return self._current
        rules = rules_of(o for o in objects.values() if isinstance(o, DeviceTaintRule))
        fp = _fingerprint(rules)
        if fp != self._fingerprint:
            self._fingerprint = fp
            self._current = TaintRules(self._current.generation + 1, rules)
        self._source = objects
        return self._current


# --- tolerations -------------------------------------------------------------------------------------------


def untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[DeviceToleration]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint no toleration tolerates (upstream
    ``taintPreventsAllocation`` + ``resourceclaim.ToleratesTaint``), or None: the device may be allocated."""
    for t in taints:
        if t.effect in BLOCKING_EFFECTS and not any(tol.tolerates(t) for tol in tolerations):
            return t
    return None


def describe_taint(t: Taint) -> str:
    """``key=value:Effect`` (``key:Effect`` without value), as kubectl prints taints."""
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


__all__ = [
    "BLOCKING_EFFECTS",
    "KIND",
    "NO_RULES",
    "DeviceTaintRule",
    "DeviceTaintSelector",
    "RuleCondition",
    "TaintRuleTracker",
    "TaintRules",
    "describe_taint",
    "rule_from",
    "rules_of",
    "untolerated_taint",
]
