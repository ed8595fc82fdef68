"""Hostile input at the edge: bounded YAML (scheduler/api/yamlload.py), API-server-like validation of loaded objects
(scheduler/api/inputcheck.py), ``check-config`` (scheduler/config/schedulerconfig.py), with named cases and a
seeded fuzz of
``check-config`` (DRA_FUZZ_CONFIG_CASES, default 400)."""

from __future__ import annotations

import copy
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.inputcheck import check_object
from scheduler.api.yamlload import MAX_DEPTH, YAMLLoadError, load_documents
from scheduler.config.checkconfig import check_config
from scheduler.config.schedulerconfig import ConfigError, config_from_document, load_config_text
from scheduler.simulate.simulation import InputError, load_objects, run_simulation

# --- YAML ------------------------------------------------------------------------------------------------------

LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("billion laughs", LAUGHS, r"f\.yaml: document 0: .*excessive aliasing"),
        ("recursive alias", "a: &x [*x]\n", r"document 0: a: .*recursive alias"),
        ("deep flow", "a: " + "[" * 1000 + "]" * 1000, rf"document 0: a\[0\].*nested deeper than {MAX_DEPTH}"),
        ("deep block", "".join("  " * i + f"k{i}:\n" for i in range(300)), r"k0\.k1\.k2.*nested deeper"),
        ("huge int", "spec:\n  priority: " + "9" * 5000, r"document 0: spec\.priority: line 2.*5000 digits"),
        ("nan", "x: .nan", r"document 0: x: .*NaN"),
        ("duplicate key", "a: 1\nb: 2\na: 3\n", r"document 0: a: line 3.*duplicate key 'a'"),
        ("set", "a: !!set {x, y}", r"document 0: a: .*no JSON form"),
        ("python tag", "a: !!python/object:os.system {}", r"document 0: a: .*no JSON form"),
        ("complex key", "? [a]\n: b\n", r"mapping key must be a scalar"),
        ("second document broken", "a: 1\n---\nb: [1, 2\n", r"document 1: invalid YAML"),
        ("control char", "a: \x07\n", r"invalid YAML: unacceptable character"),
    ],
)
def test_yaml_refused_with_file_document_and_field(name: str, text: str, expected: str) -> None:
    start = time.monotonic()
    with pytest.raises(YAMLLoadError, match=expected):
        load_documents(text, "f.yaml")
    assert time.monotonic() - start < 5, name


def test_yaml_non_utf8_names_the_offset() -> None:
    with pytest.raises(YAMLLoadError, match=r"f\.yaml: not UTF-8: byte 0xff at offset 3"):
        load_documents(b"a: \xff\xfe", "f.yaml")


def test_yaml_keeps_timestamps_binary_and_scalar_keys_as_json() -> None:
    docs = load_documents(
        "t: 2024-01-01\nts: 2024-01-01T00:00:00Z\nb: !!binary aGVsbG8=\n1: a\ntrue: b\nbase: &b {x: 1}\nm:\n  <<: *b\n",
        "f.yaml",
    )
    assert docs[0].data == {
        "t": "2024-01-01",
        "ts": "2024-01-01T00:00:00Z",
        "b": "aGVsbG8=",
        "1": "a",
        "true": "b",
        "base": {"x": 1},
        "m": {"x": 1},
    }
    json.dumps(docs[0].data)  # JSON-compatible


def test_yaml_moderate_aliasing_is_fine() -> None:
    text = "base: &b {cpu: 1, memory: 2}\n" + "".join(f"p{i}: *b\n" for i in range(500))
    assert len(load_documents(text, "f.yaml")[0].data) == 501


# --- objects -------------------------------------------------------------------------------------------------


