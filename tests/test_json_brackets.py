"""The JSON nesting pre-check of scheduler/api/yamlload.py (issue 16, item 1: reading a 5,000-node file).

A JSON input nested ``MAX_DEPTH`` levels or more is refused before ``json.loads`` (which would recurse, and
which the YAML readers' depth limit must agree with). The check keeps only the brackets outside strings, with
bytes passes; here it is compared with a reference scanner that reads the text character by character as a
JSON reader does (RFC 8259 section 7: a string ends at the first quote not escaped by a backslash), on texts
full of brackets, quotes, backslashes and non-ASCII characters inside strings.
"""

from __future__ import annotations

import json
import random

import pytest

from scheduler.api.yamlload import MAX_DEPTH, _json_shape, _load_json, _nesting_below, load_documents


def _json_brackets(text: str) -> bytes:
    return _json_shape(text)[0]


def _json_nesting_below(text: str, limit: int) -> bool:
    return _nesting_below(_json_brackets(text), limit)


def _reference_members(text: str) -> int:
    def walk(v: object) -> int:
        if isinstance(v, dict):
            return len(v) + sum(walk(x) for x in v.values())
        if isinstance(v, list):
            return sum(walk(x) for x in v)
        return 0

    return walk(json.loads(text))


def _reference(text: str) -> bytes:
    out = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[]{}":
            out.append(ch)
    return "".join(out).encode()


PIECES = ['"', "\\", "[", "]", "{", "}", ":", ",", "a", "é", "\n", "\\u005b", "🙂", '\\"', "\\\\"]


def _random_string(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))


def _random_value(rng: random.Random, depth: int) -> object:
    r = rng.random()
    if depth > 6 or r < 0.3:
        return _random_string(rng)
    if r < 0.4:
        return rng.choice([1, -2.5, True, None])
    if r < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_random_string(rng): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


@pytest.mark.parametrize("seed", range(20))
def test_brackets_match_a_character_scanner(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        text = json.dumps(_random_value(rng, 0), ensure_ascii=rng.random() < 0.5)
        assert _json_brackets(text) == _reference(text), text
        assert _json_shape(text)[1] == _reference_members(text), text


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "[[[["}',
        '{"a\\\\": "]"}',
        '{"a\\"[": "\\\\\\"{"}',
        '["\\\\", "[", "\\\\\\\\"]',
        '{"": ""}',
        '[""  ,  "["]',
        '{"[": "]"}',
    ],
)
def test_tricky_strings(text: str) -> None:
    json.loads(text)  # each is valid JSON
    assert _json_brackets(text) == _reference(text)


def test_depth_limit_is_exact_and_ignores_brackets_in_strings() -> None:
    def nested(n: int) -> str:
        return "[" * n + '"[[[[[[[["' + "]" * n

    assert _json_nesting_below(nested(MAX_DEPTH - 1), MAX_DEPTH)
    assert not _json_nesting_below(nested(MAX_DEPTH), MAX_DEPTH)
    assert _json_nesting_below('{"a": "' + "[" * 500 + '"}', MAX_DEPTH)


def test_deep_json_still_reaches_the_yaml_readers_limit() -> None:
    """Too deep for the JSON path: the YAML readers decide and name the limit (unchanged behaviour)."""
    text = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    with pytest.raises(Exception, match="deeper than"):
        load_documents(text, "deep.json")


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "a": 2}', '[{"x": {"k": 1, "k": 1}}]', '{"a": {"b": 1}, "a": {"b": 1}}', '{"a:": 1, "a:": 2}'],
)
def test_duplicate_keys_leave_the_json_path(text: str) -> None:
    """A duplicate key is refused by the JSON path (the API server's strict decoding refuses it too), counted as
    fewer kept members than member colons; the YAML readers then decide and name it."""
    assert _load_json(text) is None
    with pytest.raises(Exception, match=r"(?i)duplicate"):
        load_documents(text, "dup.json")


def test_distinct_keys_stay_on_the_json_path() -> None:
    docs = _load_json('{"a": {"a": 1}, "b": [{"a": ":", "b:": "{"}]}')
    assert docs is not None and docs[0].data == {"a": {"a": 1}, "b": [{"a": ":", "b:": "{"}]}
