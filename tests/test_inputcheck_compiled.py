"""The compiled type check of scheduler/api/inputcheck.py agrees with the walk that names errors (issue 16, item 1).

``check_object`` first runs a predicate compiled from the 1.37.2 OpenAPI schema codes (``_valid``) and walks the
object with messages (``_check_type``) only when the predicate says no. The two must agree exactly: an object
the walk would refuse must never pass the predicate (the API server refuses it: ``json: cannot unmarshal ...``),
and a valid object must not pay for the walk. Checked here over every kind the fuzzer builds, mutated at every
path with values of every JSON type, plus the slice attribute fast path (``validateDeviceAttribute``:
exactly one value, versions semver 2.0.0 of at most 64 bytes: pkg/apis/resource/validation/validation.go).
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from scheduler.api import inputcheck
from scheduler.api.inputcheck import _check_slice, _check_type, _schema, _valid, check_object
from tests.fuzzlib import _paths, _set, base_objects

VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, 1.0, 1.5, -0.5, 1e300,
    float("inf"), float("nan"), "", "x", "1Gi", "-1", "1.5e3", "12x", "9.0.0", "v1", [], [1], ["a"], [None], {},
    {"a": 1}, {"string": "s"}, {"value": "1Gi"}, {"int": 1, "string": "s"},
]


def _objects() -> list[dict[str, Any]]:
    sentinels, victims = base_objects()
    return [o for o in sentinels + victims if f"{o['apiVersion']} {o['kind']}" in _schema()["roots"]]


def _agree(obj: dict[str, Any]) -> bool:
    root = _schema()["roots"][f"{obj['apiVersion']} {obj['kind']}"]
    walked = list(_check_type(obj, root, ""))
    return _valid(root)(obj) == (not walked)


def test_every_kind_is_covered_and_valid() -> None:
    objs = _objects()
    kinds = {o["kind"] for o in objs}
    assert {"Node", "Pod", "ResourceSlice", "DeviceClass", "ResourceClaimTemplate"} <= kinds
    for obj in objs:
        root = _schema()["roots"][f"{obj['apiVersion']} {obj['kind']}"]
        assert _valid(root)(obj), obj["kind"]
        assert not list(_check_type(obj, root, ""))


@pytest.mark.parametrize("seed", range(4))
def test_predicate_agrees_with_the_walk_at_every_path(seed: int) -> None:
    rng = random.Random(seed)
    cases = refused = 0
    for obj in _objects():
        for path in _paths(obj):
            if not path or path[0] in ("apiVersion", "kind"):
                continue
            for value in rng.sample(VALUES, 6):
                mutated = copy.deepcopy(obj)
                _set(mutated, path, copy.deepcopy(value))
                assert _agree(mutated), (obj["kind"], path, value)
                cases += 1
                root = _schema()["roots"][f"{obj['apiVersion']} {obj['kind']}"]
                refused += not _valid(root)(mutated)
    # the mutations reach both answers, many times
    assert cases > 1000 and 100 < refused < cases


def test_wrong_types_deep_inside_are_refused_by_both() -> None:
    pod = next(o for o in _objects() if o["kind"] == "Pod")
    bad = copy.deepcopy(pod)
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "12x"}}
    root = _schema()["roots"]["v1 Pod"]
    assert not _valid(root)(bad)
    assert any("spec.containers[0].resources.requests.cpu" in e for e in check_object(bad))
    bad = copy.deepcopy(pod)
    bad["spec"]["priority"] = 2**31  # int32
    assert not _valid(root)(bad)
    assert check_object(bad) == ["spec.priority: 2147483648 does not fit in an int32"]


def test_valid_objects_skip_the_walk_and_invalid_ones_still_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    walk = inputcheck._check_type

    def counting(value: Any, spec: Any, path: str) -> Any:
        calls.append(path)
        return walk(value, spec, path)

    monkeypatch.setattr(inputcheck, "_check_type", counting)
    for obj in _objects():
        assert check_object(obj, obj["kind"] in ("Node", "ResourceSlice", "DeviceClass")) == []
    assert calls == []
    node = copy.deepcopy(next(o for o in _objects() if o["kind"] == "Node"))
    node["status"]["capacity"] = {"cpu": True}
    assert check_object(node, True) == ["status.capacity.cpu: must be a quantity (string or number), not boolean"]
    assert calls == [""]


def _slice_with(attr: Any) -> dict[str, Any]:
    return {"driver": "d", "devices": [{"name": "a", "attributes": {"x": attr}}]}


@pytest.mark.parametrize(
    ("attr", "errors"),
    [
        ({"string": "s"}, []),
        ({"int": 3}, []),
        ({"bools": [True]}, []),
        ({"version": "1.2.3"}, []),
        ({"version": "1.2.3-rc.1+build.5"}, []),
        ({"version": "1.2"}, ["spec.devices[0].attributes[x].version: Invalid value: '1.2': must be a string "
                              "compatible with semver.org spec 2.0.0"]),
        ({"version": "1.2.3" + "0" * 60}, ["spec.devices[0].attributes[x].version: Too long: may not be more "
                                           "than 64 bytes"]),
        ({"version": 3}, []),  # a type error: the schema walk names it, not this check
        ({"versions": ["1.0.0", "x"]}, ["spec.devices[0].attributes[x].versions[1]: Invalid value: 'x': must be a "
                                        "string compatible with semver.org spec 2.0.0"]),
        ({"string": None}, ["spec.devices[0].attributes[x]: Invalid value: exactly one value must be specified"]),
        ({}, ["spec.devices[0].attributes[x]: Invalid value: exactly one value must be specified"]),
        ({"int": 1, "string": "s"}, ["spec.devices[0].attributes[x]: Invalid value: exactly one value must be "
                                     "specified (found int, string)"]),
        ({"string": "s", "other": 1}, []),  # an unknown field beside one value
        ({"version": "1.0.0", "other": "x"}, []),
    ],
)
def test_slice_attribute_fast_path_keeps_every_verdict(attr: Any, errors: list[str]) -> None:
    assert list(_check_slice(_slice_with(attr))) == errors
