"""PodTopologySpread: the plugin, its args and their validation.

kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/podtopologyspread/plugin.go`` and
``ValidatePodTopologySpreadArgs`` (``pkg/scheduler/apis/config/validation/validation_pluginargs.go``).

Args (``PodTopologySpreadArgs``): ``defaultingType`` ``System`` (the default) or ``List``;
``defaultConstraints`` (only with ``List``). ``System`` uses the system default constraints: hostname
``maxSkew`` 3 and ``topology.kubernetes.io/zone`` ``maxSkew`` 5, both ``ScheduleAnyway``.

Reuse between equal pods (upstream ``SignPod``): Filter and Score read pods on other nodes, so a pod with
constraints cannot be signed. Upstream refuses every pod as soon as default constraints are configured
(always, with ``System``); here a pod is refused only when it has constraints in this cycle — its own,
or default ones with a non-empty selector (a Service or controller selects it). A pod without any has
no PodTopologySpread verdict to reuse wrongly (PreFilter and PreScore skip), so it stays signable.

Deliberate differences:

* a pod whose ``topologySpreadConstraints`` the API server would reject (``maxSkew`` ≤ 0, no
  ``topologyKey``, unknown ``whenUnsatisfiable``, an invalid ``labelSelector``) cannot exist in a real
  cluster; ``simulate`` can be given one, and PreFilter rejects it UnschedulableAndUnresolvable naming
  the field rather than silently dropping the constraint;
* QueueingHints follow upstream's ``isSchedulableAfterPodChange`` and ``isSchedulableAfterNodeChange`` on the
  pod's DoNotSchedule constraints; for a pod without constraints of its own and with DoNotSchedule default
  constraints (``List`` defaulting) the selector depends on Services and controllers the hint cannot read: such
  a pod is queued by every registered event.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from plugins.nodeaffinity import qualified_name_error
from plugins.podtopologyspread.common import (
    ACTIONS,
    CONSTRAINT_FIELDS,
    DO_NOT_SCHEDULE,
    LIST_DEFAULTING,
    NAME,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULT_CONSTRAINTS,
    SYSTEM_DEFAULTING,
    Constraint,
    SpreadSpec,
    default_selector,
    node_has_keys,
    pod_specs,
    specs_from,
)
from plugins.podtopologyspread.filtering import PreFilterState, compute_pre_filter_state, filter_node
from plugins.podtopologyspread.scoring import PreScoreState, compute_pre_score_state, normalize, score_node
from scheduler.api.labelselector import LabelSelector
from scheduler.api.model import ModelError
from scheduler.config.registry import PluginSpec
from scheduler.framework.interface import CycleState, NodeScore, PreFilterResult, QueueingHint, QueueingHintFn, Status

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo, Snapshot

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
_SELECTOR_MEMO = NAME + "/default-selector"


# --- args ---------------------------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_args(args: Mapping[str, Any], path: str) -> list[str]:
    """``ValidatePodTopologySpreadArgs`` (after v1 defaulting: an unset ``defaultingType`` is System)."""
    errs = [f"{path}.{k}: unknown field" for k in args if k not in ("defaultConstraints", "defaultingType")]
    constraints = args.get("defaultConstraints")
    if constraints is None:
        constraints = []
    dp = f"{path}.defaultConstraints"
    if not isinstance(constraints, list):
        errs.append(f"{dp}: must be a list")
        constraints = []
    dt = args.get("defaultingType") or SYSTEM_DEFAULTING
    if dt not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        errs.append(
            f"{path}.defaultingType: unsupported value {dt!r}: "
            f'supported values: "{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"'
        )
    elif dt == SYSTEM_DEFAULTING and constraints:
        errs.append(f"{path}.defaultingType: invalid value {dt!r}: when .defaultConstraints are not empty")
    seen: list[tuple[Any, Any]] = []
    for i, c in enumerate(constraints):
        p = f"{dp}[{i}]"
        if not isinstance(c, Mapping):
            errs.append(f"{p}: must be an object")
            continue
        errs += [f"{p}.{k}: unknown field" for k in c if k not in CONSTRAINT_FIELDS]
        skew = c.get("maxSkew", 0)
        if not _is_int(skew) or skew <= 0:
            errs.append(f"{p}.maxSkew: invalid value {skew!r}: not in valid range (0, inf)")
        key = c.get("topologyKey") or ""
        if not isinstance(key, str):
            errs.append(f"{p}.topologyKey: must be a string")
        elif not key:
            errs.append(f"{p}.topologyKey: required: can not be empty")
        else:
            e = qualified_name_error(key)
            if e:
                errs.append(f"{p}.topologyKey: invalid value {key!r}: {e}")
        when = c.get("whenUnsatisfiable") or ""
        if not when:
            errs.append(f"{p}.whenUnsatisfiable: required: can not be empty")
        elif when not in ACTIONS:
            errs.append(
                f'{p}.whenUnsatisfiable: unsupported value {when!r}: supported values: "{DO_NOT_SCHEDULE}", '
                f'"{SCHEDULE_ANYWAY}"'
            )
        if c.get("labelSelector") is not None:
            errs.append(
                f"{p}.labelSelector: forbidden: constraint must not define a selector, as they deduced for each pod"
            )
        md = c.get("minDomains")
        if md is not None and not _is_int(md):
            errs.append(f"{p}.minDomains: must be an integer")
        for pol in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if c.get(pol) is not None and not isinstance(c.get(pol), str):
                errs.append(f"{p}.{pol}: must be a string")
        mlk = c.get("matchLabelKeys")
        if mlk is not None and (not isinstance(mlk, list) or not all(isinstance(k, str) for k in mlk)):
            errs.append(f"{p}.matchLabelKeys: must be a list of strings")
        ident = (key, when)
        if ident in seen:
            errs.append(f"{dp}[{i}]: duplicate value: {{{key}, {when}}}")
        seen.append(ident)
    return errs


# --- plugin -------------------------------------------------------------------------------------------------


class PodTopologySpread:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        args = args or {}
        dt = args.get("defaultingType") or SYSTEM_DEFAULTING
        self.system_defaulted = dt == SYSTEM_DEFAULTING
        if self.system_defaulted:
            defaults: tuple[SpreadSpec, ...] = SYSTEM_DEFAULT_CONSTRAINTS
        else:
            defaults = specs_from(args.get("defaultConstraints") or [], "defaultConstraints", strict_min_domains=False)
        self.default_specs = defaults
        # Default constraints by action; their selector is filled in per pod.
        self._default_hard = tuple(s for s in defaults if s.when_unsatisfiable == DO_NOT_SCHEDULE)
        self._default_soft = tuple(s for s in defaults if s.when_unsatisfiable == SCHEDULE_ANYWAY)
        self._services: tuple[Any, dict[str, list[Any]]] | None = None

    # --- constraints --------------------------------------------------------------------------------------

    def _services_in(self, snapshot: Snapshot, namespace: str) -> list[Any]:
        objects = snapshot.objects
        idx = self._services
        if idx is None or idx[0] is not objects:
            by_ns: dict[str, list[Any]] = {}
            for svc in snapshot.objects_of("Service").values():
                by_ns.setdefault(getattr(svc, "namespace", ""), []).append(svc)
            idx = self._services = (objects, by_ns)
        return idx[1].get(namespace, [])

    def _default_selector(self, snapshot: Snapshot, pod: Pod) -> LabelSelector:
        """``helper.DefaultSelector``, memoised on the pod for this snapshot's objects."""
        objects = snapshot.objects
        cached: tuple[Any, LabelSelector] | None = pod.memo.get(_SELECTOR_MEMO)
        if cached is not None and cached[0] is objects:
            return cached[1]
        sel = default_selector(pod, self._services_in(snapshot, pod.namespace), snapshot.objects_of)
        pod.memo[_SELECTOR_MEMO] = (objects, sel)
        return sel

    def _defaults(self, snapshot: Snapshot, pod: Pod, specs: tuple[SpreadSpec, ...]) -> tuple[Constraint, ...]:
        """upstream ``buildDefaultConstraints``."""
        if not specs:
            return ()
        sel = self._default_selector(snapshot, pod)
        if sel.is_empty:
            return ()
        return tuple(
            Constraint(s.max_skew, s.topology_key, sel, s.min_domains, s.node_affinity_honor, s.node_taints_honor)
            for s in specs
        )

    def constraints(self, snapshot: Snapshot, pod: Pod, action: str) -> tuple[Constraint, ...]:
        """The pod's constraints of one action (its own when it has any, else the defaults).
        Raises :class:`ModelError` when the pod's constraints are invalid."""
        own = pod_specs(pod)
        if own.error:
            raise ModelError("spec.topologySpreadConstraints", own.error)
        if own.specs:
            return own.hard if action == DO_NOT_SCHEDULE else own.soft
        return self._defaults(snapshot, pod, self._default_hard if action == DO_NOT_SCHEDULE else self._default_soft)

    # --- filtering ----------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        try:
            constraints = self.constraints(state.snapshot, pod, DO_NOT_SCHEDULE)
        except ModelError as e:
            return None, Status.unresolvable(f"invalid topology spread constraints: {e.message}")
        if not constraints:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, compute_pre_filter_state(pod, constraints, state.snapshot.nodes))
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        if not s.constraints:
            return Status.ok()
        return filter_node(s, pod, node)

    # PreFilterExtensions (for a preemption dry run on a copy of the state).

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_add, pod_to_schedule, node, 1)
        return Status.ok()

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_remove, pod_to_schedule, node, -1)
        return Status.ok()

    # --- scoring ------------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status:
        snapshot = state.snapshot
        if not snapshot.node_map:  # (not .nodes: that list is built on first use, O(nodes))
            return Status.skip()
        try:
            constraints = self.constraints(snapshot, pod, SCHEDULE_ANYWAY)
        except ModelError as e:
            return Status.error(f"calculating preScoreState: {e}")
        if not constraints:
            return Status.skip()
        # Only the pod's own or configured (List) constraints need every topology key on a node: with the
        # system defaults a node without a zone label still gets hostname spreading.
        require_all = bool(pod_specs(pod).specs) or not self.system_defaulted
        state.write(PRE_SCORE_STATE_KEY, compute_pre_score_state(pod, constraints, nodes, snapshot.nodes, require_all))
        return Status.ok()

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        s: PreScoreState | None = state.read(PRE_SCORE_STATE_KEY)
        if s is None:  # PreScore did not run (a caller that scores without it): no preference
            return 0
        return score_node(s, pod, node)

    def normalize_score(self, state: CycleState, pod: Pod, scores: list[NodeScore]) -> Status:
        s: PreScoreState | None = state.read(PRE_SCORE_STATE_KEY)
        if s is not None:
            normalize(s, scores)
        return Status.ok()

    # --- reuse and events ---------------------------------------------------------------------------------

    def sign(self, state: CycleState, pod: Pod) -> Hashable | None:
        """None when the pod has constraints (its own or default ones) in this cycle: its verdicts depend
        on the pods of other nodes, which the framework's per-node reuse cannot see."""
        if pod_specs(pod).specs:
            return None
        try:
            if self.constraints(state.snapshot, pod, DO_NOT_SCHEDULE) or self.constraints(
                state.snapshot, pod, SCHEDULE_ANYWAY
            ):
                return None
        except ModelError:
            return None
        return ()

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # Assigned pods added, relabelled or deleted change the counts; the pod's own labels or tolerations
        # (NodeTaintsPolicy Honor) may change; nodes added, deleted, relabelled or retainted change domains.
        return (
            ("Pod", "Add"),
            ("Pod", "Update"),
            ("Pod", "Delete"),
            ("Node", "Add"),
            ("Node", "Update"),
            ("Node", "Delete"),
        )

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {
            ("Pod", "Add"): self.hint_pod_change,
            ("Pod", "Update"): self.hint_pod_change,
            ("Pod", "Delete"): self.hint_pod_change,
            ("Node", "Add"): self.hint_node_change,
            ("Node", "Update"): self.hint_node_change,
            ("Node", "Delete"): self.hint_node_change,
        }

    def _hint_constraints(self, pod: Pod) -> tuple[Constraint, ...] | None:
        """upstream ``getConstraints``: the pod's DoNotSchedule constraints, or the default ones; None when they
        cannot be known here (invalid, or defaults whose selector needs the snapshot)."""
        own = pod_specs(pod)
        if own.error:
            return None
        if own.specs:
            return own.hard
        return None if self._default_hard else ()

    def hint_pod_change(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterPodChange`` (podtopologyspread/plugin.go): a pod that is neither the waiting
        pod nor an assigned pod of its namespace → skip (``involvedInTopologySpreading``); an update: the waiting
        pod's own label change → queue, another pod's → queue when some constraint's selector matches the old and
        new labels differently; an added or deleted pod → queue when some constraint's selector matches it."""
        if (new is not None and not _involved(new, pod)) or (old is not None and not _involved(old, pod)):
            return QueueingHint.SKIP
        constraints = self._hint_constraints(pod)
        if constraints is None:
            return QueueingHint.QUEUE
        if new is not None and old is not None:
            if old.meta.labels == new.meta.labels:
                return QueueingHint.SKIP
            if old.uid == pod.uid:
                return QueueingHint.QUEUE
            for c in constraints:
                if c.selector.matches(old.meta.labels) != c.selector.matches(new.meta.labels):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        changed = new if new is not None else old
        assert changed is not None
        if any(c.selector.matches(changed.meta.labels) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def hint_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> QueueingHint:
        """upstream ``isSchedulableAfterNodeChange`` (podtopologyspread/plugin.go): an update → queue when the node
        starts or stops having every topology key, or has them all and a key's value or the taints changed; an
        added node → queue when it has every key; a deleted node → queue when it had every key."""
        constraints = self._hint_constraints(pod)
        if constraints is None:
            return QueueingHint.QUEUE
        was = old is not None and node_has_keys(old.labels, constraints)
        now = new is not None and node_has_keys(new.labels, constraints)
        if old is not None and new is not None:
            if was != now:
                return QueueingHint.QUEUE
            if now and (
                any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key) for c in constraints)
                or old.taints != new.taints
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if new is not None:
            return QueueingHint.QUEUE if now else QueueingHint.SKIP
        return QueueingHint.QUEUE if was else QueueingHint.SKIP


def _involved(changed: Pod, waiting: Pod) -> bool:
    """upstream ``involvedInTopologySpreading``: the waiting pod itself, or an assigned pod of its namespace."""
    return changed.uid == waiting.uid or (bool(changed.node_name) and changed.namespace == waiting.namespace)


SPEC = PluginSpec(
    name=NAME,
    factory=PodTopologySpread,
    points=frozenset({"preFilter", "filter", "preScore", "score"}),
    validate_args=validate_args,
    default_args={"defaultingType": SYSTEM_DEFAULTING},
)
