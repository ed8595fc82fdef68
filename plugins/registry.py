"""The in-tree plugins and the default profile (kube-scheduler 1.37.2's, plus ours).

The engine finds them through the entry point ``in-tree = "plugins.registry:in_tree"`` of the group
``dra_scheduler.registries`` (pyproject.toml; :mod:`scheduler.config.registry`), never by importing this
module: plugins depend on the engine, not the reverse (ARCHITECTURE.md §2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from plugins.balancedallocation import SPEC as BALANCED_ALLOCATION
from plugins.defaultbinder import SPEC as DEFAULT_BINDER
from plugins.defaultpreemption import SPEC as DEFAULT_PREEMPTION
from plugins.dra import plugin as dra
from plugins.dra.state import BINDING_TIMEOUT_DEFAULT as DRA_BINDING_TIMEOUT_DEFAULT
from plugins.fieldguard import SPEC as UNSUPPORTED_FIELDS
from plugins.fragmentation import plugin as frag
from plugins.imagelocality import SPEC as IMAGE_LOCALITY
from plugins.interpodaffinity import SPEC as INTER_POD_AFFINITY
from plugins.nodeaffinity import SPEC as NODE_AFFINITY
from plugins.nodedeclaredfeatures import SPEC as NODE_DECLARED_FEATURES
from plugins.nodename import SPEC as NODE_NAME
from plugins.nodeports import SPEC as NODE_PORTS
from plugins.noderesources import SPEC as NODE_RESOURCES_FIT
from plugins.nodeunschedulable import SPEC as NODE_UNSCHEDULABLE
from plugins.nodevolumelimits import SPEC as NODE_VOLUME_LIMITS
from plugins.podtopologyspread import SPEC as POD_TOPOLOGY_SPREAD
from plugins.queuesort import SPEC as PRIORITY_SORT
from plugins.schedulinggates import SPEC as SCHEDULING_GATES
from plugins.tainttoleration import SPEC as TAINT_TOLERATION
from plugins.topology import plugin as topo
from plugins.volumebinding import SPEC as VOLUME_BINDING
from plugins.volumerestrictions import SPEC as VOLUME_RESTRICTIONS
from plugins.volumezone import SPEC as VOLUME_ZONE
from scheduler.config.registry import NO_DEFAULT, ArgDoc, PluginRef, PluginSpec, Registry

# DeviceFragmentation's weight: above the sum of the weights that can pull a device pod elsewhere on a
# GPU node (NodeResourcesFit's LeastAllocated 1 + BalancedAllocation 1 + GpuTopology 3 + DynamicResources 2),
# so the stranded capacity decides among nodes and topology among equals; a cluster without device claims
# scores 0 everywhere with it (docs/configuration.md shows the plain kube-scheduler scoring).
FRAGMENTATION_WEIGHT = 10

# The default profile: every extension point with its plugins, in order (kube-scheduler's defaults,
# restricted to the plugins this scheduler implements, plus DynamicResources everywhere it acts).
DEFAULT_PLUGINS: Mapping[str, tuple[PluginRef, ...]] = {
    # kube-scheduler 1.37.2's default profile (pkg/scheduler/apis/config/v1/default_plugins.go), in its
    # order, plus GpuTopology. A plugin listed at a point it does not implement (its registry entry's
    # ``points``) is left out there, as upstream's multiPoint expansion does.
    "preEnqueue": (
        PluginRef("SchedulingGates"),
        PluginRef("DynamicResources"),
        PluginRef("DefaultPreemption"),
        PluginRef("DeviceFragmentation"),  # ours: observes the pending mix, never rejects
    ),
    "queueSort": (PluginRef("PrioritySort"),),
    "preFilter": (
        PluginRef("UnsupportedFields"),  # ours: a field we do not implement rejects the pod, naming it
        PluginRef("NodeAffinity"),
        PluginRef("NodePorts"),
        PluginRef("NodeResourcesFit"),
        PluginRef("VolumeRestrictions"),
        PluginRef("NodeVolumeLimits"),
        PluginRef("VolumeBinding"),
        PluginRef("VolumeZone"),
        PluginRef("PodTopologySpread"),
        PluginRef("InterPodAffinity"),
        PluginRef("GpuTopology"),  # hands DynamicResources the device-order hook, so it runs first
        PluginRef("DeviceFragmentation"),  # learns the mix, chains its device order after GpuTopology's
        PluginRef("DynamicResources"),
        PluginRef("NodeDeclaredFeatures"),
    ),
    "filter": (
        PluginRef("NodeUnschedulable"),
        PluginRef("NodeName"),
        PluginRef("TaintToleration"),
        PluginRef("NodeAffinity"),
        PluginRef("NodePorts"),
        PluginRef("NodeResourcesFit"),
        PluginRef("VolumeRestrictions"),
        PluginRef("NodeVolumeLimits"),
        PluginRef("VolumeBinding"),
        PluginRef("VolumeZone"),
        PluginRef("PodTopologySpread"),
        PluginRef("InterPodAffinity"),
        PluginRef("DynamicResources"),
        PluginRef("NodeDeclaredFeatures"),
    ),
    "postFilter": (PluginRef("DefaultPreemption"),),
    "preScore": (
        PluginRef("TaintToleration"),
        PluginRef("NodeAffinity"),
        PluginRef("NodeResourcesFit"),
        PluginRef("VolumeBinding"),
        PluginRef("PodTopologySpread"),
        PluginRef("InterPodAffinity"),
        PluginRef("NodeResourcesBalancedAllocation"),
        PluginRef("ImageLocality"),
    ),
    "score": (
        PluginRef("TaintToleration", 3),
        PluginRef("NodeAffinity", 2),
        PluginRef("NodeResourcesFit", 1),
        PluginRef("VolumeBinding", 1),
        PluginRef("PodTopologySpread", 2),
        PluginRef("InterPodAffinity", 2),
        PluginRef("DynamicResources", 2),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1),
        PluginRef("GpuTopology", 3),
        PluginRef("DeviceFragmentation", FRAGMENTATION_WEIGHT),
    ),
    "reserve": (PluginRef("VolumeBinding"), PluginRef("DynamicResources"), PluginRef("DeviceFragmentation")),
    "permit": (),
    "preBind": (PluginRef("VolumeBinding"), PluginRef("DynamicResources"), PluginRef("GpuTopology")),
    "bind": (PluginRef("DefaultBinder"),),
}


# --- the args whose defaults a plugin applies itself (not through PluginSpec.default_args) -----------------


def _dynamic_resources_arg_docs() -> list[ArgDoc]:
    return [
        ArgDoc("featureGates", {g: True for g in sorted(dra._GATES)}),
        ArgDoc("celEngine"),
        ArgDoc("bindingTimeout", f"{DRA_BINDING_TIMEOUT_DEFAULT:g}s"),
        ArgDoc("filterTimeout"),
        ArgDoc("nodeSelector"),
    ]


def _gpu_topology_arg_docs() -> list[ArgDoc]:
    a = topo.parse_args({})
    values: dict[str, Any] = {
        "mode": a.mode,
        "driver": a.driver,
        "profiles": [],
        "levels": [lv.label for lv in a.levels],
        "requiredLevel": a.required_level,
        "preferredLevel": a.preferred_level,
        "deviceOrder": a.device_order,
    }
    return [ArgDoc(f, values.get(f, NO_DEFAULT)) for f in topo._FIELDS]


def _fragmentation_arg_docs() -> list[ArgDoc]:
    return [
        ArgDoc("window", frag.DEFAULT_WINDOW),
        ArgDoc("scale", frag.DEFAULT_SCALE),
        ArgDoc("strand", frag.DEFAULT_STRAND),
        ArgDoc("multiDevice", frag.DEFAULT_MULTI_DEVICE),
        ArgDoc("scarcity", frag.DEFAULT_SCARCITY),
    ]


def _node_affinity_arg_docs() -> list[ArgDoc]:
    return [ArgDoc("addedAffinity")]


def _documented(spec: PluginSpec, arg_docs: Callable[[], list[ArgDoc]]) -> PluginSpec:
    """``spec`` with ``arg_docs`` unless the plugin documents its args itself."""
    return spec if spec.arg_docs is not None else replace(spec, arg_docs=arg_docs)


def in_tree_registry() -> dict[str, PluginSpec]:
    """Every in-tree plugin by name, in the order the configuration reference lists them."""
    specs = [
        PRIORITY_SORT,
        SCHEDULING_GATES,
        UNSUPPORTED_FIELDS,
        NODE_UNSCHEDULABLE,
        NODE_NAME,
        TAINT_TOLERATION,
        _documented(NODE_AFFINITY, _node_affinity_arg_docs),
        NODE_PORTS,
        NODE_RESOURCES_FIT,
        VOLUME_RESTRICTIONS,
        NODE_VOLUME_LIMITS,
        VOLUME_BINDING,
        VOLUME_ZONE,
        POD_TOPOLOGY_SPREAD,
        INTER_POD_AFFINITY,
        _documented(dra.SPEC, _dynamic_resources_arg_docs),
        DEFAULT_PREEMPTION,
        BALANCED_ALLOCATION,
        IMAGE_LOCALITY,
        NODE_DECLARED_FEATURES,
        _documented(topo.SPEC, _gpu_topology_arg_docs),
        _documented(frag.SPEC, _fragmentation_arg_docs),
        DEFAULT_BINDER,
    ]
    return {s.name: s for s in specs}


def in_tree() -> Registry:
    """The entry point ``dra_scheduler.registries: in-tree``: the in-tree plugins and the default profile."""
    return Registry(specs=in_tree_registry(), default_plugins=DEFAULT_PLUGINS)
