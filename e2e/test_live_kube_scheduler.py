"""Upstream kube-scheduler beside the control plane (``cluster.kube_scheduler``, ``e2e/cluster.sh
kube-scheduler-up``): the baseline of side-by-side runs. It starts under its own identity
(system:kube-scheduler, bootstrap RBAC) with the feature gates of versions.env, binds a plain pod and a DRA
pod of ``default-scheduler`` (allocating the claim the way dra-scheduler must), leaves dra-scheduler's pods
alone, and stops again."""

from __future__ import annotations

import re
import ssl
import urllib.request

from e2e import cluster
from e2e.fleet import (
    FLEET_LABEL,
    JSON,
    Kube,
    allocated_devices,
    check_state,
    claim_template,
    create_scale_fleet,
    fresh_namespace,
    gpu_pod,
    wait_for,
)


def _plain_pod(ns: str, name: str, fleet: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {FLEET_LABEL: fleet},
                     "containers": [{"name": "main", "image": "pause",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def test_kube_scheduler_runs_beside_and_binds_default_scheduler_pods(
    cluster_info: cluster.ClusterInfo, clean_cluster: Kube
) -> None:
    kube = clean_cluster
    ns = fresh_namespace(kube, "kube-sched")
    fleet = create_scale_fleet(kube, "kube-sched", 2, 8)
    kube.create(claim_template(ns, "one", count=1))
    dra = gpu_pod(ns, "dra", template="one", fleet="kube-sched")
    dra["spec"]["schedulerName"] = "default-scheduler"
    ours = gpu_pod(ns, "ours", template="one", fleet="kube-sched")  # dra-scheduler's: not started here

    with cluster.kube_scheduler(cluster_info.run_dir) as ks:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # its self-signed serving certificate
        with urllib.request.urlopen(f"{ks.url}/readyz", context=ctx, timeout=5) as r:
            assert r.read() == b"ok"
        kube.create_many([_plain_pod(ns, "plain", "kube-sched"), dra, ours])

        def bound() -> list[JSON] | None:
            pods = {p["metadata"]["name"]: p for p in kube.list("Pod", ns)}
            ok = all(pods.get(n, {}).get("spec", {}).get("nodeName") for n in ("plain", "dra"))
            return list(pods.values()) if ok else None

        pods = wait_for(bound, 60, "kube-scheduler bound the plain and the DRA pod", interval=0.5)
        by_name = {p["metadata"]["name"]: p for p in pods}
        assert by_name["plain"]["spec"]["nodeName"] in fleet.node_names
        assert not by_name["ours"]["spec"].get("nodeName"), "kube-scheduler took a dra-scheduler pod"
        claims = kube.list("ResourceClaim", ns)
        assert check_state([by_name["plain"], by_name["dra"]], claims) == []
        assert len([d for c in claims for d in allocated_devices(c)]) == 1
        log = ks.log_file.read_text(errors="replace")
        assert "is forbidden" not in log, [line for line in log.splitlines() if "is forbidden" in line][:5]
    ok, text = cluster.status(cluster_info.run_dir)
    assert ok, text
    assert re.search(r"^kube-scheduler\s+not running$", text, re.M), text
