"""InterPodAffinity: required / preferred pod (anti-)affinity with kube-scheduler 1.37.2's semantics.

The case tables translate kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/interpodaffinity``
``filtering_test.go`` (TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes,
TestGetTPMapMatchingIncomingAffinityAntiAffinity, TestMultipleAffinityTermsRequireSingleMatchingPod,
TestFastTrackInterPodAffinity) and ``scoring_test.go`` (TestPreferredAffinity,
TestPreferredAffinityWithHardPodAffinitySymmetricWeight), with the feature gate InterPodAffinityHostnameFastPath at
its 1.37 default (off). The upstream default namespace ``""`` is ``default`` here. Then matchLabelKeys /
mismatchLabelKeys (pkg/registry/core/pod/strategy.go), the args (validation_pluginargs.go), reuse of results
between equal pods, and end-to-end runs of ``simulate``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from plugins.interpodaffinity import SPEC, InterPodAffinity, validate_args
from plugins.interpodaffinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH as AFF,
)
from plugins.interpodaffinity.filtering import (
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH as ANTI,
)
from plugins.interpodaffinity.filtering import (
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH as EXISTING,
)
from plugins.interpodaffinity.filtering import incoming_counts
from scheduler.api.model import Pod, pod_from
from scheduler.api.podaffinity import NAMESPACE_NAME_LABEL, merge_label_keys, namespace_labels, pod_affinity
from scheduler.cache.cache import Cache, Snapshot
from scheduler.config.schedulerconfig import load_config_text
from scheduler.framework.interface import (
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreFilterPlugin,
    PreScorePlugin,
    ScoreNormalizer,
    ScorePlugin,
    SignPlugin,
    Status,
)
from scheduler.simulate.simulation import simulate

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

# --- builders ------------------------------------------------------------------------------------------------

_names = itertools.count()


def expr(key: str, op: str, values: Sequence[str] = ()) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(
    *exprs: dict[str, Any],
    topology: str,
    namespaces: Sequence[str] | None = None,
    ns_selector: Mapping[str, Any] | None = None,
    match_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    sel: dict[str, Any] = {}
    if exprs:
        sel["matchExpressions"] = list(exprs)
    if match_labels:
        sel["matchLabels"] = dict(match_labels)
    t: dict[str, Any] = {"labelSelector": sel, "topologyKey": topology}
    if namespaces is not None:
        t["namespaces"] = list(namespaces)
    if ns_selector is not None:
        t["namespaceSelector"] = dict(ns_selector)
    return t


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


class P:
    """A pod in the style of upstream's ``st.MakePod()``: ``.pod_affinity_in(key, topology, values)`` etc."""

    def __init__(self, name: str = "", ns: str = "default") -> None:
        self.name = name or f"pod-{next(_names)}"
        self.ns = ns
        self.labels: dict[str, str] = {}
        self.node_name = ""
        self.affinity: dict[str, Any] = {}
        self.spec: dict[str, Any] = {}

    def label(self, k: str, v: str = "") -> P:
        self.labels[k] = v
        return self

    def with_labels(self, labels: Mapping[str, str]) -> P:
        self.labels.update(labels)
        return self

    def node(self, name: str) -> P:
        self.node_name = name
        return self

    def _add(self, kind: str, when: str, t: dict[str, Any]) -> P:
        block = self.affinity.setdefault(kind, {})
        block.setdefault(f"{when}DuringSchedulingIgnoredDuringExecution", []).append(t)
        return self

    def required(self, t: dict[str, Any]) -> P:
        return self._add("podAffinity", "required", t)

    def required_anti(self, t: dict[str, Any]) -> P:
        return self._add("podAntiAffinity", "required", t)

    def preferred(self, weight: int, t: dict[str, Any]) -> P:
        return self._add("podAffinity", "preferred", weighted(weight, t))

    def preferred_anti(self, weight: int, t: dict[str, Any]) -> P:
        return self._add("podAntiAffinity", "preferred", weighted(weight, t))

    def with_affinity(self, affinity: Mapping[str, Any]) -> P:
        for kind, block in affinity.items():
            for when, terms in block.items():
                for t in terms:
                    self.affinity.setdefault(kind, {}).setdefault(when, []).append(t)
        return self

    def pod_affinity_in(self, key: str, topology: str, values: Sequence[str]) -> P:
        return self.required(term(expr(key, "In", values), topology=topology))

    def pod_affinity_not_in(self, key: str, topology: str, values: Sequence[str]) -> P:
        return self.required(term(expr(key, "NotIn", values), topology=topology))

    def pod_affinity_exists(self, key: str, topology: str) -> P:
        return self.required(term(expr(key, "Exists"), topology=topology))

    def pod_anti_affinity_in(self, key: str, topology: str, values: Sequence[str]) -> P:
        return self.required_anti(term(expr(key, "In", values), topology=topology))

    def pod_anti_affinity_not_in(self, key: str, topology: str, values: Sequence[str]) -> P:
        return self.required_anti(term(expr(key, "NotIn", values), topology=topology))

    def pod_anti_affinity_exists(self, key: str, topology: str) -> P:
        return self.required_anti(term(expr(key, "Exists"), topology=topology))

    def raw(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": "dra-scheduler",
            "containers": [{"name": "c", "image": "x"}],
            **self.spec,
        }
        if self.node_name:
            spec["nodeName"] = self.node_name
        if self.affinity:
            spec["affinity"] = self.affinity
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "namespace": self.ns, "uid": self.name, "labels": dict(self.labels)},
            "spec": spec,
        }

    def pod(self) -> Pod:
        return pod_from(self.raw())


def node(name: str, labels: Mapping[str, str] | None = None, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def _p(
    labels: Mapping[str, str] | None = None, aff: Mapping[str, Any] | None = None, *, on: str = "", ns: str = "default"
) -> P:
    p = P(ns=ns).with_labels(labels or {})
    if aff:
        p.with_affinity(aff)
    if on:
        p.node(on)
    return p


NS_TEAMS = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}


def snapshot(
    nodes: Sequence[dict[str, Any]], pods: Sequence[P] = (), namespaces: Mapping[str, Mapping[str, str]] | None = None
) -> Snapshot:
    c = Cache()
    nss = {"default": {}, **(NS_TEAMS if namespaces is None else namespaces)}
    for ns, labels in nss.items():
        c.apply(
            "Namespace", "ADDED", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
        )
    for n in nodes:
        c.apply("Node", "ADDED", n)
    for p in pods:
        c.apply("Pod", "ADDED", p.raw())
    return c.snapshot()


def run_filter(snap: Snapshot, incoming: P, plugin: InterPodAffinity | None = None) -> tuple[Status, dict[str, Status]]:
    plugin = plugin or InterPodAffinity()
    pod = incoming.pod()
    state = CycleState(snap)
    _, pre = plugin.pre_filter(state, pod)
    if not pre.is_success:
        return pre, {}
    return pre, {n.name: plugin.filter(state, pod, n) for n in snap.nodes}


def run_score(snap: Snapshot, incoming: P, plugin: InterPodAffinity | None = None) -> tuple[Status, dict[str, int]]:
    """PreScore, Score and NormalizeScore over every node, as the runtime runs them."""
    plugin = plugin or InterPodAffinity()
    pod = incoming.pod()
    state = CycleState(snap)
    st = plugin.pre_score(state, pod, snap.nodes)
    if not st.is_success:
        return st, {}
    scores = [NodeScore(n.name, plugin.score(state, pod, n)) for n in snap.nodes]
    assert plugin.normalize_score(state, pod, scores).is_success
    return st, {s.name: s.score for s in scores}


OK = Status.ok()
SKIP = Status.skip()


def unres(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (msg,))


def unsched(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE, (msg,))


# --- TestRequiredAffinitySingleNode ----------------------------------------------------------------------------

LABELS1 = {"region": "r1", "zone": "z11"}
POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}


def _existing() -> P:
    return P().with_labels(POD_LABEL).node("node1")


