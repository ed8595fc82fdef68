"""Live fleets for the e2e control plane, and the small API client the e2e tests, the demo and the
throughput driver use.

The fleet objects come from :mod:`bench.fleet` (the same nodes, ResourceSlices and DeviceClasses the
offline tests and ``manifests/examples/00-fleet.yaml`` use). Here they are created on a live API server,
acting as the NVIDIA DRA driver would:

* Nodes get the annotation ``kwok.x-k8s.io/node: fake`` (kwok manages only those: e2e/kwok config), so they
  become Ready and pods bound to them run; plus the label :data:`FLEET_LABEL` naming the fleet, so tests can
  pin pods to their own fleet (``nodeSelector``) and delete it afterwards.
* ResourceSlices are created after their Node and owned by it with the Node's *real* UID (the driver does
  the same). The generator's deterministic UID would not match the API server's, and the garbage collector
  deletes dependents whose owner UID does not match.
* DeviceClasses are created if missing (they are cluster-wide and shared by every fleet).

The client (:class:`Kube`) is deliberately independent of the scheduler's own client (``scheduler/kube``):
standard library only, synchronous, one keep-alive HTTPS connection per thread, bulk calls on a thread
pool, retries when the API server is unreachable (tests restart it).

    python -m e2e.fleet demo                  # create the demo fleet on the cluster of e2e/cluster.sh env
    python -m e2e.fleet scale 20 --gpus 8     # 20 x 8-GPU DGX H100 nodes, fleet "scale"
    python -m e2e.fleet delete [FLEET]        # delete a fleet's (or every fleet's) nodes and slices
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import copy
import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from bench import fleet as gen

JSON = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
FLEET_LABEL = "e2e.dra-scheduler.io/fleet"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


class KubeError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Kind:
    group: str  # "" = core
    version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str = "", name: str = "", sub: str = "") -> str:
        p = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{self.plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p


KINDS: dict[str, Kind] = {
    "Namespace": Kind("", "v1", "namespaces", False),
    "Node": Kind("", "v1", "nodes", False),
    "Pod": Kind("", "v1", "pods", True),
    "Event": Kind("", "v1", "events", True),
    "ConfigMap": Kind("", "v1", "configmaps", True),
    "ResourceSlice": Kind("resource.k8s.io", "v1", "resourceslices", False),
    "DeviceClass": Kind("resource.k8s.io", "v1", "deviceclasses", False),
    "ResourceClaim": Kind("resource.k8s.io", "v1", "resourceclaims", True),
    "ResourceClaimTemplate": Kind("resource.k8s.io", "v1", "resourceclaimtemplates", True),
    "PodGroup": Kind("scheduling.x-k8s.io", "v1alpha1", "podgroups", True),
    "CustomResourceDefinition": Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", False),
    # Kubernetes 1.37 (gates and runtime-config of e2e/versions.env); a kind served by two groups is keyed
    # "<Kind>.<group>": Kube.create picks it from the object's apiVersion
    "PodGroup.scheduling.k8s.io": Kind("scheduling.k8s.io", "v1beta1", "podgroups", True),
    "Workload": Kind("scheduling.k8s.io", "v1beta1", "workloads", True),
    "CompositePodGroup": Kind("scheduling.k8s.io", "v1alpha3", "compositepodgroups", True),
    "PriorityClass": Kind("scheduling.k8s.io", "v1", "priorityclasses", False),
    "PersistentVolume": Kind("", "v1", "persistentvolumes", False),
    "PersistentVolumeClaim": Kind("", "v1", "persistentvolumeclaims", True),
    "Service": Kind("", "v1", "services", True),
    "StorageClass": Kind("storage.k8s.io", "v1", "storageclasses", False),
    "CSINode": Kind("storage.k8s.io", "v1", "csinodes", False),
    "CSIDriver": Kind("storage.k8s.io", "v1", "csidrivers", False),
    "PodDisruptionBudget": Kind("policy", "v1", "poddisruptionbudgets", True),
    "ReplicaSet": Kind("apps", "v1", "replicasets", True),
    "StatefulSet": Kind("apps", "v1", "statefulsets", True),
}


def kind_key(obj: JSON) -> str:
    """The :data:`KINDS` key of an object: its kind, or ``<kind>.<group>`` when its apiVersion says a group
    other than the one registered under the plain kind."""
    kind = obj["kind"]
    group = obj.get("apiVersion", "").rpartition("/")[0]
    k = KINDS.get(kind)
    if k is not None and k.group != group and f"{kind}.{group}" in KINDS:
        return f"{kind}.{group}"
    return str(kind)


class Kube:
    """A minimal synchronous client for the e2e API server (bearer token, own CA)."""

    def __init__(self, server: str, token: str, ca_file: str, timeout: float = 30.0) -> None:
        u = urlsplit(server)
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 443
        self.token = token
        self.timeout = timeout
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self._local = threading.local()

    @classmethod
    def from_info(cls, info: Any) -> Kube:
        """From an ``e2e.cluster.ClusterInfo``."""
        return cls(info.server, info.token, info.ca_file)

    # --- raw requests --------------------------------------------------------------------------------------

    def _conn(self, fresh: bool = False, timeout: float | None = None) -> http.client.HTTPSConnection:
        c: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if c is None or fresh or timeout is not None:
            if c is not None and timeout is None:
                c.close()
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout or self.timeout)
            if timeout is None:
                self._local.conn = c
        return c

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        retry_for: float = 60.0,
    ) -> JSON:
        """One request; retried while the API server is unreachable or overloaded (up to ``retry_for`` s).
        A write whose answer was lost is retried too: callers treat AlreadyExists/NotFound accordingly."""
        if params:
            path += "?" + urlencode({k: v for k, v in params.items() if v is not None and v != ""})
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        deadline = time.monotonic() + retry_for
        delay = 0.1
        while True:
            try:
                conn = self._conn()
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self._conn(fresh=True)
                if time.monotonic() > deadline:
                    raise KubeError(0, f"{method} {path}: {e!r}") from e
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if resp.status in (429, 500, 503, 504) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if resp.status >= 400:
                msg = raw.decode("utf-8", "replace")
                with contextlib.suppress(ValueError):
                    msg = json.loads(msg).get("message", msg)
                raise KubeError(resp.status, f"{method} {path}: {msg}")
            return json.loads(raw) if raw else {}

    # --- typed helpers ---------------------------------------------------------------------------------------

    @staticmethod
    def kind(kind: str) -> Kind:
        return KINDS[kind]

    def get(self, kind: str, name: str, namespace: str = "") -> JSON:
        return self.request("GET", KINDS[kind].path(namespace, name))

    def try_get(self, kind: str, name: str, namespace: str = "") -> JSON | None:
        try:
            return self.get(kind, name, namespace)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def list(self, kind: str, namespace: str = "", **params: Any) -> list[JSON]:
        items: list[JSON] = self.request("GET", KINDS[kind].path(namespace), params=params).get("items", [])
        return items

    def create(self, obj: JSON, *, exist_ok: bool = False) -> JSON:
        key = kind_key(obj)
        k = KINDS[key]
        ns = obj["metadata"].get("namespace", "") if k.namespaced else ""
        try:
            return self.request("POST", k.path(ns), obj)
        except KubeError as e:
            if e.status == 409 and exist_ok:
                return self.get(key, obj["metadata"]["name"], ns)
            raise

    def patch(self, kind: str, name: str, patch: JSON, namespace: str = "", sub: str = "") -> JSON:
        return self.request(
            "PATCH", KINDS[kind].path(namespace, name, sub), patch, content_type="application/merge-patch+json"
        )

    def delete(self, kind: str, name: str, namespace: str = "", grace: int | None = None) -> None:
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        try:
            self.request("DELETE", KINDS[kind].path(namespace, name), body)
        except KubeError as e:
            if e.status != 404:
                raise

    def delete_collection(self, kind: str, namespace: str = "", **params: Any) -> None:
        self.request("DELETE", KINDS[kind].path(namespace), params=params)

    def create_many(self, objs: Sequence[JSON], workers: int = 16, exist_ok: bool = False) -> builtins.list[JSON]:
        """Create ``objs`` concurrently (order of results = order of ``objs``)."""
        if not objs:
            return []
        with ThreadPoolExecutor(max_workers=min(workers, len(objs))) as pool:
            return list(pool.map(lambda o: self.create(o, exist_ok=exist_ok), objs))

    def watch(
        self, kind: str, namespace: str = "", resource_version: str = "", timeout: float = 300.0, **params: Any
    ) -> Iterator[JSON]:
        """Yield watch events (dicts with ``type`` and ``object``) until the server ends the stream."""
        q: JSON = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": int(timeout), **params}
        if resource_version:
            q["resourceVersion"] = resource_version
        path = KINDS[kind].path(namespace) + "?" + urlencode(q)
        conn = self._conn(timeout=timeout + 30)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise KubeError(resp.status, resp.read().decode("utf-8", "replace"))
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()


# --------------------------------------------------------------------------------------------------
# Fleets
# --------------------------------------------------------------------------------------------------


def kwok_node(node: JSON, fleet: str) -> JSON:
    """The generator's Node made kwok-managed and labelled with its fleet; no client-chosen UID."""
    n = copy.deepcopy(node)
    meta = n["metadata"]
    meta.pop("uid", None)
    meta.setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
    meta.setdefault("labels", {})[FLEET_LABEL] = fleet
    meta["labels"]["type"] = "kwok"
    return n


