"""NodeDeclaredFeatures (kube-scheduler v1.37.2 ``pkg/scheduler/framework/plugins/nodedeclaredfeatures``,
cases from ``nodedeclaredfeatures_test.go`` TestPreFilter / TestFilter; the feature registry of
``k8s.io/component-helpers@v0.37.2/nodedeclaredfeatures/features``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from plugins.nodedeclaredfeatures import (
    ERR_REASON,
    REGISTRY,
    SPEC,
    Feature,
    NodeDeclaredFeatures,
    infer_for_pod_scheduling,
    node_declared_features,
    pod_requirements,
)
from scheduler.api.model import Pod, node_from, pod_from
from scheduler.cache.cache import NodeInfo, Snapshot, _node_info
from scheduler.config.registry import PluginRef, PluginSpec
from scheduler.config.schedulerconfig import Profile
from scheduler.framework.interface import (
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    QueuedPodInfo,
    ScorePlugin,
    SignPlugin,
    Status,
)
from scheduler.framework.runtime import Framework

RESTART_ALL = "RestartAllContainersOnContainerExits"
USERNS_HOSTNET = "UserNamespacesHostNetworkSupport"
BIND_MOUNT = "VolumeBindMountOptions"


def _pod(spec: Mapping[str, Any] | None = None, name: str = "p") -> Pod:
    s = dict(spec) if spec is not None else {"containers": [{"name": "c", "image": "x"}]}
    return pod_from({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": s})


def _info(name: str = "n1", declared: Sequence[str] | None = None) -> NodeInfo:
    status: dict[str, Any] = {"allocatable": {"pods": "110"}}
    if declared is not None:
        status["declaredFeatures"] = list(declared)
    return _node_info(node_from({"metadata": {"name": name}, "status": status}), {})


def _restart_rule_spec(where: str, action: str = "RestartAllContainers") -> dict[str, Any]:
    c = {
        "name": "c",
        "image": "x",
        "restartPolicyRules": [{"action": action, "exitCodes": {"operator": "In", "values": [42]}}],
    }
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    spec.setdefault(where, []).append(c)
    return spec


def _bind_mount_spec(where: str, options: list[str]) -> dict[str, Any]:
    c = {"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": options}]}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}], "volumes": [{"name": "v", "emptyDir": {}}]}
    spec.setdefault(where, []).append(c)
    return spec


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"containers": [{"name": "c", "image": "x"}]}, ()),
        (_restart_rule_spec("containers"), (RESTART_ALL,)),
        (_restart_rule_spec("initContainers"), (RESTART_ALL,)),
        (_restart_rule_spec("containers", action="Restart"), ()),
        ({"hostNetwork": True, "hostUsers": False, "containers": []}, (USERNS_HOSTNET,)),
        ({"hostNetwork": True, "containers": []}, ()),  # hostUsers unset: host user namespace
        ({"hostNetwork": True, "hostUsers": True, "containers": []}, ()),
        ({"hostUsers": False, "containers": []}, ()),
        (_bind_mount_spec("containers", ["nosuid"]), (BIND_MOUNT,)),
        (_bind_mount_spec("initContainers", ["ro"]), (BIND_MOUNT,)),
        (_bind_mount_spec("ephemeralContainers", ["noexec"]), (BIND_MOUNT,)),
        (_bind_mount_spec("containers", []), ()),
        (
            {**_restart_rule_spec("containers"), "hostNetwork": True, "hostUsers": False},
            (RESTART_ALL, USERNS_HOSTNET),
        ),
        # update-only and non-scheduling features are never inferred at scheduling time
        ({"resources": {"requests": {"cpu": "1"}}, "containers": []}, ()),
    ],
)
def test_infer_for_pod_scheduling(spec: Mapping[str, Any], want: tuple[str, ...]) -> None:
    assert infer_for_pod_scheduling(spec) == want
    assert pod_requirements(_pod(spec)) == want


def test_registry_is_the_1_37_2_list_sorted() -> None:
    assert [f.name for f in REGISTRY] == [
        "DRANodeAllocatableResources",
        "DRAOptionalNodeOperations",
        "ExtendWebSocketsToKubelet",
        "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers",
        "InPlacePodVerticalScalingMemoryBackedVolumes",
        RESTART_ALL,
        USERNS_HOSTNET,
        BIND_MOUNT,
    ]
    assert all(f.max_version is None for f in REGISTRY)


def test_max_version() -> None:
    """A feature whose MaxVersion is below the scheduler's version is no longer required."""
    reg = [
        Feature("Old", lambda s: True, (1, 36, 0)),
        Feature("Current", lambda s: True, (1, 37, 2)),
        Feature("Open", lambda s: True),
        Feature("Unused", lambda s: False),
    ]
    assert infer_for_pod_scheduling({}, (1, 37, 2), reg) == ("Current", "Open")
    assert infer_for_pod_scheduling({}, (1, 35, 0), reg) == ("Old", "Current", "Open")


def test_node_declared_features_ignore_unknown_names() -> None:
    info = _info(declared=["SomethingNew", USERNS_HOSTNET])
    assert node_declared_features(info.node) == frozenset({USERNS_HOSTNET})
    assert node_declared_features(_info().node) == frozenset()