SINGLE_NODE_CASES: list[tuple[str, P, list[P], Status, Status]] = [
    (
        "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
        P(),
        [],
        SKIP,
        OK,
    ),
    (
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches "
        "the existing pod",
        P().with_labels(POD_LABEL2).pod_affinity_in("service", "region", ["securityscan", "value2"]),
        [_existing()],
        OK,
        OK,
    ),
    (
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator "
        "in labelSelector that matches the existing pod",
        P().with_labels(POD_LABEL2).pod_affinity_not_in("service", "region", ["securityscan3", "value3"]),
        [_existing()],
        OK,
        OK,
    ),
    (
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        P()
        .with_labels(POD_LABEL2)
        .required(term(expr("service", "In", ["securityscan", "value2"]), topology="", namespaces=["DiffNameSpace"])),
        [P(ns="ns").label("service", "securityscan").node("node1")],
        OK,
        unres(AFF),
    ),
    (
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        P().with_labels(POD_LABEL).pod_affinity_in("service", "", ["antivirusscan", "value2"]),
        [_existing()],
        OK,
        unres(AFF),
    ),
    (
        "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuring"
        "Execution",
        P()
        .with_labels(POD_LABEL2)
        .required(term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"))
        .required(
            term(expr("service", "In", ["securityscan"]), expr("service", "NotIn", ["WrongValue"]), topology="region")
        ),
        [_existing()],
        OK,
        OK,
    ),
    (
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node "
        "because one of the matchExpression item don't match.",
        P()
        .with_labels(POD_LABEL2)
        .required(term(expr("service", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"))
        .required(
            term(expr("service", "In", ["securityscan2"]), expr("service", "NotIn", ["WrongValue"]), topology="region")
        ),
        [_existing()],
        OK,
        unres(AFF),
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        P()
        .with_labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"])
        .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"]),
        [_existing()],
        OK,
        OK,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        P()
        .with_labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"])
        .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"]),
        [_existing().pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"])],
        OK,
        OK,
    ),
    (
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        P()
        .with_labels(POD_LABEL2)
        .pod_affinity_in("service", "region", ["securityscan", "value2"])
        .pod_anti_affinity_in("service", "zone", ["securityscan", "value2"]),
        [_existing()],
        OK,
        unsched(ANTI),
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing "
        "pod",
        P()
        .with_labels(POD_LABEL)
        .pod_affinity_in("service", "region", ["securityscan", "value2"])
        .pod_anti_affinity_in("service", "node", ["antivirusscan", "value2"]),
        [_existing().pod_anti_affinity_in("service", "zone", ["securityscan", "value2"])],
        OK,
        unsched(EXISTING),
    ),
    (
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        P().with_labels(POD_LABEL).pod_affinity_not_in("service", "region", ["securityscan", "value2"]),
        [P().label("service", "securityscan").node("node2")],
        OK,
        unres(AFF),
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        P().with_labels(POD_LABEL),
        [_existing().pod_anti_affinity_in("service", "zone", ["securityscan", "value2"])],
        OK,
        unsched(EXISTING),
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy "
        "PodAntiAffinity symmetry with the existing pod",
        P().with_labels(POD_LABEL),
        [_existing().pod_anti_affinity_not_in("service", "zone", ["securityscan", "value2"])],
        SKIP,
        OK,
    ),
    (
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming "
        "pod",
        P()
        .with_labels(POD_LABEL)
        .pod_anti_affinity_exists("service", "region")
        .pod_anti_affinity_exists("security", "region"),
        [P().with_labels(POD_LABEL2).node("node1").pod_anti_affinity_exists("security", "zone")],
        OK,
        unsched(ANTI),
    ),
    (
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        P()
        .with_labels(POD_LABEL)
        .pod_anti_affinity_exists("service", "zone")
        .pod_anti_affinity_exists("security", "zone"),
        [P().with_labels(POD_LABEL2).node("node1").pod_anti_affinity_exists("security", "zone")],
        OK,
        unsched(ANTI),
    ),
    (
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        P().with_labels(POD_LABEL2).pod_anti_affinity_exists("security", "zone"),
        [
            P()
            .with_labels(POD_LABEL)
            .node("node1")
            .pod_anti_affinity_exists("service", "zone")
            .pod_anti_affinity_exists("security", "zone")
        ],
        OK,
        unsched(EXISTING),
    ),
    (
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        P().label("abc").label("xyz").pod_anti_affinity_exists("abc", "zone").pod_anti_affinity_exists("def", "zone"),
        [
            P()
            .label("def")
            .label("xyz")
            .node("node1")
            .pod_anti_affinity_exists("abc", "zone")
            .pod_anti_affinity_exists("def", "zone")
        ],
        OK,
        unsched(ANTI),
    ),
    (
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
        P().label("def").label("xyz").pod_anti_affinity_exists("abc", "zone").pod_anti_affinity_exists("def", "zone"),
        [
            P()
            .label("abc")
            .label("xyz")
            .node("node1")
            .pod_anti_affinity_exists("abc", "zone")
            .pod_anti_affinity_exists("def", "zone")
        ],
        OK,
        unsched(ANTI),
    ),
    (
        "affinity with NamespaceSelector",
        P()
        .with_labels(POD_LABEL2)
        .required(
            term(
                expr("service", "In", ["securityscan", "value2"]),
                topology="region",
                ns_selector={"matchExpressions": [expr("team", "In", ["team1"])]},
            )
        ),
        [P(ns="subteam1.team1").with_labels(POD_LABEL).node("node1")],
        OK,
        OK,
    ),
    (
        "affinity with non-matching NamespaceSelector",
        P()
        .with_labels(POD_LABEL2)
        .required(
            term(
                expr("service", "In", ["securityscan", "value2"]),
                topology="region",
                ns_selector={"matchExpressions": [expr("team", "In", ["team1"])]},
            )
        ),
        [P(ns="subteam1.team2").with_labels(POD_LABEL).node("node1")],
        OK,
        unres(AFF),
    ),
    (
        "anti-affinity with matching NamespaceSelector",
        P(ns="subteam1.team1")
        .with_labels(POD_LABEL2)
        .required_anti(
            term(
                expr("service", "In", ["securityscan", "value2"]),
                topology="zone",
                ns_selector={"matchExpressions": [expr("team", "In", ["team1"])]},
            )
        ),
        [P(ns="subteam2.team1").with_labels(POD_LABEL).node("node1")],
        OK,
        unsched(ANTI),
    ),
    (
        "anti-affinity with matching all NamespaceSelector",
        P(ns="subteam1.team1")
        .with_labels(POD_LABEL2)
        .required_anti(term(expr("service", "In", ["securityscan", "value2"]), topology="zone", ns_selector={})),
        [P(ns="subteam2.team1").with_labels(POD_LABEL).node("node1")],
        OK,
        unsched(ANTI),
    ),
    (
        "anti-affinity with non-matching NamespaceSelector",
        P(ns="subteam1.team1")
        .with_labels(POD_LABEL2)
        .required_anti(
            term(
                expr("service", "In", ["securityscan", "value2"]),
                topology="zone",
                ns_selector={"matchExpressions": [expr("team", "In", ["team1"])]},
            )
        ),
        [P(ns="subteam1.team2").with_labels(POD_LABEL).node("node1")],
        OK,
        OK,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "want_pre", "want"),
    [c[1:] for c in SINGLE_NODE_CASES],
    ids=[c[0][:90] for c in SINGLE_NODE_CASES],
)
def test_required_affinity_single_node(incoming: P, pods: list[P], want_pre: Status, want: Status) -> None:
    snap = snapshot([node("node1", LABELS1)], pods)
    pre, statuses = run_filter(snap, incoming)
    assert pre == want_pre
    if pre.code == Code.SKIP:
        return
    assert statuses["node1"] == want


BAD = "{{.bad-value.}}"
BAD_MSG = (
    'parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "{{.bad-value.}}": a valid label must be '
    "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    "incoming",
    [
        P()
        .with_labels(POD_LABEL)
        .pod_affinity_in("service", "region", [BAD])
        .pod_affinity_in("service", "node", ["a"]),
        P()
        .with_labels(POD_LABEL)
        .pod_affinity_in("service", "region", ["foo"])
        .pod_affinity_in("service", "node", [BAD]),
    ],
    ids=["invalid affinity label syntax", "invalid label syntax in the second term"],
)
def test_invalid_label_syntax_fails_pre_filter_unresolvable(incoming: P) -> None:
    pre, _ = run_filter(snapshot([node("node1", LABELS1)]), incoming)
    assert pre == unres(BAD_MSG)


def test_invalid_terms_of_each_list_are_reported_and_aggregated() -> None:
    incoming = (
        P()
        .required_anti(term(expr("a", "Bogus"), topology="zone"))
        .preferred(5, term(expr("not a/valid/key", "Exists"), topology="zone"))
    )
    pre, _ = run_filter(snapshot([node("node1", LABELS1)]), incoming)
    assert pre.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre.message.startswith('parsing pod: [requiredAntiAffinityTerms: "Bogus" is not a valid label selector')
    assert "preferredAffinityTerms: key: Invalid value: " in pre.message
    # PreScore of such a pod is an Error (upstream: "failed to parse pod" in PreScore)
    st, _ = run_score(snapshot([node("node1", LABELS1)]), incoming)
    assert st.code == Code.ERROR and "failed to parse pod" in st.message


def test_existing_pod_with_unparsable_term_keeps_its_other_lists() -> None:
    """NewPodInfo: a list that fails to parse is empty; the pod's other lists still count."""
    existing = (
        P()
        .label("app", "x")
        .node("node1")
        .pod_affinity_in("app", "zone", [BAD])
        .pod_anti_affinity_exists("app", "zone")
    )
    info = pod_affinity(existing.pod())
    assert info.required_affinity == () and len(info.required_anti_affinity) == 1
    _, statuses = run_filter(snapshot([node("node1", LABELS1)], [existing]), P().label("app", "y"))
    assert statuses["node1"] == unsched(EXISTING)


# --- TestRequiredAffinityMultipleNodes ---------------------------------------------------------------------------

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}
R1Z1 = {"region": "r1", "zone": "z1", "hostname": "nodeA"}


def _n(name: str, **labels: str) -> dict[str, Any]:
    return node(name, labels)


MULTI_NODE_CASES: list[tuple[str, P, list[P], list[dict[str, Any]], Status, list[Status]]] = [
    (
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has "
        "an existing pod that matches the affinity rules",
        P().pod_affinity_in("foo", "region", ["bar"]),
        [P("p1").label("foo", "bar").node("node1")],
        [node("node1", CHINA), node("node2", CHINA_AZ1), node("node3", INDIA)],
        OK,
        [OK, OK, unres(AFF)],
    ),
    (
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the "
        "collection should not be blocked from being scheduled onto any node, even there's no existing pod that "
        "matches the rule anywhere.",
        P()
        .label("foo", "bar")
        .label("service", "securityscan")
        .pod_affinity_in("foo", "zone", ["bar"])
        .pod_affinity_in("service", "zone", ["securityscan"]),
        [P("p1").label("foo", "bar").node("nodeA")],
        [_n("nodeA", zone="az1", hostname="h1"), _n("nodeB", zone="az2", hostname="h2")],
        OK,
        [OK, OK],
    ),
    (
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        P()
        .label("foo", "bar")
        .label("service", "securityscan")
        .pod_affinity_in("foo", "zone", ["bar"])
        .pod_affinity_in("service", "zone", ["securityscan"]),
        [P("p1").label("foo", "bar").node("nodeA")],
        [_n("nodeA", zoneLabel="az1", hostname="h1"), _n("nodeB", zoneLabel="az2", hostname="h2")],
        OK,
        [unres(AFF), unres(AFF)],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        P().pod_anti_affinity_in("foo", "region", ["abc"]),
        [P().label("foo", "abc").node("nodeA")],
        [_n("nodeA", region="r1", hostname="nodeA"), _n("nodeB", region="r1", hostname="nodeB")],
        OK,
        [unsched(ANTI), unsched(ANTI)],
    ),
    (
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        P().pod_anti_affinity_in("foo", "region", ["abc"]).pod_anti_affinity_in("service", "zone", ["securityscan"]),
        [P().label("foo", "abc").label("service", "securityscan").node("nodeA")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(ANTI), unsched(ANTI)],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod "
        "affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        P().pod_anti_affinity_in("foo", "region", ["abc"]),
        [P().label("foo", "abc").node("nodeA")],
        [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)],
        OK,
        [unsched(ANTI), unsched(ANTI), OK],
    ),
    (
        "... can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in "
        "different namespace)",
        P(ns="NS1").label("foo", "123").pod_anti_affinity_in("foo", "region", ["bar"]),
        [
            P(ns="NS1").label("foo", "bar").node("nodeA"),
            P(ns="NS2").node("nodeC").pod_anti_affinity_in("foo", "region", ["123"]),
        ],
        [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)],
        OK,
        [unsched(ANTI), unsched(ANTI), OK],
    ),
    (
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of "
        "the term is firstly checked, and then topologyKey of the term is also checked",
        P().label("foo"),
        [P().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
        SKIP,
        [OK, OK],
    ),
    (
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        P().node("nodeA").pod_anti_affinity_exists("foo", "invalid-node-label"),
        [P().label("foo").node("nodeA")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
        OK,
        [OK, OK],
    ),
    (
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each "
        "existingPod's terms on all nodes",
        P().label("foo").label("bar"),
        [
            P().node("nodeA").pod_anti_affinity_exists("foo", "zone"),
            P().node("nodeA").pod_anti_affinity_exists("bar", "region"),
        ],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(EXISTING), unsched(EXISTING)],
    ),
    (
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one "
        "anti-affinity rule of existingPod",
        P().pod_anti_affinity_exists("foo", "zone").pod_anti_affinity_exists("bar", "region"),
        [P().label("foo").node("nodeA"), P().label("bar").node("nodeB")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(ANTI), unsched(ANTI)],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
        P().label("foo").label("bar"),
        [
            P()
            .node("nodeA")
            .pod_anti_affinity_exists("foo", "invalid-node-label")
            .pod_anti_affinity_exists("bar", "zone")
        ],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(EXISTING), OK],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
        P().pod_anti_affinity_exists("foo", "invalid-node-label").pod_anti_affinity_exists("bar", "zone"),
        [P("podA").label("foo").label("bar").node("nodeA")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(ANTI), OK],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when all terms have valid topologyKey",
        P().label("foo").label("bar"),
        [P().node("nodeA").pod_anti_affinity_exists("foo", "region").pod_anti_affinity_exists("bar", "zone")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(EXISTING), unsched(EXISTING)],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when all terms have valid topologyKey",
        P().pod_anti_affinity_exists("foo", "region").pod_anti_affinity_exists("bar", "zone"),
        [P().label("foo").label("bar").node("nodeA")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unsched(ANTI), unsched(ANTI)],
    ),
    (
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches "
        "incoming pod, so incoming pod can only be scheduled to nodeC",
        P().label("foo").label("bar"),
        [
            P().node("nodeA").pod_anti_affinity_exists("foo", "zone").pod_anti_affinity_exists("labelA", "zone"),
            P().node("nodeB").pod_anti_affinity_exists("bar", "zone").pod_anti_affinity_exists("labelB", "zone"),
        ],
        [
            _n("nodeA", region="r1", zone="z1", hostname="nodeA"),
            _n("nodeB", region="r1", zone="z2", hostname="nodeB"),
            _n("nodeC", region="r1", zone="z3", hostname="nodeC"),
        ],
        OK,
        [unsched(EXISTING), unsched(EXISTING), OK],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
        "match",
        P().pod_affinity_exists("foo", "region").pod_affinity_exists("bar", "zone"),
        [P("pod1").label("foo").label("bar").node("nodeA")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z1", hostname="nodeB")],
        OK,
        [OK, OK],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys "
        "match, and the match logic should be satisfied on the same pod",
        P().pod_affinity_exists("foo", "region").pod_affinity_exists("bar", "zone"),
        [P("pod1").label("foo").node("nodeA"), P("pod2").label("bar").node("nodeB")],
        [_n("nodeA", region="r1", zone="z1", hostname="nodeA"), _n("nodeB", region="r1", zone="z2", hostname="nodeB")],
        OK,
        [unres(AFF), unres(AFF)],
    ),
    (
        "Test incoming pod's host-scoped affinity",
        P().pod_affinity_exists("foo", HOSTNAME),
        [P("pod1").label("foo").node("nodeA")],
        [node("nodeA", {HOSTNAME: "nodeA"}), node("nodeB", {HOSTNAME: "nodeB"})],
        OK,
        [OK, unres(AFF)],
    ),
    (
        "Test incoming pod's host-scoped anti-affinity",
        P().pod_anti_affinity_exists("foo", HOSTNAME),
        [P("pod1").label("foo").node("nodeA")],
        [node("nodeA", {HOSTNAME: "nodeA"}), node("nodeB", {HOSTNAME: "nodeB"})],
        OK,
        [unsched(ANTI), OK],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want_pre", "want"),
    [c[1:] for c in MULTI_NODE_CASES],
    ids=[c[0][:90] for c in MULTI_NODE_CASES],
)
def test_required_affinity_multiple_nodes(
    incoming: P, pods: list[P], nodes: list[dict[str, Any]], want_pre: Status, want: list[Status]
) -> None:
    snap = snapshot(nodes, pods, namespaces={"NS1": {}})
    pre, statuses = run_filter(snap, incoming)
    assert pre == want_pre
    if pre.code == Code.SKIP:
        # Skip: the runtime does not run Filter; the verdicts upstream lists are "fits".
        assert all(w == OK for w in want)
        return
    assert [statuses[n["metadata"]["name"]] for n in nodes] == want


def test_multiple_affinity_terms_require_a_single_matching_pod() -> None:
    """TestMultipleAffinityTermsRequireSingleMatchingPod."""
    incoming = P("pod-1").pod_affinity_in("foo", HOSTNAME, ["bar"]).pod_affinity_in("baz", HOSTNAME, ["qux"])
    pod_a = P("podA").label("foo", "bar").node("node-1")
    pod_b = P("podB").label("baz", "qux").node("node-1")
    pod_c = P("podC").label("foo", "bar").label("baz", "qux").node("node-3")
    nodes = [node(n, {HOSTNAME: n}) for n in ("node-1", "node-2", "node-3")]
    _, st = run_filter(snapshot(nodes, [pod_a, pod_b, pod_c]), incoming)
    assert st == {"node-1": unres(AFF), "node-2": unres(AFF), "node-3": OK}
    # self-affinity: without podC nobody matches both terms; the pod carrying both labels may go anywhere
    incoming.label("foo", "bar").label("baz", "qux")
    _, st = run_filter(snapshot(nodes, [pod_a, pod_b]), incoming)
    assert st == {"node-1": OK, "node-2": OK, "node-3": OK}


def test_fast_track_cases_with_the_fast_path_off() -> None:
    """TestFastTrackInterPodAffinity (its verdicts are the same with the gate off, the 1.37 default)."""
    nodes = [node("node-1", {HOSTNAME: "node-1", ZONE: "zone-a"}), node("node-2", {HOSTNAME: "node-2", ZONE: "zone-b"})]
    pods = [
        P("pod-no-rules-foo").label("app", "foo").node("node-1"),
        P("pod-no-rules-bar").label("app", "bar").node("node-2"),
        P("pod-in-ns-with-team-label", ns="blue-ns").label("app", "blocked").label("team", "blue").node("node-1"),
    ]
    snap = snapshot(nodes, pods, namespaces={"other": {}, "blue-ns": {"team": "blue"}})
    zone_anti = P("pod-1").label("app", "foo").pod_anti_affinity_in("app", ZONE, ["foo"])
    assert run_filter(snap, zone_anti)[1] == {"node-1": unsched(ANTI), "node-2": OK}
    host_anti = P("pod-2").label("app", "bar").pod_anti_affinity_in("app", HOSTNAME, ["bar"])
    assert run_filter(snap, host_anti)[1] == {"node-1": OK, "node-2": unsched(ANTI)}
    ns_anti = (
        P("pod-3", ns="other")
        .label("app", "baz")
        .required_anti(
            term(
                expr("app", "In", ["blocked"]),
                topology=ZONE,
                ns_selector={"matchExpressions": [expr("team", "DoesNotExist")]},
            )
        )
    )
    assert run_filter(snap, ns_anti)[1]["node-1"] == OK


# --- TestPreFilterStateAddRemovePod ---------------------------------------------------------------------------------

_ANTI_FOO_BAR = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term(expr("foo", "In", ["bar"]), topology="region")]
    }
}
_COMPLEX_TERMS = [
    term(expr("foo", "In", ["bar", "buzz"]), topology="region"),
    term(expr("service", "NotIn", ["bar", "security", "test"]), topology="zone"),
]
_ANTI_COMPLEX = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _COMPLEX_TERMS}}
_AFF_COMPLEX = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _COMPLEX_TERMS}}
_FOO = {"foo": "bar"}
_ADD_REMOVE_NODES = [
    node("nodeA", {"region": "r1", "zone": "z11"}),
    node("nodeB", {"region": "r1", "zone": "z12"}),
    node("nodeC", {"region": "r2", "zone": "z21"}),
]


