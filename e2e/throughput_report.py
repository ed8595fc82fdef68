"""The pure parts of ``make throughput`` (``python -m e2e.throughput``): statistics of bind times, the
counting of a kube-apiserver audit log, ``/proc`` parsing, per-scheduler medians, ratios and the printed
tables. Nothing here talks to a cluster; ``tests/test_throughput_report.py`` tests it.

Definitions used throughout (the printed figures mean exactly this):

* **start**: the scheduler process's start (``/proc/<pid>/stat`` starttime) when the pods were created
  first; the first pod create request when they are created while the scheduler runs.
* **bind time** of a pod: when the harness's pod watch first saw it with ``spec.nodeName``, in seconds
  after start. **first / median / p90 bind**: nearest-rank percentiles of those (:func:`percentile`:
  the ceil(q*n)-th smallest), so the median of 1,000 pods is the 500th bind.
* **pods/s**: pods / (last bind - start).
* **writes per pod**: the scheduler's mutating requests (create, update, patch, delete, deletecollection)
  as recorded by the API server's audit log (stage ResponseComplete, one entry per request, failed ones
  included) under the scheduler's user, over the scheduler's whole life in the round (start to stop),
  divided by the round's pods; Events (resource ``events`` of the core or ``events.k8s.io`` group) counted
  apart as **events per pod**.
* **CPU-seconds**: utime + stime + cutime + cstime of the scheduler process between start (0 for a process
  started for the round) and the last bind; **pods per CPU-second** = pods / that.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

OURS = "dra-scheduler"
THEIRS = "kube-scheduler"
#: the mutating verbs of the audit policy (e2e/cluster.sh, E2E_AUDIT_LOG=1)
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
EVENT_RESOURCE = "events"  # core/v1 and events.k8s.io/v1 Events share the resource name

#: regime -> (client QPS, burst), the same for both schedulers
REGIMES = {"api": (200.0, 400), "cpu": (5000.0, 10000)}
REGIME_TITLES = {"api": "API-bound (client QPS 200 / burst 400)", "cpu": "CPU-bound (client QPS 5000 / burst 10000)"}
MODE_TITLES = {"precreated": "pods created first, timed from scheduler start",
               "running": "pods created while the scheduler runs, timed from the first create"}


# --------------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile: the ceil(q*n)-th smallest value (q=0: the smallest, q=1: the largest)."""
    s = sorted(values)
    if not s:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    k = max(1, math.ceil(q * len(s) - 1e-9))
    return s[k - 1]


@dataclass(frozen=True)
class BindStats:
    """Bind times of one round, in seconds after its start."""

    pods: int
    first: float
    median: float
    p90: float
    last: float

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.last if self.last > 0 else math.inf


def bind_stats(bind_times: Iterable[float], start: float) -> BindStats:
    """``bind_times`` (absolute, same clock as ``start``) -> first/median/p90/last after ``start``."""
    offsets = sorted(t - start for t in bind_times)
    if not offsets:
        raise ValueError("no binds")
    return BindStats(len(offsets), offsets[0], percentile(offsets, 0.5), percentile(offsets, 0.9), offsets[-1])


def rank_lags(earlier: Iterable[float], later: Iterable[float]) -> list[float]:
    """The k-th smallest of ``later`` minus the k-th smallest of ``earlier``, for every k both have: how far
    one stage of a pipeline runs behind the previous one (e.g. the k-th claim created after the k-th pod),
    without having to pair the objects up."""
    a, b = sorted(earlier), sorted(later)
    return [y - x for x, y in zip(a, b, strict=False)]


# --------------------------------------------------------------------------------------------------
# /proc
# --------------------------------------------------------------------------------------------------


def _stat_fields(stat_text: str) -> list[str]:
    """The fields of /proc/<pid>/stat after ``comm`` (which may hold spaces and parentheses): index 0 is
    field 3 (state)."""
    return stat_text[stat_text.rindex(")") + 2:].split()


def proc_cpu_ticks(stat_text: str) -> int:
    """utime + stime + cutime + cstime (fields 14-17 of proc(5)), in clock ticks."""
    f = _stat_fields(stat_text)
    return int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])


def proc_start_ticks(stat_text: str) -> int:
    """starttime (field 22): clock ticks after boot at which the process started."""
    return int(_stat_fields(stat_text)[19])


