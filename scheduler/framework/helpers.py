"""Small helpers shared by plugins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from scheduler.framework.interface import NodeScore

F = TypeVar("F", bound=Callable[..., Any])
_MAX_NORMALIZED = "_max_normalized_reverse"


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
