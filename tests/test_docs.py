"""The documents a newcomer reads: the generated configuration reference is current and true to the code,
every relative link resolves, the README's `make run` output is the real output, LICENSE is Apache-2.0's
text, CHANGELOG follows Keep a Changelog."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scheduler.config.configref import NO_DEFAULT, plugin_args, render
from scheduler.config.registry import default_registry
from scheduler.config.schedulerconfig import POINTS, default_plugins

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "docs" / "configuration.md"
REGENERATE = "regenerate it: .venv/bin/python -m scheduler.config.configref > docs/configuration.md"


# --- docs/configuration.md ---------------------------------------------------------------------------------


def test_configuration_reference_is_the_generators_output() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render(), f"docs/configuration.md is stale; {REGENERATE}"


def test_reference_generator_runs_as_a_module() -> None:
    proc = subprocess.run([sys.executable, "-m", "scheduler.config.configref"], capture_output=True, text=True,
                          cwd=REPO, check=True, timeout=120)
    assert proc.stdout == render()


def test_reference_lists_every_plugin_with_its_points_and_default_weight() -> None:
    text = render()
    registry = default_registry()
    profile = default_plugins(registry)
    weights = {r.name: r.weight for r in profile["score"]}
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| \[(\w+)\]\(#\w+\) \|.*$", text, re.M)}
    assert set(rows) == set(registry)
    for name, spec in registry.items():
        cells = [c.strip() for c in rows[name].split("|")[1:-1]]
        assert cells[1] == ", ".join(p for p in POINTS if p in spec.points), name
        assert cells[2] == ", ".join(p for p in POINTS if any(r.name == name for r in profile[p])), name
        assert cells[3] == (str(weights[name]) if name in weights else "-"), name
        assert f"\n### {name}\n" in text
    # the default profile table, point by point, in order
    for point in POINTS:
        [row] = [line for line in text.splitlines() if line.startswith(f"| `{point}` |")]
        listed = row.split("|")[2].strip()
        expected = ", ".join(f"{r.name} ({r.weight})" if point == "score" else r.name for r in profile[point])
        assert listed == (expected or "-"), point
    # upstream 1.37.2 default weights (pkg/scheduler/apis/config/v1/default_plugins.go) are what is shown
    for name, w in {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
                    "InterPodAffinity": 2, "DynamicResources": 2, "NodeResourcesBalancedAllocation": 1,
                    "ImageLocality": 1, "VolumeBinding": 1}.items():
        cells = [c.strip() for c in rows[name].split("|")[1:-1]]
        assert cells[3] == str(w), name


def test_documented_args_and_defaults_pass_each_plugins_own_validation() -> None:
    """A documented arg the plugin would refuse, or a default it would reject, fails here; a plugin shown
    with "No args." really refuses args."""
    for name, spec in default_registry().items():
        args = plugin_args(spec)
        validate = spec.validate_args
        assert validate is not None, name
        assert validate({"notAnArg": 1}, "args"), f"{name} accepts an unknown arg"
        if not args:
            assert f"### {name}\n\n" in render() and "No args." in render().split(f"### {name}\n", 1)[1][:200]
            continue
        with_defaults = {a.name: a.default for a in args if a.default is not NO_DEFAULT}
        assert validate(with_defaults, "args") == [], (name, with_defaults, validate(with_defaults, "args"))
        for a in args:
            # accepted as a field (its value may be required to have a shape; "unknown field" must not appear)
            probe = {a.name: a.default} if a.default is not NO_DEFAULT else {a.name: None}
            errs = validate(probe, "args")
            assert not [e for e in errs if e.startswith(f"args.{a.name}: unknown field")], (name, a.name, errs)
        # the defaults shown are those the plugin merges in (PluginSpec.default_args), value for value
        for k, v in spec.default_args.items():
            assert with_defaults[k] == v, (name, k)


def test_gpu_topology_and_dra_defaults_come_from_their_code() -> None:
    from plugins.dra.state import BINDING_TIMEOUT_DEFAULT
    from plugins.topology.plugin import TopologyArgs, parse_args

    reg = default_registry()
    topo = {a.name: a.default for a in plugin_args(reg["GpuTopology"])}
    parsed = parse_args({k: v for k, v in topo.items() if v is not NO_DEFAULT})
    assert parsed == parse_args({}) and isinstance(parsed, TopologyArgs)
    dra = {a.name: a.default for a in plugin_args(reg["DynamicResources"])}
    assert dra["bindingTimeout"] == f"{BINDING_TIMEOUT_DEFAULT:g}s"
    assert dra["featureGates"] and all(v is True for v in dra["featureGates"].values())


# --- links -------------------------------------------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.M)
_CODE_BLOCK = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _documents() -> list[Path]:
    return [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]


def _links(doc: Path) -> list[str]:
    text = _CODE_BLOCK.sub("", doc.read_text(encoding="utf-8"))
    return [m.group(1) or m.group(2) for m in _LINK.finditer(text)]


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    checked = 0
    for doc in _documents():
        anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.M)}
        for target in _links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path, _, fragment = target.partition("#")
            if not path:
                assert fragment in anchors, f"{doc.name}: link to a missing heading #{fragment}"
                checked += 1
                continue
            resolved = (doc.parent / path).resolve()
            assert resolved.exists(), f"{doc.relative_to(REPO)}: link to a missing file {target}"
            assert REPO in resolved.parents or resolved == REPO, f"{doc.name}: {target} leaves the repository"
            checked += 1
    assert checked >= 10, "too few links found: the link pattern is broken"


def test_repository_paths_named_in_the_readme_exist() -> None:
    """`path/like/this` in the README, when it starts with a top-level entry of the repository, exists."""
    top = {p.name for p in REPO.iterdir()}
    text = (REPO / "README.md").read_text(encoding="utf-8")
    missing = []
    for span in re.findall(r"`([^`\s]+)`", text):
        path = span.rstrip("/.,:")
        first = path.split("/", 1)[0]
        if "/" not in path or first not in top or any(c in path for c in "*<>{}$|"):
            continue
        if not (REPO / path).exists():
            missing.append(path)
    assert missing == [], f"README names files that do not exist: {missing}"


def test_the_link_checker_finds_a_broken_link(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("[a](missing.md) [b](https://example.org) ![img](i.png)\n```\n[c](in-code.md)\n```\n[r]: ref.md\n")
    assert _links(doc) == ["missing.md", "https://example.org", "ref.md"]
    assert _slug("The default profile (Kubernetes 1.37.2)") == "the-default-profile-kubernetes-1372"


# --- README: the `make run` block ----------------------------------------------------------------------------

_TIMING = re.compile(r"\d+(?:\.\d+)?s$")


def _normalise(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    return [_TIMING.sub("<time>", line) for line in lines]


def _make_run_block() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    intro = readme.index("`make run` prints")
    start = readme.index("```\n", intro) + 4
    return readme[start:readme.index("```", start)]


def test_readme_make_run_block_is_the_actual_output() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "$(BIN)/dra-scheduler simulate manifests/examples/ -o table" in makefile
    proc = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "manifests/examples/", "-o", "table"],
                          capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip(), proc.stderr
    assert _normalise(_make_run_block()) == _normalise(proc.stdout), (
        "README.md's `make run` block differs from `dra-scheduler simulate manifests/examples/ -o table`; "
        "paste the new output into it:\n" + proc.stdout)


# --- LICENSE, CHANGELOG ------------------------------------------------------------------------------------

# sha256 of the Apache License 2.0 text as the ASF publishes it (apache.org/licenses/LICENSE-2.0.txt, also
# Kubernetes' LICENSE file)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_is_the_full_apache_2_text_and_matches_the_package_metadata() -> None:
    data = (REPO / "LICENSE").read_bytes()
    assert hashlib.sha256(data).hexdigest() == APACHE_2_SHA256
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0"
    dockerfile = (REPO / "Dockerfile").read_text()
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in dockerfile


_SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_changelog_follows_keep_a_changelog() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com" in text and "semver.org" in text
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    headings = re.findall(r"^## .*$", text, re.M)
    assert len(versions) == len(headings), f"a version heading is not '## [X.Y.Z] - YYYY-MM-DD': {headings}"
    assert versions[0] == ("Unreleased", "")
    released = versions[1:]
    assert released and all(re.fullmatch(r"\d+\.\d+\.\d+", v) and d for v, d in released), released
    dates = [d for _, d in released]
    assert dates == sorted(dates, reverse=True), "newest release first"
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version in {v for v, _ in released}, f"pyproject's version {version} has no CHANGELOG entry"
    for section in re.findall(r"^### (.+)$", text, re.M):
        assert section in _SECTIONS, section


@pytest.mark.parametrize("doc", ["README.md", "CHANGELOG.md", "docs/configuration.md"])
def test_documents_are_utf8_without_trailing_whitespace(doc: str) -> None:
    text = (REPO / doc).read_text(encoding="utf-8")
    bad = [i + 1 for i, line in enumerate(text.splitlines()) if line != line.rstrip()]
    assert bad == [], f"{doc}: trailing whitespace on lines {bad[:10]}"
