"""VolumeBinding: upstream's binder and plugin test cases (kube-scheduler v1.37.2
``pkg/scheduler/framework/plugins/volumebinding/binder_test.go`` TestFindPodVolumesWithoutProvisioning,
TestFindPodVolumesWithProvisioning, TestCapacity, TestAssumePodVolumes, TestCheckBindings,
TestBindPodVolumes; ``volume_binding_test.go`` TestVolumeBinding), translated, plus the assume cache across
cycles, PreBind against the in-memory API, args validation and events."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from plugins.volumebinding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    SPEC,
    VolumeBinding,
    parse_args,
    validate_args,
)
from plugins.volumebinding.binder import (
    AssumeCache,
    BinderError,
    StorageView,
    find_pod_volumes,
    get_pod_volume_claims,
)
from scheduler.api.model import Pod
from scheduler.api.storage import csidriver_from, csistoragecapacity_from, pv_from, pvc_from, storageclass_from
from scheduler.config.schedulerconfig import ConfigError, parse_config
from scheduler.framework.interface import Code, CycleState
from scheduler.simulate.memapi import InMemoryAPI
from tests.volume_fixtures import (
    IMMEDIATE,
    NODE_KEY,
    PROVISIONER,
    TOPO_MISMATCH,
    WAIT,
    WAIT_PROV,
    Obj,
    World,
    claim_volume,
    csidriver,
    ephemeral_volume,
    make_pod,
    node,
    pv,
    pvc,
    storage_class,
    upstream_classes,
)

NS = "testns"

# --- upstream's fixtures (binder_test.go) --------------------------------------------------------------


def _claims() -> dict[str, Obj]:
    c = {
        "unbound": pvc("unbound-pvc", "1G", ns=NS),
        "unbound2": pvc("unbound-pvc2", "5G", ns=NS),
        "prebound": pvc("prebound-pvc", "1G", volume_name="pv-node1a", ns=NS),
        "bound": pvc("bound-pvc", "1G", volume_name="pv-bound", bound=True, ns=NS),
        "immediate_unbound": pvc("immediate-unbound-pvc", "1G", IMMEDIATE, ns=NS),
        "immediate_bound": pvc(
            "immediate-bound-pvc", "1G", IMMEDIATE, volume_name="pv-bound-immediate", bound=True, ns=NS
        ),
        "provisioned": pvc("provisioned-pvc", "1Gi", WAIT_PROV, ns=NS),
        "no_provisioner": pvc("no-provisioner-pvc", "1Gi", WAIT, ns=NS),
        "topo_mismatch": pvc("topo-mismatch-pvc", "1Gi", TOPO_MISMATCH, ns=NS),
        "selected_node": pvc("provisioned-pvc", "1Gi", WAIT_PROV, selected_node="node1", ns=NS),
    }
    return c


def _volumes(c: Mapping[str, Obj]) -> dict[str, Obj]:
    return {
        "node1a": pv("pv-node1a", "node1", "5G"),
        "node1b": pv("pv-node1b", "node1", "10G"),
        "node2": pv("pv-node2", "node2", "1G"),
        "bound": pv("pv-bound", "node1", "1G", claim=c["bound"]),
        "bound_immediate": pv("pv-bound-immediate", "node1", "1G", IMMEDIATE, claim=c["immediate_bound"]),
        "bound_immediate_node2": pv("pv-bound-immediate", "node2", "1G", IMMEDIATE, claim=c["immediate_bound"]),
    }


class _Snap:
    """A snapshot stand-in holding storage objects (including kinds the cache does not watch yet)."""

    def __init__(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        self.objects = objects

    def objects_of(self, kind: str) -> Mapping[str, Any]:
        return self.objects.get(kind, {})


def _view(
    pvcs: Sequence[Obj],
    pvs: Sequence[Obj],
    *,
    drivers: Sequence[Obj] = (),
    capacities: Sequence[Obj] = (),
    cache: AssumeCache | None = None,
) -> StorageView:
    objs: dict[str, dict[str, Any]] = {
        "PersistentVolumeClaim": {},
        "PersistentVolume": {},
        "StorageClass": {},
        "CSIDriver": {},
        "CSIStorageCapacity": {},
    }
    for i, o in enumerate([*pvcs, *pvs]):
        o = copy.deepcopy(o)
        o["metadata"].setdefault("resourceVersion", str(i + 1))
        if o["kind"] == "PersistentVolumeClaim":
            c = pvc_from(o)
            objs["PersistentVolumeClaim"][c.key] = c
        else:
            v = pv_from(o)
            objs["PersistentVolume"][v.name] = v
    for sc in upstream_classes():
        objs["StorageClass"][sc["metadata"]["name"]] = storageclass_from(sc)
    for d in drivers:
        objs["CSIDriver"][d["metadata"]["name"]] = csidriver_from(d)
    for cap in capacities:
        c2 = csistoragecapacity_from(cap)
        objs["CSIStorageCapacity"][c2.meta.key] = c2
    return StorageView(_Snap(objs), cache or AssumeCache())  # type: ignore[arg-type]


def _pod_with(claims: Sequence[Obj]) -> Pod:
    return make_pod("test-pod", [claim_volume(c["metadata"]["name"]) for c in claims], ns=NS, node_name="")


NODE1 = {NODE_KEY: "node1"}


def _find(pod: Pod, view: StorageView) -> tuple[Any, list[str]]:
    """upstream's findPodVolumes test helper: GetPodVolumeClaims, unbound immediate claims fail, then
    FindPodVolumes on node1."""
    claims = get_pod_volume_claims(pod, view)
    if claims.immediate:
        raise BinderError(ERR_UNBOUND_IMMEDIATE)
    return find_pod_volumes(claims, "node1", NODE1, view)


def _bindings(vols: Any) -> list[tuple[str, str]]:
    return [(b.pvc.name, b.pv.name) for b in vols.static_bindings]


# name: (pod claims, cache claims (None = pod claims), pvs, expected bindings, reasons, should fail)
WITHOUT_PROVISIONING: dict[
    str, tuple[list[str], list[str] | None, list[str], list[tuple[str, str]], list[str], bool]
] = {
    "pvc-not-found": (["bound"], [], [], [], [], True),
    "bound-pvc": (["bound"], None, ["bound"], [], [], False),
    "bound-pvc,pv-not-exists": (["bound"], None, [], [], [ERR_REASON_PV_NOT_EXIST], False),
    "prebound-pvc": (["prebound"], None, ["node1a"], [], [], True),
    "unbound-pvc,pv-same-node": (
        ["unbound"],
        None,
        ["node2", "node1a", "node1b"],
        [("unbound-pvc", "pv-node1a")],
        [],
        False,
    ),
    "unbound-pvc,pv-different-node": (["unbound"], None, ["node2"], [], [ERR_REASON_BIND_CONFLICT], False),
    "two-unbound-pvcs": (
        ["unbound", "unbound2"],
        None,
        ["node1a", "node1b"],
        [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")],
        [],
        False,
    ),
    "two-unbound-pvcs,order-by-size": (
        ["unbound2", "unbound"],
        None,
        ["node1a", "node1b"],
        [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")],
        [],
        False,
    ),
    "two-unbound-pvcs,partial-match": (
        ["unbound", "unbound2"],
        None,
        ["node1a"],
        [("unbound-pvc", "pv-node1a")],
        [ERR_REASON_BIND_CONFLICT],
        False,
    ),
    "one-bound,one-unbound": (
        ["unbound", "bound"],
        None,
        ["bound", "node1a"],
        [("unbound-pvc", "pv-node1a")],
        [],
        False,
    ),
    "one-bound,one-unbound,no-match": (
        ["unbound", "bound"],
        None,
        ["bound", "node2"],
        [],
        [ERR_REASON_BIND_CONFLICT],
        False,
    ),
    "one-prebound,one-unbound": (["unbound", "prebound"], None, ["node1a", "node1b"], [], [], True),
    "immediate-bound-pvc": (["immediate_bound"], None, ["bound_immediate"], [], [], False),
    "immediate-bound-pvc-wrong-node": (
        ["immediate_bound"],
        None,
        ["bound_immediate_node2"],
        [],
        [ERR_REASON_NODE_CONFLICT],
        False,
    ),
    "immediate-unbound-pvc": (["immediate_unbound"], None, [], [], [], True),
    "immediate-unbound-pvc,delayed-mode-bound": (["immediate_unbound", "bound"], None, ["bound"], [], [], True),
    "immediate-unbound-pvc,delayed-mode-unbound": (["immediate_unbound", "unbound"], None, [], [], [], True),
}


@pytest.mark.parametrize("case", sorted(WITHOUT_PROVISIONING))
@pytest.mark.parametrize("driver", [None, True, False], ids=["no-CSIDriver", "capacity-tracking", "no-tracking"])
def test_find_pod_volumes_without_provisioning(case: str, driver: bool | None) -> None:
    pod_claims, cache_claims, pvs, bindings, reasons, should_fail = WITHOUT_PROVISIONING[case]
    c, v = _claims(), _volumes(_claims())
    claims = [c[n] for n in pod_claims]
    in_cache = claims if cache_claims is None else [c[n] for n in cache_claims]
    drivers = [] if driver is None else [csidriver(PROVISIONER, storage_capacity=driver)]
    view = _view(in_cache, [v[n] for n in pvs], drivers=drivers)
    if should_fail:
        with pytest.raises(BinderError):
            _find(_pod_with(claims), view)
        return
    vols, got = _find(_pod_with(claims), view)
    assert got == reasons
    assert _bindings(vols) == bindings
    assert vols.dynamic_provisions == []


def test_find_pod_volumes_no_volumes_and_no_pvcs() -> None:
    view = _view([], [])
    for pod in (make_pod("p", ns=NS), make_pod("p", [{"name": "e", "emptyDir": {}}], ns=NS)):
        vols, reasons = _find(pod, view)
        assert reasons == [] and vols.static_bindings == [] and vols.dynamic_provisions == []


def test_find_pod_volumes_generic_ephemeral() -> None:
    pod = make_pod("test-pod", [ephemeral_volume("test-volume")], ns=NS, uid="pod-uid")
    owned = pvc("test-pod-test-volume", "1G", volume_name="pv-bound", bound=True, ns=NS, owner=("test-pod", "pod-uid"))
    foreign = pvc("test-pod-test-volume", "1G", volume_name="pv-bound", bound=True, ns=NS)
    bound_pv = pv("pv-bound", "node1", "1G", claim=owned)
    with pytest.raises(BinderError):  # generic-ephemeral,no-pvc
        _find(pod, _view([], [bound_pv]))
    vols, reasons = _find(pod, _view([owned], [bound_pv]))  # generic-ephemeral,with-pvc
    assert reasons == [] and _bindings(vols) == []
    with pytest.raises(BinderError, match="pod is not owner"):  # generic-ephemeral,wrong-pvc
        _find(pod, _view([foreign], [bound_pv]))


# name: (pod claims, pvs, expected bindings, expected provisions, reasons, needs capacity)
WITH_PROVISIONING: dict[str, tuple[list[str], list[str], list[tuple[str, str]], list[str], list[str], bool]] = {
    "one-provisioned": (["provisioned"], [], [], ["provisioned-pvc"], [], True),
    "two-unbound-pvcs,one-matched,one-provisioned": (
        ["unbound", "provisioned"],
        ["node1a"],
        [("unbound-pvc", "pv-node1a")],
        ["provisioned-pvc"],
        [],
        True,
    ),
    "one-bound,one-provisioned": (["bound", "provisioned"], ["bound"], [], ["provisioned-pvc"], [], True),
    "one-binding,one-selected-node": (["bound", "selected_node"], ["bound"], [], ["provisioned-pvc"], [], True),
    "one-immediate-bound,one-provisioned": (
        ["immediate_bound", "provisioned"],
        ["bound_immediate"],
        [],
        ["provisioned-pvc"],
        [],
        True,
    ),
    "invalid-provisioner": (["no_provisioner"], [], [], [], [ERR_REASON_BIND_CONFLICT], False),
    "volume-topology-unsatisfied": (["topo_mismatch"], [], [], [], [ERR_REASON_BIND_CONFLICT], False),
}


@pytest.mark.parametrize("case", sorted(WITH_PROVISIONING))
@pytest.mark.parametrize("driver", [None, True, False], ids=["no-CSIDriver", "capacity-tracking", "no-tracking"])
def test_find_pod_volumes_with_provisioning(case: str, driver: bool | None) -> None:
    pod_claims, pvs, bindings, provisions, reasons, needs_capacity = WITH_PROVISIONING[case]
    c, v = _claims(), _volumes(_claims())
    claims = [c[n] for n in pod_claims]
    drivers = [] if driver is None else [csidriver(PROVISIONER, storage_capacity=driver)]
    vols, got = _find(_pod_with(claims), _view(claims, [v[n] for n in pvs], drivers=drivers))
    if needs_capacity and driver:
        # without CSIStorageCapacity objects, provisioning is blocked
        reasons, provisions = [*reasons, ERR_REASON_NOT_ENOUGH_SPACE], []
    assert got == reasons
    assert _bindings(vols) == bindings
    assert [p.pvc.name for p in vols.dynamic_provisions] == provisions


def test_immediate_unbound_claim_fails_with_provisioning_too() -> None:
    c = _claims()
    with pytest.raises(BinderError):
        _find(_pod_with([c["immediate_unbound"]]), _view([c["immediate_unbound"]], []))


def _capacity(name: str, cls: str, node_value: str | None, capacity: str = "", max_size: str = "") -> Obj:
    o: Obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": cls,
        "nodeTopology": {"matchLabels": {NODE_KEY: node_value}} if node_value else {},
    }
    if capacity:
        o["capacity"] = capacity
    if max_size:
        o["maximumVolumeSize"] = max_size
    return o


CAPACITY: dict[str, tuple[list[Obj], str | None]] = {  # capacities, name of the one used (None: not enough)
    "network-attached": ([_capacity("net", WAIT_PROV, None, "1Gi")], "net"),
    "local-storage": ([_capacity("n1", WAIT_PROV, "node1", "1Gi")], "n1"),
    "multiple": ([_capacity("n2", WAIT_PROV, "node2", "1Gi"), _capacity("n1", WAIT_PROV, "node1", "1Gi")], "n1"),
    "no-storage": ([], None),
    "wrong-node": ([_capacity("n2", WAIT_PROV, "node2", "1Gi")], None),
    "wrong-storage-class": ([_capacity("n1", WAIT, "node1", "1Gi")], None),
    "insufficient-storage": ([_capacity("n1", WAIT_PROV, "node1", "1Mi")], None),
    "insufficient-volume-size": ([_capacity("n1", WAIT_PROV, "node1", "1Gi", "1Mi")], None),
    "zero-storage": ([_capacity("n1", WAIT_PROV, "node1", "0Mi")], None),
    "zero-volume-size": ([_capacity("n1", WAIT_PROV, "node1", "", "0Mi")], None),
    "nil-storage": ([_capacity("n1", WAIT_PROV, "node1")], None),
}


@pytest.mark.parametrize("case", sorted(CAPACITY))
@pytest.mark.parametrize("opt_in", [True, False], ids=["storageCapacity", "no-storageCapacity"])
def test_capacity(case: str, opt_in: bool) -> None:
    capacities, used = CAPACITY[case]
    claim = _claims()["provisioned"]
    view = _view([claim], [], drivers=[csidriver(PROVISIONER, storage_capacity=opt_in)], capacities=capacities)
    vols, reasons = _find(_pod_with([claim]), view)
    if not opt_in:
        assert reasons == []
        assert [(p.pvc.name, p.capacity) for p in vols.dynamic_provisions] == [("provisioned-pvc", None)]
    elif used is None:
        assert reasons == [ERR_REASON_NOT_ENOUGH_SPACE]
    else:
        assert reasons == []
        [p] = vols.dynamic_provisions
        assert p.capacity is not None and p.capacity.meta.name == used


def test_selected_node_for_another_node_fails_fast_with_bound_reason_kept() -> None:
    c, v = _claims(), _volumes(_claims())
    other = pvc("provisioned-pvc", "1Gi", WAIT_PROV, selected_node="node2", ns=NS)
    claims = [c["immediate_bound"], other]
    vols, reasons = _find(_pod_with(claims), _view(claims, [v["bound_immediate_node2"]]))
    assert reasons == [ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]
    assert vols.dynamic_provisions == []


def test_find_matching_respects_access_modes_volume_mode_and_selector() -> None:
    claim = pvc("c", "1G", modes=["ReadWriteMany"], ns=NS)
    rwo = pv("pv-rwo", "node1", "1G", modes=["ReadWriteOnce"])
    _, reasons = _find(_pod_with([claim]), _view([claim], [rwo]))
    assert reasons == [ERR_REASON_BIND_CONFLICT]
    rwx = pv("pv-rwx", "node1", "2G", modes=["ReadWriteOnce", "ReadWriteMany"])
    vols, reasons = _find(_pod_with([claim]), _view([claim], [rwo, rwx]))
    assert reasons == [] and _bindings(vols) == [("c", "pv-rwx")]

    block = pvc("b", "1G", volume_mode="Block", ns=NS)
    _, reasons = _find(_pod_with([block]), _view([block], [pv("fs", "node1", "1G")]))
    assert reasons == [ERR_REASON_BIND_CONFLICT]
    vols, _ = _find(
        _pod_with([block]), _view([block], [pv("fs", "node1", "1G"), pv("blk", "node1", "9G", volume_mode="Block")])
    )
    assert _bindings(vols) == [("b", "blk")]

    sel = pvc("s", "1G", selector={"matchLabels": {"tier": "fast"}}, ns=NS)
    slow = pv("slow", "node1", "1G", labels={"tier": "slow"})
    fast = pv("fast", "node1", "5G", labels={"tier": "fast"})
    vols, _ = _find(_pod_with([sel]), _view([sel], [slow, fast]))
    assert _bindings(vols) == [("s", "fast")]


def test_find_matching_skips_non_available_and_other_class_and_too_small() -> None:
    claim = pvc("c", "2G", ns=NS)
    candidates = [
        pv("released", "node1", "5G", phase="Released"),
        pv("other-class", "node1", "5G", IMMEDIATE),
        pv("small", "node1", "1G"),
        pv("ok-big", "node1", "9G"),
        pv("ok", "node1", "3G"),
    ]
    vols, reasons = _find(_pod_with([claim]), _view([claim], candidates))
    assert reasons == [] and _bindings(vols) == [("c", "ok")]  # the smallest that fits


def test_invalid_claim_selector_is_an_error() -> None:
    claim = pvc("c", "1G", selector={"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, ns=NS)
    with pytest.raises(BinderError, match="error creating internal label selector"):
        _find(_pod_with([claim]), _view([claim], [pv("p", "node1", "5G")]))


# --- the plugin (volume_binding_test.go TestVolumeBinding) ----------------------------------------------


def _world(*objs: Obj) -> World:
    return World(*upstream_classes(), *objs)


def _run_filters(pl: VolumeBinding, w: World, pod: Pod, nodes: Sequence[str]) -> tuple[Any, list[Any], CycleState]:
    state = w.state()
    _, st = pl.pre_filter(state, pod)
    if not st.is_success:
        return st, [], state
    return st, [pl.filter(state, pod, w.node_info(state, n)) for n in nodes], state


def test_plugin_pod_without_pvcs_is_skipped_everywhere() -> None:
    pl = VolumeBinding()
    w = _world(node("node1"))
    pod = make_pod("p", [{"name": "e", "emptyDir": {}}])
    state = w.state()
    _, st = pl.pre_filter(state, pod)
    assert st.code == Code.SKIP
    assert pl.pre_score(state, pod, []).code == Code.SKIP
    assert pl.reserve(state, pod, "node1").is_success
    assert asyncio.run(pl.pre_bind(state, pod, "node1", InMemoryAPI())).code == Code.SKIP
    assert pl.sign(state, pod) == ()


def test_plugin_all_bound() -> None:
    claim = pvc("pvc-a", "1G", volume_name="pv-a", bound=True)
    w = _world(node("node1"), claim, pv("pv-a", "node1", "1G", claim=claim))
    pod = make_pod("p", [claim_volume("pvc-a")])
    st, filters, _ = _run_filters(VolumeBinding(), w, pod, ["node1"])
    assert st.is_success and filters[0].is_success


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ([], 'persistentvolumeclaim "pvc-a" not found'),
        (["pvc-a"], 'persistentvolumeclaim "pvc-b" not found'),  # part of the PVCs do not exist
    ],
)
def test_plugin_missing_claim_is_unresolvable(claims: list[str], message: str) -> None:
    w = _world(node("node1"), *[pvc(n, "1G", volume_name="pv-a", bound=True) for n in claims])
    pod = make_pod("p", [claim_volume("pvc-a"), claim_volume("pvc-b")])
    st, _, _ = _run_filters(VolumeBinding(), w, pod, ["node1"])
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (message,)


def test_plugin_claim_lost_being_deleted_and_ephemeral() -> None:
    pl = VolumeBinding()
    w = _world(node("node1"), pvc("pvc-a", "1G", volume_name="pv-a", phase="Lost"))
    st, _, _ = _run_filters(pl, w, make_pod("p", [claim_volume("pvc-a")]), ["node1"])
    assert st.reasons == ('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"',)
    w = _world(node("node1"), pvc("pvc-a", "1G", deleting=True))
    st, _, _ = _run_filters(pl, w, make_pod("p", [claim_volume("pvc-a")]), ["node1"])
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ('persistentvolumeclaim "pvc-a" is being deleted',)
    pod = make_pod("p", [ephemeral_volume("scratch")], uid="pod-uid")
    st, _, _ = _run_filters(pl, _world(node("node1")), pod, ["node1"])
    assert st.reasons == ('waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',)
    st, _, _ = _run_filters(pl, _world(node("node1"), pvc("p-scratch", "1G")), pod, ["node1"])
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("PVC default/p-scratch was not created for pod default/p (pod is not owner)",)
    owned = pvc("p-scratch", "1G", owner=("p", "pod-uid"))
    st, filters, _ = _run_filters(pl, _world(node("node1"), owned, pv("pv-1", "node1", "5G")), pod, ["node1"])
    assert st.is_success and filters[0].is_success


def test_plugin_immediate_claims_not_bound() -> None:
    w = _world(node("node1"), pvc("pvc-a", "1G", IMMEDIATE))
    st, _, _ = _run_filters(VolumeBinding(), w, make_pod("p", [claim_volume("pvc-a")]), ["node1"])
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (ERR_UNBOUND_IMMEDIATE,)
    # a claim without a class (or with a class that does not exist) is Immediate too
    w = _world(node("node1"), pvc("pvc-a", "1G", None))
    st, _, _ = _run_filters(VolumeBinding(), w, make_pod("p", [claim_volume("pvc-a")]), ["node1"])
    assert st.reasons == (ERR_UNBOUND_IMMEDIATE,)


def test_plugin_unbound_claims_no_matches() -> None:
    w = _world(node("node1"), pvc("pvc-a", "1G"))
    st, filters, _ = _run_filters(VolumeBinding(), w, make_pod("p", [claim_volume("pvc-a")]), ["node1"])
    assert st.is_success
    assert filters[0].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and filters[0].reasons == (ERR_REASON_BIND_CONFLICT,)


def test_plugin_bound_and_unbound_unsatisfied_lists_both_reasons() -> None:
    bound = pvc("pvc-a", "1G", volume_name="pv-a", bound=True)
    w = _world(
        node("node1", {NODE_KEY: "node1", "foo": "barbar"}),
        bound,
        pvc("pvc-b", "1G"),
        pv("pv-a", "node2", "1G", claim=bound),
        pv("pv-b", "node2", "1G"),
    )
    _, filters, _ = _run_filters(
        VolumeBinding(), w, make_pod("p", [claim_volume("pvc-a"), claim_volume("pvc-b")]), ["node1"]
    )
    assert filters[0].reasons == (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)
    assert filters[0].message == f"{ERR_REASON_NODE_CONFLICT}, {ERR_REASON_BIND_CONFLICT}"


def test_plugin_pv_not_found() -> None:
    w = _world(node("node1"), pvc("pvc-a", "1G", volume_name="pv-a", bound=True))
    st, filters, _ = _run_filters(VolumeBinding(), w, make_pod("p", [claim_volume("pvc-a")]), ["node1"])
    assert st.is_success
    assert filters[0].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert filters[0].reasons == ("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",)


def _hostname_pv(name: str, host: str, size: str) -> Obj:
    return pv(name, host, size, affinity_key="kubernetes.io/hostname")


def _host(name: str) -> Obj:
    return node(name, {"kubernetes.io/hostname": name})


def _scores(pl: VolumeBinding, w: World, pod: Pod, nodes: Sequence[str]) -> list[int | None]:
    _, filters, state = _run_filters(pl, w, pod, nodes)
    feasible = [w.node_info(state, n) for n, st in zip(nodes, filters, strict=True) if st.is_success]
    assert pl.pre_score(state, pod, feasible).is_success
    got: list[int | None] = []
    for n, st in zip(nodes, filters, strict=True):
        got.append(pl.score(state, pod, w.node_info(state, n)) if st.is_success else None)
    return got


def test_plugin_local_volumes_scores() -> None:
    """ "local volumes with close capacity are preferred" with StorageCapacityScoring on (1.37 default):
    the default shape gives 100 at 0 % utilisation, 0 at 100 %."""
    w = _world(
        _host("node-a"),
        _host("node-b"),
        _host("node-c"),
        pvc("pvc-a", "50Gi"),
        _hostname_pv("pv-a-0", "node-a", "200Gi"),
        _hostname_pv("pv-a-1", "node-a", "200Gi"),
        _hostname_pv("pv-b-0", "node-b", "100Gi"),
        _hostname_pv("pv-b-1", "node-b", "100Gi"),
    )
    pod = make_pod("p", [claim_volume("pvc-a")])
    assert _scores(VolumeBinding(), w, pod, ["node-a", "node-b", "node-c"]) == [75, 50, None]


def test_plugin_local_volumes_scores_multiple_pvcs() -> None:
    w = _world(
        _host("node-a"),
        _host("node-b"),
        _host("node-c"),
        storage_class("wait-hdd", "kubernetes.io/no-provisioner"),
        pvc("pvc-0", "50Gi"),
        pvc("pvc-1", "100Gi", "wait-hdd"),
        _hostname_pv("pv-a-0", "node-a", "200Gi"),
        _hostname_pv("pv-a-1", "node-a", "200Gi"),
        pv("pv-a-2", "node-a", "200Gi", "wait-hdd", affinity_key="kubernetes.io/hostname"),
        pv("pv-a-3", "node-a", "200Gi", "wait-hdd", affinity_key="kubernetes.io/hostname"),
        _hostname_pv("pv-b-0", "node-b", "100Gi"),
        _hostname_pv("pv-b-1", "node-b", "100Gi"),
        pv("pv-b-2", "node-b", "100Gi", "wait-hdd", affinity_key="kubernetes.io/hostname"),
        pv("pv-b-3", "node-b", "100Gi", "wait-hdd", affinity_key="kubernetes.io/hostname"),
    )
    pod = make_pod("p", [claim_volume("pvc-0"), claim_volume("pvc-1")])
    # node-a: (75 + 50) / 2 = 62.5 -> 63 (math.Round); node-b: (50 + 0) / 2 = 25
    assert _scores(VolumeBinding(), w, pod, ["node-a", "node-b", "node-c"]) == [63, 25, None]


def test_plugin_custom_shape_and_provisioning_scores_zero() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    pl = VolumeBinding({"shape": shape})
    w = _world(_host("node-a"), pvc("pvc-a", "50Gi"), _hostname_pv("pv-a-0", "node-a", "200Gi"))
    assert _scores(pl, w, make_pod("p", [claim_volume("pvc-a")]), ["node-a"]) == [25]
    # claims to provision without tracked capacity score 0
    w = _world(node("node1"), pvc("pvc-a", "1Gi", WAIT_PROV))
    assert _scores(VolumeBinding(), w, make_pod("p", [claim_volume("pvc-a")]), ["node1"]) == [0]


def test_plugin_signature_none_with_claims() -> None:
    pl = VolumeBinding()
    state = _world(node("node1")).state()
    assert pl.sign(state, make_pod("p", [claim_volume("c")])) is None
    assert pl.sign(state, make_pod("p", [ephemeral_volume("e")])) is None


# --- Reserve: the assume cache across cycles --------------------------------------------------------------


def test_reserve_assumes_pv_so_the_next_pod_cannot_take_it_and_unreserve_frees_it() -> None:
    pl = VolumeBinding()
    w = _world(node("node1"), pvc("c1", "1G"), pvc("c2", "1G"), pv("only", "node1", "5G"))
    pod1, pod2 = make_pod("p1", [claim_volume("c1")]), make_pod("p2", [claim_volume("c2")])

    _, filters, s1 = _run_filters(pl, w, pod1, ["node1"])
    assert filters[0].is_success
    assert pl.reserve(s1, pod1, "node1").is_success
    assumed = pl.assumed.pvs["only"]
    assert assumed.claim_ref is not None and assumed.claim_ref.name == "c1"
    assert assumed.raw["spec"]["claimRef"]["uid"] == "uid-default-c1"
    assert assumed.meta.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"

    _, filters, _ = _run_filters(pl, w, pod2, ["node1"])  # the API object is unchanged: the assumed one counts
    assert filters[0].reasons == (ERR_REASON_BIND_CONFLICT,)

    pl.unreserve(s1, pod1, "node1")
    assert "only" not in pl.assumed.pvs
    _, filters, _ = _run_filters(pl, w, pod2, ["node1"])
    assert filters[0].is_success


def test_assumed_pv_expires_when_a_newer_version_arrives() -> None:
    pl = VolumeBinding()
    only = pv("only", "node1", "5G")
    w = _world(node("node1"), pvc("c1", "1G"), pvc("c2", "1G"), only)
    pod1, pod2 = make_pod("p1", [claim_volume("c1")]), make_pod("p2", [claim_volume("c2")])
    _, _, s1 = _run_filters(pl, w, pod1, ["node1"])
    pl.reserve(s1, pod1, "node1")
    # the watch delivers a newer version without claimRef (e.g. the PV controller undid it): it wins
    w.update(copy.deepcopy(only))
    _, filters, _ = _run_filters(pl, w, pod2, ["node1"])
    assert filters[0].is_success
    assert "only" not in pl.assumed.pvs


def test_reserve_assumes_selected_node_on_claim_to_provision() -> None:
    pl = VolumeBinding()
    w = _world(node("node1"), node("node2", {NODE_KEY: "node1"}), pvc("c", "1Gi", WAIT_PROV))
    pod = make_pod("p", [claim_volume("c")])
    _, filters, state = _run_filters(pl, w, pod, ["node1"])
    assert filters[0].is_success
    assert pl.reserve(state, pod, "node1").is_success
    assert pl.assumed.pvcs["default/c"].selected_node == "node1"
    # another pod sharing the claim now fits only the selected node (fast path)
    other = make_pod("q", [claim_volume("c")])
    _, filters, _ = _run_filters(pl, w, other, ["node1", "node2"])
    assert filters[0].is_success and filters[1].reasons == (ERR_REASON_BIND_CONFLICT,)


def test_reserve_all_bound_means_nothing_to_bind() -> None:
    claim = pvc("pvc-a", "1G", volume_name="pv-a", bound=True)
    pl = VolumeBinding()
    w = _world(node("node1"), claim, pv("pv-a", "node1", "1G", claim=claim))
    pod = make_pod("p", [claim_volume("pvc-a")])
    _, _, state = _run_filters(pl, w, pod, ["node1"])
    assert pl.reserve(state, pod, "node1").is_success
    api = InMemoryAPI()
    assert asyncio.run(pl.pre_bind(state, pod, "node1", api)).code == Code.SKIP
    assert api.writes == []


# --- PreBind against the in-memory API (TestBindAPIUpdate, TestCheckBindings, TestBindPodVolumes) --------


@dataclass
class _Env:
    api: InMemoryAPI
    world: World
    pl: VolumeBinding
    pod: Pod
    state: CycleState


async def _env(objs: Sequence[Obj], pod_volumes: Sequence[Obj], node_name: str = "node1", timeout: int = 1) -> _Env:
    """Objects loaded into an in-memory API whose watch feeds the world's cache; the pod filtered and
    reserved on ``node_name``."""
    api = InMemoryAPI()
    w = World()
    api.watchers.append(w.cache.apply)
    for o in [*upstream_classes(), node("node1"), node("node2"), *objs]:
        api.load(o["kind"], o)
    podobj = await api.create(
        "Pod", {"metadata": {"name": "p", "namespace": "default"}, "spec": {"volumes": list(pod_volumes)}}
    )
    pod = w.cache.pod("default/p")
    assert pod is not None and podobj
    pl = VolumeBinding({"bindTimeoutSeconds": timeout})
    pl.poll_delays = (0.0, 0.01)
    state = w.state()
    _, st = pl.pre_filter(state, pod)
    assert st.is_success, st
    assert pl.filter(state, pod, w.node_info(state, node_name)).is_success
    assert pl.reserve(state, pod, node_name).is_success
    return _Env(api, w, pl, pod, state)


async def _complete_binding(api: InMemoryAPI, claim: str, pv_name: str) -> None:
    """What the PV controller does after the scheduler's write: the claim bound, both phases Bound."""
    c = await api.get("PersistentVolumeClaim", "default", claim)
    c["spec"]["volumeName"] = pv_name
    c["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
    await api.update("PersistentVolumeClaim", c)


def test_prebind_writes_claimref_and_waits_for_the_pv_controller() -> None:
    async def run() -> None:
        e = await _env([pvc("c", "1G"), pv("pv-1", "node1", "5G")], [claim_volume("c")])

        async def controller() -> None:
            await asyncio.sleep(0.05)
            await _complete_binding(e.api, "c", "pv-1")

        task = asyncio.create_task(controller())
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        await task
        assert st.is_success, st
        written = await e.api.get("PersistentVolume", "", "pv-1")
        ref = written["spec"]["claimRef"]
        assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
            "PersistentVolumeClaim",
            "default",
            "c",
            "uid-default-c",
        )
        assert written["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"

    asyncio.run(run())


def test_prebind_writes_selected_node_for_provisioning() -> None:
    async def run() -> None:
        e = await _env([pvc("c", "1Gi", WAIT_PROV)], [claim_volume("c")])

        async def provisioner() -> None:
            await asyncio.sleep(0.05)
            await e.api.create("PersistentVolume", pv("pvc-new", "node1", "1Gi", WAIT_PROV))
            await _complete_binding(e.api, "c", "pvc-new")

        task = asyncio.create_task(provisioner())
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        await task
        assert st.is_success, st
        claim = await e.api.get("PersistentVolumeClaim", "default", "c")
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node1"

    asyncio.run(run())


def test_prebind_times_out() -> None:
    async def run() -> None:
        e = await _env([pvc("c", "1G"), pv("pv-1", "node1", "5G")], [claim_volume("c")], timeout=0)
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        assert st.code == Code.ERROR and st.message == "binding volumes: context deadline exceeded"

    asyncio.run(run())


def test_prebind_api_conflict_fails_and_reverts() -> None:
    """bound-by-pv-controller-before-bind: the PV changed since it was chosen: the update conflicts."""

    async def run() -> None:
        e = await _env([pvc("c", "1G"), pv("pv-1", "node1", "5G")], [claim_volume("c")])
        cur = await e.api.get("PersistentVolume", "", "pv-1")
        cur["metadata"]["labels"] = {"touched": "yes"}
        await e.api.update("PersistentVolume", cur)
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        assert st.code == Code.ERROR and "the object has been modified" in st.message
        e.pl.unreserve(e.state, e.pod, "node1")
        assert e.pl.assumed.pvs == {}

    asyncio.run(run())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("claimref-reset", 'binding volumes: ClaimRef got reset for pv "pv-1"'),
        ("pod-deleted", "binding volumes: pod does not exist any more"),
        ("pvc-deleted", "binding volumes: failed to check binding"),
        ("affinity-changed", 'binding volumes: pv "pv-1" node affinity doesn\'t match node "node1"'),
    ],
)
def test_prebind_check_fails(change: str, message: str) -> None:
    async def run() -> None:
        e = await _env([pvc("c", "1G"), pv("pv-1", "node1", "5G")], [claim_volume("c")])

        async def meddle() -> None:
            await asyncio.sleep(0.02)
            if change == "pod-deleted":
                await e.api.delete("Pod", "default", "p")
            elif change == "pvc-deleted":
                await e.api.delete("PersistentVolumeClaim", "default", "c")
            else:
                cur = await e.api.get("PersistentVolume", "", "pv-1")
                if change == "claimref-reset":
                    cur["spec"]["claimRef"]["uid"] = ""
                else:
                    cur["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = [
                        "node2"
                    ]
                await e.api.update("PersistentVolume", cur)

        task = asyncio.create_task(meddle())
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        await task
        assert st.code == Code.ERROR and st.message.startswith(message), st

    asyncio.run(run())


