"""charts/dra-scheduler with the real helm (4.3.1, built from its Go module by e2e/build.sh): ``helm lint`` and
``helm template`` (the chart renders the same RBAC, configuration, Deployment arguments, metrics Service and
PDB as manifests/, and its values change what they should), then ``helm install`` into the local 1.37.2
control plane and the scheduler run with the installed Deployment's arguments under the installed
ServiceAccount's own token: the examples of manifests/examples are scheduled (RBAC sufficient, the
ConfigMap's configuration valid and loaded), then ``helm uninstall`` removes everything."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import cluster
from e2e.fleet import (
    JSON,
    Kube,
    KubeError,
    check_state,
    create_demo_fleet,
    pod_scheduled_condition,
    wait_for,
)
from scheduler.config.schedulerconfig import load_config_text

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "dra-scheduler"
MANIFESTS = REPO / "manifests"
EXAMPLES = MANIFESTS / "examples"
RELEASE = "dra-scheduler-helm"  # contains the chart name, so every object is named after it
NAMESPACE = "dra-scheduler-helm"
UNSCHEDULABLE = "llm-405b-single-node"


class Helm:
    def __init__(self, binary: Path, home: Path, kubeconfig: str) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        # helm's cache/config/data under the test's own directory, not ~/.cache or ~/.config
        self.env = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
                    "HELM_DATA_HOME": str(home / "data")}

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.binary), "--kubeconfig", self.kubeconfig, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")
        return proc

    def template(self, *args: str, release: str = "dra-scheduler", namespace: str = "dra-scheduler") -> list[JSON]:
        out = self.run("template", release, str(CHART), "-n", namespace, *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def helm(cluster_info: cluster.ClusterInfo, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary = Path(cluster_info.bin_dir) / "helm"
    assert binary.exists(), f"helm was not built into {cluster_info.bin_dir}: run e2e/build.sh helm"
    h = Helm(binary, tmp_path_factory.mktemp("helm-home"), cluster_info.kubeconfig)
    version = h.run("version", "--template", "{{ .Version }}").stdout.strip()
    pinned = cluster.versions()["HELM_VERSION"]
    assert version == f"v{pinned}", (version, pinned)
    return h


def _one(objs: list[JSON], kind: str) -> JSON:
    [obj] = [o for o in objs if o["kind"] == kind]
    return obj


def _manifests() -> list[JSON]:
    resources = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    return [d for f in resources for d in yaml.safe_load_all((MANIFESTS / f).read_text()) if d]


def _args(objs: list[JSON]) -> list[str]:
    [c] = _one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return list(c["args"])


def _config(objs: list[JSON]) -> Any:
    return load_config_text(_one(objs, "ConfigMap")["data"]["scheduler-config.yaml"])


# --- helm lint / helm template -----------------------------------------------------------------------------


def test_chart_lints_clean(helm: Helm) -> None:
    out = helm.run("lint", "--strict", str(CHART)).stdout
    assert "0 chart(s) failed" in out, out


def test_default_render_is_the_kustomize_installation(helm: Helm) -> None:
    chart = helm.template()
    manifests = _manifests()
    # the same kinds, less the Namespace (helm install --create-namespace) and the CRD (chart crds/ directory,
    # installed by helm install, not rendered by helm template)
    kinds = sorted(o["kind"] for o in chart)
    assert kinds == sorted(o["kind"] for o in manifests if o["kind"] not in ("Namespace", "CustomResourceDefinition"))
    # RBAC: the very same rules
    for kind in ("ClusterRole", "Role"):
        assert _one(chart, kind)["rules"] == _one(manifests, kind)["rules"], kind
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert _one(chart, kind)["subjects"] == _one(manifests, kind)["subjects"], kind
        assert _one(chart, kind)["roleRef"] == _one(manifests, kind)["roleRef"], kind
    # the same scheduler configuration, as the scheduler parses it
    assert _config(chart) == _config(manifests)
    # the same arguments (names resolve to the same objects for release dra-scheduler in dra-scheduler)
    assert _args(chart) == _args(manifests)
    chart_pod = _one(chart, "Deployment")["spec"]["template"]["spec"]
    manifest_pod = _one(manifests, "Deployment")["spec"]["template"]["spec"]
    for key in ("serviceAccountName", "priorityClassName", "securityContext"):
        assert chart_pod[key] == manifest_pod[key], key
    [cc], [mc] = chart_pod["containers"], manifest_pod["containers"]
    for key in ("image", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext"):
        assert cc[key] == mc[key], key
    assert _one(chart, "Deployment")["spec"]["replicas"] == _one(manifests, "Deployment")["spec"]["replicas"]
    assert _one(chart, "Service")["spec"]["ports"] == _one(manifests, "Service")["spec"]["ports"]
    assert _one(chart, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert _one(chart, "FlowSchema")["spec"] == _one(manifests, "FlowSchema")["spec"]
    # selectors of the Service and PDB match the chart's pod labels
    labels = _one(chart, "Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb_selector = _one(chart, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
    for kind, selector in (("Service", _one(chart, "Service")["spec"]["selector"]), ("PDB", pdb_selector)):
        assert selector.items() <= labels.items(), kind
    # the chart's CRD is the manifests' CRD
    crds = [d for d in yaml.safe_load_all(helm.run("show", "crds", str(CHART)).stdout) if d]
    assert crds == [o for o in manifests if o["kind"] == "CustomResourceDefinition"]


def test_values_change_what_they_should(helm: Helm, tmp_path: Path) -> None:
    # one replica: no leader election; forced on, it is back
    one = _args(helm.template("--set", "replicas=1"))
    assert not any(a.startswith("--leader-elect") for a in one), one
    forced = _args(helm.template("--set", "replicas=1", "--set", "leaderElection.enabled=true"))
    assert "--leader-elect" in forced
    off = _args(helm.template("--set", "leaderElection.enabled=false"))
    assert "--leader-elect" not in off
    timing = _args(helm.template("--set", "leaderElection.leaseDuration=30s", "--set", "logFormat=text",
                                 "--set", "qps=50", "--set-json", 'extraArgs=["--no-podgroup-controller"]'))
    for a in ("--leader-elect-lease-duration=30s", "--log-format=text", "--qps=50", "--no-podgroup-controller"):
        assert a in timing, (a, timing)
    # profiles, weights and plugin args reach the scheduler's configuration
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "percentageOfNodesToScore": 40,
        "profiles": [
            {"schedulerName": "gpu-pack", "weights": {"GpuTopology": 7, "NodeResourcesFit": 4},
             "plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}},
             "pluginConfig": [{"name": "GpuTopology", "args": {"mode": "Spread"}}]},
            {"schedulerName": "gpu-default"},
        ],
    }))
    cfg = _config(helm.template("-f", str(values)))
    assert cfg.percentage_of_nodes_to_score == 40
    assert [p.scheduler_name for p in cfg.profiles] == ["gpu-pack", "gpu-default"]
    score = {r.name: r.weight for r in cfg.profiles[0].plugins["score"]}
    assert score["GpuTopology"] == 7 and score["NodeResourcesFit"] == 4 and "ImageLocality" not in score
    assert score["TaintToleration"] == 3, "the other default weights stay"
    assert cfg.profiles[0].plugin_args["GpuTopology"]["mode"] == "Spread"
    assert {r.name: r.weight for r in cfg.profiles[1].plugins["score"]}["GpuTopology"] == 3
    # optional objects
    assert not [o for o in helm.template() if o["kind"] == "ServiceMonitor"]
    sm = _one(helm.template("--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    svc = _one(helm.template(), "Service")
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    kinds = {o["kind"] for o in helm.template("--set", "podDisruptionBudget.enabled=false",
                                              "--set", "metrics.service.enabled=false",
                                              "--set", "flowSchema.enabled=false")}
    assert not kinds & {"PodDisruptionBudget", "Service", "FlowSchema"}, kinds
    # names follow the release; the lease the Role grants is the one the scheduler takes
    objs = helm.template("--set", "leaderElection.leaseName=my-lease", release="blue", namespace="sched")
    args = _args(objs)
    assert "--config-map=sched/blue-dra-scheduler-config" in args
    assert "--leader-elect-resource-name=my-lease" in args and "--leader-elect-resource-namespace=sched" in args
    lease_names = [n for r in _one(objs, "Role")["rules"] if "leases" in r["resources"]
                   for n in r.get("resourceNames", [])]
    assert lease_names == ["my-lease"]
    assert _one(objs, "ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": "blue-dra-scheduler", "namespace": "sched"}]


def test_invalid_values_are_refused_by_the_schema(helm: Helm, tmp_path: Path) -> None:
    bad = helm.run("template", "x", str(CHART), "--set", "replicas=two", check=False)
    assert bad.returncode != 0 and "/replicas" in bad.stderr, bad.stderr
    values = tmp_path / "bad.yaml"
    values.write_text(yaml.safe_dump({"profiles": [{"schedulerName": "a", "weights": {"GpuTopology": 500}}]}))
    bad = helm.run("template", "x", str(CHART), "-f", str(values), check=False)
    assert bad.returncode != 0 and "weights/GpuTopology" in bad.stderr, bad.stderr
    values.write_text(yaml.safe_dump({"profiles": [{"schedulerName": "a", "weight": {"GpuTopology": 5}}]}))
    bad = helm.run("template", "x", str(CHART), "-f", str(values), check=False)
    assert bad.returncode != 0 and "weight" in bad.stderr, "a misspelt profile key is refused"
    bad = helm.run("template", "x", str(CHART), "--set", "metrics.service.enabled=false",
                   "--set", "metrics.serviceMonitor.enabled=true", check=False)
    assert bad.returncode != 0 and "needs metrics.service.enabled" in bad.stderr, bad.stderr


# --- helm install on the local control plane ---------------------------------------------------------------


def _sa_kubeconfig(info: cluster.ClusterInfo, token: str, path: Path) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": info.server, "certificate-authority": info.ca_file}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "sa"}}],
        "current-context": "sa",
    }
    path.write_text(json.dumps(cfg))
    return str(path)


def _example_namespaces() -> list[str]:
    return sorted({d["metadata"]["name"] for f in EXAMPLES.glob("*.yaml") if not f.name.startswith("00-")
                   for d in yaml.safe_load_all(f.read_text()) if d and d["kind"] == "Namespace"})


# the chart's default profile and a second scheduler name with its own weights
_INSTALL_PROFILES = [
    *yaml.safe_load((CHART / "values.yaml").read_text())["profiles"],
    {"schedulerName": "helm-e2e-second", "weights": {"GpuTopology": 5}},
]


@pytest.fixture(scope="module")
def installed(
    helm: Helm, cluster_info: cluster.ClusterInfo, clean_cluster: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JSON]:
    """``helm install`` of the chart (release dra-scheduler-helm in namespace dra-scheduler-helm) with the
    default profile plus a second one (so the test can tell the ConfigMap's configuration was loaded);
    uninstalled afterwards."""
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--ignore-not-found", "--wait")
    values = tmp_path_factory.mktemp("helm-values") / "values.yaml"
    values.write_text(yaml.safe_dump({"profiles": _INSTALL_PROFILES}))
    out = helm.run("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", "-f", str(values),
                   timeout=300).stdout
    assert "STATUS: deployed" in out, out
    objs = [d for d in yaml.safe_load_all(helm.run("get", "manifest", RELEASE, "-n", NAMESPACE).stdout) if d]
    yield {"objects": objs}
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", timeout=300)
    with contextlib.suppress(KubeError):
        clean_cluster.delete("Namespace", NAMESPACE)


def _kubectl_get(info: cluster.ClusterInfo, obj: JSON) -> JSON | None:
    ns = obj["metadata"].get("namespace")
    group = obj["apiVersion"].rsplit("/", 1)[0] if "/" in obj["apiVersion"] else ""
    resource = f"{obj['kind'].lower()}.{group}" if group else obj["kind"].lower()
    proc = info.kubectl("get", resource, obj["metadata"]["name"], *(["-n", ns] if ns else []), "-o", "json",
                        check=False)
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
        return None
    got: JSON = json.loads(proc.stdout)
    return got


def test_helm_install_creates_every_object_and_the_server_accepts_them(
    installed: JSON, cluster_info: cluster.ClusterInfo, kube: Kube, helm: Helm
) -> None:
    objs: list[JSON] = installed["objects"]
    status = json.loads(helm.run("status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    assert sorted(o["kind"] for o in objs) == sorted(
        ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "FlowSchema", "PodDisruptionBudget",
         "Role", "RoleBinding", "Service", "ServiceAccount"])
    for o in objs:
        got = _kubectl_get(cluster_info, o)
        assert got is not None, f"{o['kind']}/{o['metadata']['name']} not created"
        assert got["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", o["kind"]
    pdb = _kubectl_get(cluster_info, _one(objs, "PodDisruptionBudget"))
    assert pdb is not None and pdb["spec"]["maxUnavailable"] == 1
    svc = _kubectl_get(cluster_info, _one(objs, "Service"))
    assert svc is not None and svc["spec"]["ports"][0]["targetPort"] == "http-metrics"
    # the CRD of the chart is served (installed earlier by the fixture; helm leaves an existing CRD alone)
    crd = cluster_info.kubectl("get", "crd", "podgroups.scheduling.x-k8s.io", "-o", "json").stdout
    assert json.loads(crd)["spec"]["group"] == "scheduling.x-k8s.io"


def test_the_installed_chart_schedules_the_examples_under_its_service_account(
    installed: JSON, cluster_info: cluster.ClusterInfo, kube: Kube, spawn_scheduler: Any, tmp_path: Path
) -> None:
    objs: list[JSON] = installed["objects"]
    args = _args(objs)
    assert args[0] == "run" and f"--config-map={NAMESPACE}/{RELEASE}-config" in args
    extra = [a for a in args[1:] if not a.startswith("--metrics-port")]
    sa = _one(objs, "ServiceAccount")["metadata"]["name"]
    token = cluster_info.kubectl("create", "token", sa, "-n", NAMESPACE, "--duration=1h").stdout.strip()
    sched = spawn_scheduler(*extra, kubeconfig=_sa_kubeconfig(cluster_info, token, tmp_path / "sa.kubeconfig"),
                            name="helm").start()

    # the examples, as test_live_examples.py applies them (an earlier module's namespaces must be gone first)
    namespaces = _example_namespaces()
    wait_for(lambda: not [n for n in namespaces if kube.try_get("Namespace", n)], 120,
             "example namespaces of an earlier test deleted")
    create_demo_fleet(kube)
    for f in sorted(EXAMPLES.glob("*.yaml")):
        if not f.name.startswith("00-"):
            cluster_info.kubectl("apply", "-f", str(f))

    def settled() -> list[JSON] | None:
        pods = [p for ns in namespaces for p in kube.list("Pod", ns)]
        if len(pods) != 9:
            return None
        for p in pods:
            if p["metadata"]["name"] == UNSCHEDULABLE:
                cond = pod_scheduled_condition(p)
                if not cond or cond.get("status") != "False":
                    return None
            elif not p["spec"].get("nodeName"):
                return None
        return pods

    pods = wait_for(settled, 90, "the examples bound by the helm-installed configuration, one unschedulable")
    claims = [c for ns in namespaces for c in kube.list("ResourceClaim", ns)]
    assert check_state(pods, claims) == []
    assert sum(1 for p in pods if p["spec"].get("nodeName")) == 8
    [big] = [p for p in pods if p["metadata"]["name"] == UNSCHEDULABLE]
    cond = pod_scheduled_condition(big)
    assert cond is not None and cond["reason"] == "Unschedulable", cond
    # the configuration came from the chart's ConfigMap (both profiles of the values), not the default
    log = Path(sched.log_path).read_text()
    loaded = []
    for line in log.splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("event") == "configuration loaded":
                loaded.append(rec)
    assert loaded, "no 'configuration loaded' log record:\n" + log[-3000:]
    assert loaded[0]["profiles"] == ["dra-scheduler", "helm-e2e-second"], loaded[0]
    assert f"{RELEASE}-config" in str(loaded[0].get("source")), loaded[0]
    # leader election in the release namespace with the lease the chart's Role grants
    lease = kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/dra-scheduler")
    assert lease["spec"].get("holderIdentity"), lease
    events = [e for ns in namespaces for e in kube.list("Event", ns, fieldSelector="reason=Scheduled")]
    assert len(events) >= 8, "Scheduled events posted (RBAC on events)"
    denied = [line for line in log.splitlines() if "is forbidden: User" in line]
    assert denied == [], "RBAC denied a request of the scheduler:\n" + "\n".join(denied[:5])
    # the metrics the Service exposes are served on the chart's metrics port name
    assert sched.http("/metrics")[0] == 200


def test_helm_uninstall_removes_every_object(helm: Helm, installed: JSON, cluster_info: cluster.ClusterInfo) -> None:
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", timeout=300)
    for o in installed["objects"]:
        wait_for(lambda o=o: _kubectl_get(cluster_info, o) is None, 60,
                 f"{o['kind']}/{o['metadata']['name']} deleted by helm uninstall")
    # installed again so the fixture's own uninstall has a release to remove
    helm.run("install", RELEASE, str(CHART), "-n", NAMESPACE, timeout=300)
