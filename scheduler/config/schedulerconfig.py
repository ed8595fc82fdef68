"""Scheduler configuration: a `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration subset.

(Types below are fixed; parsing and validation are implemented further down.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from scheduler.api.goduration import parse_go_duration
from scheduler.config.registry import EXTENSION_POINTS, PluginRef, PluginSpec, default_registry
from scheduler.config.registry import default_profile as installed_default_profile

DEFAULT_SCHEDULER_NAME = "dra-scheduler"


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str
    plugins: Mapping[str, tuple[PluginRef, ...]]  # extension point -> enabled plugins, in order
    plugin_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    profiles: tuple[Profile, ...]
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    percentage_of_nodes_to_score: int = 0  # 0 = adaptive, as kube-scheduler
    leader_election: LeaderElectionConfig | None = None  # the file's ``leaderElection`` block, if any


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """component-base ``LeaderElectionConfiguration`` (kube-scheduler's defaults, our Lease name). ``named``:
    the fields the file set; only those override ``run``'s flags that were not given explicitly."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "dra-scheduler"
    resource_namespace: str = "kube-system"
    named: frozenset[str] = frozenset()


def default_profile() -> Mapping[str, tuple[PluginRef, ...]]:
    """The default profile: every extension point with its enabled plugins in order, score weights included
    (kube-scheduler 1.37.2's ``default_plugins.go`` plus ours). It lives with the in-tree plugins
    (``plugins/registry.py``) and is found through the registry entry points, like the plugins."""
    return installed_default_profile()


# ``DEFAULT_PLUGINS``: the default profile, resolved on first use (PEP 562 module ``__getattr__``; hidden
# from the type checker, which sees only the declaration, so that any other missing name is still an error).
if TYPE_CHECKING:
    DEFAULT_PLUGINS: Mapping[str, tuple[PluginRef, ...]]
else:

    def __getattr__(name: str) -> Any:
        if name == "DEFAULT_PLUGINS":
            return default_profile()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_plugins(registry: Mapping[str, PluginSpec] | None = None) -> dict[str, tuple[PluginRef, ...]]:
    """The default profile restricted to the points each registered plugin implements."""
    if registry is None:
        registry = default_registry()
    return {
        point: tuple(r for r in refs if r.name in registry and point in registry[r.name].points)
        for point, refs in default_profile().items()
    }


def default_config() -> SchedulerConfig:
    return SchedulerConfig(profiles=(Profile(DEFAULT_SCHEDULER_NAME, default_plugins()),))


# --- parsing and validation ------------------------------------------------------------------------------

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
CONFIGMAP_KEY = "scheduler-config.yaml"
MULTI_POINT = "multiPoint"
MAX_WEIGHT = 100

# Extension points a profile may configure, in kube-scheduler's order (multiPoint expands to the rest).
POINTS: tuple[str, ...] = EXTENSION_POINTS

_TOP_FIELDS = ("apiVersion", "kind", "profiles", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
               "percentageOfNodesToScore", "leaderElection")
# KubeSchedulerConfiguration fields this scheduler does not implement: named as such in the error.
_UNSUPPORTED_TOP = ("parallelism", "clientConnection", "healthzBindAddress",
                    "metricsBindAddress", "enableProfiling", "enableContentionProfiling", "extenders",
                    "delayCacheUntilActive")
_PROFILE_FIELDS = ("schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore")
_UNSUPPORTED_POINTS = ("postBind", "preBindPreFlight")


class ConfigError(ValueError):
    """An invalid configuration; ``errors`` holds every problem as ``field.path: message``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = list(errors)


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _unknown_fields(
    obj: Mapping[str, Any],
    allowed: Sequence[str],
    path: str,
    errs: list[str],
    unsupported: Sequence[str] = (),
) -> None:
    for k in obj:
        if k in allowed:
            continue
        p = f"{path}.{k}" if path else str(k)
        if k in unsupported:
            errs.append(f"{p}: field not supported by dra-scheduler")
        else:
            errs.append(f"{p}: unknown field")


@dataclass(slots=True)
class _Entry:
    name: str
    weight: int  # 0 = not given


@dataclass(slots=True)
class _PluginSet:
    enabled: list[_Entry] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


def _parse_plugin_set(
    raw: Any, path: str, point: str, registry: Mapping[str, PluginSpec], errs: list[str]
) -> _PluginSet:
    out = _PluginSet()
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        errs.append(f"{path}: must be an object with enabled/disabled lists")
        return out
    _unknown_fields(raw, ("enabled", "disabled"), path, errs)
    for kind in ("enabled", "disabled"):
        items = raw.get(kind)
        if items is None:
            continue
        lp = f"{path}.{kind}"
        if not isinstance(items, list):
            errs.append(f"{lp}: must be a list")
            continue
        seen: set[str] = set()
        for i, item in enumerate(items):
            ip = f"{lp}[{i}]"
            if not isinstance(item, Mapping):
                errs.append(f"{ip}: must be an object with a name")
                continue
            _unknown_fields(item, ("name", "weight"), ip, errs)
            name = item.get("name")
            if not isinstance(name, str) or not name:
                errs.append(f"{ip}.name: required")
                continue
            valid = True
            if kind == "disabled" and name == "*":
                pass
            elif name not in registry:
                errs.append(f"{ip}.name: unknown plugin {name!r}")
                valid = False
            elif point != MULTI_POINT and point not in registry[name].points:
                errs.append(f"{ip}.name: plugin {name!r} does not implement {point}")
                valid = False
            weight = 0
            if "weight" in item:
                w = item["weight"]
                wp = f"{ip}.weight"
                # A bad weight is reported; the plugin stays listed (no cascade of follow-on errors).
                if kind == "disabled":
                    errs.append(f"{wp}: a disabled plugin has no weight")
                elif point not in ("score", MULTI_POINT):
                    errs.append(f"{wp}: only score plugins have a weight")
                elif point == MULTI_POINT and name in registry and "score" not in registry[name].points:
                    errs.append(f"{wp}: only score plugins have a weight ({name!r} does not implement score)")
                elif not _is_int(w) or not 1 <= w <= MAX_WEIGHT:
                    errs.append(f"{wp}: must be in 1..{MAX_WEIGHT}")
                else:
                    weight = w
            if name in seen and name != "*":
                errs.append(f"{ip}.name: plugin {name!r} is listed more than once")
                continue
            seen.add(name)
            if not valid:
                continue
            if kind == "enabled":
                out.enabled.append(_Entry(name, weight))
            else:
                out.disabled.append(name)
    return out


def _merge(defaults: Sequence[PluginRef], custom: _PluginSet) -> list[_Entry]:
    """kube-scheduler's ``mergePluginSet``: defaults minus ``disabled`` (``*`` = all), in order; a default
    that is enabled again keeps its place (with the new weight when one is given); other enabled plugins
    are appended in order."""
    disabled = set(custom.disabled)
    enabled = {e.name: e for e in custom.enabled}
    out: list[_Entry] = []
    replaced: set[str] = set()
    if "*" not in disabled:
        for d in defaults:
            if d.name in disabled:
                continue
            e = enabled.get(d.name)
            if e is not None:
                replaced.add(d.name)
                out.append(_Entry(d.name, e.weight or d.weight))
            else:
                out.append(_Entry(d.name, d.weight))
    out += [e for e in custom.enabled if e.name not in replaced]
    return out


def _resolve_plugins(
    raw: Any, path: str, registry: Mapping[str, PluginSpec], errs: list[str]
) -> dict[str, tuple[PluginRef, ...]]:
    sets: dict[str, _PluginSet] = {}
    if raw is not None and not isinstance(raw, Mapping):
        errs.append(f"{path}: must be an object keyed by extension point")
        raw = None
    if raw is not None:
        _unknown_fields(raw, (*POINTS, MULTI_POINT), path, errs, _UNSUPPORTED_POINTS)
        for point in (MULTI_POINT, *POINTS):
            if point in raw:
                sets[point] = _parse_plugin_set(raw[point], f"{path}.{point}", point, registry, errs)
    multi = sets.get(MULTI_POINT, _PluginSet())
    multi_disabled = set(multi.disabled)
    result: dict[str, tuple[PluginRef, ...]] = {}
    profile = default_profile()
    for point in POINTS:
        # multiPoint.disabled removes default plugins at every point ("*": all of them).
        # The registry is the authority: a default plugin it lacks, or lists without this point, is skipped.
        defaults = [
            r
            for r in profile.get(point, ())
            if r.name in registry
            and point in registry[r.name].points
            and "*" not in multi_disabled
            and r.name not in multi_disabled
        ]
        custom = sets.get(point, _PluginSet())
        merged = _merge(defaults, custom)
        # multiPoint.enabled: every point the plugin implements, unless that point disables it (or "*");
        # an explicit setting at the point wins, a default keeps its place (with the multiPoint weight).
        if "*" not in custom.disabled:
            explicit = {e.name for e in custom.enabled}
            for m in multi.enabled:
                if point not in registry[m.name].points or m.name in custom.disabled:
                    continue
                present = next((e for e in merged if e.name == m.name), None)
                if present is None:
                    merged.append(_Entry(m.name, m.weight if point == "score" else 0))
                elif point == "score" and m.name not in explicit and m.weight:
                    present.weight = m.weight
        # Names are unique here: duplicates in one list are rejected while parsing it.
        result[point] = tuple(PluginRef(e.name, e.weight if point == "score" else 0) for e in merged)
    return result


def _parse_profile(
    raw: Any, path: str, registry: Mapping[str, PluginSpec], errs: list[str]
) -> Profile | None:
    if not isinstance(raw, Mapping):
        errs.append(f"{path}: must be an object")
        return None
    _unknown_fields(raw, _PROFILE_FIELDS, path, errs)
    name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not isinstance(name, str) or not name:
        errs.append(f"{path}.schedulerName: must be a non-empty string")
        name = ""
    pct: int | None = None
    if raw.get("percentageOfNodesToScore") is not None:
        v = raw["percentageOfNodesToScore"]
        if not _is_int(v) or not 0 <= v <= 100:
            errs.append(f"{path}.percentageOfNodesToScore: must be an integer in 0..100")
        else:
            pct = v
    n_errs = len(errs)
    plugins = _resolve_plugins(raw.get("plugins"), f"{path}.plugins", registry, errs)
    # Count checks only when the plugin lists themselves were valid (an unknown or misplaced plugin is
    # already reported; "got 0" on top of it would only repeat it).
    if len(errs) == n_errs:
        n_sort = len(plugins["queueSort"])
        if n_sort != 1:
            errs.append(f"{path}.plugins.queueSort: exactly one plugin must be enabled, got {n_sort}")
        if not plugins["bind"]:
            errs.append(f"{path}.plugins.bind: at least one bind plugin must be enabled")

    args: dict[str, Mapping[str, Any]] = {}
    pc = raw.get("pluginConfig")
    if pc is not None and not isinstance(pc, list):
        errs.append(f"{path}.pluginConfig: must be a list")
        pc = None
    for j, item in enumerate(pc or ()):
        ip = f"{path}.pluginConfig[{j}]"
        if not isinstance(item, Mapping):
            errs.append(f"{ip}: must be an object with name and args")
            continue
        _unknown_fields(item, ("name", "args"), ip, errs)
        pname = item.get("name")
        if not isinstance(pname, str) or not pname:
            errs.append(f"{ip}.name: required")
            continue
        spec = registry.get(pname)
        if spec is None:
            errs.append(f"{ip}.name: unknown plugin {pname!r}")
            continue
        if pname in args:
            errs.append(f"{ip}.name: duplicate pluginConfig for plugin {pname!r}")
            continue
        a = item.get("args")
        if a is None:
            a = {}
        if not isinstance(a, Mapping):
            errs.append(f"{ip}.args: must be an object")
            continue
        validate = spec.validate_args or _no_args
        errs.extend(validate(a, f"{ip}.args"))
        args[pname] = {**spec.default_args, **a}
    enabled = {r.name for refs in plugins.values() for r in refs}
    for pname in sorted(enabled):
        spec = registry.get(pname)
        if pname not in args and spec is not None and spec.default_args:
            args[pname] = dict(spec.default_args)
    return Profile(name, plugins, args, pct)


def _no_args(args: Mapping[str, Any], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field (plugin takes no args)" for k in args]


def parse_config(doc: Mapping[str, Any], registry: Mapping[str, PluginSpec] | None = None) -> SchedulerConfig:
    """Validate and merge a KubeSchedulerConfiguration document; raise :class:`ConfigError` listing every
    problem with its field path."""
    if registry is None:
        registry = default_registry()
    errs: list[str] = []
    if not isinstance(doc, Mapping):
        raise ConfigError(["config: must be a YAML mapping (a KubeSchedulerConfiguration)"])
    _unknown_fields(doc, _TOP_FIELDS, "", errs, _UNSUPPORTED_TOP)
    api = doc.get("apiVersion")
    if api is None:
        errs.append(f"apiVersion: required, must be {API_VERSION!r}")
    elif api != API_VERSION:
        errs.append(f"apiVersion: unsupported value {api!r}, must be {API_VERSION!r}")
    kind = doc.get("kind")
    if kind is None:
        errs.append(f"kind: required, must be {KIND!r}")
    elif kind != KIND:
        errs.append(f"kind: unsupported value {kind!r}, must be {KIND!r}")

    initial, maximum = 1.0, 10.0
    for key in ("podInitialBackoffSeconds", "podMaxBackoffSeconds"):
        v = doc.get(key)
        if v is None:
            continue
        if _is_number(v) and not math.isfinite(v):
            errs.append(f"{key}: Invalid value: {v}: must be a finite number of seconds")
        elif not _is_number(v) or v <= 0:
            errs.append(f"{key}: must be greater than 0")
        elif key == "podInitialBackoffSeconds":
            initial = float(v)
        else:
            maximum = float(v)
    if initial > maximum:
        errs.append("podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds")
    pct = 0
    if doc.get("percentageOfNodesToScore") is not None:
        v = doc["percentageOfNodesToScore"]
        if not _is_int(v) or not 0 <= v <= 100:
            errs.append("percentageOfNodesToScore: must be an integer in 0..100")
        else:
            pct = v

    raw_profiles = doc.get("profiles")
    if raw_profiles is None or raw_profiles == []:
        raw_profiles = [{}]
    profiles: list[Profile] = []
    if not isinstance(raw_profiles, list):
        errs.append("profiles: must be a list")
        raw_profiles = []
    names: dict[str, int] = {}
    first_sort: tuple[PluginRef, ...] | None = None
    for i, rp in enumerate(raw_profiles):
        path = f"profiles[{i}]"
        prof = _parse_profile(rp, path, registry, errs)
        if prof is None:
            continue
        if prof.scheduler_name:
            if prof.scheduler_name in names:
                errs.append(
                    f"{path}.schedulerName: duplicate scheduler name {prof.scheduler_name!r} "
                    f"(also profiles[{names[prof.scheduler_name]}])"
                )
            else:
                names[prof.scheduler_name] = i
        sort = prof.plugins["queueSort"]
        if first_sort is None:
            first_sort = sort
        elif sort != first_sort:
            errs.append(f"{path}.plugins.queueSort: queueSort must be the same for all profiles")
        profiles.append(prof)
    leader_election = _parse_leader_election(doc.get("leaderElection"), errs) if "leaderElection" in doc else None
    if errs:
        raise ConfigError(errs)
    return SchedulerConfig(tuple(profiles), initial, maximum, pct, leader_election)


# leaderElection field -> LeaderElectionConfig attribute
_LEADER_ELECTION_FIELDS = {
    "leaderElect": "leader_elect",
    "leaseDuration": "lease_duration",
    "renewDeadline": "renew_deadline",
    "retryPeriod": "retry_period",
    "resourceLock": "resource_lock",
    "resourceName": "resource_name",
    "resourceNamespace": "resource_namespace",
}


JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor

def validate_timing(
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    names: tuple[str, str, str] = ("leaseDuration", "renewDeadline", "retryPeriod"),
) -> list[str]:
    """client-go ``NewLeaderElector``'s checks (leaderelection.go v0.37.2), naming the fields as ``names``
    (config fields or flags): lease > renew deadline > retry period × 1.2, each > 0."""
    lease, renew, retry = names
    errs: list[str] = []
    if lease_duration <= renew_deadline:
        errs.append(f"{lease}: must be greater than {renew} ({lease_duration:g}s <= {renew_deadline:g}s)")
    if renew_deadline <= JITTER_FACTOR * retry_period:
        errs.append(
            f"{renew}: must be greater than {retry} × {JITTER_FACTOR:g} "
            f"({renew_deadline:g}s <= {JITTER_FACTOR * retry_period:g}s)"
        )
    for name, v in ((lease, lease_duration), (renew, renew_deadline), (retry, retry_period)):
        if not v > 0:
            errs.append(f"{name}: must be greater than zero")
    return errs


def _parse_leader_election(raw: Any, errs: list[str]) -> LeaderElectionConfig | None:
    """``leaderElection`` (component-base LeaderElectionConfiguration, defaulted as kube-scheduler does and
    validated as component-base ``ValidateLeaderElectionConfiguration`` plus client-go's
    ``NewLeaderElector`` timing checks; durations are Go duration strings, e.g. ``15s``)."""
    path = "leaderElection"
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        errs.append(f"{path}: must be a mapping")
        return None
    n = len(errs)
    _unknown_fields(raw, tuple(_LEADER_ELECTION_FIELDS), path, errs)
    values: dict[str, Any] = {}
    for key, attr in _LEADER_ELECTION_FIELDS.items():
        if key not in raw:
            continue
        v = raw[key]
        p = f"{path}.{key}"
        if key == "leaderElect":
            if not isinstance(v, bool):
                errs.append(f"{p}: must be true or false")
                continue
        elif attr.endswith(("_duration", "_deadline", "_period")):
            if not isinstance(v, str):
                errs.append(f'{p}: must be a duration string such as "15s"')
                continue
            try:
                seconds = parse_go_duration(v)
            except ValueError as e:
                errs.append(f"{p}: invalid value {v!r}: {e}")
                continue
            if not 0 < seconds < 1e9:  # also NaN
                errs.append(f"{p}: must be greater than zero")
                continue
            v = seconds
        elif not isinstance(v, str):
            errs.append(f"{p}: must be a string")
            continue
        values[attr] = v
    cfg = LeaderElectionConfig(**values, named=frozenset(values))
    if len(errs) > n or not cfg.leader_elect:
        return cfg  # upstream validates the rest only when leaderElect is on
    errs.extend(
        f"{path}.{e}" for e in validate_timing(cfg.lease_duration, cfg.renew_deadline, cfg.retry_period)
    )
    if cfg.resource_lock != "leases":
        errs.append(f'{path}.resourceLock: Unsupported value: {cfg.resource_lock!r}: supported values: "leases"')
    if not cfg.resource_name:
        errs.append(f"{path}.resourceName: Required value")
    if not cfg.resource_namespace:
        errs.append(f"{path}.resourceNamespace: Required value")
    return cfg


def _load_yaml(text: str | bytes, source: str) -> Any:
    """One YAML document, loaded with the bounds of scheduler/api/yamlload.py (aliases, depth, integer digits,
    UTF-8, duplicate keys; timestamps stay strings)."""
    from scheduler.api.yamlload import YAMLLoadError, load_documents

    try:
        docs = [d.data for d in load_documents(text, source) if d.data is not None]
    except YAMLLoadError as e:  # one document: "document 0" would be noise
        where = e.source + (f": document {e.document}" if e.document else "") + (f": {e.path}" if e.path else "")
        raise ConfigError([f"{where}: {e.message}"]) from None
    if not docs:
        raise ConfigError([f"{source}: empty document, expected a {KIND}"])
    if len(docs) > 1:
        raise ConfigError([f"{source}: expected one YAML document, found {len(docs)}"])
    return docs[0]


def config_from_document(doc: Any, registry: Mapping[str, PluginSpec] | None = None) -> SchedulerConfig:
    """A KubeSchedulerConfiguration, or a ConfigMap holding one under ``data["scheduler-config.yaml"]``."""
    if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
        data = doc.get("data")
        text = data.get(CONFIGMAP_KEY) if isinstance(data, Mapping) else None
        if data is not None and not isinstance(data, Mapping):
            raise ConfigError([f"data: must be a map of strings, not {type(data).__name__}"])
        if text is not None and not isinstance(text, str):
            raise ConfigError([f"data.{CONFIGMAP_KEY}: must be a string (the configuration as YAML text), "
                               f"not {type(text).__name__}"])
        if not isinstance(text, str):
            raise ConfigError([f"data.{CONFIGMAP_KEY}: required (the ConfigMap holds no configuration)"])
        doc = _load_yaml(text, f"data.{CONFIGMAP_KEY}")
    if not isinstance(doc, Mapping):
        raise ConfigError([f"config: must be a YAML mapping (a {KIND}), got {type(doc).__name__}"])
    return parse_config(doc, registry)


def load_config_text(text: str, registry: Mapping[str, PluginSpec] | None = None) -> SchedulerConfig:
    return config_from_document(_load_yaml(text, "config"), registry)


def load_config_file(path: str, registry: Mapping[str, PluginSpec] | None = None) -> SchedulerConfig:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError([f"{path}: cannot read: {e.strerror or e}"]) from None
    return config_from_document(_load_yaml(data, path), registry)