def _state_fields(s: Any) -> tuple[Any, ...]:
    return (s.affinity_counts, s.anti_affinity_counts, s.existing_anti_affinity_counts, s.matches_own_affinity)


@pytest.mark.parametrize(
    ("pending", "existing", "added", "want_anti", "want_aff"),
    [
        (
            _p(_FOO, _ANTI_FOO_BAR),
            [_p(_FOO, on="nodeA"), _p(None, _ANTI_FOO_BAR, on="nodeC")],
            _p(_FOO, _ANTI_FOO_BAR, on="nodeB"),
            {("region", "r1"): 2},
            {},
        ),
        (
            _p(_FOO, _ANTI_COMPLEX),
            [_p(_FOO, on="nodeA"), _p(None, _ANTI_FOO_BAR, on="nodeC")],
            _p(_FOO, _ANTI_COMPLEX, on="nodeA"),
            {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
            {},
        ),
        (
            _p(_FOO, _AFF_COMPLEX),
            [_p(_FOO, on="nodeA"), _p(None, {**_ANTI_FOO_BAR, **_AFF_COMPLEX}, on="nodeC")],
            _p(_FOO, _ANTI_COMPLEX, on="nodeA"),
            {},
            {("region", "r1"): 2, ("zone", "z11"): 2},
        ),
        (
            _p(_FOO, _ANTI_FOO_BAR),
            [_p(_FOO, on="nodeA")],
            _p(
                _FOO,
                {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            term(expr("foo", "In", ["bar"]), topology="region"),
                            term(expr("foo", "In", ["bar"]), topology=HOSTNAME),
                        ]
                    }
                },
                on="nodeA",
            ),
            {("region", "r1"): 2},
            {},
        ),
    ],
    ids=[
        "anti-affinity terms are updated correctly after adding and removing a pod",
        "anti-affinity terms (two terms) are updated correctly after adding and removing a pod",
        "matching pod affinity and anti-affinity are updated correctly after adding and removing a pod",
        "anti-affinity terms with both hostname and non-hostname are updated correctly",
    ],
)
def test_pre_filter_state_add_remove_pod(
    pending: P, existing: list[P], added: P, want_anti: dict[Any, int], want_aff: dict[Any, int]
) -> None:
    """AddPod/RemovePod (preemption's dry run) give the state PreFilter computes with / without the pod."""
    plugin = InterPodAffinity()
    pod = pending.pod()

    def prefilter(pods: list[P]) -> tuple[CycleState, Snapshot]:
        snap = snapshot(_ADD_REMOVE_NODES, pods)
        state = CycleState(snap)
        _, st = plugin.pre_filter(state, pod)
        assert st.is_success
        return state, snap

    all_state, _ = prefilter([*existing, added])
    state, snap = prefilter(existing)
    s = state.read("PreFilterInterPodAffinity")
    original = s.clone()
    node_info = snap.node_map[added.node_name]
    assert plugin.add_pod(state, pod, added.pod(), node_info).is_success
    assert s.anti_affinity_counts == want_anti and s.affinity_counts == want_aff
    assert _state_fields(s) == _state_fields(all_state.read("PreFilterInterPodAffinity"))
    assert plugin.remove_pod(state, pod, added.pod(), node_info).is_success
    assert _state_fields(s) == _state_fields(original)
    # a pure RemovePod from the state with every pod gives the state without the added pod
    assert plugin.remove_pod(all_state, pod, added.pod(), node_info).is_success
    assert _state_fields(all_state.read("PreFilterInterPodAffinity")) == _state_fields(original)


