"""The pure parts of ``make soak`` (:mod:`e2e.soak`): the invariant checks over listed objects, the audit-log
fence check (no replica writes while it does not hold the Lease), takeover times, the RSS slope, and the
plots (an SVG written by hand, a terminal sparkline). No I/O here, so each piece can be reasoned about (and
tested) on its own.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from e2e.throughput_report import WRITE_VERBS, AuditEntry

JSON = dict[str, Any]

# --------------------------------------------------------------------------------------------------
# quantities
# --------------------------------------------------------------------------------------------------

_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(q: Any) -> float:
    """A Kubernetes resource.Quantity (``81559Mi``, ``500m``, ``2``, ``1e3``) as a float; raises ValueError."""
    m = _QTY.match(str(q).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {q!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


# --------------------------------------------------------------------------------------------------
# invariants over one consistent list of objects
# --------------------------------------------------------------------------------------------------

DeviceKey = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True)
class DeviceInfo:
    allow_multiple: bool
    capacity: Mapping[str, float]


def device_index(slices: Iterable[JSON]) -> dict[DeviceKey, DeviceInfo]:
    """(driver, pool, device) -> whether it allows several allocations and its capacities, from ResourceSlices."""
    out: dict[DeviceKey, DeviceInfo] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        for d in spec.get("devices") or []:
            cap: dict[str, float] = {}
            for name, c in (d.get("capacity") or {}).items():
                try:
                    cap[name] = parse_quantity((c or {}).get("value"))
                except ValueError:
                    continue
            out[(driver, pool, d.get("name", ""))] = DeviceInfo(bool(d.get("allowMultipleAllocations")), cap)
    return out


def device_conflicts(claims: Iterable[JSON], devices: Mapping[DeviceKey, DeviceInfo]) -> list[str]:
    """Devices in more than one allocation that may not be: a device is counted twice unless its slice says
    ``allowMultipleAllocations`` (consumable capacity, results with a ``shareID``); such a shared device is a
    violation only when the capacity its allocations consume exceeds what it has. Admin-access results do
    not count (they do not consume the device). A device no slice publishes right now (a slice being
    republished) is treated as exclusive."""
    users: dict[DeviceKey, list[tuple[str, JSON]]] = defaultdict(list)
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation")
        if not alloc:
            continue
        key = f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}"
        for r in (alloc.get("devices") or {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            users[(r.get("driver", ""), r.get("pool", ""), r.get("device", ""))].append((key, r))
    problems: list[str] = []
    for dev, us in sorted(users.items()):
        if len(us) < 2:
            continue
        info = devices.get(dev)
        names = ", ".join(sorted(f"{k}" + (f" (shareID {r['shareID']})" if r.get("shareID") else "") for k, r in us))
        if info is None or not info.allow_multiple:
            problems.append(f"device {'/'.join(dev)} in {len(us)} allocations: {names}")
            continue
        used: dict[str, float] = defaultdict(float)
        for _, r in us:
            for name, q in (r.get("consumedCapacity") or {}).items():
                try:
                    used[name] += parse_quantity(q)
                except ValueError:
                    continue
        over = [f"{n} {used[n]:g} > {info.capacity.get(n, 0):g}" for n in sorted(used)
                if used[n] > info.capacity.get(n, 0) * (1 + 1e-9)]
        if over:
            problems.append(f"shared device {'/'.join(dev)} over capacity ({'; '.join(over)}): {names}")
    return problems


def pod_key(p: JSON) -> str:
    return f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}"


def stale_reservations(claims: Iterable[JSON], pods: Iterable[JSON]) -> dict[tuple[str, str], str]:
    """(claim key, pod uid) -> description, for every ``reservedFor`` entry naming a pod that does not exist
    (the caller ages them: kube-controller-manager removes such entries, not at once)."""
    live = {p["metadata"]["uid"] for p in pods}
    out: dict[tuple[str, str], str] = {}
    for c in claims:
        key = f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}"
        for r in (c.get("status") or {}).get("reservedFor") or []:
            if r.get("resource", "pods") == "pods" and r.get("uid") not in live:
                out[(key, str(r.get("uid")))] = f"claim {key} reserved for pod {r.get('name')} (uid {r.get('uid')})"
    return out


def partial_gangs(pods: Iterable[JSON], unit_label: str, kind_label: str) -> dict[str, str]:
    """gang unit -> description, for every gang with members bound and other (existing, not terminating)
    members not bound."""
    by_unit: dict[str, list[JSON]] = defaultdict(list)
    for p in pods:
        labels = p["metadata"].get("labels") or {}
        if labels.get(kind_label) == "gang" and unit_label in labels:
            by_unit[labels[unit_label]].append(p)
    out: dict[str, str] = {}
    for unit, members in by_unit.items():
        bound = sorted(p["metadata"]["name"] for p in members if p["spec"].get("nodeName"))
        waiting = sorted(p["metadata"]["name"] for p in members
                         if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))
        if bound and waiting:
            out[unit] = f"gang {unit}: bound {bound}, not bound {waiting}"
    return out


def unexplained_pending(pods: Iterable[JSON]) -> dict[str, str]:
    """pod key -> what its PodScheduled condition says, for every unbound, not terminating pod that lacks a
    ``PodScheduled=False`` condition with a message (the caller ages them)."""
    out: dict[str, str] = {}
    for p in pods:
        if p["spec"].get("nodeName") or p["metadata"].get("deletionTimestamp"):
            continue
        cond = next((c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
                    None)
        if cond is None or cond.get("status") != "False" or not (cond.get("message") or "").strip():
            out[pod_key(p)] = f"pod {pod_key(p)} pending without a reason (PodScheduled: {cond})"
    return out


# --------------------------------------------------------------------------------------------------
# the fence check on the audit log
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseWrite:
    slot: str
    received: float
    completed: float
    release: bool


@dataclass
class FenceResult:
    violations: list[str] = field(default_factory=list)  # state writes (bindings, claims, pods, PodGroups)
    event_violations: list[str] = field(default_factory=list)  # Event writes (reported, not failed on)
    lease_writes: list[LeaseWrite] = field(default_factory=list)
    writes: dict[str, dict[str, int]] = field(default_factory=dict)  # slot -> key -> count
    binds: list[tuple[float, str, str]] = field(default_factory=list)  # (received, slot, pod key) of Bindings


def is_lease_write(e: AuditEntry, namespace: str, name: str) -> bool:
    return (e.resource == "leases" and e.group == "coordination.k8s.io" and e.namespace == namespace
            and e.name == name and e.verb in ("create", "update", "patch"))


def fence_check(
    entries: Sequence[AuditEntry],
    slot_of: Callable[[AuditEntry], str | None],
    lease_namespace: str,
    lease_name: str,
    lease_duration: float,
    terminated: Mapping[str, float] | None = None,
    until: float | None = None,
) -> FenceResult:
    """Every write a replica made (attributed by ``slot_of``, from the request's user), judged against who
    held the Lease when the API server *received* it:

    * the holder is whoever made the last successful Lease write completed at or before that instant;
    * a write is fine when that holder is the writer and its last Lease write was received no more than
      ``lease_duration`` before (a standby may take the Lease once it has not been renewed for that long);
    * anything else is a violation: a write before the replica ever held the Lease, while another replica
      held it, after the writer's Lease expired, or after it released it (a Lease write of a replica after
      it was sent SIGTERM, ``terminated[slot]``, is its release on shutdown).

    Failed writes (4xx) count too: the attempt is what a fence must prevent; the API server refusing it is
    luck. Writes of Events are listed apart. Writes received after ``until`` are ignored (end of the run)."""
    res = FenceResult()
    term = terminated or {}
    lw: list[LeaseWrite] = []
    for e in entries:
        s = slot_of(e)
        if s is None or e.code >= 400 or not is_lease_write(e, lease_namespace, lease_name):
            continue
        lw.append(LeaseWrite(s, e.received, e.completed, s in term and e.received >= term[s]))
    lw.sort(key=lambda w: w.completed)
    res.lease_writes = lw
    done = [w.completed for w in lw]
    writes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for e in sorted(entries, key=lambda e: e.received):
        s = slot_of(e)
        if s is None or e.verb not in WRITE_VERBS or is_lease_write(e, lease_namespace, lease_name):
            continue
        if until is not None and e.received > until:
            continue
        writes[s][e.key] += 1
        if e.verb == "create" and e.resource == "pods" and e.subresource == "binding" and e.code < 300:
            res.binds.append((e.received, s, f"{e.namespace}/{e.name}"))
        t = e.received
        i = bisect.bisect_right(done, t) - 1
        why = ""
        if i < 0:
            why = "before any replica held the Lease"
        else:
            holder = lw[i]
            if holder.slot != s:
                why = (f"while replica {holder.slot} held the Lease (its Lease write completed "
                       f"{t - holder.completed:.3f}s earlier)")
            elif holder.release:
                why = f"after it released the Lease ({t - holder.completed:.3f}s earlier)"
            elif t - holder.received > lease_duration:
                why = (f"{t - holder.received - lease_duration:.3f}s after its Lease expired (last renewal received "
                       f"{t - holder.received:.3f}s earlier, lease {lease_duration:g}s)")
        if why:
            obj = f"{e.namespace + '/' if e.namespace else ''}{e.name}"
            msg = f"replica {s}: {e.key} {obj} (HTTP {e.code}) received at {_clock(t)} {why}"
            (res.event_violations if e.is_event else res.violations).append(msg)
    res.writes = {s: dict(k) for s, k in writes.items()}
    return res


def leader_spans(lease_writes: Sequence[LeaseWrite], lease_duration: float,
                 end: float) -> list[tuple[str, float, float]]:
    """(slot, from, to) of each stretch a replica held the Lease, from its successful Lease writes: from the
    first write of a stretch to the next replica's, its release, or its last renewal + ``lease_duration``."""
    spans: list[tuple[str, float, float]] = []
    cur: tuple[str, float, float] | None = None  # slot, start, last renewal received

    def close(at: float) -> None:
        if cur is not None:
            spans.append((cur[0], cur[1], min(at, cur[2] + lease_duration)))

    for w in lease_writes:
        if cur is not None and (w.slot != cur[0] or w.completed - cur[2] > lease_duration):
            close(w.completed)
            cur = None
        if w.release:
            if cur is not None:
                spans.append((cur[0], cur[1], w.completed))
            cur = None
            continue
        cur = (w.slot, w.completed, w.received) if cur is None else (cur[0], cur[1], w.received)
    close(end)
    return spans


