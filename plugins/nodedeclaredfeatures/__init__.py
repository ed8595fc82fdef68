"""NodeDeclaredFeatures: the node must declare every feature the pod needs (KEP-5328, GA in 1.37).

kube-scheduler v1.37.2 (``pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures.go``;
the feature registry ``k8s.io/component-helpers@v0.37.2/nodedeclaredfeatures``: ``framework.go``,
``features/registry.go`` and one package per feature). In the default profile when the
NodeDeclaredFeatures gate is on (GA, locked on in 1.37), appended after the other multiPoint plugins
(``pkg/scheduler/apis/config/v1/default_plugins.go`` ``applyFeatureGates``).

* The kubelet publishes ``node.status.declaredFeatures`` (feature names). Names the registry does not
  know are ignored (``FeatureMapper.TryMap``).
* PreFilter infers the features the pod needs for scheduling (``InferForPodScheduling``: every registered
  feature whose ``InferForScheduling`` is true and whose ``MaxVersion`` is unset or not below the
  scheduler's version). None: **Skip**.
* Filter: ``UnschedulableAndUnresolvable`` ``node(s) didn't match Pod's required features`` unless the
  requirements are a subset of the node's declared features.
* Events: a node added or updated (its declared features changed), the pod updated.

The 1.37.2 registry (sorted by name) and what makes a pod need each feature at scheduling time:

=============================================  ==============================================================
DRANodeAllocatableResources                    never (not a scheduling factor)
DRAOptionalNodeOperations                      never (the DRA plugin handles it; claims unknown at PreFilter)
ExtendWebSocketsToKubelet                      never
InPlacePodLevelResourcesVerticalScaling        never (updates only)
InPlacePodVerticalScalingInitContainers        never (updates only)
InPlacePodVerticalScalingMemoryBackedVolumes   never (updates only)
RestartAllContainersOnContainerExits           a container or init container has a ``restartPolicyRules``
                                               entry with ``action: RestartAllContainers``
UserNamespacesHostNetworkSupport               ``hostNetwork: true`` and ``hostUsers: false``
VolumeBindMountOptions                         a volume mount of a container, init container or ephemeral
                                               container has non-empty ``bindMountOptions``
=============================================  ==============================================================

No feature has a ``MaxVersion`` in 1.37.2; the field is kept so a later registry can set one.

Reuse between equal pods: the filter reads the pod's required features and the node's declared
features (part of its Node object, hence of its NodeInfo), so the sorted requirements are the signature.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, PreFilterResult, Status

if TYPE_CHECKING:
    from scheduler.api.model import Node, Pod
    from scheduler.cache.cache import NodeInfo

NAME = "NodeDeclaredFeatures"
_PRE_FILTER_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't match Pod's required features"
SCHEDULER_VERSION = (1, 37, 2)

Spec = Mapping[str, Any]


def _containers(spec: Spec, *keys: str) -> list[Mapping[str, Any]]:
    return [c for k in keys for c in (spec.get(k) or ()) if isinstance(c, Mapping)]


def _never(spec: Spec) -> bool:
    return False


def _restart_all_containers(spec: Spec) -> bool:
    for c in _containers(spec, "containers", "initContainers"):
        for rule in c.get("restartPolicyRules") or ():
            if isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers":
                return True
    return False


def _user_namespaces_host_network(spec: Spec) -> bool:
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


def _volume_bind_mount_options(spec: Spec) -> bool:
    for c in _containers(spec, "containers", "initContainers", "ephemeralContainers"):
        for m in c.get("volumeMounts") or ():
            if isinstance(m, Mapping) and m.get("bindMountOptions"):
                return True
    return False


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    infer_for_scheduling: Callable[[Spec], bool]
    max_version: tuple[int, int, int] | None = None


# k8s.io/component-helpers@v0.37.2/nodedeclaredfeatures/features/registry.go AllFeatures, sorted by name.
REGISTRY: tuple[Feature, ...] = tuple(
    sorted(
        (
            Feature("RestartAllContainersOnContainerExits", _restart_all_containers),
            Feature("InPlacePodLevelResourcesVerticalScaling", _never),
            Feature("ExtendWebSocketsToKubelet", _never),
            Feature("InPlacePodVerticalScalingInitContainers", _never),
            Feature("InPlacePodVerticalScalingMemoryBackedVolumes", _never),
            Feature("UserNamespacesHostNetworkSupport", _user_namespaces_host_network),
            Feature("DRANodeAllocatableResources", _never),
            Feature("VolumeBindMountOptions", _volume_bind_mount_options),
            Feature("DRAOptionalNodeOperations", _never),
        ),
        key=lambda f: f.name,
    )
)
REGISTERED = frozenset(f.name for f in REGISTRY)


def infer_for_pod_scheduling(
    spec: Spec, version: tuple[int, int, int] = SCHEDULER_VERSION, registry: Sequence[Feature] = REGISTRY
) -> tuple[str, ...]:
    """``Framework.InferForPodScheduling``: the features the pod needs, sorted by name."""
    return tuple(
        f.name for f in registry if (f.max_version is None or version <= f.max_version) and f.infer_for_scheduling(spec)
    )


def pod_requirements(pod: Pod) -> tuple[str, ...]:
    reqs: tuple[str, ...] | None = pod.memo.get(NAME)
    if reqs is None:
        spec = pod.raw.get("spec")
        reqs = pod.memo[NAME] = infer_for_pod_scheduling(spec if isinstance(spec, Mapping) else {})
    return reqs


def node_declared_features(node: Node) -> frozenset[str]:
    """``TryMap(node.status.declaredFeatures)``: the registered features the node declares, memoised."""
    fs: frozenset[str] | None = node.memo.get(NAME)
    if fs is None:
        status = node.raw.get("status")
        declared = status.get("declaredFeatures") if isinstance(status, Mapping) else None
        fs = node.memo[NAME] = frozenset(f for f in declared or () if isinstance(f, str)) & REGISTERED
    return fs


class NodeDeclaredFeatures:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        reqs = pod_requirements(pod)
        if not reqs:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, reqs)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        reqs: tuple[str, ...] | None = state.read(_PRE_FILTER_KEY)
        if reqs is None:  # PreFilter not run (only Filter enabled): the same answer from the pod
            reqs = pod_requirements(pod)
        if node_declared_features(node.node).issuperset(reqs):
            return Status.ok()
        return Status.unresolvable(ERR_REASON)

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return pod_requirements(pod)

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        return (("Node", "Add"), ("Node", "Update"), ("Pod", "Update"))


SPEC = PluginSpec(
    name=NAME, factory=NodeDeclaredFeatures, points=frozenset({"preFilter", "filter"}), validate_args=no_args
)

__all__ = [
    "ERR_REASON",
    "NAME",
    "REGISTRY",
    "SPEC",
    "Feature",
    "NodeDeclaredFeatures",
    "infer_for_pod_scheduling",
    "node_declared_features",
    "pod_requirements",
]
