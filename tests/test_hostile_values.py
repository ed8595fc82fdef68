"""Issue 25, items 2 and 3: null values in string maps, and hostile values that used to end in a traceback.

Item 2 (null in a ``map[string]string``): the API server decodes objects with Go's ``encoding/json`` (YAML is
converted to JSON first, ``sigs.k8s.io/yaml``). Its ``Unmarshal`` documentation: "The JSON null value unmarshals
into an interface, map, pointer, or slice by setting that Go value to nil. Because null is often used in JSON to
mean 'not present,' unmarshaling a JSON null into any other Go type has no effect on the value and produces no
error." For an object decoded into a map, the decoder makes a zero element for each key, decodes the value into it
and stores it under the key: ``{"zone": null}`` into a ``map[string]string`` is ``{"zone": ""}``, so
``nodeSelector: {zone: null}`` requires the node label ``zone=""``. Likewise a ``ResourceList``
(``map[ResourceName]resource.Quantity``): ``Quantity.UnmarshalJSON`` (k8s.io/apimachinery/pkg/api/resource)
reads ``null`` as the zero quantity, stored under its key ("0"). A null *struct field* stays "unset" (dropped).

Item 3 (hostile values): a device-topology annotation nested 100,000 deep made ``json.loads`` raise
RecursionError in GpuTopology; a quantity with 5,000 digits made Python's integer string-conversion limit
(4,300 digits) raise ValueError in ``parse_quantity``. Upstream ``resource.ParseQuantity``
(k8s.io/apimachinery/pkg/api/resource/quantity.go) accepts any number of digits: values past int64 go to an
``inf.Dec``, rounded up to a multiple of 1n, BinarySI values capped at 2^63-1; ``MilliValue()`` of a value past
int64 is not meaningful (it is the low 64 bits of a big integer). We keep Go's value where it can matter (tiny
fractions round up to 1n, BinarySI caps) and refuse, with a message, values of more than 10^4096 (see
``scheduler.api.quantity``); ``simulate``'s input check refuses every quantity past the int64 range of milli-units.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.dra import slice_from
from scheduler.api.inputcheck import check_object, drop_nulls
from scheduler.api.labelselector import selector_from
from scheduler.api.model import ModelError, node_from, pod_from, pod_resource_errors
from scheduler.api.quantity import MAX_EXPONENT, QuantityError, parse_quantity
from scheduler.api.semver import SemverError
from scheduler.api.semver import parse as parse_semver
from scheduler.simulate.simulation import load_objects, run_simulation

BIG = "1" + "0" * 5000  # 5,001 digits: past Python's 4,300-digit int(str) limit
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
TOPOLOGY = "dra-scheduler.io/device-topology"
DRIVER = "gpu.nvidia.com"


def _node(name: str, labels: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}, **status},
    }


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "dra-scheduler", "containers": [{"name": "c", "image": "i"}], **spec},
    }


def _slice(node: str, capacity: Any = "80Gi") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                    "capacity": {"memory": {"value": capacity}},
                }
                for i in range(2)
            ],
        },
    }


def _write(tmp_path: Path, objs: list[dict[str, Any]], text_tail: str = "") -> str:
    f = tmp_path / "in.yaml"
    f.write_text(yaml.safe_dump_all(objs) + text_tail)
    return str(f)


def _placed(res: Any) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in res.items if p["kind"] == "Pod"}


# --- item 2: null map values --------------------------------------------------------------------------------


def test_null_node_selector_value_requires_the_empty_label_value(tmp_path: Path) -> None:
    """``nodeSelector: {zone: null}`` is stored as ``zone: ""`` by the API server (Go ``encoding/json``: a null
    map value is the element type's zero value, stored under its key); it used to bind to any node."""
    f = _write(
        tmp_path,
        [
            _node("a-unlabelled"),
            _node("b-zone-x", {"zone": "x"}),
            _node("c-zone-empty", {"zone": ""}),
            _pod("null-zone", nodeSelector={"zone": None}),
            _pod("empty-zone", nodeSelector={"zone": ""}),
        ],
    )
    placed = _placed(run_simulation([f]))
    assert placed == {"null-zone": "c-zone-empty", "empty-zone": "c-zone-empty"}


def test_null_node_selector_value_with_no_such_node_stays_pending(tmp_path: Path) -> None:
    objs = [_node("a-unlabelled"), _node("b-zone-x", {"zone": "x"}), _pod("p", nodeSelector={"zone": None})]
    f = _write(tmp_path, objs)
    res = run_simulation([f])
    pod = next(p for p in res.items if p["kind"] == "Pod")
    assert not pod["spec"].get("nodeName")
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "False" and "node affinity/selector" in cond["message"]


def test_null_node_label_value_is_the_empty_value(tmp_path: Path) -> None:
    """A node's ``labels: {zone: null}`` is the label ``zone=""`` (same Go decoding rule): it matches a pod's
    ``nodeSelector: {zone: ""}``; a pod with ``zone: x`` does not go there."""
    f = _write(
        tmp_path,
        [_node("a", {"zone": None}), _pod("empty", nodeSelector={"zone": ""}), _pod("x", nodeSelector={"zone": "x"})],
    )
    assert _placed(run_simulation([f])) == {"empty": "a", "x": ""}


def test_drop_nulls_follows_go_decoding_per_field_type() -> None:
    """String maps: null -> ""; ResourceLists: null -> the zero Quantity "0" (``Quantity.UnmarshalJSON`` of
    ``null``); struct fields and other nulls: unset. Items of a List are decoded with their own kind."""
    pod = _pod("p", nodeSelector={"zone": None, "rack": "r1"}, priority=None)
    pod["metadata"].update(labels={"app": None}, annotations={"note": None}, namespace=None)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": None}, "limits": {"cpu": "2"}}
    pod["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"team": None}}, "topologyKey": "zone", "namespaces": None}
            ]
        }
    }
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": None}}, "template": {"spec": {"nodeSelector": {"z": None}}}},
    }
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"selector": {"app": None}}}
    items = [pod, rs, svc, {"kind": "Unknown", "x": {"a": None}}]
    out = drop_nulls({"apiVersion": "v1", "kind": "List", "items": items})
    pod, rs, svc, unknown = out["items"]
    assert pod["metadata"] == {"name": "p", "labels": {"app": ""}, "annotations": {"note": ""}}
    assert pod["spec"]["nodeSelector"] == {"zone": "", "rack": "r1"}
    assert "priority" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "0"}, "limits": {"cpu": "2"}}
    term = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term == {"labelSelector": {"matchLabels": {"team": ""}}, "topologyKey": "zone"}
    assert rs["spec"] == {"selector": {"matchLabels": {"app": ""}}, "template": {"spec": {"nodeSelector": {"z": ""}}}}
    assert svc["spec"] == {"selector": {"app": ""}}
    assert unknown == {"kind": "Unknown", "x": {}}  # no schema: null is "not present"
    assert check_object(pod) == []


