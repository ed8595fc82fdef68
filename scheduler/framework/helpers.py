"""Small helpers shared by plugins."""

from __future__ import annotations

from scheduler.framework.interface import NodeScore


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