@pytest.mark.parametrize("annotations", [{}, {"other": "x"}, {"volume.kubernetes.io/selected-node": "node2"}])
def test_prebind_provisioning_failed(annotations: dict[str, str]) -> None:
    """provisioning-pvc-selected-node-dropped / -wrong-node / annotations-nil: the provisioner gave up."""

    async def run() -> None:
        e = await _env([pvc("c", "1Gi", WAIT_PROV)], [claim_volume("c")])

        async def give_up() -> None:
            await asyncio.sleep(0.02)
            cur = await e.api.get("PersistentVolumeClaim", "default", "c")
            cur["metadata"]["annotations"] = dict(annotations)
            await e.api.update("PersistentVolumeClaim", cur)

        task = asyncio.create_task(give_up())
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        await task
        expected = 'selectedNode annotation reset for PVC "c"' if not annotations else 'provisioning failed for PVC "c"'
        assert st.code == Code.ERROR and st.message == f"binding volumes: {expected}"

    asyncio.run(run())


def test_prebind_provisioned_pv_with_wrong_affinity_fails() -> None:
    """node-affinity-fails-dynamic-provisioning."""

    async def run() -> None:
        e = await _env([pvc("c", "1Gi", WAIT_PROV)], [claim_volume("c")])

        async def provisioner() -> None:
            await asyncio.sleep(0.02)
            await e.api.create("PersistentVolume", pv("pvc-new", "node2", "1Gi", WAIT_PROV))
            await _complete_binding(e.api, "c", "pvc-new")

        task = asyncio.create_task(provisioner())
        st = await e.pl.pre_bind(e.state, e.pod, "node1", e.api)
        await task
        assert st.code == Code.ERROR and "node affinity doesn't match node" in st.message

    asyncio.run(run())