def _pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({**_pod(), "metadata": {"name": 5}}, "metadata.name: must be a string, not integer"),
        ({**_pod(), "metadata": {"name": "p", "namespace": ["x"]}}, "metadata.namespace: must be a string"),
        ({**_pod(), "metadata": {"name": "p", "namespace": "Bad_NS"}}, "metadata.namespace: Invalid value"),
        ({**_pod(), "metadata": {"name": "p", "labels": {"a": 1}}}, "metadata.labels.a: must be a string"),
        ({**_pod(), "spec": []}, "spec: must be an object, not array"),
        ({**_pod(), "status": "Running"}, "status: must be an object, not string"),
        (_pod(nodeName=5), "spec.nodeName: must be a string, not integer"),
        (_pod(priority=2**40), "spec.priority: 1099511627776 does not fit in an int32"),
        (_pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]),
         "spec.containers[0].resources.requests.cpu: Invalid value: '-1': must be greater than or equal to 0"),
        (_pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "abc"}}}]),
         "spec.containers[0].resources.requests.cpu: quantities must match"),
        (_pod(containers=[{"name": "c", "resources": {"limits": {"memory": "1e400"}}}]),
         "spec.containers[0].resources.limits.memory: invalid quantity '1e400': exceeds the int64 range"),
        # issue 25: past Python's 4,300-digit int(str) limit (was a ValueError traceback)
        (_pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1" + "0" * 5000}}}]),
         "spec.containers[0].resources.requests.cpu: invalid quantity '1000000000"),
        (_pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1e" + "9" * 5000}}}]),
         "unable to parse quantity's suffix"),
        (_pod(tolerations={"key": "x"}), "spec.tolerations: must be a list, not object"),
    ],
)
def test_objects_refused_like_the_api_server(obj: dict[str, Any], expected: str) -> None:
    errors = check_object(obj)
    assert any(expected in e for e in errors), errors


def test_slice_with_invalid_semver_is_refused() -> None:
    s = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "d",
            "nodeName": "n",
            "pool": {"name": "n", "resourceSliceCount": 1},
            "devices": [
                {"name": "a", "attributes": {"v": {"version": "1.2.3"}}},
                {"name": "b", "attributes": {"v": {"version": "v1.2"}, "w": {"string": "x", "int": 1}}},
            ],
        },
    }
    assert check_object(s, cluster_scoped=True) == [
        "spec.devices[1].attributes[v].version: Invalid value: 'v1.2': must be a string compatible with semver.org "
        "spec 2.0.0",
        "spec.devices[1].attributes[w]: Invalid value: exactly one value must be specified (found int, string)",
    ]


def test_claim_requests_need_a_class() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"count": 1}}, {"name": "s"}]}},
    }
    assert check_object(claim) == [
        "spec.devices.requests[0].exactly.deviceClassName: Required value",
        "spec.devices.requests[1]: Invalid value: exactly one of `exactly` or `firstAvailable` is required",
    ]


POISON_FLEET = """
apiVersion: v1
kind: Node
metadata: {name: good, labels: {kubernetes.io/hostname: good}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: good-gpus}
spec:
  driver: gpu.example.com
  nodeName: good
  pool: {name: good, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {model: {string: h100}, driverVersion: {version: 1.0.0}}}
---
apiVersion: v1
kind: Node
metadata: {name: bad, labels: {kubernetes.io/hostname: bad}, annotations: {dra-scheduler.io/device-topology: "{"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: bad-gpus}
spec:
  driver: gpu.example.com
  nodeName: bad
  pool: {name: bad, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {model: {string: h100}, driverVersion: {version: not-semver}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: h100}
spec: {selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].model == "h100"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one, namespace: default}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: h100}}]}}}
---
apiVersion: v1
kind: Pod
metadata: {name: healthy, namespace: default}
spec:
  schedulerName: dra-scheduler
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one}]
  containers: [{name: c, image: i, resources: {requests: {cpu: 100m}, claims: [{name: gpu}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: negative, namespace: default}
spec:
  schedulerName: dra-scheduler
  containers: [{name: c, image: i, resources: {requests: {cpu: "-1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: no-class, namespace: default}
spec:
  schedulerName: dra-scheduler
  priorityClassName: missing
  containers: [{name: c, image: i}]
---
apiVersion: v1
kind: Pod
metadata: {name: healthy, namespace: default}
spec: {schedulerName: dra-scheduler, containers: [{name: c, image: i}]}
"""


