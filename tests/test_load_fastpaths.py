"""Load-phase fast paths keep their answers (issue 16, item 1: the cost of 5,000 nodes).

* ``dra._attribute``: a ResourceSlice device attribute with one value field of its exact JSON type is read
  without the ordered checks; any other shape takes the general path. Both must give the same typed value
  (``DeviceAttribute``: exactly one of bool, int, string, version and the list forms; pkg/apis/resource/types.go).
* ``Cache``: the sorted node-name order (the order every filter walk starts from, as kube-scheduler's
  snapshot node list) is sorted when read after nodes were added or deleted, not at every add (sorting at each
  add made loading N nodes O(N^2 log N)).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api import dra
from scheduler.api.semver import parse as parse_semver
from scheduler.cache.cache import Cache


def _general(raw: Any) -> Any:
    """The general path alone: the same dict behind a Mapping that is not a dict."""

    class M(dict):  # type: ignore[type-arg]
        pass

    return dra._attribute(M(raw))


@pytest.mark.parametrize(
    "raw",
    [
        {"string": "HMM"}, {"int": 3}, {"int": 0}, {"bool": True}, {"bool": False}, {"version": "9.0.0"},
        {"version": "1.2.3-rc.1+b.5"}, {"ints": [1, 2]}, {"strings": ["a"]}, {"bools": [True]},
        {"versions": ["1.0.0"]}, {"int": True}, {"bool": 1}, {"string": 5}, {"version": 9}, {"other": "x"},
        {"string": None}, {}, {"int": 1, "string": "s"},
    ],
)
def test_attribute_fast_path_equals_the_general_path(raw: dict[str, Any]) -> None:
    fast = dra._attribute(raw)
    slow = _general(raw)
    assert fast == slow
    assert type(fast) is type(slow)


def test_attribute_version_is_a_parsed_semver() -> None:
    assert dra._attribute({"version": "580.95.5"}) == parse_semver("580.95.5")
    with pytest.raises(ValueError):
        dra._attribute({"version": "1.2"})


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}


def test_node_order_is_sorted_after_adds_and_deletes() -> None:
    cache = Cache()
    for name in ("n-3", "n-1", "n-2"):
        cache.apply("Node", "ADDED", _node(name))
    assert cache.snapshot().node_names == ("n-1", "n-2", "n-3")
    cache.apply("Node", "ADDED", _node("n-0"))
    cache.apply("Node", "MODIFIED", _node("n-2"))
    assert cache.snapshot().node_names == ("n-0", "n-1", "n-2", "n-3")
    cache.apply("Node", "DELETED", _node("n-1"))
    assert cache.snapshot().node_names == ("n-0", "n-2", "n-3")


def test_loading_nodes_sorts_once_not_per_add(monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.cache.cache as cache_mod

    sorted_sizes: list[int] = []
    real_sorted = sorted

    def counting(it: Any, **kw: Any) -> Any:
        out = real_sorted(it, **kw)
        sorted_sizes.append(len(out))
        return out

    monkeypatch.setattr(cache_mod, "sorted", counting, raising=False)
    cache = Cache()
    for i in range(200):
        cache.apply("Node", "ADDED", _node(f"n-{i:03d}"))
    # sorts of (nearly) every node name while adding: none (before: one per added node, 200 -> O(N^2 log N))
    assert [n for n in sorted_sizes if n >= 50] == []
    names = cache.snapshot().node_names
    assert names == tuple(f"n-{i:03d}" for i in range(200))
    assert [n for n in sorted_sizes if n >= 50] == [200]


def test_simulate_collects_nothing_while_loading_and_restores_the_collector() -> None:
    """_simulate turns the cyclic collector off while it loads (only long-lived objects are built) and on
    again before scheduling; a failure while loading still leaves the collector as it found it."""
    import asyncio
    import gc

    from bench.fleet import scale_fleet
    from scheduler.simulate import simulation as sim

    collections: list[int] = []
    loading = [True]

    def cb(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and loading[0]:
            collections.append(info["generation"])

    real_start = sim.VolumeControllers.start

    async def start(self: Any) -> None:  # the last step of loading
        loading[0] = False
        await real_start(self)

    objs = scale_fleet(500, 8)  # loading them allocates enough for young collections, were the collector on
    gc.collect()  # empty young generations: what earlier tests of the process allocated triggers nothing here
    gc.callbacks.append(cb)
    try:
        sim.VolumeControllers.start = start  # type: ignore[method-assign]
        result = asyncio.run(sim.simulate(objs))
        assert result.summary["pods"] == 0
        assert collections == []
        assert gc.isenabled()

        def boom(*a: Any, **k: Any) -> None:
            raise RuntimeError("loading failed")

        sim.VolumeControllers.start = boom  # type: ignore[method-assign,assignment]
        with pytest.raises(RuntimeError):
            asyncio.run(sim.simulate(objs))
        assert gc.isenabled()
    finally:
        sim.VolumeControllers.start = real_start  # type: ignore[method-assign]
        gc.callbacks.remove(cb)


def _fields(d: dra.Device) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}


@pytest.mark.parametrize(
    "raw",
    [
        {"name": "gpu-0", "attributes": {"a": {"string": "x"}, "v": {"version": "1.2.3"}},
         "capacity": {"memory": {"value": "80Gi"}}},
        {"name": "gpu-0"},
        {"name": "gpu-0", "capacity": {"memory": {"value": 5}}},
        {"name": "gpu-0", "capacity": {"memory": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}}},
        {"name": "gpu-0", "attributes": {"bad": {"int": "x"}}},
        {"name": "gpu-0", "attributes": {"a": {"int": 1}}, "allowMultipleAllocations": True},
        {"name": "gpu-0", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}], "bindsToNode": True},
        {"name": "gpu-0", "nodeName": "n1", "bindingConditions": ["c"]},
    ],
)
def test_plain_devices_take_the_short_way_with_the_same_result(raw: dict[str, Any]) -> None:
    """``device_from``'s short way (only name, attributes, capacity {value}) builds the Device the general
    code builds: checked against the general code on the same data behind a Mapping that is not a dict,
    plus one field the general code reads (an explicit zero value)."""

    class M(dict):  # type: ignore[type-arg]
        pass

    def general(d: dict[str, Any]) -> Any:
        out = M({k: (M({c: M(x) if isinstance(x, dict) else x for c, x in v.items()}) if k == "capacity" else v)
                 for k, v in d.items()})
        out.setdefault("allNodes", False)  # keeps it off the short way
        return out

    assert _fields(dra.device_from(raw, "d")) == _fields(dra.device_from(general(raw), "d"))


def test_run_keeps_the_collector_off_while_importing_and_restores_it() -> None:
    """``dra-scheduler run`` turns the cyclic collector off before importing the scheduler and on again in
    tune_gc() (thresholds raised, start-up objects frozen); an early return (bad flags) restores it."""
    import gc

    from scheduler import cli

    seen: list[bool] = []
    real = cli._run_app

    def probe(parser: Any, args: Any) -> int:
        seen.append(gc.isenabled())
        return real(parser, args)

    cli._run_app = probe  # type: ignore[assignment]
    try:
        assert gc.isenabled()
        assert cli.main(["run", "--config", "a.yaml", "--config-map", "ns/name"]) == 2
        assert seen == [False]  # off while the scheduler's modules are imported
        assert gc.isenabled()  # and back on after the early return
    finally:
        cli._run_app = real  # type: ignore[assignment]
    old = gc.get_threshold()
    gc.disable()
    try:
        cli.tune_gc()
        assert gc.isenabled() and gc.get_threshold() == cli.GC_THRESHOLDS
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
        gc.enable()
