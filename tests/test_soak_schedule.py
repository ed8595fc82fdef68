"""The soak's fault schedule and its leader RSS slope (e2e/soak.py, e2e/soak_report.py; issue 24, item 2).

A leader's tables take minutes to reach their working size (an Event series is kept 6 minutes after its last
occurrence, client-go's ``finishTime``), so the slope that gates a run leaves out the first ``leader_warmup``
seconds of each leadership stretch, and a run long enough to be gated puts its faults early, so that the last
leader leads long enough for the slope to mean something.
"""

from __future__ import annotations

from types import SimpleNamespace

from e2e.soak import ALL_FAULTS, Options, Soak
from e2e.soak_report import RssSample, leader_segments, pooled_slope


def _schedule(**kw: object) -> list[tuple[float, str]]:
    return Soak.schedule(SimpleNamespace(opts=Options(**kw)))  # type: ignore[arg-type]


def test_a_gated_run_puts_its_faults_in_its_first_40_percent() -> None:
    ev = _schedule(minutes=20.0)
    faults = [(t, k) for t, k in ev if k in ALL_FAULTS]
    assert [k for _, k in faults] == list(ALL_FAULTS)
    assert max(t for t, _ in faults) <= 0.4 * 20 * 60
    # the last leader then leads >= 12 minutes: 6 of warm-up, 6 measured (the gate's slope_min_minutes)
    assert 20 * 60 - max(t for t, _ in faults) >= Options().leader_warmup + Options().slope_min_minutes * 60
    # node and slice maintenance still runs over the whole run
    assert max(t for t, k in ev if k in ("node", "slice")) > 0.8 * 20 * 60


def test_a_short_run_spreads_its_faults_and_an_explicit_span_wins() -> None:
    short = [t for t, k in _schedule(minutes=3.0) if k in ALL_FAULTS]
    assert short and max(short) > 0.5 * 180
    spread = [t for t, k in _schedule(minutes=20.0, fault_span=1.0) if k in ALL_FAULTS]
    assert max(spread) == 20 * 60 * 4 / 5


def test_the_slope_leaves_out_each_stretchs_warm_up() -> None:
    # a leader climbing 60 MiB over its first 6 minutes, then flat: after the warm-up the slope is 0
    samples = [RssSample(t, "a", 1, 100 + min(t, 360) / 6, True, "S") for t in range(0, 1200, 5)]
    segs = leader_segments(samples, 180.0, 360.0, 15.0)
    assert segs and segs[0][0][0] == 360
    assert abs(pooled_slope(segs) or 0.0) < 1e-9
    # with the old 30 s per stretch the warm-up read as growth
    old = pooled_slope(leader_segments(samples, 180.0, 30.0, 15.0))
    assert old is not None and old > 20
