"""Reuse of work between equal pods, taken as far as it goes without changing a single result.

kube-scheduler's cycle for a pod (kubernetes v1.37.2 ``pkg/scheduler/schedule_one.go``): Filter the nodes in
turn from where the previous cycle stopped (``nextStartNodeIndex``) until ``numFeasibleNodesToFind`` fit
(``percentageOfNodesToScore``: adaptively 50 - nodes/125 percent, at least 5% and 100 nodes), PreScore and
Score those, normalise each plugin's scores over them, and take the best. Upstream's opportunistic batching
(KEP-5598, ``pkg/scheduler/framework/runtime/batch.go``) keeps the sorted scores of the previous pod with the same
signature and hands the next one the runner-up, re-filtering only the node the previous pod took; it skips the
sampling, so a batched pod may land elsewhere than it would have alone.

Here nothing changes: a pod scheduled through a :class:`Batch` gets the node it would get if every plugin ran on
every node it looks at, in the same order (tests/test_batching.py checks this on mixed workloads). What is kept
per signature (an interned :meth:`Framework.signature`) is every node's Filter verdict and raw scores, in node
order; what is redone is only what changed:

* **Which nodes changed.** The snapshot's log of replaced NodeInfos (``Snapshot.changed_nodes_since``) and each
  token plugin's log of token changes (``token_changes``: DynamicResources' ledger revisions per node,
  ImageLocality's spread generation) name the nodes whose verdict may differ; they become *unknown*. After a
  pod is bound that is typically the one node it went to.
* **The sample.** Known-feasible positions are a sorted list, unknown ones another; the walk from
  ``nextStartNodeIndex`` counts feasible nodes by bisection and filters only the unknown nodes it meets, in
  order, until it has enough: the same nodes, the same window, the same ``nextStartNodeIndex`` as a full walk.
* **Scores.** A node's raw scores (per set of active score plugins) are recomputed only when it changed and it
  is in a window. Plugins without NormalizeScore add a fixed per-node amount; plugins whose NormalizeScore is
  upstream's ``DefaultNormalizeScore`` (marked with :func:`scheduler.framework.helpers.max_normalized`) depend
  only on their raw score and the window's highest, computed at C speed over the window; any other
  normaliser gets the window's scores as ``run_score`` would give them.

A cycle thus costs the plugins' PreFilter/PreScore, the nodes that changed, and a few C-level passes over the
window's integers, instead of a Python loop over every node looked at. Preemption's nominated pods, a PreFilter
that restricts the nodes, a pod that cannot be signed or a token plugin without ``token_changes`` take the
per-node path (``Framework.filter_node``), which is exact too.
"""

from __future__ import annotations

import operator
import os
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduler.framework.helpers import max_normalization, min_max_normalization
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    Metrics,
    NodeTokenPlugin,
    ScoreNormalizer,
    Status,
)
from scheduler.framework.scoring import WeightedScorer, normalized_row

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

MAX_BATCHES = 256  # signatures kept (least recently used dropped): each holds a few lists as long as the nodes


@runtime_checkable
class NodeTokenChanges(Protocol):
    """Optional, with NodeTokenPlugin: the nodes whose ``node_token`` may have changed since ``since`` (a mark
    this method returned before, or None): ``(mark now, names)``, names None when not known (every node's token
    then counts as changed). A superset is fine; leaving out a node whose token changed gives stale results."""

    def token_changes(self, state: CycleState, since: Hashable | None) -> tuple[Hashable, Collection[str] | None]: ...


# A node's verdict: None (unknown: never filtered, or changed since), else its Filter status.
REUSED_REJECTIONS = "framework/reused-rejections"  # CycleState key: rejections lent by equal pods
_OK = Status.ok()


