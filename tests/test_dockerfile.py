"""The Dockerfile, checked as far as a machine without a container engine allows: parsed instruction by
instruction (pinned base image, no remote ADD, numeric non-root USER, entrypoint = the console script the
Deployment and the chart pass their arguments to, every COPY source present), and the project packaged the
way the image packages it (a wheel built from exactly the files the Dockerfile copies, installed into a
fresh virtualenv: the ``dra-scheduler`` console script runs and finds the data files it opens)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, backslash continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Instructions grouped by build stage (a stage starts at FROM); global ARGs before the first FROM
    form stage 0's prefix and are returned as the first group."""
    groups: list[list[tuple[str, str]]] = [[]]
    for ins in instructions:
        if ins[0] == "FROM":
            groups.append([])
        groups[-1].append(ins)
    return groups


def _global_args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    args: dict[str, str] = {}
    for op, rest in instructions:
        if op == "FROM":
            break
        if op == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"')
    return args


def _expand(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), value)


def _exec_form(rest: str) -> list[str]:
    value = json.loads(rest)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), rest
    return value


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_the_parser_joins_continuations_and_drops_comments() -> None:
    text = "# c\nARG A=1\nRUN a \\\n  # inside\n  && b\nFROM x:${A} AS s\n"
    assert parse_dockerfile(text) == [("ARG", "A=1"), ("RUN", "a && b"), ("FROM", "x:${A} AS s")]
    assert _expand("x:${A}-$A", {"A": "1"}) == "x:1-1"


def test_every_base_image_is_pinned_to_a_patch_release(instructions: list[tuple[str, str]]) -> None:
    args = _global_args(instructions)
    stage_names: set[str] = set()
    bases = []
    for op, rest in instructions:
        if op != "FROM":
            continue
        words = rest.split()
        words = [w for w in words if not w.startswith("--platform")]
        image = _expand(words[0], args)
        if len(words) >= 3 and words[1].upper() == "AS":
            stage_names.add(words[2])
        if image in stage_names:
            continue
        bases.append(image)
        # python:<major>.<minor>.<patch>-slim-<debian release>, optionally @sha256:<digest>
        m = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-([a-z]+)(@sha256:[0-9a-f]{64})?", image)
        assert m, f"base image {image!r} is not pinned to a Python patch release and a Debian release"
        assert "latest" not in image
        # the image's Python satisfies the project's requires-python
        required = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
        lo = re.fullmatch(r">=\s*(\d+)\.(\d+)", required)
        assert lo, required
        assert (int(m.group(1)), int(m.group(2))) >= (int(lo.group(1)), int(lo.group(2))), (image, required)
    assert bases, "no base image"
    assert len(set(bases)) == 1, f"build and runtime stages use different bases (the venv is copied): {bases}"


def test_no_remote_downloads(instructions: list[tuple[str, str]]) -> None:
    for op, rest in instructions:
        if op == "ADD":
            assert not re.search(r"\b(https?|ftp|git)://|git@", rest), f"ADD of a URL: {rest}"
        if op == "RUN":
            assert not re.search(r"\b(curl|wget)\b", rest), f"RUN downloads outside the package index: {rest}"
    assert not any(op == "ADD" for op, _ in instructions), "use COPY (ADD unpacks archives and fetches URLs)"


def test_runtime_stage_runs_as_the_numeric_non_root_user_of_the_deployment_and_chart(
    instructions: list[tuple[str, str]],
) -> None:
    final = stages(instructions)[-1]
    users = [rest for op, rest in final if op == "USER"]
    assert users, "the runtime stage sets no USER (it would run as root)"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {users[-1]!r} must be a numeric non-root uid (runAsNonRoot)"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    # USER is the last instruction that changes the user; nothing runs as root after it
    after = final[final.index(("USER", users[-1])) + 1:]
    assert not any(op == "RUN" for op, _ in after), after
    dep = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
    psc = dep["spec"]["template"]["spec"]["securityContext"]
    values = yaml.safe_load((REPO / "charts" / "dra-scheduler" / "values.yaml").read_text())
    for sc in (psc, values["podSecurityContext"]):
        assert sc["runAsNonRoot"] is True
        assert sc["runAsUser"] == int(uid)
        if gid:
            assert sc["runAsGroup"] == int(gid)


def _deployment_args() -> list[str]:
    dep = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
    [container] = dep["spec"]["template"]["spec"]["containers"]
    assert "command" not in container, "the Deployment must not replace the image's ENTRYPOINT"
    return list(container["args"])


def _chart_args() -> list[str]:
    """The literal arguments of the chart's Deployment template (those before the first template action
    are enough to see the subcommand)."""
    text = (REPO / "charts" / "dra-scheduler" / "templates" / "deployment.yaml").read_text()
    assert "command:" not in text, "the chart must not replace the image's ENTRYPOINT"
    block = text.split("        args:\n", 1)[1]
    out = []
    for line in block.splitlines():
        s = line.strip()
        if s.startswith("{{"):
            continue
        if not s.startswith("- "):
            break
        out.append(s[2:])
    return out


