"""The scheduling.x-k8s.io PodGroup CRD we ship is scheduler-plugins' own (issue #11 item 2), so that both projects
can be installed on one cluster, and every status dra-scheduler writes is valid under it (a structural schema prunes
unknown fields: a status field outside it would be silently lost on a real API server).

Source: kubernetes-sigs/scheduler-plugins ``config/crd/bases/scheduling.x-k8s.io_podgroups.yaml`` (controller-gen
v0.19.0, ``apis/scheduling/v1alpha1/types.go``: PodGroupSpec minMember/minResources/scheduleTimeoutSeconds,
PodGroupStatus phase/occupiedBy/running/succeeded/failed/scheduleStartTime; the phase is a plain string, the
controller's values are Pending, Scheduling, Running, Finished, Failed, Unknown).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import yaml

from bench.fleet import scale_fleet
from scheduler.gang.status import XK8S_STATUS_FIELDS, podgroup_status
from scheduler.simulate.simulation import simulate
from tests.test_gang import Live, pod, podgroup, template

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
CHART_CRD = ROOT / "charts" / "dra-scheduler" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"

# scheduler-plugins' PodGroupPhase constants (apis/scheduling/v1alpha1/types.go)
THEIR_PHASES = {"Pending", "Running", "Scheduling", "Unknown", "Finished", "Failed"}


def _crd() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    assert len(docs) == 1
    doc: dict[str, Any] = docs[0]
    return doc


def _schema() -> dict[str, Any]:
    [version] = _crd()["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_the_crd_is_scheduler_plugins_own() -> None:
    crd = _crd()
    ann = crd["metadata"]["annotations"]
    assert ann["api-approved.kubernetes.io"] == "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
    assert ann["controller-gen.kubebuilder.io/version"] == "v0.19.0"
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io" and spec["group"] == "scheduling.x-k8s.io"
    assert spec["names"] == {"kind": "PodGroup", "listKind": "PodGroupList", "plural": "podgroups",
                             "shortNames": ["pg", "pgs"], "singular": "podgroup"}
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"], version["subresources"]) == (
        "v1alpha1", True, True, {"status": {}})
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase", "MinMember", "Running", "Succeeded", "Failed", "Age"]
    props = _schema()["properties"]
    assert set(props["spec"]["properties"]) == {"minMember", "minResources", "scheduleTimeoutSeconds"}
    assert props["spec"]["properties"]["minMember"] == {
        "description": props["spec"]["properties"]["minMember"]["description"],
        "format": "int32", "minimum": 1, "type": "integer"}
    status = props["status"]["properties"]
    assert set(status) == set(XK8S_STATUS_FIELDS) == {
        "phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime"}
    assert "enum" not in status["phase"] and status["phase"]["type"] == "string"  # theirs has no enum
    assert "x-kubernetes-preserve-unknown-fields" not in props["status"]  # unknown status fields are pruned


def test_the_helm_chart_ships_the_same_crd() -> None:
    assert CHART_CRD.read_text() == CRD.read_text()


def _errors(value: Any, schema: dict[str, Any], path: str = "status") -> list[str]:
    """A structural-schema check of the subset the CRD uses: type, format (int32, date-time), minimum, properties
    (a field the schema does not list would be pruned: reported here)."""
    errs: list[str] = []
    t = schema.get("type")
    if t == "object":
        if not isinstance(value, dict):
            return [f"{path}: must be an object"]
        props = schema.get("properties")
        if props is not None:
            for k, v in value.items():
                if k not in props:
                    errs.append(f"{path}.{k}: unknown field (pruned by the API server)")
                else:
                    errs += _errors(v, props[k], f"{path}.{k}")
    elif t == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: must be an integer"]
        if schema.get("format") == "int32" and not -(2**31) <= value < 2**31:
            errs.append(f"{path}: out of int32 range")
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{path}: below minimum")
    elif t == "string":
        if not isinstance(value, str):
            return [f"{path}: must be a string"]
        if schema.get("format") == "date-time" and not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", value):
            errs.append(f"{path}: not an RFC 3339 date-time")
    return errs


def test_status_writes_validate_against_the_crd_in_every_phase() -> None:
    status_schema = _schema()["properties"]["status"]
    seen: set[str] = set()

    def check(st: dict[str, Any]) -> None:
        assert _errors(st, status_schema) == [], st
        assert st["phase"] in THEIR_PHASES, st
        seen.add(st["phase"])

    # simulate: placed (Scheduling), too big (Scheduling, waiting), missing members (Pending)
    objs = scale_fleet(1) + [template("one", 1), template("eight", 8)]
    objs += [podgroup("ok", 2), podgroup("big", 2), podgroup("few", 2)]
    objs += [pod(f"ok{i}", "one", "ok") for i in range(2)]
    objs += [pod(f"big{i}", "eight", "big") for i in range(2)]
    objs += [pod("few0", "one", "few")]
    res = asyncio.run(simulate(objs))
    for o in res.items:
        if o["kind"] == "PodGroup":
            check(o["status"])
            assert o["status"]["scheduleStartTime"].startswith("2026-")

    # the same schema for Running, Finished, Failed (members lost) and the Timeout
    async def go() -> None:
        live = Live(scale_fleet(2) + [template("one", 1), podgroup("g", 2), pod("p0", "one", "g"),
                                      pod("p1", "one", "g"), podgroup("t", 3, timeout=30), pod("t0", "one", "t")])
        await live.run()
        live.clock.advance(60)
        live.sched.queue.on_event("PodGroup", "Update")
        await live.run()
        gang = live.sched.gang
        pg = live.cache.podgroups()["default/g"]
        for phase in ("Running", "Succeeded"):
            for name in ("p0", "p1"):
                await live.api.patch("Pod", "default", name, {"status": {"phase": phase}}, subresource="status")
            check(podgroup_status(pg, list(live.cache.pods().values()), gang.groups["default/g"]))
        check(podgroup_status(live.cache.podgroups()["default/t"], list(live.cache.pods().values()),
                              gang.groups["default/t"]))
        await live.api.delete("Pod", "default", "p1")
        await live.api.patch("Pod", "default", "p0", {"status": {"phase": "Running"}}, subresource="status")
        check(podgroup_status(pg, list(live.cache.pods().values()), gang.groups["default/g"]))

    asyncio.run(go())
    assert seen == {"Pending", "Scheduling", "Running", "Finished", "Failed"}, seen