# --- args --------------------------------------------------------------------------------------------------


def test_default_args_and_parse() -> None:
    assert SPEC.default_args == {
        "bindTimeoutSeconds": 600,
        "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
    }
    a = parse_args({})
    assert a.bind_timeout_seconds == 600 and a.shape == ((0, 10), (100, 0))
    assert parse_args({"bindTimeoutSeconds": 5, "shape": []}).shape == ((0, 10), (100, 0))
    assert SPEC.points == frozenset({"preFilter", "filter", "preScore", "score", "reserve", "preBind"})


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"bindTimeoutSeconds": 0}, []),
        (
            {"bindTimeoutSeconds": -1},
            ["a.bindTimeoutSeconds: invalid BindTimeoutSeconds, should not be a negative value"],
        ),
        ({"shape": []}, []),  # defaulted first
        (
            {"shape": [{"utilization": 10, "score": 2}, {"utilization": 5, "score": 3}]},
            ["a.shape[1].utilization: values must be sorted in increasing order"],
        ),
        (
            {"shape": [{"utilization": -1, "score": 11}]},
            ["a.shape[0].utilization: not in valid range [0, 100]", "a.shape[0].score: not in valid range [0, 10]"],
        ),
        ({"bogus": 1}, ["a.bogus: unknown field"]),
    ],
)
def test_validate_args(args: dict[str, Any], errors: list[str]) -> None:
    assert validate_args(args, "a") == errors