def test_poisoned_objects_never_stop_the_healthy_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13: an invalid semver on one device must not make an unrelated selector fail; a negative request
    or a missing PriorityClass refuses that pod only; a duplicate object and a malformed topology annotation
    are refused/ignored; the healthy pod is bound to the healthy node."""
    f = tmp_path / "fleet.yaml"
    f.write_text(POISON_FLEET)
    rejected: list[str] = []
    objs = load_objects([str(f)], rejected)
    assert [r.split(": ", 2)[1:] for r in rejected] == [
        ["document 3", "ResourceSlice bad-gpus: spec.devices[0].attributes[driverVersion].version: Invalid value: "
                       "'not-semver': must be a string compatible with semver.org spec 2.0.0"],
        ["document 7", "Pod default/negative: spec.containers[0].resources.requests.cpu: Invalid value: '-1': must "
                       "be greater than or equal to 0"],
        ["document 9", "Pod default/healthy: metadata.name: Duplicate value: already defined in "
                       f"{f}: document 6"],
    ]
    res = run_simulation([str(f)])
    pods = {p["metadata"]["name"]: p for p in res.items if p["kind"] == "Pod"}
    assert pods["healthy"]["spec"]["nodeName"] == "good"
    assert set(pods) == {"healthy"}  # no-class: refused by the Priority admission step
    assert "spec.priorityClassName: no PriorityClass with name missing was found" in capsys.readouterr().err
    assert objs


def test_unparseable_file_is_an_input_error_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "bomb.yaml"
    f.write_text(LAUGHS)
    with pytest.raises(InputError, match=rf"{f}: document 0: f: .*excessive aliasing"):
        load_objects([str(f)])


# --- check-config -------------------------------------------------------------------------------------------------

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEADER + "podInitialBackoffSeconds: .nan\n", "podInitialBackoffSeconds: line 3"),
        (HEADER + "podMaxBackoffSeconds: .inf\n", "podMaxBackoffSeconds: line 3"),
        (HEADER + "percentageOfNodesToScore: " + "9" * 5000 + "\n", "integer with 5000 digits"),
        (HEADER + "profiles: " + "[" * 500 + "]" * 500 + "\n", "nested deeper than"),
        (HEADER + "profiles:\n- schedulerName: a\n  schedulerName: b\n", "duplicate key 'schedulerName'"),
        ("apiVersion: v1\nkind: ConfigMap\ndata:\n  scheduler-config.yaml: 5\n",
         "data.scheduler-config.yaml: must be a string"),
        ("apiVersion: v1\nkind: ConfigMap\ndata:\n  scheduler-config.yaml: {a: 1}\n",
         "data.scheduler-config.yaml: must be a string"),
        ("apiVersion: v1\nkind: ConfigMap\ndata: [1]\n", "data: must be a map of strings"),
        (HEADER + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args: {filterTimeout: banana}\n",
         'profiles[0].pluginConfig[0].args.filterTimeout: time: invalid duration "banana"'),
        (HEADER + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args: {filterTimeout: -1s}\n",
         "profiles[0].pluginConfig[0].args.filterTimeout: Invalid value: \"-1s\": must be zero or positive"),
        (HEADER + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args: {bindingTimeout: 9999999999h}\n",
         "profiles[0].pluginConfig[0].args.bindingTimeout: time: invalid duration"),
    ],
)
def test_check_config_refuses_with_a_path(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    code, out = check_config(str(f))
    assert code == 1 and expected in out, out


def test_check_config_nan_in_a_document_object() -> None:
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "podInitialBackoffSeconds": float("nan"), "podMaxBackoffSeconds": float("inf")}
    with pytest.raises(ConfigError) as e:
        config_from_document(doc)
    assert e.value.errors[:2] == [
        "podInitialBackoffSeconds: Invalid value: nan: must be a finite number of seconds",
        "podMaxBackoffSeconds: Invalid value: inf: must be a finite number of seconds",
    ]


def test_check_config_non_utf8(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_bytes(HEADER.encode() + b"x: \xff\n")
    assert check_config(str(f)) == (1, f"{f}: not UTF-8: byte 0xff at offset {len(HEADER) + 3} (invalid start byte)")


VALID = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 10,
    "percentageOfNodesToScore": 50,
    "profiles": [
        {
            "schedulerName": "dra-scheduler",
            "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 2}], "disabled": [{"name": "*"}]}},
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                    "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}},
                {"name": "DynamicResources", "args": {"filterTimeout": "10s", "bindingTimeout": "600s"}},
                {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}},
                {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}},
            ],
        }
    ],
}
BAD = [None, -1, 0, 1.5, float("nan"), float("inf"), 10**40, "", "x", "-1s", "1e400s", [], {}, [None], {"a": [1]}, True]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


def test_fuzz_check_config() -> None:
    """Seeded: a valid configuration with 1-3 fields replaced by wrong values, as a document and as YAML text.
    Never a traceback, each answer in bounded time, every error ``path: message``."""
    rng = random.Random(int(os.environ.get("DRA_FUZZ_SEED", "4242")))
    cases = int(os.environ.get("DRA_FUZZ_CONFIG_CASES", "400"))
    refused = accepted = 0
    for _ in range(cases):
        doc = copy.deepcopy(VALID)
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(_paths(doc) or [("apiVersion",)])
            target: Any = doc
            try:
                for p in path[:-1]:
                    target = target[p]
                target[path[-1]] = copy.deepcopy(rng.choice(BAD))
            except (KeyError, IndexError, TypeError):
                continue
        start = time.monotonic()
        for as_text in (False, True):
            try:
                if as_text:
                    text = yaml.safe_dump(doc, allow_unicode=True)
                    load_config_text(text)
                else:
                    config_from_document(doc)
                accepted += 1
            except ConfigError as e:
                refused += 1
                for err in e.errors:
                    assert ": " in err and not err.startswith(": "), err
        assert time.monotonic() - start < 5
    print(f"fuzz check-config: {cases} cases x 2 forms: {refused} refused, {accepted} accepted")
    assert refused > cases // 2


@pytest.mark.parametrize("annotation", ["{", "[]", '{"driver": 5}', '{"driver": "gpu.nvidia.com", "devices": '
                                        '["gpu-0", "gpu-0"], "matrix": [["X"]]}', "x" * 10000,
                                        "[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_malformed_topology_annotation_is_ignored_for_that_node(
    tmp_path: Path, annotation: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """GpuTopology reports the node's malformed annotation (a Warning) and ignores it; the node still schedules."""
    f = tmp_path / "fleet.yaml"
    keep = {("Node", "good"), ("ResourceSlice", "good-gpus"), ("DeviceClass", "h100"),
            ("ResourceClaimTemplate", "one"), ("Pod", "healthy")}
    docs = []
    for d in yaml.safe_load_all(POISON_FLEET.replace("gpu.example.com", "gpu.nvidia.com")):
        if (d["kind"], d["metadata"]["name"]) in keep:
            keep.discard((d["kind"], d["metadata"]["name"]))
            docs.append(d)
    docs[0]["metadata"]["annotations"] = {"dra-scheduler.io/device-topology": annotation}
    f.write_text(yaml.safe_dump_all(docs))
    res = run_simulation([str(f)])
    pods = {p["metadata"]["name"]: p for p in res.items if p["kind"] == "Pod"}
    assert pods["healthy"]["spec"]["nodeName"] == "good"
    out = capsys.readouterr()
    assert "malformed device topology input ignored" in out.out + out.err
    assert "node=good" in out.out + out.err


