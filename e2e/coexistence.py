"""kube-scheduler and dra-scheduler allocating the same DRA devices at the same moment (issue #13, item 4).

    python -m e2e.coexistence [--rounds N] [--pods N] [--keep]   # own control plane (E2E_COEX_RUN_DIR)

Fleet: 4 kwok nodes ``coex-000..003`` of 4 GPUs each (ResourceSlices of ``gpu.nvidia.com``); nodes 000-001
are labelled ``e2e.dra-scheduler.io/devices=dra-scheduler``, 002-003 ``=kube-scheduler``.

Each round: a fresh namespace, ``pods`` ResourceClaims of 1 GPU for each scheduler, then all 2×``pods`` pods
(half ``schedulerName: default-scheduler``, half ``dra-scheduler``) created at once by 16 threads. The round
ends when every pod is bound or has PodScheduled=False and nothing changed for 2 s; then the devices held by
two claims are counted (:func:`doubled`), the detector's Events ``DeviceAllocatedTwice`` and metrics read,
and the namespace's pods and claims deleted.

* ``shared``: no partition; every pod pinned (nodeSelector) to nodes 000-001: 8 GPUs for 16 pods. Each
  scheduler sees only its own in-flight allocations, so both can give one free GPU to two claims.
* ``partitioned``: dra-scheduler runs with the DynamicResources arg ``nodeSelector`` selecting
  ``devices=dra-scheduler`` (its pods carry no node selector at all); kube-scheduler's pods select
  ``devices=kube-scheduler``. 0 double allocations expected.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e import cluster
from e2e.fleet import (
    FLEET_LABEL,
    JSON,
    Kube,
    KubeError,
    SchedulerProcess,
    allocated_devices,
    create_scale_fleet,
    namespace,
    pod_scheduled_condition,
    wait_for,
)
from scheduler.cache.coexistence import EVENT_REASON

FLEET = "coex"
DEVICES_LABEL = "e2e.dra-scheduler.io/devices"
OURS, UPSTREAM = "dra-scheduler", "default-scheduler"
DETECTED = "dra_scheduler_double_allocations_detected_total"
GAUGE = "dra_scheduler_double_allocated_devices"
CLASS = "gpu.nvidia.com"


def create_fleet(kube: Kube) -> list[str]:
    fleet = create_scale_fleet(kube, FLEET, 4, 4)
    names = sorted(fleet.node_names)
    for i, n in enumerate(names):
        side = OURS if i < 2 else "kube-scheduler"
        kube.patch("Node", n, {"metadata": {"labels": {DEVICES_LABEL: side}}})
    return names


def scheduler_config(partitioned: bool) -> JSON:
    args: JSON = {"nodeSelector": {"matchLabels": {DEVICES_LABEL: OURS}}} if partitioned else {}
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": OURS, "pluginConfig": [{"name": "DynamicResources", "args": args}]}]}


def start_scheduler(info: cluster.ClusterInfo, log: Path, partitioned: bool) -> SchedulerProcess:
    log.parent.mkdir(parents=True, exist_ok=True)
    cfg = log.with_suffix(".config.json")
    cfg.write_text(json.dumps(scheduler_config(partitioned)))
    return SchedulerProcess(info, log, "--config", str(cfg)).start()


def _claim(ns: str, name: str) -> JSON:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1}}]}}}


def _pod(ns: str, name: str, scheduler: str, selector: dict[str, str]) -> JSON:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {FLEET_LABEL: FLEET, **selector},
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                     "containers": [{"name": "main", "image": "pause",
                                     "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]}}


def doubled(claims: Sequence[JSON]) -> dict[str, list[str]]:
    """device (driver/pool/device) -> the claims holding it, for devices held by two or more claims."""
    holders: dict[str, list[str]] = {}
    for c in claims:
        for dev in set(allocated_devices(c)):
            holders.setdefault("/".join(dev), []).append(c["metadata"]["name"])
    return {d: sorted(cs) for d, cs in holders.items() if len(cs) > 1}


@dataclass
class Round:
    scenario: str
    index: int
    bound: Counter[str] = field(default_factory=Counter)  # scheduler -> pods bound
    doubled: dict[str, list[str]] = field(default_factory=dict)
    event_devices: set[str] = field(default_factory=set)  # devices named by DeviceAllocatedTwice Events
    event_claims: set[str] = field(default_factory=set)
    detected_delta: float = 0.0  # the detector's counter over the round
    gauge: float = 0.0  # the detector's gauge at the end of the round
    seconds: float = 0.0

    @property
    def consistent(self) -> bool:
        """The detector saw exactly the devices held twice, on every claim holding them."""
        claims = {c for cs in self.doubled.values() for c in cs}
        return (self.event_devices == set(self.doubled) and self.event_claims == claims
                and self.gauge == len(self.doubled) and self.detected_delta >= len(self.doubled)
                and (self.detected_delta == 0) == (not self.doubled))


def _settled(kube: Kube, ns: str, n: int) -> tuple[Any, ...] | None:
    pods = kube.list("Pod", ns)
    if len(pods) < n:
        return None
    state = []
    for p in pods:
        node = p["spec"].get("nodeName")
        cond = pod_scheduled_condition(p)
        if not node and not (cond and cond.get("status") == "False"):
            return None
        state.append((p["metadata"]["name"], node or ""))
    claims = tuple(sorted((c["metadata"]["name"], tuple(allocated_devices(c))) for c in kube.list("ResourceClaim", ns)))
    return (tuple(sorted(state)), claims)


def run_round(kube: Kube, sched: SchedulerProcess, scenario: str, index: int, pods: int,
              timeout: float = 90.0) -> Round:
    partitioned = scenario == "partitioned"
    ns = f"coex-{scenario[:5]}-{index:02d}-{uuid.uuid4().hex[:4]}"
    kube.create(namespace(ns))
    r = Round(scenario, index)
    before = sched.metric(DETECTED)
    names = [(f"up-{i:02d}", UPSTREAM) for i in range(pods)] + [(f"ours-{i:02d}", OURS) for i in range(pods)]
    kube.create_many([_claim(ns, n) for n, _ in names])
    objs = []
    for n, s in names:
        if s == UPSTREAM:
            sel = {DEVICES_LABEL: "kube-scheduler" if partitioned else OURS}
        else:
            sel = {} if partitioned else {DEVICES_LABEL: OURS}
        objs.append(_pod(ns, n, s, sel))
    objs.sort(key=lambda o: o["metadata"]["name"][-2:])  # interleave the two schedulers' pods
    t0 = time.monotonic()
    kube.create_many(objs, workers=16)
    last, since = None, time.monotonic()
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        cur = _settled(kube, ns, len(objs))
        if cur is not None and cur == last:
            if time.monotonic() - since >= 2.0:
                break
        else:
            last, since = cur, time.monotonic()
        time.sleep(0.25)
    else:
        raise TimeoutError(f"round {scenario}/{index}: pods not settled after {timeout:g}s")
    r.seconds = time.monotonic() - t0
    for p in kube.list("Pod", ns):
        if p["spec"].get("nodeName"):
            r.bound[p["spec"]["schedulerName"]] += 1
    r.doubled = doubled(kube.list("ResourceClaim", ns))

    def events() -> bool:
        evs = [e for e in kube.list("Event", ns) if e.get("reason") == EVENT_REASON]
        r.event_claims = {e["involvedObject"]["name"] for e in evs}
        r.event_devices = {m.group(1) for e in evs if (m := re.search(r"device (\S+) is allocated", e["message"]))}
        r.detected_delta = sched.metric(DETECTED) - before
        r.gauge = sched.metric(GAUGE)
        return r.consistent

    with contextlib.suppress(TimeoutError):  # the Events are posted asynchronously
        wait_for(events, 15 if r.doubled else 2, "the detector's Events and metrics", interval=0.5)
    cleanup(kube, ns)
    return r


def cleanup(kube: Kube, ns: str) -> None:
    kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods",
                 {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    wait_for(lambda: not kube.list("Pod", ns), 60, f"pods of {ns} deleted")
    kube.delete_collection("ResourceClaim", namespace=ns)
    wait_for(lambda: not kube.list("ResourceClaim", ns), 60, f"claims of {ns} deleted")
    with contextlib.suppress(KubeError):
        kube.delete("Namespace", ns)


def run_scenario(kube: Kube, info: cluster.ClusterInfo, log_dir: Path, scenario: str, rounds: int,
                 pods: int) -> list[Round]:
    sched = start_scheduler(info, log_dir / f"coexistence-{scenario}.log", scenario == "partitioned")
    try:
        with cluster.kube_scheduler(info.run_dir):
            return [run_round(kube, sched, scenario, i, pods) for i in range(rounds)]
    finally:
        sched.stop()


def report(results: Sequence[Round]) -> str:
    lines = []
    for scenario in ("shared", "partitioned"):
        rs = [r for r in results if r.scenario == scenario]
        if not rs:
            continue
        hit = [r for r in rs if r.doubled]
        devices = sum(len(r.doubled) for r in rs)
        bound = Counter[str]()
        for r in rs:
            bound.update(r.bound)
        lines.append(
            f"{scenario:12s} rounds {len(rs):3d}  with a double allocation {len(hit):3d}  devices held twice "
            f"{devices:3d}  pods bound/round kube-scheduler {bound[UPSTREAM] / len(rs):.1f} dra-scheduler "
            f"{bound[OURS] / len(rs):.1f}  detector consistent {sum(r.consistent for r in rs)}/{len(rs)}")
        for r in hit:
            lines.append(f"    round {r.index}: {', '.join(f'{d} -> {cs}' for d, cs in sorted(r.doubled.items()))}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pods", type=int, default=8, help="pods per scheduler per round (8 GPUs shared)")
    ap.add_argument("--keep", action="store_true", help="leave the control plane running")
    args = ap.parse_args(argv)
    run_dir = os.environ.get("E2E_COEX_RUN_DIR") or os.environ.get("E2E_TEST_RUN_DIR") or "/tmp/dra-scheduler-e2e-coex"
    log_dir = Path(os.environ.get("E2E_LOG_DIR") or f"{run_dir}-logs")
    cluster.stop(run_dir)
    info = cluster.start(run_dir, env={"E2E_PORTS": "auto"})
    try:
        kube = Kube.from_info(info)
        create_fleet(kube)
        results = run_scenario(kube, info, log_dir, "shared", args.rounds, args.pods)
        results += run_scenario(kube, info, log_dir, "partitioned", args.rounds, args.pods)
        print(report(results))
        return 0 if all(r.consistent for r in results) and not any(
            r.doubled for r in results if r.scenario == "partitioned") else 1
    finally:
        if not args.keep:
            cluster.stop(run_dir)


if __name__ == "__main__":
    sys.exit(main())