class BatchHost(Protocol):
    """What the batch runner uses of its :class:`~scheduler.framework.runtime.Framework` (which imports this
    module: the runner sees the framework through this protocol, not through its module)."""

    @property
    def _tokeners(self) -> Sequence[NodeTokenPlugin]: ...

    @property
    def scorers(self) -> Sequence[WeightedScorer]: ...

    @property
    def owners(self) -> dict[str, Pod]: ...

    @property
    def memo_stats(self) -> dict[str, int]: ...

    @property
    def metrics(self) -> Metrics: ...

    def run_filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status: ...

    def rejection_key(
        self, state: CycleState, old: Status, other: Pod | None, templates: dict[str, Any] | None = None
    ) -> Hashable: ...

    def renamed_rejection(self, state: CycleState, key: Hashable, pod: Pod, node: NodeInfo) -> Status: ...

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status: ...

    def _timed(self, point: str, start: float, status: Status) -> Status: ...


class _Scores:
    """Raw scores of one set of active score plugins, per node position, and which positions are stale."""

    __slots__ = (
        "active",
        "fast",
        "floors",
        "max_idx",
        "minmax_idx",
        "names",
        "raw",
        "reverse",
        "stale",
        "static",
        "static_idx",
        "weights",
    )

    def __init__(self, active: Sequence[WeightedScorer], n: int) -> None:
        self.active = list(active)
        self.names = tuple(ws.plugin.name for ws in active)
        self.weights = [ws.weight for ws in active]
        self.raw: list[list[int]] = [[0] * n for _ in active]
        self.static = [0] * n  # sum of weight x raw over the plugins without NormalizeScore
        self.stale: list[int] = list(range(n))  # positions whose raw scores are not current (sorted)
        self.static_idx: list[int] = []
        self.max_idx: list[int] = []
        self.reverse: list[bool] = []
        self.minmax_idx: list[int] = []  # plugins normalised min-max with a span floor (helpers.min_max_normalized)
        self.floors: list[int] = []
        self.fast = True  # False: some plugin normalises otherwise, or a raw score is out of range
        for i, ws in enumerate(active):
            if not isinstance(ws.plugin, ScoreNormalizer):
                self.static_idx.append(i)
                continue
            floor = min_max_normalization(ws.plugin)
            if floor is not None:
                self.minmax_idx.append(i)
                self.floors.append(floor)
                continue
            rev = max_normalization(ws.plugin)
            if rev is None:
                self.fast = False
            else:
                self.max_idx.append(i)
                self.reverse.append(rev)

    def mark_stale(self, p: int) -> None:
        stale = self.stale
        i = bisect_left(stale, p)
        if i == len(stale) or stale[i] != p:
            stale.insert(i, p)

    def rescore(self, state: CycleState, pod: Pod, p: int, info: NodeInfo) -> None:
        total = 0
        for i, ws in enumerate(self.active):
            v = ws.plugin.score(state, pod, info)
            self.raw[i][p] = v
        for i in self.static_idx:
            v = self.raw[i][p]
            if not 0 <= v <= MAX_NODE_SCORE:
                self.fast = False  # run_score's range check must see it (and raise) exactly when it would
            total += v * self.weights[i]
        for i in self.max_idx:
            if self.raw[i][p] < 0:
                self.fast = False
        self.static[p] = total