@dataclass
class Fault:
    kind: str  # kill-9 | sigstop | etcd-restart | apiserver-restart
    at: float  # epoch seconds: the signal sent / the component stopped
    slot: str | None  # the leader at that moment
    pid: int | None = None
    note: str = ""
    recovered: float | None = None  # epoch: the driver saw a live leader again
    old_restarted: float | None = None  # epoch: the old leader's slot runs a new process (kill -9, SIGSTOP)
    back: float | None = None  # epoch: the restarted component is serving again (etcd, kube-apiserver)


@dataclass
class Takeover:
    fault: Fault
    last_renewal: float | None  # the old leader's last Lease write received before the fault
    acquired: float | None  # first successful Lease write after the fault by the new holder
    acquired_by: str | None
    first_bind: float | None  # first Binding after the fault by the new holder
    first_bind_by: str | None
    new_process: bool = False  # the Lease went to another process (another replica, or a restarted one)

    def line(self, lease_duration: float, t0: float) -> str:
        f = self.fault
        parts = [f"{f.kind:<17} at {f.at - t0:7.1f}s, leader {f.slot or '?'}{f' (pid {f.pid})' if f.pid else ''}:"]
        if self.last_renewal is not None and f.kind in ("kill-9", "sigstop"):
            exp = self.last_renewal + lease_duration
            parts.append(f"lease expiry {exp - f.at:+.2f}s")
        if f.back is not None:
            parts.append(f"serving again {f.back - f.at:+.2f}s")
        if self.acquired is not None:
            who = (f"taken by {self.acquired_by}" + (" (restarted)" if self.acquired_by == f.slot else "")
                   if self.new_process else f"renewed by {self.acquired_by}")
            parts.append(f"Lease {who} {self.acquired - f.at:+.2f}s")
        else:
            parts.append("no Lease write after it")
        if self.first_bind is not None:
            s = f"next Binding (by {self.first_bind_by}) {self.first_bind - f.at:+.2f}s"
            if self.last_renewal is not None and f.kind in ("kill-9", "sigstop"):
                s += f" = expiry {self.first_bind - (self.last_renewal + lease_duration):+.2f}s"
            parts.append(s)
        else:
            parts.append("no Binding after it")
        return " ".join(parts[:1]) + " " + ", ".join(parts[1:])


