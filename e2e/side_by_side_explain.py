"""Why do kube-scheduler and dra-scheduler place a pod differently? Each decision compared on the SAME state.

    python -m e2e.side_by_side_explain [--keep]      # own control plane (E2E_SBS_RUN_DIR)

The workload of :mod:`e2e.side_by_side` is sent to kube-scheduler 1.37.2 one pod at a time (``--serial``)
with ``--v=10``, which logs every score plugin's weighted, normalised score for every feasible node
("Plugin scored node for pod", ``pkg/scheduler/schedule_one.go``). Then, for each pod kube-scheduler bound,
dra-scheduler's own framework decides that pod in-process (``scheduler.simulate.simulation``) on exactly the state
kube-scheduler saw: the nodes, slices and classes, every earlier pod where kube-scheduler put it with its
claims and bound PVCs, the later PVCs unbound. Its scores per plugin are recorded the same way.

Per pod: ``same`` (same node), ``tie`` (another node but kube-scheduler scored both the same: it breaks ties at
random, we take the first in node order) or ``DIFF`` with the plugins whose scores disagree on the two nodes.
This compares filters and scores alone, free of ordering, batching and tie-break effects.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from e2e import cluster
from e2e import side_by_side as sbs
from e2e.fleet import JSON, Kube

_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_scores(log: str, namespaces: Sequence[str]) -> dict[str, dict[str, dict[str, int]]]:
    """pod key -> node -> plugin -> weighted score, from kube-scheduler's --v=10 log (the last attempt of
    each pod wins: a pod retried after an unschedulable attempt is scored again)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for line in log.splitlines():
        if '"Plugin scored node for pod"' not in line:
            continue
        kv = {k: v.strip('"') for k, v in _KV.findall(line.split('"Plugin scored node for pod"', 1)[1])}
        ns, _, name = kv.get("pod", "").partition("/")
        if ns not in namespaces:
            continue
        key = f"{ns.rsplit('-', 1)[1]}/{name}"
        scores = out.setdefault(key, {})
        node, plugin = kv["node"], kv["plugin"]
        if plugin in scores.get(node, {}):  # a new attempt of this pod: start over
            scores = out[key] = {}
        scores.setdefault(node, {})[plugin] = int(kv["score"])
    return out


# --- dra-scheduler's decision on a given state ---------------------------------------------------------------

_recorded: dict[str, dict[str, dict[str, int]]] = {}


def _install_score_recorder() -> None:
    """Wrap the framework's run_score to keep each plugin's weighted normalised score per node (diagnostic:
    scores are recomputed without the reuse memo, which does not change them)."""
    from scheduler.framework import runtime
    from scheduler.framework.interface import NodeScore, ScoreNormalizer

    if getattr(runtime.Framework.run_score, "_sbs_recorder", False):
        return
    original = runtime.Framework.run_score

    def run_score(self: Any, state: Any, pod: Any, nodes: Any, sig: Any = None) -> Any:
        totals = original(self, state, pod, nodes, sig)
        per: dict[str, dict[str, int]] = defaultdict(dict)
        for ws in self.scorers:
            if ws.plugin.name in state.skip_score:
                continue
            scores = [NodeScore(n.name, ws.plugin.score(state, pod, n)) for n in nodes]
            if isinstance(ws.plugin, ScoreNormalizer):
                ws.plugin.normalize_score(state, pod, scores)
            for s in scores:
                per[s.name][ws.plugin.name] = s.score * ws.weight
        _recorded[f"{pod.namespace}/{pod.name}"] = dict(per)
        return totals

    run_score._sbs_recorder = True  # type: ignore[attr-defined]
    runtime.Framework.run_score = run_score  # type: ignore[method-assign]


