"""The pure parts of ``make throughput`` (e2e/throughput_report.py): percentiles, /proc parsing, the counting of
a kube-apiserver audit log, medians and ratios, the tables and the created-while-running explanation.

The audit lines are shaped like the ones kube-apiserver 1.37.2 writes with e2e/cluster.sh's policy
(E2E_AUDIT_LOG=1; taken from a live run, names shortened)."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import pytest

from e2e.throughput_report import (
    OURS,
    THEIRS,
    AuditEntry,
    BindStats,
    Pipeline,
    Round,
    WriteCount,
    audit_effect,
    bind_stats,
    bounding_stage,
    client_rates,
    completion_times,
    cores_between,
    count_writes,
    explain_pipeline,
    group,
    machine_ticks,
    medians,
    parse_audit,
    parse_audit_line,
    percentile,
    pipeline_ends,
    proc_cpu_ticks,
    proc_start_ticks,
    rank_lags,
    ratios,
    rfc3339_seconds,
    round_line,
    running_summary,
    summary_table,
    writes_breakdown,
)

# --- percentiles and bind statistics ---------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    v = [float(x) for x in range(1000, 0, -1)]  # 1..1000, unsorted
    assert percentile(v, 0.5) == 500.0  # the 500th bind of 1,000, not the mean of the 500th and 501st
    assert percentile(v, 0.9) == 900.0
    assert percentile(v, 0.0) == 1.0
    assert percentile(v, 1.0) == 1000.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.51) == 3.0
    assert percentile([7.0], 0.9) == 7.0


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_percentile_rejects_bad_input(bad: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], bad)
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_bind_stats_counts_from_start() -> None:
    start = 100.0
    binds = [start + t for t in (4.0, 1.0, 2.0, 3.0, 10.0, 5.0, 6.0, 7.0, 8.0, 9.0)]
    s = bind_stats(binds, start)
    assert s == BindStats(pods=10, first=1.0, median=5.0, p90=9.0, last=10.0)
    assert s.pods_per_second == 1.0  # 10 pods / (last bind - start)
    with pytest.raises(ValueError):
        bind_stats([], 0.0)


def test_rank_lags_compare_kth_to_kth() -> None:
    created = [0.0, 1.0, 2.0, 3.0]
    claims = [2.5, 0.5, 1.5]  # unpaired, unsorted; one missing
    assert rank_lags(created, claims) == [0.5, 0.5, 0.5]
    assert rank_lags([], [1.0]) == []


# --- /proc -----------------------------------------------------------------------------------------

# proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
# cutime cstime priority nice num_threads itrealvalue starttime ...
STAT = ("4242 (dra sched) (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 "
        "700 300 20 10 20 0 12 0 123456 100000000 5000 18446744073709551615")


def test_proc_stat_cpu_and_start_ticks_with_a_tricky_comm() -> None:
    assert proc_cpu_ticks(STAT) == 700 + 300 + 20 + 10  # utime + stime + cutime + cstime
    assert proc_start_ticks(STAT) == 123456


def test_machine_ticks_busy_excludes_idle_and_iowait() -> None:
    text = ("cpu  100 10 50 800 40 5 5 0 7 0\n"
            "cpu0 50 5 25 400 20 2 3 0 0 0\nintr 1 2 3\n")
    busy, total = machine_ticks(text)
    assert total == 100 + 10 + 50 + 800 + 40 + 5 + 5 + 0  # guest (7) is already inside user
    assert busy == total - 800 - 40
    with pytest.raises(ValueError):
        machine_ticks("intr 1\n")


def test_cores_between_names_other_load() -> None:
    before = {"kube-apiserver": 10.0, "harness": 1.0}
    after = {"kube-apiserver": 12.0, "harness": 1.5, "scheduler": 3.0}  # the scheduler started in the window
    c = cores_between(before, after, wall=4.0, machine_busy=6.0, machine_total=8.0, ncpu=2)
    assert c["kube-apiserver"] == 0.5
    assert c["scheduler"] == 0.75
    assert c["harness"] == 0.125
    assert c["machine"] == 1.5  # 2 CPUs x 6/8 busy
    assert c["others"] == pytest.approx(1.5 - 0.5 - 0.75 - 0.125)
    assert cores_between(before, after, 0.0, 1.0, 1.0, 2) == {}


# --- the audit log ---------------------------------------------------------------------------------


def audit_line(user: str, verb: str, resource: str, *, group: str = "", sub: str = "", ns: str = "throughput",
               name: str = "tp-0001", code: int = 201, stage: str = "ResponseComplete", t: str = "08:32:17.904532",
               ua: str = "", impersonated: str | None = None) -> str:
    ref: dict[str, Any] = {"resource": resource, "namespace": ns, "name": name, "apiVersion": "v1"}
    if group:
        ref["apiGroup"] = group
    if sub:
        ref["subresource"] = sub
    ev: dict[str, Any] = {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": "x", "stage": stage,
        "requestURI": f"/api/v1/namespaces/{ns}/{resource}", "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]}, "sourceIPs": ["127.0.0.1"],
        "userAgent": ua, "objectRef": ref, "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": f"2026-11-25T{t}Z", "stageTimestamp": f"2026-11-25T{t}Z",
        "annotations": {"authorization.k8s.io/decision": "allow"}}
    if impersonated:
        ev["impersonatedUser"] = {"username": impersonated}
    return json.dumps(ev)


RC = "resource.k8s.io"
KS = "system:kube-scheduler"


def test_parse_audit_line_and_keys() -> None:
    e = parse_audit_line(audit_line(KS, "update", "resourceclaims", group=RC, sub="status", code=200,
                                    ua="kube-scheduler/v1.37.2 (linux/amd64) kubernetes/x/scheduler"))
    assert e is not None
    assert (e.user, e.verb, e.resource, e.subresource, e.code) == (KS, "update", "resourceclaims", "status", 200)
    assert e.key == "update resourceclaims.resource.k8s.io/status"
    assert e.is_write and not e.is_event
    assert e.completed == rfc3339_seconds("2026-11-25T08:32:17.904532Z")
    b = parse_audit_line(audit_line(OURS, "create", "pods", sub="binding"))
    assert b is not None and b.key == "create pods/binding"
    ev = parse_audit_line(audit_line(KS, "create", "events", group="events.k8s.io"))
    assert ev is not None and ev.key == "create events.events.k8s.io" and ev.is_event
    core_ev = parse_audit_line(audit_line(OURS, "create", "events"))
    assert core_ev is not None and core_ev.key == "create events" and core_ev.is_event


def test_only_response_complete_counts_and_torn_lines_are_skipped() -> None:
    for stage in ("RequestReceived", "ResponseStarted", "Panic"):
        assert parse_audit_line(audit_line(OURS, "create", "pods", sub="binding", stage=stage)) is None
    full = audit_line(OURS, "create", "pods", sub="binding")
    assert parse_audit_line(full[: len(full) // 2]) is None  # a line the API server is still writing
    assert parse_audit_line("   ") is None
    assert parse_audit_line("[1, 2]") is None


def test_rfc3339_seconds() -> None:
    assert rfc3339_seconds("1970-01-01T00:00:01.500000Z") == 1.5
    assert rfc3339_seconds("2026-11-25T08:32:18Z") - rfc3339_seconds("2026-11-25T08:32:17.25Z") == 0.75


def live_like_log() -> list[str]:
    """Two pods each: ours (3 writes + 1 Event), kube-scheduler (4 writes + an events.k8s.io Event, one
    claim update conflicting once), and everyone else's writes and reads around them."""
    lines: list[str] = []
    for i in range(2):
        name = f"tp-{i:04d}"
        lines += [
            audit_line("e2e-admin", "create", "pods", name=name),  # the harness
            audit_line("e2e-admin", "create", "resourceclaims", group=RC, name="",
                       ua="kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/x/resource-claim-controller"),
            audit_line("e2e-admin", "patch", "pods", sub="status", name=name, code=200,
                       ua="kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/x/resource-claim-controller"),
            audit_line(OURS, "update", "resourceclaims", group=RC, code=200),
            audit_line(OURS, "update", "resourceclaims", group=RC, sub="status", code=200),
            audit_line(OURS, "create", "pods", sub="binding", name=name),
            audit_line(OURS, "create", "events"),
            audit_line(OURS, "get", "resourceclaims", group=RC, code=200),  # a read: not counted
            audit_line(OURS, "update", "resourceclaims", group=RC, stage="RequestReceived"),  # counted once
            audit_line(KS, "patch", "pods", sub="status", code=200),
            audit_line(KS, "update", "resourceclaims", group=RC, code=200),
            audit_line(KS, "update", "resourceclaims", group=RC, sub="status", code=200),
            audit_line(KS, "create", "pods", sub="binding", name=name),
            audit_line(KS, "create", "events", group="events.k8s.io"),
            audit_line("e2e-admin", "patch", "pods", sub="status", code=200, ua="kwok/v0.8.0"),  # kwok
            audit_line("system:kube-scheduler-x", "create", "pods", sub="binding"),  # a prefix is not the user
        ]
    lines.append(audit_line(KS, "update", "resourceclaims", group=RC, code=409))  # a conflict is a request too
    lines.append(audit_line("admin", "create", "pods", sub="binding", impersonated=OURS))
    return lines