class Batch:
    """Everything reusable for one signature, by node position (the snapshot's ``node_names`` order)."""

    __slots__ = (
        "by_uid",
        "dirty",
        "feas",
        "groups",
        "kind",
        "names",
        "node_mark",
        "owner",
        "pos",
        "scores",
        "source",
        "status",
        "token_marks",
        "unknown",
    )

    def __init__(self, names: tuple[str, ...], source: int, tokens: int) -> None:
        n = len(names)
        self.names = names
        self.source = source
        self.pos: dict[str, int] | None = None  # name -> position, built on first change
        self.node_mark: Any = None
        self.token_marks: list[Any] = [None] * tokens
        self.status: list[Status | None] = [None] * n
        # the uid of the pod whose Filter gave the status (its messages name it; Framework.owners has the pod)
        self.owner: list[str | None] = [None] * n
        # (no NodeInfo is kept: a known position's node is unchanged since it was filtered, so the snapshot's
        # node_map has that very object; keeping it here kept old versions, and their pods, alive)
        self.feas: list[int] = []  # positions known to fit, sorted
        self.unknown: list[int] = list(range(n))  # positions to filter when a walk reaches them, sorted
        self.scores: dict[tuple[str, ...], _Scores] = {}
        self._reset_refusal()

    def _reset_refusal(self) -> None:
        """The rejections grouped as ``Framework.own_rejections`` renames them (see ``BatchRunner._refusal``):
        per rejected position its (rename key, owner uid), the node names per key and per owner, and the positions
        whose status changed since the groups were made."""
        self.kind: dict[int, tuple[Hashable, str]] = {}
        self.groups: dict[Hashable, set[str]] = {}
        self.by_uid: dict[str, set[str]] = {}
        self.dirty: set[int] = set()

    def forget(self, names: Collection[str] | None) -> None:
        """The verdicts of ``names`` (None: all) are no longer known."""
        if names is None:
            n = len(self.names)
            self.status = [None] * n
            self.owner = [None] * n
            self.feas = []
            self.unknown = list(range(n))
            self.scores.clear()
            self._reset_refusal()
            return
        if not names:
            return
        pos = self.pos
        if pos is None:
            pos = self.pos = {name: i for i, name in enumerate(self.names)}
        status, feas, unknown, owner = self.status, self.feas, self.unknown, self.owner
        for name in names:
            p = pos.get(name)
            if p is None:
                continue
            st = status[p]
            for s in self.scores.values():
                s.mark_stale(p)
            if st is None:
                continue
            self.dirty.add(p)
            status[p] = None
            owner[p] = None
            if st.code == Code.SUCCESS:
                i = bisect_left(feas, p)
                if i < len(feas) and feas[i] == p:
                    del feas[i]
            insort(unknown, p)


