"""ImageLocality: prefer nodes that already have the pod's container images.

kube-scheduler v1.37.2 (``pkg/scheduler/framework/plugins/imagelocality/image_locality.go``; image
states from ``pkg/scheduler/backend/cache/cache.go`` ``addNodeImageStates`` and
``pkg/scheduler/backend/cache/snapshot.go``):

* A node's images are ``status.images[]``: every name in ``names`` with the entry's ``sizeBytes`` (parsed
  once per Node object into ``Node.memo``; a name listed twice keeps its first size, as the cache does).
* The pod's images: init containers, containers, and image volumes (``spec.volumes[].image.reference``),
  each normalised by ``normalizedImageName``: ``:latest`` is appended when the name has no tag after its
  last ``/`` (``root`` -> ``root:latest``, ``gcr.io:5000/root`` -> ``gcr.io:5000/root:latest``; a name
  with a tag or a digest is kept). Node names are compared as reported, not normalised.
* ``scaledImageScore``: an image present on the node contributes ``int(size * numNodes / totalNodes)``,
  ``numNodes`` = nodes of the snapshot that list that name, ``totalNodes`` = nodes in the snapshot (the
  spread damps the "node heating" of a widely cached image).
* ``calculatePriority``: the sum clamped to ``[23 MiB, 1000 MiB x imageCount]`` (``imageCount`` = init
  containers + containers + image volumes) and scaled linearly to 0..100 (Go integer division).
  Score only (no PreScore, no NormalizeScore).

Deliberate difference: upstream's snapshot copies ``numNodes`` into a NodeInfo when *that* node last
changed, so an unchanged node can carry a stale count; here the counts always come from the current
snapshot (what upstream's own test snapshot, ``cache.NewSnapshot``, computes).

Reuse between equal pods: the score of node B depends on how many *other* nodes have B's images, which
B's NodeInfo does not capture (a node update replaces only that node's NodeInfo). So the spread table is
built per snapshot (rebuilt only when some Node object was added, removed or replaced) and carries a
generation that changes whenever a count or the node total changes; the plugin's node token
(NodeTokenPlugin) is that generation, and the signature is the pod's normalised image names.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import MAX_NODE_SCORE, CycleState

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo, Snapshot

NAME = "ImageLocality"
_STATE_KEY = "ImageLocality/spread"

MB = 1024 * 1024
_NODE_OF = operator.attrgetter("node")
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """``normalizedImageName``: append ``:latest`` when there is no tag (or digest) after the last ``/``."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(pod: Pod) -> tuple[str, ...]:
    """Normalised images of the pod's init containers, containers and image volumes (with repeats),
    parsed once per Pod object."""
    images: tuple[str, ...] | None = pod.memo.get(NAME)
    if images is None:
        spec = pod.raw.get("spec")
        images = pod.memo[NAME] = images_of_spec(spec if isinstance(spec, Mapping) else {})
    return images