def test_add_pod_without_pre_filter_state_is_an_error() -> None:
    snap = snapshot(_ADD_REMOVE_NODES)
    st = InterPodAffinity().add_pod(CycleState(snap), P().pod(), P().pod(), snap.nodes[0])
    assert st.code == Code.ERROR


# --- TestGetTPMapMatchingIncomingAffinityAntiAffinity --------------------------------------------------------------


def _normal(*labels: str) -> P:
    p = P("normal").node("nodeA")
    for lb in labels:
        p.label(lb)
    return p


HOST_A = {(HOSTNAME, "nodeA"): 1}


@pytest.mark.parametrize(
    ("existing", "incoming", "want_aff", "want_anti"),
    [
        ([], P("aaa-normal"), {}, {}),
        ([_normal("aaa")], P("aaa-normal"), {}, {}),
        (
            [_normal("bbb")],
            P("aaa-anti").pod_affinity_exists("aaa", HOSTNAME).pod_anti_affinity_exists("aaa", HOSTNAME),
            {},
            {},
        ),
        (
            [_normal("aaa")],
            P().pod_affinity_exists("aaa", HOSTNAME).pod_anti_affinity_exists("aaa", HOSTNAME),
            HOST_A,
            HOST_A,
        ),
        (
            [_normal("aaa", "bbb")],
            P()
            .pod_affinity_exists("aaa", HOSTNAME)
            .pod_affinity_exists("bbb", HOSTNAME)
            .pod_anti_affinity_exists("aaa", HOSTNAME),
            {(HOSTNAME, "nodeA"): 2},  # one for each term
            HOST_A,
        ),
        (
            [_normal("aaa")],
            P()
            .pod_affinity_exists("aaa", HOSTNAME)
            .pod_affinity_exists("bbb", HOSTNAME)
            .pod_anti_affinity_exists("aaa", HOSTNAME)
            .pod_anti_affinity_exists("bbb", HOSTNAME),
            {},
            HOST_A,
        ),
        (
            [_normal("aaa", "bbb")],
            P()
            .pod_affinity_exists("aaa", HOSTNAME)
            .pod_affinity_exists("ccc", HOSTNAME)
            .pod_anti_affinity_exists("aaa", HOSTNAME)
            .pod_anti_affinity_exists("ccc", HOSTNAME),
            {},
            HOST_A,
        ),
        (
            [_normal("bbb")],
            P()
            .pod_affinity_exists("aaa", HOSTNAME)
            .pod_affinity_exists("bbb", HOSTNAME)
            .pod_anti_affinity_exists("aaa", HOSTNAME)
            .pod_anti_affinity_exists("bbb", HOSTNAME),
            {},
            HOST_A,
        ),
    ],
    ids=[
        "nil test",
        "incoming pod without affinity/anti-affinity causes a no-op",
        "no pod has label that violates incoming pod's affinity and anti-affinity",
        "existing pod matches incoming pod's affinity and anti-affinity - single term case",
        "existing pod matches incoming pod's affinity and anti-affinity - multiple terms case",
        "existing pod not match incoming pod's affinity but matches anti-affinity",
        "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1",
        "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2",
    ],
)
def test_incoming_affinity_anti_affinity_counts(
    existing: list[P], incoming: P, want_aff: dict[Any, int], want_anti: dict[Any, int]
) -> None:
    snap = snapshot([node("nodeA", {HOSTNAME: "nodeA"})], existing)
    info = pod_affinity(incoming.pod())
    assert incoming_counts(snap.nodes, info.required_affinity, info.required_anti_affinity) == (want_aff, want_anti)