def owned_slice(slice_: JSON, node: JSON, fleet: str) -> JSON:
    s = copy.deepcopy(slice_)
    meta = s["metadata"]
    meta.pop("generateName", None)
    meta.setdefault("labels", {})[FLEET_LABEL] = fleet
    meta["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"],
         "controller": True}
    ]
    return s


@dataclass
class Fleet:
    name: str
    nodes: list[JSON]  # as created (with the server's UIDs)
    slices: list[JSON]

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def device_count(self) -> int:
        return sum(len(s["spec"].get("devices", [])) for s in self.slices)


def create_objects(kube: Kube, objs: Iterable[JSON], fleet: str, workers: int = 16) -> Fleet:
    """Create generator output (DeviceClasses, Nodes, ResourceSlices, in any order) as a driver would:
    classes (if missing), then nodes, then each node's slices owned by the node."""
    objs = list(objs)
    classes = [o for o in objs if o["kind"] == "DeviceClass"]
    nodes = [kwok_node(o, fleet) for o in objs if o["kind"] == "Node"]
    slices = [o for o in objs if o["kind"] == "ResourceSlice"]
    other = {o["kind"] for o in objs} - {"DeviceClass", "Node", "ResourceSlice"}
    if other:
        raise ValueError(f"not fleet objects: {sorted(other)}")
    kube.create_many(classes, workers, exist_ok=True)
    created = kube.create_many(nodes, workers)
    by_name = {n["metadata"]["name"]: n for n in created}
    owned = [owned_slice(s, by_name[s["spec"]["nodeName"]], fleet) for s in slices]
    made = kube.create_many(owned, workers)
    return Fleet(fleet, created, made)