def test_count_writes_by_user_and_resource_events_apart() -> None:
    entries = parse_audit(live_like_log())
    ours = count_writes(entries, OURS)
    assert ours.writes == Counter({"update resourceclaims.resource.k8s.io": 2,
                                   "update resourceclaims.resource.k8s.io/status": 2,
                                   "create pods/binding": 3})  # 2 + 1 made impersonating dra-scheduler
    assert ours.events == Counter({"create events": 2})
    assert (ours.total_writes, ours.total_events, ours.failed) == (7, 2, 0)
    theirs = count_writes(entries, KS)
    assert theirs.writes == Counter({"patch pods/status": 2, "update resourceclaims.resource.k8s.io": 3,
                                     "update resourceclaims.resource.k8s.io/status": 2, "create pods/binding": 2})
    assert theirs.events == Counter({"create events.events.k8s.io": 2})
    assert theirs.failed == 1
    assert count_writes(entries, "nobody") == WriteCount()


def test_count_writes_window() -> None:
    lines = [audit_line(OURS, "create", "pods", sub="binding", t=f"08:00:0{s}.000000") for s in range(5)]
    entries = parse_audit(lines)
    t0 = rfc3339_seconds("2026-11-25T08:00:01Z")
    t1 = rfc3339_seconds("2026-11-25T08:00:03Z")
    assert count_writes(entries, OURS, since=t0, until=t1).total_writes == 3
    assert count_writes(entries, OURS, since=t0).total_writes == 4