# --- TestPreferredAffinity ----------------------------------------------------------------------------------------

S1 = {"security": "S1"}
S2 = {"security": "S2"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
TEAM1_SELECTOR = {"matchExpressions": [expr("team", "In", ["team1"])]}
NOT_TEAM1_SELECTOR = {"matchExpressions": [expr("team", "NotIn", ["team1"])]}


def _pref(kind: str, *terms: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [weighted(w, t) for w, t in terms]}}


STAY_WITH_S1_IN_REGION = _pref("podAffinity", (5, term(expr("security", "In", ["S1"]), topology="region")))
STAY_WITH_S2_IN_REGION = _pref("podAffinity", (6, term(expr("security", "In", ["S2"]), topology="region")))
AFFINITY3 = _pref(
    "podAffinity",
    (8, term(expr("security", "NotIn", ["S1"]), expr("security", "In", ["S2"]), topology="region")),
    (2, term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region")),
)
HARD_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            term(expr("security", "In", ["S1", "value2"]), topology="region"),
            term(expr("security", "Exists"), expr("wrongkey", "DoesNotExist"), topology="region"),
        ]
    }
}
AWAY_FROM_S1_IN_AZ = _pref("podAntiAffinity", (5, term(expr("security", "In", ["S1"]), topology="az")))
AWAY_FROM_S2_IN_AZ = _pref("podAntiAffinity", (5, term(expr("security", "In", ["S2"]), topology="az")))
STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ = {
    **_pref("podAffinity", (8, term(expr("security", "In", ["S1"]), topology="region"))),
    **_pref("podAntiAffinity", (5, term(expr("security", "In", ["S2"]), topology="az"))),
}
_NS_TERM = term(
    expr("security", "In", ["S1"]), topology="region", namespaces=["subteam2.team2"], ns_selector=TEAM1_SELECTOR
)
AFFINITY_NS_SELECTOR = _pref("podAffinity", (5, _NS_TERM))
ANTI_AFFINITY_NS_SELECTOR = _pref("podAntiAffinity", (5, _NS_TERM))
_NEG_NS_TERM = term(expr("security", "In", ["S1"]), topology="region", ns_selector=NOT_TEAM1_SELECTOR)
AFFINITY_NEGATIVE_NS_SELECTOR = _pref("podAffinity", (5, _NEG_NS_TERM))
ANTI_AFFINITY_NEGATIVE_NS_SELECTOR = _pref("podAntiAffinity", (5, _NEG_NS_TERM))
INVALID_AFFINITY = _pref("podAffinity", (8, term(expr("security", "In", [BAD]), topology="region")))
INVALID_ANTI_AFFINITY = _pref("podAntiAffinity", (5, term(expr("security", "In", [BAD]), topology="az")))


MAX = 100

