"""Seeded fuzzing of ``simulate``'s input path and of ``check-config`` (tests/test_fuzz_*.py).

A healthy base scenario (a sentinel node with GPUs and sentinel pods, plain and DRA, that depend on nothing
else) plus "victim" objects (more nodes, slices, classes, claims, templates, pods) is written as YAML; each
case applies one or a few seeded mutations to the victims or to the YAML text itself (wrong types, deleted
fields, huge or negative numbers, invalid quantities and semvers, hostile CEL, malformed topology
annotations, topology annotations nested 100,000 deep, quantities of 5,000 digits, null values in string maps
and ResourceLists, duplicate objects, alias bombs, deep nesting, 5,000-digit integers, non-UTF-8 bytes,
timestamps, duplicate keys) and runs ``load_objects`` + ``simulate`` in a child process with an address-space
limit and a per-case alarm. Checked for every case:

* no traceback (only ``InputError`` for a file that is no valid YAML, naming file and document);
* no hang (per-case timeout) and bounded memory (``RLIMIT_AS`` of the child);
* every refused object's message names the file, the document and the field;
* the sentinel pods are all bound (one poisoned object never stops the healthy pods beside it);
* every pod of ours left pending carries a ``PodScheduled=False`` condition with a reason;
* every pod bound to a node matches its ``nodeSelector`` on that node's labels, a null value read as Go's JSON
  decoding reads it (``""``, issue 25), when the YAML text was not mutated.

Run: ``python tests/fuzzlib.py SEED COUNT [--config]`` prints one JSON line per case.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

import yaml

SENTINEL_NS = "sentinel"
SCHED = "dra-scheduler"
DRIVER = "gpu.example.com"


def _slice(node: str, n: int, version: str = "1.2.3") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "index": {"int": i},
                        "driverVersion": {"version": version},
                        "productName": {"string": "H100"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(n)
            ],
        },
    }


def _node(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                     "annotations": annotations or {}},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
    }


def _class(name: str, expr: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def _template(ns: str, name: str, cls: str, count: int = 1, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def _pod(ns: str, name: str, *, cpu: str = "100m", template: str | None = None, claim: str | None = None,
         node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHED,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if template or claim:
        rc: dict[str, Any] = {"name": "gpu"}
        if template:
            rc["resourceClaimTemplateName"] = template
        else:
            rc["resourceClaimName"] = claim
        spec["resourceClaims"] = [rc]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": spec}


TOPOLOGY = json.dumps({"driver": DRIVER, "devices": ["gpu-0", "gpu-1"], "matrix": [["X", "NV18"], ["NV18", "X"]]})


def base_objects() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(sentinels, victims). Sentinels only use the sentinel node and class: nothing a mutation touches."""
    sentinels: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SENTINEL_NS}},
        _node("sentinel-node", {"role": "sentinel"}, {"dra-scheduler.io/device-topology": TOPOLOGY}),
        _slice("sentinel-node", 2),
        _class("sentinel-gpu", f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu" && '
                               f'device.attributes["{DRIVER}"].productName == "H100"'),
        _template(SENTINEL_NS, "one-gpu", "sentinel-gpu"),
        _pod(SENTINEL_NS, "plain-0", node_selector={"role": "sentinel"}),
        _pod(SENTINEL_NS, "plain-1", cpu="250m", node_selector={"role": "sentinel"}),
        _pod(SENTINEL_NS, "gpu-0", template="one-gpu", node_selector={"role": "sentinel"}),
    ]
    victims: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}},
        _node("node-a", {"role": "worker"}, {"dra-scheduler.io/device-topology": TOPOLOGY}),
        _node("node-b", {"role": "worker"}),
        _slice("node-a", 2),
        _slice("node-b", 4, "2.0.0"),
        _class("gpu", f'device.driver == "{DRIVER}"'),
        _class("gpu-v2", f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.5.0"))'),
        _template("work", "two-gpus", "gpu", 2),
        _template("work", "new-driver", "gpu-v2", 1, f'device.attributes["{DRIVER}"].index >= 0'),
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "shared", "namespace": "work"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
        _pod("work", "w-plain", cpu="2", node_selector={"role": "worker"}),
        _pod("work", "w-two", template="two-gpus", node_selector={"role": "worker"}),
        _pod("work", "w-new", template="new-driver", node_selector={"role": "worker"}),
        _pod("work", "w-shared", claim="shared", node_selector={"role": "worker"}),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    ]
    return sentinels, victims


