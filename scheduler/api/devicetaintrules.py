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

This module is the typed value and its converter (``scheduler.api.objects.OBJECT_KINDS``), as the API defines it;
what a rule's taint does to allocation (matching, tolerations) is the DRA plugin's
(``plugins/dra/taintrules.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.model import Meta, ModelError, Taint, meta_from

KIND = "DeviceTaintRule"
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
    """Converter for ``scheduler.api.objects.OBJECT_KINDS``. Raises :class:`ModelError` on input the API server
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


__all__ = [
    "CONDITION_EVICTION_IN_PROGRESS",
    "EFFECT_NONE",
    "EFFECT_NO_EXECUTE",
    "EFFECT_NO_SCHEDULE",
    "KIND",
    "MAX_CONDITIONS",
    "DeviceTaintRule",
    "DeviceTaintSelector",
    "RuleCondition",
    "rule_from",
]