def takeovers(faults: Sequence[Fault], fence: FenceResult,
              starts: Mapping[str, Sequence[float]] | None = None) -> list[Takeover]:
    """For each fault, from the audit log: the old leader's last renewal before it, the first Lease write after
    it by another process (kill -9, SIGSTOP: another replica, or the old one's slot once it runs a new process)
    or by any replica once the restarted component serves again (etcd, kube-apiserver: a renewal in flight when
    it went down does not count), and the first Binding by that replica after that."""
    out: list[Takeover] = []
    for f in faults:
        old = [w for w in fence.lease_writes if w.slot == f.slot and w.received <= f.at]
        last = max((w.received for w in old), default=None)
        other = f.kind in ("kill-9", "sigstop")

        def new_holder(w: LeaseWrite, f: Fault = f, other: bool = other) -> bool:
            if not other or w.slot != f.slot:
                return True
            return f.old_restarted is not None and w.received > f.old_restarted

        since = f.at
        if other:
            after = [w for w in fence.lease_writes if w.completed > since and not w.release and new_holder(w)]
            acq = min(after, key=lambda w: w.completed) if after else None
        else:
            acq, since = _after_outage(fence.lease_writes, f.at)
        binds = [b for b in fence.binds if b[0] >= since and (acq is None or b[1] == acq.slot)]
        fb = min(binds) if binds else None
        new_process = acq is not None and (acq.slot != f.slot or any(
            f.at < t < acq.received for t in (starts or {}).get(acq.slot, ())))
        out.append(Takeover(f, last, acq.completed if acq else None, acq.slot if acq else None,
                            fb[0] if fb else None, fb[1] if fb else None, new_process))
    return out