def test_null_request_is_an_explicit_zero_not_defaulted_from_the_limit(tmp_path: Path) -> None:
    """``requests: {cpu: null}`` decodes to cpu 0 (``Quantity.UnmarshalJSON``): present, so ``SetDefaults_Pod``
    does not copy the limit into it. With cpu 2 per node, two such pods (limit 2 each) fit one node."""
    pods = []
    for i in range(2):
        p = _pod(f"p{i}")
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": None}, "limits": {"cpu": "2"}}
        pods.append(p)
    node = _node("n")
    node["status"]["allocatable"]["cpu"] = "2"
    assert _placed(run_simulation([_write(tmp_path, [node, *pods])])) == {"p0": "n", "p1": "n"}


def test_model_reads_null_string_map_values_as_empty() -> None:
    """The live path (informers -> scheduler.api.model) uses the same rule as the API server's decoding."""
    pod = pod_from(_pod("p", nodeSelector={"zone": None}) | {"metadata": {"name": "p", "labels": {"a": None}}})
    assert pod.node_selector == {"zone": ""}
    assert pod.meta.labels == {"a": ""}
    node = node_from(_node("n", {"zone": None}))
    assert node.meta.labels["zone"] == ""
    sel = selector_from({"matchLabels": {"zone": None}}, "selector")
    assert sel.matches({"zone": ""}) and not sel.matches({"zone": "x"}) and not sel.matches({})