def images_of_spec(spec: Mapping[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            if isinstance(c, Mapping):
                img = c.get("image")
                out.append(normalized_image_name(img if isinstance(img, str) else ""))
    for v in spec.get("volumes") or ():
        if isinstance(v, Mapping) and isinstance(v.get("image"), Mapping):
            ref = v["image"].get("reference")
            out.append(normalized_image_name(ref if isinstance(ref, str) else ""))
    return tuple(out)


def node_images(node: Node) -> Mapping[str, int]:
    """Image name -> size in bytes from ``status.images`` (first size of a repeated name), memoised."""
    images: Mapping[str, int] | None = node.memo.get(NAME)
    if images is None:
        out: dict[str, int] = {}
        status = node.raw.get("status")
        for img in (status.get("images") if isinstance(status, Mapping) else None) or ():
            if not isinstance(img, Mapping):
                continue
            size = img.get("sizeBytes")
            size = size if isinstance(size, int) and not isinstance(size, bool) else 0
            for name in img.get("names") or ():
                if isinstance(name, str):
                    out.setdefault(name, size)
        images = node.memo[NAME] = out
    return images


@dataclass(frozen=True, slots=True)
class Spread:
    """How many nodes of a snapshot list each image name, and how many nodes there are."""

    generation: int
    counts: Mapping[str, int]
    total: int


def count_images(nodes: Sequence[Node]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in nodes:
        for name in node_images(n):
            counts[name] = counts.get(name, 0) + 1
    return counts


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """``scaledImageScore``: the size scaled by the fraction of nodes that have the image."""
    spread = float(num_nodes) / float(total_nodes)
    return int(float(size) * spread)


def calculate_priority(sum_scores: int, image_count: int) -> int:
    """``calculatePriority``: the clamped sum scaled to 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def image_locality_score(images: Sequence[str], node: Node, spread: Spread) -> int:
    """``sumImageScores`` + ``calculatePriority`` for one node."""
    have = node_images(node)
    total = max(spread.total, 1)
    s = 0
    for name in images:
        size = have.get(name)
        if size is not None:
            s += scaled_image_score(size, spread.counts.get(name, 1), total)
    return calculate_priority(s, len(images))


class ImageLocality:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args
        self._nodes: tuple[NodeInfo, ...] | None = None
        self._node_objs: tuple[Node, ...] = ()
        self._spread = Spread(0, {}, 0)
        self._state: CycleState | None = None
        self._state_spread = self._spread
        self._objects_key: tuple[int, int] | None = None  # (cache log, Node objects generation) of _spread

    def spread(self, snapshot: Snapshot) -> Spread:
        """The spread table of ``snapshot`` (rebuilt only when a Node object changed; its generation
        changes only when a count or the node total did)."""
        log = getattr(snapshot, "node_log", None)
        if log is not None and log.source:  # a cache's snapshot: Node objects change with this generation only
            key = (log.source, snapshot.node_objects_generation)
            if key == self._objects_key:
                return self._spread
            self._objects_key = key
        elif snapshot.nodes is self._nodes:
            return self._spread
        # Once per cycle over all nodes: C-level map/is_ (a pod placed replaces a NodeInfo, not its Node).
        objs = tuple(map(_NODE_OF, snapshot.nodes))
        self._nodes = snapshot.nodes
        old = self._spread
        if len(objs) == len(self._node_objs) and all(map(operator.is_, objs, self._node_objs)):
            return old
        self._node_objs = objs
        counts = count_images(objs)
        if counts != old.counts or len(objs) != old.total:
            self._spread = Spread(old.generation + 1, counts, len(objs))
        return self._spread

    def _cycle_spread(self, state: CycleState) -> Spread:
        if state is self._state:  # node_token / score run once per node per cycle
            return self._state_spread
        sp: Spread | None = state.read(_STATE_KEY)
        if sp is None:
            sp = self.spread(state.snapshot)
            state.write(_STATE_KEY, sp)
        self._state, self._state_spread = state, sp
        return sp

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        return image_locality_score(pod_images(pod), node.node, self._cycle_spread(state))

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return tuple(sorted(pod_images(pod)))

    def node_token(self, state: CycleState, node: NodeInfo) -> Hashable:
        if state is self._state:  # the common case, inlined: called for every node of every cycle
            return self._state_spread.generation
        return self._cycle_spread(state).generation

    def token_changes(self, state: CycleState, since: Hashable | None) -> tuple[Hashable, Any]:
        """One token for every node (the spread's generation): all of them changed, or none
        (scheduler/framework/batch.py)."""
        gen = self._cycle_spread(state).generation
        return gen, (() if since == gen else None)


SPEC = PluginSpec(name=NAME, factory=ImageLocality, points=frozenset({"score"}), validate_args=no_args)

__all__ = [
    "MAX_CONTAINER_THRESHOLD",
    "MB",
    "MIN_THRESHOLD",
    "NAME",
    "SPEC",
    "ImageLocality",
    "Spread",
    "calculate_priority",
    "image_locality_score",
    "node_images",
    "normalized_image_name",
    "pod_images",
    "scaled_image_score",
]