def violation_kinds(violations: Iterable[str]) -> Counter[str]:
    """Violations grouped by what they say once names, numbers and times are blanked out."""
    out: Counter[str] = Counter()
    for v in violations:
        first = v.splitlines()[0] if v else v
        first = re.sub(r"^\[[0-9.]+s\] ", "", first)
        first = re.sub(r"\b[a-z0-9-]+/[a-z]{2}\d{5}[a-z0-9-]*", "<obj>", first)
        first = re.sub(r"\d{2}:\d{2}:\d{2}\.\d+Z", "<time>", first)
        first = re.sub(r"\b\d+\.\d+", "#", first)
        out[first] += 1
    return out


def _after_outage(lease_writes: Sequence[LeaseWrite], at: float, horizon: float = 120.0) -> tuple[LeaseWrite | None,
                                                                                                  float]:
    """The first Lease write after the longest pause in Lease writes that ends within ``horizon`` s after ``at``
    (a control-plane restart: nothing is written while it is down; kube-apiserver may still serve renewals
    during its SIGTERM grace, so the fault's start is not the outage's), and when that pause began."""
    ws = sorted((w for w in lease_writes if not w.release), key=lambda w: w.completed)
    best: tuple[float, LeaseWrite | None, float] = (-1.0, None, at)
    for prev, nxt in itertools.pairwise(ws):
        if nxt.completed <= at or nxt.completed > at + horizon:
            continue
        gap = nxt.completed - max(prev.completed, at)
        if gap > best[0]:
            best = (gap, nxt, max(prev.completed, at))
    return best[1], best[2]


# --------------------------------------------------------------------------------------------------
# RSS
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RssSample:
    t: float  # seconds since the start of the run
    slot: str
    pid: int
    rss_mib: float
    leader: bool
    state: str  # /proc/<pid>/status State letter: R, S, T (stopped) ...


def pooled_slope(segments: Sequence[Sequence[tuple[float, float]]]) -> float | None:
    """Least-squares slope common to several segments, each with its own intercept (the within-segment
    estimator: Σ(x-x̄ₛ)(y-ȳₛ) / Σ(x-x̄ₛ)²), so the level of each process does not pass for growth. x in
    seconds, y in MiB; returns MiB per hour, None when the segments span no time."""
    num = den = 0.0
    for seg in segments:
        if len(seg) < 2:
            continue
        mx = sum(x for x, _ in seg) / len(seg)
        my = sum(y for _, y in seg) / len(seg)
        num += sum((x - mx) * (y - my) for x, y in seg)
        den += sum((x - mx) ** 2 for x, _ in seg)
    return None if den <= 0 else num / den * 3600.0


