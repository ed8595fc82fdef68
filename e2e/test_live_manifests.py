"""manifests/ against the live API server: ``kubectl apply -k manifests/`` (server-side dry run, then for real),
and the scheduler running with exactly the Deployment's arguments under the ServiceAccount's own token, so
the least-privilege RBAC is shown to be enough (resourceclaims/binding included)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from e2e import cluster
from e2e.fleet import (
    JSON,
    Kube,
    check_state,
    claim_template,
    create_scale_fleet,
    gpu_pod,
    namespace,
    wait_for,
)

REPO = Path(__file__).resolve().parent.parent
MANIFESTS = REPO / "manifests"


def test_apply_k_manifests_dry_run_server(cluster_info: cluster.ClusterInfo, clean_cluster: Kube) -> None:
    # the namespace must exist for a server-side dry run of the objects inside it
    cluster_info.kubectl("apply", "-f", str(MANIFESTS / "namespace.yaml"))
    out = cluster_info.kubectl("apply", "-k", str(MANIFESTS), "--dry-run=server").stdout
    kinds = {line.split("/", 1)[0] for line in out.splitlines() if "(server dry run)" in line}
    resources = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    expected = {d["kind"].lower() for f in resources for d in yaml.safe_load_all((MANIFESTS / f).read_text()) if d}
    assert {k.split(".", 1)[0] for k in kinds} == expected, out


def _sa_kubeconfig(info: cluster.ClusterInfo, token: str, path: Path) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": info.server, "certificate-authority": info.ca_file}}],
        "users": [{"name": "dra-scheduler", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "dra-scheduler"}}],
        "current-context": "sa",
    }
    path.write_text(json.dumps(cfg))
    return str(path)


def test_scheduler_runs_under_its_service_account_with_the_deployment_args(
    cluster_info: cluster.ClusterInfo, kube: Kube, spawn_scheduler: Any, tmp_path: Path
) -> None:
    cluster_info.kubectl("apply", "-k", str(MANIFESTS))  # for real: RBAC, ConfigMap, FlowSchema, Deployment...
    token = cluster_info.kubectl("create", "token", "dra-scheduler", "-n", "dra-scheduler",
                                 "--duration=1h").stdout.strip()
    kubeconfig = _sa_kubeconfig(cluster_info, token, tmp_path / "sa.kubeconfig")
    deployment = yaml.safe_load((MANIFESTS / "deployment.yaml").read_text())
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run"
    extra = [a for a in args[1:] if not a.startswith("--metrics-port")]
    assert "--leader-elect" in extra and any(a.startswith("--config-map=") for a in extra)

    sched = spawn_scheduler(*extra, kubeconfig=kubeconfig).start()

    ns = f"as-sa-{uuid.uuid4().hex[:6]}"
    kube.create(namespace(ns))
    create_scale_fleet(kube, "as-sa", 2, 4)
    kube.create(claim_template(ns, "two", count=2))
    kube.create_many([gpu_pod(ns, f"p-{i}", template="two", fleet="as-sa") for i in range(3)])

    def bound() -> list[JSON] | None:
        pods = kube.list("Pod", ns)
        return pods if len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods) else None

    pods = wait_for(bound, 60, "3 pods bound by the scheduler running as system:serviceaccount:dra-scheduler")
    assert check_state(pods, kube.list("ResourceClaim", ns)) == []
    lease = kube.request("GET", "/apis/coordination.k8s.io/v1/namespaces/dra-scheduler/leases/dra-scheduler")
    assert lease["spec"].get("holderIdentity"), lease
    events = kube.list("Event", ns, fieldSelector="reason=Scheduled")
    assert len(events) >= 3, "Scheduled events were posted (RBAC on events)"
    denied = [line for line in Path(sched.log_path).read_text().splitlines() if "is forbidden: User" in line]
    assert denied == [], "RBAC denied a request of the scheduler:\n" + "\n".join(denied[:5])