def machine_ticks(proc_stat_text: str) -> tuple[int, int]:
    """(busy, total) ticks of all CPUs from /proc/stat's ``cpu`` line; idle and iowait are not busy
    (guest time is already inside user and nice, so it is not added again)."""
    for line in proc_stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            v = [int(x) for x in parts[1:9]]
            v += [0] * (8 - len(v))
            total = sum(v)
            return total - v[3] - v[4], total
    raise ValueError("no cpu line in /proc/stat")


def cores_between(
    before: Mapping[str, float], after: Mapping[str, float], wall: float, machine_busy: float, machine_total: float,
    ncpu: int,
) -> dict[str, float]:
    """Cores used over ``wall`` seconds by each process (CPU-seconds ``after`` - ``before``; a process missing
    from ``before`` started inside the window, from 0), ``machine`` (``ncpu`` x the busy share of all CPU time
    in the window: ``machine_busy`` / ``machine_total``, both deltas) and ``others``: the machine minus every
    named process, i.e. whatever else runs on this shared machine (never below 0)."""
    if wall <= 0:
        return {}
    out = {k: (v - before.get(k, 0.0)) / wall for k, v in after.items()}
    machine = ncpu * machine_busy / machine_total if machine_total > 0 else 0.0
    out["machine"] = machine
    out["others"] = max(0.0, machine - sum(v for k, v in out.items() if k != "machine"))
    return out


# --------------------------------------------------------------------------------------------------
# the audit log
# --------------------------------------------------------------------------------------------------


def rfc3339_seconds(ts: str) -> float:
    """``2026-11-25T08:32:17.904532Z`` -> seconds since the epoch."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class AuditEntry:
    """One request as the API server's audit log recorded it (stage ResponseComplete)."""

    user: str
    user_agent: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    received: float  # requestReceivedTimestamp, epoch seconds
    completed: float  # stageTimestamp

    @property
    def key(self) -> str:
        """``verb resource[.group][/subresource]``: ``create pods/binding``,
        ``update resourceclaims.resource.k8s.io/status``, ``create events.events.k8s.io``."""
        r = self.resource + (f".{self.group}" if self.group else "")
        return f"{self.verb} {r}" + (f"/{self.subresource}" if self.subresource else "")

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def is_event(self) -> bool:
        return self.resource == EVENT_RESOURCE


def parse_audit_line(line: str) -> AuditEntry | None:
    """An audit.k8s.io/v1 Event (JSON, one a line) -> :class:`AuditEntry`; None for any other stage
    (RequestReceived, ResponseStarted, Panic: one request must be counted once) and for blank or torn lines
    (the log is read while the API server writes it)."""
    line = line.strip()
    if not line:
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict) or ev.get("stage") != "ResponseComplete":
        return None
    ref = ev.get("objectRef") or {}
    user = ev.get("user") or {}
    # a request made on someone's behalf (impersonation) is counted for the impersonated user
    user = ev.get("impersonatedUser") or user
    status = ev.get("responseStatus") or {}
    return AuditEntry(
        user=str(user.get("username", "")),
        user_agent=str(ev.get("userAgent", "")),
        verb=str(ev.get("verb", "")),
        group=str(ref.get("apiGroup", "")),
        resource=str(ref.get("resource", "")),
        subresource=str(ref.get("subresource", "")),
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        code=int(status.get("code", 0) or 0),
        received=rfc3339_seconds(ev["requestReceivedTimestamp"]) if ev.get("requestReceivedTimestamp") else 0.0,
        completed=rfc3339_seconds(ev["stageTimestamp"]) if ev.get("stageTimestamp") else 0.0,
    )


def parse_audit(lines: Iterable[str]) -> list[AuditEntry]:
    return [e for e in map(parse_audit_line, lines) if e is not None]


@dataclass
class WriteCount:
    """One client's mutating requests: ``writes`` (by :attr:`AuditEntry.key`, Events excluded), ``events``
    (Event writes by key) and ``failed`` (responses >= 400, counted in the two above as well)."""

    writes: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    failed: int = 0

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())

    @property
    def total_events(self) -> int:
        return sum(self.events.values())


def count_writes(
    entries: Iterable[AuditEntry], user: str, since: float | None = None, until: float | None = None
) -> WriteCount:
    """Count ``user``'s mutating requests whose response completed in [``since``, ``until``] (epoch s)."""
    out = WriteCount()
    for e in entries:
        if e.user != user or not e.is_write:
            continue
        if (since is not None and e.completed < since) or (until is not None and e.completed > until):
            continue
        (out.events if e.is_event else out.writes)[e.key] += 1
        if e.code >= 400:
            out.failed += 1
    return out


