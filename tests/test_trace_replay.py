"""bench/trace_replay.py: the paper's metric, the task order, the objects it writes and the checks on the answer.

None of this reads the trace (../shared/data may be absent, e.g. in CI); the Go program that gives Go's math/rand
stream is built here, and a failed build fails the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import trace_replay as tr
from bench.trace_replay import Node, Task

# --------------------------------------------------------------------------------------------------
# The metric (experiments/analysis/merge_alloc_discrete.py of the paper's simulator)
# --------------------------------------------------------------------------------------------------


def test_curve_on_a_tiny_trace() -> None:
    # 10 GPUs = 10,000 milli: arrived% = milli / 100. (arrived, allocated) after each task:
    steps = [
        (0, 0),  # a CPU-only task first: arrived 0%, allocated 0%
        (100, 100),  # 1%
        (250, 250),  # 2.5% -> rounds half to even: 2
        (250, 250),  # CPU-only: same arrived, still a sample of 2%
        (350, 250),  # a 100-milli task refused: arrived 3.5% -> 4, allocated 2.5%
        (700, 600),  # 7%
        (1333, 933),  # 13.33% -> 13, allocated 9.33
    ]
    arrived = [a for a, _ in steps]
    used = [u for _, u in steps]
    curve = tr.allocation_curve(arrived, used, total_gpus=10)
    assert curve[0] == 0.0
    assert curve[1] == 1.0
    assert curve[2] == 2.5  # mean of the two tasks at 2%
    assert curve[3] == 2.5  # no task at 3%: the tasks at 2..4% (2.5, 2.5, 2.5)
    assert curve[4] == 2.5
    assert curve[5] == 2.5  # 4..6%: the refused task's sample only
    assert curve[6] == 6.0 and curve[7] == 6.0 and curve[8] == 6.0
    assert 9 not in curve and 10 not in curve and 11 not in curve  # nothing within one point
    assert curve[12] == 9.33 and curve[13] == 9.33 and curve[14] == 9.33
    assert max(curve) == 14


def test_curve_mean_rounds_to_two_decimals() -> None:
    # Three tasks at 1%: allocated 1.00, 1.01, 1.01 -> mean 1.00666.. -> 1.01
    curve = tr.allocation_curve([100, 101, 101], [100, 101, 101], total_gpus=10)
    assert curve[1] == 1.01


def test_cumulative() -> None:
    assert tr.cumulative([0, 1000, 0, 460]) == [0, 1000, 1000, 1460]


# --------------------------------------------------------------------------------------------------
# The trace's rows and the objects written for them
# --------------------------------------------------------------------------------------------------


def test_rows() -> None:
    share = tr.task_from_row({"name": "p1", "cpu_milli": "6000", "memory_mib": "12288", "num_gpu": "1",
                              "gpu_milli": "460", "gpu_spec": "V100M16|V100M32"})
    assert share == Task("p1", 6000, 12288, 1, 460, ("V100M16", "V100M32"))
    assert share.total_gpu_milli == 460
    cpu = tr.task_from_row({"name": "p2", "cpu_milli": "4000", "memory_mib": "0", "num_gpu": "0", "gpu_milli": "0",
                            "gpu_spec": "nan"})
    assert cpu == Task("p2", 4000, 0) and cpu.total_gpu_milli == 0
    multi = tr.task_from_row({"name": "p3", "cpu_milli": "1", "memory_mib": "1", "num_gpu": "8", "gpu_milli": "1000"})
    assert multi.total_gpu_milli == 8000 and multi.gpu_spec == ()


def test_task_with_model_constraint_gets_a_selector_and_a_share_gets_a_capacity_request() -> None:
    task = Task("openb-pod-0001", 6000, 12288, 1, 460, ("V100M16", "V100M32"))
    claim, pod = tr.task_objects(task, 3)
    assert claim["kind"] == "ResourceClaim" and claim["metadata"] == {
        "name": "openb-pod-0001", "namespace": "trace", "creationTimestamp": "2026-01-01T00:00:03Z"}
    (req,) = claim["spec"]["devices"]["requests"]
    assert req == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 1,
            "capacity": {"requests": {"milli": "460"}},
            "selectors": [
                {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].model in ["V100M16", "V100M32"]'}}
            ],
        },
    }
    assert pod["metadata"]["creationTimestamp"] == "2026-01-01T00:00:03Z"
    assert pod["spec"]["schedulerName"] == "dra-scheduler"
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "openb-pod-0001"}]
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "6000m", "memory": "12288Mi"}, "claims": [{"name": "gpu"}]}


def test_whole_gpus_any_model_and_cpu_only() -> None:
    claim, _ = tr.task_objects(Task("t-8", 88000, 327680, 8, 1000), 0)
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["count"] == 8 and exactly["capacity"] == {"requests": {"milli": "1000"}}
    assert "selectors" not in exactly
    (pod,) = tr.task_objects(Task("t-cpu", 2000, 4096), 1)
    assert pod["kind"] == "Pod" and "resourceClaims" not in pod["spec"]
    assert "claims" not in pod["spec"]["containers"][0]["resources"]


def test_node_and_its_slice() -> None:
    node, slice_ = tr.node_objects(Node("openb-node-0000", 64000, 262144, 2, "P100"))
    assert node["status"]["allocatable"] == {"cpu": "64000m", "memory": "262144Mi", "pods": "1001"}
    assert slice_["spec"]["driver"] == "gpu.nvidia.com" and slice_["spec"]["nodeName"] == "openb-node-0000"
    assert slice_["spec"]["pool"] == {"name": "openb-node-0000", "generation": 1, "resourceSliceCount": 1}
    assert slice_["spec"]["devices"][1] == {
        "name": "gpu-1",
        "allowMultipleAllocations": True,
        "attributes": {"model": {"string": "P100"}, "index": {"int": 1}},
        "capacity": {"milli": {"value": "1000"}},
    }
    assert tr.node_objects(Node("cpu-node", 1000, 1024, 0, ""))[1:] == []
    objs = tr.manifests([Node("n", 1000, 1024, 1, "T4")], [Task("a", 1, 1, 1, 500), Task("b", 1, 1)])
    assert [o["kind"] for o in objs] == ["DeviceClass", "Node", "ResourceSlice", "ResourceClaim", "Pod", "Pod"]
    assert objs[0]["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]


# --------------------------------------------------------------------------------------------------
# The task order (upstream SortClusterPods + TunePodsByNodeTotalResource), with a scripted random stream
# --------------------------------------------------------------------------------------------------


def scripted(perm: list[int], picks: list[int]) -> tr.Draw:
    calls: list[tuple[int, list[str]]] = []

    def draw(seed: int, ops: Any) -> list[list[int]]:
        calls.append((seed, list(ops)))
        return [[12345], perm, picks]

    draw.calls = calls  # type: ignore[attr-defined]
    return draw


def test_order_shuffles_tasks_sorted_by_name_then_tunes_up() -> None:
    tasks = [Task("c", 1, 1, 1, 1000), Task("a", 1, 1, 1, 500), Task("b", 1, 1)]  # 1,500 milli arrive
    # capacity 2,000 x 1.3 = 2,600: "a" (500) fits twice -> 2,500; "b" (CPU) always fits; "c" (1,000) would pass
    draw = scripted([2, 0, 1], [0, 1, 0, 2, 0])
    order = tr.arrival_order(tasks, 7, 2000, draw=draw)
    assert [t.name for t in order] == ["c", "a", "b", "a-tuned-0", "b-tuned-1", "a-tuned-2"]
    assert order[3] == Task("a-tuned-0", 1, 1, 1, 500)
    seed, ops = draw.calls[0]  # type: ignore[attr-defined]
    assert seed == 7 and ops[:2] == ["int", "shuffle:3"] and ops[2].startswith("intn:3x")


def test_tuning_tests_the_per_gpu_milli_as_upstream_does() -> None:
    # 8,400 arrive; target 1.3 x 10,000 = 13,000. The 8-GPU pick passes the test on its per-GPU 1,000 (9,400),
    # then adds 8,000 (16,400, above the target); the next pick stops the tuning.
    tasks = [Task("big", 1, 1, 8, 1000), Task("share", 1, 1, 1, 400)]
    order = tr.arrival_order(tasks, 1, 10000, draw=scripted([1, 0], [0, 1]))
    assert [t.name for t in order] == ["share", "big", "big-tuned-0"]


def test_order_tunes_down_above_the_target() -> None:
    tasks = [Task(n, 1, 1, 1, 1000) for n in "abcd"]  # 4,000 milli; target 1.3 x 2,000 = 2,600
    order = tr.arrival_order(tasks, 3, 2000, draw=scripted([3, 2, 1, 0], [0, 0, 0, 0]))
    assert [t.name for t in order] == ["b", "a"]  # drops the first two: 2,000 <= 2,600


def test_order_asks_for_more_draws_when_short() -> None:
    tasks = [Task("a", 1, 1), Task("g", 1, 1, 1, 1000)]  # 1,000 arrive; target 1.3 x 2,000 = 2,600
    asked: list[int] = []

    def draw(seed: int, ops: Any) -> list[list[int]]:
        k = int(ops[2].split("x")[1])
        asked.append(k)
        # first stream: only CPU-only picks, never reaching the target; the longer one reaches it
        return [[1], [0, 1], [0] * k if len(asked) == 1 else [1, 0, 1, 1]]

    order = tr.arrival_order(tasks, 1, 2000, draw=draw)
    assert asked == [1024, 2048]
    assert [t.name for t in order] == ["a", "g", "g-tuned-0", "a-tuned-1"]  # g again would make 3,000


# --------------------------------------------------------------------------------------------------
# Go's math/rand through bench/trace/gorand (built here)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gorand(tmp_path_factory: pytest.TempPathFactory) -> tr.Draw:
    mp = pytest.MonkeyPatch()
    mp.setattr(tr, "CACHE", tmp_path_factory.mktemp("cache"))
    try:
        binary = tr.gorand_binary()  # go build; raises (fails the test) when it cannot
        assert binary.is_file() and str(binary).startswith(str(tr.CACHE))
        yield tr.go_draw
    finally:
        mp.undo()


def test_gorand_matches_go_known_values(gorand: tr.Draw) -> None:
    # Go's math/rand with seed 1 (the old default): the well-known rand.Intn(100) sequence.
    assert gorand(1, ["intn:100x10"]) == [[81, 87, 47, 59, 81, 18, 25, 40, 56, 0]]
    # Seed 42 as the paper's simulator uses it: one Int(), then Shuffle, then Intn.
    assert gorand(42, ["int", "shuffle:10", "intn:10x10", "down:5x5"]) == [
        [3440579354231278675],
        [6, 8, 3, 7, 4, 2, 9, 1, 5, 0],
        [9, 7, 5, 8, 2, 3, 2, 1, 5, 4],
        [2, 2, 1, 1, 0],
    ]
    # The same stream in smaller pieces: the ops share one source.
    assert gorand(42, ["int", "shuffle:10", "intn:10x4"])[2] == [9, 7, 5, 8]


def test_order_from_go(gorand: tr.Draw) -> None:
    names = [f"t{i}" for i in range(10)]
    tasks = [Task(n, 1, 1) for n in reversed(names)]  # sorted by name first, whatever the file order
    order = tr.arrival_order(tasks + [Task("gpu", 1, 1, 1, 1000)], 42, 1000, draw=gorand)
    # 11 tasks; 1,000 of 1,300 arrive; the picks (seed 42, after Shuffle(11)) add CPU tasks until "gpu" is drawn
    shuffled = gorand(42, ["int", "shuffle:11"])[1]
    by_name = sorted(names + ["gpu"])
    assert [t.name for t in order[:11]] == [by_name[i] for i in shuffled]
    picks = gorand(42, ["int", "shuffle:11", f"intn:11x{len(order) - 11 + 1}"])[2]
    assert by_name[picks[-1]] == "gpu"  # the pick that would pass 1,300 ends the tuning
    assert [t.name for t in order[11:]] == [f"{by_name[i]}-tuned-{k}" for k, i in enumerate(picks[:-1])]


# --------------------------------------------------------------------------------------------------
# Checks on the command's answer
# --------------------------------------------------------------------------------------------------


def answer(pods: list[tuple[str, str | None, int]], claims: list[tuple[str, list[tuple[str, str, str]]]]) -> Any:
    items: list[dict[str, Any]] = []
    for name, node, rv in pods:
        spec: dict[str, Any] = {"nodeName": node} if node else {}
        items.append({"kind": "Pod", "metadata": {"name": name, "namespace": "trace", "resourceVersion": str(rv)},
                      "spec": spec})
    for name, results in claims:
        status: dict[str, Any] = {}
        if results:
            status = {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": dev,
                 "consumedCapacity": {"milli": milli}} for pool, dev, milli in results]}}}
        items.append({"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "trace"}, "status": status})
    return {"items": items}


NODES = [Node("n1", 8000, 8192, 2, "T4"), Node("n2", 8000, 8192, 1, "P100")]


def test_checks_pass_and_curve_inputs() -> None:
    order = [Task("a", 1000, 1024, 1, 600), Task("b", 1000, 1024, 1, 400, ("T4",)), Task("c", 9000, 1),
             Task("d", 1000, 1024, 2, 1000)]
    out = answer([("a", "n1", 5), ("b", "n1", 7), ("c", None, 9), ("d", None, 8)],
                 [("a", [("n1", "gpu-0", "600")]), ("b", [("n1", "gpu-0", "400")]), ("d", [])])
    replay = tr.evaluate(NODES, order, out)
    assert replay.problems == []
    assert replay.placed == [True, True, False, False]
    assert replay.used_milli == [600, 400, 0, 0]


@pytest.mark.parametrize(
    ("pods", "claims", "problem"),
    [
        ([("a", "n1", 1), ("b", "n1", 2)], [("a", [("n1", "gpu-0", "600")]), ("b", [("n1", "gpu-0", "600")])],
         "device n1/gpu-0 allocated 1200 milli > 1000"),
        ([("a", "n2", 1), ("b", None, 2)], [("a", [("n1", "gpu-0", "600")]), ("b", [])], "not on n2"),
        ([("a", "n1", 1), ("b", None, 2)], [("a", [("n1", "gpu-0", "600")]), ("b", [("n1", "gpu-1", "600")])],
         "claim b allocated but its pod is pending"),
        ([("a", "n1", 1), ("b", "n1", 2)], [("a", [("n1", "gpu-0", "500")]), ("b", [("n1", "gpu-1", "600")])],
         "consumes 500 milli, requested 600"),
        ([("a", "n1", 3), ("b", "n1", 2)], [("a", [("n1", "gpu-0", "600")]), ("b", [("n1", "gpu-1", "600")])],
         "out of arrival order"),
        ([("a", "n1", 1)], [("a", [("n1", "gpu-0", "600")])], "pod b missing"),
    ],
)
def test_checks_fail(pods: Any, claims: Any, problem: str) -> None:
    order = [Task("a", 1000, 1024, 1, 600), Task("b", 1000, 1024, 1, 600)]
    replay = tr.evaluate(NODES, order, answer(pods, claims))
    assert any(problem in p for p in replay.problems), replay.problems


def test_node_over_cpu_and_wrong_model() -> None:
    order = [Task("a", 5000, 1024, 1, 600, ("P100",)), Task("b", 5000, 1024)]
    replay = tr.evaluate(NODES, order, answer([("a", "n1", 1), ("b", "n1", 2)], [("a", [("n1", "gpu-0", "600")])]))
    assert any("cpu 10000m requested > 8000m" in p for p in replay.problems)
    assert any("model T4 not in ('P100',)" in p for p in replay.problems)


# --------------------------------------------------------------------------------------------------
# Validation against the published curves, options, missing data
# --------------------------------------------------------------------------------------------------


def test_validation() -> None:
    ideal = {p: float(p) for p in range(131)}
    ours = {**ideal, **{p: p - 1.0 for p in range(20, 131)}}  # our first refusal shows at 20%
    published = {pol: {**ideal, **{p: p - 2.0 for p in range(30 + i, 131)}} for i, pol in enumerate(tr.POLICIES)}
    v = tr.validate(ideal, ours, published)
    assert (v.published_agree_until, v.ideal_matches_until, v.ours_matches_until, v.ok) == (30, 30, 20, True)
    wrong = {p: c | {5: 4.0} for p, c in published.items()}  # another task order: all six differ from ours
    v = tr.validate(ideal, ours, wrong)
    assert (v.ideal_matches_until, v.ok) == (5, False)
    assert tr.validate(ideal, ours, published, complete_until=10).ok  # a shortened replay checks less


def test_parse_seeds_and_workloads() -> None:
    assert tr.parse_seeds("42-45,50") == [42, 43, 44, 45, 50]
    args = tr.parse_args(["--workload", "all", "--seeds", "42"])
    assert args.workloads == list(tr.WORKLOADS) and args.seeds == [42]
    assert tr.parse_args([]).workloads == ["default"]


def test_missing_data(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tr.DATA_ENV, str(tmp_path / "nowhere"))
    assert tr.main([]) == 1
    err = capsys.readouterr().err
    assert "trace data not found" in err and "--data DIR" in err and "nowhere" in err
    assert tr.main(["--skip-missing-data"]) == 0
    assert "skipped" in capsys.readouterr().out
    with pytest.raises(tr.BenchError, match="not shipped"):
        tr.data_file(tmp_path, tr.NODES_CSV)


def test_a_task_no_node_could_hold_is_not_in_the_no_refusal_curve() -> None:
    """gpuspec33, seed 50: an 8-GPU task restricted to a model whose nodes have fewer GPUs is refused by every
    published policy; the no-refusal curve the validation compares them with must leave it out (it flagged a
    mismatch at 1% arrived before)."""
    nodes = [Node("a", 96_000, 393_216, 8, "G2"), Node("b", 32_000, 131_072, 4, "V100M16")]
    assert tr.could_fit(nodes, Task("t", 1000, 1024, 8, 1000, ("G2",)))
    assert not tr.could_fit(nodes, Task("t", 1000, 1024, 8, 1000, ("V100M16",)))  # its nodes have 4 GPUs
    assert not tr.could_fit(nodes, Task("t", 128_000, 1024, 1, 1000))  # more cpu than any node
    assert tr.could_fit(nodes, Task("t", 1000, 1024, 0, 0, ("T4",)))  # a CPU-only task: the model does not apply