# --- item 3a: deeply nested topology annotation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation",
    [DEEP_ARRAY, DEEP_OBJECT, '{"driver": "gpu.nvidia.com", "x": ' + DEEP_ARRAY + "}"],
    ids=["array", "object", "inside"],
)
def test_deeply_nested_topology_annotation_is_ignored_for_that_node(
    tmp_path: Path, annotation: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The annotation used to end the run with RecursionError (``json.loads`` in GpuTopology ``view``); it is a
    malformed input of that node: reported (Warning), ignored, the node schedules."""
    bad = _node("bad")
    bad["metadata"]["annotations"] = {TOPOLOGY: annotation}
    objs: list[dict[str, Any]] = [
        bad,
        _slice("bad"),
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "two", "namespace": "default"},
         "spec": {"spec": {"devices": {"requests": [
             {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}}},
        _pod("gpus", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "two"}]),
    ]
    objs[-1]["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    res = run_simulation([_write(tmp_path, objs)])
    assert _placed(res) == {"gpus": "bad"}
    out = capsys.readouterr()
    assert "malformed device topology input ignored" in out.out + out.err
    assert "nested too deeply" in out.out + out.err


def test_parse_annotation_refuses_deep_nesting_with_a_message() -> None:
    from plugins.topology.graph import TopologyInputError, parse_annotation

    for value in (DEEP_ARRAY, DEEP_OBJECT):
        with pytest.raises(TopologyInputError, match=rf"annotation {TOPOLOGY}: invalid JSON: nested too deeply"):
            parse_annotation(value)


# --- item 3b: quantities with thousands of digits -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        # rounded up to 1n (Go: amount.Round(Nano, RoundUp)) whatever the number of digits
        ("0." + "0" * 5000 + "1", Fraction(1, 10**9), "DecimalSI"),
        ("0." + "0" * 5000 + "1Ki", Fraction(1, 10**9), "DecimalSI"),
        ("1." + "0" * 5000, Fraction(1), "DecimalSI"),
        ("1." + "0" * 5000 + "1", Fraction(1_000_000_001, 10**9), "DecimalSI"),
        ("1.5" + "0" * 5000 + "1m", Fraction(1_500_001, 10**9), "DecimalSI"),
        ("0." + "9" * 5000, Fraction(1), "DecimalSI"),
        ("1" + "2" * 4500 + "e-4096", Fraction(int("1" + "2" * 404 + "222222223"), 10**9), "DecimalExponent"),
        (BIG + "e-4096", Fraction(10**904), "DecimalExponent"),
        # BinarySI: capped at 2^63-1 (Go: "The max is just a simple cap")
        (BIG + "Ki", Fraction(2**63 - 1), "BinarySI"),
        ("-" + BIG + "Ei", Fraction(-(2**63 - 1)), "BinarySI"),
        ("0." + "0" * 5000 + "1" + "0" * 5000 + "Mi", Fraction(1, 10**9), "DecimalSI"),
    ],
)
def test_parse_quantity_with_thousands_of_digits_keeps_gos_value(text: str, value: Fraction, fmt: str) -> None:
    """``resource.ParseQuantity`` reads any number of digits (``inf.Dec``): a value past Python's 4,300-digit
    ``int(str)`` limit used to raise a bare ValueError."""
    q = parse_quantity(text)
    assert (q.value, q.fmt) == (value, fmt)
    str(q)  # printable


def test_huge_decimal_quantity_is_a_quantity_error_naming_the_range() -> None:
    for text in (BIG, BIG + "m", "-" + BIG, BIG + "." + "5" * 5000, "9" * 4098, "1" + "0" * 4000 + "e97"):
        range_error = rf"out of the supported range \(less than 10\^{MAX_EXPONENT + 1}\)"
        with pytest.raises(QuantityError, match=range_error) as e:
            parse_quantity(text)
        assert len(str(e.value)) < 300, str(e.value)  # the input is shortened in the message
    assert parse_quantity("1" + "0" * 4096).value == 10**4096  # the largest magnitude kept


@pytest.mark.parametrize("where", ["requests", "limits"])
def test_huge_pod_request_is_refused_by_the_input_check(where: str) -> None:
    pod = _pod("p")
    pod["spec"]["containers"][0]["resources"] = {where: {"cpu": BIG}}
    shown = repr(BIG[:60] + "…")
    assert check_object(pod) == [
        f"spec.containers[0].resources.{where}.cpu: invalid quantity {shown} (5001 characters): exceeds the int64 "
        "range of milli-units (9223372036854775807m)"
    ]


def test_huge_quantities_refuse_their_object_and_the_run_goes_on(tmp_path: Path) -> None:
    """``simulate``: the pod with a 5,000-digit request and the slice with a 5,000-digit capacity are refused
    (file, document, field named), the healthy pod is bound (it used to end in a traceback)."""
    big_pod = _pod("big")
    big_pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": BIG}}
    tiny = _pod("tiny")
    tiny["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "0." + "0" * 5000 + "1"}}
    f = _write(tmp_path, [_node("n"), _slice("n", BIG), big_pod, tiny, _pod("healthy")])
    rejected: list[str] = []
    load_objects([f], rejected)
    assert [r.split(": ", 4)[1:4] for r in rejected] == [
        ["document 1", "ResourceSlice n-gpus", "spec.devices[0].capacity.memory.value"],
        ["document 1", "ResourceSlice n-gpus", "spec.devices[1].capacity.memory.value"],
        ["document 2", "Pod default/big", "spec.containers[0].resources.requests.cpu"],
    ]
    assert all("exceeds the int64 range of milli-units" in r for r in rejected)
    assert all(len(r) < 600 for r in rejected)
    assert _placed(run_simulation([f])) == {"healthy": "n", "tiny": "n"}


def test_huge_quantities_in_the_live_conversion_are_clean_model_errors() -> None:
    """The informers' conversion (scheduler.api.model): a node or slice with such a value is a ModelError (the
    object is rejected and logged), a pod's request is one of its resource errors (unschedulable, named)."""
    node = _node("n")
    node["status"]["allocatable"]["cpu"] = BIG
    with pytest.raises(ModelError, match=r"status\.allocatable\.cpu: invalid quantity '1000.*out of the supported"):
        node_from(node)
    with pytest.raises(ModelError, match=r"capacity.*invalid quantity '1000.*out of the supported"):
        slice_from(_slice("n", BIG))
    raw = _pod("p")
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": BIG, "memory": "1Gi"}}
    pod = pod_from(raw)
    assert pod.requests.get("memory") == 2**30
    errs = pod_resource_errors(pod)
    assert len(errs) == 1 and errs[0].startswith("spec.containers[0].resources.requests[cpu]: Invalid value: ")
    assert "out of the supported range" in errs[0] and len(errs[0]) < 300

    # through the informers' cache: the objects are rejected and named, the healthy ones are there
    from scheduler.cache.cache import Cache

    cache = Cache()
    cache.apply("Node", "ADDED", node)
    cache.apply("Node", "ADDED", _node("ok", {"zone": None}))
    cache.apply("ResourceSlice", "ADDED", _slice("ok", BIG))
    cache.apply("Pod", "ADDED", raw)
    cache.apply("Pod", "ADDED", _pod("q", nodeSelector={"zone": None}))
    assert set(cache.conversion_errors) == {"Node n", "ResourceSlice ok-gpus"}
    assert all(len(e) < 300 for e in cache.conversion_errors.values())
    assert cache.nodes()["ok"].labels == {"kubernetes.io/hostname": "ok", "zone": ""}
    assert set(cache.pods()) == {"default/p", "default/q"}
    assert cache.pods()["default/q"].node_selector == {"zone": ""}


def test_semver_with_thousands_of_digits_is_a_semver_error() -> None:
    """Same integer string-conversion limit in a version's numbers (a slice's ``version`` attribute, CEL
    ``semver()``): blang/semver refuses numbers past uint64 ("out of range")."""
    for text in (BIG + ".0.0", "1.0.0-" + BIG):
        with pytest.raises(SemverError, match="out of range") as e:
            parse_semver(text)
        assert len(str(e.value)) < 300


def test_fuzz_generators_cover_issue_25() -> None:
    """tests/fuzzlib.py mutates inputs with deep annotation JSON, huge-digit quantities and null map values."""
    import random
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import fuzzlib

    seen: set[str] = set()
    _, victims = fuzzlib.base_objects()
    for i in range(400):
        _, notes = fuzzlib.mutate_objects(random.Random(i), victims)
        seen.update(n.split(":")[0] for n in notes)
    assert {"deep topology annotation", "huge quantity", "null map value"} <= seen, seen
    assert json.dumps(fuzzlib.BAD_VALUES, default=str)