def completion_times(
    entries: Iterable[AuditEntry], *, verb: str, resource: str, namespace: str, subresource: str = "",
    user: str | None = None, user_agent_contains: str = "", ok_only: bool = True,
) -> list[float]:
    """When the matching requests completed (epoch s), e.g. kube-controller-manager's claim creates."""
    return sorted(e.completed for e in entries
                  if e.verb == verb and e.resource == resource and e.subresource == subresource
                  and e.namespace == namespace and user_agent_contains in e.user_agent
                  and (user is None or e.user == user) and (not ok_only or 200 <= e.code < 300))


# --------------------------------------------------------------------------------------------------
# rounds, medians, ratios
# --------------------------------------------------------------------------------------------------


@dataclass
class Round:
    """One scheduler's run over the workload."""

    scheduler: str  # OURS or THEIRS
    regime: str  # "api" or "cpu"
    mode: str  # "precreated" or "running"
    index: int  # 1-based within (scheduler, regime, mode)
    bind: BindStats
    cpu_seconds: float
    writes: WriteCount | None = None  # None without an audit log
    audit: bool = True
    #: CPU cores used during the round (start -> last bind) by: "machine" (all of it), "others" (processes
    #: outside this benchmark), "kube-apiserver", "etcd", "kube-controller-manager", "kwok", "harness", ...
    cores: dict[str, float] = field(default_factory=dict)
    window: float = 0.0  # seconds over which ``cores`` was measured
    ready: float | None = None  # /readyz answered, seconds after start (pods created first)
    ready_cpu: float | None = None  # the scheduler's CPU-seconds when /readyz answered (pods created first)
    pipeline: Pipeline | None = None  # created-while-running rounds with the audit log

    @property
    def pods(self) -> int:
        return self.bind.pods

    @property
    def writes_per_pod(self) -> float | None:
        return None if self.writes is None else self.writes.total_writes / self.pods

    @property
    def events_per_pod(self) -> float | None:
        return None if self.writes is None else self.writes.total_events / self.pods

    @property
    def pods_per_cpu_second(self) -> float:
        return self.pods / self.cpu_seconds if self.cpu_seconds > 0 else math.inf


METRICS: dict[str, Callable[[Round], float | None]] = {
    "pods/s": lambda r: r.bind.pods_per_second,
    "first": lambda r: r.bind.first,
    "median": lambda r: r.bind.median,
    "p90": lambda r: r.bind.p90,
    "writes/pod": lambda r: r.writes_per_pod,
    "events/pod": lambda r: r.events_per_pod,
    "CPU-s": lambda r: r.cpu_seconds,
    "pods/CPU-s": lambda r: r.pods_per_cpu_second,
    "others": lambda r: r.cores.get("others"),
}
#: figures printed for context, not compared: the cores other processes used during the round
NO_RATIO = frozenset({"others"})
#: the figures where more is better (the others are times or costs)
HIGHER_IS_BETTER = frozenset({"pods/s", "pods/CPU-s"})


def median_or_none(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def medians(rounds: Iterable[Round]) -> dict[str, float | None]:
    """The median of every :data:`METRICS` figure over ``rounds`` (statistics.median: the mean of the two
    middle values for an even count)."""
    rs = list(rounds)
    return {name: median_or_none(f(r) for r in rs) for name, f in METRICS.items()}


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or math.isinf(a) or math.isinf(b):
        return None
    return a / b


def group(rounds: Iterable[Round], audit: bool | None = True) -> dict[tuple[str, str], dict[str, list[Round]]]:
    """(regime, mode) -> scheduler -> rounds, in first-seen order; ``audit`` keeps only the rounds with (True)
    or without (False) the audit log, None keeps all."""
    out: dict[tuple[str, str], dict[str, list[Round]]] = {}
    for r in rounds:
        if audit is not None and r.audit != audit:
            continue
        out.setdefault((r.regime, r.mode), {}).setdefault(r.scheduler, []).append(r)
    return out


def ratios(
    rounds: Iterable[Round], ours: str = OURS, theirs: str = THEIRS
) -> dict[tuple[str, str], dict[str, float | None]]:
    """(regime, mode) -> figure -> median(ours) / median(theirs)."""
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    for key, by in group(rounds).items():
        if ours in by and theirs in by:
            mo, mt = medians(by[ours]), medians(by[theirs])
            out[key] = {k: ratio(mo[k], mt[k]) for k in METRICS if k not in NO_RATIO}
    return out


# --------------------------------------------------------------------------------------------------
# printing
# --------------------------------------------------------------------------------------------------


def _f(v: float | None, digits: int = 1, suffix: str = "") -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.{digits}f}{suffix}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"x{v:.2f}"


