"""The framework runtime: one instance per profile, running its plugins at each extension point.

The runtime applies score weights and normalisation (plugins return raw scores; the runtime scales them
to 0..MAX_NODE_SCORE through the plugin's ``normalize_score`` if it has one, checks the range and
multiplies by the configured weight), times every extension point for metrics, and tags each non-success
status with the plugin that returned it.

Preemption support (kubernetes v1.37.2 ``pkg/scheduler/framework/runtime/framework.go``):
``run_pre_filter_extension_add_pod`` / ``_remove_pod`` (PreFilter plugins with ``add_pod``/``remove_pod``,
skipped when PreFilter skipped them), ``run_filter_with_nominated_pods`` (``RunFilterPluginsWithNominatedPods``
with ``addGENominatedPods``: pods nominated to the node with a priority >= the pod's count as running there;
two passes), ``filter_node`` (the cycle's filter: with nominated pods when there are any, else through the
reuse memo), and :class:`DryRun` (a node copy minus victims on a cloned CycleState; never the memo). The
framework hands itself to plugins implementing ``set_handle`` (upstream ``framework.Handle``).

Reuse between equal pods (pods with the same ``signature``): ``find_batched`` runs a pod cycle's Filter, PreScore,
Score and choice over all nodes through :mod:`scheduler.framework.batch` (only the nodes that changed since an equal
pod are filtered or scored again); ``run_filter_memo`` / ``_raw_scores`` reuse per node for the other callers (the
nominated node, the gang cycle). ``DRA_SCHEDULER_REUSE`` = ``batch`` (default), ``memo`` or ``off`` picks how much is
reused; the results are the same (tests/test_batching.py).

The group cycle's points (scheduler/gang/cycle.py) are found once per profile by the ``*_plugins`` /
``placement_generator`` / ``group_member_scorer`` / ``joint_allocator`` helpers; ``run_pod_group_post_filter`` is
upstream's ``RunPodGroupPostFilterPlugins`` and ``binding_note`` asks every BindingNote plugin.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scheduler.framework.batch import REUSED_REJECTIONS, BatchRunner
from scheduler.framework.interface import (
    BindingNotePlugin,
    BindPlugin,
    Code,
    CycleState,
    DryRun,
    EnqueueExtensions,
    FilterPlugin,
    GroupMemberScorePlugin,
    HandleAware,
    JointAllocationPlugin,
    Metrics,
    NodeScore,
    NodeTokenPlugin,
    NullMetrics,
    PermitPlugin,
    PlacementGeneratePlugin,
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupScheduling,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueingHintExtensions,
    QueueingHintFn,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SignPlugin,
    Status,
    UnreserveWriter,
)
from scheduler.framework.nominator import NOOP, Nominator, status_nominated_node
from scheduler.framework.scoring import FrameworkError, WeightedScorer, normalized_row

if TYPE_CHECKING:
    from scheduler.api.clusterapi import ClusterAPI
    from scheduler.api.model import Pod
    from scheduler.cache.cache import Cache, NodeInfo, Snapshot
    from scheduler.config.registry import PluginSpec
    from scheduler.config.schedulerconfig import Profile


_MISSING: Any = object()
_ScoreEntry = tuple[int, Hashable, tuple[int, ...]]  # (NodeInfo.version, node token, raw scores)
# Signatures remembered (least recently used forgotten, with their memos and batch): the equal-pod reuse needs the
# signatures of the pods being scheduled now, and a long-running scheduler sees new ones all the time.
MAX_SIGNATURES = 512


class Framework:
    """Plugins of one profile, instantiated from the registry with their args."""

    def __init__(
        self,
        profile: Profile,
        registry: Mapping[str, PluginSpec],
        metrics: Metrics | None = None,
        nominator: Nominator | None = None,
    ) -> None:
        self.profile = profile
        # pods nominated to nodes by preemption (shared by every profile of a scheduler)
        self.nominator = nominator if nominator is not None else Nominator()
        self.scheduler_name = profile.scheduler_name
        self.metrics: Metrics = metrics or NullMetrics()
        self.instances: dict[str, Any] = {}
        for _point, refs in profile.plugins.items():
            for ref in refs:
                if ref.name not in self.instances:
                    spec = registry.get(ref.name)
                    if spec is None:
                        raise FrameworkError(f"plugin {ref.name!r} is not registered")
                    self.instances[ref.name] = spec.factory(profile.plugin_args.get(ref.name, {}))

        def at(point: str, proto: type) -> list[Any]:
            out = []
            for ref in profile.plugins.get(point, ()):
                inst = self.instances[ref.name]
                if not isinstance(inst, proto):
                    raise FrameworkError(f"plugin {ref.name!r} does not implement {point}")
                out.append(inst)
            return out

        self.pre_enqueue: list[PreEnqueuePlugin] = at("preEnqueue", PreEnqueuePlugin)
        sorters: list[QueueSortPlugin] = at("queueSort", QueueSortPlugin)
        if len(sorters) != 1:
            raise FrameworkError(f"exactly one queueSort plugin must be enabled, got {len(sorters)}")
        self.queue_sort = sorters[0]
        self.pre_filter: list[PreFilterPlugin] = at("preFilter", PreFilterPlugin)
        self.filter: list[FilterPlugin] = at("filter", FilterPlugin)
        self.post_filter: list[PostFilterPlugin] = at("postFilter", PostFilterPlugin)
        self.pre_score: list[PreScorePlugin] = at("preScore", PreScorePlugin)
        self.scorers = [
            WeightedScorer(self.instances[ref.name], ref.weight or 1) for ref in profile.plugins.get("score", ())
        ]
        for s in self.scorers:
            if not isinstance(s.plugin, ScorePlugin):
                raise FrameworkError(f"plugin {s.plugin.name!r} does not implement score")
        self.reserve: list[ReservePlugin] = at("reserve", ReservePlugin)
        self.permit: list[PermitPlugin] = at("permit", PermitPlugin)
        self.pre_bind: list[PreBindPlugin] = at("preBind", PreBindPlugin)
        binders: list[BindPlugin] = at("bind", BindPlugin)
        if not binders:
            raise FrameworkError("at least one bind plugin must be enabled")
        self.bind = binders
        signers = [*self.filter, *(ws.plugin for ws in self.scorers)]
        self._signable = all(isinstance(p, SignPlugin) for p in signers)
        self._signers: list[SignPlugin] = list(dict.fromkeys(p for p in signers if isinstance(p, SignPlugin)))
        self._scorer_names = frozenset(ws.plugin.name for ws in self.scorers)
        self._tokeners: list[NodeTokenPlugin] = [p for p in self._signers if isinstance(p, NodeTokenPlugin)]
        # signature id -> node name -> (NodeInfo.version, token, status, uid of the pod whose Filter gave it), and
        # signature id -> (active scorers, node name) -> (NodeInfo.version, token, scores); a node's entry is
        # replaced when the node or its token changed
        self._filter_memo: dict[Hashable, dict[str, tuple[int, Hashable, Status, str]]] = {}
        # The pods whose Filter statuses the memos and batches may lend to others (uid -> pod), while they wait:
        # their messages name the pod's own objects, which ``own_rejections`` renames. The memos keep uids only, so
        # a pod bound or deleted (``forget_pod``) is not kept alive by them; a status whose pod is gone is renamed by
        # filtering again.
        self.owners: dict[str, Pod] = {}
        self._score_memo: dict[Hashable, dict[tuple[tuple[str, ...], str], _ScoreEntry]] = {}
        # signature -> its id, least recently used first: at most MAX_SIGNATURES, and what is kept per signature
        # (the memos above, the batch) goes with its id
        self._sig_ids: dict[Hashable, int] = {}
        self._next_sig_id = 0
        self.memo_stats = {"filter_hits": 0, "filter_misses": 0, "score_hits": 0, "score_misses": 0}
        # Reuse between equal pods: "batch" (scheduler/framework/batch.py, else the per-node memo), "memo" (the
        # per-node memo only), "off" (every plugin runs on every node it is asked about). Results are the same.
        self.reuse = os.environ.get("DRA_SCHEDULER_REUSE", "batch")
        self._batch_runner: BatchRunner | None = None
        self.pre_filter_extensions: list[Any] = [p for p in self.pre_filter if isinstance(p, PreFilterExtensions)]
        for inst in self.instances.values():
            if isinstance(inst, HandleAware):
                inst.set_handle(self)
        self._group_points: dict[str, list[Any]] = {}  # group cycle point -> its plugins (group_points())

    # --- helpers --------------------------------------------------------------------------------------

    def _timed(self, point: str, start: float, status: Status) -> Status:
        self.metrics.observe_extension_point(point, status.code, time.perf_counter() - start)
        return status

    def events_to_register(self) -> dict[str, set[tuple[str, str]]]:
        """plugin name -> the (kind, action) events that may make a pod it rejected schedulable."""
        return {
            name: set(inst.events_to_register())
            for name, inst in self.instances.items()
            if isinstance(inst, EnqueueExtensions)
        }

    def queueing_hints(self) -> dict[str, dict[tuple[str, str], QueueingHintFn]]:
        """plugin name -> registered event -> its QueueingHintFn (plugins with EnqueueExtensions and
        QueueingHintExtensions; hints for events a plugin does not register are dropped)."""
        out: dict[str, dict[tuple[str, str], QueueingHintFn]] = {}
        for name, inst in self.instances.items():
            if not (isinstance(inst, EnqueueExtensions) and isinstance(inst, QueueingHintExtensions)):
                continue
            registered = set(inst.events_to_register())
            hints = {ev: fn for ev, fn in inst.queueing_hints().items() if ev in registered}
            if hints:
                out[name] = hints
        return out

    # --- queueing -------------------------------------------------------------------------------------

    def run_pre_enqueue(self, snapshot: Snapshot, pod: Pod) -> Status:
        for p in self.pre_enqueue:
            st = p.pre_enqueue(snapshot, pod)
            if not st.is_success:
                return st.with_plugin(p.name)
        return Status.ok()

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.queue_sort.less(a, b)

    # --- scheduling cycle -----------------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        start = time.perf_counter()
        result: frozenset[str] | None = None
        record = state.record_plugin_metrics
        for p in self.pre_filter:
            t0 = time.perf_counter()
            r, st = p.pre_filter(state, pod)
            if record:
                self.metrics.observe_plugin(p.name, "PreFilter", st.code, time.perf_counter() - t0)
            if st.code == Code.SKIP:
                state.skip_filter.add(p.name)
                continue
            if not st.is_success:
                return None, self._timed("PreFilter", start, st.with_plugin(p.name))
            if r is not None and r.node_names is not None:
                result = r.node_names if result is None else result & r.node_names
        self._timed("PreFilter", start, Status.ok())
        return (PreFilterResult(result) if result is not None else None), Status.ok()

    # --- reuse of per-node results for pods with equal signatures -------------------------------------

    def signature(self, state: CycleState, pod: Pod) -> Hashable | None:
        if not self._signable or self.reuse == "off":
            return None
        parts: list[Hashable] = []
        for p in self._signers:
            # A plugin skipped at PreFilter has no Filter to reuse, but if it also scores (e.g. soft topology
            # spread constraints only) its Score still depends on the pod: it must still sign.
            if p.name in state.skip_filter and p.name not in self._scorer_names:
                parts.append(None)
                continue
            s = p.sign(state, pod)
            if s is None:
                return None
            parts.append(s)
        full = (pod.scheduler_name, tuple(parts), frozenset(state.skip_filter))
        # Interned to a small int: memo keys then hash cheaply (a signature holds whole claim specs). Most recently
        # used last; a signature can be unique to one pod (a pod's own ResourceClaim, its own affinity terms), so
        # under churn the oldest are forgotten with everything kept for them, never the table cleared at a size.
        ids = self._sig_ids
        sid = ids.pop(full, None)
        if sid is None:
            self._next_sig_id += 1
            sid = self._next_sig_id
            if len(ids) >= MAX_SIGNATURES:
                self._forget_signature(ids.pop(next(iter(ids))))
        ids[full] = sid
        return sid

    def forget_pod(self, uid: str) -> None:
        """The pod was bound or deleted: its statuses stay reusable, but the pod itself is not kept."""
        self.owners.pop(uid, None)

    def _forget_signature(self, sid: int) -> None:
        self._filter_memo.pop(sid, None)
        self._score_memo.pop(sid, None)
        if self._batch_runner is not None:  # its batches are keyed by these numbers too
            self._batch_runner.batches.pop(sid, None)
        # an id forgotten while a cycle still held it (e.g. signatures taken inside a preemption dry run) may have
        # had memos made for it again: swept once they outnumber the ids remembered
        for memo in (self._filter_memo, self._score_memo):
            if len(memo) > len(self._sig_ids) + 64:
                live = set(self._sig_ids.values())
                for stale in [k for k in memo if k not in live]:
                    del memo[stale]

    def _token(self, state: CycleState, node: NodeInfo) -> Hashable:
        """The node's token for this cycle (computed once per node per cycle)."""
        tokens = state.node_tokens
        tok: Hashable = tokens.get(node.name, _MISSING)
        if tok is _MISSING:
            ts = self._tokeners
            if not ts:
                tok = None
            elif len(ts) == 1:
                tok = ts[0].node_token(state, node)
            else:
                tok = tuple([p.node_token(state, node) for p in ts])
            tokens[node.name] = tok
        return tok

    def find_batched(
        self, state: CycleState, pod: Pod, sig: Hashable | None, start: int, want_for: Callable[[int], int]
    ) -> tuple[int, tuple[str | None, Status | None, set[str]] | dict[str, Status]] | None:
        """The cycle's Filter, PreScore, Score and choice of node over all the snapshot's nodes, from node
        ``start`` on (upstream ``nextStartNodeIndex``), reusing what equal pods found on unchanged nodes
        (:class:`~scheduler.framework.batch.BatchRunner`): ``(next start, outcome)``, or None when that does
        not apply (no signature, nominated pods, a token plugin without ``token_changes``): filter node by node."""
        if sig is None or self.reuse != "batch" or self.nominator.has_pods():
            return None
        snap = state.snapshot
        if not snap.node_names or not snap.node_log.source:
            return None
        runner = self._batch_runner
        if runner is None:
            runner = self._batch_runner = BatchRunner(self)
        if not runner.usable:
            return None
        return runner.find(state, pod, sig, start, want_for)

    def run_filter_memo(self, state: CycleState, pod: Pod, node: NodeInfo, sig: Hashable | None) -> Status:
        """``run_filter``, reusing the status of an earlier pod with the same signature on an unchanged node."""
        if sig is None:
            return self.run_filter(state, pod, node)
        token = state.node_tokens.get(node.name, _MISSING)
        if token is _MISSING:
            token = self._token(state, node)
        memo = self._filter_memo.get(sig)
        if memo is None:
            memo = self._filter_memo[sig] = {}
        hit = memo.get(node.name)
        if hit is not None and hit[0] == node.version and hit[1] == token:
            self.memo_stats["filter_hits"] += 1
            if hit[3] != pod.uid and hit[2].code != Code.SUCCESS:
                # Another pod's rejection: same verdict, but its message may name that pod's objects.
                reused: dict[str, Pod | None] | None = state.read(REUSED_REJECTIONS)
                if reused is None:
                    reused = {}
                    state.write(REUSED_REJECTIONS, reused)
                reused[node.name] = self.owners.get(hit[3])
            return hit[2]
        self.memo_stats["filter_misses"] += 1
        st = self.run_filter(state, pod, node)
        if st.code != Code.ERROR:
            memo[node.name] = (node.version, token, st, pod.uid)
            self.owners[pod.uid] = pod
        return st

    def own_rejections(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status], nodes: Mapping[str, NodeInfo]
    ) -> dict[str, Status]:
        """Statuses reused from another pod with the same signature carry that pod's message (e.g. its
        generated claim's name). Before they are reported, re-run the filters for ``pod`` on one node per
        distinct reused status (by content: code, reasons, plugin; each node holds its own Status object) and
        use that pod's own status for every node that shared it. A hopeless pod whose 1,213 rejections reused
        two messages thus re-runs the filters twice, not 1,213 times. A plugin that can say how its status reads
        for another pod of the same signature (DynamicResources puts the pod's own claims in
        place of the other pod's) is asked first, without filtering: ``retarget_template`` abstracts the other pod's
        status (statuses that differ only in which earlier pod's claims they name share one template) and
        ``retarget_fill`` names this pod's claims in it, once per template."""
        reused: dict[str, Pod | None] | None = state.read(REUSED_REJECTIONS)
        if not reused:
            return statuses
        fresh: dict[Hashable, Status] = {}
        out = dict(statuses)
        templates: dict[str, Any] = {}  # plugin name -> its retarget_template (None: it has none)
        for name in sorted(reused):
            old = statuses.get(name)
            node = nodes.get(name)
            if old is None or node is None:
                continue
            key = self.rejection_key(state, old, reused[name], templates)
            st = fresh.get(key)
            if st is None:
                st = fresh[key] = self.renamed_rejection(state, key, pod, node)
            if not st.is_success:
                out[name] = st
        state.delete(REUSED_REJECTIONS)
        return out

    def rejection_key(
        self, state: CycleState, old: Status, other: Pod | None, templates: dict[str, Any] | None = None
    ) -> Hashable:
        """What ``own_rejections`` groups a rejection lent by ``other`` (None: that pod is gone) under: the
        plugin's retarget template when it has one, else the status's content. Equal keys are renamed once."""
        tpl: Hashable | None = None
        if other is not None:
            template = _MISSING if templates is None else templates.get(old.plugin, _MISSING)
            if template is _MISSING:
                template = getattr(self.instances.get(old.plugin), "retarget_template", None)
                if templates is not None:
                    templates[old.plugin] = template
            if template is not None:
                tpl = template(state, old, other)
        return ("template", old.plugin, tpl) if tpl is not None else (old.code, old.reasons, old.plugin)

    def renamed_rejection(self, state: CycleState, key: Hashable, pod: Pod, node: NodeInfo) -> Status:
        """The status a rejection of ``key`` (:meth:`rejection_key`) says for ``pod``: the plugin fills its
        template with the pod's objects, else the filters run for ``pod`` on ``node`` (one node of that key)."""
        if isinstance(key, tuple) and len(key) == 3 and key[0] == "template":
            _, plugin, tpl = key
            got: Status | None = self.instances[plugin].retarget_fill(state, tpl, pod)
            if got is not None:
                return got
        return self.run_filter(state, pod, node)

    def run_filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        skip = state.skip_filter
        for p in self.filter:
            if skip and p.name in skip:
                continue
            st = p.filter(state, pod, node)
            if not st.is_success:
                return st.with_plugin(p.name)
        return Status.ok()

    def run_post_filter(
        self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """``RunPostFilterPlugins``: the first success or UnschedulableAndUnresolvable wins; an error aborts;
        otherwise Unschedulable with every plugin's reasons, tagged with the first plugin, and the last result
        that is not a no-op."""
        start = time.perf_counter()
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for p in self.post_filter:
            r, st = p.post_filter(state, pod, statuses)
            if st.is_success or st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, self._timed("PostFilter", start, st.with_plugin(p.name))
            if not st.is_rejected:
                return None, self._timed("PostFilter", start, Status(Code.ERROR, st.reasons, p.name))
            if r is not None and r.mode != NOOP:
                result = r
            reasons.extend(st.reasons)
            rejector = rejector or p.name
        return result, self._timed("PostFilter", start, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector))

    # --- the PodGroup cycle's points (scheduler/gang/cycle.py) ----------------------------------------------
    #
    # Found once per profile with ``isinstance`` (a runtime-checkable Protocol check is slow: never per call).

    def _implementing(self, point: str, proto: Any, among: Sequence[Any] | None = None) -> list[Any]:
        found = self._group_points.get(point)
        if found is None:
            pool = list(self.instances.values()) if among is None else among
            found = self._group_points[point] = [p for p in pool if isinstance(p, proto)]
        return found

    def pod_group_post_filter_plugins(self) -> list[PodGroupPostFilterPlugin]:
        """The plugins enabled at ``postFilter`` that implement PodGroupPostFilter, in the profile's order."""
        return self._implementing("PodGroupPostFilter", PodGroupPostFilterPlugin, self.post_filter)

    def placement_generator(self) -> PlacementGeneratePlugin | None:
        """The first plugin of the profile that generates topology placements for groups (GpuTopology)."""
        found: list[PlacementGeneratePlugin] = self._implementing("PlacementGenerate", PlacementGeneratePlugin)
        return found[0] if found else None

    def group_member_scorer(self) -> GroupMemberScorePlugin | None:
        """The first plugin of the profile that scores a group member's nodes against the members placed so far."""
        found: list[GroupMemberScorePlugin] = self._implementing("GroupMemberScore", GroupMemberScorePlugin)
        return found[0] if found else None

    def joint_allocator(self) -> JointAllocationPlugin | None:
        """The first plugin of the profile that allocates the members on one node jointly (DynamicResources)."""
        found: list[JointAllocationPlugin] = self._implementing("JointAllocation", JointAllocationPlugin)
        return found[0] if found else None

    def binding_note_plugins(self) -> list[BindingNotePlugin]:
        return self._implementing("BindingNote", BindingNotePlugin)

    def binding_note(self, state: CycleState, node: str) -> str:
        """The notes of every BindingNote plugin for a pod bound to ``node``, for its Scheduled Event ("" when
        none has anything to say)."""
        plugins = self.binding_note_plugins()
        if not plugins:
            return ""
        if len(plugins) == 1:
            return plugins[0].binding_note(state, node)
        return "; ".join(n for p in plugins if (n := p.binding_note(state, node)))

    async def run_pod_group_post_filter(
        self,
        cache: Cache,
        group: PodGroupInfo,
        nominated: Mapping[str, str],
        scheduling: PodGroupScheduling,
    ) -> PodGroupPostFilterResult | None:
        """``RunPodGroupPostFilterPlugins`` (kubernetes v1.37.2 ``framework/runtime/framework.go``): the first
        Success, UnschedulableAndUnresolvable or retry wins; an error aborts ("error in "X" PodGroupPostFilter
        plugins: ..."); otherwise Unschedulable with every plugin's reasons, tagged with the first plugin, and the
        first plugin's nominations. None when no plugin implements it."""
        plugins = self.pod_group_post_filter_plugins()
        if not plugins:
            return None
        start = time.perf_counter()
        first: PodGroupPostFilterResult | None = None
        reasons: list[str] = []
        for p in plugins:
            t0 = time.perf_counter()
            r = await p.pod_group_post_filter(cache, group, nominated, scheduling, self.scheduler_name)
            st = r.status
            self.metrics.observe_plugin(p.name, "PodGroupPostFilter", st.code, time.perf_counter() - t0)
            if st.is_success or st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE or r.retry:
                r.status = st.with_plugin(p.name)
                self._timed("PodGroupPostFilter", start, r.status)
                return r
            if not st.is_rejected:
                msg = f'error in "{p.name}" PodGroupPostFilter plugins: {st.message}'
                r = PodGroupPostFilterResult(Status.error(msg, plugin=p.name), dict(r.nominations))
                self._timed("PodGroupPostFilter", start, r.status)
                return r
            if first is None:
                first = r
                first.status = st.with_plugin(p.name)
            else:
                reasons.extend(st.reasons)
        assert first is not None
        if reasons:
            st = first.status
            first = PodGroupPostFilterResult(
                Status(Code.UNSCHEDULABLE, (*st.reasons, *reasons), st.plugin), first.nominations
            )
        self._timed("PodGroupPostFilter", start, first.status)
        return first

    # --- PreFilterExtensions, nominated pods, dry runs (preemption) -----------------------------------

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo
    ) -> Status:
        """``RunPreFilterExtensionAddPod``: every PreFilter plugin with extensions not skipped at PreFilter."""
        skip = state.skip_filter
        for p in self.pre_filter_extensions:
            if p.name in skip:
                continue
            st = p.add_pod(state, pod_to_schedule, pod_to_add, node)
            if not st.is_success:
                return Status.error(f'running AddPod on PreFilter plugin "{p.name}": {st.message}', plugin=p.name)
        return Status.ok()

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo
    ) -> Status:
        skip = state.skip_filter
        for p in self.pre_filter_extensions:
            if p.name in skip:
                continue
            st = p.remove_pod(state, pod_to_schedule, pod_to_remove, node)
            if not st.is_success:
                return Status.error(f'running RemovePod on PreFilter plugin "{p.name}": {st.message}', plugin=p.name)
        return Status.ok()

    def nominated_pods_for_node(self, node: str) -> Sequence[Pod]:
        return self.nominator.pods_for_node(node)

    def nominated_node_of(self, pod: Pod) -> str:
        """The node ``pod`` is nominated to: the in-memory nomination, else its ``status.nominatedNodeName``."""
        return self.nominator.node_of(pod) or status_nominated_node(pod)

    def _ge_nominated(self, pod: Pod, node: str) -> list[Pod]:
        """Pods nominated to ``node`` with a priority >= ``pod``'s, other than ``pod`` itself."""
        if not self.nominator.has_pods():
            return []
        return [p for p in self.nominator.pods_for_node(node) if p.priority >= pod.priority and p.uid != pod.uid]

    def has_ge_nominated_pods(self, pod: Pod, node: str) -> bool:
        return bool(self._ge_nominated(pod, node))

    def add_ge_nominated_pods(
        self, state: CycleState, pod: Pod, node: NodeInfo
    ) -> tuple[bool, CycleState, NodeInfo, Status]:
        """``addGENominatedPods``: a copy of ``node`` and of ``state`` with the nominated pods of equal or
        higher priority added (the NodeInfo through the cache's constructor, the state through AddPod)."""
        nominated = self._ge_nominated(pod, node.name)
        if not nominated:
            return False, state, node, Status.ok()
        from scheduler.cache.cache import _node_info

        pods = {p.key: p for p in node.pod_list}
        for p in nominated:
            pods[p.key] = p
        node_out = _node_info(node.node, pods)
        state_out = state.clone()
        for p in nominated:
            st = self.run_pre_filter_extension_add_pod(state_out, pod, p, node_out)
            if not st.is_success:
                return False, state, node, st
        return True, state_out, node_out, Status.ok()

    def run_filter_with_nominated_pods(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        """``RunFilterPluginsWithNominatedPods``: filter with the nominated pods of equal or higher priority
        counted on the node, then, if that passed and any were added, once more without them (filters such as
        pod affinity may pass only with them). Never reuses results of other pods."""
        added, st_out, node_out, err = self.add_ge_nominated_pods(state, pod, node)
        if not err.is_success:
            return err
        status = self.run_filter(st_out, pod, node_out)
        if not added or not status.is_success:
            return status
        return self.run_filter(state, pod, node)

    def filter_node(self, state: CycleState, pod: Pod, node: NodeInfo, sig: Hashable | None) -> Status:
        """The cycle's filter of one node: with the nominated pods of equal or higher priority when there are
        any (no reuse: the verdict depends on them), else through the reuse memo."""
        if self.nominator.has_pods() and self._ge_nominated(pod, node.name):
            return self.run_filter_with_nominated_pods(state, pod, node)
        return self.run_filter_memo(state, pod, node, sig)

    def dry_run(self, state: CycleState, pod: Pod, node: NodeInfo) -> DryRun:
        """A dry run of ``pod`` on ``node`` where pods can be removed and added back (preemption)."""
        return DryRun(self, state, pod, node)

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        start = time.perf_counter()
        for p in self.pre_score:
            st = p.pre_score(state, pod, nodes)
            if st.code == Code.SKIP:
                state.skip_score.add(p.name)
                continue
            if not st.is_success:
                return self._timed("PreScore", start, st.with_plugin(p.name))
        return self._timed("PreScore", start, Status.ok())

    def _raw_scores(
        self, state: CycleState, pod: Pod, active: Sequence[WeightedScorer], nodes: Sequence[NodeInfo],
        sig: Hashable | None,
    ) -> list[list[int]]:
        """Raw scores per active plugin (rows) and node (columns). With a signature, a node's scores of all
        active plugins are reused together while the node and its token are unchanged."""
        if sig is None:
            return [[ws.plugin.score(state, pod, n) for n in nodes] for ws in active]
        memo = self._score_memo.get(sig)
        if memo is None:
            memo = self._score_memo[sig] = {}
        key0 = tuple([ws.plugin.name for ws in active])
        tokens = state.node_tokens
        rows: list[list[int]] = [[0] * len(nodes) for _ in active]
        hits = 0
        for j, n in enumerate(nodes):
            name = n.name
            token = tokens.get(name, _MISSING)
            if token is _MISSING:
                token = self._token(state, n)
            key = (key0, name)
            hit = memo.get(key)
            if hit is not None and hit[0] == n.version and hit[1] == token:
                vals = hit[2]
                hits += 1
            else:
                vals = tuple([ws.plugin.score(state, pod, n) for ws in active])
                memo[key] = (n.version, token, vals)
            for i, v in enumerate(vals):
                rows[i][j] = v
        self.memo_stats["score_hits"] += hits * len(active)
        self.memo_stats["score_misses"] += (len(nodes) - hits) * len(active)
        return rows

    def run_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo], sig: Hashable | None = None
    ) -> list[NodeScore]:
        """Weighted sum over score plugins of normalised scores, per node (same order as ``nodes``)."""
        start = time.perf_counter()
        totals = [NodeScore(n.name, 0) for n in nodes]
        skip = state.skip_score
        active = [ws for ws in self.scorers if ws.plugin.name not in skip]
        rows = self._raw_scores(state, pod, active, nodes, sig)
        names = [n.name for n in nodes]
        for ws, row in zip(active, rows, strict=True):
            p = ws.plugin
            t0 = time.perf_counter()
            row = normalized_row(p, state, pod, names, row)
            w = ws.weight
            for i, v in enumerate(row):
                if v:
                    totals[i].score += v * w
            if state.record_plugin_metrics:
                self.metrics.observe_plugin(p.name, "Score", Code.SUCCESS, time.perf_counter() - t0)
        self._timed("Score", start, Status.ok())
        return totals

    def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        start = time.perf_counter()
        for p in self.reserve:
            st = p.reserve(state, pod, node)
            if not st.is_success:
                self.run_unreserve(state, pod, node)
                return self._timed("Reserve", start, st.with_plugin(p.name))
        return self._timed("Reserve", start, Status.ok())

    def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        start = time.perf_counter()
        for p in reversed(self.reserve):
            p.unreserve(state, pod, node)
        self._timed("Unreserve", start, Status.ok())

    def run_permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status, float]:
        start = time.perf_counter()
        wait = 0.0
        waiting = False
        for p in self.permit:
            st, timeout = p.permit(state, pod, node)
            if st.code == Code.WAIT:
                waiting = True
                wait = max(wait, timeout)
            elif not st.is_success:
                return self._timed("Permit", start, st.with_plugin(p.name)), 0.0
        if waiting:
            return self._timed("Permit", start, Status(Code.WAIT)), wait
        return self._timed("Permit", start, Status.ok()), 0.0

    # --- binding cycle ------------------------------------------------------------------------------

    async def run_pre_bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status:
        start = time.perf_counter()
        for p in self.pre_bind:
            st = await p.pre_bind(state, pod, node, api)
            if not st.is_success and st.code != Code.SKIP:
                return self._timed("PreBind", start, st.with_plugin(p.name))
        return self._timed("PreBind", start, Status.ok())

    async def run_bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status:
        start = time.perf_counter()
        for p in self.bind:
            st = await p.bind(state, pod, node, api)
            if st.code == Code.SKIP:
                continue
            return self._timed("Bind", start, st.with_plugin(p.name))
        return self._timed("Bind", start, Status.error("no bind plugin bound the pod"))

    async def run_rollback(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> None:
        for p in reversed(self.pre_bind):
            if isinstance(p, UnreserveWriter):
                await p.rollback(state, pod, node, api)

