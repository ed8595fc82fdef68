"""ImageLocality (kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/imagelocality``; cases from
``image_locality_test.go`` TestImageLocalityPriority / TestImageSignature / TestNormalizedImageName), the
spread table's generation as node token (reuse must not go stale when another node's images change),
and simulate."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest
import yaml

from plugins.imagelocality import (
    MB,
    SPEC,
    ImageLocality,
    calculate_priority,
    node_images,
    normalized_image_name,
    pod_images,
)
from scheduler.api.model import Pod, pod_from
from scheduler.cache.cache import Cache, Snapshot
from scheduler.config.registry import PluginRef, PluginSpec
from scheduler.config.schedulerconfig import Profile
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    CycleState,
    FilterPlugin,
    NodeTokenPlugin,
    PreScorePlugin,
    QueuedPodInfo,
    ScoreNormalizer,
    ScorePlugin,
    SignPlugin,
    Status,
)
from scheduler.framework.runtime import Framework
from scheduler.simulate.simulation import simulate

Images = Sequence[tuple[Sequence[str], int]]  # (names, size in MiB)


def _node_raw(name: str, images: Images) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "images": [{"names": list(n), "sizeBytes": s * MB} for n, s in images],
        },
    }


def _cache(nodes: Mapping[str, Images]) -> Cache:
    c = Cache()
    for name, images in nodes.items():
        c.apply("Node", "ADDED", _node_raw(name, images))
    return c


def _pod(containers: Sequence[str] = (), init: Sequence[str] = (), volumes: Sequence[str] = (), name: str = "p") -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": img} for i, img in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": img} for i, img in enumerate(init)]
    if volumes:
        spec["volumes"] = [{"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(volumes)]
    return pod_from({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec})


def _scores(pod: Pod, snap: Snapshot, pl: ImageLocality | None = None) -> list[int]:
    pl = pl or ImageLocality()
    cs = CycleState(snap)
    return [pl.score(cs, pod, n) for n in snap.nodes]


# upstream's node image lists (sizes in MiB)
N403002000: Images = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300),
    (["gcr.io/2000:latest"], 2000),
]
N25010: Images = [(["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10)]
N60040900: Images = [(["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900)]
N300600900: Images = [(["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900)]
N400030: Images = [(["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30)]
N203040: Images = [(["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40)]
NONE: Images = []

CASES: list[tuple[str, Pod, dict[str, Images], list[int]]] = [
    (
        # node1: 40M/2 < 23M => 0; node2: 100 * (250M/2 - 23M) / (2000M - 23M) = 5
        "two images spread on two nodes, prefer the larger image one",
        _pod(["gcr.io/40", "gcr.io/250"]),
        {"node1": N403002000, "node2": N25010},
        [0, 5],
    ),
    (
        "two images on one node, prefer this node",
        _pod(["gcr.io/40", "gcr.io/300"]),
        {"node1": N403002000, "node2": N25010},
        [7, 0],
    ),
    ("if exceed limit, use limit", _pod(["gcr.io/10", "gcr.io/4000"]), {"node1": N400030, "node2": N25010}, [100, 0]),
    (
        "if exceed limit, use limit (with node which has no images present)",
        _pod(["gcr.io/10", "gcr.io/4000"]),
        {"node1": N400030, "node2": N25010, "node3": NONE},
        [66, 0, 0],
    ),
    (
        "pod with multiple large images, node2 is preferred",
        _pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
        {"node1": N60040900, "node2": N300600900, "node3": NONE},
        [32, 36, 0],
    ),
    ("pod with multiple small images", _pod(["gcr.io/30", "gcr.io/40"]), {"node1": N203040, "node2": N400030}, [1, 0]),
    (
        "pod with ImageVolume",
        _pod(["gcr.io/30"], volumes=["gcr.io/300"]),
        {"node1": N300600900, "node2": N400030},
        [6, 0],
    ),
    (
        "same images as ImageVolume pod but as regular container images",
        _pod(["gcr.io/30", "gcr.io/300"]),
        {"node1": N300600900, "node2": N400030},
        [6, 0],
    ),
    (
        "include InitContainers: two images spread on two nodes, prefer the larger image one",
        _pod(["gcr.io/30"], init=["gcr.io/300"]),
        {"node1": N403002000, "node2": N203040},
        [6, 0],
    ),
    # --- beyond upstream's list ---
    (
        # a tagged name matches as is; 300M on 1 of 1 node: 100 * (300M - 23M) / (1000M - 23M) = 28
        "tagged image name",
        _pod(["gcr.io/300:v1"]),
        {"node1": N403002000},
        [28],
    ),
    (
        # node names are not normalised: a node reporting "gcr.io/40" (no tag) does not match "gcr.io/40:latest"
        "node image without tag does not match",
        _pod(["gcr.io/40"]),
        {"node1": [(["gcr.io/40"], 900)]},
        [0],
    ),
    ("pod without images on the node", _pod(["nginx"]), {"node1": N403002000}, [0]),
]


@pytest.mark.parametrize(("name", "pod", "nodes", "want"), CASES, ids=[c[0] for c in CASES])
def test_image_locality_priority(name: str, pod: Pod, nodes: dict[str, Images], want: list[int]) -> None:
    assert _scores(pod, _cache(nodes).snapshot()) == want


@pytest.mark.parametrize(
    ("image", "want"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:" + hashlib.sha256(b"root").hexdigest(), "root@sha256:" + hashlib.sha256(b"root").hexdigest()),
    ],
)
def test_normalized_image_name(image: str, want: str) -> None:
    assert normalized_image_name(image) == want


def test_signature() -> None:
    pl, cs = ImageLocality(), CycleState(None)  # type: ignore[arg-type]
    assert pl.sign(cs, _pod([])) == ()
    assert pl.sign(cs, _pod(["myimage"])) == ("myimage:latest",)
    assert pl.sign(cs, _pod(["zmyimage", "myimage"])) == ("myimage:latest", "zmyimage:latest")
    # the image count is part of the score (1000M x count), so repeats and image volumes count
    assert pl.sign(cs, _pod(["a", "a"])) != pl.sign(cs, _pod(["a"]))
    assert pl.sign(cs, _pod(["a"], volumes=["b"])) == pl.sign(cs, _pod(["a", "b"]))


def test_pod_images_order_and_memo() -> None:
    pod = _pod(["c"], init=["i"], volumes=["v:1"])
    assert pod_images(pod) == ("i:latest", "c:latest", "v:1")
    assert pod_images(pod) is pod_images(pod)


def test_node_images_first_size_wins_and_memo() -> None:
    c = _cache({"n": [(["a:1", "b:1"], 100), (["a:1"], 5)]})
    node = c.snapshot().nodes[0].node
    assert node_images(node) == {"a:1": 100 * MB, "b:1": 100 * MB}
    assert node_images(node) is node_images(node)


def test_calculate_priority_bounds() -> None:
    assert calculate_priority(0, 1) == 0
    assert calculate_priority(23 * MB, 1) == 0
    assert calculate_priority(1000 * MB, 1) == MAX_NODE_SCORE
    assert calculate_priority(5000 * MB, 2) == MAX_NODE_SCORE
    assert calculate_priority(0, 0) == 0  # no image at all


def test_spread_comes_from_the_whole_snapshot() -> None:
    """The same node scores less when more nodes have its image (numNodes / totalNodes)."""
    pod = _pod(["big"])
    img: Images = [(["big:latest"], 900)]
    alone = _scores(pod, _cache({"a": img, "b": NONE, "c": NONE}).snapshot())
    everywhere = _scores(pod, _cache({"a": img, "b": img, "c": img}).snapshot())
    assert alone == [28, 0, 0]  # 900M / 3 = 300M: 100 * 277 / 977
    assert everywhere == [89, 89, 89]  # 900M: 100 * 877 / 977


def test_spread_generation_changes_only_with_counts() -> None:
    c = _cache({"a": [(["x:1"], 100)], "b": NONE})
    pl = ImageLocality()
    s1 = pl.spread(c.snapshot())
    # a pod placed on b: a new NodeInfo, the same Node objects: the same table
    c.apply("Pod", "ADDED", {"metadata": {"name": "q", "namespace": "d"}, "spec": {"nodeName": "b", "containers": []}})
    assert pl.spread(c.snapshot()) is s1
    # b updated without image change: table rebuilt, same generation
    c.apply("Node", "MODIFIED", {**_node_raw("b", NONE), "metadata": {"name": "b", "labels": {"x": "y"}}})
    s2 = pl.spread(c.snapshot())
    assert s2.generation == s1.generation
    # b gains the image: new generation
    c.apply("Node", "MODIFIED", _node_raw("b", [(["x:1"], 100)]))
    s3 = pl.spread(c.snapshot())
    assert s3.generation == s1.generation + 1 and s3.counts == {"x:1": 2} and s3.total == 2
    # a node added (total changes): new generation
    c.apply("Node", "ADDED", _node_raw("c", NONE))
    assert pl.spread(c.snapshot()).generation == s1.generation + 2


# --- reuse between equal pods -------------------------------------------------------------------------------


class _Sorter:
    name: ClassVar[str] = "Sorter"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class _Binder:
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node: str, api: Any) -> Status:
        return Status.ok()


def _framework() -> Framework:
    reg = {
        "Sorter": PluginSpec("Sorter", lambda a: _Sorter(), frozenset({"queueSort"})),
        "Binder": PluginSpec("Binder", lambda a: _Binder(), frozenset({"bind"})),
        SPEC.name: SPEC,
    }
    plugins = {
        "queueSort": (PluginRef("Sorter"),),
        "bind": (PluginRef("Binder"),),
        "score": (PluginRef(SPEC.name, 1),),
    }
    return Framework(Profile("t", plugins), reg)


def _run_score(fw: Framework, snap: Snapshot, pod: Pod) -> dict[str, int]:
    cs = CycleState(snap)
    sig = fw.signature(cs, pod)
    assert sig is not None
    return {s.name: s.score for s in fw.run_score(cs, pod, snap.nodes, sig)}


def test_reused_score_does_not_go_stale_when_another_node_changes() -> None:
    """Node b's NodeInfo stays the same object when node a gains b's image, yet b's score must change:
    the image is now on 2 of 2 nodes instead of 1 of 2, so its scaled size (and b's score) rises."""
    big: Images = [(["big:latest"], 900)]
    c = _cache({"a": NONE, "b": big})
    fw = _framework()
    first = _run_score(fw, c.snapshot(), _pod(["big"], name="p1"))
    assert first == {"a": 0, "b": 43}  # 900M / 2 = 450M: 100 * 427 / 977
    again = _run_score(fw, c.snapshot(), _pod(["big"], name="p2"))
    assert again == first and fw.memo_stats["score_hits"] == 2  # equal pods, nothing changed: reused
    b_info = c.snapshot().node_map["b"]
    c.apply("Node", "MODIFIED", _node_raw("a", big))
    snap = c.snapshot()
    assert snap.node_map["b"] is b_info  # b's NodeInfo did not change
    assert _run_score(fw, snap, _pod(["big"], name="p3")) == {"a": 89, "b": 89}


def test_reused_score_follows_a_node_removal() -> None:
    big: Images = [(["big:latest"], 900)]
    c = _cache({"a": big, "b": big, "c": NONE})
    fw = _framework()
    # 900M * 2/3 = 600M: 100 * 577 / 977 = 59
    assert _run_score(fw, c.snapshot(), _pod(["big"], name="p1")) == {"a": 59, "b": 59, "c": 0}
    c.apply("Node", "DELETED", _node_raw("c", NONE))  # 2 of 2 nodes now
    assert _run_score(fw, c.snapshot(), _pod(["big"], name="p2")) == {"a": 89, "b": 89}


def test_spec_points() -> None:
    inst = SPEC.factory({})
    assert isinstance(inst, ScorePlugin) and isinstance(inst, SignPlugin) and isinstance(inst, NodeTokenPlugin)
    assert not isinstance(inst, PreScorePlugin) and not isinstance(inst, FilterPlugin)
    assert not isinstance(inst, ScoreNormalizer)
    assert SPEC.points == frozenset({"score"})
    assert SPEC.validate_args is not None and SPEC.validate_args({}, "args") == []


# --- simulate ---------------------------------------------------------------------------------------------

SIM = """
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
  images:
  - names: [registry.example.com/tools/busybox:1.36]
    sizeBytes: 4000000
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
  images:
  - names: ["nvcr.io/nvidia/pytorch@sha256:aaaa", nvcr.io/nvidia/pytorch:24.05-py3]
    sizeBytes: 9500000000
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  schedulerName: dra-scheduler
  containers:
  - {name: c, image: "nvcr.io/nvidia/pytorch:24.05-py3", resources: {requests: {cpu: "1", memory: 1Gi}}}
"""


def test_simulate_prefers_the_node_with_the_large_image() -> None:
    """All else equal (a tie would go to node-a, the first node), the pod lands where its 9.5 GB image is."""
    objs = [o for o in yaml.safe_load_all(SIM) if o]
    res = asyncio.run(simulate(objs))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    assert pods["trainer"]["spec"]["nodeName"] == "node-b"
