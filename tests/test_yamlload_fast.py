"""The fast readers of scheduler/api/yamlload.py (JSON, libyaml) give the same data as the pure-Python loader, keep its
bounds, and leave every refusal to it (so the error messages are the pure loader's)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api import yamlload
from scheduler.api.yamlload import MAX_ALIASES, MAX_DEPTH, YAMLLoadError, load_documents

EXAMPLES = Path(__file__).resolve().parent.parent / "manifests" / "examples"

TRICKY = """\
a: 1
b: 0x1F
c: 0o17
d: 017
e: 1_000
f: -1.5e+3
g: .5
h: yes
i: No
j: ~
k: null
l: ''
m: "123"
n: 2024-01-01
o: 2024-01-01T10:00:00Z
p: !!binary aGVsbG8=
q: !!str 12
r: [1, two, {three: 3}]
s: {x: y}
t: |
  multi
  line
u: >
  folded
  text
1: int key
true: bool key
~: null key
3.5: float key
base: &base {cpu: "1", memory: 2Gi}
merged:
  <<: *base
  memory: 4Gi
list: &l [a, b]
again: *l
---
# an empty document follows
---
- plain
- 'single'
- "double \\u00e9"
---
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p}}
"""


def _pure(text: str) -> list[Any]:
    return [d.data for d in yamlload._load_pure(text, "f.yaml")]


def _fast(text: str) -> list[Any] | None:
    docs = yamlload._load_c(text)
    return None if docs is None else [d.data for d in docs]


needs_libyaml = pytest.mark.skipif(yamlload._CParser is None, reason="PyYAML built without libyaml")


@needs_libyaml
def test_libyaml_reader_gives_the_pure_loaders_data_on_tricky_yaml() -> None:
    assert _fast(TRICKY) == _pure(TRICKY)
    merged = _pure(TRICKY)[0]["merged"]
    assert merged == {"cpu": "1", "memory": "4Gi"}  # a merge key: the fast path hands it to the constructor


@needs_libyaml
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_libyaml_reader_gives_the_pure_loaders_data_on_the_examples(path: Path) -> None:
    text = path.read_text()
    assert _fast(text) == _pure(text)


@needs_libyaml
def test_aliases_share_objects_as_the_pure_loader_does() -> None:
    [data] = _fast("a: &x {k: v}\nb: *x\n") or [None]
    assert data["a"] is data["b"]


@needs_libyaml
@pytest.mark.parametrize(
    ("name", "text"),
    [
        # deep enough to overflow the C stack of libyaml's recursive composer if it were not bounded
        ("deep flow", "a: " + "[" * 200_000 + "]" * 200_000),
        ("deep block", "".join("  " * i + f"k{i}:\n" for i in range(150))),
        ("billion laughs", 'a: &a ["l","l","l","l","l","l","l","l","l"]\n' + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))),
        ("recursive alias", "a: &x [*x]\n"),
        ("many aliases", "a: &x 1\nb: [" + ", ".join(["*x"] * (MAX_ALIASES + 1)) + "]\n"),
        ("huge int", "a: " + "9" * 500),
        ("duplicate key", "a: 1\na: 2\n"),
        ("python tag", "a: !!python/object:os.system {}"),
        ("nan", "x: .nan"),
        ("broken", "a: [1, 2\n"),
    ],
)
def test_libyaml_reader_refuses_what_the_pure_loader_refuses_and_leaves_the_message_to_it(
    name: str, text: str
) -> None:
    start = time.monotonic()
    assert _fast(text) is None, name
    with pytest.raises(YAMLLoadError):
        load_documents(text, "f.yaml")
    assert time.monotonic() - start < 10, name


def test_deep_flow_message_is_the_pure_loaders() -> None:
    with pytest.raises(YAMLLoadError, match=rf"document 0: a\[0\].*nested deeper than {MAX_DEPTH}"):
        load_documents("a: " + "[" * 200_000 + "]" * 200_000, "f.yaml")


@needs_libyaml
def test_yaml_and_json_texts_do_not_go_through_the_pure_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, source: str) -> Any:
        raise AssertionError("the pure-Python loader ran")

    monkeypatch.setattr(yamlload, "_load_pure", refuse)
    assert load_documents("a: [1, b]\n---\nc: d\n", "f.yaml")[1].data == {"c": "d"}
    assert load_documents('{"a": [1, "b"]}', "f.json")[0].data == {"a": [1, "b"]}


# --- JSON ---------------------------------------------------------------------------------------------------------


def test_json_reader_gives_the_yaml_data_of_a_kubectl_list() -> None:
    objs = [_pure(p.read_text()) for p in sorted(EXAMPLES.glob("*.yaml"))]
    items = [o for docs in objs for o in docs if isinstance(o, dict)]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2)
    docs = yamlload._load_json(text)
    assert docs is not None and len(docs) == 1
    assert docs[0].data == _pure(text)[0]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("duplicate key", '{"a": 1, "b": 2, "a": 3}', r"document 0: a: line 1.*duplicate key 'a'"),
        ("NaN", '{"x": NaN}', None),
        ("huge int", '{"spec": {"priority": ' + "9" * 5000 + "}}", r"spec\.priority: .*5000 digits"),
        ("deep", '{"a": ' + "[" * 1000 + "]" * 1000 + "}", rf"nested deeper than {MAX_DEPTH}"),
        ("deep at the bound", "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH, rf"nested deeper than {MAX_DEPTH}"),
    ],
)
def test_json_reader_leaves_refusals_to_the_yaml_loader(name: str, text: str, expected: str | None) -> None:
    assert yamlload._load_json(text) is None, name
    if expected is None:
        load_documents(text, "f.json")  # YAML 1.1 reads the plain scalar NaN as a string: not an error
    else:
        with pytest.raises(YAMLLoadError, match=expected):
            load_documents(text, "f.json")


def test_json_nesting_just_under_the_bound_is_read() -> None:
    text = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    docs = yamlload._load_json(text)
    assert docs is not None
    assert docs[0].data == _pure(text)[0]


def test_json_strings_with_brackets_and_escaped_quotes_do_not_count_as_nesting() -> None:
    inner = json.dumps({"matrix": [["X", "NV18"], ["NV18", "X"]]})  # a JSON annotation inside a string
    text = json.dumps({"metadata": {"annotations": {"t": inner, "q": '\\"[[[[' * 50}}})
    docs = yamlload._load_json(text)
    assert docs is not None and docs[0].data["metadata"]["annotations"]["t"] == inner


def test_json_numbers_are_json_numbers() -> None:
    docs = yamlload._load_json('{"a": 1e5, "b": 10, "c": 1.5, "d": true, "e": null}')
    assert docs is not None and docs[0].data == {"a": 100000.0, "b": 10, "c": 1.5, "d": True, "e": None}
    assert yaml.safe_load('{"a": 1e5}') == {"a": "1e5"}  # what YAML 1.1 would have made of it
