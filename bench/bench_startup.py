"""Benchmark: ``dra-scheduler run``'s start-up at scale, offline (issue 24, item 4).

What the live run (``python -m e2e.throughput --pods 10000 --nodes 1250 --plan cpu:precreated``) spends between
the process's start and its first Binding, without a control plane: the informers of ``run`` (scheduler/kube/
informer.py) list every kind from an in-process stand-in for the API server that answers each page with
recorded-shape JSON bytes (pods and claims as the API server returns them once kube-controller-manager made the
claims: defaulted fields, the service-account volume, ``managedFields``, ``resourceClaimStatuses``), decode it
with the scheduler's own codec and apply it to a real Cache and Scheduler (every default plugin, the queue,
PreEnqueue); then the first scheduling cycle runs. Printed: CPU-seconds (this process) and wall seconds to

* ``synced``: every informer applied its first list (``/readyz`` 200 in the live run),
* ``first cycle``: the first popped pod's scheduling cycle ended with a node (its binding cycle's three writes
  follow in the live run),

each the median over ``--runs`` runs, with the phases split out (decode, apply per kind). ``--profile`` prints
the top of a cProfile of one run (``PROF_SORT``, ``PROF_N``).

    python bench/bench_startup.py [--pods 10000] [--nodes 1250] [--runs 3] [--page 500] [--server-ms-per-mb 0]
                                  [--profile]

The API server's own time per page (etcd, encoding) is modelled only as a wall-clock delay per MB of the page
(``--server-ms-per-mb``, 0 by default): the CPU-seconds are this process's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import fleet as gen
from scheduler.kube.resources import BY_KIND, Resource, dumps

NS = "throughput"
FLEET = "tp"
TEMPLATE = "one-gpu"
FLEET_LABEL = "e2e.dra-scheduler.io/fleet"  # e2e/fleet.py's
JSON = dict[str, Any]


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, "/".join(parts)))


def _managed(manager: str, operation: str, time_: str, fields: JSON, sub: str = "") -> JSON:
    m: JSON = {"manager": manager, "operation": operation, "apiVersion": "v1", "time": time_, "fieldsType": "FieldsV1",
               "fieldsV1": fields}
    if sub:
        m["subresource"] = sub
    return m


def pod(i: int, rv: int) -> JSON:
    """A pending template-claim pod as the API server lists it after kube-controller-manager made its claim."""
    name = f"tp-{i:05d}"
    ts = "2026-12-02T04:58:40Z"
    claim = f"{name}-gpu-{gen._suffix(name)[:5]}"
    return {
        "metadata": {
            "name": name, "namespace": NS, "uid": _uid("pod", name), "resourceVersion": str(rv),
            "creationTimestamp": ts,
            "managedFields": [
                _managed("Python-urllib", "Update", ts, {"f:spec": {
                    "f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:imagePullPolicy": {},
                                     "f:name": {}, "f:resources": {".": {}, "f:claims": {".": {},
                                     'k:{"name":"gpu"}': {".": {}, "f:name": {}}}, "f:requests": {".": {},
                                     "f:cpu": {}}}, "f:terminationMessagePath": {},
                                     "f:terminationMessagePolicy": {}}},
                    "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:nodeSelector": {}, "f:resourceClaims": {
                        ".": {}, 'k:{"name":"gpu"}': {".": {}, "f:name": {}, "f:resourceClaimTemplateName": {}}},
                    "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {}}}),
                _managed("kube-controller-manager", "Update", ts, {"f:status": {"f:resourceClaimStatuses": {
                    ".": {}, 'k:{"name":"gpu"}': {".": {}, "f:name": {}, "f:resourceClaimName": {}}}}}, "status"),
            ],
        },
        "spec": {
            "volumes": [{"name": f"kube-api-access-{gen._suffix(name, 'v')[:5]}", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                               "fieldPath": "metadata.namespace"}}]}},
            ], "defaultMode": 420}}],
            "containers": [{
                "name": "main", "image": "pause",
                "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "Always",
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 0, "dnsPolicy": "ClusterFirst",
            "nodeSelector": {FLEET_LABEL: FLEET},
            "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
            "schedulerName": "dra-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
            ],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable",
                   "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]},
    }


def claim(i: int, rv: int) -> JSON:
    """The claim kube-controller-manager made from the template for pod ``i`` (not allocated yet)."""
    name = f"tp-{i:05d}"
    ts = "2026-12-02T04:58:41Z"
    return {
        "metadata": {
            "name": f"{name}-gpu-{gen._suffix(name)[:5]}", "generateName": f"{name}-gpu-", "namespace": NS,
            "uid": _uid("claim", name), "resourceVersion": str(rv), "creationTimestamp": ts,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": _uid("pod", name),
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [_managed("kube-controller-manager", "Update", ts, {"f:metadata": {
                "f:annotations": {".": {}, "f:resource.kubernetes.io/pod-claim-name": {}}, "f:generateName": {},
                "f:ownerReferences": {".": {}, f'k:{{"uid":"{_uid("pod", name)}"}}': {}}},
                "f:spec": {"f:devices": {"f:requests": {}}}})],
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
            "tolerations": [], "adminAccess": False}}]}},
        "status": {},
    }


def cluster(pods: int, nodes: int) -> dict[str, list[JSON]]:
    """kind -> the objects its list returns, in the API server's order (by key)."""
    from e2e.fleet import kwok_node, owned_slice, scale_objects  # the live benchmark's fleet (e2e/throughput.py)

    out: dict[str, list[JSON]] = {k: [] for k in ("Node", "ResourceSlice", "DeviceClass", "Namespace",
                                                   "ResourceClaimTemplate", "ResourceClaim", "Pod")}
    rv = 1000
    made = scale_objects(FLEET, nodes)
    by_node = {}
    for o in made:
        if o["kind"] == "Node":
            o = kwok_node(o, FLEET)
            o["metadata"]["uid"] = _uid("node", o["metadata"]["name"])
            by_node[o["metadata"]["name"]] = o
    made = [by_node[o["metadata"]["name"]] if o["kind"] == "Node" else o for o in made]
    made = [owned_slice(o, by_node[o["spec"]["nodeName"]], FLEET) if o["kind"] == "ResourceSlice" else o
            for o in made]
    for o in made:
        o = dict(o)
        rv += 1
        meta = dict(o.get("metadata") or {})
        meta.setdefault("uid", _uid(o["kind"], str(meta.get("name"))))
        meta["resourceVersion"] = str(rv)
        meta["creationTimestamp"] = "2026-12-02T04:58:20Z"
        o["metadata"] = meta
        if o["kind"] == "Node":
            o.setdefault("status", {}).setdefault("conditions", [{"type": "Ready", "status": "True"}])
        out.setdefault(o["kind"], []).append(o)
    out["Namespace"] = [{"metadata": {"name": n, "uid": _uid("ns", n), "resourceVersion": "5",
                                      "labels": {"kubernetes.io/metadata.name": n}}}
                        for n in ("default", "kube-system", NS)]
    out["ResourceClaimTemplate"] = [{"metadata": {"name": TEMPLATE, "namespace": NS, "uid": _uid("t"),
                                                  "resourceVersion": "900"},
                                     "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                                         "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                         "count": 1}}]}}}}]
    out["ResourceClaim"] = [claim(i, 50_000 + 2 * i) for i in range(pods)]
    out["Pod"] = [pod(i, 50_001 + 2 * i) for i in range(pods)]
    for v in out.values():
        v.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    return out


