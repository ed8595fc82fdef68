"""Start-up work kept off the first pod's path (issue #16: first bind, CPU per 1,000 pods).

Each case runs a fresh interpreter, since what is imported is per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from plugins.dra.cel import available_engines
from plugins.dra.plugin import _validate


def run_python(code: str, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **env}, timeout=120
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


FAST = "cel-expr-python" in available_engines()


ENGINE_PROBE = (
    "import sys, json\nfrom plugins.dra.cel import get_engine\ne = get_engine()\n"
    "print(json.dumps({'engine': type(e).__name__, 'celpy': 'celpy' in sys.modules}))"
)


@pytest.mark.parametrize(
    ("env", "engine", "celpy"),
    [
        # get_engine() takes the first importable engine and leaves cel-python (its lark grammar, ~0.08 s) alone
        pytest.param(
            "",
            "_CelExprPythonEngine",
            False,
            marks=pytest.mark.skipif(not FAST, reason="no cel-expr-python wheel here: cel-python is the default"),
        ),
        ("cel-python", "_CelPythonEngine", True),  # the fallback is still chosen by name
    ],
)
def test_only_the_chosen_cel_engine_is_imported(env: str, engine: str, celpy: bool) -> None:
    got = run_python(ENGINE_PROBE, DRA_SCHEDULER_CEL_ENGINE=env)
    assert got == {"engine": engine, "celpy": celpy}


def test_cel_engine_argument_is_validated_one_engine_at_a_time() -> None:
    assert _validate({"celEngine": "cel-python"}, "args") == []
    assert _validate({"celEngine": "cel-go"}, "args") == [
        "args.celEngine: unknown or unavailable CEL engine 'cel-go' (available: " + ", ".join(available_engines()) + ")"
    ]
    assert _validate({"celEngine": ["cel-python"]}, "args")[0].startswith("args.celEngine: unknown or unavailable")


def test_networkx_is_imported_in_the_background_once_the_topology_plugin_is_built() -> None:
    """Importing the plugins does not import networkx (a scheduler without GPU topologies never needs it);
    building GpuTopology starts its import on a daemon thread, so the first cycle that builds a node's graph
    does not pay for it."""
    got = run_python(
        "import sys, json\n"
        "import plugins.registry\n"
        "from plugins.topology import graph\n"
        "from plugins.topology.plugin import GpuTopology\n"
        "before = 'networkx' in sys.modules\n"
        "GpuTopology({})\n"
        "t = graph._prewarm\n"
        "GpuTopology({})\n"
        "same = graph._prewarm is t\n"
        "t.join(60)\n"
        "print(json.dumps({'before': before, 'thread': t.name, 'daemon': t.daemon, 'same': same,"
        " 'after': 'networkx' in sys.modules}))"
    )
    assert got == {"before": False, "thread": "import-networkx", "daemon": True, "same": True, "after": True}
