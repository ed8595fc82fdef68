"""Topology-aware preemption (issue 10 item 4): goes beyond upstream kube-scheduler 1.37.2, whose preemption
(``pkg/scheduler/framework/preemption/preemption.go``, ``plugins/defaultpreemption/default_preemption.go``
``SelectVictimsOnNode``) knows nothing of device interconnect.

Active only when GpuTopology runs in the profile (its PreFilter leaves itself in the cycle state), the pod
allocates devices, and on a node its claims take at least two whole GPUs that GpuTopology models. Otherwise
nothing here runs and preemption is exactly upstream's (with GpuTopology disabled, or for CPU and one-GPU
preemptors, or on nodes without a topology model).

**Score of a victim set**: the topology plugin's own score of the device set the preemptor gets once the victims
are gone, :func:`plugins.topology.scoring.best_set_value` of the GPUs then free (bottleneck bandwidth of the best
k-GPU set, then fewer NUMA nodes spanned), k the whole GPUs its claims take in the dry run. The GPUs free after
the evictions are read from the dry run's device ledger view (a victim's claims free their GPUs only when no
surviving pod reserves them, ``plugins/dra/plugin.py`` ``remove_pod``).

1. **Inside a node** (:meth:`TopologyPreference.refine`, an extension of the reprieve step): upstream reprieves
   victims most important first and so picks one minimal victim set by importance order alone; victims of equal
   importance (equal priority and start time) are taken in the node's pod order, blind to which GPUs each one
   frees. After upstream's choice U, the minimal GPU covers (sets of victims that free enough GPUs, none of
   them removable) whose freed GPUs could give the preemptor a strictly better device set are enumerated from a
   GPU -> claims -> consumers model of the node; the most promising few are each rebuilt with upstream's own
   reprieve loop (:meth:`~plugins.defaultpreemption.core.Reprieve.reprieve_from`: the filters decide, and the
   result is minimal exactly as upstream's: no victim can be reprieved). A rebuilt set A replaces U only when

   * on each of upstream's five candidate criteria separately (PDB violations, highest victim priority, sum of
     priorities, number of victims, start time of the highest-priority victims) A is no worse than U: never
     more victims, higher-priority victims or more PDB violations than upstream's choice, and
   * the preemptor's device set is strictly better.

   Among such sets the choice is by upstream's criteria in their order, then topology, then the least important
   victims (latest in upstream's reprieve order).
2. **Across nodes** (:meth:`TopologyPreference.tie_breaker`, a DefaultPreemption tie-breaker that runs after
   upstream's five node-choice functions, before "first candidate"): the candidate whose victims leave the
   preemptor the best device set; for such a preemptor, nodes without a topology model come last.

Not modelled: devices held in the dry run for pods nominated to the node (they are allocated together with the
preemptor's, so the preemptor may get fewer of the freed GPUs than the score assumes); MIG claims (no
interconnect to choose).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plugins.defaultpreemption.core import (
    DEFAULT_SCORE_FUNCS,
    PRIORITY_OFFSET,
    Candidate,
    Reprieve,
    Victim,
    pod_start_time,
    sort_by_importance,
)
from plugins.dra.state import STATE_KEY as DRA_STATE_KEY
from plugins.dra.state import node_allocation
from plugins.topology.plugin import EXPLAIN_KEY, GpuTopology, NodeView, free_gpus, whole_gpus
from plugins.topology.scoring import Value, best_set_value
from scheduler.api.dra import ALLOCATION_MODE_EXACT
from scheduler.cache.cache import Snapshot
from scheduler.framework.interface import Code, CycleState, Status

MAX_VISITS = 4096  # DFS states visited per node while enumerating minimal GPU covers
MAX_TRIES = 4  # candidate victim sets rebuilt with the reprieve loop per node
Scores = tuple[float, ...]


def upstream_scores(c: Candidate) -> Scores:
    """Upstream's five candidate criteria (higher is better), as ``pickOneNodeForPreemption`` ranks them."""
    return tuple(f(c) for f in DEFAULT_SCORE_FUNCS)


