"""charts/dra-scheduler without a helm binary: its data agrees with manifests/ (RBAC rules, CRD, defaults of
the values against the Deployment, ConfigMap and PDB), the chart metadata with the project. The chart is
rendered and installed by the real helm in e2e/test_live_helm.py."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from scheduler.config.schedulerconfig import load_config_text

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "dra-scheduler"
MANIFESTS = REPO / "manifests"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _manifest(kind: str, name: str | None = None) -> dict[str, Any]:
    [obj] = [d for f in sorted(MANIFESTS.glob("*.yaml")) for d in _docs(f)
             if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    return obj


def _values() -> dict[str, Any]:
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def test_chart_metadata_follows_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["apiVersion"] == "v2" and chart["name"] == "dra-scheduler" and chart["type"] == "application"
    assert chart["version"] == version and chart["appVersion"] == version
    # resource.k8s.io/v1 is served from 1.34 on
    assert chart["kubeVersion"] == ">=1.34.0-0"
    # the manifests deploy the same image version
    [container] = _manifest("Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{_values()['image']['repository']}:{version}"


def test_cluster_role_rules_equal_the_manifests() -> None:
    rules = yaml.safe_load((CHART / "files" / "clusterrole-rules.yaml").read_text())
    assert rules == _manifest("ClusterRole")["rules"]
    template = (CHART / "templates" / "rbac.yaml").read_text()
    assert '{{- .Files.Get "files/clusterrole-rules.yaml" | nindent 0 }}' in template


def test_role_rules_equal_the_manifests_for_the_default_lease() -> None:
    """The Role template's rules with the default lease name are the manifests' Role rules (helm renders the
    same in e2e/test_live_helm.py; here the only template action is the lease name)."""
    text = (CHART / "templates" / "rbac.yaml").read_text()
    role_doc = next(d for d in text.split("\n---\n") if "\nkind: Role\n" in d)
    rules_text = role_doc.split("\nrules:\n", 1)[1]
    lease = _values()["leaderElection"]["leaseName"]
    actions = re.findall(r"\{\{.*?\}\}", rules_text)
    assert actions == ["{{ .Values.leaderElection.leaseName | quote }}"], actions
    rules = yaml.safe_load(rules_text.replace(actions[0], json.dumps(lease)))
    assert rules == _manifest("Role")["rules"]


def test_crds_are_the_manifests_crds() -> None:
    chart_crds = sorted(p.name for p in (CHART / "crds").iterdir())
    assert chart_crds == sorted(p.name for p in (MANIFESTS / "crds").iterdir())
    for name in chart_crds:
        assert (CHART / "crds" / name).read_bytes() == (MANIFESTS / "crds" / name).read_bytes(), name


def test_default_values_are_the_manifests_deployment() -> None:
    v = _values()
    dep = _manifest("Deployment")
    pod = dep["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert v["replicas"] == dep["spec"]["replicas"]
    assert v["resources"] == c["resources"]
    assert v["securityContext"] == c["securityContext"]
    assert v["podSecurityContext"] == pod["securityContext"]
    assert v["priorityClassName"] == pod["priorityClassName"]
    args = dict(a.removeprefix("--").split("=", 1) if "=" in a else (a.removeprefix("--"), "") for a in c["args"])
    assert int(args["metrics-port"]) == v["metrics"]["port"] == c["ports"][0]["containerPort"]
    assert args["leader-elect-resource-name"] == v["leaderElection"]["leaseName"]
    # leader election: the manifests run 2 replicas with it; the chart's default turns it on for > 1
    assert "leader-elect" in args and v["leaderElection"]["enabled"] is None and v["replicas"] > 1


def test_default_values_give_the_manifests_scheduler_configuration() -> None:
    v = _values()
    cm = _manifest("ConfigMap")
    manifest_doc = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    [profile] = v["profiles"]
    assert not profile["weights"] and not profile["plugins"]
    [mprofile] = manifest_doc["profiles"]
    assert profile["schedulerName"] == mprofile["schedulerName"]
    assert profile["pluginConfig"] == mprofile["pluginConfig"]
    assert mprofile.keys() <= {"schedulerName", "pluginConfig"}
    for key in ("podInitialBackoffSeconds", "podMaxBackoffSeconds"):
        assert v[key] == manifest_doc[key]
    assert v["percentageOfNodesToScore"] is None and "percentageOfNodesToScore" not in manifest_doc
    cfg = load_config_text(cm["data"]["scheduler-config.yaml"])
    assert [p.scheduler_name for p in cfg.profiles] == ["dra-scheduler"]


def test_pdb_and_metrics_defaults_match_the_manifests() -> None:
    v = _values()
    pdb = _manifest("PodDisruptionBudget")
    assert v["podDisruptionBudget"]["enabled"] is True
    assert v["podDisruptionBudget"]["maxUnavailable"] == pdb["spec"]["maxUnavailable"]
    svc = _manifest("Service")
    assert v["metrics"]["service"]["enabled"] is True
    assert svc["spec"]["ports"][0]["port"] == v["metrics"]["port"]
    assert v["metrics"]["serviceMonitor"]["enabled"] is False, "a ServiceMonitor needs prometheus-operator's CRD"


def test_optional_objects_are_conditional_in_the_templates() -> None:
    t = CHART / "templates"
    assert (t / "servicemonitor.yaml").read_text().startswith("{{- if .Values.metrics.serviceMonitor.enabled }}")
    assert (t / "service.yaml").read_text().startswith("{{- if .Values.metrics.service.enabled }}")
    assert (t / "poddisruptionbudget.yaml").read_text().startswith("{{- if .Values.podDisruptionBudget.enabled }}")
    assert (t / "flowschema.yaml").read_text().startswith("{{- if .Values.flowSchema.enabled }}")


def test_values_schema_accepts_the_default_values() -> None:
    """A minimal check of values.schema.json without a JSON-schema library: every top-level value has a
    schema entry and the types of the defaults agree (helm itself validates it fully in e2e)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    v = _values()
    assert set(v) <= set(schema["properties"]), set(v) - set(schema["properties"])
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float),
             "null": type(None)}
    for key, value in v.items():
        declared = schema["properties"][key].get("type")
        if declared is None:
            continue
        allowed = declared if isinstance(declared, list) else [declared]
        assert any(isinstance(value, types[t]) and not (t in ("integer", "number") and isinstance(value, bool))
                   for t in allowed), (key, value, allowed)
    assert set(schema["properties"]["profiles"]["items"]["properties"]) == {
        "schedulerName", "weights", "plugins", "pluginConfig", "percentageOfNodesToScore"}
