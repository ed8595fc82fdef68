"""metav1.LabelSelector: parsing and matching.

Semantics (k8s.io/apimachinery ``pkg/apis/meta/v1/helpers.go`` ``LabelSelectorAsSelector`` and
``pkg/labels/selector.go``):

* ``matchLabels`` and ``matchExpressions`` are ANDed;
* an empty selector (``{}``) matches every object; a missing (``None``) selector matches nothing where the
  caller says so (``LabelSelector.nothing()``; e.g. pod affinity terms and topology spread constraints);
* ``In``: the label exists and its value is listed; ``NotIn``: the label is absent or its value is not
  listed; ``Exists`` / ``DoesNotExist`` on the key alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.model import ModelError

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    match_nothing: bool = False

    @staticmethod
    def nothing() -> LabelSelector:
        return _NOTHING

    @staticmethod
    def everything() -> LabelSelector:
        return _EVERYTHING

    @property
    def is_empty(self) -> bool:
        """Matches everything."""
        return not self.match_nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.match_nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def with_requirements(self, extra: tuple[Requirement, ...]) -> LabelSelector:
        if self.match_nothing or not extra:
            return self
        return LabelSelector(self.requirements + extra)


_NOTHING = LabelSelector(match_nothing=True)
_EVERYTHING = LabelSelector()


def selector_from(raw: Any, path: str, nil_matches_nothing: bool = True) -> LabelSelector:
    """Parse a metav1.LabelSelector dict. ``None`` gives nothing (or everything when
    ``nil_matches_nothing`` is False). Invalid input raises :class:`ModelError` with the field path."""
    if raw is None:
        return _NOTHING if nil_matches_nothing else _EVERYTHING
    if not isinstance(raw, Mapping):
        raise ModelError(path, "must be an object")
    reqs: list[Requirement] = []
    ml = raw.get("matchLabels") or {}
    if not isinstance(ml, Mapping):
        raise ModelError(f"{path}.matchLabels", "must be an object")
    for k in sorted(ml):
        v = ml[k]
        if v is None:  # Go's JSON decoding: a null map[string]string value is ""
            v = ""
        if not isinstance(v, str):
            raise ModelError(f"{path}.matchLabels.{k}", "must be a string")
        reqs.append(Requirement(str(k), "In", frozenset((v,))))
    me = raw.get("matchExpressions") or []
    if not isinstance(me, list):
        raise ModelError(f"{path}.matchExpressions", "must be a list")
    for i, e in enumerate(me):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(e, Mapping):
            raise ModelError(p, "must be an object")
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not isinstance(key, str) or not key:
            raise ModelError(f"{p}.key", "required")
        if op not in OPERATORS:
            raise ModelError(f"{p}.operator", f"unsupported value {op!r}: supported values: {', '.join(OPERATORS)}")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ModelError(f"{p}.values", "must be a list of strings")
        if op in ("In", "NotIn") and not values:
            raise ModelError(f"{p}.values", f"must be specified when operator is {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise ModelError(f"{p}.values", f"may not be specified when operator is {op}")
        reqs.append(Requirement(key, op, frozenset(values)))
    return LabelSelector(tuple(reqs))


def selector_from_map(labels: Mapping[str, str]) -> LabelSelector:
    """``labels.SelectorFromSet``: every key=value (a Service's or RC's ``spec.selector``); empty = everything."""
    return LabelSelector(tuple(Requirement(k, "In", frozenset((v,))) for k, v in sorted(labels.items())))