class BatchRunner:
    """The batches of one framework (profile) and the walk that uses them (see the module docstring)."""

    def __init__(self, fw: BatchHost) -> None:
        self.fw = fw
        self.batches: dict[Hashable, Batch] = {}
        self.tokeners: list[NodeTokenChanges] = []
        self.usable = True
        # a refused pod's statuses from the groups kept per batch (_refusal), else renamed node by node
        # (_statuses, then Framework.own_rejections); the same statuses either way
        self.refusals = os.environ.get("DRA_SCHEDULER_REFUSALS", "groups") == "groups"
        for p in fw._tokeners:
            if isinstance(p, NodeTokenChanges):
                self.tokeners.append(p)
            else:
                self.usable = False

    def _batch(self, state: CycleState, sig: Hashable) -> Batch:
        snap = state.snapshot
        names = snap.node_names
        source = snap.node_log.source
        b = self.batches.pop(sig, None)
        if b is None or b.names is not names or b.source != source or not source:
            b = Batch(names, source, len(self.tokeners))
        self.batches[sig] = b  # most recently used last
        if len(self.batches) > MAX_BATCHES:
            del self.batches[next(iter(self.batches))]
        b.node_mark, changed = snap.changed_nodes_since(b.node_mark)
        b.forget(changed)
        for i, p in enumerate(self.tokeners):
            b.token_marks[i], changed = p.token_changes(state, b.token_marks[i])
            b.forget(changed)
        return b

    def find(
        self, state: CycleState, pod: Pod, sig: Hashable, start: int, want_for: Callable[[int], int]
    ) -> tuple[int, tuple[str | None, Status | None, set[str]] | dict[str, Status]]:
        """``(nextStartNodeIndex after this cycle, outcome)``; the outcome is ``(node, status, rejector plugins)``
        as ``Scheduler._find_node`` returns it, or, when no node fits, every node's status (in the order a walk
        met them) for the caller's PostFilter and FitError."""
        fw = self.fw
        t0 = time.perf_counter()
        b = self._batch(state, sig)
        n = len(b.names)
        want = want_for(n)
        offset = start % n
        node_map = state.snapshot.node_map
        status, owner, feas, unknown = b.status, b.owner, b.feas, b.unknown
        uid = pod.uid
        fw.owners[uid] = pod  # its statuses may be lent to equal pods while it waits (Framework.forget_pod)
        run_filter = fw.run_filter
        win: list[int] = []
        found = 0
        checked = n
        evaluated = 0
        for lo, hi in ((offset, n), (0, offset)):
            cur = lo
            while cur < hi and found < want:
                iu = bisect_left(unknown, cur)
                u = unknown[iu] if iu < len(unknown) and unknown[iu] < hi else hi
                a = bisect_left(feas, cur)
                z = bisect_left(feas, u, a)
                if found + z - a >= want:
                    take = want - found
                    win += feas[a : a + take]
                    found = want
                    last = win[-1]
                    checked = (last - offset if last >= offset else last + n - offset) + 1
                    break
                win += feas[a:z]
                found += z - a
                if u == hi:
                    break
                name = b.names[u]
                info = node_map[name]
                st = run_filter(state, pod, info)
                evaluated += 1
                if st.code == Code.ERROR:  # never kept: the pod goes to backoff, the node is filtered again
                    fw.memo_stats["filter_misses"] += evaluated
                    fw.metrics.observe_extension_point("Filter", Code.ERROR, time.perf_counter() - t0)
                    return start, (None, st, {st.plugin})
                del unknown[iu]
                status[u], owner[u] = st, uid
                b.dirty.add(u)
                if st.code == Code.SUCCESS:
                    insort(feas, u, a)
                    win.append(u)
                    found += 1
                    if found == want:
                        checked = (u - offset if u >= offset else u + n - offset) + 1
                        break
                cur = u + 1
            if found >= want:
                break
        fw.memo_stats["filter_misses"] += evaluated
        fw.memo_stats["filter_hits"] += checked - evaluated
        fw.metrics.observe_extension_point("Filter", Code.SUCCESS, time.perf_counter() - t0)
        next_start = (offset + checked) % n
        if not win:
            if self.refusals:
                return next_start, self._refusal(state, pod, b)
            return next_start, self._statuses(state, pod, b, offset)
        if len(win) == 1:
            return next_start, (b.names[win[0]], None, set())
        get = operator.itemgetter(*win)
        names = b.names
        nodes: list[NodeInfo] = [node_map[names[i]] for i in win]
        st = fw.run_pre_score(state, pod, nodes)
        if not st.is_success:
            return next_start, (None, st, {st.plugin})
        best = self._best(state, pod, b, win, get, nodes, offset, checked)
        return next_start, (b.names[best], None, set())

    def _statuses(self, state: CycleState, pod: Pod, b: Batch, offset: int) -> dict[str, Status]:
        """Every node's status in walk order; those another pod's Filter gave are noted for ``own_rejections``."""
        n = len(b.names)
        out: dict[str, Status] = {}
        reused: dict[str, Pod | None] = {}  # node -> the pod whose Filter gave its status
        for p in (*range(offset, n), *range(offset)):
            st = b.status[p]
            if st is None or st.code == Code.SUCCESS:
                continue
            name = b.names[p]
            out[name] = st
            uid = b.owner[p]
            if uid != pod.uid:
                reused[name] = self.fw.owners.get(uid) if uid is not None else None
        if reused:
            state.write(REUSED_REJECTIONS, reused)
        return out

    def _refusal(self, state: CycleState, pod: Pod, b: Batch) -> dict[str, Status]:
        """Every node's status for ``pod``, which no node fits, as ``_statuses`` and ``Framework.own_rejections``
        together give them, from groups kept on the batch and updated only for the positions that changed.

        ``own_rejections`` gives every node whose rejection another pod's Filter made the status its
        ``rejection_key`` (the plugin's retarget template while that pod is known, else the status's content)
        stands for, renamed once per key for this pod (``renamed_rejection``: the template filled, else the
        filters run on the first such node by name); the pod's own rejections stay. Here the positions are kept
        grouped by (key, owner) across cycles, so a refused pod costs its changed nodes and one renaming per key,
        plus building the answer from the groups at C speed. A group renamed by filtering again (its owner gone,
        no template) is then owned by this pod, which Filter said that status for, so the next equal pod fills
        the pod's template instead of filtering again."""
        fw = self.fw
        owners = fw.owners
        status, owner, names = b.status, b.owner, b.names
        pos = b.pos
        if pos is None:
            pos = b.pos = {name: i for i, name in enumerate(names)}
        dirty = b.dirty
        # (a key made while its owner was known stays valid when the owner goes: the plugin's template is kept on
        # the status and no longer needs the pod; own_rejections, which has no key kept, filters again then)
        kind, groups, by_uid = b.kind, b.groups, b.by_uid
        templates: dict[str, Any] = {}
        for p in dirty:
            name = names[p]
            was = kind.pop(p, None)
            if was is not None:
                self._ungroup(b, name, was)
            st = status[p]
            if st is None or st.code == Code.SUCCESS:
                continue
            uid = owner[p]
            assert uid is not None
            k = (fw.rejection_key(state, st, owners.get(uid), templates), uid)
            kind[p] = k
            groups.setdefault(k[0], set()).add(name)
            by_uid.setdefault(uid, set()).add(name)
        dirty.clear()
        own = by_uid.get(pod.uid, set())
        out: dict[str, Status] = {}
        node_map = state.snapshot.node_map
        for key, grp in list(groups.items()):
            lent = grp - own if own else set(grp)  # a copy: _adopt regroups its nodes
            if lent:
                first = min(lent)
                st = fw.renamed_rejection(state, key, pod, node_map[first])
                if st.is_success:  # as own_rejections: the lent statuses stay
                    for name in lent:
                        out[name] = status[pos[name]]  # type: ignore[assignment]
                else:
                    out.update(dict.fromkeys(lent, st))
                    if st.code != Code.ERROR and isinstance(key, tuple) and key and key[0] != "template":
                        self._adopt(state, pod, b, lent, st, templates)
            if own:
                for name in grp & own:
                    out[name] = status[pos[name]]  # type: ignore[assignment]
        return out

    @staticmethod
    def _ungroup(b: Batch, name: str, was: tuple[Hashable, str]) -> None:
        key, uid = was
        grp = b.groups.get(key)
        if grp is not None:
            grp.discard(name)
            if not grp:
                del b.groups[key]
        names = b.by_uid.get(uid)
        if names is not None:
            names.discard(name)
            if not names:
                del b.by_uid[uid]

    def _adopt(
        self, state: CycleState, pod: Pod, b: Batch, lent: set[str], st: Status, templates: dict[str, Any]
    ) -> None:
        """The nodes of ``lent`` were renamed for ``pod`` by filtering one of them again (``st``): they now hold
        ``st`` as ``pod``'s, under the key ``st`` has for a pod that is known."""
        uid = pod.uid
        k = (self.fw.rejection_key(state, st, pod, templates), uid)
        pos, status, owner, kind = b.pos, b.status, b.owner, b.kind
        assert pos is not None
        for name in lent:
            p = pos[name]
            was = kind.get(p)
            if was is not None:
                self._ungroup(b, name, was)
            status[p], owner[p], kind[p] = st, uid, k
        b.groups.setdefault(k[0], set()).update(lent)
        b.by_uid.setdefault(uid, set()).update(lent)

    def _best(
        self,
        state: CycleState,
        pod: Pod,
        b: Batch,
        win: list[int],
        get: Callable[[Sequence[Any]], Any],
        nodes: list[NodeInfo],
        offset: int,
        checked: int,
    ) -> int:
        """The position of the best node of the window (the first in walk order among equals), as ``run_score``
        and ``max`` over it would choose."""
        fw = self.fw
        t0 = time.perf_counter()
        skip = state.skip_score
        active = [ws for ws in fw.scorers if ws.plugin.name not in skip]
        key = tuple(ws.plugin.name for ws in active)
        sc = b.scores.get(key)
        if sc is None:
            sc = b.scores[key] = _Scores(active, len(b.names))
        # (re)score the stale positions of the walked range [offset, offset + checked) that are in the window
        n = len(b.names)
        end = offset + checked
        status, names, node_map = b.status, b.names, state.snapshot.node_map
        rescored = 0
        for lo, hi in ((offset, min(end, n)), (0, end - n)):
            if hi <= lo:
                continue
            stale = sc.stale
            a = bisect_left(stale, lo)
            z = bisect_left(stale, hi, a)
            if a == z:
                continue
            for p in stale[a:z]:
                st = status[p]
                if st is not None and st.code == Code.SUCCESS:
                    sc.rescore(state, pod, p, node_map[names[p]])
                    rescored += 1
            del stale[a:z]
        k = len(active)
        fw.memo_stats["score_misses"] += rescored * k
        fw.memo_stats["score_hits"] += (len(win) - rescored) * k
        if not sc.fast:
            return self._best_generic(state, pod, b, sc, win, get, t0)
        totals: list[int] = list(get(sc.static))
        add = operator.add
        for j, i in enumerate(sc.max_idx):
            row = get(sc.raw[i])
            m = max(row)
            if m <= 0:
                continue  # every node of the window gets the same (0, or MAX_NODE_SCORE reversed)
            w, rev = sc.weights[i], sc.reverse[j]
            table = {
                v: w * (MAX_NODE_SCORE - MAX_NODE_SCORE * v // m if rev else MAX_NODE_SCORE * v // m) for v in set(row)
            }
            totals = list(map(add, totals, map(table.__getitem__, row)))
        for j, i in enumerate(sc.minmax_idx):
            row = get(sc.raw[i])
            lo, hi = min(row), max(row)
            if hi == lo:
                continue  # every node of the window gets 0
            w, span = sc.weights[i], max(hi - lo, sc.floors[j], 1)
            table = {v: w * ((v - lo) * MAX_NODE_SCORE // span) for v in set(row)}
            totals = list(map(add, totals, map(table.__getitem__, row)))
        if state.record_plugin_metrics:
            for ws in active:
                fw.metrics.observe_plugin(ws.plugin.name, "Score", Code.SUCCESS, 0.0)
        fw._timed("Score", t0, _OK)
        best = max(totals)
        return win[totals.index(best)]

    def _best_generic(
        self,
        state: CycleState,
        pod: Pod,
        b: Batch,
        sc: _Scores,
        win: list[int],
        get: Callable[[Sequence[Any]], Any],
        t0: float,
    ) -> int:
        """``Framework.run_score`` on the window, from the kept raw scores (its normalisation, checks, errors)."""
        fw = self.fw
        names = [b.names[p] for p in win]
        totals = [0] * len(win)
        for i, ws in enumerate(sc.active):
            p = ws.plugin
            t1 = time.perf_counter()
            row = normalized_row(p, state, pod, names, list(get(sc.raw[i])))
            w = ws.weight
            for j, v in enumerate(row):
                if v:
                    totals[j] += v * w
            if state.record_plugin_metrics:
                fw.metrics.observe_plugin(p.name, "Score", Code.SUCCESS, time.perf_counter() - t1)
        fw._timed("Score", t0, _OK)
        best = max(totals)
        return win[totals.index(best)]
