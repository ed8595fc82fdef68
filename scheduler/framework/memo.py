"""Bounded memos for plugins of a scheduler that runs for weeks.

A memo keyed by a node's *state* (its object and a revision) gains an entry every time the node changes, and the
old ones are never asked for again: a plain dict keyed by ``(node, revision, ...)`` grows with every pod placed or
deleted (under churn, tens of KB per pod) until some size cap clears it. :class:`NodeStateMemo` keeps, per node, the
entries of the node's current state only: a new state replaces the node's entries, so the memo holds at most
``nodes x keys per node`` entries, whatever the churn.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class NodeStateMemo(Generic[V]):
    """``(node name, node state, key) -> value``, keeping only each node's latest state.

    ``state`` is compared by identity for its first part (the immutable Node object: a new object is a new node
    even under a recycled name) and by equality for the rest (a revision). At most ``per_node`` keys are kept for
    one node state (oldest dropped), so keys unique to one pod (its own claim's signature) stay bounded too."""

    __slots__ = ("_nodes", "_retained", "per_node")

    def __init__(self, per_node: int = 256) -> None:
        self._nodes: dict[str, tuple[object, Hashable, dict[Hashable, V]]] = {}
        self.per_node = per_node
        self._retained = NodeNameTables(self._nodes)

    def get(self, node: str, obj: object, rev: Hashable, key: Hashable) -> V | None:
        got = self._nodes.get(node)
        if got is None or got[0] is not obj or got[1] != rev:
            return None
        return got[2].get(key)

    def put(self, node: str, obj: object, rev: Hashable, key: Hashable, value: V) -> None:
        got = self._nodes.get(node)
        if got is None or got[0] is not obj or got[1] != rev:
            got = self._nodes[node] = (obj, rev, {})
        entries = got[2]
        if len(entries) >= self.per_node and key not in entries:
            del entries[next(iter(entries))]
        entries[key] = value

    def retain(self, nodes: Sequence[str]) -> None:
        """Forget the nodes not in ``nodes`` (deleted ones): :meth:`NodeNameTables.retain`."""
        self._retained.retain(nodes)

    def __len__(self) -> int:
        """Entries held, over all nodes."""
        return sum(len(e[2]) for e in self._nodes.values())

    def node_count(self) -> int:
        return len(self._nodes)


class NodeNameTables:
    """Per-node caches (dicts keyed by node name) of a plugin, forgotten for the nodes that leave the cluster.

    A cache keyed by node name that is only ever overwritten keeps an entry, and whatever it holds (a Node, its
    slices, an old ledger), for every node name it ever saw: on a cluster whose autoscaler makes nodes under new
    names, that grows for as long as the process runs. :meth:`retain` is cheap to call every cycle with the
    snapshot's node name tuple: it only looks when that is another object than last time (the node set changed).
    """

    __slots__ = ("_names", "_tables")

    def __init__(self, *tables: dict[str, Any]) -> None:
        self._tables = tables
        self._names: object = None

    def retain(self, nodes: Sequence[str]) -> None:
        if nodes is self._names:
            return
        self._names = nodes
        keep = set(nodes)
        for table in self._tables:
            for name in [n for n in table if n not in keep]:
                del table[name]