def no_worse(a: Scores, b: Scores) -> bool:
    """``a`` is at least as good as ``b`` on every criterion separately."""
    return all(x >= y for x, y in zip(a, b, strict=True))


def encode(v: Value) -> float:
    """A device-set value as one float for a tie-breaker (bandwidth first, then NUMA span); >= 0."""
    return float(v[0]) * 1024.0 + float(512 + v[1])


class MaskScores:
    """:func:`upstream_scores` of a set of victims given as a mask of indices into the reprieve order, without
    building a Candidate (the search estimates many sets)."""

    def __init__(self, rep: Reprieve) -> None:
        self.pods = [tuple((p.priority, pod_start_time(p)) for p in v.pods) for v in rep.order]
        self.violations = [rep.violations.get(id(v), 0) for v in rep.order]

    def __call__(self, mask: int) -> Scores:
        pods = [x for j, ps in enumerate(self.pods) if mask >> j & 1 for x in ps]
        if not pods:
            return ()
        top = max(p for p, _ in pods)
        return (
            -float(sum(n for j, n in enumerate(self.violations) if mask >> j & 1)),
            -float(top),
            -float(sum(p + PRIORITY_OFFSET for p, _ in pods)),
            -float(len(pods)),
            min(t for p, t in pods if p == top),
        )


class _Model:
    """Which victims free which GPUs of one node: a GPU in use is freed when every consumer of every claim
    using it is evicted (the rule of the dry run); -1 when never (a claim of a pod that is no victim, or the
    preemptor's own claim)."""

    def __init__(self, snap: Snapshot, view: NodeView, rep: Reprieve, keep: set[str]) -> None:
        ledger = snap.ledger
        self.base = free_gpus(ledger, view)
        index: dict[str, int] = {}
        for j, v in enumerate(rep.order):
            for p in v.pods:
                index[p.uid] = j
        self.need: list[int] = []
        for i, dev_ids in enumerate(view.ids):
            if self.base >> i & 1:
                self.need.append(0)
                continue
            users: set[str] = set()
            for d in dev_ids:
                users |= ledger.exclusive_users(d)
                shares = ledger.shared_consumption(d)
                if shares:
                    users |= {u for u, _ in shares}
            m = 0
            for u in users:
                use = ledger.use_of(u)
                claim = snap.claims.get(use.claim_key) if use is not None and u not in keep else None
                if claim is None or not claim.reserved_for:
                    m = -1
                    break
                for r in claim.reserved_for:
                    j = index.get(r.uid, -1)
                    if j < 0:
                        m = -1
                        break
                    m |= 1 << j
                if m < 0:
                    break
            self.need.append(m if m > 0 else -1)
        self.devices = 0  # the victims whose eviction can free a GPU
        self._gpus: list[tuple[int, int]] = []  # (GPU bit, the victims that free it) of the GPUs victims can free
        for i, m in enumerate(self.need):
            if m > 0:
                self.devices |= m
                self._gpus.append((1 << i, m))
        self._freed: dict[int, int] = {}

    def freed(self, victims: int) -> int:
        """The GPUs free once ``victims`` (a mask of indices into the reprieve order) are evicted."""
        got = self._freed.get(victims)
        if got is None:
            got = self.base
            for bit, m in self._gpus:
                if not m & ~victims:
                    got |= bit
            self._freed[victims] = got
        return got

    def covers(self, k: int, allowed: int, sizes: Sequence[int], max_pods: int) -> list[int]:
        """Every minimal set of device victims among ``allowed`` (a mask) that frees at least ``k`` GPUs (none of
        its victims can be left out) and has at most ``max_pods`` pods (``sizes``: pods per victim), least
        important victims tried first; at most :data:`MAX_VISITS` search states."""
        cand = self.devices & allowed
        members = [j for j in range(len(sizes) - 1, -1, -1) if cand >> j & 1]
        rest = [0] * (len(members) + 1)
        for x in range(len(members) - 1, -1, -1):
            rest[x] = rest[x + 1] | 1 << members[x]
        out: list[int] = []
        visits = 0
        freed = self.freed

        def dfs(x: int, s: int, pods: int) -> None:
            nonlocal visits
            visits += 1
            if visits > MAX_VISITS or pods > max_pods:
                return
            if freed(s).bit_count() >= k:
                if all(freed(s & ~(1 << j)).bit_count() < k for j in members if s >> j & 1):
                    out.append(s)
                return
            if x == len(members) or freed(s | rest[x]).bit_count() < k:
                return
            j = members[x]
            dfs(x + 1, s | 1 << j, pods + sizes[j])
            dfs(x + 1, s, pods)

        dfs(0, 0, 0)
        return out