# -- mutations --------------------------------------------------------------------------------------------

HOSTILE_CEL = [
    # nested string concatenation (cost limit): 10**9 characters, ten copies per level
    "cel.bind(a, 'xxxxxxxxxx', "
    + "".join(f"cel.bind(b{i}, {' + '.join([f'b{i - 1}' if i else 'a'] * 10)}, " for i in range(8))
    + "b7.size() > 0" + ")" * 9,
    # catastrophic backtracking for a backtracking engine
    'device.attributes["gpu.example.com"].productName.matches("^(a+)+$") || '
    '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!".matches("^(a+)+$")',
    '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!".find("(a|aa)+$") == ""',
    # comprehension over cel-cpp's iteration budget
    "[1,2,3,4,5,6,7,8,9,10].map(x, [1,2,3,4,5,6,7,8,9,10].map(y, [1,2,3,4,5,6,7,8,9,10].map(z, "
    "[1,2,3,4,5,6,7,8,9,10].map(w, x + y + z + w)))).size() > 0",
    "lists.range(1000000).all(i, i >= 0)",
    # runtime errors, compile errors, wrong result types
    'device.attributes["gpu.example.com"].nosuch == 1',
    "1 / 0 == 1",
    "device.attributes[",
    '"not a bool"',
    "device.nosuchfield",
    "[1, 'a'].size() > 0",
    "x" * 20000,
]

BIG = "1" + "0" * 5000  # past Python's 4,300-digit int(str) limit (issue 25)
HUGE_QUANTITIES = [BIG, "-" + BIG, BIG + "Ki", BIG + "m", "0." + "0" * 5000 + "1", BIG + "e-4096", "9" * 4300 + "m",
                   "1e" + "9" * 5000, "1." + "5" * 5000 + "Mi"]
DEEP_JSON = ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
             '{"driver": "gpu.example.com", "devices": ' + "[" * 50_000 + "]" * 50_000 + "}"]

BAD_VALUES: list[Any] = [
    None, 0, -1, 1.5, True, "", "x", [], {}, [1, {"a": None}], {"a": [1]}, {"a": None},
    10**30, -(10**30), "-1", "1e400", "NaN", "∞", "\u0000", "a" * 5000, "99999999999999999999Gi", BIG,
    "0." + "0" * 5000 + "1",
]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> None:
    for p in path[:-1]:
        obj = obj[p]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