ROUND_HEADER = (f"{'round':<42} {'pods/s':>7} {'first':>6} {'median':>7} {'p90':>6} {'last':>6} "
                f"{'writes/pod':>10} {'events/pod':>10} {'CPU-s':>6} {'pods/CPU-s':>10} {'machine':>7} {'others':>6}")


def round_label(r: Round) -> str:
    return f"{r.scheduler} {r.regime}/{r.mode} #{r.index}" + ("" if r.audit else " (no audit)")


def round_line(r: Round) -> str:
    """One row under :data:`ROUND_HEADER`; times in seconds after start, machine/others in cores."""
    b = r.bind
    return (f"{round_label(r):<42} {_f(b.pods_per_second):>7} {_f(b.first, 2):>6} {_f(b.median, 2):>7} "
            f"{_f(b.p90, 2):>6} {_f(b.last, 2):>6} {_f(r.writes_per_pod, 2):>10} {_f(r.events_per_pod, 2):>10} "
            f"{_f(r.cpu_seconds, 2):>6} {_f(r.pods_per_cpu_second):>10} {_f(r.cores.get('machine'), 2):>7} "
            f"{_f(r.cores.get('others'), 2):>6}")


def writes_breakdown(r: Round) -> str:
    """``writes per pod: update resourceclaims.resource.k8s.io 1.00, ...; events: create events 0.40``."""
    if r.writes is None:
        return "writes per pod: (no audit log)"
    w = r.writes

    def fmt(c: Counter[str]) -> str:
        items = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join(f"{k} {n / r.pods:.2f}" for k, n in items) or "none"

    failed = f"; {w.failed} failed (>= 400), counted above" if w.failed else ""
    return f"writes per pod: {fmt(w.writes)}; events per pod: {fmt(w.events)}{failed}"


def client_rates(r: Round) -> str:
    """The scheduler's write rate over start -> last bind against its client limit: at the limit the round
    is API-bound. (dra-scheduler sends its Events through the same client; kube-scheduler through a second
    one with the same limit: ``createClients`` in cmd/kube-scheduler/app/options/options.go.)"""
    if r.writes is None:
        return "write rate: (no audit log)"
    qps = REGIMES.get(r.regime, (0.0, 0))[0]
    w, e = r.writes.total_writes / r.bind.last, r.writes.total_events / r.bind.last
    limit = f" (client limit {qps:g}/s)" if qps else ""
    return f"write rate start -> last bind: {w:.0f}/s + Events {e:.0f}/s{limit}"


