"""The pod nominator: which pending pods are nominated to which node (upstream ``backend/queue/nominator.go``,
kubernetes v1.37.2).

A pod is nominated to a node when preemption made room for it there (PostFilter's ``nominatedNodeName``),
or when its ``status.nominatedNodeName`` says so. While nominated, the pod's resources are held for it:
pods of equal or lower priority are filtered as if it already ran on that node
(:meth:`scheduler.framework.runtime.Framework.run_filter_with_nominated_pods`). The nomination ends when
the pod is bound or assumed, deleted, or its nomination is cleared.

The scheduler records its own nominations in memory at once (before the status write is echoed by the
watch); an update of the pod that carries no ``nominatedNodeName`` on either side keeps the in-memory one,
as upstream's ``UpdateNominatedPod`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.model import Pod

OVERRIDE = "Override"
NOOP = "Noop"


def status_nominated_node(pod: Pod) -> str:
    """``pod.status.nominatedNodeName`` ("" when absent)."""
    status = pod.raw.get("status")
    if not isinstance(status, dict):
        return ""
    v = status.get("nominatedNodeName")
    return v if isinstance(v, str) else ""


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}  # node -> pod uid -> latest pod object
        self._node_of: dict[str, str] = {}  # pod uid -> node

    def __len__(self) -> int:
        return len(self._node_of)

    def add(self, pod: Pod, node: str | None = None, mode: str = NOOP) -> None:
        """``AddNominatedPod``: Override nominates ``pod`` to ``node`` ("" clears); Noop takes the pod's status.
        A pod that is bound is never nominated."""
        self.delete(pod)
        name = (node or "") if mode == OVERRIDE else status_nominated_node(pod)
        if not name or pod.node_name:
            return
        self._node_of[pod.uid] = name
        self._by_node.setdefault(name, {})[pod.uid] = pod

    def update(self, old: Pod, new: Pod) -> None:
        """``UpdateNominatedPod``: refresh the pod object; keep an in-memory nomination when neither version
        carries ``status.nominatedNodeName``."""
        keep = None
        if not status_nominated_node(old) and not status_nominated_node(new):
            keep = self._node_of.get(old.uid)
        self.delete(old)
        if keep is not None:
            self.add(new, keep, OVERRIDE)
        else:
            self.add(new)

    def delete(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(pod.uid, None)
            if not pods:
                del self._by_node[node]

    def node_of(self, pod: Pod) -> str:
        return self._node_of.get(pod.uid, "")

    def pods_for_node(self, node: str) -> Sequence[Pod]:
        pods = self._by_node.get(node)
        return tuple(pods.values()) if pods else ()

    def has_pods(self) -> bool:
        return bool(self._node_of)
