"""Score plumbing shared by the framework runtime and its batch runner (:mod:`scheduler.framework.batch`):
a score plugin with its weight, the normalisation-and-check of one plugin's raw scores, the framework's error.

Below both (``runtime`` imports ``batch``), so that neither needs the other's module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.framework.interface import MAX_NODE_SCORE, CycleState, NodeScore, ScoreNormalizer, ScorePlugin

if TYPE_CHECKING:
    from scheduler.api.model import Pod


class FrameworkError(Exception):
    pass


def normalized_row(p: ScorePlugin, state: CycleState, pod: Pod, names: Sequence[str], row: list[int]) -> list[int]:
    """One score plugin's raw scores over ``names`` after its NormalizeScore (if any), checked to be within
    [0, MAX_NODE_SCORE] (upstream ``runScorePlugins``): shared by ``run_score`` and the batch's windows."""
    if isinstance(p, ScoreNormalizer):
        scores = [NodeScore(nm, v) for nm, v in zip(names, row, strict=True)]
        st = p.normalize_score(state, pod, scores)
        if not st.is_success:
            raise FrameworkError(f"{p.name}: normalize score: {st.message}")
        row = [s.score for s in scores]
    if min(row, default=0) < 0 or max(row, default=0) > MAX_NODE_SCORE:
        bad = next(i for i, v in enumerate(row) if not 0 <= v <= MAX_NODE_SCORE)
        raise FrameworkError(
            f"plugin {p.name} returned an invalid score {row[bad]} for node {names[bad]}: "
            f"must be in [0, {MAX_NODE_SCORE}]"
        )
    return row


@dataclass(frozen=True, slots=True)
class WeightedScorer:
    plugin: ScorePlugin
    weight: int