PREFERRED_CASES: list[tuple[str, P, list[P], list[dict[str, Any]], bool, Status | None, list[int]]] = [
    (
        "all nodes are same priority as Affinity is nil",
        _p(S1),
        [],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        SKIP,
        [],
    ),
    (
        "Affinity: pod that matches topology key & pods in nodes will get high score comparing to others which "
        "doesn't match either pods in nodes or in topology key",
        _p(S1, STAY_WITH_S1_IN_REGION),
        [_p(S1, on="node1"), _p(S2, on="node2"), _p(S1, on="node3")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        None,
        [MAX, 0, 0],
    ),
    (
        "All the nodes that have the same topology key & label value with one of them has an existing pod that match "
        "the affinity rules, have the same score",
        _p(None, STAY_WITH_S1_IN_REGION),
        [_p(S1, on="node1")],
        [node("node1", CHINA), node("node2", CHINA_AZ1), node("node3", INDIA)],
        False,
        None,
        [MAX, MAX, 0],
    ),
    (
        "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has "
        "more matches will get high score",
        _p(S1, STAY_WITH_S2_IN_REGION),
        [_p(S2, on=n) for n in ("node1", "node1", "node2", "node3", "node4", "node5")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", CHINA), node("node4", CHINA), node("node5", INDIA)],
        False,
        None,
        [MAX, 0, MAX, MAX, 0],
    ),
    (
        "Affinity: different Label operators and values for pod affinity scheduling preference, including some match "
        "failures",
        _p(S1, AFFINITY3),
        [_p(S1, on="node1"), _p(S2, on="node2"), _p(S1, on="node3")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        None,
        [20, MAX, 0],
    ),
    (
        "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity "
        "symmetry",
        _p(S2),
        [_p(S1, STAY_WITH_S1_IN_REGION, on="node1"), _p(S2, STAY_WITH_S2_IN_REGION, on="node2")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        None,
        [0, MAX, 0],
    ),
    (
        "Affinity symmetry with namespace selector",
        _p(S1, ns="subteam1.team1"),
        [_p(S1, AFFINITY_NS_SELECTOR, on="node1"), _p(S2, STAY_WITH_S2_IN_REGION, on="node2")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        None,
        [MAX, 0, 0],
    ),
    (
        "AntiAffinity symmetry with namespace selector",
        _p(S1, ns="subteam1.team1"),
        [_p(S1, ANTI_AFFINITY_NS_SELECTOR, on="node1"), _p(S2, STAY_WITH_S2_IN_REGION, on="node2")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        None,
        [0, MAX, MAX],
    ),
    (
        "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        _p(S1),
        [_p(S1, HARD_AFFINITY, on="node1"), _p(S2, HARD_AFFINITY, on="node2")],
        [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)],
        False,
        None,
        [MAX, MAX, 0],
    ),
    (
        "Anti Affinity: pod that does not match existing pods in node will get high score",
        _p(S1, AWAY_FROM_S1_IN_AZ),
        [_p(S1, on="node1"), _p(S2, on="node2")],
        [node("node1", AZ1), node("node2", CHINA)],
        False,
        None,
        [0, MAX],
    ),
    (
        "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score "
        "comparing to others",
        _p(S1, AWAY_FROM_S1_IN_AZ),
        [_p(S1, on="node1"), _p(S1, on="node2")],
        [node("node1", AZ1), node("node2", CHINA)],
        False,
        None,
        [0, MAX],
    ),
    (
        "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches "
        "will get high score",
        _p(S1, AWAY_FROM_S1_IN_AZ),
        [_p(S1, on="node1"), _p(S1, on="node1"), _p(S2, on="node2")],
        [node("node1", AZ1), node("node2", INDIA)],
        False,
        None,
        [0, MAX],
    ),
    (
        "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
        _p(S2),
        [_p(S1, AWAY_FROM_S2_IN_AZ, on="node1"), _p(S2, AWAY_FROM_S1_IN_AZ, on="node2")],
        [node("node1", AZ1), node("node2", AZ2)],
        False,
        None,
        [0, MAX],
    ),
    (
        "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod "
        "affinity & anti affinity",
        _p(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [_p(S1, on="node1"), _p(S1, on="node2")],
        [node("node1", CHINA), node("node2", AZ1)],
        False,
        None,
        [MAX, 0],
    ),
    (
        "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing "
        "pods have the same labels",
        _p(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [_p(S1, on=n) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")],
        [
            node("node1", CHINA_AZ1),
            node("node2", INDIA),
            node("node3", CHINA),
            node("node4", CHINA),
            node("node5", INDIA),
        ],
        False,
        None,
        [MAX, 0, MAX, MAX, 0],
    ),
    (
        "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in "
        "both pod affinity & anti affinity & symmetry",
        _p(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
        [
            _p(S1, on="node1"),
            _p(S2, on="node2"),
            _p(None, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, on="node3"),
            _p(None, AWAY_FROM_S1_IN_AZ, on="node4"),
        ],
        [node("node1", CHINA), node("node2", AZ1), node("node3", INDIA), node("node4", AZ2)],
        False,
        None,
        [MAX, 0, MAX, 0],
    ),
    (
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        _p(S1),
        [_p(S1, on="node1"), _p(None, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, on="node2")],
        [node("node1", CHINA), node("node2", CHINA)],
        False,
        None,
        [0, 0],
    ),
    (
        "Affinity with pods matching NamespaceSelector",
        _p(S1, AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team2"),
            _p(S1, on="node2", ns="subteam2.team1"),
        ],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [MAX, 0],
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        _p(S1, AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam2.team2"),
            _p(S1, on="node2", ns="subteam2.team1"),
        ],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [MAX, 0],
    ),
    (
        "AntiAffinity with pods matching NamespaceSelector",
        _p(S1, ANTI_AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team2"),
            _p(S1, on="node2", ns="subteam2.team1"),
        ],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [0, MAX],
    ),
    (
        "AntiAffinity with pods matching both NamespaceSelector and Namespaces fields",
        _p(S1, ANTI_AFFINITY_NS_SELECTOR, ns="subteam1.team1"),
        [
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam2.team2"),
            _p(S1, on="node2", ns="subteam2.team1"),
        ],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [0, MAX],
    ),
    (
        "Affinity with pods correctly enforcing negative NamespaceSelector",
        _p(S1, AFFINITY_NEGATIVE_NS_SELECTOR, ns="subteam1.team1"),
        [
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node2", ns="subteam1.team2"),
        ],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [0, MAX],
    ),
    (
        "AntiAffinity with pods correctly enforcing negative NamespaceSelector",
        _p(S1, ANTI_AFFINITY_NEGATIVE_NS_SELECTOR, ns="subteam1.team1"),
        [
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node1", ns="subteam1.team1"),
            _p(S1, on="node2", ns="subteam1.team2"),
        ],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [MAX, 0],
    ),
    (
        "Ignore preferred terms of existing pods",
        _p(S2),
        [_p(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, on="node1"), _p(S2, STAY_WITH_S2_IN_REGION, on="node2")],
        [node("node1", CHINA), node("node2", INDIA)],
        True,
        SKIP,
        [],
    ),
    (
        "Do not ignore preferred terms of existing pods",
        _p(S2),
        [_p(S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ, on="node1"), _p(S2, STAY_WITH_S2_IN_REGION, on="node2")],
        [node("node1", CHINA), node("node2", INDIA)],
        False,
        None,
        [0, MAX],
    ),
    ("No nodes to score", _p(S2), [], [], False, SKIP, []),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "ignore", "want_status", "want"),
    [c[1:] for c in PREFERRED_CASES],
    ids=[c[0][:90] for c in PREFERRED_CASES],
)
def test_preferred_affinity(
    incoming: P,
    pods: list[P],
    nodes: list[dict[str, Any]],
    ignore: bool,
    want_status: Status | None,
    want: list[int],
) -> None:
    plugin = InterPodAffinity({"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": ignore})
    st, scores = run_score(snapshot(nodes, pods), incoming, plugin)
    assert st == (want_status or OK)
    if st.is_success:
        assert [scores[n["metadata"]["name"]] for n in nodes] == want


@pytest.mark.parametrize("aff", [INVALID_AFFINITY, INVALID_ANTI_AFFINITY], ids=["affinity", "anti-affinity"])
def test_invalid_preferred_terms_fail_pre_score(aff: dict[str, Any]) -> None:
    st, _ = run_score(snapshot([node("node1", CHINA), node("node2", CHINA)]), _p(None, aff))
    assert st.code == Code.ERROR
    assert f'Invalid value: "{BAD}"' in st.message


# --- TestPreferredAffinityWithHardPodAffinitySymmetricWeight -------------------------------------------------------

HARD_POD_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            term(
                expr("service", "In", ["S1"]),
                topology="region",
                namespaces=["default", "subteam2.team2"],
                ns_selector=TEAM1_SELECTOR,
            )
        ]
    }
}


@pytest.mark.parametrize(
    ("ns", "weight", "want_status", "want"),
    [
        ("default", 1, OK, [MAX, MAX, 0]),
        ("default", 0, SKIP, []),
        ("subteam1.team2", 1, SKIP, []),
        ("subteam1.team1", 1, OK, [MAX, MAX, 0]),
        ("subteam2.team2", 1, OK, [MAX, MAX, 0]),
    ],
    ids=[
        "with default weight",
        "with zero weight",
        "with no matching namespace",
        "with matching NamespaceSelector",
        "with matching Namespaces",
    ],
)
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(
    ns: str, weight: int, want_status: Status, want: list[int]
) -> None:
    nodes = [node("node1", CHINA), node("node2", INDIA), node("node3", AZ1)]
    pods = [_p(None, HARD_POD_AFFINITY, on="node1"), _p(None, HARD_POD_AFFINITY, on="node2")]
    plugin = InterPodAffinity({"hardPodAffinityWeight": weight})
    st, scores = run_score(snapshot(nodes, pods), _p({"service": "S1"}, ns=ns), plugin)
    assert st == want_status
    if st.is_success:
        assert [scores[f"node{i}"] for i in (1, 2, 3)] == want


def test_hard_pod_affinity_weight_scales_against_preferred_terms() -> None:
    """The weight is per matching required term: 3 x weight 10 (30) beats a preferred term of weight 20."""
    nodes = [node("n1", {"zone": "a"}), node("n2", {"zone": "b"}), node("n3", {"zone": "c"})]
    req = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term(expr("app", "In", ["web"]), topology="zone")] * 3
        }
    }
    pref = _pref("podAffinity", (20, term(expr("app", "In", ["web"]), topology="zone")))
    pods = [_p({"app": "x"}, req, on="n1"), _p({"app": "y"}, pref, on="n2")]
    _, scores = run_score(snapshot(nodes, pods), _p({"app": "web"}), InterPodAffinity({"hardPodAffinityWeight": 10}))
    assert scores == {"n1": MAX, "n2": 66, "n3": 0}  # raw 30, 20, 0: int(100 * 20 / 30) = 66


def test_normalize_score_min_max_with_negative_raw_scores() -> None:
    """Raw scores may be negative (anti-affinity); min-max maps the lowest to 0, the highest to 100, truncating."""
    plugin = InterPodAffinity()
    state = CycleState(snapshot([]))
    state.write("PreScoreInterPodAffinity", {"zone": {"a": -5}})
    scores = [NodeScore("a", -5), NodeScore("b", 0), NodeScore("c", 2), NodeScore("d", -4)]
    assert plugin.normalize_score(state, P().pod(), scores).is_success
    assert [s.score for s in scores] == [0, 71, 100, 14]  # 100*5/7 = 71.4, 100*1/7 = 14.3
    same = [NodeScore("a", -3), NodeScore("b", -3)]
    plugin.normalize_score(state, P().pod(), same)
    assert [s.score for s in same] == [0, 0]


def test_nodes_without_the_topology_key_score_nothing_but_take_part_in_normalisation() -> None:
    nodes = [node("n1", {"zone": "a"}), node("n2", {"zone": "b"}), node("n3", {})]
    pods = [_p({"app": "db"}, on="n1"), _p({"app": "db"}, on="n2"), _p({"app": "db"}, on="n2")]
    incoming = _p(None, _pref("podAntiAffinity", (10, term(expr("app", "In", ["db"]), topology="zone"))))
    _, scores = run_score(snapshot(nodes, pods), incoming)
    assert scores == {"n1": 50, "n2": 0, "n3": MAX}  # raw -10, -20, 0


# --- namespaces, matchLabelKeys / mismatchLabelKeys ------------------------------------------------------------------


def test_namespace_selector_sees_the_metadata_name_label_the_api_server_sets() -> None:
    snap = snapshot(
        [node("n1", {"zone": "a"})], [P("db", ns="data").label("app", "db").node("n1")], namespaces={"data": {}}
    )
    assert namespace_labels(snap.namespaces, "data") == {NAMESPACE_NAME_LABEL: "data"}
    assert namespace_labels(snap.namespaces, "missing") == {}
    by_name = term(
        expr("app", "In", ["db"]), topology="zone", ns_selector={"matchLabels": {NAMESPACE_NAME_LABEL: "data"}}
    )
    assert run_filter(snap, P().required(by_name))[1] == {"n1": OK}
    assert run_filter(snap, P().required_anti(by_name))[1] == {"n1": unsched(ANTI)}


def test_empty_namespaces_and_nil_selector_mean_the_pods_own_namespace() -> None:
    snap = snapshot(
        [node("n1", {"zone": "a"})], [P("db", ns="other").label("app", "db").node("n1")], namespaces={"other": {}}
    )
    own = term(expr("app", "In", ["db"]), topology="zone")
    assert run_filter(snap, P().required(own))[1] == {"n1": unres(AFF)}
    assert run_filter(snap, P(ns="other").required(own))[1] == {"n1": OK}
    everywhere = term(expr("app", "In", ["db"]), topology="zone", ns_selector={})
    assert run_filter(snap, P().required(everywhere))[1] == {"n1": OK}


def test_existing_pods_namespace_selector_is_matched_against_the_incoming_pods_namespace_labels() -> None:
    anti = term(expr("app", "Exists"), topology="zone", ns_selector={"matchLabels": {"tier": "prod"}})
    snap = snapshot(
        [node("n1", {"zone": "a"})],
        [P("guard", ns="ops").node("n1").required_anti(anti)],
        namespaces={"ops": {}, "shop": {"tier": "prod"}, "lab": {"tier": "dev"}},
    )
    assert run_filter(snap, P(ns="shop").label("app", "x"))[1] == {"n1": unsched(EXISTING)}
    assert run_filter(snap, P(ns="lab").label("app", "x"))[0] == SKIP


def test_match_label_keys_are_merged_like_the_api_server() -> None:
    t = {"labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev", "absent"], "topologyKey": "z"}
    merged = merge_label_keys(t, {"app": "web", "rev": "a"})
    assert merged == {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "rev", "operator": "In", "values": ["a"]}],
    }
    # already merged by an API server: unchanged (idempotent)
    assert merge_label_keys({**t, "labelSelector": merged}, {"app": "web", "rev": "a"}) == merged
    # mismatchLabelKeys: NotIn; a nil selector stays nil (matches nothing)
    t2 = {"labelSelector": {}, "mismatchLabelKeys": ["tenant"], "topologyKey": "z"}
    assert merge_label_keys(t2, {"tenant": "t1"}) == {
        "matchExpressions": [{"key": "tenant", "operator": "NotIn", "values": ["t1"]}]
    }
    assert merge_label_keys({"matchLabelKeys": ["rev"], "topologyKey": "z"}, {"rev": "a"}) is None


