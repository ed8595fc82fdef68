"""DeviceTaintRule (resource.k8s.io/v1 since Kubernetes 1.37; KEP-5055, feature gate DRADeviceTaintRules,
GA and on by default in 1.37): taints put on devices by an administrator instead of the DRA driver.

The rule itself (its typed value :class:`DeviceTaintRule` and converter :func:`rule_from`, API
``k8s.io/api`` v0.37.2 ``resource/v1/types.go``) is an engine type: :mod:`scheduler.api.devicetaintrules`. This
module is what a rule does to allocation.

How kube-scheduler 1.37.2 uses them: the scheduler does not read rules itself; the ResourceSlice tracker
(``k8s.io/dynamic-resource-allocation`` v0.37.2 ``resourceslice/tracker/tracker.go``, ``applyPatches``)
hands the allocator copies of the slices in which every device matched by a rule has the rule's taint
*appended* to its own taints (``ListWithDeviceTaintRules``, used by ``dynamicresources.go`` PreFilter). For
the allocator a rule's taint is therefore indistinguishable from a driver's: a ``NoSchedule`` or
``NoExecute`` taint that no toleration of the request tolerates makes the device unallocatable
(``taintPreventsAllocation``); ``None`` and unknown effects are informational. A rule change makes the
tracker emit ResourceSlice update events, which requeue pods waiting for devices.

Here the same happens without copying slices: :class:`TaintRules` gives the rule taints of a device by
(driver, pool, device name); the allocator's pool builder (:func:`plugins.dra.pools.gather_pools`)
stores them beside each candidate and checks them together with the device's own taints. Rules are applied
in name order (upstream's order is the informer's, i.e. unspecified; it does not change what is allocatable).
:class:`TaintRuleTracker` turns the snapshot's rules into a :class:`TaintRules` whose ``generation`` changes
whenever what the allocator reads changes (a selector or a taint), never on status-only updates: the DRA
plugin keys its per-node caches with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api.devicetaintrules import KIND, DeviceTaintRule, DeviceTaintSelector, RuleCondition, rule_from
from scheduler.api.dra import DeviceToleration
from scheduler.api.model import Taint

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})  # None and unknown effects never block


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