# --- PreFilter / Filter (upstream TestPreFilter / TestFilter with the real registry) ------------------------

USERNS_POD = {"hostNetwork": True, "hostUsers": False, "containers": [{"name": "c", "image": "x"}]}
BOTH_POD = {**_restart_rule_spec("containers"), "hostNetwork": True, "hostUsers": False}


def _run(spec: Mapping[str, Any], node: NodeInfo) -> tuple[Status, Status | None]:
    pl = NodeDeclaredFeatures()
    cs = CycleState(None)  # type: ignore[arg-type]  # never reads the snapshot
    _, pre = pl.pre_filter(cs, _pod(spec))
    if pre.code == Code.SKIP:
        return pre, None
    return pre, pl.filter(cs, _pod(spec), node)


REJECT = Status.unresolvable(ERR_REASON)


@pytest.mark.parametrize(
    ("name", "spec", "declared", "want"),
    [
        ("Node matches requirements", USERNS_POD, [RESTART_ALL, USERNS_HOSTNET], Status.ok()),
        ("Node does not match requirements", USERNS_POD, [RESTART_ALL], REJECT),
        (
            "Node with multiple features, pod requires subset",
            BOTH_POD,
            [RESTART_ALL, USERNS_HOSTNET, BIND_MOUNT],
            Status.ok(),
        ),
        ("Node has no declared features", USERNS_POD, None, REJECT),
        ("Node with some but not all required features", BOTH_POD, [RESTART_ALL], REJECT),
        ("unsorted declared features", BOTH_POD, [USERNS_HOSTNET, RESTART_ALL], Status.ok()),
    ],
)
def test_filter(name: str, spec: Mapping[str, Any], declared: Sequence[str] | None, want: Status) -> None:
    pre, got = _run(spec, _info(declared=declared))
    assert pre.is_success
    assert got == want


def test_pod_without_requirements_is_skipped() -> None:
    pre, got = _run({"containers": [{"name": "c", "image": "x"}]}, _info())
    assert pre.code == Code.SKIP and got is None


def test_filter_without_prefilter_computes_from_the_pod() -> None:
    pl = NodeDeclaredFeatures()
    cs = CycleState(None)  # type: ignore[arg-type]
    assert pl.filter(cs, _pod(USERNS_POD), _info()) == REJECT
    assert pl.filter(cs, _pod(USERNS_POD), _info(declared=[USERNS_HOSTNET])).is_success


def test_spec_signature_events() -> None:
    inst = SPEC.factory({})
    assert isinstance(inst, PreFilterPlugin) and isinstance(inst, FilterPlugin)
    assert isinstance(inst, SignPlugin) and isinstance(inst, EnqueueExtensions)
    assert not isinstance(inst, ScorePlugin)
    assert SPEC.points == frozenset({"preFilter", "filter"})
    assert SPEC.validate_args is not None and SPEC.validate_args({}, "args") == []
    cs = CycleState(None)  # type: ignore[arg-type]
    assert inst.sign(cs, _pod(USERNS_POD, "a")) == inst.sign(cs, _pod(USERNS_POD, "b"))
    assert inst.sign(cs, _pod(USERNS_POD)) != inst.sign(cs, _pod(BOTH_POD))
    assert set(inst.events_to_register()) == {("Node", "Add"), ("Node", "Update"), ("Pod", "Update")}


# --- through the runtime (filter reuse between equal pods) --------------------------------------------------


class _Sorter:
    name: ClassVar[str] = "Sorter"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class _Binder:
    name: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node: str, api: Any) -> Status:
        return Status.ok()


def test_runtime_filter_reuse_tells_requirements_apart() -> None:
    reg = {
        "Sorter": PluginSpec("Sorter", lambda a: _Sorter(), frozenset({"queueSort"})),
        "Binder": PluginSpec("Binder", lambda a: _Binder(), frozenset({"bind"})),
        SPEC.name: SPEC,
    }
    plugins = {
        "queueSort": (PluginRef("Sorter"),),
        "bind": (PluginRef("Binder"),),
        "preFilter": (PluginRef(SPEC.name),),
        "filter": (PluginRef(SPEC.name),),
    }
    fw = Framework(Profile("t", plugins), reg)
    nodes = [_info("plain"), _info("userns", [USERNS_HOSTNET])]

    def statuses(spec: Mapping[str, Any], name: str) -> dict[str, Code]:
        cs = CycleState(Snapshot.__new__(Snapshot))
        pod = _pod(spec, name)
        _, st = fw.run_pre_filter(cs, pod)
        assert st.is_success
        sig = fw.signature(cs, pod)
        assert sig is not None
        return {n.name: fw.run_filter_memo(cs, pod, n, sig).code for n in nodes}

    want = {"plain": Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "userns": Code.SUCCESS}
    assert statuses(USERNS_POD, "a") == want
    assert statuses(USERNS_POD, "b") == want
    assert fw.memo_stats["filter_hits"] == 2
    ok = {"plain": Code.SUCCESS, "userns": Code.SUCCESS}
    assert statuses({"containers": [{"name": "c", "image": "x"}]}, "c") == ok
