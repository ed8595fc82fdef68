"""What ``dra-scheduler run`` spends before and around its first cycles (issue #16, item 3): the garbage
collector's settings and the modules start-up does not import."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler import cli

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def gc_state() -> Iterator[None]:
    """Leave the collector of the test process as it was (and its young generations empty: a test that counts
    collections, tests/test_load_fastpaths.py, must not inherit counts these tests ran up)."""
    thresholds = gc.get_threshold()
    enabled = gc.isenabled()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if enabled:
        gc.enable()
    gc.collect()


def test_tune_gc_raises_the_thresholds_and_freezes_what_is_loaded(gc_state: None) -> None:
    gc.set_threshold(700, 10, 10)
    cli.tune_gc()
    assert gc.get_threshold() == cli.GC_THRESHOLDS
    assert cli.GC_THRESHOLDS[0] >= 10_000
    assert gc.get_freeze_count() > 0


class _Informers:
    def __init__(self) -> None:
        self.synced = asyncio.Event()

    async def wait_synced(self) -> None:
        await self.synced.wait()


class _App:
    """What ``serve`` uses of SchedulerApp: ``started``, ``informers.wait_synced()`` and ``run()``."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.informers = _Informers()
        self.frozen: list[int] = []
        self.collecting: list[bool] = []

    async def run(self) -> int:
        self.started.set()
        for _ in range(3):
            await asyncio.sleep(0)
        self.frozen.append(gc.get_freeze_count())  # informers started, first lists not applied yet
        self.collecting.append(gc.isenabled())
        self.informers.synced.set()
        for _ in range(3):
            await asyncio.sleep(0)
        self.frozen.append(gc.get_freeze_count())  # applied: the cache is frozen now
        self.collecting.append(gc.isenabled())
        return 7


async def test_serve_freezes_the_heap_once_the_informers_are_synced(gc_state: None) -> None:
    app = _App()
    assert await cli.serve(app) == 7  # type: ignore[arg-type]
    before, after = app.frozen
    assert before == 0
    assert after > 0


async def test_serve_pauses_the_collector_while_the_first_lists_are_applied(gc_state: None) -> None:
    """The first lists allocate objects that stay: full passes of the collector on the way re-walked the growing
    heap (~0.5 CPU-s of a start with 10,000 pending pods on 1,250 nodes, bench/bench_startup.py
    --gc-during-lists). Paused until the informers are synced, then frozen and back on."""
    gc.enable()
    app = _App()
    assert await cli.serve(app) == 7  # type: ignore[arg-type]
    assert app.collecting == [False, True]
    assert gc.isenabled()


async def test_a_start_that_never_syncs_collects_again_after_the_pause(
    gc_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "START_GC_PAUSE", 0.05)

    class Stuck(_App):
        async def run(self) -> int:
            self.started.set()  # the informers never sync (no API server answers)
            await asyncio.sleep(0.01)
            self.collecting.append(gc.isenabled())
            await asyncio.sleep(0.2)
            self.collecting.append(gc.isenabled())
            return 1

    app = Stuck()
    assert await cli.serve(app) == 1  # type: ignore[arg-type]
    assert app.collecting == [False, True]
    assert gc.isenabled() and gc.get_freeze_count() == 0


async def test_serve_does_not_freeze_when_start_up_fails(gc_state: None) -> None:
    class Failing(_App):
        async def run(self) -> int:
            return 1  # e.g. no API server: the informers never start

    assert await cli.serve(Failing()) == 1  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert gc.get_freeze_count() == 0
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "gc-freeze"]


