"""``simulate -o json`` text: ``dumps_indented`` is ``json.dumps(..., indent=2)``, faster."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from scheduler.simulate.report import dumps_indented
from scheduler.simulate.simulation import run_simulation, to_json

EXAMPLES = "manifests/examples"


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randrange(-(10**20), 10**20)
    if kind == 3:
        return rng.choice((0.0, -0.0, 1.5, 1e300, -2.5e-300, float("inf"), -float("inf"), rng.random()))
    if kind in (4, 5):
        return "".join(rng.choice('ab"\\\n\té€\U0001f600\x00/') for _ in range(rng.randrange(6)))
    if kind == 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return tuple(_random_json(rng, depth + 1) for _ in range(rng.randrange(3)))
    return {str(_random_json(rng, 4)): _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("seed", range(40))
def test_same_text_as_json_dumps_indent_2(seed: int) -> None:
    value = _random_json(random.Random(seed))
    assert dumps_indented(value) == json.dumps(value, indent=2)


@pytest.mark.parametrize("value", [{1: "int key"}, {None: 1, True: 2}, [float("nan")], {"a": {"b": [{}, []]}}])
def test_what_it_does_not_walk_is_left_to_json_dumps(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2)


def test_a_cycle_is_refused_as_json_dumps_refuses_it() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(loop)


def test_simulate_output_is_the_indented_json_of_the_result() -> None:
    result = run_simulation([EXAMPLES])
    text = to_json(result)
    assert text == json.dumps({"items": result.items, "deleted": result.deleted, "summary": result.summary}, indent=2)