def leader_segments(samples: Sequence[RssSample], warmup: float, segment_warmup: float,
                    max_gap: float) -> list[list[tuple[float, float]]]:
    """The leader's samples after ``warmup`` s of the run, cut into stretches of one process leading without
    a break (the first ``segment_warmup`` s of each stretch dropped: a new leader re-lists its caches);
    stopped (SIGSTOP) processes excluded."""
    segs: list[list[tuple[float, float]]] = []
    cur: list[tuple[float, float]] = []
    cur_key: tuple[str, int] | None = None
    start = 0.0
    for s in sorted((s for s in samples if s.leader and s.state != "T"), key=lambda s: s.t):
        key = (s.slot, s.pid)
        if key != cur_key or (cur and s.t - cur[-1][0] > max_gap):
            if cur:
                segs.append(cur)
            cur, cur_key, start = [], key, s.t
        if s.t >= warmup and s.t - start >= segment_warmup:
            cur.append((s.t, s.rss_mib))
    if cur:
        segs.append(cur)
    return [g for g in segs if len(g) >= 2]


def process_slopes(samples: Sequence[RssSample], warmup: float) -> dict[tuple[str, int], tuple[float | None, float]]:
    """(slot, pid) -> (slope MiB/h over its samples after ``warmup``, minutes covered)."""
    by: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for s in samples:
        if s.t >= warmup and s.state != "T":
            by[(s.slot, s.pid)].append((s.t, s.rss_mib))
    return {k: (pooled_slope([v]), (v[-1][0] - v[0][0]) / 60 if len(v) > 1 else 0.0) for k, v in by.items()}


# --------------------------------------------------------------------------------------------------
# statistics and plots
# --------------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, math.ceil(p / 100 * len(v)) - 1))
    return v[k]


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], lo: float, hi: float) -> str:
    """One character per value scaled into [lo, hi]; ' ' for None."""
    out = []
    for v in values:
        if v is None:
            out.append(" ")
            continue
        f = 0.0 if hi <= lo else (v - lo) / (hi - lo)
        out.append(SPARK[max(0, min(len(SPARK) - 1, int(f * (len(SPARK) - 1) + 0.5)))])
    return "".join(out)


def bucket(points: Sequence[tuple[float, float]], t_end: float, width: int) -> list[float | None]:
    """The last value in each of ``width`` equal time buckets over [0, t_end]."""
    out: list[float | None] = [None] * width
    for t, v in points:
        i = min(width - 1, max(0, int(t / t_end * width))) if t_end > 0 else 0
        out[i] = v
    return out


def terminal_plot(samples: Sequence[RssSample], marks: Sequence[tuple[float, str]], t_end: float,
                  width: int = 72) -> list[str]:
    """RSS of each replica as a sparkline over the run (one column = t_end/width s), a row showing when it
    led, and a row of fault/maintenance marks."""
    lines: list[str] = []
    slots = sorted({s.slot for s in samples})
    if not slots:
        return ["(no RSS samples)"]
    lo = min(s.rss_mib for s in samples)
    hi = max(s.rss_mib for s in samples)
    for slot in slots:
        ss = [s for s in samples if s.slot == slot]
        vals = bucket([(s.t, s.rss_mib) for s in ss], t_end, width)
        lead = bucket([(s.t, 1.0 if s.leader else 0.0) for s in ss], t_end, width)
        lines.append(f"  {slot} RSS   |{sparkline(vals, lo, hi)}| {lo:.0f}-{hi:.0f} MiB")
        lines.append(f"  {slot} leads |{''.join('=' if v else ' ' for v in lead)}|")
    row = [" "] * width
    for t, ch in marks:
        i = min(width - 1, max(0, int(t / t_end * width))) if t_end > 0 else 0
        row[i] = ch
    lines.append(f"  events  |{''.join(row)}|")
    lines.append(f"  time    |0{' ' * (width - len(f'{t_end / 60:.1f} min') - 1)}{t_end / 60:.1f} min|")
    return lines