def test_match_label_keys_restrict_anti_affinity_to_the_same_revision() -> None:
    """A rolling update: the new revision's pod may share a node with the old revision's, not with its own."""
    nodes = [node("n1", {HOSTNAME: "n1"}), node("n2", {HOSTNAME: "n2"})]
    anti = {"labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["rev"], "topologyKey": HOSTNAME}
    old = P("old").label("app", "web").label("rev", "a").node("n1")
    snap = snapshot(nodes, [old])
    assert run_filter(snap, P().label("app", "web").label("rev", "b").required_anti(anti))[1] == {"n1": OK, "n2": OK}
    assert run_filter(snap, P().label("app", "web").label("rev", "a").required_anti(anti))[1] == {
        "n1": unsched(ANTI),
        "n2": OK,
    }


def test_mismatch_label_keys_keep_tenants_apart() -> None:
    """KEP-3633's example: pods of one tenant together, no other tenant in their domain."""
    nodes = [node("n1", {ZONE: "a"}), node("n2", {ZONE: "b"}), node("n3", {ZONE: "c"})]
    exists = {"matchExpressions": [expr("tenant", "Exists")]}
    aff = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": exists, "matchLabelKeys": ["tenant"], "topologyKey": ZONE}
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": exists, "mismatchLabelKeys": ["tenant"], "topologyKey": ZONE}
            ]
        },
    }
    pods = [
        P("t1").label("tenant", "t1").node("n1").with_affinity(aff),
        P("t2").label("tenant", "t2").node("n2").with_affinity(aff),
    ]
    snap = snapshot(nodes, pods)
    t1 = P().label("tenant", "t1").with_affinity(aff)
    assert run_filter(snap, t1)[1] == {"n1": OK, "n2": unres(AFF), "n3": unres(AFF)}
    t3 = P().label("tenant", "t3").with_affinity(aff)  # first of its group: only where no other tenant runs
    assert run_filter(snap, t3)[1] == {"n1": unsched(ANTI), "n2": unsched(ANTI), "n3": OK}


# --- args, spec, events, signatures ----------------------------------------------------------------------------------


def test_spec_and_protocols() -> None:
    p = SPEC.factory(SPEC.default_args)
    assert SPEC.name == p.name == "InterPodAffinity"
    assert SPEC.points == {"preFilter", "filter", "preScore", "score"}
    for proto in (
        PreFilterPlugin,
        FilterPlugin,
        PreScorePlugin,
        ScorePlugin,
        ScoreNormalizer,
        SignPlugin,
        EnqueueExtensions,
    ):
        assert isinstance(p, proto)
    assert SPEC.default_args == {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False}
    assert p.hard_pod_affinity_weight == 1 and not p.ignore_preferred_terms_of_existing_pods


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"hardPodAffinityWeight": 10}, []),
        ({"hardPodAffinityWeight": 0}, []),
        ({"hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True}, []),
        ({"hardPodAffinityWeight": -1}, ["args.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"]),
        (
            {"hardPodAffinityWeight": 101},
            ["args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"],
        ),
        ({"hardPodAffinityWeight": "1"}, ["args.hardPodAffinityWeight: Invalid value: '1': must be an integer"]),
        (
            {"ignorePreferredTermsOfExistingPods": "yes"},
            ["args.ignorePreferredTermsOfExistingPods: Invalid value: 'yes': must be a boolean"],
        ),
        ({"hardPodAffinitySymmetricWeight": 1}, ["args.hardPodAffinitySymmetricWeight: unknown field"]),
    ],
)
def test_validate_args(args: dict[str, Any], errors: list[str]) -> None:
    assert validate_args(args, "args") == errors


