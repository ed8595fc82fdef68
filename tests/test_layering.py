"""The direction of dependencies: nothing under scheduler/ imports plugins/ (ARCHITECTURE.md §2, issue #11).

The engine reaches plugins only through the framework's extension points and the registry entry points
(``scheduler.config.registry``); plugins import the engine freely. Two checks:

* dynamic: a fresh interpreter imports every module of the ``scheduler`` package and finds no ``plugins``
  module loaded afterwards (an import inside a function that runs at import time counts too);
* static: no ``import plugins...`` / ``from plugins... import`` anywhere in scheduler/ (module level or inside
  a function), and no ``importlib.import_module("plugins...")`` / ``__import__("plugins...")`` of a literal.

Then the way plugins do reach the engine: the ``dra_scheduler.registries`` entry points (the in-tree one of
pyproject.toml, an out-of-tree one, the errors when none or a clashing one is installed). Last, the house rules of
issue 26 (docs/architecture.md): rooms import only downwards, no import circle, no module over 1,000 lines unless
its docstring says why it is kept whole.
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


# --- rooms and circles (issue 26) ----------------------------------------------------------------------------
#
# The rule: every import statement of a module is an edge to the module it names, wherever it stands (module
# level, inside a function, under ``if TYPE_CHECKING``): a lazy or type-only import still says that one module
# needs the other, and hiding it in a function does not break a circle. ``from pkg import name`` is an edge to
# ``pkg.name`` when that is a module, else to ``pkg``. Two checks over scheduler/ and plugins/:
#
# * rooms: a module imports only modules of its own room or of a room below it (ROOMS); plugins/ imports only the
#   rooms PLUGINS_MAY_IMPORT. docs/architecture.md draws the same order.
# * circles: the import graph has no strongly connected component of more than one module.
#
# KNOWN_UPWARD and KNOWN_CIRCLES are the debt left when issue 26 was worked on: the tests fail when a new one
# appears and when a listed one is gone (then remove it from the list). Both are empty now: any upward import and
# any circle fails the suite.

ROOMS = {"api": 0, "config": 1, "cache": 2, "framework": 3, "gang": 4, "loop": 5, "simulate": 6, "kube": 6, "cli": 7}
PLUGINS_MAY_IMPORT = frozenset({"api", "config", "cache", "framework"})
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()
KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()


def _modules(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for top in ("scheduler", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of scheduler/ and plugins/ it imports (every import statement, see above)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join([*pkg, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def room_of(mod: str) -> str:
    """``scheduler.<room>.…`` -> room; the package's own modules (cli.py, __main__.py) are the ``cli`` room."""
    if mod == "plugins" or mod.startswith("plugins."):
        return "plugins"
    parts = mod.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ROOMS) else "cli"


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    found = set()
    for a, targets in graph.items():
        for b in targets:
            ra, rb = room_of(a), room_of(b)
            if ra == rb:
                continue
            if ra == "plugins":
                ok = rb in PLUGINS_MAY_IMPORT
            else:
                ok = rb != "plugins" and ROOMS[rb] < ROOMS[ra]
            if not ok:
                found.add((a, b))
    return found


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.add(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.add(frozenset(comp))
    return found


def test_every_engine_module_is_in_a_room() -> None:
    loose = [m for m in _modules(ROOT) if m.startswith("scheduler.") and room_of(m) == "cli"]
    assert sorted(loose) == ["scheduler.__main__", "scheduler.cli"], "a module of scheduler/ outside the rooms"


def test_rooms_import_only_downwards() -> None:
    found = upward_imports(import_graph())
    assert found - KNOWN_UPWARD == set(), "imports up the rooms (docs/architecture.md)"
    assert KNOWN_UPWARD - found == set(), "gone: remove them from KNOWN_UPWARD"


def test_no_import_circles() -> None:
    found = circles(import_graph())
    assert found - KNOWN_CIRCLES == set(), "import circles (every import statement is an edge)"
    assert KNOWN_CIRCLES - found == set(), "gone: remove them from KNOWN_CIRCLES"


def test_the_checks_see_a_circle_through_a_function_and_an_upward_import(tmp_path: Path) -> None:
    files = {
        "scheduler/__init__.py": "",
        "scheduler/api/__init__.py": "",
        "scheduler/api/a.py": "def f():\n    from scheduler.loop import b\n",
        "scheduler/loop/__init__.py": "",
        "scheduler/loop/b.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scheduler.api.a import f\n"
        ),
        "plugins/__init__.py": "",
        "plugins/p.py": "from scheduler.loop import b\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert circles(graph) == {frozenset({"scheduler.api.a", "scheduler.loop.b"})}
    assert upward_imports(graph) == {("scheduler.api.a", "scheduler.loop.b"), ("plugins.p", "scheduler.loop.b")}


# --- module size (issue 26) ----------------------------------------------------------------------------------
#
# A module of scheduler/ or plugins/ longer than MAX_MODULE_LINES lines is split along its seams, unless its
# docstring says why it stays whole: a paragraph starting with KEPT_WHOLE and giving the reason (at least a
# sentence). The marker is only for modules over the limit: one that shrank below it must drop the paragraph.

MAX_MODULE_LINES = 1000
KEPT_WHOLE = "Kept whole:"
_MIN_REASON = 40  # characters of reason after the marker


def _kept_whole_reason(path: Path) -> str | None:
    """The reason after KEPT_WHOLE in the module docstring (up to the end of its paragraph), or None."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    at = doc.find(KEPT_WHOLE)
    if at < 0:
        return None
    return " ".join(doc[at + len(KEPT_WHOLE) :].split("\n\n", 1)[0].split())


def module_size_problems(root: Path = ROOT) -> list[str]:
    """``module: what is wrong`` for every module over the limit without a reason, and every module that gives a
    reason while it is within the limit."""
    problems = []
    for mod, path in _modules(root).items():
        n = len(path.read_text().splitlines())
        reason = _kept_whole_reason(path)
        if n > MAX_MODULE_LINES and (reason is None or len(reason) < _MIN_REASON):
            problems.append(f"{mod}: {n} lines, over {MAX_MODULE_LINES}: split it or say why ({KEPT_WHOLE} ...)")
        elif n <= MAX_MODULE_LINES and reason is not None:
            problems.append(f"{mod}: {n} lines says {KEPT_WHOLE!r} but is within {MAX_MODULE_LINES}: drop it")
    return problems


def test_no_module_over_the_size_limit_unless_its_docstring_says_why() -> None:
    assert module_size_problems() == []


def test_the_size_check_sees_a_long_module_and_a_stale_reason(tmp_path: Path) -> None:
    body = "x = 1\n" * MAX_MODULE_LINES
    reason = f"{KEPT_WHOLE} one grammar, one recursive-descent parser whose parts call each other.\n"
    files = {
        "scheduler/__init__.py": "",
        "scheduler/api/__init__.py": "",
        "scheduler/api/long.py": '"""Long, no reason."""\n' + body,
        "scheduler/api/why.py": f'"""Long.\n\n{reason}"""\n' + body,
        "scheduler/api/short_why.py": f'"""Long.\n\n{KEPT_WHOLE} because.\n"""\n' + body,
        "scheduler/api/stale.py": f'"""Short.\n\n{reason}"""\nx = 1\n',
        "plugins/__init__.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert sorted(p.split(":")[0] for p in module_size_problems(tmp_path)) == [
        "scheduler.api.long",
        "scheduler.api.short_why",
        "scheduler.api.stale",
    ]
