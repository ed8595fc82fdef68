"""The allocator's candidate-order hook cannot change what is feasible or break a constraint: the brute-force
properties of test_allocator_properties, rerun with a hook that returns an arbitrary (shuffled, partial,
duplicated) preference for every request."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any
from unittest import mock

import dra_fixtures
import test_allocator_properties as props
from hypothesis import given
from hypothesis import strategies as st

from plugins.dra.allocator import Allocator
from plugins.dra.pools import Candidate
from scheduler.api.dra import RequestSpec
from scheduler.api.model import Node


def _allocator_with(rnd: random.Random, calls: list[int]) -> type[Allocator]:
    def order(node: Node, cands: Sequence[Candidate], spec: RequestSpec, count: int) -> Sequence[Candidate]:
        calls.append(count)
        out = list(cands)
        rnd.shuffle(out)
        out = out[: rnd.randint(0, len(out))]
        if out and rnd.random() < 0.3:
            out.append(out[0])  # a buggy hook: duplicates are dropped by the allocator
        return out

    class Hooked(Allocator):
        def __init__(self, *args: Any, **kw: Any) -> None:
            kw["device_order"] = order
            super().__init__(*args, **kw)

    return Hooked


@props.SETTINGS
@given(props.problems(prioritized=True), st.randoms(use_true_random=False))
def test_hook_keeps_allocate_iff_brute_force(p: Any, rnd: random.Random) -> None:
    calls: list[int] = []
    with mock.patch.object(dra_fixtures, "Allocator", _allocator_with(rnd, calls)):
        props._check_problem(*p)


@props.SETTINGS
@given(props.problems(prioritized=True, sharing=True), st.randoms(use_true_random=False))
def test_hook_keeps_allocate_iff_brute_force_with_shareable_devices(p: Any, rnd: random.Random) -> None:
    calls: list[int] = []
    with mock.patch.object(dra_fixtures, "Allocator", _allocator_with(rnd, calls)):
        props._check_problem(*p)


def test_hook_is_called_and_its_order_is_used() -> None:
    """Reversed preference: the last free devices are chosen when nothing else constrains the choice."""
    inst = props.Instance([props.Dev(f"d{i}", "pool-1", 0, None) for i in range(5)])
    c = dra_fixtures.claim("claim-0", dra_fixtures.request("req-0", dra_fixtures.CLASS_A, 2))

    def order(node: Node, cands: Sequence[Candidate], spec: RequestSpec, count: int) -> Sequence[Candidate]:
        return list(reversed(cands))

    class Reversed(Allocator):
        def __init__(self, *args: Any, **kw: Any) -> None:
            kw["device_order"] = order
            super().__init__(*args, **kw)

    with mock.patch.object(dra_fixtures, "Allocator", Reversed):
        out = props.allocate(inst, [c])
    assert out.allocations is not None
    assert [r.device for r in out.allocations[0].results] == ["d4", "d3"]
    plain = props.allocate(inst, [c])
    assert plain.allocations is not None
    assert [r.device for r in plain.allocations[0].results] == ["d0", "d1"]