def test_args_reach_the_plugin_through_the_configuration() -> None:
    cfg = load_config_text(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: dra-scheduler
  pluginConfig:
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 7, ignorePreferredTermsOfExistingPods: true}
"""
    )
    assert cfg.profiles[0].plugin_args["InterPodAffinity"] == {
        "hardPodAffinityWeight": 7,
        "ignorePreferredTermsOfExistingPods": True,
    }
    with pytest.raises(Exception, match=r"profiles\[0\]\.pluginConfig\[0\]\.args\.hardPodAffinityWeight"):
        load_config_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
            "- pluginConfig: [{name: InterPodAffinity, args: {hardPodAffinityWeight: 200}}]\n"
        )


def test_events_to_register() -> None:
    assert set(InterPodAffinity().events_to_register()) == {
        ("Pod", "Add"),
        ("Pod", "Update"),
        ("Pod", "Delete"),
        ("Node", "Add"),
        ("Node", "Update"),
        ("Namespace", "Add"),
        ("Namespace", "Update"),
    }


def test_sign() -> None:
    plugin = InterPodAffinity()
    nodes = [node("n1", {ZONE: "a"}), node("n2", {ZONE: "b"})]
    plain = P().label("app", "web")
    # no pod with (anti-)affinity anywhere: one constant for every pod without terms
    empty = CycleState(snapshot(nodes, [P().node("n1")]))
    assert plugin.sign(empty, plain.pod()) == plugin.sign(empty, P().label("app", "other").pod()) == ()
    # a pod with terms cannot be signed (its verdicts depend on pods on other nodes)
    assert plugin.sign(empty, P().pod_affinity_exists("app", ZONE).pod()) is None
    assert plugin.sign(empty, P().preferred(1, term(expr("app", "Exists"), topology=ZONE)).pod()) is None
    # pods with affinity exist: labels, namespace and the state of those pods are in the signature
    guard = P("guard").node("n1").pod_anti_affinity_in("app", ZONE, ["web"])
    s1 = CycleState(snapshot(nodes, [guard]))
    sig = plugin.sign(s1, plain.pod())
    assert sig is not None and sig != ()
    assert plugin.sign(s1, P().label("app", "web").pod()) == sig
    assert plugin.sign(s1, P().label("app", "db").pod()) != sig
    assert plugin.sign(s1, P(ns="subteam1.team1").label("app", "web").pod()) != sig
    s2 = CycleState(snapshot(nodes, [guard, P("guard2").node("n2").pod_anti_affinity_in("app", ZONE, ["web"])]))
    assert plugin.sign(s2, plain.pod()) != sig


# --- end to end: simulate ------------------------------------------------------------------------------------------


def _sim(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    res = asyncio.run(simulate(objs))
    return {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}


def _node_of(pods: Mapping[str, dict[str, Any]], name: str) -> str:
    return str(pods[name]["spec"].get("nodeName") or "")


def _condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def _nodes(*names: str, zone: str = "z1", cpu: str = "8") -> list[dict[str, Any]]:
    return [node(n, {HOSTNAME: n, ZONE: zone}, cpu=cpu) for n in names]


HOST_ANTI_WEB = term(match_labels={"app": "web"}, topology=HOSTNAME)


def test_three_anti_affine_replicas_on_two_nodes() -> None:
    """The issue's case: 2 bound on different nodes, the third Unschedulable with upstream's reason."""
    objs = [*_nodes("n1", "n2")] + [
        P(f"web-{i}").label("app", "web").required_anti(HOST_ANTI_WEB).raw() for i in range(3)
    ]
    pods = _sim(objs)
    placed = sorted(_node_of(pods, f"web-{i}") for i in range(3))
    assert placed == ["", "n1", "n2"]
    [pending] = [p for p in pods.values() if not p["spec"].get("nodeName")]
    cond = _condition(pending)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")


def test_two_four_gpu_pods_with_anti_affinity_do_not_share_a_node() -> None:
    from bench.fleet import scale_fleet

    tmpl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "four", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}]}
            }
        },
    }

    def gpu_pod(name: str, anti: bool) -> dict[str, Any]:
        p = P(name).label("app", "train")
        if anti:
            p.required_anti(term(match_labels={"app": "train"}, topology=HOSTNAME))
        p.spec = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "four"}]}
        raw = p.raw()
        raw["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
        return raw

    for anti in (False, True):
        pods = _sim([*scale_fleet(2, 8), tmpl, gpu_pod("a", anti), gpu_pod("b", anti)])
        a, b = _node_of(pods, "a"), _node_of(pods, "b")
        assert a and b
        # without the anti-affinity both fit one 8-GPU node and pack there; with it they must not
        assert (a != b) == anti


def test_required_affinity_to_a_running_db_pod_lands_on_its_node() -> None:
    db = P("db").label("app", "db").node("n3")
    busy = [P(f"busy-{i}").node("n3") for i in range(3)]  # n3 is the fullest node: scoring alone would avoid it
    web = P("web").required(term(match_labels={"app": "db"}, topology=HOSTNAME))
    pods = _sim([*_nodes("n1", "n2", "n3"), db.raw(), *(b.raw() for b in busy), web.raw()])
    assert _node_of(pods, "web") == "n3"


def test_required_affinity_without_a_target_is_unschedulable_and_unresolvable() -> None:
    web = P("web").label("app", "web").required(term(match_labels={"app": "db"}, topology=HOSTNAME))
    pods = _sim([*_nodes("n1", "n2"), web.raw()])
    cond = _condition(pods["web"])
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/2 nodes are available: 2 node(s) didn't match pod affinity rules.")


def test_self_affine_group_lands_in_one_zone() -> None:
    """The first pod of a group whose affinity matches itself goes anywhere; the others follow it."""
    nodes = [node(f"{z}-{i}", {HOSTNAME: f"{z}-{i}", ZONE: z}) for z in ("a", "b", "c") for i in range(2)]
    same_zone = term(match_labels={"app": "cache"}, topology=ZONE)
    group = [P(f"cache-{i}").label("app", "cache").required(same_zone).raw() for i in range(4)]
    pods = _sim([*nodes, *group])
    zones = {_node_of(pods, f"cache-{i}").split("-")[0] for i in range(4)}
    assert len(zones) == 1 and "" not in zones


def test_existing_pods_anti_affinity_keeps_equal_pods_out_of_its_zone_and_memo_is_reused() -> None:
    """Equal pods without terms share filter/score results (same signature) while nothing with affinity
    changes, and still respect an existing pod's zone anti-affinity."""
    guard = P("guard").node("a-0").required_anti(term(match_labels={"app": "web"}, topology=ZONE))
    nodes = [node(f"{z}-{i}", {HOSTNAME: f"{z}-{i}", ZONE: z}) for z in ("a", "b") for i in range(3)]
    web = [P(f"web-{i}").label("app", "web").raw() for i in range(6)]
    res = asyncio.run(simulate([*nodes, guard.raw(), *web]))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    assert all(_node_of(pods, f"web-{i}").startswith("b-") for i in range(6))
    assert res.scheduler is not None
    stats = res.scheduler.profiles["dra-scheduler"].memo_stats
    assert stats["filter_hits"] > 0


def test_equal_pods_do_not_reuse_results_across_a_change_of_affinity_pods() -> None:
    """Memo check: x and z are equal pods without terms (same signature if the plugin ignored pods on other
    nodes). Between them, y (required anti-affinity to app=web in its zone) lands in zone a. The node of zone a
    y did not land on is unchanged since x's cycle, so a reused verdict would let z in there; z must be
    unschedulable (x filled zone b, g keeps app=web out of zone c)."""
    nodes = [
        node("a-0", {HOSTNAME: "a-0", ZONE: "a"}, cpu="4"),
        node("a-1", {HOSTNAME: "a-1", ZONE: "a"}, cpu="4"),
        node("b-0", {HOSTNAME: "b-0", ZONE: "b"}, cpu="500m"),
        node("c-0", {HOSTNAME: "c-0", ZONE: "c"}, cpu="4"),
    ]
    fill = [P(f"fill-{n}").node(n) for n in ("a-0", "a-1")]
    for f in fill:
        f.spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3500m"}}}]}
    # e, an existing pod preferring app=web in zone b, steers x to b-0 (x fits zone a too)
    e = P("e").node("b-0").preferred(100, term(match_labels={"app": "web"}, topology=ZONE))
    # g rejects app=web in zone c: x's and z's PreFilter do not Skip, so both run this plugin's Filter
    g = P("g").node("c-0").required_anti(term(match_labels={"app": "web"}, topology=ZONE))
    g.spec = {"priority": 1000}  # above z's: z may not preempt g (DefaultPreemption) to enter zone c

    def web(name: str, prio: int) -> dict[str, Any]:
        p = P(name).label("app", "web")
        p.spec = {
            "priority": prio,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}],
        }
        return p.raw()

    y = P("y").label("app", "guard").required_anti(term(match_labels={"app": "web"}, topology=ZONE))
    y.spec = {"priority": 50, "nodeSelector": {ZONE: "a"}}
    objs = [*nodes, *(f.raw() for f in fill), e.raw(), g.raw(), web("x", 100), y.raw(), web("z", 10)]
    res = asyncio.run(simulate(objs))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    assert _node_of(pods, "x") == "b-0"
    assert _node_of(pods, "y").startswith("a-")
    assert _node_of(pods, "z") == ""
    msg = _condition(pods["z"])["message"]
    assert "3 node(s) didn't satisfy existing pods anti-affinity rules" in msg
    assert "1 Insufficient cpu" in msg


def test_pod_waiting_for_its_affinity_target_is_retried_when_the_target_is_bound() -> None:
    """web (higher priority, tried first) needs app=db on its node; db is still pending. Binding db is an
    assigned-pod Add event, which InterPodAffinity registers: web is retried and joins db."""
    web = P("web").required(term(match_labels={"app": "db"}, topology=HOSTNAME))
    web.spec = {"priority": 10}
    db = P("db").label("app", "db")
    pods = _sim([*_nodes("n1", "n2", "n3"), web.raw(), db.raw()])
    assert _node_of(pods, "db") and _node_of(pods, "web") == _node_of(pods, "db")