def create_demo_fleet(kube: Kube, fleet: str = "demo") -> Fleet:
    """The demo fleet of manifests/examples/00-fleet.yaml: dgx-h100-01, hgx-a100-01, a100-mig-01, l40s-01,
    t4-01 (59 devices incl. MIG) and the NVIDIA DeviceClasses."""
    return create_objects(kube, gen.demo_fleet(), fleet)


def scale_objects(
    prefix: str, nodes: int, gpus_per_node: int = 8, sku: gen.Sku = gen.DGX_H100, nodes_per_rack: int = 8
) -> list[JSON]:
    """``nodes`` identical GPU nodes named ``<prefix>-<i>`` (Node + slices each) plus the DeviceClasses."""
    s = sku.with_gpu_count(gpus_per_node)
    objs = gen.device_classes()
    width = max(3, len(str(max(nodes - 1, 0))))
    for i in range(nodes):
        rack = i // nodes_per_rack
        labels = {gen.REGION_LABEL: "region-1", gen.ZONE_LABEL: "zone-a", gen.BLOCK_LABEL: f"block-{rack // 8}",
                  gen.RACK_LABEL: f"rack-{rack}"}
        objs.extend(gen.gpu_node_objects(f"{prefix}-{i:0{width}d}", s, labels=labels))
    return objs