def _strip_pod(p: JSON) -> JSON:
    q = copy.deepcopy(p)
    meta = q["metadata"]
    q["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "uid") if k in meta}
    q["metadata"]["creationTimestamp"] = meta.get("creationTimestamp")
    q["spec"].pop("nodeName", None)
    q["spec"]["schedulerName"] = sbs.OURS
    q.pop("status", None)
    return q


def state_before(objs: dict[str, Any], order: Sequence[str], i: int, ks: sbs.RunResult) -> list[JSON]:
    """The objects as kube-scheduler saw them when it decided ``order[i]``; that pod pending for us."""
    key = order[i]
    before = [k for k in order[:i] if k in ks.bound]
    pods = {sbs.key(p): p for p in objs["pods"]}
    before_pods = [pods[k] for k in before]
    uids = {p["metadata"]["uid"] for p in before_pods}
    pvc_of = {(p["metadata"]["namespace"], v["persistentVolumeClaim"]["claimName"])
              for p in before_pods for v in p["spec"].get("volumes") or [] if v.get("persistentVolumeClaim")}
    out: list[JSON] = [*objs["namespaces"], *objs["nodes"], *objs["slices"], *objs["classes"],
                       *objs["storageclasses"], *objs["templates"], *objs["services"]]
    bound_pvcs: set[str] = set()
    for c in objs["pvcs"]:
        c = copy.deepcopy(c)
        if (c["metadata"]["namespace"], c["metadata"]["name"]) in pvc_of:
            bound_pvcs.add(c["metadata"]["uid"])
        else:
            c["metadata"] = {k: c["metadata"][k] for k in ("name", "namespace") if k in c["metadata"]}
            c["spec"].pop("volumeName", None)
            c["status"] = {"phase": "Pending"}
        out.append(c)
    for v in objs["pvs"]:
        v = copy.deepcopy(v)
        if (v["spec"].get("claimRef") or {}).get("uid") not in bound_pvcs:
            v["spec"].pop("claimRef", None)
            (v["metadata"].get("annotations") or {}).pop("pv.kubernetes.io/bound-by-controller", None)
            v["status"] = {"phase": "Available"}
        out.append(v)
    out += [c for c in objs["claims"] if any(o.get("uid") in uids for o in c["metadata"].get("ownerReferences") or [])]
    out += before_pods
    out.append(_strip_pod(pods[key]))
    return out


@dataclass
class Verdict:
    key: str
    upstream: str
    ours: str
    kind: str  # same | tie | DIFF | only-one (a single feasible node: nothing scored)
    # plugin -> weighted scores (None: did not score): kube-scheduler's of its node and of ours, ours' of both
    plugins: dict[str, tuple[int | None, ...]] = field(default_factory=dict)
    disagree: set[str] = field(default_factory=set)  # plugins whose scores differ between the schedulers


def decide(objs: list[JSON]) -> tuple[dict[str, str], dict[str, dict[str, dict[str, int]]]]:
    from scheduler.simulate.simulation import simulate

    _recorded.clear()
    result = asyncio.run(simulate(objs))
    placed = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"].get("nodeName") or ""
              for p in result.items if p.get("kind") == "Pod"}
    return placed, dict(_recorded)


def classify(key: str, up: str, ours: str, kscore: dict[str, dict[str, int]],
             dscore: dict[str, dict[str, int]]) -> Verdict:
    """One decision: kube-scheduler chose ``up``, we chose ``ours`` ("" = unschedulable); ``kscore`` /
    ``dscore``: node -> plugin -> weighted score of each (empty: a single feasible node, nothing scored)."""
    if up == ours:
        kind = "same"
    elif ours and kscore and ours in kscore and sum(kscore[ours].values()) == sum(kscore[up].values()):
        kind = "tie"
    else:
        kind = "DIFF"  # a node kube-scheduler scored lower, found infeasible, or none at all
    v = Verdict(key, up, ours or "-", kind)
    if kind != "same":
        names = set(kscore.get(up, {})) | set(kscore.get(ours, {})) | set(dscore.get(up, {})) | set(
            dscore.get(ours, {}))
        for n in sorted(names):
            row = (kscore.get(up, {}).get(n), kscore.get(ours, {}).get(n),
                   dscore.get(up, {}).get(n), dscore.get(ours, {}).get(n))
            z = [x or 0 for x in row]  # a plugin that did not score (skipped) counts 0, as upstream
            if z[0] != z[2] or z[1] != z[3]:
                v.disagree.add(n)
            if len(set(z)) > 1:
                v.plugins[n] = row
        if kind == "DIFF" and (not ours or (kscore and ours not in kscore) or (not kscore and up != ours)):
            v.disagree.add("(feasibility)")
    return v


def compare_scores(ks: sbs.RunResult, objs: dict[str, Any], ks_scores: dict[str, dict[str, dict[str, int]]],
                   order: Sequence[str]) -> list[Verdict]:
    _install_score_recorder()
    # The exact batching of equal pods (scheduler/framework/batch.py) decides without calling run_score; its
    # decisions are the memo's (tests/test_batching.py), so the recorded decisions run with the memo.
    saved = os.environ.get("DRA_SCHEDULER_REUSE")
    os.environ["DRA_SCHEDULER_REUSE"] = "memo"
    try:
        verdicts = []
        for i, key in enumerate(order):
            if key not in ks.bound:
                continue
            pod = ks.pods[key]
            full = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            placed, ours_scores = decide(state_before(objs, order, i, ks))
            v = classify(key, ks.bound[key], placed.get(full, ""), ks_scores.get(key, {}), ours_scores.get(full, {}))
            verdicts.append(v)
        return verdicts
    finally:
        if saved is None:
            os.environ.pop("DRA_SCHEDULER_REUSE", None)
        else:
            os.environ["DRA_SCHEDULER_REUSE"] = saved


