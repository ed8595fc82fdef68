"""The direction of dependencies: nothing under scheduler/ imports plugins/ (ARCHITECTURE.md §2, issue #11).

The engine reaches plugins only through the framework's extension points and the registry entry points
(``scheduler.config.registry``); plugins import the engine freely. Two checks:

* dynamic: a fresh interpreter imports every module of the ``scheduler`` package and finds no ``plugins``
  module loaded afterwards (an import inside a function that runs at import time counts too);
* static: no ``import plugins...`` / ``from plugins... import`` anywhere in scheduler/ (module level or inside
  a function), and no ``importlib.import_module("plugins...")`` / ``__import__("plugins...")`` of a literal.

Then the way plugins do reach the engine: the ``dra_scheduler.registries`` entry points (the in-tree one of
pyproject.toml, an out-of-tree one, the errors when none or a clashing one is installed).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from scheduler.cli import main as cli_main
from scheduler.config import registry as registry_mod
from scheduler.config.registry import (
    ENTRY_POINT_GROUP,
    IN_TREE,
    PluginSpec,
    Registry,
    RegistryError,
    default_profile,
    default_registry,
    no_args,
)
from scheduler.config.schedulerconfig import default_plugins, parse_config

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "scheduler"

_IMPORT_ALL = """
import json, pkgutil, sys, importlib
import scheduler
def plugin_modules():
    return {m for m in sys.modules if m == "plugins" or m.startswith("plugins.")}
failed, first_loaded_by = {}, {}
for info in pkgutil.walk_packages(scheduler.__path__, "scheduler."):
    if info.name == "scheduler.__main__":
        continue  # runs the CLI when imported
    before = plugin_modules()
    try:
        importlib.import_module(info.name)
    except Exception as e:  # reported, so a broken module does not pass by importing nothing
        failed[info.name] = repr(e)
    if plugin_modules() - before:
        first_loaded_by[info.name] = sorted(plugin_modules() - before)[:3]
print(json.dumps({"loaded": first_loaded_by, "all": sorted(plugin_modules()), "failed": failed}))
"""


def _is_plugins(name: str | None) -> bool:
    return name is not None and (name == "plugins" or name.startswith("plugins."))


def test_importing_the_engine_loads_no_plugin() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["failed"] == {}
    # engine module -> (the first few of) the plugin modules its import loaded
    assert out["loaded"] == {}, "importing scheduler/ loaded plugin modules"
    assert out["all"] == []


def _plugin_references(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: what`` for every import of plugins/ and every importlib call on a 'plugins.' literal."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(root)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{rel}:{node.lineno}: import {a.name}" for a in node.names if _is_plugins(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_plugins(node.module):
                found.append(f"{rel}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__", "find_spec") and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and _is_plugins(a.value) for a in node.args
            ):
                found.append(f"{rel}:{node.lineno}: {name}(plugins...)")
    return found


def test_no_engine_module_names_a_plugin() -> None:
    found = [ref for path in sorted(ENGINE.rglob("*.py")) for ref in _plugin_references(path)]
    assert found == [], "scheduler/ must not import plugins/:\n" + "\n".join(found)


def test_the_static_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    src = (
        "import importlib\n"
        "def f():\n"
        "    from plugins.dra import plugin\n"
        "    import plugins.topology\n"
        "    return importlib.import_module('plugins.nodename')\n"
    )
    tree_file = tmp_path / "scheduler" / "x.py"
    tree_file.parent.mkdir()
    tree_file.write_text(src)
    assert [r.split(": ", 1)[1] for r in _plugin_references(tree_file, tmp_path)] == [
        "from plugins.dra import ...",
        "import plugins.topology",
        "import_module(plugins...)",
    ]


# --- the registry reaches the engine through entry points ---------------------------------------------------


class _OutOfTree:
    """A plugin of an out-of-tree package (a PreFilter that lets every pod pass)."""

    name = "OutOfTreeExample"

    def pre_filter(self, state: Any, pod: Any) -> Any:
        from scheduler.framework.interface import Status

        return Status.ok()


def out_of_tree_registry() -> Registry:
    """What an out-of-tree package's ``dra_scheduler.registries`` entry point returns."""
    spec = PluginSpec(_OutOfTree.name, lambda args: _OutOfTree(), frozenset({"preFilter"}), validate_args=no_args)
    return Registry(specs={spec.name: spec})


def duplicate_registry() -> Registry:
    from plugins.nodename import SPEC

    return Registry(specs={"NodeName": replace(SPEC)})


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[metadata.EntryPoint]]:
    """The registry entry points the engine sees: the installed ones, editable by the test."""
    installed = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    eps = list(installed)
    monkeypatch.setattr(registry_mod.metadata, "entry_points", lambda group: [e for e in eps if e.group == group])
    registry_mod.installed_registries.cache_clear()
    yield eps
    registry_mod.installed_registries.cache_clear()


def _ep(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_the_in_tree_registry_is_an_installed_entry_point() -> None:
    """``make install`` (pip install -e .) writes the entry point of pyproject.toml into the metadata."""
    [ep] = [e for e in metadata.entry_points(group=ENTRY_POINT_GROUP) if e.name == IN_TREE]
    assert ep.value == "plugins.registry:in_tree"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"][ENTRY_POINT_GROUP] == {IN_TREE: ep.value}
    from plugins import registry as in_tree

    assert list(default_registry()) == list(in_tree.in_tree_registry())
    assert default_profile() is in_tree.DEFAULT_PLUGINS
    from scheduler.config import schedulerconfig as config

    assert config.DEFAULT_PLUGINS is in_tree.DEFAULT_PLUGINS


def test_an_out_of_tree_entry_point_adds_plugins(entry_points: list[metadata.EntryPoint]) -> None:
    entry_points.append(_ep("example", "tests.test_layering:out_of_tree_registry"))
    reg = default_registry()
    assert list(reg)[-1] == "OutOfTreeExample" and "DynamicResources" in reg
    head = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    cfg = parse_config({**head, "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "OutOfTreeExample"}]}}}]})
    assert cfg.profiles[0].plugins["preFilter"][-1].name == "OutOfTreeExample"
    # not in the default profile: the in-tree registry alone provides it
    assert "OutOfTreeExample" not in {r.name for refs in default_plugins().values() for r in refs}


def test_a_plugin_registered_twice_is_an_error(entry_points: list[metadata.EntryPoint]) -> None:
    entry_points.append(_ep("dup", "tests.test_layering:duplicate_registry"))
    with pytest.raises(RegistryError, match="'NodeName' is registered twice"):
        default_registry()


def test_an_entry_point_must_give_a_registry(entry_points: list[metadata.EntryPoint]) -> None:
    entry_points.append(_ep("bad", "tests.test_layering:_OutOfTree"))
    with pytest.raises(RegistryError, match=r"must be a scheduler\.config\.registry\.Registry"):
        default_registry()


def test_no_installed_registry_says_how_to_install(
    entry_points: list[metadata.EntryPoint], capsys: pytest.CaptureFixture[str]
) -> None:
    entry_points.clear()
    with pytest.raises(RegistryError, match=r"dra-scheduler is not installed.*pip install -e \."):
        default_registry()
    assert cli_main(["check-config", str(ROOT / "manifests" / "configmap.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dra-scheduler: no plugin registry found") and "pip install -e ." in err
