"""Semantic versions: strict and Kubernetes-normalised parsing, precedence, canonical form."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.api.semver import SemverError, Version, parse


@pytest.mark.parametrize(
    ("text", "major", "minor", "patch", "pre", "build"),
    [
        ("0.0.0", 0, 0, 0, (), ()),
        ("1.2.3", 1, 2, 3, (), ()),
        ("10.20.30", 10, 20, 30, (), ()),
        ("1.0.0-alpha", 1, 0, 0, ("alpha",), ()),
        ("1.0.0-alpha.1", 1, 0, 0, ("alpha", 1), ()),
        ("1.0.0-0.3.7", 1, 0, 0, (0, 3, 7), ()),
        ("1.0.0-x.7.z.92", 1, 0, 0, ("x", 7, "z", 92), ()),
        ("1.0.0-x-y-z.--", 1, 0, 0, ("x-y-z", "--"), ()),
        ("1.0.0-alpha+001", 1, 0, 0, ("alpha",), ("001",)),
        ("1.0.0+20130313144700", 1, 0, 0, (), ("20130313144700",)),
        ("1.0.0-beta+exp.sha.5114f85", 1, 0, 0, ("beta",), ("exp", "sha", "5114f85")),
        ("550.54.15", 550, 54, 15, (), ()),
        ("18446744073709551615.0.0", 2**64 - 1, 0, 0, (), ()),
    ],
)
def test_parse_strict(
    text: str, major: int, minor: int, patch: int, pre: tuple[str | int, ...], build: tuple[str, ...]
) -> None:
    v = parse(text)
    assert (v.major, v.minor, v.patch, v.prerelease, v.build) == (major, minor, patch, pre, build)
    assert str(v) == text
    assert v.text == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "1.0",
        "v1.0.0",
        "01.0.0",
        "1.01.0",
        "1.0.01",
        "1.0.0-01",
        "1.0.0-",
        "1.0.0-alpha..1",
        "1.0.0+",
        "1.0.0+a..b",
        "1.0.0-al_pha",
        "1.0.0+bü",
        "1.0.0 ",
        " 1.0.0",
        "a.b.c",
        "-1.0.0",
        "1.-1.0",
        "18446744073709551616.0.0",
        "1.0.0.0",
    ],
)
def test_parse_strict_invalid(text: str) -> None:
    with pytest.raises(SemverError):
        parse(text)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("v1.0.0", "1.0.0"),
        ("1.0", "1.0.0"),
        ("v1", "1.0.0"),
        ("1", "1.0.0"),
        ("01.01.01", "1.1.1"),
        ("v0.0.1", "0.0.1"),
        ("v1.2.3-rc.1+b5", "1.2.3-rc.1+b5"),
        ("1.2.03-rc.1", "1.2.3-rc.1"),
        ("00.0.000", "0.0.0"),
    ],
)
def test_parse_normalized(text: str, canonical: str) -> None:
    assert str(parse(text, normalize=True)) == canonical
    assert parse(text, True).text == text


@pytest.mark.parametrize("text", ["1.0-rc", "v1-beta", "1.0+b", "vv1.0.0", "1.2.3-01", "x"])
def test_parse_normalized_invalid(text: str) -> None:
    with pytest.raises(SemverError):
        parse(text, normalize=True)


def test_precedence() -> None:
    # semver.org 11.4 example chain
    chain = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "1.10.0",
        "2.0.0",
    ]
    versions = [parse(s) for s in chain]
    for a, b in itertools.pairwise(versions):
        assert a < b and b > a and a <= b and b >= a
        assert a.compare(b) == -1 and b.compare(a) == 1
    assert sorted(reversed(versions)) == versions


def test_build_metadata_ignored_for_precedence_and_equality() -> None:
    a, b = parse("1.0.0+a"), parse("1.0.0+b")
    assert a == b and hash(a) == hash(b) and a.compare(b) == 0
    assert str(a) != str(b)
    assert parse("1.0.0") == Version(1, 0, 0)
    assert parse("1.0.0-1") != parse("1.0.0")
    assert parse("1.0.0").core() == "1.0.0" and parse("1.0.0-rc.1+x").core() == "1.0.0-rc.1"


def test_semver_error_is_value_error() -> None:
    assert issubclass(SemverError, ValueError)


_ident = st.one_of(
    st.integers(0, 10**6).map(str),
    st.from_regex(r"[0-9A-Za-z-]*[A-Za-z-][0-9A-Za-z-]*", fullmatch=True).filter(lambda s: 0 < len(s) < 12),
)


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.lists(_ident, max_size=3),
    st.lists(st.from_regex(r"[0-9A-Za-z-]{1,6}", fullmatch=True), max_size=2),
)
def test_round_trip(major: int, minor: int, patch: int, pre: list[str], build: list[str]) -> None:
    text = f"{major}.{minor}.{patch}"
    if pre:
        text += "-" + ".".join(pre)
    if build:
        text += "+" + ".".join(build)
    v = parse(text)
    assert str(v) == text
    assert parse(str(v)) == v
    assert parse("v" + text, normalize=True) == v
