"""Extended resources backed by DRA (KEP-5004, DRAExtendedResource, GA in 1.37).

Cases from kubernetes v1.37.2 ``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources_test.go``
(``createRequestsAndMappings``), ``dynamicresources_test.go`` (the ``extended-resource-*`` cases) and
``noderesources/fit_test.go`` (the "extended resource backed by DRA" filter and score cases), then end to end
through ``simulate`` (ARCHITECTURE §3.2: the claim the scheduler creates, allocated, reserved for the pod and
named in ``status.extendedResourceClaimStatus``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.extended import (
    EXTENDED_CLAIM_ANNOTATION,
    class_mapping,
    device_totals,
    find_extended_claim,
    node_requests,
    requests_and_mappings,
    should_delegate,
)
from plugins.noderesources import NodeResourcesFit
from scheduler.api.clusterapi import ApiError
from scheduler.api.dra import claim_from, class_from, slice_from
from scheduler.api.model import node_from, pod_from
from scheduler.cache.cache import Cache
from scheduler.cache.ledger import DeviceLedger
from scheduler.framework.interface import Code, CycleState
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import SimulationResult, simulate

GPU = "example.com/gpu"
CLASS = "gpu.example.com"
DRIVER = "gpu.example.com"


# --- builders ---------------------------------------------------------------------------------------------


def device_class(
    name: str = CLASS, ext: str | None = GPU, created: str = "2026-01-01T00:00:00Z", selector: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if ext:
        spec["extendedResourceName"] = ext
    if selector:
        spec["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": spec,
    }


def node(name: str, **allocatable: str) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "16Gi", "pods": "110", **{k.replace("__", "/"): v for k, v in allocatable.items()}}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc},
    }


def gpu_slice(node_name: str, n: int, driver: str = DRIVER) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(n)],
        },
    }


def ctr(name: str, sidecar: bool = False, **limits: str) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": "x",
        "resources": {"limits": {k.replace("__", "/"): v for k, v in limits.items()}},
    }
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(
    name: str,
    containers: Sequence[Mapping[str, Any]] | None = None,
    init: Sequence[Mapping[str, Any]] = (),
    uid: str | None = None,
    gpus: int = 2,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "dra-scheduler",
        "containers": list(containers) if containers is not None else [ctr("main", **{"example.com__gpu": str(gpus)})],
    }
    if init:
        spec["initContainers"] = list(init)
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def run(objs: Sequence[dict[str, Any]], api_hook: Any = None) -> SimulationResult:
    return asyncio.run(simulate(copy.deepcopy(list(objs))))


def by_kind(res: SimulationResult, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in res.items if o["kind"] == kind}


def pod_condition(p: Mapping[str, Any]) -> Mapping[str, Any]:
    return next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")


def ext_claim_of(res: SimulationResult, pod_name: str) -> dict[str, Any]:
    p = by_kind(res, "Pod")[pod_name]
    name = p["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    return by_kind(res, "ResourceClaim")[name]


# --- createRequestsAndMappings (extendeddynamicresources_test.go) ----------------------------------------------

A = "example.com/gpu"  # upstream's extendedResourceName in these tests


def upstream_pod(
    containers: Sequence[Mapping[str, str]] = (), inits: Sequence[tuple[str, Mapping[str, str]]] = ()
) -> dict[str, Any]:
    """st.MakePod().Res(...) (con<i>), .InitReq(...) (init-con<i>), .SidecarReq(...) (sidecar-con<i>)."""
    init_list = []
    for i, (kind, res) in enumerate(inits):
        c: dict[str, Any] = {"name": f"{kind}-con{i}", "resources": {"requests": dict(res), "limits": dict(res)}}
        if kind == "sidecar":
            c["restartPolicy"] = "Always"
        init_list.append(c)
    return {
        "spec": {
            "initContainers": init_list,
            "containers": [
                {"name": f"con{i}", "resources": {"requests": dict(r), "limits": dict(r)}}
                for i, r in enumerate(containers)
            ],
        }
    }


POD1 = upstream_pod([{A: "1", A + "1": "2"}])
POD2 = upstream_pod([{A: "1"}, {A + "1": "2"}])
POD_INIT = upstream_pod([{A: "1"}], [("init", {A + "init": "2"})])
POD_INIT2 = upstream_pod([{A: "1"}], [("init", {A + "init": "1"}), ("init", {A + "init": "2"})])
POD_INIT3 = upstream_pod(
    [{A: "1"}], [("init", {A + "init": "1"}), ("sidecar", {A + "init": "1"}), ("init", {A + "init": "2"})]
)
POD1_INIT_IMPLICIT = upstream_pod(
    [], [("init", {A + "init": "1", "deviceclass.resource.kubernetes.io/classInit": "2"})]
)
POD_INIT_IMPLICIT = upstream_pod(
    [{A: "1"}], [("init", {A + "init": "1"}), ("init", {"deviceclass.resource.kubernetes.io/classInit": "2"})]
)


def req(name: str, cls: str, count: int) -> tuple[str, str, int]:
    return (name, cls, count)


@pytest.mark.parametrize(
    ("pod_raw", "served", "want"),
    [
        pytest.param(POD1, {}, [], id="nil"),
        pytest.param(POD1, {A: "class"}, [req("container-0-request-0", "class", 1)], id="one resource match"),
        pytest.param(
            POD1,
            {A: "class", A + "1": "class1"},
            [req("container-0-request-0", "class", 1), req("container-0-request-1", "class1", 2)],
            id="two resources match",
        ),
        pytest.param(
            POD2,
            {A: "class", A + "1": "class1"},
            [req("container-0-request-0", "class", 1), req("container-1-request-0", "class1", 2)],
            id="two containers match",
        ),
        pytest.param(
            POD_INIT,
            {A: "class", A + "init": "classInit"},
            [req("container-0-request-0", "classInit", 2), req("container-1-request-0", "class", 1)],
            id="one init container, one regular container",
        ),
        pytest.param(
            POD_INIT2,
            {A: "class", A + "init": "classInit"},
            [req("container-1-request-0", "classInit", 2), req("container-2-request-0", "class", 1)],
            id="two init containers, one regular container",
        ),
        pytest.param(
            POD_INIT3,
            {A: "class", A + "init": "classInit"},
            [
                req("container-1-request-0", "classInit", 1),
                req("container-2-request-0", "classInit", 2),
                req("container-3-request-0", "class", 1),
            ],
            id="three init containers, one sidecar, one regular container",
        ),
    ],
)
def test_create_requests(pod_raw: Mapping[str, Any], served: Mapping[str, str], want: list[Any]) -> None:
    reqs, _ = requests_and_mappings(pod_raw, served)
    got = [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in reqs]
    assert got == want
    for r in reqs:
        assert r["exactly"]["allocationMode"] == "ExactCount"
        assert set(r) == {"name", "exactly"} and set(r["exactly"]) == {"deviceClassName", "allocationMode", "count"}


def m(container: str, resource: str, request: str) -> tuple[str, str, str]:
    return (request, container, resource)


IMPLICIT = "deviceclass.resource.kubernetes.io/classInit"


@pytest.mark.parametrize(
    ("pod_raw", "served", "want"),
    [
        pytest.param(
            POD1,
            {A: "class", A + "1": "class1"},
            [m("con0", A, "container-0-request-0"), m("con0", A + "1", "container-0-request-1")],
            id="one container, two requests",
        ),
        pytest.param(
            POD1_INIT_IMPLICIT,
            {A: "class", A + "init": "classInit", IMPLICIT: "classInit"},
            [m("init-con0", IMPLICIT, "container-0-request-0"), m("init-con0", A + "init", "container-0-request-1")],
            id="one container, one explicit and one implicit request",
        ),
        pytest.param(
            POD2,
            {A: "class", A + "1": "class1"},
            [m("con0", A, "container-0-request-0"), m("con1", A + "1", "container-1-request-0")],
            id="two containers, two requests",
        ),
        pytest.param(
            POD_INIT,
            {A: "class", A + "init": "classInit"},
            [m("init-con0", A + "init", "container-0-request-0"), m("con0", A, "container-1-request-0")],
            id="one init container, one regular container, one request",
        ),
        pytest.param(
            POD_INIT2,
            {A: "class", A + "init": "classInit"},
            [
                m("init-con0", A + "init", "container-1-request-0"),
                m("init-con1", A + "init", "container-1-request-0"),
                m("con0", A, "container-2-request-0"),
            ],
            id="three containers (two are init container), two requests",
        ),
        pytest.param(
            POD_INIT_IMPLICIT,
            {A: "class", A + "init": "classInit", IMPLICIT: "classInit"},
            [
                m("init-con0", A + "init", "container-0-request-0"),
                m("init-con1", IMPLICIT, "container-1-request-0"),
                m("con0", A, "container-2-request-0"),
            ],
            id="three containers (two are init container), both explicit and implicit resources",
        ),
        pytest.param(
            POD_INIT3,
            {A: "class", A + "init": "classInit"},
            [
                m("init-con0", A + "init", "container-1-request-0"),
                m("sidecar-con1", A + "init", "container-1-request-0"),
                m("init-con2", A + "init", "container-2-request-0"),
                m("con0", A, "container-3-request-0"),
            ],
            id="four containers (two are init container, one sidecar), three requests",
        ),
    ],
)
def test_create_mappings(pod_raw: Mapping[str, Any], served: Mapping[str, str], want: list[Any]) -> None:
    _, maps = requests_and_mappings(pod_raw, served)
    got = sorted((x["requestName"], x["containerName"], x["resourceName"]) for x in maps)
    assert got == want


def test_request_count_is_what_later_long_lived_containers_do_not_cover() -> None:
    # An init container needing 3 reuses the sidecar's 1 and the container's 1 and asks for 1 more.
    raw = upstream_pod([{A: "1"}], [("init", {A: "3"}), ("sidecar", {A: "1"})])
    reqs, maps = requests_and_mappings(raw, {A: "class"})
    assert [(r["name"], r["exactly"]["count"]) for r in reqs] == [
        ("container-0-request-0", 1),
        ("container-1-request-0", 1),
        ("container-2-request-0", 1),
    ]
    assert [x["requestName"] for x in maps if x["containerName"] == "init-con0"] == [
        "container-1-request-0",
        "container-2-request-0",
        "container-0-request-0",
    ]


def test_non_integer_or_zero_container_requests_make_no_request() -> None:
    raw = upstream_pod([{A: "0"}, {"cpu": "1"}])
    assert requests_and_mappings(raw, {A: "class"}) == ([], [])


# --- DeviceClass resolution (extendedresourcecache) ------------------------------------------------------------


def test_class_mapping_explicit_newest_wins_then_smallest_name_and_implicit_names() -> None:
    classes = {
        c["metadata"]["name"]: class_from(c)
        for c in (
            device_class("old", created="2026-01-01T00:00:00Z"),
            device_class("new-b", created="2026-02-01T00:00:00Z"),
            device_class("new-a", created="2026-02-01T00:00:00Z"),
            device_class("plain", ext=None),
        )
    }
    mapping = class_mapping(classes)
    assert mapping[GPU].name == "new-a"
    assert mapping["deviceclass.resource.kubernetes.io/old"].name == "old"
    assert mapping["deviceclass.resource.kubernetes.io/plain"].name == "plain"
    assert "example.com/other" not in mapping


# --- NodeResourcesFit with DRA (fit_test.go) --------------------------------------------------------------------


class _Snap:
    def __init__(self, classes: Sequence[dict[str, Any]], slices: Sequence[dict[str, Any]] = ()) -> None:
        self.classes = {c["metadata"]["name"]: class_from(c) for c in classes}
        self._slices = [slice_from(s) for s in slices]
        self.ledger = DeviceLedger()
        self.slices = self

    def for_node(self, name: str) -> list[Any]:
        return [s for s in self._slices if s.node_name == name]


def _fit_filter(pod_raw: dict[str, Any], node_raw: dict[str, Any], classes: Sequence[dict[str, Any]]) -> Any:
    from scheduler.cache.cache import _node_info

    p = NodeResourcesFit()
    cs = CycleState(_Snap(classes))  # type: ignore[arg-type]
    pd = pod_from(pod_raw)
    _, st = p.pre_filter(cs, pd)
    assert st.is_success
    return p.filter(cs, pd, _node_info(node_from(node_raw), {})), p.sign(cs, pd)


DRA_RES = "extended.resource.dra.io/something"


def _res_pod(**limits: str) -> dict[str, Any]:
    return pod("p", [ctr("c", **limits)])


def test_fit_delegates_a_dra_backed_resource_to_dynamic_resources() -> None:
    classes = [device_class("device-class-name", ext=DRA_RES)]
    # extended resource backed by DRA: no "Insufficient" on a node that does not list it
    st, sig = _fit_filter(_res_pod(**{"extended.resource.dra.io__something": "1"}), node("n"), classes)
    assert st.is_success
    assert sig is None  # "signature disabled when dra extended resources are used in the cluster"
    # the node lists it with allocatable 0: still DRA ("was backed by Device Plugin (Allocatable: 0)")
    st, _ = _fit_filter(
        _res_pod(**{"extended.resource.dra.io__something": "1"}),
        node("n", **{"extended.resource.dra.io__something": "0"}),
        classes,
    )
    assert st.is_success
    # extended resource NOT backed by DRA
    st, sig = _fit_filter(_res_pod(**{"example.com__bbb": "1"}), node("n"), classes)
    assert (st.code, st.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient example.com/bbb",))
    assert sig is not None
    # no classes at all ("backed by DRA not enabled" behaves the same: checked as an ordinary resource)
    st, _ = _fit_filter(_res_pod(**{"extended.resource.dra.io__something": "1"}), node("n"), [])
    assert st.reasons == ("Insufficient extended.resource.dra.io/something",)


def test_fit_checks_a_natively_advertised_resource_as_an_ordinary_one() -> None:
    classes = [device_class()]
    native = node("n", **{"example.com__gpu": "1"})
    st, _ = _fit_filter(pod("p", gpus=2), native, classes)
    assert (st.code, st.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient example.com/gpu",))
    assert should_delegate(GPU, node_from(native), {c["metadata"]["name"]: class_from(c) for c in classes}) is False


def test_fit_least_allocated_scores_dra_backed_resources_by_devices() -> None:
    """fit_test.go "LeastAllocated with Extended resources": 3 devices -> 66, 2 devices -> 50."""
    from scheduler.cache.cache import _node_info

    snap = _Snap(
        [device_class("device-class-name", ext=DRA_RES)],
        [gpu_slice("node1", 3, "test-driver"), gpu_slice("node2", 2, "test-driver")],
    )
    args = {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": DRA_RES, "weight": 1}]}}
    p = NodeResourcesFit(args)
    pd = pod_from(_res_pod(**{"extended.resource.dra.io__something": "1"}))
    for pre in (True, False):
        cs = CycleState(snap)  # type: ignore[arg-type]
        infos = [_node_info(node_from(node(n)), {}) for n in ("node1", "node2")]
        if pre:
            p.pre_score(cs, pd, infos)
        assert [p.score(cs, pd, i) for i in infos] == [66, 50]
    # devices in use count as requested
    snap.ledger.reserve(
        "c1", "default/c1", tuple(claim_from(_claim_with("node1", ["gpu-0", "gpu-1"])).allocation.results)
    )  # type: ignore[union-attr]
    cs = CycleState(snap)  # type: ignore[arg-type]
    assert p.score(cs, pd, _node_info(node_from(node("node1")), {})) == 0  # 3 devices, 2 used + 1 -> full


def _claim_with(node_name: str, devices: Sequence[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "c1", "namespace": "default"},
        "spec": {},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "r", "driver": "test-driver", "pool": node_name, "device": d} for d in devices
                    ]
                }
            }
        },
    }


def test_device_totals_apply_the_class_selectors() -> None:
    n = node_from(node("n1"))
    s = slice_from(gpu_slice("n1", 3))
    cls = class_from(device_class(selector='device.driver == "other.example.com"'))
    assert device_totals(n, [s], cls, DeviceLedger(), SelectorCache(get_engine(None))) == (0, 0)
    cls = class_from(device_class(selector=f'device.driver == "{DRIVER}"'))
    assert device_totals(n, [s], cls, DeviceLedger(), SelectorCache(get_engine(None))) == (3, 0)


# --- filterExtendedResources ------------------------------------------------------------------------------------


def test_node_requests_native_dra_and_unknown_resources() -> None:
    classes = {CLASS: class_from(device_class())}
    two = pod_from(pod("p", gpus=2))
    nr = node_requests(two, node_from(node("dra")), classes)
    assert [r["exactly"]["count"] for r in nr.requests] == [2] and nr.resources == (GPU,)
    assert nr.mappings == ({"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-0"},)
    native = node_requests(two, node_from(node("native", **{"example.com__gpu": "4"})), classes)
    assert native.requests == () and native.error == ""
    # a resource neither mapped nor listed by the node: "cannot fit resource"
    both = pod_from(pod("q", [ctr("c", **{"example.com__gpu": "1", "example.com__fpga": "1"})]))
    assert node_requests(both, node_from(node("dra")), classes).error == "cannot fit resource example.com/fpga"


def test_find_extended_claim_needs_annotation_and_controller_pod() -> None:
    p = pod_from(pod("p", uid="uid-p"))

    def claim(name: str, annotated: bool, uid: str, controller: bool = True) -> Any:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": "default",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": controller}],
        }
        if annotated:
            meta["annotations"] = {EXTENDED_CLAIM_ANNOTATION: "true"}
        return claim_from({"metadata": meta, "spec": {}})

    claims = {
        "default/a": claim("a", False, "uid-p"),
        "default/b": claim("b", True, "other"),
        "default/c": claim("c", True, "uid-p", controller=False),
    }
    assert find_extended_claim(claims, p) is None
    claims2 = {**claims, "default/d": claim("d", True, "uid-p")}
    found = find_extended_claim(claims2, p)
    assert found is not None and found.name == "d"


# --- end to end through simulate ------------------------------------------------------------------------------


def test_pod_gets_a_claim_of_two_devices_allocated_reserved_and_named_in_its_status() -> None:
    res = run([node("dra-node"), device_class(), gpu_slice("dra-node", 4), pod("two-gpus")])
    p = by_kind(res, "Pod")["two-gpus"]
    assert p["spec"]["nodeName"] == "dra-node"
    claims = by_kind(res, "ResourceClaim")
    assert len(claims) == 1
    [claim] = claims.values()
    meta = claim["metadata"]
    assert (
        meta["name"].startswith("two-gpus-extended-resources-")
        and meta["generateName"] == "two-gpus-extended-resources-"
    )
    assert meta["annotations"] == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "two-gpus", "uid": p["metadata"]["uid"], "controller": True}
    ]
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert claim["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "container-0-request-0",
                    "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2},
                }
            ]
        }
    }
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["driver"], r["pool"], r["device"]) for r in results] == [
        ("container-0-request-0", DRIVER, "dra-node", "gpu-0"),
        ("container-0-request-0", DRIVER, "dra-node", "gpu-1"),
    ]
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "dra-node"
    ]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "two-gpus", "uid": p["metadata"]["uid"]}]
    assert p["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-0"}],
        "resourceClaimName": meta["name"],
    }


def test_a_node_advertising_the_resource_natively_is_used_without_a_claim() -> None:
    res = run([node("native", **{"example.com__gpu": "4"}), device_class(), pod("p")])
    p = by_kind(res, "Pod")["p"]
    assert p["spec"]["nodeName"] == "native"
    assert by_kind(res, "ResourceClaim") == {}
    assert "extendedResourceClaimStatus" not in p.get("status", {})


def test_more_devices_than_the_node_has_is_unschedulable_with_a_message() -> None:
    res = run([node("dra-node"), device_class(), gpu_slice("dra-node", 4), pod("p", gpus=5)])
    p = by_kind(res, "Pod")["p"]
    assert "nodeName" not in p["spec"]
    cond = pod_condition(p)
    assert cond["reason"] == "Unschedulable"
    assert "extended resource example.com/gpu" in cond["message"]
    assert "needs 5 device(s) of class gpu.example.com: 4 match(es), 4 free" in cond["message"]
    assert by_kind(res, "ResourceClaim") == {}


def test_implicit_class_name_and_several_containers() -> None:
    implicit = "deviceclass.resource.kubernetes.io__" + CLASS
    p = pod(
        "p",
        [ctr("a", **{implicit: "1", "cpu": "1"}), ctr("b", **{implicit: "2"})],
        init=[ctr("setup", **{implicit: "1"})],
    )
    res = run([node("n"), device_class(ext=None), gpu_slice("n", 4), p])
    claim = ext_claim_of(res, "p")
    assert [(r["name"], r["exactly"]["count"]) for r in claim["spec"]["devices"]["requests"]] == [
        ("container-1-request-1", 1),
        ("container-2-request-0", 2),
    ]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 3
    mappings = by_kind(res, "Pod")["p"]["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert {(x["containerName"], x["requestName"]) for x in mappings} == {
        ("a", "container-1-request-1"),
        ("b", "container-2-request-0"),
        ("setup", "container-1-request-1"),
    }


def test_equal_pods_fill_the_devices_and_the_next_one_goes_elsewhere_or_waits() -> None:
    """Equal pods: the second must not reuse the first's verdict for a node whose devices it took."""
    objs = [node("a"), node("b"), device_class(), gpu_slice("a", 2), gpu_slice("b", 2)]
    objs += [pod(f"p{i}", gpus=2) for i in range(3)]
    res = run(objs)
    pods = by_kind(res, "Pod")
    placed = sorted(pods[f"p{i}"]["spec"].get("nodeName", "") for i in range(3))
    assert placed == ["", "a", "b"]
    devices = [
        (r["pool"], r["device"])
        for c in by_kind(res, "ResourceClaim").values()
        for r in c["status"]["allocation"]["devices"]["results"]
    ]
    assert len(devices) == len(set(devices)) == 4