def test_entrypoint_is_the_console_script_and_the_manifests_pass_run(instructions: list[tuple[str, str]]) -> None:
    final = stages(instructions)[-1]
    entry = [_exec_form(rest) for op, rest in final if op == "ENTRYPOINT"]
    cmd = [_exec_form(rest) for op, rest in final if op == "CMD"]
    assert entry and cmd, "ENTRYPOINT and CMD in exec form"
    assert entry[-1] == ["dra-scheduler"]
    assert cmd[-1] == ["run"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["dra-scheduler"] == "scheduler.cli:main"
    # Kubernetes: args replace CMD, the ENTRYPOINT stays: `dra-scheduler run ...`
    assert _deployment_args()[0] == "run"
    chart = _chart_args()
    assert chart[0] == "run" and chart[1].startswith("--config-map="), chart


def test_every_flag_the_deployment_and_chart_pass_is_a_flag_of_run() -> None:
    proc = subprocess.run([sys.executable, "-m", "scheduler", "run", "--help"], capture_output=True, text=True,
                          cwd=REPO, check=True, timeout=60)
    known = set(re.findall(r"(--[a-z][a-z0-9-]*)", proc.stdout))
    flags = {a.split("=", 1)[0] for a in _deployment_args()[1:] + _chart_args()[1:] if a.startswith("--")}
    flags |= set(re.findall(r"- --([a-z][a-z0-9-]*)", (REPO / "charts" / "dra-scheduler" / "templates" /
                                                      "deployment.yaml").read_text()))
    flags = {f if f.startswith("--") else f"--{f}" for f in flags}
    assert flags, "no flags found"
    assert flags <= known, f"flags unknown to `dra-scheduler run`: {sorted(flags - known)}"


def _copy_sources(instructions: list[tuple[str, str]]) -> list[str]:
    out = []
    for op, rest in instructions:
        if op != "COPY":
            continue
        words = [w for w in rest.split() if not w.startswith("--")]
        if any(w.startswith("--from") for w in rest.split()):
            continue
        out += words[:-1]
    return out


def test_the_image_copies_everything_the_package_needs(instructions: list[tuple[str, str]]) -> None:
    sources = _copy_sources(instructions)
    for s in sources:
        assert (REPO / s).exists(), f"COPY source {s} does not exist"
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    needed = {"pyproject.toml", meta["project"]["readme"], "LICENSE"}
    needed |= {p.rstrip("*") for p in meta["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert needed <= set(sources), f"not copied into the build stage: {sorted(needed - set(sources))}"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert not needed & set(ignored), "a needed file is excluded by .dockerignore"


def _site_packages(venv: Path) -> Path:
    rel = Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    return venv / rel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, instructions: list[tuple[str, str]]) -> Path:
    """A fresh virtualenv with the wheel built from exactly the files the Dockerfile copies (dependencies
    are taken from the project's .venv through PYTHONPATH, so no index is needed to install)."""
    root = tmp_path_factory.mktemp("image")
    src = root / "src"
    src.mkdir()
    for s in _copy_sources(instructions):
        p = REPO / s
        if p.is_dir():
            shutil.copytree(p, src / s, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / s)
    wheels = root / "wheels"
    # build isolation as in `pip install .` in the image (setuptools from the package index or pip's cache)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(src)],
                   check=True, capture_output=True, text=True, timeout=300, cwd=root)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [wheel] = wheels.glob("dra_scheduler-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                    "--no-index", "--quiet", str(wheel)], check=True, capture_output=True, text=True, timeout=300)
    return venv


def _run_installed(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # dependencies from the project's virtualenv (its editable install of this project is a .pth hook,
    # which PYTHONPATH does not run, so `scheduler` can only come from the fresh install)
    env = {**os.environ, "PYTHONPATH": str(_site_packages(Path(sys.prefix)))}
    return subprocess.run([str(venv / "bin" / "dra-scheduler"), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300, check=False)


def test_pip_install_gives_the_console_script_with_its_data_files(installed: Path, tmp_path: Path) -> None:
    script = installed / "bin" / "dra-scheduler"
    assert script.exists(), "pip install . made no dra-scheduler console script"
    env = {**os.environ, "PYTHONPATH": str(_site_packages(Path(sys.prefix)))}
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import scheduler, plugins; "
                            "print(scheduler.__file__); print(plugins.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, check=True, timeout=60)
    for line in where.stdout.split():
        assert line.startswith(str(installed)), f"imported from outside the fresh install: {line}"
    # every data file next to the modules is installed (the code opens them by path)
    data = [p.relative_to(REPO) for d in ("scheduler", "plugins") for p in (REPO / d).rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    for rel in data:
        assert (_site_packages(installed) / rel).is_file(), f"{rel} is missing from the installed package"
    assert list((_site_packages(installed)).glob("dra_scheduler-*.dist-info/licenses/LICENSE")), "LICENSE"
    ok = _run_installed(installed, "check-config", str(REPO / "manifests" / "configmap.yaml"), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    sim = _run_installed(installed, "simulate", str(REPO / "manifests" / "examples"), "-o", "json", cwd=tmp_path)
    assert "Traceback" not in sim.stderr, sim.stderr
    result: Any = json.loads(sim.stdout)
    pods = [o for o in result["items"] if o.get("kind") == "Pod"]
    assert len(pods) == 9 and sum(1 for p in pods if p["spec"].get("nodeName")) == 8, sim.stderr
