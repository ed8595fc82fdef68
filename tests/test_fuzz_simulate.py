"""Seeded fuzzing of ``simulate`` (tests/fuzzlib.py): hostile and malformed input never produces a traceback,
a hang or unbounded memory; every refused object is named with its file, document and field; the healthy
sentinel pods beside a poisoned object are always bound; every pending pod says why.

The cases run in a child process with an address-space limit (DRA_FUZZ_MEMORY_MB, default 3072) and a
per-case alarm (DRA_FUZZ_CASE_TIMEOUT, default 20 s). ``make test`` runs DRA_FUZZ_CASES=500 cases (~40 s);
a longer run: ``DRA_FUZZ_CASES=5000 DRA_FUZZ_SEED=7 .venv/bin/pytest tests/test_fuzz_simulate.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SEED = int(os.environ.get("DRA_FUZZ_SEED", "20260101"))
CASES = int(os.environ.get("DRA_FUZZ_CASES", "500"))
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.timeout(max(300, CASES * 25))


def test_fuzz_simulate() -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "fuzzlib.py"), str(SEED), str(CASES)],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        timeout=max(300, CASES * 25),
        check=False,
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, f"fuzz child failed (exit {proc.returncode}): {proc.stderr[-3000:]}"
    assert len(rows) == CASES, f"only {len(rows)} of {CASES} cases reported: {proc.stderr[-3000:]}"
    outcomes = Counter(r["outcome"] for r in rows)
    failures = [r for r in rows if r.get("problems")]
    slowest = max(r["seconds"] for r in rows)
    rss = max(r["maxrss_mb"] for r in rows)
    print(f"fuzz simulate: {CASES} cases, seed {SEED}: {dict(outcomes)}; slowest case {slowest}s, peak RSS {rss} MiB")
    report = "\n".join(
        f"case {r['case']} ({r['outcome']}) mutations={r.get('mutations')}:\n  " + "\n  ".join(r["problems"][:3])
        for r in failures[:5]
    )
    assert not failures, f"{len(failures)} failing cases (rerun: python tests/fuzzlib.py {SEED} {CASES}):\n{report}"
    assert outcomes["simulated"] >= CASES // 3, outcomes  # most cases get past loading
    assert outcomes["input-error"] >= 1, outcomes  # and the YAML mutations are exercised