def test_completion_times_select_one_kind_of_request() -> None:
    entries = parse_audit(live_like_log())
    kcm = "resource-claim-controller"
    assert len(completion_times(entries, verb="create", resource="resourceclaims", namespace="throughput")) == 2
    assert len(completion_times(entries, verb="patch", resource="pods", subresource="status", namespace="throughput",
                                user_agent_contains=kcm)) == 2
    assert len(completion_times(entries, verb="patch", resource="pods", subresource="status",
                                namespace="throughput")) == 6  # kcm, kube-scheduler and kwok
    assert len(completion_times(entries, verb="create", resource="pods", subresource="binding", namespace="throughput",
                                user=KS)) == 2
    assert completion_times(entries, verb="create", resource="pods", namespace="elsewhere") == []


# --- rounds, medians, ratios, tables ---------------------------------------------------------------


def rnd(sched: str, pods_per_s: float, cpu: float, *, regime: str = "cpu", mode: str = "precreated", i: int = 1,
        writes: int = 3, events: int = 1, audit: bool = True, api_cores: float = 0.5) -> Round:
    n = 100
    last = n / pods_per_s
    w = WriteCount(Counter({"create pods/binding": n, "update resourceclaims.resource.k8s.io": (writes - 1) * n}),
                   Counter({"create events": events * n})) if audit else None
    return Round(sched, regime, mode, i, BindStats(n, 0.1 * last, 0.5 * last, 0.9 * last, last), cpu, writes=w,
                 audit=audit, cores={"kube-apiserver": api_cores, "machine": 2.0, "others": 0.5}, window=last)


