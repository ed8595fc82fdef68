"""The seed articles' manifests, as written, through ``dra-scheduler simulate`` (issue 27 item 3).

``tests/fixtures/seeds/`` holds every Kubernetes manifest (and manifest fragment) of the five seed articles,
verbatim; ``indented/`` the same text of article 002 with only its lost indentation restored; ``cluster/``
what the articles leave to the cluster (ResourceSlices and DeviceClasses as the NVIDIA driver publishes them,
the scheduler profile). README.md there says which article each file comes from and what it does.

Every fixture file must have an expected outcome here (:func:`test_every_fixture_has_an_expected_outcome`):
placed on the named node with the named devices, or refused / left pending with the message a user needs.
"""

from __future__ import annotations

import copy
import glob
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cli import main

FIX = Path(__file__).parent / "fixtures" / "seeds"
CONFIG = str(FIX / "cluster" / "scheduler-config.yaml")
DEMO_FLEET = str(Path(__file__).parent.parent / "manifests" / "examples" / "00-fleet.yaml")
CASTAI_FLEET = str(FIX / "cluster" / "castai-fleet.yaml")
SEEDS = "/work/shared/seeds"

# The seed articles (README.md names them too).
ARTICLES = {
    "000": "Dynamic Resource Allocation Goes GA: How to Run AI Workloads on Kubernetes the Right Way",
    "001": "Kubernetes device management with DRA (Google Cloud blog; prose, no manifest)",
    "002": "Beyond Integer GPUs: Mastering DRA for ML Workloads",
    "003": "Kubernetes as the Default AI Operating System (DEV Community; prose, no manifest)",
    "004": "Cast AI documentation: Dynamic Resource Allocation (DRA)",
}