def test_pod_waiting_for_a_missing_claim_says_why(tmp_path: Path) -> None:
    """Issue 13: pods waiting for a missing ResourceClaim stayed pending with no status."""
    f = tmp_path / "p.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4', memory: 4Gi, pods: '9'}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        "spec:\n  schedulerName: dra-scheduler\n  resourceClaims: [{name: gpu, resourceClaimName: nowhere}]\n"
        "  containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]\n"
    )
    res = run_simulation([str(f)])
    pod = next(p for p in res.items if p["kind"] == "Pod")
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "False" and cond["reason"] and "nowhere" in cond["message"]


def test_apischema_is_generated_from_the_1_37_2_openapi_documents() -> None:
    """scheduler/api/apischema.json is what scheduler/api/apischema_gen.py makes of k8s.io/kubernetes@v1.37.2's
    api/openapi-spec/v3 (in the Go module cache e2e/build.sh fills)."""
    from scheduler.api import apischema_gen

    if not os.path.isdir(apischema_gen.SPEC_DIR):
        pytest.skip(f"{apischema_gen.SPEC_DIR} not downloaded (e2e/build.sh fetches it)")
    committed = json.loads((Path(apischema_gen.__file__).parent / "apischema.json").read_text())
    assert apischema_gen.generate() == committed