def create_scale_fleet(
    kube: Kube, prefix: str, nodes: int, gpus_per_node: int = 8, sku: gen.Sku = gen.DGX_H100, workers: int = 16
) -> Fleet:
    """``nodes`` x ``gpus_per_node`` GPU nodes; the fleet (label value) is named ``prefix``."""
    return create_objects(kube, scale_objects(prefix, nodes, gpus_per_node, sku), prefix, workers)


def delete_fleet(kube: Kube, fleet: str | None = None, wait: float = 60.0) -> None:
    """Delete the nodes and slices of ``fleet`` (every e2e fleet when None) and wait until they are gone.
    Pods bound to them should be deleted first (kwok finishes deletions only on nodes it manages)."""
    sel = f"{FLEET_LABEL}={fleet}" if fleet else FLEET_LABEL
    kube.delete_collection("ResourceSlice", labelSelector=sel)
    kube.delete_collection("Node", labelSelector=sel)
    wait_for(lambda: not kube.list("Node", labelSelector=sel) and not kube.list("ResourceSlice", labelSelector=sel),
             wait, f"fleet {fleet or '(all)'} deleted")


def plain_node(
    name: str,
    fleet: str,
    zone: str,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[JSON] = (),
    images: Sequence[JSON] = (),
) -> JSON:
    """A kwok Node without devices: allocatable cpu/memory/pods, the well-known labels the default plugins
    read (``kubernetes.io/hostname``, ``topology.kubernetes.io/zone``), the fleet label, ``taints``, container
    ``images`` present (``status.images``: ImageLocality). Its Ready condition is left to kwok (the
    node-initialize stage keeps the given allocatable and images)."""
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  gen.ZONE_LABEL: zone, gen.REGION_LABEL: "region-1", FLEET_LABEL: fleet, "type": "kwok",
                  **(labels or {})}
    spec: JSON = {"taints": [dict(t) for t in taints]} if taints else {}
    status: JSON = {"capacity": dict(resources), "allocatable": dict(resources)}
    if images:
        status["images"] = [dict(i) for i in images]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": all_labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": spec, "status": status}


def create_nodes(kube: Kube, nodes: Sequence[JSON], fleet: str, ready_timeout: float = 60.0) -> Fleet:
    """Create ``nodes`` (e.g. :func:`plain_node`) and wait until kwok reports every one Ready."""
    created = kube.create_many(nodes)
    names = {n["metadata"]["name"] for n in created}

    def ready() -> bool:
        ok = {n["metadata"]["name"] for n in kube.list("Node", labelSelector=f"{FLEET_LABEL}={fleet}")
              if any(c.get("type") == "Ready" and c.get("status") == "True"
                     for c in (n.get("status") or {}).get("conditions") or [])}
        return names <= ok

    wait_for(ready, ready_timeout, f"nodes of fleet {fleet} Ready (kwok)", interval=0.2)
    return Fleet(fleet, created, [])


