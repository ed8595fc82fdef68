"""The deployable manifests: complete, least-privilege, secure defaults, valid scheduler config."""

from __future__ import annotations

import os
from typing import Any

import yaml

from scheduler.config.schedulerconfig import load_config_text

ROOT = "manifests"


def _docs(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _kustomized() -> list[dict[str, Any]]:
    k = _docs(os.path.join(ROOT, "kustomization.yaml"))[0]
    out: list[dict[str, Any]] = []
    for r in k["resources"]:
        out += _docs(os.path.join(ROOT, r))
    return out


# Optional additions, each its own kustomization applied after manifests/ (not part of `kubectl apply -k`).
OPTIONAL = ("servicemonitor",)


def test_kustomization_lists_every_manifest() -> None:
    k = _docs(os.path.join(ROOT, "kustomization.yaml"))[0]
    on_disk = {
        os.path.relpath(os.path.join(d, f), ROOT)
        for d, _, files in os.walk(ROOT)
        for f in files
        if f.endswith(".yaml") and "examples" not in d
        and os.path.relpath(d, ROOT).split(os.sep)[0] not in OPTIONAL
    } - {"kustomization.yaml", "kind-config.yaml"}
    assert set(k["resources"]) == on_disk
    for opt in OPTIONAL:
        ok = _docs(os.path.join(ROOT, opt, "kustomization.yaml"))[0]
        files = {f for f in os.listdir(os.path.join(ROOT, opt)) if f.endswith(".yaml")} - {"kustomization.yaml"}
        assert set(ok["resources"]) == files, opt


def test_cluster_role_is_least_privilege_and_complete() -> None:
    roles = [d for d in _kustomized() if d["kind"] in ("ClusterRole", "Role")]
    granted: set[tuple[str, str, str]] = set()
    for role in roles:
        for rule in role["rules"]:
            assert "*" not in rule["verbs"], rule
            assert "*" not in rule["resources"], rule
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        granted.add((g, r, v))
    needed = {
        ("", "pods/binding", "create"),
        ("", "pods/status", "patch"),
        ("", "events", "create"),
        ("events.k8s.io", "events", "create"),
        ("resource.k8s.io", "resourceclaims/status", "update"),
        ("resource.k8s.io", "resourceclaims/binding", "update"),
        ("resource.k8s.io", "resourceclaims", "update"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "configmaps", "watch"),
        ("scheduling.x-k8s.io", "podgroups", "watch"),
        ("scheduling.x-k8s.io", "podgroups/status", "patch"),
        ("scheduling.k8s.io", "podgroups", "watch"),
        ("scheduling.k8s.io", "podgroups/status", "patch"),
        ("scheduling.k8s.io", "workloads", "watch"),
        ("scheduling.k8s.io", "compositepodgroups", "watch"),
        ("scheduling.k8s.io", "priorityclasses", "watch"),
        # what kube-scheduler's default plugins read (1.37 system:kube-scheduler / system:volume-scheduler)
        ("", "services", "watch"),
        ("", "replicationcontrollers", "watch"),
        ("apps", "replicasets", "watch"),
        ("apps", "statefulsets", "watch"),
        ("policy", "poddisruptionbudgets", "watch"),
        ("storage.k8s.io", "storageclasses", "watch"),
        ("storage.k8s.io", "csinodes", "watch"),
        ("storage.k8s.io", "csidrivers", "watch"),
        # VolumeBinding's PreBind binds PVs and annotates PVCs
        ("", "persistentvolumes", "update"),
        ("", "persistentvolumeclaims", "update"),
        # preemption deletes victims; DRA-backed extended resources: the scheduler creates/deletes the claim
        ("", "pods", "delete"),
        ("resource.k8s.io", "resourceclaims", "create"),
    }
    assert needed <= granted, needed - granted
    # nothing that a scheduler never needs; delete only on what kube-scheduler deletes
    assert not any(r in ("secrets",) for _, r, v in granted)
    deletable = {(g, r) for g, r, v in granted if v == "delete"}
    assert deletable <= {("", "pods"), ("resource.k8s.io", "resourceclaims")}, deletable
    writable_core = {r for g, r, v in granted if g == "" and v in ("create", "update", "patch", "delete")}
    assert writable_core <= {
        "pods",
        "pods/binding",
        "pods/status",
        "events",
        "persistentvolumes",
        "persistentvolumeclaims",
    }, writable_core


def test_deployment_runs_non_root_read_only_with_probes() -> None:
    [dep] = [d for d in _kustomized() if d["kind"] == "Deployment"]
    spec = dep["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    [c] = spec["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert "--leader-elect" in c["args"]


def test_configmap_holds_a_valid_default_profile() -> None:
    [cm] = [d for d in _kustomized() if d["kind"] == "ConfigMap"]
    cfg = load_config_text(cm["data"]["scheduler-config.yaml"])
    assert [p.scheduler_name for p in cfg.profiles] == ["dra-scheduler"]


def test_podgroup_crd_serves_v1alpha1_with_status() -> None:
    [crd] = [d for d in _kustomized() if d["kind"] == "CustomResourceDefinition"]
    assert crd["spec"]["group"] == "scheduling.x-k8s.io"
    [v] = crd["spec"]["versions"]
    assert v["name"] == "v1alpha1" and v["subresources"] == {"status": {}}
    props = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert {"minMember", "minResources", "scheduleTimeoutSeconds"} <= set(props)


def _pod_labels() -> dict[str, str]:
    [dep] = [d for d in _kustomized() if d["kind"] == "Deployment"]
    labels: dict[str, str] = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    return labels


def test_pod_disruption_budget_keeps_a_scheduler_running() -> None:
    [dep] = [d for d in _kustomized() if d["kind"] == "Deployment"]
    [pdb] = [d for d in _kustomized() if d["kind"] == "PodDisruptionBudget"]
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["namespace"] == dep["metadata"]["namespace"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= _pod_labels().items()
    # evictions leave at least one replica (the standby takes the Lease over)
    assert pdb["spec"]["maxUnavailable"] == 1 < dep["spec"]["replicas"]
    assert "minAvailable" not in pdb["spec"], "one of the two, not both"


def test_metrics_service_selects_the_scheduler_pods_on_the_metrics_port() -> None:
    [dep] = [d for d in _kustomized() if d["kind"] == "Deployment"]
    [svc] = [d for d in _kustomized() if d["kind"] == "Service"]
    assert svc["metadata"]["namespace"] == dep["metadata"]["namespace"]
    assert svc["spec"]["selector"].items() <= _pod_labels().items()
    [port] = svc["spec"]["ports"]
    [c] = dep["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert port["targetPort"] in named
    assert port["port"] == named[port["targetPort"]]
    assert f"--metrics-port={named[port['targetPort']]}" in c["args"]
    # the probes and the Service use the same port
    assert c["livenessProbe"]["httpGet"]["port"] == port["targetPort"]


def test_optional_service_monitor_scrapes_the_metrics_service() -> None:
    [svc] = [d for d in _kustomized() if d["kind"] == "Service"]
    [sm] = _docs(os.path.join(ROOT, "servicemonitor", "servicemonitor.yaml"))
    assert sm["apiVersion"] == "monitoring.coreos.com/v1" and sm["kind"] == "ServiceMonitor"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]
    [ep] = sm["spec"]["endpoints"]
    assert ep["port"] == svc["spec"]["ports"][0]["name"] and ep["path"] == "/metrics"


def test_leader_election_lease_is_the_one_the_role_grants() -> None:
    [dep] = [d for d in _kustomized() if d["kind"] == "Deployment"]
    [c] = dep["spec"]["template"]["spec"]["containers"]
    args = dict(a.split("=", 1) for a in c["args"] if "=" in a)
    [role] = [d for d in _kustomized() if d["kind"] == "Role"]
    assert args["--leader-elect-resource-namespace"] == role["metadata"]["namespace"]
    names = [n for r in role["rules"] if "leases" in r["resources"] for n in r.get("resourceNames", [])]
    assert names == [args["--leader-elect-resource-name"]]
    ns, name = args["--config-map"].split("/")
    [cm] = [d for d in _kustomized() if d["kind"] == "ConfigMap"]
    assert (cm["metadata"]["namespace"], cm["metadata"]["name"]) == (ns, name)