def test_config_rejects_bad_args_with_field_path() -> None:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": -5}}]}],
    }
    with pytest.raises(ConfigError) as e:
        parse_config(doc)
    assert any("pluginConfig[0].args.bindTimeoutSeconds" in err for err in e.value.errors)
    doc["profiles"][0]["pluginConfig"][0]["args"] = {"bindTimeoutSeconds": 30}  # type: ignore[index]
    cfg = parse_config(doc)
    assert cfg.profiles[0].plugin_args["VolumeBinding"]["bindTimeoutSeconds"] == 30


def test_events() -> None:
    ev = set(VolumeBinding().events_to_register())
    for e in [
        ("StorageClass", "Add"),
        ("StorageClass", "Update"),
        ("PersistentVolumeClaim", "Add"),
        ("PersistentVolumeClaim", "Update"),
        ("PersistentVolume", "Add"),
        ("PersistentVolume", "Update"),
        ("Node", "Add"),
        ("Node", "Update"),
        ("CSINode", "Add"),
        ("CSINode", "Update"),
        ("CSIDriver", "Update"),
    ]:
        assert e in ev


def test_class_scores_follow_the_shape() -> None:
    """``requested * 100 / capacity`` through the default shape; no capacity or over-full -> utilisation 100."""
    pl = VolumeBinding()
    assert [pl._class_score(r, c) for r, c in [(0, 0), (5, 0), (10, 5), (0, 10), (5, 10), (10, 10), (1, 3)]] == [
        0,
        0,
        0,
        100,
        50,
        0,
        67,
    ]