def pages(objs: list[JSON], resource: Resource, size: int) -> list[bytes]:
    """The list's pages as the API server encodes them (``limit`` = ``size``)."""
    out = []
    chunks = [objs[i : i + size] for i in range(0, len(objs), size)] or [[]]
    for n, chunk in enumerate(chunks):
        meta: JSON = {"resourceVersion": "99999"}
        if n + 1 < len(chunks):
            meta["continue"] = f"{resource.plural}-{n + 1}"
        out.append(dumps({"kind": f"{resource.kind}List", "apiVersion": resource.api_version, "metadata": meta,
                          "items": chunk}))
    return out


class _Stream:
    def close(self) -> None:
        pass


class RecordedAPI:
    """What the informers use of KubeConnection: ``request('GET', list path)`` answered from recorded pages
    (decoded by the scheduler's codec, as KubeConnection.request does), ``stream()`` a watch that stays open and
    quiet."""

    def __init__(self, lists: Mapping[str, list[bytes]], server_s_per_mb: float = 0.0) -> None:
        self.lists = lists  # list path -> pages
        self.server_s_per_mb = server_s_per_mb  # the API server's time per MB of a page (wall, not this process's)
        self.decode_seconds = 0.0
        self.bytes = 0

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      timeout: float | None = None, **_: Any) -> Any:
        from scheduler.kube.resources import loads

        pp = self.lists.get(path) or [pages([], BY_KIND["Namespace"], 1)[0]]
        cont = (params or {}).get("continue", "")
        n = int(cont.rsplit("-", 1)[1]) if cont else 0
        raw = pp[n]
        await asyncio.sleep(self.server_s_per_mb * len(raw) / 1e6)  # a later turn of the loop at least
        t0 = time.process_time()
        doc = loads(raw)
        self.decode_seconds += time.process_time() - t0
        self.bytes += len(raw)
        return doc

    @asynccontextmanager
    async def stream(self, path: str, params: Mapping[str, str], timeout: float | None = None) -> AsyncIterator[Any]:
        await asyncio.Event().wait()
        yield _Stream()  # pragma: no cover - never reached


