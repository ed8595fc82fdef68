"""Seeded fuzzing of the CEL environment (tests/fuzzlib.py ``--cel``): random selectors (tests/celgen.py), often
mangled or spliced with hostile pieces (cost bombs, backtracking regexes, budget-busting comprehensions,
20,000-character identifiers), on random devices, through both engines in a child process with a memory
limit and a per-case alarm. Only CELError may come out, and the two engines agree on every outcome.
``make test``: DRA_FUZZ_CEL_CASES=6000 (~11 s); longer: DRA_FUZZ_CEL_CASES=50000 DRA_FUZZ_SEED=3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SEED = int(os.environ.get("DRA_FUZZ_SEED", "20260101"))
CASES = int(os.environ.get("DRA_FUZZ_CEL_CASES", "6000"))
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.timeout(max(300, CASES // 5))


def test_fuzz_cel() -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "fuzzlib.py"), str(SEED), str(CASES), "--cel"],
        capture_output=True, text=True, cwd=HERE.parent, timeout=max(300, CASES // 5), check=False,
        env={**os.environ, "DRA_FUZZ_CASE_TIMEOUT": "5"},
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(rows) == CASES, proc.stderr[-3000:]
    failures = [r for r in rows if r.get("problems")]
    kinds = Counter("error" if "error" in r.get("result", "") else "result" for r in rows)
    print(f"fuzz CEL: {CASES} cases, seed {SEED}: {dict(kinds)}; slowest {max(r['seconds'] for r in rows)}s, "
          f"peak RSS {max(r['maxrss_mb'] for r in rows)} MiB")
    assert not failures, "\n".join(f"case {r['case']}: {r['problems'][:2]}" for r in failures[:8])
