"""NodePorts: host-port conflicts (kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodeports``,
cases from ``node_ports_test.go`` TestNodePorts / TestFits, plus hostNetwork defaulting and simulate)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from plugins.nodeports import (
    ERR_REASON,
    SPEC,
    HostPort,
    NodePorts,
    fits,
    host_ports,
    used_ports,
)
from scheduler.api.model import Node, Pod, node_from, pod_from
from scheduler.cache.cache import NodeInfo, _node_info
from scheduler.framework.interface import (
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    ScorePlugin,
    SignPlugin,
    Status,
)
from scheduler.simulate.simulation import simulate

# --- builders ---------------------------------------------------------------------------------------------


def _node(name: str = "n1") -> Node:
    return node_from(
        {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    )


def _ports(*infos: str) -> list[dict[str, Any]]:
    """``PROTO/IP/PORT`` as upstream's newPod helper (empty parts = not set)."""
    out = []
    for i in infos:
        proto, ip, port = i.split("/")
        p: dict[str, Any] = {"containerPort": 80, "hostPort": int(port)}
        if proto:
            p["protocol"] = proto
        if ip:
            p["hostIP"] = ip
        out.append(p)
    return out


def _pod(
    *port_infos: str,
    name: str = "p",
    node: str = "",
    spec: Mapping[str, Any] | None = None,
) -> Pod:
    s: dict[str, Any] = (
        dict(spec) if spec is not None else {"containers": [{"name": "c", "image": "x", "ports": _ports(*port_infos)}]}
    )
    if node:
        s["nodeName"] = node
    return pod_from({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": s})


def _info(*pods: Pod) -> NodeInfo:
    return _node_info(_node(), {p.key: p for p in pods})


def _existing(*port_infos: str) -> NodeInfo:
    return _info(_pod(*port_infos, name="existing", node="n1"))


def _run(pod: Pod, node: NodeInfo) -> tuple[Status, Status | None]:
    pl = NodePorts()
    cs = CycleState(None)  # type: ignore[arg-type]  # NodePorts never reads the snapshot
    _, pre = pl.pre_filter(cs, pod)
    if pre.code == Code.SKIP:
        return pre, None
    return pre, pl.filter(cs, pod, node)


REJECT = Status.unschedulable(ERR_REASON)

# --- upstream TestNodePorts ------------------------------------------------------------------------------

# (name, pod ports, node ports, want filter status; None = PreFilter Skip)
UPSTREAM_CASES: list[tuple[str, tuple[str, ...], tuple[str, ...], Status | None]] = [
    ("other port", ("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/9090",), Status.ok()),
    ("same udp port", ("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/8080",), REJECT),
    ("same tcp port", ("TCP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), REJECT),
    ("different host ip", ("TCP/127.0.0.1/8080",), ("TCP/127.0.0.2/8080",), Status.ok()),
    ("different protocol", ("UDP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), Status.ok()),
    ("second udp port conflict", ("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), REJECT),
    (
        "first tcp port conflict",
        ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
        ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
        REJECT,
    ),
    ("first tcp port conflict due to 0.0.0.0 hostIP", ("TCP/0.0.0.0/8001",), ("TCP/127.0.0.1/8001",), REJECT),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        ("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
        ("TCP/127.0.0.1/8001",),
        REJECT,
    ),
    ("second tcp port conflict to 0.0.0.0 hostIP", ("TCP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), REJECT),
    ("second different protocol", ("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), Status.ok()),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        ("UDP/127.0.0.1/8001",),
        ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"),
        REJECT,
    ),
    # beyond upstream's list: defaults (protocol TCP, hostIP 0.0.0.0)
    ("default protocol is TCP", ("/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), REJECT),
    ("default protocol is not UDP", ("/127.0.0.1/8080",), ("UDP/127.0.0.1/8080",), Status.ok()),
    ("default hostIP is 0.0.0.0 (wanted)", ("TCP//8080",), ("TCP/10.1.1.1/8080",), REJECT),
    ("default hostIP is 0.0.0.0 (used)", ("TCP/10.1.1.1/8080",), ("//8080",), REJECT),
    ("0.0.0.0 on both sides", ("TCP/0.0.0.0/8080",), ("TCP/0.0.0.0/8080",), REJECT),
    ("0.0.0.0 wanted, other port used", ("TCP/0.0.0.0/8080",), ("TCP/10.1.1.1/8081",), Status.ok()),
]


@pytest.mark.parametrize(
    ("name", "want_ports", "node_ports", "want"), UPSTREAM_CASES, ids=[c[0] for c in UPSTREAM_CASES]
)
def test_node_ports(name: str, want_ports: tuple[str, ...], node_ports: tuple[str, ...], want: Status) -> None:
    pre, got = _run(_pod(*want_ports), _existing(*node_ports))
    assert pre.is_success
    assert got == want


def test_pod_without_ports_is_skipped() -> None:
    pre, got = _run(_pod(spec={"containers": [{"name": "c", "image": "x"}]}), _existing("TCP/0.0.0.0/80"))
    assert pre.code == Code.SKIP and got is None


def test_container_port_without_host_port_is_skipped() -> None:
    spec = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}]}
    pre, _ = _run(_pod(spec=spec), _existing("TCP/0.0.0.0/8080"))
    assert pre.code == Code.SKIP


def _init_spec(sidecar: bool) -> dict[str, Any]:
    init: dict[str, Any] = {
        "name": "i",
        "image": "x",
        "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}],
    }
    if sidecar:
        init["restartPolicy"] = "Always"
    return {"initContainers": [init], "containers": [{"name": "c", "image": "x"}]}


def test_non_sidecar_init_container_host_port_is_not_counted() -> None:
    pre, _ = _run(_pod(spec=_init_spec(False)), _existing("TCP/0.0.0.0/8001"))
    assert pre.code == Code.SKIP


def test_sidecar_init_container_host_port_conflicts() -> None:
    pre, got = _run(_pod(spec=_init_spec(True)), _existing("TCP/0.0.0.0/8001"))
    assert pre.is_success and got == REJECT


def test_sidecar_host_port_counts_as_used_on_the_node() -> None:
    node = _info(_pod(name="existing", node="n1", spec=_init_spec(True)))
    _, got = _run(_pod("TCP/0.0.0.0/8001"), node)
    assert got == REJECT
    # ... but a finished (plain) init container's port is free
    node = _info(_pod(name="existing", node="n1", spec=_init_spec(False)))
    _, got = _run(_pod("TCP/0.0.0.0/8001"), node)
    assert got == Status.ok()


def test_empty_node_fits() -> None:
    _, got = _run(_pod("TCP/0.0.0.0/8080"), _info())
    assert got == Status.ok()


def test_filter_without_prefilter_computes_from_the_pod() -> None:
    pl = NodePorts()
    cs = CycleState(None)  # type: ignore[arg-type]
    assert pl.filter(cs, _pod("TCP/0.0.0.0/80"), _existing("TCP/0.0.0.0/80")) == REJECT
    assert pl.filter(cs, _pod("TCP/0.0.0.0/81"), _existing("TCP/0.0.0.0/80")).is_success


# --- upstream TestFits -----------------------------------------------------------------------------------

FITS_CASES = [
    ("non-conflicting ports", ("TCP/127.0.0.1/80",), ("TCP/127.0.0.1/9090",), True),
    (
        "multiple non-conflicting ports",
        ("TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
        ("TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"),
        True,
    ),
    ("same ports on different protocols", ("TCP/127.0.0.1/80",), ("UDP/127.0.0.1/80",), True),
    ("conflicting ports", ("TCP/127.0.0.1/80",), ("TCP/127.0.0.1/80",), False),
    (
        "multiple ports, some conflicting",
        ("TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
        ("TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"),
        False,
    ),
]


@pytest.mark.parametrize(("desc", "want", "used", "expect"), FITS_CASES, ids=[c[0] for c in FITS_CASES])
def test_fits(desc: str, want: tuple[str, ...], used: tuple[str, ...], expect: bool) -> None:
    assert fits(_pod(*want), _existing(*used)) is expect


# --- hostNetwork defaulting ------------------------------------------------------------------------------


def _host_network_spec(*ports: Mapping[str, Any], init_sidecar: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"hostNetwork": True, "containers": [{"name": "c", "image": "x", "ports": list(ports)}]}
    if init_sidecar:
        spec["initContainers"] = [
            {"name": "i", "image": "x", "restartPolicy": "Always", "ports": [{"containerPort": 9100}]}
        ]
    return spec


def test_host_network_container_ports_become_host_ports() -> None:
    pod = _pod(spec=_host_network_spec({"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}))
    assert host_ports(pod) == (HostPort("0.0.0.0", "TCP", 8080), HostPort("0.0.0.0", "UDP", 53))
    _, got = _run(pod, _existing("TCP/0.0.0.0/8080"))
    assert got == REJECT


def test_host_network_keeps_an_explicit_host_port() -> None:
    pod = _pod(spec=_host_network_spec({"containerPort": 8080, "hostPort": 9090}))
    assert host_ports(pod) == (HostPort("0.0.0.0", "TCP", 9090),)


def test_host_network_sidecar_port_is_defaulted_too() -> None:
    pod = _pod(spec=_host_network_spec({"containerPort": 8080}, init_sidecar=True))
    assert host_ports(pod) == (HostPort("0.0.0.0", "TCP", 9100), HostPort("0.0.0.0", "TCP", 8080))


def test_host_network_pod_on_the_node_blocks_its_container_ports() -> None:
    node = _info(_pod(name="existing", node="n1", spec=_host_network_spec({"containerPort": 8080})))
    _, got = _run(_pod("TCP/0.0.0.0/8080"), node)
    assert got == REJECT
    _, got = _run(_pod("TCP/0.0.0.0/8081"), node)
    assert got == Status.ok()


def test_no_host_network_container_port_only_is_not_a_host_port() -> None:
    spec = {"hostNetwork": False, "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}]}
    assert host_ports(_pod(spec=spec)) == ()


# --- memo, signature, spec -------------------------------------------------------------------------------


def test_used_ports_are_cached_per_node_info() -> None:
    node = _existing("TCP/0.0.0.0/80", "UDP/10.0.0.1/53")
    first = used_ports(node)
    assert first == {"0.0.0.0": frozenset({("TCP", 80)}), "10.0.0.1": frozenset({("UDP", 53)})}
    assert used_ports(node) is first
    other = _existing("TCP/0.0.0.0/81")  # a new NodeInfo (the node's pods changed) is recomputed
    assert used_ports(other) == {"0.0.0.0": frozenset({("TCP", 81)})}


def test_signature_is_the_wanted_ports() -> None:
    pl = NodePorts()
    cs = CycleState(None)  # type: ignore[arg-type]
    a, b = _pod("TCP/0.0.0.0/80", name="a"), _pod("TCP/0.0.0.0/80", name="b")
    assert pl.sign(cs, a) == pl.sign(cs, b)
    assert pl.sign(cs, a) != pl.sign(cs, _pod("TCP/0.0.0.0/81"))
    assert pl.sign(cs, a) != pl.sign(cs, _pod("UDP/0.0.0.0/80"))
    assert pl.sign(cs, a) != pl.sign(cs, _pod("TCP/10.0.0.1/80"))


def test_spec_points_and_events() -> None:
    inst = SPEC.factory({})
    assert isinstance(inst, PreFilterPlugin) and isinstance(inst, FilterPlugin)
    assert isinstance(inst, SignPlugin) and isinstance(inst, EnqueueExtensions)
    assert not isinstance(inst, ScorePlugin)
    assert SPEC.points == frozenset({"preFilter", "filter"})
    assert set(inst.events_to_register()) == {("Pod", "Delete"), ("Node", "Add")}
    assert SPEC.validate_args is not None
    assert SPEC.validate_args({}, "args") == []
    assert SPEC.validate_args({"x": 1}, "args") != []


# --- simulate ---------------------------------------------------------------------------------------------

NODE_YAML = """
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status:
  allocatable: {{cpu: "8", memory: 16Gi, pods: "110"}}
"""

POD_YAML = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: dra-scheduler
  containers:
  - name: web
    image: nginx
    resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
    ports:
    - containerPort: 80
      hostPort: 8080
"""


def _objects(nodes: Sequence[str], pods: Sequence[str]) -> list[dict[str, Any]]:
    text = "---".join([NODE_YAML.format(name=n) for n in nodes] + [POD_YAML.format(name=p) for p in pods])
    return [o for o in yaml.safe_load_all(text) if o]


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}


def test_simulate_one_node_two_pods_same_host_port() -> None:
    res = asyncio.run(simulate(_objects(["node-1"], ["web-1", "web-2"])))
    pods = _by_name(res.items)
    assert res.summary["scheduled"] == 1 and res.summary["unschedulable"] == 1
    pending = [p for p in pods.values() if not p["spec"].get("nodeName")]
    [pending_pod] = pending
    [cond] = [c for c in pending_pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == (
        f"0/1 nodes are available: 1 {ERR_REASON}. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_simulate_two_nodes_equal_pods_land_on_different_nodes() -> None:
    """The two pods have equal signatures: the second must not reuse the first's verdict on its node."""
    res = asyncio.run(simulate(_objects(["node-1", "node-2"], ["web-1", "web-2"])))
    pods = _by_name(res.items)
    assert res.summary["scheduled"] == 2
    assert {pods["web-1"]["spec"]["nodeName"], pods["web-2"]["spec"]["nodeName"]} == {"node-1", "node-2"}


def test_simulate_three_pods_two_nodes_third_pending() -> None:
    res = asyncio.run(simulate(_objects(["node-1", "node-2"], ["web-1", "web-2", "web-3"])))
    assert res.summary["scheduled"] == 2 and res.summary["unschedulable"] == 1
    pending = [p for p in _by_name(res.items).values() if not p["spec"].get("nodeName")]
    [cond] = [c for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["message"] == (
        f"0/2 nodes are available: 2 {ERR_REASON}. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_simulate_signature_tells_ports_apart() -> None:
    """A pod wanting a free port must not reuse the rejection of a pod wanting a taken one."""
    objs = _objects(["node-1"], ["web-a", "web-b"])
    bound = _objects([], ["holder"])[0]
    bound["spec"]["nodeName"] = "node-1"
    pods = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Pod"}
    pods["web-b"]["spec"]["containers"][0]["ports"][0]["hostPort"] = 9090
    res = asyncio.run(simulate([*objs, bound]))
    out = _by_name(res.items)
    assert not out["web-a"]["spec"].get("nodeName")
    assert out["web-b"]["spec"]["nodeName"] == "node-1"