def device_slice(node: JSON, driver: str, devices: Sequence[JSON], fleet: str) -> JSON:
    """One ResourceSlice (resource.k8s.io/v1) of ``driver`` publishing ``devices`` on ``node`` (as created, with
    its UID): pool = node name, owned by the node as a driver's kubelet plugin does."""
    name = node["metadata"]["name"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-{driver}", "labels": {FLEET_LABEL: fleet},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": node["metadata"]["uid"], "controller": True}]},
            "spec": {"driver": driver, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [dict(d) for d in devices]}}


def watch_events(resp: http.client.HTTPResponse, stop: threading.Event) -> Iterator[JSON]:
    """The events of a watch response (one JSON object per line) until the stream ends or ``stop`` is set."""
    while not stop.is_set():
        line = resp.readline()
        if not line:
            return
        if line.strip():
            yield json.loads(line)


def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``pred`` until it returns something truthy; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def wait_port(host: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# --------------------------------------------------------------------------------------------------
# dra-scheduler as a subprocess
# --------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scheduler_command() -> list[str]:
    script = Path(sys.executable).parent / "dra-scheduler"
    return [str(script)] if script.exists() else [sys.executable, "-m", "scheduler"]


class SchedulerProcess:
    """``dra-scheduler run`` as a subprocess (its own session, so a kill reaches it alone)."""

    def __init__(self, info: Any, log_path: Path, *extra: str, kubeconfig: str | None = None,
                 env: dict[str, str] | None = None, kubeconfig_flag: bool = True) -> None:
        self.info = info
        self.log_path = log_path
        self.extra = list(extra)
        self.kubeconfig = kubeconfig or info.kubeconfig
        self.env = env  # the whole environment of the process when given
        self.kubeconfig_flag = kubeconfig_flag  # False: no --kubeconfig (resolved as kubectl does)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 60.0) -> SchedulerProcess:
        self.port = _free_port()
        kc = ["--kubeconfig", self.kubeconfig] if self.kubeconfig_flag else []
        cmd = [*_scheduler_command(), "run", *kc, "--metrics-port", str(self.port),
               "--metrics-bind-address", "127.0.0.1", *self.extra]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts + 1}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=REPO, start_new_session=True, env=self.env)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dra-scheduler exited with {self.proc.returncode} during start-up:\n{self.tail()}")
            if self.http("/readyz")[0] == 200:
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"dra-scheduler not ready after {timeout:g}s:\n{self.tail()}")
            time.sleep(0.1)

    def http(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def metric(self, name: str) -> float:
        """Sum of the samples of one metric family (0 when absent)."""
        total = 0.0
        for line in self.http("/metrics")[1].splitlines():
            if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def metric_labeled(self, name: str, **labels: str) -> float:
        """Sum of the samples of one metric family whose labels include ``labels`` (0 when none)."""
        total = 0.0
        want = [f'{k}="{v}"' for k, v in labels.items()]
        for line in self.http("/metrics")[1].splitlines():
            if line.startswith(name + "{") and all(w in line.split("}", 1)[0] for w in want):
                total += float(line.rsplit(" ", 1)[1])
        return total

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown, no Lease release, binding cycles cut wherever they are."""
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (graceful), SIGKILL after ``timeout``; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, lines: int = 60) -> str:
        try:
            data = self.log_path.read_bytes()[-200_000:].decode("utf-8", "replace")
        except OSError as e:
            return f"(no log: {e})"
        return "\n".join(line[:600] for line in data.splitlines()[-lines:])


# --------------------------------------------------------------------------------------------------
# Workloads and the checks of ARCHITECTURE §3.2 on live objects
# --------------------------------------------------------------------------------------------------

SCHEDULER_NAME = "dra-scheduler"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def namespace(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {FLEET_LABEL + "-test": "1"}}}


def fresh_namespace(kube: Kube, prefix: str) -> str:
    """Create a namespace with a unique name (``<prefix>-<6 hex>``) for one test; returns its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.create(namespace(name))
    return name


def claim_template(ns: str, name: str, count: int = 1, device_class: str = "gpu.nvidia.com",
                   selectors: Sequence[str] = ()) -> JSON:
    exactly: JSON = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def gpu_pod(ns: str, name: str, template: str | None = None, claim: str | None = None, fleet: str | None = None,
            group: str | None = None, cpu: str = "100m") -> JSON:
    """A pod for dra-scheduler with one claim (from ``template``, or the named ``claim``), pinned to
    ``fleet``'s nodes when given, member of PodGroup ``group`` when given."""
    meta: JSON = {"name": name, "namespace": ns}
    if group:
        meta["labels"] = {POD_GROUP_LABEL: group}
    src = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    spec: JSON = {
        "schedulerName": SCHEDULER_NAME,
        "terminationGracePeriodSeconds": 0,
        "resourceClaims": [{"name": "gpu", **src}],
        "containers": [{"name": "main", "image": "pause",
                        "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpu"}]}}],
    }
    if fleet:
        spec["nodeSelector"] = {FLEET_LABEL: fleet}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def podgroup(ns: str, name: str, min_member: int, timeout: int | None = None) -> JSON:
    spec: JSON = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