class NullAPI:
    """The scheduler's ClusterAPI, unused before the first binding cycle."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


async def one_run(
    lists: Mapping[str, list[bytes]], profile: cProfile.Profile | None = None, server_s_per_mb: float = 0.0,
    pause_gc: bool = True,
) -> dict[str, float]:
    from scheduler.cache.cache import Cache
    from scheduler.config.schedulerconfig import default_config
    from scheduler.kube.informer import Informer, InformerSet, cache_lookup
    from scheduler.kube.run import ALWAYS, POD_FIELD_SELECTOR
    from scheduler.loop.scheduler import Scheduler
    from scheduler.simulate.memapi import InMemoryAPI

    cpu0, wall0 = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    api = RecordedAPI(lists, server_s_per_mb)
    cache = Cache()
    sched = Scheduler(cache, InMemoryAPI(), default_config(), inline_binding=False)
    applied: dict[str, float] = {}

    def sink(kind: str, event: str, obj: JSON) -> None:
        t = time.process_time()
        cache.apply(kind, event, obj)
        applied[kind] = applied.get(kind, 0.0) + time.process_time() - t

    informers = InformerSet(
        Informer(api, r, sink, field_selector=POD_FIELD_SELECTOR if r.kind == "Pod" else "",  # type: ignore[arg-type]
                 cached=cache_lookup(cache))
        for r in ALWAYS
    )
    if pause_gc:  # as `run` does (scheduler/cli.py serve): no cyclic collection until the first lists are in
        gc.disable()
    informers.start()
    await informers.wait_synced()
    if pause_gc:
        gc.freeze()
        gc.enable()
    cpu_synced, wall_synced = time.process_time() - cpu0, time.perf_counter() - wall0
    info = sched.queue.pop()
    assert info is not None, "nothing queued"
    out = sched.schedule_one(info)
    node = out[0].node if isinstance(out, tuple) else out.node
    assert node, f"first pod not placed: {out}"
    cpu_first, wall_first = time.process_time() - cpu0, time.perf_counter() - wall0
    if profile is not None:
        profile.disable()
    await informers.stop()
    return {
        "synced_cpu": cpu_synced, "synced_wall": wall_synced, "first_cpu": cpu_first, "first_wall": wall_first,
        "decode_cpu": api.decode_seconds, "mb": api.bytes / 1e6,
        **{f"apply_{k}": v for k, v in applied.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1_250)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--page", type=int, default=500)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--server-ms-per-mb", type=float, default=0.0,
                    help="model the API server's work: each page answers after this many ms per MB (wall)")
    ap.add_argument("--gc-during-lists", action="store_true",
                    help="collect during the first lists (what `run` did before it paused the collector)")
    ap.add_argument("--one", metavar="PAGES_FILE", help=argparse.SUPPRESS)  # a child run: one fresh process
    args = ap.parse_args()
    if args.one:
        child(args)
        return
    import json
    import pickle
    import subprocess
    import tempfile

    objs = cluster(args.pods, args.nodes)
    lists = {BY_KIND[k].path(): pages(v, BY_KIND[k], args.page) for k, v in objs.items()}
    del objs
    results = []
    with tempfile.NamedTemporaryFile(suffix=".pickle") as f:
        pickle.dump(lists, f)
        f.flush()
        # each run in a fresh interpreter: the process-wide memos (claim specs, quantities, CEL) start cold, as
        # in a scheduler that just started
        for _ in range(args.runs):
            cmd = [sys.executable, os.path.abspath(__file__), "--one", f.name,
                   "--server-ms-per-mb", str(args.server_ms_per_mb),
                   *(["--gc-during-lists"] if args.gc_during_lists else [])]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if args.profile:
            subprocess.run([*cmd, "--profile"], check=True)
    keys = list(results[0])
    med = {k: statistics.median(r.get(k, 0.0) for r in results) for k in keys}
    print(f"start-up offline: {args.pods} pods + claims, {args.nodes} nodes + slices, page {args.page}, "
          f"{med['mb']:.1f} MB of list JSON, server {args.server_ms_per_mb:g} ms/MB; median of {args.runs} runs "
          "(this process's CPU-s / wall s)")
    print(f"  synced       {med['synced_cpu']:.3f} CPU-s  {med['synced_wall']:.3f} s")
    print(f"  first cycle  {med['first_cpu']:.3f} CPU-s  {med['first_wall']:.3f} s")
    print(f"  decode       {med['decode_cpu']:.3f} CPU-s")
    for k in keys:
        if k.startswith("apply_") and med[k] >= 0.005:
            print(f"  {k:<12} {med[k]:.3f} CPU-s")


def child(args: argparse.Namespace) -> None:
    import json
    import pickle

    from scheduler.cli import tune_gc
    from scheduler.config.logging import configure_logging

    configure_logging(level="warning")
    with open(args.one, "rb") as f:
        lists = pickle.load(f)
    tune_gc()  # as `run` does
    prof = cProfile.Profile() if args.profile else None
    result = asyncio.run(one_run(lists, prof, server_s_per_mb=args.server_ms_per_mb / 1000,
                                 pause_gc=not args.gc_during_lists))
    if prof is not None:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(os.environ.get("PROF_SORT", "cumulative")).print_stats(
            int(os.environ.get("PROF_N", "45")))
        print(s.getvalue())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