def summary_table(rounds: Sequence[Round], ours: str = OURS, theirs: str = THEIRS) -> str:
    """Per (regime, mode): the medians of each scheduler over its rounds and the ratio ours/theirs. Only
    rounds with the audit log (the main rounds)."""
    names = list(METRICS)
    head = f"{'':<16} {'rounds':>6} " + " ".join(f"{n:>10}" for n in names)
    lines: list[str] = []
    rat = ratios(rounds, ours, theirs)
    for (regime, mode), by in group(rounds).items():
        lines.append(f"{REGIME_TITLES.get(regime, regime)}; {MODE_TITLES.get(mode, mode)}")
        lines.append(head)
        for sched in (ours, theirs):
            if sched not in by:
                continue
            m = medians(by[sched])
            digits = {"pods/s": 1, "pods/CPU-s": 1}
            lines.append(f"{sched:<16} {len(by[sched]):>6} " + " ".join(
                f"{_f(m[n], digits.get(n, 2)):>10}" for n in names))
        if (regime, mode) in rat:
            lines.append(f"{'ours/theirs':<16} {'':>6} " + " ".join(
                f"{_x(rat[(regime, mode)].get(n)):>10}" for n in names))
        lines.append("")
    lines.append("times: seconds after start (median over rounds of each round's first / median / p90 bind); "
                 "pods/s and pods/CPU-s: more is better; ratio = ours / theirs of the medians; others: cores used "
                 "by processes outside the benchmark during the rounds (the machine is shared)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# what bounds the created-while-running mode
# --------------------------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """The stages one pod goes through when it is created while the scheduler runs, as absolute times on
    one clock: created (pod create completed), claim (kube-controller-manager created its claim), ready
    (kube-controller-manager wrote ``status.resourceClaimStatuses``: the scheduler can only now find the
    claim), bound. Lists need not be paired: they are compared rank by rank (:func:`rank_lags`)."""

    start: float
    created: list[float]
    claim: list[float]
    ready: list[float]
    bound: list[float]


def _span_rate(times: Sequence[float], start: float) -> tuple[float, float]:
    end = max(times) - start
    return end, (len(times) / end if end > 0 else math.inf)


#: a stage "keeps up" when it ends within this share of the whole time after the previous stage ended
KEEPS_UP = 0.15


def bounding_stage(tails: Sequence[tuple[str, float]], keeps_up: float = KEEPS_UP) -> str:
    """``tails``: (stage, how long after the previous stage's end it ended), in pipeline order. The stage the
    pipeline is bound by: the last stage that does not keep up with the one before it (its tail exceeds
    ``keeps_up`` of the total); the first stage when every later one keeps up."""
    total = sum(t for _, t in tails)
    for name, tail in reversed(tails[1:]):
        if tail > keeps_up * total:
            return name
    return tails[0][0]


def explain_pipeline(p: Pipeline, cores: Mapping[str, float] | None = None) -> list[str]:
    """The stages' ends and rates, the lag of each stage behind the previous one (rank by rank), and which
    stage the round's pods/s is bound by (:func:`bounding_stage`)."""
    lines: list[str] = []
    stages = [("pods created (harness)", p.created), ("claims created (kube-controller-manager)", p.claim),
              ("pod status written (kube-controller-manager)", p.ready), ("pods bound (scheduler)", p.bound)]
    stages = [(n, t) for n, t in stages if t]
    prev_end = 0.0
    tails: list[tuple[str, float]] = []
    prev: list[float] | None = None
    for name, times in stages:
        end, rate = _span_rate(times, p.start)
        lag = ""
        if prev is not None:
            lags = rank_lags(prev, times)
            lag = f"; k-th after the previous stage's k-th: median {percentile(lags, 0.5):.2f}s, " \
                  f"p90 {percentile(lags, 0.9):.2f}s"
        lines.append(f"  {name:<46} {len(times):>5} done at {end:6.2f}s = {rate:6.1f}/s{lag}")
        tails.append((name, end - prev_end))
        prev_end, prev = end, times
    total = prev_end
    if total > 0 and tails:
        share = ", ".join(f"{n.split(' (')[0]} {t:.2f}s ({100 * t / total:.0f}%)" for n, t in tails)
        lines.append(f"  first create -> last bind {total:.2f}s, added by each stage after the previous one "
                     f"ended: {share}")
        lines.append(f"  => bound by: {bounding_stage(tails)} (each later stage ends within "
                     f"{100 * KEEPS_UP:.0f}% of the total after the previous one, or is the bound itself)")
    if cores:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(cores.items(), key=lambda kv: -kv[1]))
        lines.append(f"  CPU cores used meanwhile: {parts}")
    return lines


def pipeline_ends(p: Pipeline) -> dict[str, float]:
    """Seconds after start at which each stage's last item was done."""
    return {name: max(ts) - p.start for name, ts in
            (("created", p.created), ("claim", p.claim), ("ready", p.ready), ("bound", p.bound)) if ts}


STAGE_SHORT = {"pods created (harness)": "pod creation", "claims created (kube-controller-manager)": "claims",
               "pod status written (kube-controller-manager)": "claims", "pods bound (scheduler)": "scheduler"}


def stage_tails(p: Pipeline) -> list[tuple[str, float]]:
    """(stage, how long after the previous stage's end it ended), in pipeline order; the first stage's tail
    is its end after start."""
    stages = [("pods created (harness)", p.created), ("claims created (kube-controller-manager)", p.claim),
              ("pod status written (kube-controller-manager)", p.ready), ("pods bound (scheduler)", p.bound)]
    out: list[tuple[str, float]] = []
    prev_end = 0.0
    for name, times in stages:
        if times:
            end = max(times) - p.start
            out.append((name, end - prev_end))
            prev_end = end
    return out


def running_summary(rounds: Sequence[Round], ours: str = OURS, theirs: str = THEIRS) -> list[str]:
    """For the created-while-running rounds: the time to the last bind of each scheduler split into the pods'
    creation, kube-controller-manager's claims and the scheduler's own tail (medians over rounds), which
    stage bound each round (:func:`bounding_stage`), the pods/s ceiling the creation and the claims leave
    (pods / their end), and the pods/s ratio next to the pods-created-first one."""
    lines: list[str] = []
    rat = ratios(rounds, ours, theirs)
    for (regime, mode), by in group(rounds).items():
        if mode != "running":
            continue
        lines.append(f"{REGIME_TITLES.get(regime, regime)}, pods created while the scheduler runs:")
        verdicts: Counter[str] = Counter()
        for sched in (ours, theirs):
            rs = [r for r in by.get(sched, []) if r.pipeline is not None]
            if not rs:
                continue
            parts: dict[str, list[float]] = {"pod creation": [], "claims": [], "scheduler": []}
            ceilings: list[float] = []
            for r in rs:
                assert r.pipeline is not None
                tails = stage_tails(r.pipeline)
                if not tails:
                    continue
                verdicts[STAGE_SHORT[bounding_stage(tails)]] += 1
                split = dict.fromkeys(parts, 0.0)
                for name, t in tails:
                    split[STAGE_SHORT[name]] += t
                for k, v in split.items():
                    parts[k].append(v)
                before_sched = split["pod creation"] + split["claims"]
                if before_sched > 0:
                    ceilings.append(r.pods / before_sched)
            m = {k: median_or_none(v) for k, v in parts.items()}
            cores = {k: median_or_none(r.cores.get(k) for r in rs) for k in
                     ("machine", "kube-apiserver", "scheduler", "kube-controller-manager", "etcd", "kwok",
                      "harness", "others")}
            core_s = ", ".join(f"{k} {v:.2f}" for k, v in cores.items() if v is not None)
            created_rate = median_or_none(
                r.pods / t for r in rs if r.pipeline is not None for n, t in stage_tails(r.pipeline)[:1] if t > 0)
            lines.append(f"  {sched}: last bind {_f(median_or_none(r.bind.last for r in rs), 2)}s = pod creation "
                         f"{_f(m['pod creation'], 2)}s ({_f(created_rate)} pods/s) + claims after the last create "
                         f"{_f(m['claims'], 2)}s + the scheduler's own tail {_f(m['scheduler'], 2)}s; ceiling left "
                         f"by creation and claims {_f(median_or_none(ceilings))} pods/s; cores: {core_s}")
        if verdicts:
            lines.append("  bound by (rounds): " + ", ".join(f"{k} {n}" for k, n in verdicts.most_common()))
        r_run = rat.get((regime, "running"), {}).get("pods/s")
        r_pre = rat.get((regime, "precreated"), {}).get("pods/s")
        if r_run is not None:
            pre = f" (pods created first: {_x(r_pre)})" if r_pre is not None else ""
            lines.append(f"  pods/s ours/theirs {_x(r_run)}{pre}. While pods are created the scheduler shares the "
                         f"CPU with the harness, kube-apiserver and kube-controller-manager: where the creation "
                         f"bounds a round, the ratio is the ratio of the creation times plus the difference of the "
                         f"tails above, not the schedulers' own speed")
    return lines


def audit_effect(rounds: Sequence[Round]) -> list[str]:
    """Rounds without the audit log against the audited rounds of the same scheduler, regime and mode: the
    median pods/s and median bind, and kube-apiserver's CPU-seconds per pod."""
    lines: list[str] = []
    off = group(rounds, audit=False)
    on = group(rounds, audit=True)
    for key, by in off.items():
        for sched, rs in by.items():
            ref = on.get(key, {}).get(sched)
            if not ref:
                continue
            m_off, m_on = medians(rs), medians(ref)

            def api_cpu_per_pod(rr: Sequence[Round]) -> float | None:
                return median_or_none(r.cores["kube-apiserver"] * r.window / r.pods if "kube-apiserver" in r.cores
                                      else None for r in rr)

            a_off, a_on = api_cpu_per_pod(rs), api_cpu_per_pod(ref)
            others = f"; others {_f(m_off['others'], 2)} vs {_f(m_on['others'], 2)} cores"
            lines.append(
                f"  {sched} {key[0]}/{key[1]}: pods/s {_f(m_off['pods/s'])} without the audit log "
                f"({len(rs)} round(s)) vs {_f(m_on['pods/s'])} with it (median of {len(ref)}): "
                f"{_x(ratio(m_off['pods/s'], m_on['pods/s']))}; median bind {_f(m_off['median'], 2)}s vs "
                f"{_f(m_on['median'], 2)}s; kube-apiserver CPU-ms per pod "
                f"{_f(None if a_off is None else 1000 * a_off)} "
                f"vs {_f(None if a_on is None else 1000 * a_on)}{others}")
    return lines