UPSTREAM_PODGROUP = "PodGroup.scheduling.k8s.io"  # the KINDS key of scheduling.k8s.io/v1beta1 PodGroups


def upstream_podgroup(ns: str, name: str, min_count: int) -> JSON:
    """A Kubernetes 1.37 PodGroup (scheduling.k8s.io/v1beta1, gate GenericWorkload) with a gang policy."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}


def upstream_member(pod: JSON, group: str) -> JSON:
    """``pod`` as a member of the scheduling.k8s.io PodGroup ``group`` (spec.schedulingGroup, no label)."""
    p = copy.deepcopy(pod)
    (p["metadata"].get("labels") or {}).pop(POD_GROUP_LABEL, None)
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def pod_scheduled_condition(pod: JSON) -> JSON | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def claim_names(pod: JSON) -> dict[str, str | None]:
    """pod claim entry name -> ResourceClaim name (None: template claim not created yet)."""
    generated = {s["name"]: s.get("resourceClaimName")
                 for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return {pc["name"]: pc.get("resourceClaimName") or generated.get(pc["name"])
            for pc in pod["spec"].get("resourceClaims") or []}


def allocated_devices(claim: JSON) -> list[tuple[str, str, str]]:
    alloc = (claim.get("status") or {}).get("allocation")
    if not alloc:
        return []
    return [(r["driver"], r["pool"], r["device"]) for r in alloc["devices"]["results"]]


def check_state(pods: Sequence[JSON], claims: Sequence[JSON]) -> list[str]:
    """The invariants of ARCHITECTURE §3.2/§4 over live objects; returns every violation found:

    * a bound pod: each of its claims exists, has the delete-protection finalizer, ``status.allocation``
      whose ``nodeSelector`` selects the pod's node, devices in the node's pool, and ``reservedFor`` naming
      the pod (name and UID);
    * an unbound pod: no claim used only by it is allocated or reserved for it;
    * no device is allocated to two claims (devices are exclusive here);
    * no claim is reserved for a pod that is not bound (or does not exist).
    """
    problems: list[str] = []
    by_key = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    pod_by_uid = {p["metadata"]["uid"]: p for p in pods}
    owners: dict[tuple[str, str, str], str] = {}
    for claim in claims:
        key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
        for dev in allocated_devices(claim):
            if dev in owners:
                problems.append(f"device {'/'.join(dev)} allocated to {owners[dev]} and {key}")
            owners[dev] = key
        for r in (claim.get("status") or {}).get("reservedFor") or []:
            p = pod_by_uid.get(r.get("uid", ""))
            if p is None or not p["spec"].get("nodeName"):
                problems.append(f"claim {key} reserved for pod {r.get('name')} which is not bound")
    for p in pods:
        ns, name, uid = p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"]
        node = p["spec"].get("nodeName")
        for entry, cname in claim_names(p).items():
            c: JSON | None = by_key.get((ns, cname)) if cname else None
            if not node:
                if c is not None and allocated_devices(c) and not any(
                    pod_by_uid.get(r.get("uid", ""), {}).get("spec", {}).get("nodeName")
                    for r in (c.get("status") or {}).get("reservedFor") or []
                ):
                    problems.append(f"pod {ns}/{name} is not bound but its claim {cname} is allocated")
                continue
            if c is None:
                problems.append(f"bound pod {ns}/{name}: claim {entry} ({cname}) missing")
                continue
            st = c.get("status") or {}
            alloc = st.get("allocation")
            if not alloc:
                problems.append(f"bound pod {ns}/{name}: claim {cname} not allocated")
                continue
            if DELETE_PROTECTION not in (c["metadata"].get("finalizers") or []):
                problems.append(f"claim {ns}/{cname}: no {DELETE_PROTECTION} finalizer")
            if not any(r.get("uid") == uid and r.get("name") == name and r.get("resource") == "pods"
                       for r in st.get("reservedFor") or []):
                problems.append(f"claim {ns}/{cname} not reserved for bound pod {name}")
            terms = ((alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or [])
            values = [v for t in terms for f in t.get("matchFields") or [] for v in f.get("values") or []]
            if values != [node]:
                problems.append(f"claim {ns}/{cname}: nodeSelector {terms} does not select node {node}")
            for dev in allocated_devices(c):
                if dev[1] != node:
                    problems.append(f"claim {ns}/{cname}: device {'/'.join(dev)} is not on node {node}")
    return problems


# --------------------------------------------------------------------------------------------------
# Preemption: priority classes, held deletions, recorded watch streams
# --------------------------------------------------------------------------------------------------

HOLD_FINALIZER = "e2e.dra-scheduler.io/hold"  # keeps a deleted pod Terminating until the test releases it


def priority_class(name: str, value: int, preemption_policy: str | None = None) -> JSON:
    """A scheduling.k8s.io/v1 PriorityClass; the API server's Priority admission copies ``value`` (and
    ``preemptionPolicy``) into the ``spec.priority`` of pods naming it in ``priorityClassName``."""
    pc: JSON = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "description": "dra-scheduler e2e"}
    if preemption_policy:
        pc["preemptionPolicy"] = preemption_policy
    return pc


def release(kube: Kube, ns: str, name: str) -> None:
    """Drop every finalizer of a pod (e.g. :data:`HOLD_FINALIZER`): a pod being deleted then goes away."""
    try:
        kube.patch("Pod", name, {"metadata": {"finalizers": None}}, ns)
    except KubeError as e:
        if e.status != 404:
            raise


def condition(obj: JSON, type_: str) -> JSON | None:
    """The status condition of ``type_`` (None when absent)."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