def test_native_and_dra_nodes_mixed() -> None:
    """A node that advertises the resource natively counts it in allocatable; the other serves it via DRA."""
    objs = [node("native", **{"example.com__gpu": "2"}), node("dra"), device_class(), gpu_slice("dra", 2)]
    objs += [pod("p0"), pod("p1")]
    res = run(objs)
    pods = by_kind(res, "Pod")
    assert sorted(p["spec"]["nodeName"] for p in pods.values()) == ["dra", "native"]
    claims = by_kind(res, "ResourceClaim")
    assert len(claims) == 1
    [claim] = claims.values()
    owner = claim["metadata"]["ownerReferences"][0]["name"]
    assert pods[owner]["spec"]["nodeName"] == "dra"


def test_a_claim_from_an_earlier_attempt_is_reused() -> None:
    uid = "5b5c2f7e-0000-4000-8000-000000000001"
    earlier = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-abcde",
            "namespace": "default",
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": uid, "controller": True}],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "container-0-request-0",
                        "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2},
                    }
                ]
            }
        },
    }
    res = run([node("n"), device_class(), gpu_slice("n", 4), earlier, pod("p", uid=uid)])
    claims = by_kind(res, "ResourceClaim")
    assert list(claims) == ["p-extended-resources-abcde"]
    claim = claims["p-extended-resources-abcde"]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 2
    assert claim["status"]["reservedFor"][0]["uid"] == uid
    p = by_kind(res, "Pod")["p"]
    assert p["spec"]["nodeName"] == "n"
    assert p["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == "p-extended-resources-abcde"

    # already allocated (and reserved) on node "m": the pod goes there, nothing is allocated again
    allocated = copy.deepcopy(earlier)
    allocated["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    allocated["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "container-0-request-0", "driver": DRIVER, "pool": "m", "device": f"gpu-{i}"}
                    for i in (2, 3)
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]}]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": uid}],
    }
    res = run(
        [node("n"), node("m"), device_class(), gpu_slice("n", 4), gpu_slice("m", 4), allocated, pod("p", uid=uid)]
    )
    p = by_kind(res, "Pod")["p"]
    assert p["spec"]["nodeName"] == "m"
    claims = by_kind(res, "ResourceClaim")
    assert list(claims) == ["p-extended-resources-abcde"]
    assert [
        r["device"] for r in claims["p-extended-resources-abcde"]["status"]["allocation"]["devices"]["results"]
    ] == [
        "gpu-2",
        "gpu-3",
    ]
    assert p["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == "p-extended-resources-abcde"

    # a claim being deleted: the pod waits for it to go
    deleting = copy.deepcopy(allocated)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    res = run([node("m"), device_class(), gpu_slice("m", 4), deleting, pod("p", uid=uid)])
    cond = pod_condition(by_kind(res, "Pod")["p"])
    assert "resourceclaim default/p-extended-resources-abcde is being deleted" in cond["message"]

    # a claim whose requests do not match what a node needs rejects that node
    other = copy.deepcopy(earlier)
    other["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    res = run([node("n"), device_class(), gpu_slice("n", 4), other, pod("p", uid=uid)])
    cond = pod_condition(by_kind(res, "Pod")["p"])
    assert "cannot schedule extended resource claim" in cond["message"]


class _FailingAPI(InMemoryAPI):
    """Fails the first ``patch/status`` of a Pod (the extendedResourceClaimStatus write)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def patch(self, kind: str, namespace: str, name: str, patch: Any, subresource: str = "") -> Any:
        ext_status = kind == "Pod" and "extendedResourceClaimStatus" in (patch.get("status") or {})
        if ext_status and subresource == "status" and not self.failed:
            self.failed = True
            raise ApiError("patch error")
        return await super().patch(kind, namespace, name, patch, subresource)


async def _schedule_with(api: InMemoryAPI, objs: Sequence[dict[str, Any]]) -> tuple[InMemoryAPI, Any]:
    from scheduler.config.schedulerconfig import default_config
    from scheduler.loop.queue import FakeClock
    from scheduler.loop.scheduler import Scheduler

    cache = Cache()
    api.watchers.append(cache.apply)
    clock = FakeClock(1000.0)
    sched = Scheduler(cache, api, default_config(), clock=clock, inline_binding=True)
    for kind in ("Namespace", "Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "Pod"):
        for o in objs:
            if o["kind"] == kind:
                api.load(kind, copy.deepcopy(o))
    for _ in range(10):
        info = sched.queue.pop()
        if info is None:
            clock.set(clock.now() + 60)
            sched.queue.flush()
            info = sched.queue.pop()
            if info is None:
                break
        await sched.run_once(info)
    return api, sched


def test_a_failed_binding_deletes_the_claim_and_the_retry_creates_a_new_one() -> None:
    """dynamicresources_test.go "extended-resource-name-with-resources-fail-patch" / "bind-failure": Unreserve
    deletes the claim written to the API server; the devices are free again for the retry."""
    api = _FailingAPI()
    objs = [node("n"), device_class(), gpu_slice("n", 2), pod("p")]
    api, _ = asyncio.run(_schedule_with(api, objs))
    assert api.failed
    deleted = [w for w in api.writes if w[0] == "DELETED" and w[1] == "ResourceClaim"]
    assert len(deleted) == 1
    claims = {o["metadata"]["name"]: o for o in api.stored("ResourceClaim")}
    assert len(claims) == 1  # (the in-memory API derives generated names from the base: the name recurs)
    created = [w for w in api.writes if w[0] == "ADDED" and w[1] == "ResourceClaim"]
    assert len(created) == 2
    [p] = api.stored("Pod")
    assert p["spec"]["nodeName"] == "n"
    assert p["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == next(iter(claims))


def test_claim_creation_failure_is_a_scheduler_error_and_is_retried() -> None:
    api = InMemoryAPI()
    api.fail_next[("create", "ResourceClaim")] = [ApiError("claim creation errors")]
    objs = [node("n"), device_class(), gpu_slice("n", 2), pod("p")]
    api, _ = asyncio.run(_schedule_with(api, objs))
    [p] = api.stored("Pod")
    assert p["spec"]["nodeName"] == "n"
    assert len(api.stored("ResourceClaim")) == 1
    failed = [e for e in api.events if e["reason"] == "FailedScheduling"]
    assert len(failed) == 1 and "claim creation errors" in failed[0]["message"]
    assert [e["reason"] for e in api.events][-1] == "Scheduled"


def test_equal_pods_on_natively_advertised_resources_reuse_nothing_stale() -> None:
    """Without DeviceClasses the pods are signed (results reused between equal pods on unchanged nodes):
    the second pod must still see the first one's use of node a."""
    objs = [node("a", **{"example.com__gpu": "2"}), node("b", **{"example.com__gpu": "2"})]
    objs += [pod(f"p{i}", gpus=2) for i in range(3)]
    res = run(objs)
    pods = by_kind(res, "Pod")
    assert sorted(pods[f"p{i}"]["spec"].get("nodeName", "") for i in range(3)) == ["", "a", "b"]
    waiting = next(p for p in pods.values() if not p["spec"].get("nodeName"))
    assert "2 Insufficient example.com/gpu" in pod_condition(waiting)["message"]
    assert res.scheduler is not None
    assert res.scheduler.profiles["dra-scheduler"].memo_stats["filter_hits"] > 0


def test_user_claims_and_extended_resources_together() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}},
    }
    p = pod("p", gpus=2)
    p["spec"]["resourceClaims"] = [{"name": "extra", "resourceClaimTemplateName": "one"}]
    res = run([node("n"), device_class(), gpu_slice("n", 3), template, p])
    pods = by_kind(res, "Pod")
    assert pods["p"]["spec"]["nodeName"] == "n"
    devices = [
        r["device"]
        for c in by_kind(res, "ResourceClaim").values()
        for r in c["status"]["allocation"]["devices"]["results"]
    ]
    assert sorted(devices) == ["gpu-0", "gpu-1", "gpu-2"]
    # the same pod with 3 extended devices does not fit next to its template claim on 3 devices
    p2 = copy.deepcopy(p)
    p2["spec"]["containers"][0]["resources"]["limits"][GPU] = "3"
    res = run([node("n"), device_class(), gpu_slice("n", 3), template, p2])
    assert "nodeName" not in by_kind(res, "Pod")["p"]["spec"]


def test_gang_of_dra_backed_extended_resource_pods_is_placed_whole() -> None:
    """The gang capacity bound must count a DRA-backed extended resource as devices, not as node
    allocatable (which nodes without native support lack): 3 members x 2 GPUs on 2 nodes x 4 devices."""
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}}
    members = []
    for i in range(3):
        p = pod(f"m{i}")
        p["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
        members.append(p)
    res = run([device_class(), node("n1"), node("n2"), gpu_slice("n1", 4), gpu_slice("n2", 4), group, *members])
    pods = by_kind(res, "Pod")
    assert all(p["spec"].get("nodeName") for p in pods.values()), {n: pod_condition(p) for n, p in pods.items()}
    for name in pods:
        claim = ext_claim_of(res, name)
        assert len(claim["status"]["allocation"]["devices"]["results"]) == 2