def test_start_up_imports_no_optional_heavy_module() -> None:
    """The modules ``run`` loads before it connects (the command line, the app, the default profile's
    plugins) leave out those only some pods need: networkx (GpuTopology's graphs, built on first use), the
    CEL engines (compiled on first use), kopf (the PodGroup status controller, started only when the CRD is
    served)."""
    code = (
        "import sys\n"
        "import scheduler.cli, scheduler.kube.run\n"
        "from scheduler.config.schedulerconfig import default_config\n"
        "default_config()\n"
        "heavy = ('networkx', 'kopf', 'celpy', 'cel_expr_python')\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# --- the per-pod path: a claim's spec is built once -----------------------------------------------------------


def _claim(uid: str, count: int = 1) -> dict[str, object]:
    req = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": count},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": uid, "resourceVersion": "1"},
        "spec": {"devices": {"requests": [req]}},
    }


def test_a_claims_spec_is_built_once_per_uid() -> None:
    """Each watch event of a claim (finalizer, allocation, reservation) is a new object with the same spec
    (immutable in the API): the typed spec of the first is reused, not built again."""
    import copy

    from scheduler.api.dra import claim_from

    first = claim_from(_claim("uid-once"))
    later = copy.deepcopy(_claim("uid-once"))
    later["metadata"]["resourceVersion"] = "2"  # type: ignore[index]
    later["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
    again = claim_from(later)
    assert again.spec is first.spec
    assert again.meta.resource_version == "2" and len(again.reserved_for) == 1
    # another uid with an equal spec (claims from one template) shares the typed spec; the same uid with another
    # spec is built from its own spec
    other = claim_from(_claim("uid-other"))
    assert other.spec is first.spec
    changed = claim_from(_claim("uid-once", count=2))
    assert changed.spec is not first.spec and changed.spec.requests[0].exactly is not None
    assert changed.spec.requests[0].exactly.count == 2


def test_claims_with_equal_specs_share_one_typed_spec_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 claims generated from one template at a start-up: the spec is built for the first and shared by the
    others (it was built once per claim: ~75 us each with its canonical JSON); the typed values are those a build
    gives. A spec differing in one field, or in a field the typed spec does not keep, is built from its own raw."""
    from scheduler.api import dra

    built: list[object] = []
    real = dra.claim_spec_from

    def counting(raw: dict[str, object], path: str = "spec") -> dra.ClaimSpec:
        built.append(raw)
        return real(raw, path)

    monkeypatch.setattr(dra, "claim_spec_from", counting)
    monkeypatch.setattr(dra, "_RECENT_SPECS", [])  # what earlier tests built
    claims = [dra.claim_from(_claim(f"uid-share-{i}")) for i in range(50)]
    assert len(built) == 1
    fresh = real(_claim("x")["spec"])  # type: ignore[arg-type]
    for c in claims:
        assert c.spec is claims[0].spec
        assert c.spec == fresh and c.spec.fingerprint == fresh.fingerprint
        assert c.spec.requests == fresh.requests and c.spec.constraints == fresh.constraints
    assert [c.meta.uid for c in claims] == [f"uid-share-{i}" for i in range(50)]
    two = dra.claim_from(_claim("uid-share-two", count=2))
    assert len(built) == 2 and two.spec is not claims[0].spec
    assert two.spec.requests[0].exactly is not None and two.spec.requests[0].exactly.count == 2
    extra = _claim("uid-share-extra")
    extra["spec"]["devices"]["requests"][0]["exactly"]["unknownField"] = True  # type: ignore[index]
    dra.claim_from(extra)
    assert len(built) == 3
    # the first spec is still recent: shared again, not rebuilt
    assert dra.claim_from(_claim("uid-share-again")).spec is claims[0].spec and len(built) == 3


def test_a_spec_changed_in_place_is_built_again() -> None:
    """The comparison is against a private copy: a dict changed in place after its claim was built (an
    in-memory API, a test) is not mistaken for the spec it was."""
    from scheduler.api.dra import claim_from

    raw = _claim("uid-in-place")
    assert claim_from(raw).spec.requests[0].exactly.count == 1  # type: ignore[union-attr]
    raw["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3  # type: ignore[index]
    assert claim_from(raw).spec.requests[0].exactly.count == 3  # type: ignore[union-attr]