class Recorder:
    """Every watch event of one kind (one namespace, or all) from a consistent list on, recorded by a thread.

    ``initial`` holds the listed objects; ``events`` the ``(monotonic time, type, object)`` of every ADDED,
    MODIFIED and DELETED after that list, in the API server's (resourceVersion) order; the watch is
    re-opened from the last resourceVersion when the server ends it. Use as a context manager, or
    ``start()`` / ``stop()``."""

    def __init__(self, kube: Kube, kind: str, namespace: str = "") -> None:
        self.kube = kube
        self.kind = kind
        self.namespace = namespace
        self.initial: builtins.list[JSON] = []
        self.events: builtins.list[tuple[float, str, JSON]] = []
        self.error: str | None = None
        self._rv = ""
        self._stop = threading.Event()
        self._conn: http.client.HTTPSConnection | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Recorder:
        listed = self.kube.request("GET", KINDS[self.kind].path(self.namespace))
        self.initial = listed.get("items", [])
        self._rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, name=f"record-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            q = urlencode({"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": 300,
                           "resourceVersion": self._rv})
            conn = http.client.HTTPSConnection(self.kube.host, self.kube.port, context=self.kube.ctx, timeout=330)
            with self._lock:
                self._conn = conn
            try:
                conn.request("GET", KINDS[self.kind].path(self.namespace) + "?" + q,
                             headers={"Authorization": f"Bearer {self.kube.token}"})
                resp = conn.getresponse()
                if resp.status != 200:
                    self.error = f"watch {self.kind}: HTTP {resp.status}: {resp.read()[:300]!r}"
                    return
                for ev in watch_events(resp, self._stop):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        self.error = f"watch {self.kind}: {obj.get('message')}"
                        return
                    self._rv = obj.get("metadata", {}).get("resourceVersion") or self._rv
                    if ev.get("type") != "BOOKMARK":
                        self.events.append((time.monotonic(), ev["type"], obj))
            except ValueError as e:
                self.error = f"watch {self.kind}: {e!r}"
                return
            except (OSError, http.client.HTTPException):
                if not self._stop.is_set():
                    time.sleep(0.1)  # server restart or lost connection: re-watch from the last version
            finally:
                conn.close()

    def stop(self, settle: float = 0.3) -> None:
        """Give events in flight ``settle`` seconds, then end the watch."""
        if self._thread is None:
            return
        time.sleep(settle)
        self._stop.set()
        with self._lock:
            sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        self._thread = None

    def versions(self, name: str) -> builtins.list[tuple[str, JSON]]:
        """(event type, object) of every recorded version of the object ``name`` (namespace ignored)."""
        return [(t, o) for _, t, o in self.events if o.get("metadata", {}).get("name") == name]


