"""Resource allocation scorers of NodeResourcesFit, in kube-scheduler's integer arithmetic.

Pure functions over parallel lists (``requested[i]``, ``allocatable[i]``, ``weights[i]``); a resource
with allocatable 0 is left out of the weighted mean. Sources (kube-scheduler,
``pkg/scheduler/framework/plugins/noderesources``): ``least_allocated.go``, ``most_allocated.go``,
``requested_to_capacity_ratio.go`` and ``helper.BuildBrokenLinearFunction``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.framework.interface import MAX_NODE_SCORE

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # RequestedToCapacityRatio shape scores are 0..10

Scorer = Callable[[Sequence[int], Sequence[int]], int]


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # requested may exceed capacity because pods without requests count with the defaults.
    requested = min(requested, capacity)
    return requested * MAX_NODE_SCORE // capacity


def _weighted(per_resource: Callable[[int, int], int], weights: Sequence[int]) -> Scorer:
    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, w in zip(requested, allocatable, weights, strict=True):
            if alloc == 0:
                continue
            node_score += per_resource(req, alloc) * w
            weight_sum += w
        return node_score // weight_sum if weight_sum else 0

    return scorer


def least_allocated_scorer(weights: Sequence[int]) -> Scorer:
    """LeastAllocated: ``(capacity - requested) * 100 / capacity``, weighted mean over resources."""
    return _weighted(least_requested_score, weights)


def most_allocated_scorer(weights: Sequence[int]) -> Scorer:
    """MostAllocated: ``requested * 100 / capacity`` (requested capped at capacity), weighted mean."""
    return _weighted(most_requested_score, weights)


def broken_linear_function(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """``helper.BuildBrokenLinearFunction`` over (utilization, score) points, utilization increasing."""

    def f(p: int) -> int:
        for i, (u, s) in enumerate(shape):
            if p <= u:
                if i == 0:
                    return s
                pu, ps = shape[i - 1]
                return ps + go_div((s - ps) * (p - pu), u - pu)
        return shape[-1][1]

    return f


def requested_to_capacity_ratio_scorer(weights: Sequence[int], shape: Sequence[tuple[int, int]]) -> Scorer:
    """RequestedToCapacityRatio: the broken-linear shape (scores 0..10 scaled to 0..100) applied to the
    utilisation of each resource; weighted mean of the positive resource scores, rounded half away from
    zero (Go's ``math.Round``)."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear_function([(u, s * scale) for u, s in shape])

    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, w in zip(requested, allocatable, weights, strict=True):
            if alloc == 0:
                continue
            rs = resource_score(req, alloc)
            if rs > 0:
                node_score += rs * w
                weight_sum += w
        if weight_sum == 0:
            return 0
        return math.floor(node_score / weight_sum + 0.5)

    return scorer


def validate_function_shape(raw: Any, path: str) -> list[str]:
    """``validateFunctionShape`` (pkg/scheduler/apis/config/validation/validation_pluginargs.go), shared by
    NodeResourcesFit's RequestedToCapacityRatio and VolumeBinding's shape: at least one point, each an object
    of two integers, sorted utilizations (first violation only), then the ranges."""
    if not isinstance(raw, list) or not raw:
        return [f"{path}: at least one point must be specified"]
    errs: list[str] = []
    points: list[tuple[Any, Any]] = []
    for i, pt in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(pt, Mapping):
            errs.append(f"{p}: must be an object")
            points.append((None, None))
            continue
        errs += [f"{p}.{k}: unknown field" for k in pt if k not in ("utilization", "score")]
        u, s = pt.get("utilization", 0), pt.get("score", 0)
        if not isinstance(u, int) or isinstance(u, bool):
            errs.append(f"{p}.utilization: must be an integer")
            u = None
        if not isinstance(s, int) or isinstance(s, bool):
            errs.append(f"{p}.score: must be an integer")
            s = None
        points.append((u, s))
    for i in range(1, len(points)):
        a, b = points[i - 1][0], points[i][0]
        if a is not None and b is not None and a >= b:
            errs.append(f"{path}[{i}].utilization: values must be sorted in increasing order")
            break
    for i, (u, s) in enumerate(points):
        if u is not None and not 0 <= u <= MAX_UTILIZATION:
            errs.append(f"{path}[{i}].utilization: not in valid range [0, {MAX_UTILIZATION}]")
        if s is not None and not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(f"{path}[{i}].score: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
    return errs
