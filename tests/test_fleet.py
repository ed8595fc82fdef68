"""Fixture generator (bench/fleet.py) and the example manifests (manifests/examples/)."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the project is not necessarily installed into the venv
    sys.path.insert(0, str(ROOT))

from bench import fleet  # noqa: E402

EXAMPLES = ROOT / "manifests" / "examples"
FLEET_FILE = EXAMPLES / "00-fleet.yaml"

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ATTRIBUTE_VALUE_KEYS = {"string", "int", "bool", "version"}

JSON = dict[str, Any]


def _fixtures() -> dict[str, list[JSON]]:
    big = fleet.L40S_PCIE_8.with_gpu_count(200)  # forces a second slice (128-device limit)
    return {
        "demo": fleet.demo_fleet(),
        "dynamic-mig": fleet.dynamic_mig_fleet(),
        "scale-dgx": fleet.scale_fleet(20),
        "scale-mig-16": fleet.scale_fleet(3, gpus_per_node=16, sku=fleet.HGX_A100_80GB_MIG),
        "scale-dmig-4": fleet.scale_fleet(2, gpus_per_node=4, sku=fleet.DGX_H100_DYNAMIC_MIG),
        "200-gpus": fleet.gpu_node_objects("big-01", big),
    }


FIXTURES = _fixtures()


def _of_kind(objs: list[JSON], kind: str) -> list[JSON]:
    return [o for o in objs if o["kind"] == kind]


def _load_examples() -> dict[str, list[JSON]]:
    out: dict[str, list[JSON]] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        out[path.name] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return out


# ---------------------------------------------------------------------------------------------- slices


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_slices_respect_v1_limits(name: str) -> None:
    for s in _of_kind(FIXTURES[name], "ResourceSlice"):
        assert s["apiVersion"] == "resource.k8s.io/v1"
        spec = s["spec"]
        assert spec["driver"] == "gpu.nvidia.com"
        assert sum(k in spec for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")) == 1
        assert DNS_SUBDOMAIN.match(s["metadata"]["name"]) and len(s["metadata"]["name"]) <= 253
        devices = spec.get("devices", [])
        counter_sets = spec.get("sharedCounters", [])
        assert devices or counter_sets, "a slice must carry devices or counters"
        uses_counters = any("consumesCounters" in d or "taints" in d for d in devices)
        limit = fleet.MAX_DEVICES_PER_SLICE_WITH_COUNTERS if uses_counters else fleet.MAX_DEVICES_PER_SLICE
        assert len(devices) <= limit
        assert len(counter_sets) <= fleet.MAX_COUNTER_SETS_PER_SLICE
        for cs in counter_sets:
            assert DNS_LABEL.match(cs["name"])
            assert 0 < len(cs["counters"]) <= 32
            assert all(DNS_LABEL.match(c) for c in cs["counters"])
        for d in devices:
            assert DNS_LABEL.match(d["name"]) and len(d["name"]) <= 63, d["name"]
            attrs, caps = d.get("attributes", {}), d.get("capacity", {})
            assert len(attrs) + len(caps) <= fleet.MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, d["name"]
            for key, value in attrs.items():
                _check_qualified_name(key)
                assert len(value) == 1 and set(value) <= ATTRIBUTE_VALUE_KEYS, (d["name"], key, value)
                (kind, v), = value.items()
                assert isinstance(v, {"string": str, "version": str, "int": int, "bool": bool}[kind])
                if kind == "version":
                    assert re.fullmatch(r"\d+\.\d+\.\d+", str(v)), v
            for key, value in caps.items():
                _check_qualified_name(key)
                assert set(value) <= {"value", "requestPolicy"} and isinstance(value["value"], str)
            consumes = d.get("consumesCounters", [])
            assert len(consumes) <= 2
            for c in consumes:
                assert 0 < len(c["counters"]) <= 32


def _check_qualified_name(key: str) -> None:
    if "/" in key:
        domain, ident = key.split("/", 1)
        assert DNS_SUBDOMAIN.match(domain) and len(domain) <= 63, key
    else:
        ident = key
    assert C_IDENTIFIER.match(ident) and len(ident) <= 32, key


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_pools_are_complete_and_consistent(name: str) -> None:
    objs = FIXTURES[name]
    nodes = {n["metadata"]["name"] for n in _of_kind(objs, "Node")}
    pools: dict[tuple[str, str], list[JSON]] = defaultdict(list)
    for s in _of_kind(objs, "ResourceSlice"):
        spec = s["spec"]
        assert spec["pool"]["name"] == spec["nodeName"]
        assert spec["nodeName"] in nodes
        pools[(spec["driver"], spec["pool"]["name"])].append(s)
    assert set(p for _, p in pools) == nodes, "every node has a pool and every pool a node"
    for slices in pools.values():
        assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {len(slices)}
        assert len({s["spec"]["pool"]["generation"] for s in slices}) == 1
        assert len({s["metadata"]["name"] for s in slices}) == len(slices)
        names = [d["name"] for s in slices for d in s["spec"].get("devices", [])]
        assert len(names) == len(set(names)), "device names must be unique in a pool"
        counter_sets = {cs["name"]: cs["counters"]
                        for s in slices for cs in s["spec"].get("sharedCounters", [])}
        for s in slices:
            for d in s["spec"].get("devices", []):
                for c in d.get("consumesCounters", []):
                    assert c["counterSet"] in counter_sets, (d["name"], c["counterSet"])
                    assert set(c["counters"]) <= set(counter_sets[c["counterSet"]])


def test_resource_slice_count_and_generation() -> None:
    assert len(fleet.resource_slices("n", fleet.DGX_H100)) == 1
    assert len(fleet.resource_slices("n", fleet.DGX_H100_DYNAMIC_MIG)) == 9  # G + 1 (k8s >= 1.35)
    two = fleet.resource_slices("n", fleet.L40S_PCIE_8.with_gpu_count(200), generation=3)
    assert [len(s["spec"]["devices"]) for s in two] == [128, 72]
    assert {s["spec"]["pool"]["generation"] for s in two} == {3}


# ------------------------------------------------------------------------------------------------- MIG


def _devices_by_node(objs: list[JSON]) -> dict[str, list[JSON]]:
    out: dict[str, list[JSON]] = defaultdict(list)
    for s in _of_kind(objs, "ResourceSlice"):
        out[s["spec"]["nodeName"]].extend(s["spec"].get("devices", []))
    return out


def _attr(d: JSON, name: str) -> Any:
    (v,) = d["attributes"][name].values()
    return v


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_mig_devices_reference_their_parent_gpu(name: str) -> None:
    objs = FIXTURES[name]
    skus = {n["metadata"]["name"]: n["metadata"]["labels"]["node.kubernetes.io/instance-type"]
            for n in _of_kind(objs, "Node")}
    for node_name, devices in _devices_by_node(objs).items():
        published = {_attr(d, "uuid"): d for d in devices if _attr(d, "type") == "gpu"}
        used_slices: dict[str, set[int]] = defaultdict(set)
        for d in devices:
            if _attr(d, "type") != "mig":
                continue
            m = re.fullmatch(r"gpu-(\d+)-mig-(.+)-(\d+)-(\d+)", d["name"])
            assert m, d["name"]
            parent = _attr(d, "parentUUID")
            assert parent == fleet.gpu_uuid(node_name, int(m.group(1)))
            if parent in published:  # DynamicMIG: the parent is published too, with the same placement
                p = published[parent]
                for key in ("resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot",
                            "productName"):
                    assert d["attributes"][key] == p["attributes"][key]
            else:  # static MIG: a GPU in MIG mode is published only through its MIG devices
                assert "consumesCounters" not in d
                assert _attr(d, "uuid").startswith("MIG-")
                sku_name = skus[node_name]
                assert sku_name.startswith(fleet.HGX_A100_80GB_MIG.name)
                slices = {int(k[len("memorySlice"):]) for k in d["capacity"] if k.startswith("memorySlice")}
                assert slices and not (slices & used_slices[parent]), "MIG placements overlap"
                used_slices[parent] |= slices
            assert _attr(d, "profile") in {p.name for p in fleet.A100_80GB_MIG_PROFILES} | {
                p.name for p in fleet.H100_80GB_MIG_PROFILES}


def test_mig_layout_of_demo_node() -> None:
    devices = _devices_by_node(fleet.demo_fleet())["a100-mig-01"]
    names = {d["name"] for d in devices}
    assert {"gpu-0", "gpu-1", "gpu-2", "gpu-3"} <= names and "gpu-4" not in names
    assert "gpu-4-mig-3g40gb-9-4" in names and "gpu-7-mig-1g10gb-me-20-6" in names
    three_g = next(d for d in devices if d["name"] == "gpu-4-mig-3g40gb-9-4")
    assert three_g["capacity"]["memory"] == {"value": "40192Mi"}
    assert three_g["capacity"]["multiprocessors"] == {"value": "42"}
    slices = {k for k in three_g["capacity"] if k.startswith("memorySlice")}
    assert slices == {f"memorySlice{i}" for i in range(4, 8)}


# --------------------------------------------------------------------------------------- nodes, classes


def test_nodes_are_schedulable_and_carry_topology() -> None:
    for n in _of_kind(fleet.demo_fleet(), "Node"):
        meta, status = n["metadata"], n["status"]
        assert meta["labels"]["kubernetes.io/hostname"] == meta["name"]
        assert meta["labels"]["nvidia.com/gpu.product"]
        assert not n["spec"].get("unschedulable") and not n["spec"].get("taints")
        assert {"type": "Ready", "status": "True"}.items() <= status["conditions"][0].items()
        assert int(status["allocatable"]["cpu"]) >= 64 and int(status["allocatable"]["pods"]) >= 110
        assert "nvidia.com/gpu" not in status["allocatable"]
        topo = json.loads(meta["annotations"][fleet.TOPOLOGY_ANNOTATION])
        assert topo["driver"] == "gpu.nvidia.com"
        size = len(topo["devices"])
        assert size == int(meta["labels"]["nvidia.com/gpu.count"])
        matrix = topo["matrix"]
        assert len(matrix) == size and all(len(row) == size for row in matrix)
        for i in range(size):
            assert matrix[i][i] == "X"
            for j in range(size):
                assert matrix[i][j] == matrix[j][i]
                assert re.fullmatch(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS", matrix[i][j])


def test_device_classes_match_the_chart() -> None:
    classes = {c["metadata"]["name"]: c for c in fleet.device_classes()}
    assert {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"} <= set(classes)
    expr = classes["mig.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"]
    assert expr == "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"


def test_scale_fleet_shape() -> None:
    objs = fleet.scale_fleet(100, gpus_per_node=8)
    nodes = _of_kind(objs, "Node")
    assert len(nodes) == 100 and len({n["metadata"]["name"] for n in nodes}) == 100
    assert len(_of_kind(objs, "ResourceSlice")) == 100
    assert all(len(s["spec"]["devices"]) == 8 for s in _of_kind(objs, "ResourceSlice"))
    racks = {n["metadata"]["labels"][fleet.RACK_LABEL] for n in nodes}
    assert len(racks) == 100 // 8 + 1
    assert len(_of_kind(fleet.scale_fleet(2, gpus_per_node=2), "ResourceSlice")[0]["spec"]["devices"]) == 2


# --------------------------------------------------------------------------------------------- examples


def test_fleet_file_is_what_the_generator_makes() -> None:
    text = FLEET_FILE.read_text()
    assert text == fleet.to_yaml(fleet.demo_fleet(), fleet.DEMO_HEADER), (
        "manifests/examples/00-fleet.yaml is stale: run "
        "`python -m bench.fleet demo > manifests/examples/00-fleet.yaml`")
    assert [d for d in yaml.safe_load_all(text) if d is not None] == fleet.demo_fleet()


def test_cli_demo_prints_the_fleet_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert fleet.main(["demo"]) == 0
    assert capsys.readouterr().out == FLEET_FILE.read_text()
    assert fleet.main(["scale", "3", "--sku", "t4-pcie-4"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert len(_of_kind(docs, "Node")) == 3
    assert fleet.main(["scale", "2", "--gpus-per-node", "4", "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["kind"] == "List" and len(_of_kind(listed["items"], "ResourceSlice")) == 2


def test_every_example_parses_and_names_its_objects() -> None:
    examples = _load_examples()
    assert "00-fleet.yaml" in examples and len(examples) >= 8
    for fname, docs in examples.items():
        assert docs, fname
        for d in docs:
            assert d.get("apiVersion") and d.get("kind"), fname
            assert d.get("metadata", {}).get("name"), (fname, d.get("kind"))
        if fname != "00-fleet.yaml":
            assert (EXAMPLES / fname).read_text().startswith("#"), f"{fname}: comment header missing"


def _selectors(obj: JSON) -> list[Any]:
    """Every CEL selector of a DeviceClass, ResourceClaim or ResourceClaimTemplate."""
    kind = obj["kind"]
    if kind == "DeviceClass":
        return list(obj["spec"].get("selectors", []))
    if kind == "ResourceClaimTemplate":
        spec = obj["spec"]["spec"]
    elif kind == "ResourceClaim":
        spec = obj["spec"]
    else:
        return []
    out: list[Any] = []
    for r in spec["devices"]["requests"]:
        assert ("exactly" in r) != ("firstAvailable" in r), r
        for sub in [r["exactly"]] if "exactly" in r else r["firstAvailable"]:
            out.extend(sub.get("selectors", []))
    return out


def _all_objects() -> list[JSON]:
    return [d for docs in _load_examples().values() for d in docs]


def test_cel_selectors_are_non_empty_strings() -> None:
    count = 0
    for obj in _all_objects():
        for sel in _selectors(obj):
            expr = sel["cel"]["expression"]
            assert isinstance(expr, str) and expr.strip(), obj["metadata"]["name"]
            count += 1
    assert count >= 15


def test_examples_refer_to_what_the_fleet_publishes() -> None:
    objs = _all_objects()
    devices = [d for s in _of_kind(objs, "ResourceSlice") for d in s["spec"].get("devices", [])]
    attr_names = {k for d in devices for k in d["attributes"]}
    cap_names = {k for d in devices for k in d["capacity"]}
    values: dict[str, set[Any]] = defaultdict(set)
    for d in devices:
        for k, v in d["attributes"].items():
            values[k].update(v.values())
    classes = {c["metadata"]["name"] for c in _of_kind(objs, "DeviceClass")}
    for obj in objs:
        for sel in _selectors(obj):
            expr = sel["cel"]["expression"]
            for a in re.findall(r"attributes\[['\"]gpu\.nvidia\.com['\"]\]\.(\w+)", expr):
                assert a in attr_names or obj["metadata"]["name"].startswith("compute-domain"), (a, expr)
            for c in re.findall(r"capacity\[['\"]gpu\.nvidia\.com['\"]\]\.(\w+)", expr):
                assert c in cap_names, (c, expr)
            compared = r"attributes\[['\"]gpu\.nvidia\.com['\"]\]\.(\w+)\s*==\s*['\"]([^'\"]+)['\"]"
            for a, lit in re.findall(compared, expr):
                assert lit in values[a] or lit == "vfio", (a, lit, expr)
        if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate"):
            spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
            for r in spec["devices"]["requests"]:
                for sub in [r["exactly"]] if "exactly" in r else r["firstAvailable"]:
                    assert sub["deviceClassName"] in classes, sub
            for c in spec["devices"].get("constraints", []):
                domain, name = c["matchAttribute"].split("/", 1)
                assert (name if domain == "gpu.nvidia.com" else c["matchAttribute"]) in attr_names, c


def test_example_pods_are_wired_to_their_claims() -> None:
    objs = _all_objects()
    namespaces = {o["metadata"]["name"] for o in _of_kind(objs, "Namespace")} | {"default"}
    claims = {(o["metadata"].get("namespace", "default"), o["metadata"]["name"])
              for o in _of_kind(objs, "ResourceClaim")}
    templates = {(o["metadata"].get("namespace", "default"), o["metadata"]["name"])
                 for o in _of_kind(objs, "ResourceClaimTemplate")}
    pods = _of_kind(objs, "Pod")
    assert len(pods) >= 8
    for pod in pods:
        ns = pod["metadata"].get("namespace", "default")
        assert ns in namespaces
        spec = pod["spec"]
        assert spec["schedulerName"] == "dra-scheduler"
        assert "nodeName" not in spec
        pod_claims = {c["name"]: c for c in spec["resourceClaims"]}
        for c in pod_claims.values():
            if "resourceClaimName" in c:
                assert (ns, c["resourceClaimName"]) in claims
            else:
                assert (ns, c["resourceClaimTemplateName"]) in templates
        for ctr in spec["containers"]:
            res = ctr["resources"]
            for c in res["claims"]:
                assert c["name"] in pod_claims
            cpu = res["requests"]["cpu"]
            assert (float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)) <= 8
    for o in objs:
        if o["kind"] in ("ResourceClaim", "ResourceClaimTemplate", "Pod"):
            assert o["metadata"].get("namespace", "default") in namespaces