def replay_device_owners(
    initial: Sequence[JSON], events: Sequence[tuple[float, str, JSON]]
) -> tuple[int, builtins.list[str]]:
    """Replay ResourceClaim watch events in order from the listed ``initial`` claims and check, in every
    state the cluster went through, that no device is allocated to two claims. Returns (number of states
    checked, violations)."""
    alloc: dict[str, builtins.list[tuple[str, str, str]]] = {}

    def key(c: JSON) -> str:
        return f"{c['metadata'].get('namespace', '')}/{c['metadata']['name']}"

    def check(where: str) -> builtins.list[str]:
        owners: dict[tuple[str, str, str], str] = {}
        found: builtins.list[str] = []
        for k, devs in alloc.items():
            for d in devs:
                if d in owners:
                    found.append(f"{where}: device {'/'.join(d)} allocated to {owners[d]} and {k}")
                owners[d] = k
        return found

    for c in initial:
        alloc[key(c)] = allocated_devices(c)
    problems = check("initial list")
    states = 1
    for _, typ, obj in events:
        if typ == "DELETED":
            alloc.pop(key(obj), None)
        else:
            alloc[key(obj)] = allocated_devices(obj)
        states += 1
        problems += check(f"after {typ} {key(obj)} (resourceVersion {obj['metadata'].get('resourceVersion')})")
    return states, problems


def main(argv: Sequence[str] | None = None) -> int:
    from e2e import cluster

    p = argparse.ArgumentParser(prog="python -m e2e.fleet", description="create fleets on the e2e cluster")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo")
    sc = sub.add_parser("scale")
    sc.add_argument("nodes", type=int)
    sc.add_argument("--gpus", type=int, default=8)
    sc.add_argument("--name", default="scale")
    d = sub.add_parser("delete")
    d.add_argument("fleet", nargs="?")
    args = p.parse_args(argv)
    kube = Kube.from_info(cluster.info())
    if args.cmd == "demo":
        f = create_demo_fleet(kube)
    elif args.cmd == "scale":
        f = create_scale_fleet(kube, args.name, args.nodes, args.gpus)
    else:
        delete_fleet(kube, args.fleet)
        return 0
    print(f"fleet {f.name}: {len(f.nodes)} nodes, {len(f.slices)} slices, {f.device_count()} devices")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
