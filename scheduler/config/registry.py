"""The plugin registry: every plugin the scheduler can run, by name, and the default profile.

Each :class:`PluginSpec` says which extension points the plugin implements (used by config validation to
reject a plugin enabled at a point it does not serve), builds an instance from its args, validates those
args with field paths, and may document the args whose defaults the plugin applies itself (``arg_docs``,
read by ``scheduler.config.configref``).

The engine never imports a plugin (ARCHITECTURE.md §2): the registries are found through the Python entry
point group :data:`ENTRY_POINT_GROUP`. Each entry point names a callable returning a :class:`Registry`; the
in-tree one is ``plugins.registry:in_tree`` (declared in pyproject.toml), which also carries the default
profile. An out-of-tree package adds its plugins by declaring its own entry point in that group; its plugins
are then known to the configuration (enable them with a ``KubeSchedulerConfiguration``). This is the
counterpart of upstream's out-of-tree plugins (kubernetes v1.37.2 ``cmd/kube-scheduler/app/server.go``
``WithPlugin``, merged into the in-tree registry by ``pkg/scheduler/framework/runtime/registry.go``
``Registry.Merge``, which refuses a name registered twice), without building another binary.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

ArgsValidator = Callable[[Mapping[str, Any], str], list[str]]

ENTRY_POINT_GROUP = "dra_scheduler.registries"
IN_TREE = "in-tree"  # the entry point of plugins/registry.py; loaded first, so its plugins come first

NO_DEFAULT: Any = object()  # an arg the plugin accepts without applying a default value

# The extension points a plugin may serve and a profile may configure, in kube-scheduler's order (their
# protocols are in scheduler/framework/interface.py; ``multiPoint`` expands to these).
EXTENSION_POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
)


@dataclass(frozen=True, slots=True)
class PluginRef:
    """A plugin enabled at an extension point of a profile (the default profile's entries and the parsed
    ``KubeSchedulerConfiguration``'s)."""

    name: str
    weight: int = 0  # score plugins only; 0 = default weight 1


@dataclass(frozen=True, slots=True)
class ArgDoc:
    """One documented plugin arg: its name, the default the plugin applies (or :data:`NO_DEFAULT`), a note."""

    name: str
    default: Any = NO_DEFAULT
    note: str = ""


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    factory: Callable[[Mapping[str, Any]], Any]
    points: frozenset[str]
    validate_args: ArgsValidator | None = None
    default_args: Mapping[str, Any] = field(default_factory=dict)
    # The args whose defaults the plugin applies itself (not through ``default_args``), for the reference.
    arg_docs: Callable[[], list[ArgDoc]] | None = None


def no_args(args: Mapping[str, Any], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field" for k in args]


@dataclass(frozen=True, slots=True)
class Registry:
    """What one entry point of :data:`ENTRY_POINT_GROUP` contributes: plugins by name (in the order the
    reference lists them) and, for the in-tree registry only, the default profile (extension point ->
    enabled plugins in order, with score weights)."""

    specs: Mapping[str, PluginSpec]
    default_plugins: Mapping[str, tuple[PluginRef, ...]] | None = None


class RegistryError(RuntimeError):
    pass


_NOT_INSTALLED = (
    f"no plugin registry found (Python entry point group {ENTRY_POINT_GROUP!r}): dra-scheduler is not "
    "installed. Install it: pip install -e . (or make install) in the checkout, or pip install dra-scheduler"
)


@functools.cache
def installed_registries() -> tuple[Registry, ...]:
    """Every registry declared in :data:`ENTRY_POINT_GROUP`: the in-tree one first, then the others by entry
    point name. Loaded once per process."""
    eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name != IN_TREE, e.name))
    if not eps:
        raise RegistryError(_NOT_INSTALLED)
    out: list[Registry] = []
    for ep in eps:
        obj = ep.load()
        reg = obj() if callable(obj) else obj
        if not isinstance(reg, Registry):
            raise RegistryError(
                f"entry point {ep.name!r} ({ep.value}) of group {ENTRY_POINT_GROUP!r} must be a "
                f"scheduler.config.registry.Registry or a callable returning one, got {type(reg).__name__}"
            )
        out.append(reg)
    return tuple(out)


def default_registry() -> dict[str, PluginSpec]:
    """Every installed plugin by name (a new dict per call). A name registered by two entry points is an
    error: a plugin cannot replace another silently."""
    merged: dict[str, PluginSpec] = {}
    for reg in installed_registries():
        for name, spec in reg.specs.items():
            if name in merged and merged[name] is not spec:
                raise RegistryError(f"plugin {name!r} is registered twice (entry point group {ENTRY_POINT_GROUP!r})")
            merged[name] = spec
    return merged


def default_profile() -> Mapping[str, tuple[PluginRef, ...]]:
    """The default profile (upstream ``pkg/scheduler/apis/config/v1/default_plugins.go`` plus ours), from the
    one installed registry that provides it (the in-tree one)."""
    found = [r.default_plugins for r in installed_registries() if r.default_plugins is not None]
    if not found:
        raise RegistryError(f"no registry of entry point group {ENTRY_POINT_GROUP!r} provides the default profile")
    if len(found) > 1:
        raise RegistryError(
            f"{len(found)} registries of entry point group {ENTRY_POINT_GROUP!r} provide a default profile; "
            "only the in-tree one may"
        )
    return found[0]
