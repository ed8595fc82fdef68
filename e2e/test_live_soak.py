"""The 3-minute soak of two leader-elected replicas (e2e/soak.py, ``make soak`` runs 20 minutes) on the session's
shared control plane: churn of template-claim, shared-claim, gang, anti-affinity and preemptor pods on 40 kwok
nodes x 8 GPUs, a node re-created and a slice republished, and the four faults -- kill -9 of the leader,
SIGSTOP of the leader past its lease, an etcd restart and a kube-apiserver restart -- with the invariants checked
every few seconds and every write of each replica judged against the Lease from the audit log.

The session's kube-apiserver runs without the audit log, so the soak restarts it with it first and without it
again at the end; everything the soak creates (fleet, namespace, PriorityClasses, RBAC bindings, FlowSchema,
the Lease, DeviceClasses it added) is deleted before it returns, so later modules find the cluster as ``wipe``
leaves it.

Asserted: no violation (double allocation, stale reservation, partial gang, pending pod without a reason,
write without the Lease, unexpected replica exit) and no traceback in either replica's log. The leader's RSS
slope is only reported here: 3 minutes hold about one minute of leader samples after warm-up, split across
the leaders the faults make, too little to tell growth from warm-up; the 20 MiB/h gate belongs to the
20-minute ``make soak``. ``E2E_SOAK_MINUTES`` changes the length; output in ``$E2E_LOG_DIR/soak/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from e2e import cluster, soak
from e2e.fleet import Kube

LOG_DIR = Path(os.environ.get("E2E_LOG_DIR", "/tmp/dra-scheduler-e2e-logs"))


@pytest.mark.timeout(1200)
def test_two_replicas_survive_three_minutes_of_churn_and_faults(
    cluster_info: cluster.ClusterInfo, clean_cluster: Kube
) -> None:
    out = LOG_DIR / "soak"
    shutil.rmtree(out, ignore_errors=True)
    opts = soak.Options(minutes=float(os.environ.get("E2E_SOAK_MINUTES", "3")), gate_slope=False)
    result = soak.run(cluster_info, opts, out, restore_audit=True)
    s = result.summary
    print(f"\nsoak: {s['bindings']} Bindings, bind latency p99 {s['bind_latency_s']['p99']}, takeovers "
          f"{[(t['fault'], t['first_binding_s']) for t in s['takeovers']]}, leader RSS slope "
          f"{result.slope} MiB/h over {result.slope_minutes:.1f} min (reported only); output {out}")
    assert not result.tracebacks, "tracebacks in the replicas' logs:\n" + "\n".join(result.tracebacks)
    assert not result.violations, f"{len(result.violations)} violation(s):\n" + "\n".join(result.violations)
    assert s["bindings"] > 0 and len(s["takeovers"]) >= 2, s
