"""The seed articles' manifests (tests/fixtures/seeds/) against the real 1.37.2 control plane.

* What ``simulate`` refuses, the API server refuses (``kubectl apply --dry-run=server``, kubectl's default strict
  field validation), for the same reason; what ``simulate`` takes, it takes.
* Cast AI's workloads (article 004), applied as written, are scheduled by ``dra-scheduler run`` (a profile named
  ``default-scheduler``: the articles' pods name no scheduler) onto ``nvidia.com/gpu.dra=true`` nodes of the demo
  fleet (the e2e control plane runs no deployment controller: their pods are made as simulate makes them;
  tests/test_seed_manifests.py offline).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import cluster
from e2e.conftest import log_path
from e2e.fleet import Kube, SchedulerProcess, allocated_devices, create_demo_fleet, wait_for
from scheduler.simulate.workloadcontrollers import pods_for

SEEDS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "seeds"

# fixture -> what the API server says (None: it takes the object)
DRY_RUN = {
    "000-1-resourceclass.yaml": 'no matches for kind "ResourceClass" in version "resource.k8s.io/v1alpha2"',
    "000-2-resourceclaim.yaml": 'no matches for kind "ResourceClaim" in version "resource.k8s.io/v1alpha2"',
    "000-3-pod.yaml": None,
    "000-4-podgroup.yaml": None,
    "indented/002-1-deviceclass.yaml": "compilation failed",
    "indented/002-2-resourceclaimtemplate.yaml": 'unknown field "spec.spec.devices.requests[0].deviceClassName"',
    "indented/002-3-job.yaml": None,
    "indented/002-4-resourceclaim.yaml": 'unknown field "spec.devices.requests[0].deviceClassName"',
    "indented/002-5-pod.yaml": None,
    "indented/002-6-pod.yaml": None,
    "indented/002-7-resourceclaimtemplate.yaml": 'unknown field "spec.spec.devices.requests[1].selectors"',
    "indented/002-8-deployment.yaml": None,
}  # article 004's objects are namespaced in namespaces the same files create: applied for real below


@pytest.mark.parametrize("path", sorted(DRY_RUN))
def test_the_api_server_refuses_what_simulate_refuses(cluster_info: cluster.ClusterInfo, path: str) -> None:
    proc = cluster_info.kubectl("apply", "--dry-run=server", "-f", str(SEEDS / path), check=False)
    expected = DRY_RUN[path]
    if expected is None:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode != 0 and expected in proc.stderr, proc.stderr


CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
"""


@pytest.fixture(scope="module")
def default_named_scheduler(
    cluster_info: cluster.ClusterInfo,
    clean_cluster: Kube,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SchedulerProcess]:
    cfg = tmp_path_factory.mktemp("seeds") / "config.yaml"
    cfg.write_text(CONFIG)
    path = log_path(request)
    path.unlink(missing_ok=True)
    proc = SchedulerProcess(cluster_info, path, "--config", str(cfg))
    try:
        proc.start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    yield proc
    with contextlib.suppress(Exception):
        proc.stop()


def test_castai_workloads_as_written_run_on_the_dra_nodes(
    cluster_info: cluster.ClusterInfo, clean_cluster: Kube, default_named_scheduler: SchedulerProcess
) -> None:
    kube = clean_cluster
    create_demo_fleet(kube)
    dra_nodes = {
        n["metadata"]["name"]
        for n in kube.list("Node")
        if (n["metadata"].get("labels") or {}).get("nvidia.com/gpu.dra") == "true"
    }
    assert dra_nodes
    for f in ("004-5-basic.yaml", "004-6-sharing.yaml"):
        cluster_info.kubectl("apply", "-f", str(SEEDS / f))  # as the article says
        # The e2e control plane runs no deployment/replicaset controller (e2e/cluster.sh --controllers): create
        # the pods they would, with simulate's emulation of them.
        for d in yaml.safe_load_all((SEEDS / f).read_text()):
            if d["kind"] == "Deployment":
                for obj in pods_for(d, []):
                    if obj["kind"] == "Pod":
                        del obj["metadata"]["ownerReferences"]  # no ReplicaSet here: the garbage collector would
                        kube.create(obj)

    def pods() -> list[dict[str, Any]]:
        return [p for ns in ("gpu-workload", "multi-pod-shared") for p in kube.list("Pod", ns)]

    wait_for(
        lambda: len(pods()) == 3 and all(p["spec"].get("nodeName") for p in pods()),
        90,
        "the three Deployments' pods bound",
    )
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for p in pods():
        assert p["spec"]["nodeName"] in dra_nodes
        by_ns.setdefault(p["metadata"]["namespace"], []).append(p)
    shared = kube.get("ResourceClaim", "global-shared-gpu", "multi-pod-shared")
    assert len(shared["status"]["reservedFor"]) == 2
    assert len({p["spec"]["nodeName"] for p in by_ns["multi-pod-shared"]}) == 1
    single = kube.get("ResourceClaim", "single-gpu", "gpu-workload")
    [(driver, pool, _)] = allocated_devices(single)
    assert driver == "gpu.nvidia.com" and pool == by_ns["gpu-workload"][0]["spec"]["nodeName"]
    assert single["status"]["allocation"]["devices"]["results"][0]["request"] == "gpu/nvidia-gpu"