def test_round_figures() -> None:
    r = rnd(OURS, 50.0, 4.0)
    assert r.bind.pods_per_second == 50.0
    assert r.writes_per_pod == 3.0
    assert r.events_per_pod == 1.0
    assert r.pods_per_cpu_second == 25.0
    no = rnd(OURS, 50.0, 4.0, audit=False)
    assert no.writes_per_pod is None and no.events_per_pod is None
    assert math.isinf(rnd(OURS, 50.0, 0.0).pods_per_cpu_second)


def test_medians_and_ratios_per_regime_and_mode() -> None:
    rounds = [rnd(OURS, 100.0, 2.0, i=1), rnd(THEIRS, 50.0, 4.0, i=1, writes=4),
              rnd(OURS, 120.0, 2.5, i=2), rnd(THEIRS, 60.0, 5.0, i=2, writes=4),
              rnd(OURS, 40.0, 1.0, regime="api"), rnd(THEIRS, 40.0, 1.0, regime="api", writes=4),
              rnd(OURS, 1.0, 100.0, audit=False)]  # the audit-check round: not in the medians
    m = medians(group(rounds)[("cpu", "precreated")][OURS])
    assert m["pods/s"] == 110.0  # median of two = their mean
    assert m["CPU-s"] == 2.25
    assert m["pods/CPU-s"] == pytest.approx((50.0 + 40.0) / 2)
    assert m["writes/pod"] == 3.0
    r = ratios(rounds)
    assert r[("cpu", "precreated")]["pods/s"] == pytest.approx(110.0 / 55.0)
    assert r[("cpu", "precreated")]["writes/pod"] == pytest.approx(0.75)
    # median bind: ours median(0.5, 0.4167) = 0.4583, theirs median(1.0, 0.8333) = 0.9167
    assert r[("cpu", "precreated")]["median"] == pytest.approx(0.5)
    assert r[("api", "precreated")]["pods/s"] == 1.0
    assert set(r) == {("cpu", "precreated"), ("api", "precreated")}


def test_summary_table_prints_medians_and_ratios() -> None:
    rounds = [rnd(OURS, 100.0, 2.0), rnd(THEIRS, 50.0, 4.0, writes=4)]
    t = summary_table(rounds)
    assert "CPU-bound (client QPS 5000 / burst 10000); pods created first" in t
    ours = next(line for line in t.splitlines() if line.startswith(OURS))
    theirs = next(line for line in t.splitlines() if line.startswith(THEIRS))
    ratio = next(line for line in t.splitlines() if line.startswith("ours/theirs"))
    assert ours.split()[1:4] == ["1", "100.0", "0.10"]  # rounds, pods/s, first bind
    assert theirs.split()[1:3] == ["1", "50.0"]
    assert ratio.split()[1:3] == ["x2.00", "x0.50"]  # pods/s ours/theirs, first bind ours/theirs
    assert ratio.split()[-3:] == ["x0.50", "x2.00", "-"]  # CPU-s 2 vs 4; pods/CPU-s 50 vs 25; others: no ratio
    assert ours.split()[-1] == "0.50"  # the cores other processes used


def test_round_line_and_breakdown() -> None:
    r = rnd(THEIRS, 50.0, 4.0, writes=4)
    line = round_line(r)
    assert line.startswith("kube-scheduler cpu/precreated #1")
    assert "50.0" in line and "4.00" in line
    b = writes_breakdown(r)
    assert "update resourceclaims.resource.k8s.io 3.00" in b and "create pods/binding 1.00" in b
    assert "events per pod: create events 1.00" in b
    assert writes_breakdown(rnd(OURS, 1.0, 1.0, audit=False)) == "writes per pod: (no audit log)"


def test_client_rates_against_the_regime_limit() -> None:
    r = rnd(OURS, 50.0, 4.0, regime="api")  # 100 pods in 2 s: 300 writes, 100 Events
    assert client_rates(r) == "write rate start -> last bind: 150/s + Events 50/s (client limit 200/s)"
    assert client_rates(rnd(OURS, 50.0, 4.0, audit=False)) == "write rate: (no audit log)"


