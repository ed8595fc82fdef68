"""`dra-scheduler run` with nothing but ``~/.kube/config`` (issue #13 "Done when"): no ``--kubeconfig``, no
``$KUBECONFIG``, not in a cluster — it finds the cluster as kubectl does (client-go's loading rules:
``$KUBECONFIG``, then ``~/.kube/config``, then in-cluster), becomes ready and schedules a pod; with no
configuration at all it exits non-zero with one line naming what it tried."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from e2e.conftest import LOG_DIR, REPO
from e2e.fleet import Kube, SchedulerProcess, create_nodes, fresh_namespace, plain_node, wait_for


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST",
                                                            "KUBERNETES_SERVICE_PORT")}
    env["HOME"] = str(home)
    return env


def test_run_with_only_home_kube_config(kube: Kube, cluster_info: object, clean_cluster: Kube,
                                        tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    shutil.copy(cluster_info.kubeconfig, home / ".kube" / "config")
    proc = SchedulerProcess(cluster_info, LOG_DIR / "test_live_kubeconfig.log", env=_env(home),
                            kubeconfig_flag=False)
    try:
        create_nodes(kube, [plain_node("home-kc-0", "home-kc", "zone-a")], "home-kc")
        proc.start()
        ns = fresh_namespace(kube, "home-kubeconfig")
        kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
                     "spec": {"schedulerName": "dra-scheduler", "terminationGracePeriodSeconds": 0,
                              "containers": [{"name": "c", "image": "pause"}]}})
        pod = wait_for(lambda: (p := kube.get("Pod", "p", ns))["spec"].get("nodeName") and p, 30,
                       "the pod bound by a scheduler configured from ~/.kube/config")
        assert pod["spec"]["nodeName"] == "home-kc-0"
    finally:
        assert proc.stop() == 0, proc.tail()


def test_run_without_any_cluster_configuration_says_what_it_tried(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    exe = REPO / ".venv" / "bin" / "dra-scheduler"
    cmd = [str(exe)] if exe.exists() else ["python", "-m", "scheduler"]
    r = subprocess.run([*cmd, "run"], env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "no cluster configured" in out and ".kube/config" in out, out[-2000:]
