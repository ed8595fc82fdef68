"""The container image that image/build.sh built from the Dockerfile (`make image` builds, then runs this),
run with buildah (chroot isolation, no daemon) through its own ENTRYPOINT: ``--version`` is the package's
version, ``simulate`` of the shipped examples places every pod and claim as the host's install does,
``check-config`` accepts the shipped ConfigMap; the configured user is numeric and non-root and the
processes run under it; the size stays under image.env's limit. Nothing skips: without buildah or the
image every test fails with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

IMAGE_DIR = Path(__file__).resolve().parent
REPO = IMAGE_DIR.parent
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _settings() -> dict[str, str]:
    """The names and buildah storage of build.sh (which reads image.env and the environment)."""
    out = subprocess.run(["bash", str(IMAGE_DIR / "build.sh"), "--print-env"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


SETTINGS = _settings()


def _buildah(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    cmd = [*sudo, "buildah", "--root", f"{SETTINGS['IMAGE_CACHE']}/storage", "--runroot", SETTINGS["IMAGE_RUNROOT"],
           "--storage-driver", "vfs", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class Image:
    name: str
    inspect: dict[str, Any]  # buildah inspect --type image
    config: dict[str, Any]  # the OCI image config's "config": User, Entrypoint, Cmd, Env, Labels
    container: str  # a working container of the image (buildah from), removed after the module

    def run(self, *args: str, entrypoint: bool = True, volumes: tuple[str, ...] = ()) -> (
            subprocess.CompletedProcess[str]):
        """``buildah run`` in the image as its configured user; with ``entrypoint`` the command is the image's
        ENTRYPOINT followed by ``args``, as a container runtime would start it."""
        cmd = [*(self.config["Entrypoint"] if entrypoint else []), *args]
        vols = [f"--volume={v}" for v in volumes]
        return _buildah("run", "--isolation", "chroot", *vols, self.container, "--", *cmd)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    name = SETTINGS["IMAGE"]
    if shutil.which("buildah") is None:
        pytest.fail("buildah is not installed: `make image` (image/build.sh) installs it with apt-get and builds "
                    f"{name}; this module checks the built image and cannot run without it")
    inspect = _buildah("inspect", "--type", "image", name)
    if inspect.returncode != 0:
        pytest.fail(f"{name} is not in buildah's storage {SETTINGS['IMAGE_CACHE']}/storage (run `make image`): "
                    f"{inspect.stderr.strip()}")
    info = json.loads(inspect.stdout)
    ctr = _buildah("from", "--pull-never", "--quiet", name)
    if ctr.returncode != 0:
        pytest.fail(f"buildah from {name} failed: {ctr.stderr.strip()}")
    img = Image(name, info, info["OCIv1"]["config"], ctr.stdout.strip())
    try:
        yield img
    finally:
        _buildah("rm", img.container)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-4000:]}"
    return proc.stdout


def _host(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "scheduler", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, check=False)
    return _ok(proc)


def test_the_entrypoint_is_the_console_script_and_version_is_the_packages(image: Image) -> None:
    assert image.config["Entrypoint"] == ["dra-scheduler"]
    assert image.config.get("Cmd") == ["run"]
    out = _ok(image.run("--version")).strip()
    assert out.startswith(f"dra-scheduler {VERSION} "), out
    assert out == _host("--version").strip(), "the image and the host's install report different versions"
    labels = image.config.get("Labels") or {}
    assert labels.get("org.opencontainers.image.version") == VERSION, labels


def _placements(result: dict[str, Any]) -> dict[str, Any]:
    """Where each pod went (node or None) and the devices allocated to each claim."""
    out: dict[str, Any] = {}
    for o in result["items"]:
        key = f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
        if o["kind"] == "Pod":
            out[key] = o["spec"].get("nodeName")
        elif o["kind"] == "ResourceClaim":
            alloc = (o.get("status") or {}).get("allocation") or {}
            out[key] = sorted((r["request"], r["driver"], r["pool"], r["device"])
                              for r in alloc.get("devices", {}).get("results", []))
    return out


def test_simulate_places_the_examples_as_the_host_does(image: Image) -> None:
    examples = REPO / "manifests" / "examples"
    inside = json.loads(_ok(image.run("simulate", "/examples", "-o", "json", volumes=(f"{examples}:/examples:ro",))))
    host = json.loads(_host("simulate", str(examples), "-o", "json"))
    assert _placements(inside) == _placements(host)
    summary = {k: v for k, v in inside["summary"].items() if k != "seconds"}
    assert summary == {k: v for k, v in host["summary"].items() if k != "seconds"}
    assert summary["pods"] == 9 and summary["scheduled"] == 8 and summary["unschedulable"] == 1, summary


def test_check_config_accepts_the_shipped_configmap(image: Image) -> None:
    cm = REPO / "manifests" / "configmap.yaml"
    out = _ok(image.run("check-config", "/config/configmap.yaml", volumes=(f"{cm}:/config/configmap.yaml:ro",)))
    assert out == _host("check-config", str(cm))
    assert out.startswith("configuration OK"), out


def test_the_configured_user_is_numeric_non_root_and_the_process_runs_as_it(image: Image) -> None:
    user = image.config.get("User", "")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"image user {user!r}: must be a numeric non-root uid"
    assert gid.isdigit() and int(gid) != 0, f"image group {user!r}: must be a numeric non-root gid"
    ids = _ok(image.run("sh", "-c", "id -u; id -g", entrypoint=False)).split()
    assert ids == [uid, gid], f"processes in the image run as {ids}, the image says {user}"
    # the virtualenv is root's: the scheduler's user cannot change its own code
    probe = image.run("sh", "-c", "touch /opt/dra-scheduler/bin/x", entrypoint=False)
    assert probe.returncode != 0, "the scheduler's user can write into /opt/dra-scheduler"


def test_the_image_size_is_under_the_limit(image: Image, capsys: pytest.CaptureFixture[str]) -> None:
    # the layers as the manifest lists them (uncompressed tars), as a registry would receive them
    manifest = json.loads(image.inspect["Manifest"])
    size = sum(layer["size"] for layer in manifest["layers"])
    limit = int(SETTINGS["IMAGE_SIZE_LIMIT_MIB"])
    with capsys.disabled():
        print(f"\n{image.name}: {size / 2**20:.1f} MiB uncompressed (limit {limit} MiB)")
    assert size < limit * 2**20, f"{image.name} is {size / 2**20:.1f} MiB, over the limit of {limit} MiB"
