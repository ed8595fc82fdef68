"""Generate ``docs/configuration.md``, the configuration reference, from the code that applies it.

    python -m scheduler.config.configref > docs/configuration.md

Everything in the reference comes from the code: the plugins and the extension points they implement from
the registry (:func:`scheduler.config.registry.default_registry`), the default profile and its score
weights from :func:`scheduler.config.schedulerconfig.default_profile` (both from the installed registries, the
in-tree one being ``plugins/registry.py``), the top-level defaults from
:class:`scheduler.config.schedulerconfig.SchedulerConfig`, and
each plugin's args with the defaults the plugin applies (its ``PluginSpec.default_args``, or for the plugins
that apply defaults themselves, its ``PluginSpec.arg_docs``). ``tests/test_docs.py`` checks that the
committed file equals this module's output and that every documented arg with its default passes the
plugin's own args validation, so the reference cannot drift.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import Any

from scheduler.config.registry import NO_DEFAULT, ArgDoc, PluginSpec, default_registry
from scheduler.config.schedulerconfig import (
    API_VERSION,
    CONFIGMAP_KEY,
    KIND,
    MAX_WEIGHT,
    MULTI_POINT,
    POINTS,
    SchedulerConfig,
    default_plugins,
)

__all__ = ["NO_DEFAULT", "ArgDoc", "main", "plugin_args", "render"]


# Upstream's source of each kube-scheduler plugin (kubernetes v1.37.2, pkg/scheduler/framework/plugins/).
_UPSTREAM = {
    "PrioritySort": "queuesort",
    "SchedulingGates": "schedulinggates",
    "NodeUnschedulable": "nodeunschedulable",
    "NodeName": "nodename",
    "TaintToleration": "tainttoleration",
    "NodeAffinity": "nodeaffinity",
    "NodePorts": "nodeports",
    "NodeResourcesFit": "noderesources",
    "VolumeRestrictions": "volumerestrictions",
    "NodeVolumeLimits": "nodevolumelimits",
    "VolumeBinding": "volumebinding",
    "VolumeZone": "volumezone",
    "PodTopologySpread": "podtopologyspread",
    "InterPodAffinity": "interpodaffinity",
    "DynamicResources": "dynamicresources",
    "NodeResourcesBalancedAllocation": "noderesources",
    "ImageLocality": "imagelocality",
    "NodeDeclaredFeatures": "nodedeclaredfeatures",
    "DefaultBinder": "defaultbinder",
    "DefaultPreemption": "defaultpreemption",
}

# Short notes on args (the values shown are the code's own defaults; a note never states a default).
_NOTES: Mapping[str, Mapping[str, str]] = {
    "NodeResourcesFit": {
        "scoringStrategy": "type LeastAllocated, MostAllocated or RequestedToCapacityRatio; resources and weights",
        "ignoredResources": "extended resources the Filter ignores",
        "ignoredResourceGroups": "extended-resource name prefixes the Filter ignores",
    },
    "VolumeBinding": {
        "bindTimeoutSeconds": "how long PreBind waits for the PV controller",
        "shape": "StorageCapacityScoring: score by utilization of the chosen PVs' capacity",
    },
    "PodTopologySpread": {
        "defaultingType": "System (kube-scheduler's default constraints) or List (defaultConstraints)",
        "defaultConstraints": "constraints for pods that have none (defaultingType List)",
    },
    "InterPodAffinity": {
        "hardPodAffinityWeight": "score weight of existing pods' required affinity terms (0..100)",
        "ignorePreferredTermsOfExistingPods": "score only the incoming pod's preferred terms",
    },
    "NodeResourcesBalancedAllocation": {"resources": "resources whose balance is scored, with weights"},
    "NodeAffinity": {"addedAffinity": "node affinity added to every pod of the profile"},
    "DynamicResources": {
        "featureGates": "the DRA feature gates of Kubernetes 1.37 (all on); switch one off to get the 1.37 "
        "behaviour without it",
        "celEngine": "CEL engine for device selectors: cel-expr-python (fastest) or cel-python; "
        "default: $DRA_SCHEDULER_CEL_ENGINE, else the fastest installed",
        "bindingTimeout": "how long PreBind waits for device binding conditions (KEP-5007)",
        "filterTimeout": "accepted and validated as upstream's (zero or positive duration)",
        "nodeSelector": "label selector of the nodes whose devices this scheduler allocates (beyond upstream: "
        "partition the devices when running next to kube-scheduler); default: every node",
    },
    "GpuTopology": {
        "mode": "Pack (fill partly used nodes and domains) or Spread",
        "driver": "DRA driver whose devices are placed by topology",
        "profiles": "interconnect profiles by productName, added to the built-in ones",
        "levels": "node labels of the topology domains, outermost first",
        "requiredLevel": "a gang must fit in one domain of this level",
        "preferredLevel": "a gang prefers one domain of this level",
        "deviceOrder": "order a node's devices by interconnect before DynamicResources allocates",
    },
    "DeviceFragmentation": {
        "window": "pods (the most recent to enter the queue) whose shapes make the learned request mix",
        "scale": "thousandths of a device that count as a full score difference at least (min-max floor)",
        "strand": "percent weight of the free devices a node's cpu/memory left could not serve at the mix's ratio",
        "multiDevice": "percent of the score kept for a pod asking several devices in one request on a node "
        "GpuTopology models (there interconnect quality decides)",
        "scarcity": "percent weight of taking device capacity that pending pods of another request key need "
        "(their demand at or above the free capacity they match); 0: off",
    },
}


def _format_duration(seconds: float) -> str:
    return f"{seconds:g}s"


def plugin_args(spec: PluginSpec) -> list[ArgDoc]:
    """The args of one plugin with the defaults its code applies, in a stable order."""
    notes = _NOTES.get(spec.name, {})
    out = [ArgDoc(k, v, notes.get(k, "")) for k, v in spec.default_args.items()]
    seen = {a.name for a in out}
    if spec.arg_docs is not None:
        out += [dataclasses.replace(a, note=notes.get(a.name, "")) for a in spec.arg_docs() if a.name not in seen]
    seen = {a.name for a in out}
    # Args named in the notes that the spec's defaults do not list (accepted without a default).
    out += [ArgDoc(k, NO_DEFAULT, n) for k, n in notes.items() if k not in seen]
    return out


_TOP_NOTES = {
    "apiVersion": f"`{API_VERSION}`",
    "kind": f"`{KIND}`",
    "podInitialBackoffSeconds": "greater than 0",
    "podMaxBackoffSeconds": "at least podInitialBackoffSeconds",
    "percentageOfNodesToScore": "0..100; 0 = adaptive, as kube-scheduler",
    "profiles": "one per scheduler name",
    "leaderElection": "see below",
}


def _config_attr(name: str, default: Any) -> Any:
    """A module-level name of :mod:`scheduler.config.schedulerconfig` (the field tables are private there)."""
    from scheduler.config import schedulerconfig as config

    return getattr(config, name, default)


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def _flow(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, separators=(", ", ": "))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    registry = default_registry()
    profile = default_plugins(registry)
    weights = {r.name: r.weight for r in profile.get("score", ())}
    enabled_at: dict[str, list[str]] = {}
    for point in POINTS:
        for r in profile.get(point, ()):
            enabled_at.setdefault(r.name, []).append(point)
    defaults = {f.name: f.default for f in dataclasses.fields(SchedulerConfig) if f.name != "profiles"}

    lines: list[str] = []
    w = lines.append
    w("# Configuration reference")
    w("")
    w("<!-- Generated by `python -m scheduler.config.configref > docs/configuration.md` from the plugin registry,")
    w("     the default profile and the plugins' own defaults. Do not edit by hand: tests/test_docs.py fails")
    w("     when this file and the generator's output differ. -->")
    w("")
    w(f"dra-scheduler reads a `{KIND}` (`{API_VERSION}`), the format of kube-scheduler's `--config`:")
    w("")
    w("* `dra-scheduler run --config FILE`, or `--config-map NAMESPACE/NAME` (a ConfigMap holding it under")
    w(f"  `{CONFIGMAP_KEY}`; the running scheduler reloads it on change, an invalid change is rejected with an")
    w("  Event and the old configuration keeps running);")
    w("* `dra-scheduler simulate --config FILE ...`;")
    w("* the Helm chart renders it from its values (`profiles`, `weights`, `pluginConfig`:")
    w("  [charts/dra-scheduler/values.yaml](../charts/dra-scheduler/values.yaml)); the kustomize manifests hold")
    w("  it in [manifests/configmap.yaml](../manifests/configmap.yaml).")
    w("")
    w("Check a file before you use it: `dra-scheduler check-config FILE` prints every error with its field")
    w("path and exits 1. Unknown fields are errors, never ignored.")
    w("")
    w("## Top-level fields")
    w("")
    w("| field | default | |")
    w("|---|---|---|")
    for f in _config_attr("_TOP_FIELDS", ()):
        snake = _snake(f)
        if f in ("apiVersion", "kind"):
            default = "required"
        elif f == "profiles":
            default = "one profile named `dra-scheduler`"
        elif snake in defaults and defaults[snake] is not None:
            default = f"`{_flow(defaults[snake])}`"
        else:
            default = "-"
        w(f"| `{f}` | {default} | {_cell(_TOP_NOTES.get(f, ''))} |")
    w("")
    unsupported = ", ".join(f"`{f}`" for f in _config_attr("_UNSUPPORTED_TOP", ()))
    if unsupported:
        w(f"kube-scheduler fields that are refused with \"field not supported by dra-scheduler\": {unsupported}.")
        w("")
    le_fields: Mapping[str, str] = _config_attr("_LEADER_ELECTION_FIELDS", {})
    le_class = _config_attr("LeaderElectionConfig", None)
    if le_fields and le_class is not None:
        le_defaults = {f.name: f.default for f in dataclasses.fields(le_class)}
        w("### leaderElection")
        w("")
        w("kube-scheduler's `LeaderElectionConfiguration`; durations are Go duration strings. The defaults")
        w("apply to the fields a `leaderElection` block leaves out. A field set here overrides the default of")
        w("the matching `dra-scheduler run` flag; a flag given explicitly wins.")
        w("")
        w("| field | default |")
        w("|---|---|")
        for key, attr in le_fields.items():
            d = le_defaults.get(attr, NO_DEFAULT)
            if d is NO_DEFAULT or d is dataclasses.MISSING:
                shown = "-"
            elif isinstance(d, float):
                shown = f"`{_format_duration(d)}`"
            else:
                shown = f"`{_flow(d)}`"
            w(f"| `{key}` | {shown} |")
        w("")
    w("## Profile fields")
    w("")
    w("| field | |")
    w("|---|---|")
    w("| `schedulerName` | pods with this `spec.schedulerName` are scheduled by the profile; unique |")
    w("| `plugins` | per extension point, `enabled` (name, score `weight`) and `disabled` (name or `*`) |")
    w("| `pluginConfig` | `[{name, args}]`: args of a plugin, merged over its defaults (below) |")
    w("| `percentageOfNodesToScore` | overrides the top-level value for this profile |")
    w("")
    w(f"Extension points: {', '.join(f'`{p}`' for p in (MULTI_POINT, *POINTS))}. As in kube-scheduler, an")
    w("enabled default plugin keeps its place (a new weight replaces the default), other enabled plugins")
    w("are appended, `multiPoint` enables a plugin at every point it implements, `queueSort` must be the")
    w(f"same in every profile. Score weights are integers in 1..{MAX_WEIGHT}.")
    w("")
    w("## The default profile")
    w("")
    w("Plugins in the order they run at each extension point (kube-scheduler 1.37.2's defaults plus")
    w("UnsupportedFields, GpuTopology and DeviceFragmentation); score weights in brackets.")
    w("")
    w("| extension point | plugins |")
    w("|---|---|")
    for point in POINTS:
        refs = profile.get(point, ())
        names = ", ".join(f"{r.name} ({r.weight})" if point == "score" else r.name for r in refs)
        w(f"| `{point}` | {names or '-'} |")
    w("")
    w("### kube-scheduler's scoring, without the device placement of dra-scheduler")
    w("")
    w("DeviceFragmentation scores 0 on every node when no pending or recent pod asks for DRA devices, so a")
    w("cluster without devices is scored exactly as by kube-scheduler 1.37.2. To turn off the fragmentation-aware")
    w("placement on a GPU cluster too (kube-scheduler's node scoring, upstream device order), disable it and")
    w("GpuTopology; `dra-scheduler check-config` validates the file:")
    w("")
    w("```yaml")
    w(f"apiVersion: {API_VERSION}")
    w(f"kind: {KIND}")
    w("profiles:")
    w("- schedulerName: dra-scheduler")
    w("  plugins:")
    w("    multiPoint:")
    w("      disabled: [{name: DeviceFragmentation}, {name: GpuTopology}]")
    w("```")
    w("")
    w("## Plugins")
    w("")
    w("| plugin | implements | enabled by default at | default weight |")
    w("|---|---|---|---|")
    for name, spec in registry.items():
        implements = ", ".join(p for p in POINTS if p in spec.points)
        at = ", ".join(enabled_at.get(name, [])) or "not enabled"
        weight = str(weights[name]) if name in weights else "-"
        w(f"| [{name}](#{name.lower()}) | {implements} | {at} | {weight} |")
    w("")
    for name, spec in registry.items():
        w(f"### {name}")
        w("")
        upstream = _UPSTREAM.get(name)
        origin = (
            f"kube-scheduler 1.37.2 `pkg/scheduler/framework/plugins/{upstream}`"
            if upstream
            else "dra-scheduler's own plugin"
        )
        w(f"Source: {origin}. Implements {', '.join(f'`{p}`' for p in POINTS if p in spec.points)}.")
        if name in weights:
            w(f"Default score weight: {weights[name]}.")
        w("")
        args = plugin_args(spec)
        if not args:
            w("No args.")
            w("")
            continue
        w("| arg | default | |")
        w("|---|---|---|")
        for a in args:
            default = "none" if a.default is NO_DEFAULT else f"`{_flow(a.default)}`"
            w(f"| `{a.name}` | {_cell(default)} | {_cell(a.note)} |")
        w("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