class TopologyPreference:
    """Topology-aware victim choice for one preemptor's PostFilter (see the module docstring)."""

    def __init__(self, gpu: GpuTopology, snap: Snapshot, fixed: bool = False) -> None:
        self.gpu = gpu
        self.snap = snap
        # the pod's requests are all ExactCount: its GPU demand is the same on every node of one topology
        self.fixed = fixed
        self._demand: dict[str, int] = {}  # topology fingerprint -> GPU demand, when fixed
        self.values: dict[str, Value] = {}  # node -> the preemptor's best device set after that node's victims
        self.stats = {"nodes": 0, "searched": 0, "tries": 0, "improved": 0}

    @staticmethod
    def of(state: CycleState) -> TopologyPreference | None:
        """None unless GpuTopology ran PreFilter in this cycle and the pod allocates devices, and can take two
        GPUs or more."""
        gpu = state.read(EXPLAIN_KEY)
        if not isinstance(gpu, GpuTopology):
            return None
        data: Any = state.read(DRA_STATE_KEY)
        if data is None or getattr(data, "allocator", None) is None:
            return None
        fixed = getattr(data, "ext", None) is None
        count = 0
        for c in getattr(data, "to_allocate", ()):
            for r in c.spec.requests:
                if r.exactly is None or r.exactly.allocation_mode != ALLOCATION_MODE_EXACT:
                    fixed = False
                else:
                    count += r.exactly.count
        if fixed and count < 2:
            return None  # one device: every free GPU is as good as another
        return TopologyPreference(gpu, state.snapshot, fixed)

    def tie_breaker(self, c: Candidate) -> float:
        v = self.values.get(c.node)
        return -1.0 if v is None else encode(v)

    # --- per node -----------------------------------------------------------------------------------------

    def demand(self, rep: Reprieve, view: NodeView) -> int:
        """Whole modelled GPUs the preemptor's claims take in the dry run's current state (0: none, or MIG);
        with only ExactCount requests, the first answer for a topology holds for its other nodes."""
        if self.fixed:
            got = self._demand.get(view.topo.fingerprint)
            if got is not None:
                return got
        allocs = node_allocation(rep.dry.state, rep.dry.node)
        if not allocs:
            return 0
        mask = whole_gpus(view, [(r.driver, r.pool, r.device) for a in allocs for r in a.results])
        k = 0 if mask is None else mask.bit_count()
        if self.fixed:
            self._demand[view.topo.fingerprint] = k
        return k

    def value(self, rep: Reprieve, view: NodeView, k: int) -> Value | None:
        """The preemptor's best k-GPU set with the dry run's current victims gone."""
        data: Any = rep.dry.state.read(DRA_STATE_KEY)
        ledger = getattr(data, "ledger", None) or self.snap.ledger
        return best_set_value(view.table, free_gpus(ledger, view), k)

    def refine(self, rep: Reprieve, victims: list[Victim], violations: int) -> tuple[list[Victim], int] | Status:
        """The reprieve step's extension (:data:`~plugins.defaultpreemption.core.Refine`)."""
        node = rep.dry.base.name
        view = self.gpu.view(self.snap, node)
        if view is None:
            return victims, violations
        k = self.demand(rep, view)
        if k < 2:
            return victims, violations
        self.stats["nodes"] += 1
        current = self.value(rep, view, k)
        if current is None:
            return victims, violations
        self.values[node] = current
        data: Any = rep.dry.state.read(DRA_STATE_KEY)
        keep = {c.meta.uid for c in getattr(data, "claims", ())}
        model = _Model(self.snap, view, rep, keep)
        upper = best_set_value(view.table, model.freed(model.devices), k)
        if upper is None or upper <= current:
            return victims, violations  # no victim set can do better: upstream's choice stands
        self.stats["searched"] += 1
        chosen = self.search(rep, view, model, k, victims, violations, current)
        if chosen is None:
            st = rep.settle(victims)
            return (victims, violations) if st.is_success else st
        a, a_violations, a_value = chosen
        st = rep.settle(a)
        if not st.is_success:
            return st
        self.values[node] = a_value
        self.stats["improved"] += 1
        return a, a_violations

    def search(
        self,
        rep: Reprieve,
        view: NodeView,
        model: _Model,
        k: int,
        victims: list[Victim],
        violations: int,
        current: Value,
    ) -> tuple[list[Victim], int, Value] | None:
        node = rep.dry.base.name
        order = rep.order
        pos = {id(v): j for j, v in enumerate(order)}
        base_scores = upstream_scores(Candidate(node, tuple(victims), violations))
        others = [v for v in victims if not model.devices >> pos[id(v)] & 1]  # victims for other resources
        other_ids = {id(v) for v in others}
        other_mask = sum(1 << pos[id(v)] for v in others)
        scorer = MaskScores(rep)
        # upstream's criteria bound the search: no victim above upstream's highest priority, no more pods
        top = max(p.priority for v in victims for p in v.pods)
        allowed = sum(1 << j for j, v in enumerate(order) if all(p.priority <= top for p in v.pods))
        sizes = [len(v.pods) for v in order]
        max_pods = sum(len(v.pods) for v in victims) - sum(len(v.pods) for v in others)
        ranked: list[tuple[Scores, Value, int, int]] = []
        for s in model.covers(k, allowed, sizes, max_pods):
            val = best_set_value(view.table, model.freed(s), k)
            if val is None or val <= current:
                continue
            est = s | other_mask
            if not est:
                continue
            sc = scorer(est)
            if no_worse(sc, base_scores):
                ranked.append((sc, val, sum(j for j in range(len(order)) if est >> j & 1), s))
        ranked.sort(key=lambda t: (t[0], t[1], t[2]), reverse=True)
        best: tuple[Scores, Value, int, list[Victim], int] | None = None
        for x, (_, _, _, s) in enumerate(ranked[:MAX_TRIES]):
            if best is not None and best[:3] >= ranked[x][:3]:
                break  # the sets left are not expected to do better than the one found
            self.stats["tries"] += 1
            in_s = [v for v in order if s >> pos[id(v)] & 1]
            start = [v for v in order if s >> pos[id(v)] & 1 or id(v) in other_ids]
            got = rep.reprieve_from(start)
            if isinstance(got, Status) and got.code != Code.ERROR:
                # the other resources need other victims with these: upstream's loop from everything removed,
                # these device victims reprieved last
                got = rep.reprieve_from([*(v for v in order if not s >> pos[id(v)] & 1), *in_s])
            if isinstance(got, Status):
                if got.code == Code.ERROR:
                    return None
                continue
            if not got:
                continue
            a = sort_by_importance(got)
            a_violations = rep.num_violations(a)
            sc = upstream_scores(Candidate(node, tuple(a), a_violations))
            val = self.value(rep, view, k)
            if val is None or val <= current or not no_worse(sc, base_scores):
                continue
            key = (sc, val, sum(pos[id(v)] for v in a))
            if best is None or key > best[:3]:
                best = (sc, val, key[2], a, a_violations)
        return None if best is None else (best[3], best[4], best[1])