#: dra-scheduler's own score plugins (not in kube-scheduler's default profile): a disagreement they alone
#: explain is by design (GpuTopology: ARCHITECTURE.md, topology-aware device placement)
OWN_SCORERS = frozenset({"GpuTopology"})


def unexplained(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """DIFF verdicts not explained by dra-scheduler's own scorers alone."""
    return [v for v in verdicts if v.kind == "DIFF" and not (v.disagree and v.disagree <= OWN_SCORERS)]


def explain(kube: Kube, run_dir: str, tag: str = "") -> tuple[sbs.RunResult, list[Verdict]]:
    """kube-scheduler at --v=10, one pod at a time; then each of its decisions re-made by dra-scheduler's
    framework in-process on the same state. The caller resets the run (``sbs.reset(kube, result.namespaces)``)."""
    from scheduler.config.logging import configure_logging

    configure_logging(verbose=False)  # the in-process decisions log nothing below warnings
    tag = tag or f"x{int(time.time()) % 100000:05d}"
    with cluster.kube_scheduler(run_dir, log_v=10) as ks_proc:
        start = ks_proc.log_file.stat().st_size if ks_proc.log_file.exists() else 0
        ks = sbs.run(kube, sbs.UPSTREAM, f"ks{tag}", serial=True)
        with ks_proc.log_file.open("rb") as f:
            f.seek(start)
            log = f.read().decode("utf-8", "replace")
    objs = snapshot(kube, ks)
    _, _, pods = sbs.workload(f"ks{tag}", sbs.UPSTREAM)
    order = [sbs.key(p) for p in pods]
    return ks, compare_scores(ks, objs, parse_scores(log, ks.namespaces), order)


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for v in verdicts:
        counts[v.kind] += 1
    lines = [f"same state, one pod at a time: {len(verdicts)} pods: same node {counts['same']}, "
             f"tie in kube-scheduler's scores {counts['tie']}, different {counts['DIFF']}"]
    for v in verdicts:
        if v.kind == "same":
            continue
        lines.append(f"  {v.kind:<4} {v.key:<18} kube-scheduler chose {v.upstream}, dra-scheduler {v.ours}; "
                     f"weighted scores of ({v.upstream}, {v.ours}):")
        for n, row in v.plugins.items():
            ku, ko, du, do = ("-" if x is None else str(x) for x in row)
            mark = "  <- differs" if n in v.disagree else ""
            lines.append(f"         {n:<32} kube-scheduler ({ku:>3}, {ko:>3})   dra-scheduler ({du:>3}, {do:>3})"
                         f"{mark}")
    return "\n".join(lines)


_KINDS = {"nodes": ("Node", "v1"), "slices": ("ResourceSlice", "resource.k8s.io/v1"),
          "classes": ("DeviceClass", "resource.k8s.io/v1"), "pvs": ("PersistentVolume", "v1"),
          "pvcs": ("PersistentVolumeClaim", "v1"), "claims": ("ResourceClaim", "resource.k8s.io/v1"),
          "pods": ("Pod", "v1"), "namespaces": ("Namespace", "v1"),
          "storageclasses": ("StorageClass", "storage.k8s.io/v1"),
          "templates": ("ResourceClaimTemplate", "resource.k8s.io/v1"), "services": ("Service", "v1")}


def snapshot(kube: Kube, result: sbs.RunResult) -> dict[str, Any]:
    """The objects after kube-scheduler's run (list items carry no kind/apiVersion: added here)."""
    s = sbs.state(kube, result)
    out = {**s, "namespaces": [n for n in s["namespaces"] if n["metadata"]["name"] in result.namespaces],
           "storageclasses": kube.request("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"],
           "templates": [t for ns in result.namespaces for t in kube.list("ResourceClaimTemplate", ns)],
           "services": [v for ns in result.namespaces for v in kube.list("Service", ns)]}
    for what, (kind, api_version) in _KINDS.items():
        for o in out[what]:
            o["kind"], o["apiVersion"] = kind, api_version
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.side_by_side_explain",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="leave the control plane running")
    args = ap.parse_args(argv)
    run_dir = os.environ.get("E2E_SBS_RUN_DIR", "/tmp/dra-scheduler-e2e-sbs")
    cluster.stop(run_dir)
    info = cluster.start(run_dir, env={"E2E_PORTS": "auto"})
    kube = Kube.from_info(info)
    verdicts: list[Verdict] = []
    try:
        sbs.create_environment(kube)
        _, verdicts = explain(kube, run_dir)
        print(format_verdicts(verdicts))
    finally:
        if not args.keep:
            cluster.stop(run_dir)
    return 1 if unexplained(verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
