"""The deep-backlog harness (``python -m e2e.backlog``, ``make backlog``) at a small scale on the session control
plane: 20 kwok nodes x 8 GPUs full, 300 pending one-GPU pods, running pods deleted at 20/s for 5 s, for
dra-scheduler and then upstream kube-scheduler. Asserts the harness's invariants, not either scheduler's
figures: every deleted pod's device is released and reused by a pending pod within the window and its grace,
every such bind has a release->bind delay, the order figures cover every bind, and no device was allocated
twice in any state the claim watch saw (nor in ``check_state`` at the end)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from e2e import cluster
from e2e.backlog import PRIORITIES, Config, Env, Result, run_round, setup
from e2e.fleet import Kube, KubeError, fresh_namespace
from e2e.throughput_live import clean_namespace
from e2e.throughput_report import OURS, THEIRS


@pytest.fixture(scope="module")
def backlog_env(cluster_info: cluster.ClusterInfo, clean_cluster: Kube) -> Iterator[tuple[Env, Config]]:
    kube = clean_cluster
    cfg = Config(nodes=20, gpus_per_node=8, backlog=300, rate=20.0, window=5.0, after=20.0, idle=2.0,
                 namespace=fresh_namespace(kube, "backlog"), fleet="backlog-t", quiet_timeout=30.0, timeout=120.0)
    env = setup(kube, cluster_info, cluster_info.run_dir, cfg, own_identity=False)
    yield env, cfg
    for name, _, _ in PRIORITIES:
        with contextlib.suppress(KubeError):
            kube.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


@pytest.mark.parametrize("sched", [OURS, THEIRS])
def test_backlog_harness_invariants(backlog_env: tuple[Env, Config], sched: str) -> None:
    env, cfg = backlog_env
    r: Result = run_round(env, sched, cfg)
    try:
        assert r.checks == [], r.checks
        n = round(cfg.rate * cfg.window)
        assert r.deletes == n
        assert r.idle_binds == 0, "a backlog pod bound while nothing changed"
        assert r.idle_seconds >= cfg.idle
        # every deleted pod freed its device and a pending pod took it, within the window + grace
        assert r.released > 0 and r.reused == r.released, (r.released, r.reused)
        assert r.reuse_all_seconds is not None and r.reuse_all_seconds <= cfg.after
        assert r.binds_window + r.binds_after == n, (r.binds_window, r.binds_after)
        # a delay for every bind, each from a release the claim watch saw
        assert r.unmatched == 0
        assert r.release_to_bind.count == n
        assert r.release_to_bind.p50 is not None and r.release_to_bind.max is not None
        assert r.release_to_allocation.p50 is not None and r.release_to_allocation.p50 >= 0
        assert r.release_to_bind.max < cfg.window + cfg.after
        assert r.order["binds"] == n
        assert sum(r.order["binds_by_priority"].values()) == n
        assert 0.0 <= r.order["in_order_share"] <= 1.0 and 0.0 <= r.order["inversion_share"] <= 1.0
        assert r.window_cpu > 0
    finally:
        clean_namespace(env.kube, cfg.namespace)