@dataclass
class Run:
    code: int
    err: str
    out: dict[str, Any] = field(default_factory=dict)

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        """``ns/name`` -> object of that kind in the output."""
        return {
            f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}": o
            for o in self.out.get("items", [])
            if o["kind"] == kind
        }

    def pod(self, key: str) -> dict[str, Any]:
        pods = self.objects("Pod")
        if key in pods:
            return pods[key]
        prefixed = [k for k in pods if k.startswith(key + "-")]  # a controller's pod: <name>-<suffix>
        assert len(prefixed) == 1, (key, sorted(pods))
        return pods[prefixed[0]]

    def pods_of(self, prefix: str) -> list[dict[str, Any]]:
        return [p for k, p in sorted(self.objects("Pod").items()) if k.startswith(prefix + "-")]

    def devices(self, pod: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(request, pool, device) of every claim the pod uses (template, named or extended-resource claim)."""
        ns = pod["metadata"].get("namespace", "default")
        names = [s.get("resourceClaimName") for s in pod.get("status", {}).get("resourceClaimStatuses", [])]
        names += [c.get("resourceClaimName") for c in pod["spec"].get("resourceClaims", [])]
        ext = pod.get("status", {}).get("extendedResourceClaimStatus")
        if ext:
            names.append(ext["resourceClaimName"])
        claims = self.objects("ResourceClaim")
        out = []
        for n in names:
            c = claims.get(f"{ns}/{n}")
            for r in ((c or {}).get("status", {}).get("allocation") or {}).get("devices", {}).get("results", []):
                out.append((r["request"], r["pool"], r["device"]))
        return sorted(out)


def simulate(capsys: pytest.CaptureFixture[str], *paths: str, config: str = CONFIG, controllers: bool = True) -> Run:
    """The real CLI, in-process: ``dra-scheduler simulate --config CONFIG -o json [--controllers] PATH...``
    (the articles' workloads are Deployments and Jobs: ``--controllers`` makes their pods)."""
    capsys.readouterr()
    flags = ["--controllers"] if controllers else []
    code = main(["simulate", "--config", config, "--no-progress", "-o", "json", *flags, *paths])
    captured = capsys.readouterr()
    out = captured.out
    data = json.loads(out[out.index("{\n") :]) if code == 0 else {}
    return Run(code, " ".join(captured.err.split()), data)


def scheduled(run: Run, key: str) -> tuple[str, list[tuple[str, str, str]]]:
    pod = run.pod(key)
    node = pod["spec"].get("nodeName")
    assert node, (key, pod.get("status"))
    return node, run.devices(pod)


def pending(run: Run, key: str) -> str:
    pod = run.pod(key)
    assert not pod["spec"].get("nodeName"), key
    (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    return str(cond["message"])


# --- expected outcome of every fixture file ----------------------------------------------------------------


def _000_resourceclass(run: Run) -> None:
    assert run.code == 0
    assert (
        "ResourceClass gpu.nvidia.com: apiVersion: Unsupported value: 'resource.k8s.io/v1alpha2' for ResourceClass: "
        "Kubernetes 1.37 serves resource.k8s.io/v1"
    ) in run.err
    assert "removed in 1.31, replaced by DeviceClass" in run.err


def _000_resourceclaim(run: Run) -> None:
    assert run.code == 0
    assert (
        "ResourceClaim training-gpus: apiVersion: Unsupported value: 'resource.k8s.io/v1alpha2' for ResourceClaim"
    ) in run.err
    assert "ResourceClaim" not in {o["kind"] for o in run.out["items"]}


def _000_pod(run: Run) -> None:
    # The article's claim is v1alpha2 (refused): the pod waits for a claim that does not exist.
    assert pending(run, "default/training-job") == 'resourceclaim "training-gpus" not found'


def _000_podgroup(run: Run) -> None:
    # Accepted (the scheduler-plugins API); no pod of the article joins it, so it waits for its 8 members.
    (pg,) = run.objects("PodGroup").values()
    assert pg["metadata"]["name"] == "distributed-training"
    assert pg["status"]["phase"] == "Pending" and pg["status"]["running"] == 0


def _flat_yaml(line: int) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        assert run.code == 1  # invalid input: the file is not YAML a cluster would take either
        assert f"invalid YAML at line {line}" in run.err
        assert "was the YAML's indentation lost when it was copied?" in run.err

    return check


def _flat_object(kind: str, keys: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        assert run.code == 0
        assert f"{kind}: metadata: required object (the document's top-level keys include {keys}" in run.err
        assert "its indentation looks lost" in run.err
        assert not run.objects("Pod") and not run.objects("ResourceClaim")

    return check


V1BETA1 = "unknown field in resource.k8s.io/v1 (a resource.k8s.io/v1beta1 field: in v1 it is"


def _002_deviceclass(run: Run) -> None:
    # `memory >= quantity("40Gi")` does not compile (Quantity has no >=): the API server refuses the class.
    assert run.code == 0
    assert (
        "DeviceClass high-memory-gpu: spec.selectors[0].cel.expression: Invalid value: compilation failed: "
    ) in run.err
    assert "found no matching overload for '_>=_'" in run.err


def _002_template(name: str, requests: int) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        assert run.code == 0
        for i in range(requests):
            assert (
                f"ResourceClaimTemplate {name}: spec.spec.devices.requests[{i}]: Invalid value: exactly one of"
                in run.err
            )
            assert (
                f"ResourceClaimTemplate {name}: spec.spec.devices.requests[{i}].deviceClassName: {V1BETA1} "
                f"requests[{i}].exactly.deviceClassName)"
            ) in run.err

    return check


def _002_job(run: Run) -> None:
    # The Job's pod is created (as the Job controller would); its template was refused.
    assert "batch/v1/Job finetune-qwen: 1 pod(s) created as kube-controller-manager would" in run.err
    msg = pending(run, "default/finetune-qwen")
    assert "ResourceClaim for 'training-gpu' (template training-gpu) not created yet" in msg


def _002_claim(run: Run) -> None:
    assert run.code == 0
    assert (
        f"ResourceClaim shared-inference-gpu: spec.devices.requests[0].deviceClassName: {V1BETA1} "
        "requests[0].exactly.deviceClassName)"
    ) in run.err


def _002_pod(name: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        assert pending(run, f"default/{name}") == 'resourceclaim "shared-inference-gpu" not found'

    return check


def _002_deployment(run: Run) -> None:
    assert "apps/v1/Deployment mig-inference: 2 pod(s) created as kube-controller-manager would" in run.err
    pods = run.pods_of("default/mig-inference")
    assert len(pods) == 2
    for p in pods:
        assert "(template mig-mixed-workload) not created yet" in pending(run, "default/" + p["metadata"]["name"])


def _not_a_manifest(run: Run) -> None:
    # A fragment (the device plugin's affinity) or Helm values: no apiVersion/kind; used by the Cast AI tests.
    assert run.code == 0
    assert "object: apiVersion: Required value (a non-empty string)" in run.err


def _004_quota(run: Run) -> None:
    assert "v1/ResourceQuota nvidia does not affect scheduling, skipped" in run.err


def _004_basic(run: Run) -> None:
    node, devices = scheduled(run, "gpu-workload/gpu-deployment")
    assert node in DRA_NODES
    assert devices == [("gpu/nvidia-gpu", node, "gpu-0")]


def _004_sharing(run: Run) -> None:
    a_node, a_dev = scheduled(run, "multi-pod-shared/gpu-deployment")
    b_node, b_dev = scheduled(run, "multi-pod-shared/deployment-2")
    assert a_node == b_node and a_node in DRA_NODES
    assert a_dev == b_dev and len(a_dev) == 1  # the same GPU, one allocation
    claim = run.objects("ResourceClaim")["multi-pod-shared/global-shared-gpu"]
    assert len(claim["status"]["reservedFor"]) == 2


def _004_cel(run: Run) -> None:
    # brand 'Tesla', architecture 'Volta', memory > 10Gi: only the V100s (isGreaterThan works as written).
    node, devices = scheduled(run, "gpu-cel-example/gpu-workload")
    assert node == "dra-v100-01"
    assert len(devices) == 1 and devices[0][0] == "gpu/nvidia-gpu"


DRA_NODES = {"dra-v100-01", "dra-a10g-01"}
DEVICE_PLUGIN_NODES = {"dp-t4-01", "dp-a10g-01"}

# fixture path (relative to FIX) -> (cluster side, expected outcome)
EXPECTED: dict[str, tuple[str, Callable[[Run], None]]] = {
    "000-1-resourceclass.yaml": (DEMO_FLEET, _000_resourceclass),
    "000-2-resourceclaim.yaml": (DEMO_FLEET, _000_resourceclaim),
    "000-3-pod.yaml": (DEMO_FLEET, _000_pod),
    "000-4-podgroup.yaml": (DEMO_FLEET, _000_podgroup),
    # article 002 as published in the seed: every line at column 0
    "002-1-deviceclass.yaml": (DEMO_FLEET, _flat_yaml(10)),
    "002-2-resourceclaimtemplate.yaml": (DEMO_FLEET, _flat_yaml(16)),
    "002-3-job.yaml": (DEMO_FLEET, _flat_yaml(19)),
    "002-4-resourceclaim.yaml": (DEMO_FLEET, _flat_object("ResourceClaim", "name, requests, deviceClassName")),
    "002-5-pod.yaml": (DEMO_FLEET, _flat_object("Pod", "name, resourceClaims, resourceClaimName")),
    "002-6-pod.yaml": (DEMO_FLEET, _flat_object("Pod", "name, resourceClaims, resourceClaimName")),
    "002-7-resourceclaimtemplate.yaml": (DEMO_FLEET, _flat_yaml(16)),
    "002-8-deployment.yaml": (DEMO_FLEET, _flat_yaml(30)),
    # article 002 with its indentation restored (nothing else changed)
    "indented/002-1-deviceclass.yaml": (DEMO_FLEET, _002_deviceclass),
    "indented/002-2-resourceclaimtemplate.yaml": (DEMO_FLEET, _002_template("training-gpu", 1)),
    "indented/002-3-job.yaml": (DEMO_FLEET, _002_job),
    "indented/002-4-resourceclaim.yaml": (DEMO_FLEET, _002_claim),
    "indented/002-5-pod.yaml": (DEMO_FLEET, _002_pod("qwen-inference")),
    "indented/002-6-pod.yaml": (DEMO_FLEET, _002_pod("embedding-service")),
    "indented/002-7-resourceclaimtemplate.yaml": (DEMO_FLEET, _002_template("mig-mixed-workload", 2)),
    "indented/002-8-deployment.yaml": (DEMO_FLEET, _002_deployment),
    "004-1-device-plugin-affinity.yaml": (CASTAI_FLEET, _not_a_manifest),
    "004-2-resourcequota.yaml": (CASTAI_FLEET, _004_quota),
    "004-3-dra-values-gke.yaml": (CASTAI_FLEET, _not_a_manifest),
    "004-4-dra-values-eks.yaml": (CASTAI_FLEET, _not_a_manifest),
    "004-5-basic.yaml": (CASTAI_FLEET, _004_basic),
    "004-6-sharing.yaml": (CASTAI_FLEET, _004_sharing),
    "004-7-cel.yaml": (CASTAI_FLEET, _004_cel),
}


def _fixtures() -> list[str]:
    return sorted(
        os.path.relpath(p, FIX)
        for p in glob.glob(str(FIX / "**" / "*.yaml"), recursive=True)
        if os.path.relpath(p, FIX).split(os.sep)[0] != "cluster"
    )


def test_every_fixture_has_an_expected_outcome() -> None:
    assert set(_fixtures()) == set(EXPECTED)
    # every article with a manifest has fixtures; 001 and 003 describe DRA in prose only
    assert {f.rpartition("/")[2][:3] for f in _fixtures()} == {"000", "002", "004"}


@pytest.mark.parametrize("path", _fixtures())
def test_article_manifest(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert path in EXPECTED, f"{path}: no expected outcome in tests/test_seed_manifests.py EXPECTED"
    cluster, check = EXPECTED[path]
    check(simulate(capsys, cluster, str(FIX / path)))


@pytest.mark.parametrize("article", ["000", "indented/002", "004"])
def test_each_articles_manifests_together(article: str, capsys: pytest.CaptureFixture[str]) -> None:
    """All of an article's manifests in one run (``simulate DIR``, as a user applies them all): each outcome is
    the one it has alone (nothing in one manifest rescues or breaks another)."""
    files = [f for f in _fixtures() if f.startswith(article)]
    cluster = EXPECTED[files[0]][0]
    run = simulate(capsys, cluster, *(str(FIX / f) for f in files))
    for f in files:
        EXPECTED[f][1](run)


def test_indented_differs_from_the_seed_only_in_indentation() -> None:
    for f in glob.glob(str(FIX / "indented" / "*.yaml")):
        ours = [ln.lstrip() for ln in Path(f).read_text().splitlines()]
        assert ours == Path(FIX / os.path.basename(f)).read_text().splitlines(), f


@pytest.mark.skipif(not os.path.isdir(SEEDS), reason="the seed articles are not on this machine")
def test_fixtures_are_verbatim_article_text() -> None:
    texts = {n[:3]: Path(SEEDS, n).read_text() for n in os.listdir(SEEDS) if n.endswith(".txt")}
    for f in _fixtures():
        if f.startswith("indented/"):
            continue
        assert Path(FIX, f).read_text().rstrip("\n") in texts[f[:3]], f


# --- Cast AI's setup: DRA nodes (nvidia.com/gpu.dra=true) next to device plugin nodes --------------------------


def _yaml(name: str) -> Any:
    return yaml.safe_load((FIX / name).read_text())


def _per_node_pods(prefix: str, affinity: Any, node_selector: dict[str, str], tolerations: list[Any]) -> list[Any]:
    """One pod per node of the Cast AI fleet, pinned to it by ``kubernetes.io/hostname``, with the daemon's
    affinity, nodeSelector and tolerations: the nodes where its pod fits are the nodes where the DaemonSet
    runs (the DaemonSet controller's nodeShouldRunDaemonPod checks the same predicates)."""
    nodes = [d["metadata"]["name"] for d in yaml.safe_load_all(Path(CASTAI_FLEET).read_text()) if d["kind"] == "Node"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{prefix}-{n}", "namespace": "nvidia"},
            "spec": {
                "nodeSelector": {**node_selector, "kubernetes.io/hostname": n},
                "affinity": copy.deepcopy(affinity),
                "tolerations": copy.deepcopy(tolerations),
                "containers": [{"name": "c", "image": "x"}],
            },
        }
        for n in nodes
    ]


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _write(tmp_path: Path, name: str, docs: list[Any]) -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(docs))
    return str(p)


def test_castai_daemons_land_on_their_partition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The article's device plugin affinity keeps the device plugin off ``nvidia.com/gpu.dra=true`` nodes; its
    Helm values put the DRA kubelet plugin on exactly those (GKE and EKS values alike)."""
    device_plugin = _per_node_pods(
        "device-plugin", _yaml("004-1-device-plugin-affinity.yaml")["affinity"], {}, [GPU_TOLERATION]
    )
    for values in ("004-3-dra-values-gke.yaml", "004-4-dra-values-eks.yaml"):
        kp = _yaml(values)["kubeletPlugin"]
        kubelet_plugin = _per_node_pods("kubelet-plugin", kp["affinity"], kp["nodeSelector"], kp["tolerations"])
        run = simulate(capsys, CASTAI_FLEET, _write(tmp_path, "daemons.yaml", device_plugin + kubelet_plugin))
        placed = {k.partition("/")[2] for k, p in run.objects("Pod").items() if p["spec"].get("nodeName")}
        assert placed == {f"device-plugin-{n}" for n in DEVICE_PLUGIN_NODES} | {
            f"kubelet-plugin-{n}" for n in DRA_NODES
        }
        assert "didn't match Pod's node affinity/selector" in pending(run, "nvidia/device-plugin-dra-v100-01")
        assert "didn't match Pod's node affinity/selector" in pending(run, "nvidia/kubelet-plugin-dp-t4-01")


def _device_plugin_pod(name: str, gpus: int, affinity: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": [GPU_TOLERATION],
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if affinity is not None:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


# The coexistence convention for device plugin pods (docs/features.md): stay off the DRA nodes.
OFF_DRA_NODES = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.dra", "operator": "NotIn", "values": ["true"]}]}
            ]
        }
    }
}


def test_castai_workloads_of_each_kind_land_on_their_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The article's three DRA workloads and device plugin pods (``nvidia.com/gpu`` limits) in one cluster:
    claims are served on ``nvidia.com/gpu.dra=true`` nodes only; device plugin pods that carry the
    ``nvidia.com/gpu.dra NotIn [true]`` affinity use the device plugin nodes' ``nvidia.com/gpu`` and, when
    those are full, wait rather than take a DRA GPU."""
    dp = [_device_plugin_pod(f"dp-{i}", 1, OFF_DRA_NODES) for i in range(5)]  # 4 + 1 GPUs on dp nodes, then full
    dp.append(_device_plugin_pod("dp-more", 1, OFF_DRA_NODES))
    workloads = [str(FIX / f) for f in ("004-5-basic.yaml", "004-6-sharing.yaml", "004-7-cel.yaml")]
    run = simulate(capsys, CASTAI_FLEET, *workloads, _write(tmp_path, "dp.yaml", dp))
    for key in (
        "gpu-workload/gpu-deployment",
        "multi-pod-shared/gpu-deployment",
        "multi-pod-shared/deployment-2",
        "gpu-cel-example/gpu-workload",
    ):
        node, devices = scheduled(run, key)
        assert node in DRA_NODES and devices and all(pool == node for _, pool, _ in devices), key
    used = [scheduled(run, f"default/dp-{i}") for i in range(5)]
    assert {n for n, _ in used} == DEVICE_PLUGIN_NODES and all(devs == [] for _, devs in used)
    assert "Insufficient nvidia.com/gpu" in pending(run, "default/dp-more")
    assert run.out["summary"]["scheduled"] == 4 + 5


def test_castai_device_plugin_pods_without_the_affinity_may_take_dra_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The NVIDIA chart's DeviceClass ``gpu.nvidia.com`` declares ``extendedResourceName: nvidia.com/gpu`` and
    DRAExtendedResource is GA in 1.37: a pod asking ``nvidia.com/gpu`` fits a DRA node too, through a claim
    the scheduler creates (KEP-5004), as kube-scheduler 1.37 does. So the device plugin's affinity alone does
    not keep device plugin pods off the DRA partition: with the device plugin nodes full, they take DRA GPUs."""
    dp = [_device_plugin_pod(f"dp-{i}", 1) for i in range(5)]
    dp.append(_device_plugin_pod("dp-more", 1))
    run = simulate(capsys, CASTAI_FLEET, _write(tmp_path, "dp.yaml", dp))
    assert run.out["summary"]["scheduled"] == 6
    on_dra = [p for p in run.objects("Pod").values() if p["spec"]["nodeName"] in DRA_NODES]
    assert on_dra, "some nvidia.com/gpu pod should be served by DRA"
    for p in on_dra:
        assert p["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"] == "nvidia.com/gpu"
        assert len(run.devices(p)) == 1


# --- the product changes the articles needed, unit by unit ----------------------------------------------------


def test_deployment_and_job_pods_are_created_as_the_controllers_would() -> None:
    from scheduler.simulate.workloadcontrollers import pods_for

    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    dep: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "a"}}, "template": template},
    }
    rs, *pods = pods_for(dep, [])
    assert rs["kind"] == "ReplicaSet" and rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"d-{h}" and len(pods) == 3
    assert len({p["metadata"]["name"] for p in pods}) == 3
    for p in pods:
        assert p["metadata"]["name"].startswith(f"d-{h}-") and p["metadata"]["namespace"] == "ns"
        assert p["metadata"]["labels"] == {"app": "a", "pod-template-hash": h}
        assert p["metadata"]["ownerReferences"][0]["name"] == rs["metadata"]["name"]
    assert pods_for(dep, []) == [rs, *pods]  # deterministic
    # pods already given (kubectl get deploy,pods -o yaml) count as replicas
    assert len(pods_for(dep, pods[:2])) == 2 and pods_for(dep, pods) == []
    with pytest.raises(ValueError, match="selector` does not match template `labels`"):
        pods_for({**dep, "spec": {**dep["spec"], "selector": {"matchLabels": {"app": "b"}}}}, [])

    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"parallelism": 4, "completions": 2, "template": template},
    }
    jp = pods_for(job, [])
    assert len(jp) == 2 and all(p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j" for p in jp)
    assert len(pods_for({**job, "spec": {"template": template}}, [])) == 1  # parallelism defaults to 1
    assert pods_for({**job, "spec": {**job["spec"], "suspend": True}}, []) == []
    indexed = pods_for({**job, "spec": {**job["spec"], "completionMode": "Indexed"}}, [])
    assert [p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in indexed] == ["0", "1"]


def test_without_controllers_deployments_and_jobs_are_skipped_as_the_contract_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ARCHITECTURE.md §3.2: kinds that do not affect scheduling (Deployment, ...) are skipped with a note, not an
    error; creating their pods is ``simulate --controllers``, and the note names that flag."""
    run = simulate(capsys, CASTAI_FLEET, str(FIX / "004-5-basic.yaml"), controllers=False)
    assert run.code == 0
    assert "apps/v1/Deployment" in run.err and "does not affect scheduling, skipped" in run.err
    assert "(--controllers creates its pods as kube-controller-manager would)" in run.err
    assert "created as kube-controller-manager would" not in run.err
    assert not run.objects("Pod")
    with_flag = simulate(capsys, CASTAI_FLEET, str(FIX / "004-5-basic.yaml"))
    assert with_flag.objects("Pod")


def test_pods_without_scheduler_name_belong_to_a_default_scheduler_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API server defaults ``spec.schedulerName`` to default-scheduler: a profile of that name schedules
    such pods, creates their template claims and counts them in the summary."""
    docs = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
                "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
            },
        },
    ]
    run = simulate(capsys, DEMO_FLEET, _write(tmp_path, "p.yaml", docs))
    assert run.out["summary"]["pods"] == 1 and run.out["summary"]["scheduled"] == 1
    node, devices = scheduled(run, "default/p")
    assert len(devices) == 1 and devices[0][1] == node


def test_v1beta1_request_fields_in_a_v1_claim_are_named() -> None:
    from scheduler.api.inputcheck import check_object

    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "g", "deviceClassName": "x", "count": 2}]}},
    }
    errs = check_object(claim)
    assert "spec.devices.requests[0]: Invalid value: exactly one of `exactly` or `firstAvailable` is required" in errs
    assert f"spec.devices.requests[0].deviceClassName: {V1BETA1} requests[0].exactly.deviceClassName)" in errs
    assert f"spec.devices.requests[0].count: {V1BETA1} requests[0].exactly.count)" in errs


def test_removed_v1alpha2_dra_kinds_are_refused_not_skipped(tmp_path: Path) -> None:
    from scheduler.simulate.simulation import load_objects

    docs = [
        {"apiVersion": "resource.k8s.io/v1alpha2", "kind": k, "metadata": {"name": "x"}}
        for k in ("ResourceClass", "ResourceClaimParameters", "ResourceClaim")
    ]
    rejected: list[str] = []
    assert load_objects([_write(tmp_path, "old.yaml", docs)], rejected) == []
    assert len(rejected) == 3 and all("Unsupported value: 'resource.k8s.io/v1alpha2'" in r for r in rejected)
    assert "ResourceClass was part of the resource.k8s.io/v1alpha2 API removed in 1.31" in rejected[0]


def test_cel_selectors_that_do_not_compile_are_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the API server refuses them at creation (DeviceClass, claim, template; exactly and firstAvailable)."""
    bad = 'device.capacity["gpu.nvidia.com"].memory >= quantity("40Gi")'
    good = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
    docs = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "bad"},
            "spec": {"selectors": [{"cel": {"expression": "true"}}, {"cel": {"expression": bad}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "g",
                            "firstAvailable": [
                                {
                                    "name": "a",
                                    "deviceClassName": "gpu.nvidia.com",
                                    "selectors": [{"cel": {"expression": good}}],
                                },
                                {
                                    "name": "b",
                                    "deviceClassName": "gpu.nvidia.com",
                                    "selectors": [{"cel": {"expression": bad}}],
                                },
                            ],
                        }
                    ]
                }
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "ok"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "g",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": good}}],
                            },
                        }
                    ]
                }
            },
        },
    ]
    run = simulate(capsys, DEMO_FLEET, _write(tmp_path, "cel.yaml", docs))
    assert "DeviceClass bad: spec.selectors[1].cel.expression: Invalid value: compilation failed:" in run.err
    assert "ResourceClaim c: spec.devices.requests[0].firstAvailable[1].selectors[0].cel.expression" in run.err
    assert set(run.objects("ResourceClaim")) == {"default/ok"}


def test_flattened_yaml_is_named_as_such() -> None:
    from scheduler.api.inputcheck import check_object
    from scheduler.api.yamlload import YAMLLoadError, load_documents

    with pytest.raises(YAMLLoadError, match="no line is indented"):
        load_documents("kind: DeviceClass\nmetadata:\nname: x\nspec:\nselectors:\n- cel:\nexpression: >\na == b\n", "f")
    with pytest.raises(YAMLLoadError) as e:  # an indented file with an error gets no such hint
        load_documents("kind: DeviceClass\nmetadata:\n  name: x\nspec:\n  selectors:\n  - cel: {\n", "f")
    assert "indented" not in str(e.value)
    errs = check_object({"apiVersion": "v1", "kind": "Pod", "name": "p", "containers": []})
    assert errs[0].startswith("metadata: required object (the document's top-level keys include name, containers")