def _of(objs: list[Any], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """Objects of a kind that earlier mutations left recognisable."""
    out = []
    for o in objs:
        if (
            isinstance(o, dict)
            and o.get("kind") == kind
            and isinstance(o.get("metadata"), dict)
            and (name is None or o["metadata"].get("name") == name)
        ):
            out.append(o)
    return out


def mutate_objects(rng: random.Random, victims: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    objs = copy.deepcopy(victims)
    notes = []
    for _ in range(rng.randint(1, 3)):
        k = rng.random()
        target = rng.choice(objs)
        if k < 0.4:
            paths = _paths(target)
            if not paths:
                continue
            path = rng.choice(paths)
            if rng.random() < 0.2 and len(path) > 1:
                _set(target, path, None, delete=True)
                notes.append(f"delete {path}")
            else:
                v = copy.deepcopy(rng.choice(BAD_VALUES))
                _set(target, path, v)
                notes.append(f"set {path} = {str(v)[:40]!r}")
            continue
        if k < 0.52:
            expr = rng.choice(HOSTILE_CEL)
            for cls in _of(objs, "DeviceClass")[:1]:
                cls["spec"] = {"selectors": [{"cel": {"expression": expr}}]}
                notes.append(f"class selector {expr[:50]!r}")
            continue
        if k < 0.6:
            for sl in _of(objs, "ResourceSlice")[:1]:
                devs = (sl.get("spec") or {}).get("devices") if isinstance(sl.get("spec"), dict) else None
                if isinstance(devs, list) and devs and isinstance(devs[0], dict):
                    dev = rng.choice([d for d in devs if isinstance(d, dict)] or [devs[0]])
                    value = rng.choice(
                        [{"version": "not-semver"}, {"version": "v1.2"}, {"string": "x", "int": 1}, {}, {"version": 5}]
                    )
                    dev.setdefault("attributes", {})
                    if isinstance(dev["attributes"], dict):
                        dev["attributes"]["driverVersion"] = value
                        notes.append(f"slice attribute {value}")
            continue
        if k < 0.68:
            deep = rng.random() < 0.4
            for n in _of(objs, "Node", "node-a"):
                n["metadata"]["annotations"] = {"dra-scheduler.io/device-topology": rng.choice(
                    DEEP_JSON if deep else
                    ["{", "[]", "null", '{"driver": 5}', '{"driver": "x", "devices": ["a"], "matrix": [["Q"]]}',
                     json.dumps({"driver": DRIVER, "devices": ["gpu-0"] * 3, "matrix": [[None]]}), "x" * 10000,
                     json.dumps({"driver": DRIVER, "devices": ["gpu-0", "gpu-1"],
                                 "matrix": [["X", "NV9999"], ["NV1", "X"]]})]
                )}
                notes.append("deep topology annotation" if deep else "topology annotation")
            continue
        if k < 0.74:
            notes += _huge_quantity(rng, objs)
            continue
        if k < 0.8:
            notes += _null_map_value(rng, objs)
            continue
        if k < 0.85:
            objs.append(copy.deepcopy(target))
            notes.append("duplicate object")
            continue
        pods = [p for p in _of(objs, "Pod") if isinstance(p.get("spec"), dict)]
        if not pods:
            continue
        p = rng.choice(pods)
        if k < 0.92:
            try:
                c = p["spec"]["containers"][0]["resources"]["requests"]
                c["cpu"] = rng.choice(["-1", "-500m", "1e400", "abc", "0.0000000001", "9" * 40])
                notes.append(f"pod cpu {c['cpu']}")
            except (KeyError, IndexError, TypeError):
                pass
        else:
            p["spec"][rng.choice(["priorityClassName", "nodeName", "schedulerName", "resourceClaims"])] = rng.choice(
                ["missing-class", 12, ["x"], {"a": 1}, None]
            )
            notes.append("pod spec field")
    return objs, notes


def _huge_quantity(rng: random.Random, objs: list[dict[str, Any]]) -> list[str]:
    """A quantity of thousands of digits in a pod request or limit, a device capacity or a node's allocatable
    (issue 25: Python's integer string-conversion limit raised ValueError in parse_quantity)."""
    value = rng.choice(HUGE_QUANTITIES)
    where = rng.choice(["pod", "slice", "node"])
    try:
        if where == "pod":
            p = rng.choice([p for p in _of(objs, "Pod") if isinstance(p.get("spec"), dict)])
            res = p["spec"]["containers"][0].setdefault("resources", {})
            res.setdefault(rng.choice(["requests", "limits"]), {})[rng.choice(["cpu", "memory"])] = value
        elif where == "slice":
            sl = rng.choice(_of(objs, "ResourceSlice"))
            sl["spec"]["devices"][0]["capacity"]["memory"]["value"] = value
        else:
            n = rng.choice(_of(objs, "Node"))
            n["status"]["allocatable"][rng.choice(["cpu", "memory"])] = value
    except (KeyError, IndexError, TypeError, AttributeError):
        return []
    return [f"huge quantity: {where} {value[:12]}...({len(value)} characters)"]


def _null_map_value(rng: random.Random, objs: list[dict[str, Any]]) -> list[str]:
    """A null value in a map[string]string or a ResourceList (issue 25: ``nodeSelector: {role: null}`` bound
    the pod to any node; the API server stores "" for it, "0" for a quantity)."""
    where = rng.choice(["pod nodeSelector", "node label", "pod label", "pod annotation", "pod request"])
    try:
        if where == "node label":
            n = rng.choice(_of(objs, "Node"))
            n["metadata"]["labels"][rng.choice(["role", "kubernetes.io/hostname", "zone"])] = None
        else:
            p = rng.choice([p for p in _of(objs, "Pod") if isinstance(p.get("spec"), dict)])
            if where == "pod nodeSelector":
                p["spec"].setdefault("nodeSelector", {})["role"] = None
            elif where == "pod label":
                p["metadata"].setdefault("labels", {})["app"] = None
            elif where == "pod annotation":
                p["metadata"].setdefault("annotations", {})["note"] = None
            else:
                p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = None
    except (KeyError, IndexError, TypeError, AttributeError):
        return []
    return [f"null map value: {where}"]


def _go_string_map(m: Any) -> dict[str, str] | None:
    """A map[string]string as the API server decodes it (null -> ""), None when it is not one."""
    if m is None:
        return {}
    if not isinstance(m, dict) or not all(v is None or isinstance(v, str) for v in m.values()):
        return None
    return {str(k): "" if v is None else v for k, v in m.items()}


def selector_problems(objs: list[Any], items: list[dict[str, Any]]) -> list[str]:
    """Bound pods whose nodeSelector (from the input objects, Go-decoded) does not hold on their node."""
    first: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in objs:
        if isinstance(o, dict) and isinstance(o.get("metadata"), dict):
            m = o["metadata"]
            key = (str(o.get("kind")), str(m.get("namespace") or ""), str(m.get("name")))
            first.setdefault(key, o)
    out = []
    for p in items:
        node = (p.get("spec") or {}).get("nodeName") if p.get("kind") == "Pod" else None
        if not node:
            continue
        src = first.get(("Pod", p["metadata"].get("namespace", ""), p["metadata"]["name"]))
        n = first.get(("Node", "", node))
        if src is None or n is None or not isinstance(src.get("spec"), dict):
            continue
        sel = _go_string_map(src["spec"].get("nodeSelector"))
        labels = _go_string_map(n["metadata"].get("labels"))
        if sel is None or labels is None:
            continue
        bad = {k: v for k, v in sel.items() if labels.get(k) != v}
        if bad:
            out.append(f"pod {p['metadata']['name']} bound to {node} whose labels {labels} do not match {bad}")
    return out


def yaml_text(objs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False)


def mutate_text(rng: random.Random, text: str, start: int = 0) -> tuple[str | bytes, str]:
    """Mutate the YAML text after ``start`` (the sentinels' documents come first and stay intact)."""
    k = rng.randint(0, 9)
    if k == 0:
        bomb = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
        )
        return text + "---\n" + bomb, "alias bomb"
    if k == 1:
        return text + "---\nkind: Pod\nspec: " + "[" * 1200 + "]" * 1200 + "\n", "deep flow nesting"
    if k == 2:
        return text + "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(400)) + "  " * 400 + "v: 1\n", "deep block"
    if k == 3:
        return text.replace("value: 1000", "value: " + "9" * 5000), "5000-digit integer"
    if k == 4:
        data = text.encode("utf-8")
        cut = rng.randrange(len(text[:start].encode("utf-8")), len(data))
        return data[:cut] + b"\xff\xfe\xc3" + data[cut:], "non-UTF-8"
    if k == 5:
        stamped = text.replace("name: w-plain", "name: 2024-01-01", 1)
        return stamped + "---\ncreated: 2024-01-01T00:00:00Z\n", "timestamps"
    if k == 6:
        return text.replace("  name: w-two\n", "  name: w-two\n  name: w-dup\n", 1), "duplicate key"
    if k == 7:
        return text + "---\n&x [*x]\n", "recursive alias"
    if k == 8:
        return text + "---\n!!python/object:os.system {}\n", "python tag"
    cut = rng.randrange(start, len(text))
    garbage = rng.choice(["\t: [", "}}}", "- - -", "key: 'unterminated", "\x07"])
    return text[:cut] + garbage + text[cut:], "syntax garbage"


# -- one case -------------------------------------------------------------------------------------------------

_REJECT = re.compile(
    r"^(?P<file>[^:]+\.yaml): document \d+(?: item \d+)?: (?P<obj>[A-Za-z]+[^:]*): (?P<field>[^:]+): .+", re.S
)


class CaseTimeout(Exception):
    pass


def run_case(seed: int, index: int, workdir: str) -> dict[str, Any]:
    from scheduler.simulate.simulation import InputError, load_objects, simulate

    rng = random.Random(seed * 1_000_003 + index)
    sentinels, victims = base_objects()
    objs, notes = mutate_objects(rng, victims)
    path = os.path.join(workdir, f"case-{index}.yaml")
    text: str | bytes = yaml_text(sentinels + objs)
    text_mutated = rng.random() < 0.35
    if text_mutated:
        head = yaml_text(sentinels) + "---\n"
        text, note = mutate_text(rng, head + yaml_text(objs), len(head))
        notes.append(note)
    with open(path, "wb") as fh:
        fh.write(text.encode("utf-8") if isinstance(text, str) else text)
    problems: list[str] = []
    rejected: list[str] = []
    result: dict[str, Any] = {"case": index, "mutations": notes}
    try:
        loaded = load_objects([path], rejected)
    except InputError as e:
        msg = str(e)
        if path not in msg or ("document" not in msg and "UTF-8" not in msg and "read" not in msg):
            problems.append(f"input error does not name file and document: {msg[:300]}")
        result.update(outcome="input-error", message=msg[:300], problems=problems)
        return result
    for r in rejected:
        m = _REJECT.match(r)
        if not r.startswith(path) or (m is None and not re.match(rf"^{re.escape(path)}: document \d+: object: ", r)):
            problems.append(f"rejection without file/document/field: {r[:300]}")
    res = asyncio.run(simulate(loaded))
    pods = [p for p in res.items if p.get("kind") == "Pod"]
    sentinel_pods = [p for p in pods if p["metadata"].get("namespace") == SENTINEL_NS]
    if len(sentinel_pods) != 3:
        problems.append(f"sentinel pods lost: {len(sentinel_pods)} of 3 loaded")
    for p in sentinel_pods:
        if not (p.get("spec") or {}).get("nodeName"):
            conds = (p.get("status") or {}).get("conditions")
            problems.append(f"sentinel pod {p['metadata']['name']} not bound: {str(conds)[:300]}")
    for p in pods:
        spec = p.get("spec") or {}
        if spec.get("schedulerName") != SCHED or spec.get("nodeName"):
            continue
        conds = [c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
        if not conds or conds[0].get("status") != "False" or not conds[0].get("reason"):
            problems.append(f"pending pod {p['metadata'].get('namespace')}/{p['metadata']['name']} has no reason")
    if not text_mutated:
        problems += selector_problems(objs, pods)
    result.update(outcome="simulated", rejected=len(rejected), summary=res.summary, problems=problems)
    return result


def cel_case(seed: int, index: int) -> dict[str, Any]:
    """A random selector (tests/celgen.py), often mangled (characters inserted, deleted, hostile pieces
    spliced in), on a random device, through every installed engine: only CELError may come out, and the
    engines agree on the outcome (result value, or error)."""
    import celgen

    from plugins.dra.cel import available_engines, get_engine
    from plugins.dra.cel_engine import device_input
    from plugins.dra.cel_syntax import CELCompileError, CELError
    from scheduler.api.dra import device_from

    rng = random.Random(seed * 7_000_003 + index)
    expr = celgen.expression(rng, rng.randint(1, 5))
    k = rng.random()
    if k < 0.3:
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(expr) + 1)
            junk = rng.choice(["(", ")", "[", "]", '"', ".", ",", "?", "!", "&&", "x", "0", "\\"])
            expr = expr[:pos] + junk + expr[pos:]
    elif k < 0.4:
        pos = rng.randrange(len(expr))
        expr = expr[:pos] + expr[pos + rng.randint(1, 5):]
    elif k < 0.45:  # optional syntax: cel-expr-python crashed on optional values reaching Python functions
        dots = [i for i, ch in enumerate(expr) if ch == "." and i + 1 < len(expr) and expr[i + 1].isalpha()]
        for pos in rng.sample(dots, min(len(dots), rng.randint(1, 2))):
            expr = expr[: pos + 1] + "?" + expr[pos + 1 :]
        if rng.random() < 0.5:
            expr = expr.replace("[", rng.choice(["[optional.of(1), ", "[?optional.none(), "]), 1)
    elif k < 0.5:
        # (not the iteration-budget bomb: cel-expr-python refuses it, cel-python takes seconds: tested apart)
        expr = f"({expr}) || ({rng.choice([h for h in HOSTILE_CEL if '.map(w,' not in h])})"
    dev = celgen.device(rng)
    d = device_from({"name": "d", "attributes": dev["attributes"], "capacity": dev["capacity"]}, "device")
    di = device_input(dev["driver"], d.attributes, {n: c.value for n, c in d.capacity.items()},
                      dev["allowMultipleAllocations"])
    outcomes = {}
    for engine in available_engines():
        try:
            outcomes[engine] = ("result", get_engine(engine).compile(expr).matches(di))
        except CELCompileError:
            outcomes[engine] = ("error", "compile")
        except CELError:
            outcomes[engine] = ("error", "runtime")
    problems = []
    optional_syntax = ".?" in expr or "[?" in expr or "optional." in expr  # not on cel-python (documented)
    if len({v[0] if v[0] == "error" else v for v in outcomes.values()}) > 1 and not optional_syntax:
        problems.append(f"engines disagree on {expr!r}: {outcomes}")
    return {"case": index, "outcome": "cel", "expr": expr[:200], "result": str(outcomes), "problems": problems}


def main() -> None:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    cel_mode = "--cel" in sys.argv
    timeout = float(os.environ.get("DRA_FUZZ_CASE_TIMEOUT", "20"))
    mem = int(os.environ.get("DRA_FUZZ_MEMORY_MB", "3072"))
    resource.setrlimit(resource.RLIMIT_AS, (mem << 20, mem << 20))

    def alarm(*_: Any) -> None:
        raise CaseTimeout()

    signal.signal(signal.SIGALRM, alarm)
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(count):
            start = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                out = cel_case(seed, i) if cel_mode else run_case(seed, i, workdir)
            except CaseTimeout:
                out = {"case": i, "outcome": "timeout", "problems": [f"case did not finish in {timeout}s"]}
            except MemoryError:
                out = {"case": i, "outcome": "memory", "problems": ["MemoryError: memory not bounded"]}
            except BaseException as e:
                out = {"case": i, "outcome": "traceback", "mutations": None,
                       "problems": [f"{type(e).__name__}: {e}"[:500], traceback.format_exc()[-3000:]]}
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            out["seconds"] = round(time.monotonic() - start, 3)
            out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
