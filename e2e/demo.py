"""``make demo``: the example workloads scheduled live by ``dra-scheduler run`` on the demo fleet.

Cluster up (its own run dir and free ports, so a cluster of ``make cluster-up`` is left alone) → the demo
fleet of manifests/examples/00-fleet.yaml created as the NVIDIA DRA driver would publish it → the scheduler
started → every other file of manifests/examples/ applied with kubectl → placements (``kubectl get pods -A
-o wide``) and each claim's devices printed → scheduler stopped, cluster down (``--keep`` leaves both up).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from e2e import cluster
from e2e.fleet import (
    REPO,
    Kube,
    SchedulerProcess,
    create_demo_fleet,
    pod_scheduled_condition,
    wait_for,
)

EXAMPLES = REPO / "manifests" / "examples"
RUN_DIR = os.environ.get("E2E_DEMO_RUN_DIR", "/tmp/dra-scheduler-e2e-demo")


def say(msg: str) -> None:
    print(f"\n### {msg}", flush=True)


def _settled(kube: Kube) -> bool:
    pods = [p for p in kube.list("Pod") if p["spec"].get("schedulerName") == "dra-scheduler"]
    return bool(pods) and all(
        p["spec"].get("nodeName") or (pod_scheduled_condition(p) or {}).get("status") == "False" for p in pods
    )


def print_claims(kube: Kube) -> None:
    devices = {
        (s["spec"]["pool"]["name"], d["name"]): d
        for s in kube.list("ResourceSlice")
        for d in s["spec"].get("devices") or []
    }
    rows = [("CLAIM", "RESERVED FOR", "NODE", "DEVICES")]
    for c in sorted(kube.list("ResourceClaim"), key=lambda c: (c["metadata"]["namespace"], c["metadata"]["name"])):
        st = c.get("status") or {}
        alloc = st.get("allocation")
        users = ",".join(r["name"] for r in st.get("reservedFor") or []) or "-"
        if not alloc:
            rows.append((f"{c['metadata']['namespace']}/{c['metadata']['name']}", users, "-", "(not allocated)"))
            continue
        node = alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        devs = []
        for r in alloc["devices"]["results"]:
            attrs = devices.get((r["pool"], r["device"]), {}).get("attributes", {})
            what = (attrs.get("profile") or attrs.get("productName") or {}).get("string", "?")
            devs.append(f"{r['request']}={r['device']} ({what})")
        rows.append((f"{c['metadata']['namespace']}/{c['metadata']['name']}", users, node, ", ".join(devs)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.demo", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="leave the cluster and the scheduler running")
    args = ap.parse_args(argv)

    say(f"cluster up (run dir {RUN_DIR}; builds the binaries first if missing)")
    t0 = time.monotonic()
    info = cluster.start(RUN_DIR, env={"E2E_PORTS": "auto"})
    print(f"control plane ready in {time.monotonic() - t0:.1f}s: {info.server}, Kubernetes {info.k8s_version}")
    kube = Kube.from_info(info)
    sched: SchedulerProcess | None = None
    try:
        say("demo fleet (manifests/examples/00-fleet.yaml), published as the NVIDIA DRA driver would")
        fleet = create_demo_fleet(kube)
        print(f"{len(fleet.nodes)} kwok nodes, {len(fleet.slices)} ResourceSlices, {fleet.device_count()} devices")
        print(info.kubectl("get", "nodes", "-L", "node.kubernetes.io/instance-type").stdout, end="")

        log = Path(RUN_DIR) / "logs" / "dra-scheduler.log"
        say(f"dra-scheduler run (log {log})")
        sched = SchedulerProcess(info, log).start()
        print(f"ready: /readyz on 127.0.0.1:{sched.port}")

        say("kubectl apply -f manifests/examples/<each workload>")
        for f in sorted(EXAMPLES.glob("*.yaml")):
            if not f.name.startswith("00-"):
                print(info.kubectl("apply", "-f", str(f)).stdout, end="")
        wait_for(lambda: _settled(kube), 60, "every example pod bound or marked unschedulable", interval=0.5)
        time.sleep(3)  # a pod turned away for a moment (a shared claim being allocated) retries after its backoff
        wait_for(lambda: _settled(kube), 60, "every example pod bound or marked unschedulable", interval=0.5)

        say("kubectl get pods -A -o wide")
        print(info.kubectl("get", "pods", "-A", "-o", "wide").stdout, end="")
        say("claims and their devices")
        print_claims(kube)
        for p in kube.list("Pod"):
            cond = pod_scheduled_condition(p) or {}
            if not p["spec"].get("nodeName") and cond.get("status") == "False":
                say(f"{p['metadata']['namespace']}/{p['metadata']['name']}: {cond.get('reason')}")
                print(cond.get("message"))
        print(f"\nscheduler_schedule_attempts_total {sched.metric('scheduler_schedule_attempts_total'):.0f}")
    except Exception as e:  # show the scheduler's view of what went wrong
        print(f"\ndemo failed: {e}", file=sys.stderr)
        if sched is not None:
            print(sched.tail(), file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            if sched is not None:
                sched.stop()
            say("cluster down")
            cluster.stop(RUN_DIR)
    if args.keep:
        print(f"\nleft running: export KUBECONFIG={info.kubeconfig}; scheduler pid "
              f"{sched.proc.pid if sched and sched.proc else '?'}; E2E_RUN_DIR={RUN_DIR} e2e/cluster.sh down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
