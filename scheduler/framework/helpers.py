"""Small helpers shared by plugins and the engine (score normalisation, the FitError message)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from scheduler.framework.interface import NodeScore, Status

F = TypeVar("F", bound=Callable[..., Any])
_MAX_NORMALIZED = "_max_normalized_reverse"
_MIN_MAX_NORMALIZED = "_min_max_normalized_floor"


def default_normalize_score(max_priority: int, reverse: bool, scores: list[NodeScore]) -> None:
    """kube-scheduler's ``helper.DefaultNormalizeScore`` (integer arithmetic), in place: scale to
    0..max_priority by the highest score; ``reverse`` flips it (lower raw score = better)."""
    max_count = max((s.score for s in scores), default=0)
    if max_count <= 0:
        if reverse:
            for s in scores:
                s.score = max_priority
        return
    for s in scores:
        v = max_priority * s.score // max_count
        s.score = max_priority - v if reverse else v


def max_normalized(reverse: bool = False) -> Callable[[F], F]:
    """Marks a plugin's ``normalize_score`` as exactly ``default_normalize_score(MAX_NODE_SCORE, reverse, ...)``:
    a node's normalised score then depends only on its raw score and the highest raw score of the nodes scored
    together, which lets the framework's reuse between equal pods normalise a window of nodes at C speed
    (scheduler/framework/batch.py). A normaliser without the mark gets the scores as ``run_score`` gives them.
    tests/test_batching.py checks every marked plugin against ``default_normalize_score``."""

    def mark(fn: F) -> F:
        setattr(fn, _MAX_NORMALIZED, reverse)
        return fn

    return mark


def max_normalization(plugin: object) -> bool | None:
    """``reverse`` of a plugin whose ``normalize_score`` is marked :func:`max_normalized`, else None."""
    fn = getattr(type(plugin), "normalize_score", None)
    rev = getattr(fn, _MAX_NORMALIZED, None)
    return rev if isinstance(rev, bool) else None


def min_max_normalize_score(max_priority: int, floor: int, scores: list[NodeScore]) -> None:
    """Min-max normalisation with a floor on the span, in place: ``(score - lowest) * max_priority // max(highest -
    lowest, floor)`` (integer arithmetic; ``floor`` >= 1). Differences far below ``floor`` stay small."""
    if not scores:
        return
    lo = min(s.score for s in scores)
    hi = max(s.score for s in scores)
    span = max(hi - lo, floor, 1)
    for s in scores:
        s.score = (s.score - lo) * max_priority // span


def min_max_normalized(floor_attr: str) -> Callable[[F], F]:
    """Marks a plugin's ``normalize_score`` as exactly ``min_max_normalize_score(MAX_NODE_SCORE, floor, ...)`` with
    ``floor`` the plugin instance's attribute ``floor_attr``: the framework's reuse between equal pods then
    normalises a window at C speed, as for :func:`max_normalized` (tests/test_batching.py checks every marked
    plugin against ``min_max_normalize_score``)."""

    def mark(fn: F) -> F:
        setattr(fn, _MIN_MAX_NORMALIZED, floor_attr)
        return fn

    return mark


def min_max_normalization(plugin: object) -> int | None:
    """The span floor of a plugin whose ``normalize_score`` is marked :func:`min_max_normalized`, else None."""
    fn = getattr(type(plugin), "normalize_score", None)
    attr = getattr(fn, _MIN_MAX_NORMALIZED, None)
    if not isinstance(attr, str):
        return None
    floor = getattr(plugin, attr, None)
    return floor if isinstance(floor, int) and not isinstance(floor, bool) else None


def fit_error(num_nodes: int, statuses: Mapping[str, Status]) -> str:
    """kube-scheduler's FitError message: '0/N nodes are available: <count> <reason>, ...'."""
    counts: Counter[str] = Counter()
    for st in statuses.values():
        for r in st.reasons or ("unknown reason",):
            counts[r] += 1
    parts = sorted(f"{n} {r}" for r, n in counts.items())
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."