def test_audit_effect_compares_like_with_like() -> None:
    rounds = [rnd(OURS, 100.0, 2.0, api_cores=0.6), rnd(OURS, 80.0, 2.0, i=2, api_cores=0.6),
              rnd(OURS, 99.0, 2.0, audit=False, api_cores=0.5), rnd(THEIRS, 50.0, 4.0)]
    lines = audit_effect(rounds)
    assert len(lines) == 1  # kube-scheduler had no round without the log
    assert "dra-scheduler cpu/precreated: pods/s 99.0 without the audit log (1 round(s)) vs 90.0" in lines[0]
    assert "x1.10" in lines[0]
    # kube-apiserver CPU per pod: 0.5 cores x (100/99 s) / 100 pods = 5.05 ms vs median(0.6 x 1.0, 0.6 x 1.25)/100
    assert "CPU-ms per pod 5.1 vs 6.8; others 0.50 vs 0.50 cores" in lines[0]


# --- what bounds the created-while-running mode ----------------------------------------------------


def test_bounding_stage() -> None:
    # creation takes 12 s, everyone else ends right after: bound by the creation
    assert bounding_stage([("created", 12.0), ("claim", 0.5), ("ready", 0.2), ("bound", 0.8)]) == "created"
    # the scheduler needs 8 s after the last claim: bound by the scheduler
    assert bounding_stage([("created", 12.0), ("claim", 0.5), ("ready", 0.2), ("bound", 8.0)]) == "bound"
    # kube-controller-manager falls behind, the scheduler keeps up with it
    assert bounding_stage([("created", 8.0), ("claim", 6.0), ("ready", 0.2), ("bound", 0.5)]) == "claim"


def test_explain_pipeline_and_running_summary() -> None:
    p = Pipeline(start=10.0, created=[10.0 + 0.01 * i for i in range(1, 101)],
                 claim=[10.2 + 0.01 * i for i in range(1, 101)], ready=[10.3 + 0.01 * i for i in range(1, 101)],
                 bound=[10.5 + 0.01 * i for i in range(1, 101)])
    assert pipeline_ends(p) == pytest.approx({"created": 1.0, "claim": 1.2, "ready": 1.3, "bound": 1.5})
    lines = explain_pipeline(p, {"kube-apiserver": 0.8})
    text = "\n".join(lines)
    assert "pods created (harness)                           100 done at   1.00s =  100.0/s" in text
    assert "median 0.20s" in text  # claims 0.2 s behind the pods, rank by rank
    assert "=> bound by: pods created (harness)" in text
    assert "kube-apiserver 0.80" in text
    ours = rnd(OURS, 100 / 1.5, 1.0, mode="running")
    ours.pipeline = p
    theirs = rnd(THEIRS, 50.0, 2.0, mode="running")
    theirs.pipeline = Pipeline(10.0, p.created, p.claim, p.ready, [10.5 + 0.015 * i for i in range(1, 101)])
    s = "\n".join(running_summary([ours, theirs, rnd(OURS, 100.0, 1.0), rnd(THEIRS, 50.0, 1.0)]))
    assert ("dra-scheduler: last bind 1.50s = pod creation 1.00s (100.0 pods/s) + claims after the last create "
            "0.30s + the scheduler's own tail 0.20s; ceiling left by creation and claims 76.9 pods/s") in s
    assert "kube-scheduler: last bind 2.00s = pod creation 1.00s (100.0 pods/s) + claims after the last create " \
           "0.30s + the scheduler's own tail 0.70s" in s
    assert "bound by (rounds): pod creation 1, scheduler 1" in s
    assert "pods/s ours/theirs x1.33 (pods created first: x2.00)" in s


def test_audit_entry_is_hashable_value() -> None:
    e = AuditEntry("u", "", "create", "", "pods", "binding", "ns", "p", 201, 1.0, 2.0)
    assert e.key == "create pods/binding" and e.is_write