COLOURS = {"a": "#1f77b4", "b": "#d62728"}


def rss_svg(samples: Sequence[RssSample], spans: Sequence[tuple[str, float, float]],
            marks: Sequence[tuple[float, str]], t_end: float, title: str) -> str:
    """An SVG line plot of each replica's RSS (one polyline per process), the Lease holder as coloured bars
    under it, and dashed lines at faults and maintenance."""
    w, h, ml, mr, mt, mb = 980, 440, 64, 24, 44, 86
    pw, ph = w - ml - mr, h - mt - mb
    if samples:
        lo = math.floor(min(s.rss_mib for s in samples) / 10) * 10
        hi = math.ceil(max(s.rss_mib for s in samples) / 10) * 10
    else:
        lo, hi = 0, 100
    hi = max(hi, lo + 10)
    t_end = max(t_end, 1.0)

    def x(t: float) -> float:
        return ml + t / t_end * pw

    def y(v: float) -> float:
        return mt + ph - (v - lo) / (hi - lo) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
           f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    step = _nice_step((hi - lo) / 6)
    v = lo
    while v <= hi + 1e-9:
        out.append(f'<line x1="{ml}" y1="{y(v):.1f}" x2="{ml + pw}" y2="{y(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{ml - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    tstep = _nice_step(t_end / 60 / 8) * 60
    t = 0.0
    while t <= t_end + 1e-9:
        out.append(f'<line x1="{x(t):.1f}" y1="{mt + ph}" x2="{x(t):.1f}" y2="{mt + ph + 4}" stroke="#999"/>')
        out.append(f'<text x="{x(t):.1f}" y="{mt + ph + 16}" text-anchor="middle">{t / 60:g}</text>')
        t += tstep
    out.append(f'<text x="{ml + pw / 2}" y="{h - 8}" text-anchor="middle">minutes</text>')
    out.append(f'<text x="16" y="{mt + ph / 2}" text-anchor="middle" transform="rotate(-90 16 {mt + ph / 2})">'
               f'RSS (MiB)</text>')
    for t, label in marks:
        out.append(f'<line x1="{x(t):.1f}" y1="{mt}" x2="{x(t):.1f}" y2="{mt + ph}" stroke="#888" '
                   f'stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(t) + 3:.1f}" y="{mt + 10}" fill="#555" font-size="10" '
                   f'transform="rotate(90 {x(t) + 3:.1f} {mt + 10})">{escape(label)}</text>')
    by_proc: dict[tuple[str, int], list[RssSample]] = defaultdict(list)
    for s in samples:
        by_proc[(s.slot, s.pid)].append(s)
    for (slot, pid), ss in sorted(by_proc.items(), key=lambda kv: kv[1][0].t):
        pts = " ".join(f"{x(s.t):.1f},{y(s.rss_mib):.1f}" for s in sorted(ss, key=lambda s: s.t))
        out.append(f'<polyline fill="none" stroke="{COLOURS.get(slot, "#333")}" stroke-width="1.6" points="{pts}">'
                   f'<title>replica {slot} pid {pid}</title></polyline>')
    for i, slot in enumerate(sorted(COLOURS)):
        yy = mt + ph + 26 + i * 10
        out.append(f'<text x="{ml - 6}" y="{yy + 7}" text-anchor="end" font-size="9">{slot} leads</text>')
        for s_slot, a, b in spans:
            if s_slot == slot:
                out.append(f'<rect x="{x(a):.1f}" y="{yy}" width="{max(x(b) - x(a), 0.5):.1f}" height="7" '
                           f'fill="{COLOURS[slot]}"/>')
    lx = ml + pw - 180
    for i, slot in enumerate(sorted(COLOURS)):
        out.append(f'<line x1="{lx + i * 90}" y1="{mt + 14}" x2="{lx + i * 90 + 20}" y2="{mt + 14}" '
                   f'stroke="{COLOURS[slot]}" stroke-width="2"/>')
        out.append(f'<text x="{lx + i * 90 + 24}" y="{mt + 18}">replica {slot}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def _clock(epoch: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%H:%M:%S.%f")[:-3] + "Z"
