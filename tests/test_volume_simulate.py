"""Volumes end to end through ``simulate`` (the in-memory API, the scheduler's binding cycle, and
``scheduler.simulate.volumes.VolumeControllers`` playing kube-controller-manager), plus the typed storage values.

Scenarios: a missing claim keeps the pod pending with upstream's reason; WaitForFirstConsumer + a local PV
of one node places the pod there and binds the PV (claimRef, both phases Bound); two pods, one PV: one
bound, one pending; a provisioner class with allowedTopologies restricts to its zone and the claim gets the
selected-node annotation; generic ephemeral volumes get their claim; Immediate claims are bound before
scheduling; equal pods reuse results only where that is right (disk conflicts, ReadWriteOncePod)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.api.model import ModelError
from scheduler.api.storage import (
    csinode_from,
    csistoragecapacity_from,
    pod_volumes,
    pv_from,
    pvc_from,
    storageclass_from,
)
from scheduler.simulate.memapi import InMemoryAPI
from scheduler.simulate.simulation import simulate
from scheduler.simulate.volumes import VolumeControllers
from tests.volume_fixtures import (
    Obj,
    claim_volume,
    csinode,
    ephemeral_volume,
    make_pod,
    pod_raw,
    pv,
    pvc,
    storage_class,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _node(name: str, **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOST: name, **labels}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def _local_pv(
    name: str, host: str, size: str = "10Gi", cls: str = "local", modes: tuple[str, ...] = ("ReadWriteOnce",)
) -> Obj:
    o = pv(name, host, size, cls, affinity_key=HOST, modes=modes)
    del o["status"]  # as a user writes it: the PV controller makes it Available
    return o


def _claim(name: str, cls: str | None = "local", size: str = "5Gi", **kw: Any) -> Obj:
    o = pvc(name, size, cls, modes=kw.pop("modes", ("ReadWriteOnce",)), **kw)
    del o["metadata"]["uid"]  # the in-memory API assigns it
    return o


def _pod(name: str, *volumes: Obj) -> Obj:
    o = pod_raw(name, volumes)
    del o["metadata"]["uid"]
    return o


LOCAL = storage_class("local", "kubernetes.io/no-provisioner")


def _run(objs: list[Obj]) -> tuple[dict[tuple[str, str], Obj], Any]:
    res = asyncio.run(simulate(objs))
    return {(o["kind"], o["metadata"]["name"]): o for o in res.items}, res


def _cond(pod: Obj) -> Obj:
    [c] = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
    return dict(c)


def test_missing_claim_keeps_the_pod_pending_with_the_reason() -> None:
    items, res = _run([_node("n1"), _pod("app", claim_volume("missing"))])
    pod = items[("Pod", "app")]
    assert not pod["spec"].get("nodeName")
    c = _cond(pod)
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    assert 'persistentvolumeclaim "missing" not found' in c["message"]
    assert res.summary["unschedulable"] == 1


def test_wait_for_first_consumer_local_pv_places_pod_on_its_node_and_binds() -> None:
    items, _ = _run(
        [
            LOCAL,
            _node("node-a"),
            _node("node-b"),
            _local_pv("pv-b", "node-b"),
            _claim("data"),
            _pod("app", claim_volume("data")),
        ]
    )
    assert items[("Pod", "app")]["spec"]["nodeName"] == "node-b"
    claim, vol = items[("PersistentVolumeClaim", "data")], items[("PersistentVolume", "pv-b")]
    ref = vol["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "data", claim["metadata"]["uid"])
    assert vol["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert vol["status"]["phase"] == "Bound"
    assert claim["spec"]["volumeName"] == "pv-b"
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}


def test_two_pods_one_pv_one_bound_one_pending() -> None:
    items, res = _run(
        [
            LOCAL,
            _node("node-a"),
            _node("node-b"),
            _local_pv("only", "node-b"),
            _claim("c1"),
            _claim("c2"),
            _pod("p1", claim_volume("c1")),
            _pod("p2", claim_volume("c2")),
        ]
    )
    placed = {n: items[("Pod", n)]["spec"].get("nodeName") for n in ("p1", "p2")}
    assert sorted(placed.values(), key=str) == [None, "node-b"]
    winner = next(n for n, v in placed.items() if v)
    loser = next(n for n, v in placed.items() if not v)
    assert items[("PersistentVolume", "only")]["spec"]["claimRef"]["name"] == {"p1": "c1", "p2": "c2"}[winner]
    msg = _cond(items[("Pod", loser)])["message"]
    assert "2 node(s) didn't find available persistent volumes to bind" in msg
    assert items[("PersistentVolumeClaim", {"p1": "c1", "p2": "c2"}[loser])]["status"]["phase"] == "Pending"
    assert res.summary["scheduled"] == 1


def test_provisioner_allowed_topologies_restrict_to_zone_and_select_node() -> None:
    sc = storage_class("zonal", "ebs.csi.aws.com", topologies=[{ZONE: ["zone-a"]}])
    items, _ = _run(
        [
            sc,
            _node("b-1", **{ZONE: "zone-b"}),
            _node("b-2", **{ZONE: "zone-b"}),
            _node("a-1", **{ZONE: "zone-a"}),
            _claim("data", "zonal"),
            _pod("app", claim_volume("data")),
        ]
    )
    assert items[("Pod", "app")]["spec"]["nodeName"] == "a-1"
    claim = items[("PersistentVolumeClaim", "data")]
    anns = claim["metadata"]["annotations"]
    assert anns["volume.kubernetes.io/selected-node"] == "a-1"
    assert anns["volume.kubernetes.io/storage-provisioner"] == "ebs.csi.aws.com"
    vol = items[("PersistentVolume", claim["spec"]["volumeName"])]
    assert vol["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
    assert vol["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "ebs.csi.aws.com"
    assert vol["spec"]["csi"]["driver"] == "ebs.csi.aws.com"
    assert vol["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]}
    ]


def test_provisioner_topology_no_matching_node_keeps_pod_pending() -> None:
    sc = storage_class("zonal", "ebs.csi.aws.com", topologies=[{ZONE: ["zone-c"]}])
    items, _ = _run([sc, _node("a-1", **{ZONE: "zone-a"}), _claim("data", "zonal"), _pod("app", claim_volume("data"))])
    assert not items[("Pod", "app")]["spec"].get("nodeName")
    assert "didn't find available persistent volumes to bind" in _cond(items[("Pod", "app")])["message"]
    assert "volume.kubernetes.io/selected-node" not in (
        items[("PersistentVolumeClaim", "data")]["metadata"].get("annotations") or {}
    )


def test_provisioned_volume_uses_the_drivers_csinode_topology_keys() -> None:
    sc = storage_class("fast", "disk.csi.example.com")
    node_obj = _node("n1", **{ZONE: "z1", "example.com/rack": "r7"})
    cn = csinode("n1", {"disk.csi.example.com": None})
    cn["spec"]["drivers"][0]["topologyKeys"] = ["example.com/rack"]
    items, _ = _run([sc, node_obj, cn, _claim("data", "fast"), _pod("app", claim_volume("data"))])
    claim = items[("PersistentVolumeClaim", "data")]
    vol = items[("PersistentVolume", claim["spec"]["volumeName"])]
    assert vol["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "example.com/rack", "operator": "In", "values": ["r7"]}
    ]


def test_generic_ephemeral_volume_gets_its_claim_and_the_pod_runs() -> None:
    items, _ = _run(
        [LOCAL, _node("n1"), _local_pv("pv-1", "n1"), _pod("web", ephemeral_volume("scratch", "local", "1Gi"))]
    )
    pod = items[("Pod", "web")]
    assert pod["spec"]["nodeName"] == "n1"
    claim = items[("PersistentVolumeClaim", "web-scratch")]
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "web",
        pod["metadata"]["uid"],
        True,
    )
    assert claim["spec"]["volumeName"] == "pv-1"


def test_immediate_claims_are_bound_before_scheduling_or_block_the_pod() -> None:
    imm = storage_class("imm", "kubernetes.io/no-provisioner", "Immediate")
    items, _ = _run(
        [
            imm,
            _node("n1"),
            _node("n2"),
            _local_pv("pv-n2", "n2", cls="imm"),
            _claim("bound-early", "imm"),
            _claim("never", "imm", size="100Gi"),
            _pod("uses-bound", claim_volume("bound-early")),
            _pod("uses-unbound", claim_volume("never")),
        ]
    )
    assert items[("PersistentVolumeClaim", "bound-early")]["spec"]["volumeName"] == "pv-n2"
    assert items[("Pod", "uses-bound")]["spec"]["nodeName"] == "n2"  # the PV's node affinity
    pending = items[("Pod", "uses-unbound")]
    assert not pending["spec"].get("nodeName")
    assert _cond(pending)["message"] == "pod has unbound immediate PersistentVolumeClaims"


def test_default_storage_class_is_assigned_to_claims_without_one() -> None:
    dflt = storage_class("standard", "kubernetes.io/no-provisioner", default=True)
    items, _ = _run(
        [
            dflt,
            _node("n1"),
            _local_pv("pv-1", "n1", cls="standard"),
            _claim("data", None),
            _pod("app", claim_volume("data")),
        ]
    )
    claim = items[("PersistentVolumeClaim", "data")]
    assert claim["spec"]["storageClassName"] == "standard"
    assert items[("Pod", "app")]["spec"]["nodeName"] == "n1"


def test_equal_pods_with_the_same_inline_disk_do_not_reuse_a_stale_filter_result() -> None:
    """Three pods with identical specs (equal signatures) mounting the same iSCSI disk read-write: results
    are reused between them (a node unchanged by the previous pod), yet the second must go to the other node
    and the third nowhere."""
    disk = {"name": "d", "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2026-01.example:disk", "lun": 0}}
    items, res = _run([_node("n1"), _node("n2"), _pod("p1", disk), _pod("p2", disk), _pod("p3", disk)])
    nodes = [items[("Pod", n)]["spec"].get("nodeName") for n in ("p1", "p2", "p3")]
    assert sorted(n for n in nodes if n) == ["n1", "n2"]
    assert nodes.count(None) == 1
    [left] = [n for n in ("p1", "p2", "p3") if not items[("Pod", n)]["spec"].get("nodeName")]
    assert "2 node(s) had no available disk" in _cond(items[("Pod", left)])["message"]
    stats = next(iter(res.scheduler.profiles.values())).memo_stats
    assert stats["filter_hits"] > 0  # the signature was usable: reuse really happened


def test_equal_pods_sharing_a_read_write_once_pod_claim() -> None:
    items, _ = _run(
        [
            LOCAL,
            _node("n1"),
            _node("n2"),
            _local_pv("pv-1", "n1", modes=("ReadWriteOncePod",)),
            _claim("solo", modes=("ReadWriteOncePod",)),
            _pod("p1", claim_volume("solo")),
            _pod("p2", claim_volume("solo")),
        ]
    )
    placed = [items[("Pod", n)]["spec"].get("nodeName") for n in ("p1", "p2")]
    assert placed.count("n1") == 1 and placed.count(None) == 1
    [left] = [n for n in ("p1", "p2") if not items[("Pod", n)]["spec"].get("nodeName")]
    assert "ReadWriteOncePod access mode already in-use by another pod" in _cond(items[("Pod", left)])["message"]


def test_csinode_limit_spreads_pods_over_nodes() -> None:
    sc = storage_class("csi", "ebs.csi.aws.com")
    objs: list[Obj] = [sc]
    for n in ("n1", "n2"):
        objs += [_node(n), csinode(n, {"ebs.csi.aws.com": 1})]
    for i in range(3):
        objs += [_claim(f"c{i}", "csi"), _pod(f"p{i}", claim_volume(f"c{i}"))]
    items, res = _run(objs)
    placed = [items[("Pod", f"p{i}")]["spec"].get("nodeName") for i in range(3)]
    assert sorted(p for p in placed if p) == ["n1", "n2"] and res.summary["scheduled"] == 2
    [left] = [f"p{i}" for i in range(3) if not placed[i]]
    assert "node(s) exceed max volume count" in _cond(items[("Pod", left)])["message"]


# --- the controllers on their own -------------------------------------------------------------------------


def test_controllers_without_provisioner_leave_the_claim_waiting() -> None:
    async def run() -> None:
        api = InMemoryAPI()
        api.load("StorageClass", storage_class("imm", "ebs.csi.aws.com", "Immediate"))
        api.load("PersistentVolumeClaim", _claim("c", "imm"))
        vc = VolumeControllers(api, provision=False)
        await vc.start()
        await vc.stop()
        claim = await api.get("PersistentVolumeClaim", "default", "c")
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "ebs.csi.aws.com"
        assert claim["status"]["phase"] == "Pending" and not claim["spec"].get("volumeName")
        assert api.stored("PersistentVolume") == []

    asyncio.run(run())


def test_controllers_bind_a_claim_that_names_its_volume() -> None:
    async def run() -> None:
        api = InMemoryAPI()
        api.load("PersistentVolume", _local_pv("pv-x", "n1", cls=""))
        api.load("PersistentVolumeClaim", _claim("c", "", volume_name="pv-x"))
        vc = VolumeControllers(api)
        await vc.start()
        await vc.stop()
        vol = await api.get("PersistentVolume", "", "pv-x")
        claim = await api.get("PersistentVolumeClaim", "default", "c")
        assert vol["spec"]["claimRef"]["name"] == "c" and vol["status"]["phase"] == "Bound"
        # the claim named the volume: bound-by-controller is set on the PV (the controller wrote claimRef),
        # not on the claim (the user chose the volume)
        assert vol["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
        assert "pv.kubernetes.io/bound-by-controller" not in claim["metadata"]["annotations"]
        assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"

    asyncio.run(run())


def test_controllers_mark_a_claim_lost_when_its_volume_is_gone() -> None:
    async def run() -> None:
        api = InMemoryAPI()
        api.load("PersistentVolumeClaim", _claim("c", "", volume_name="gone", bound=True))
        vc = VolumeControllers(api)
        await vc.start()
        await vc.stop()
        assert (await api.get("PersistentVolumeClaim", "default", "c"))["status"]["phase"] == "Lost"

    asyncio.run(run())


# --- typed values -----------------------------------------------------------------------------------------


def test_converters_apply_api_defaults_and_read_the_fields() -> None:
    sc = storageclass_from(storage_class("s", "p", mode=None, topologies=[{ZONE: ["a", "b"]}]))
    assert sc.binding_mode == "Immediate" and not sc.wait_for_first_consumer and sc.reclaim_policy == "Delete"
    assert sc.allowed_topologies[0].matches({ZONE: "b"}) and not sc.allowed_topologies[0].matches({ZONE: "c"})
    v = pv_from(
        pv("v", "n1", "10Gi", "gold", modes=["ReadWriteOnce"], source={"csi": {"driver": "d", "volumeHandle": "h"}})
    )
    assert (v.storage_class, v.source, v.csi_driver, v.csi_handle, v.volume_mode, v.phase) == (
        "gold",
        "csi",
        "d",
        "h",
        "Filesystem",
        "Available",
    )
    assert v.capacity is not None and v.capacity.int_value() == 10 * 1024**3
    beta = pv("b", None, cls="spec-class")
    beta["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] = "annotated"
    assert pv_from(beta).storage_class == "annotated"
    c = pvc_from(
        pvc("c", "1Gi", None, selected_node="n2", annotations={"volume.beta.kubernetes.io/storage-class": "x"})
    )
    assert (c.storage_class, c.has_class, c.selected_node, c.fully_bound) == ("x", True, "n2", False)
    c = pvc_from(pvc("c", None, None))
    assert (c.storage_class, c.has_class, c.request) == ("", False, None)
    cn = csinode_from(
        csinode("n", {"a": 3, "b": None}, {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd"})
    )
    assert cn.volume_limits() == {"a": 3} and cn.migrated_plugins == frozenset({"kubernetes.io/gce-pd"})
    with pytest.raises(ModelError):
        csinode_from(csinode("n", {"a": "three"}))  # type: ignore[dict-item]
    cap = csistoragecapacity_from(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "storageClassName": "s",
            "capacity": "1Gi",
            "maximumVolumeSize": "1Mi",
        }
    )
    assert cap.node_topology is None and cap.volume_limit is not None and cap.volume_limit.int_value() == 1024**2


def test_pod_volumes_are_parsed_once() -> None:
    pod = make_pod(
        "p", [claim_volume("c"), ephemeral_volume("e"), {"name": "r", "rbd": {"monitors": ["m"], "image": "i"}}]
    )
    vols = pod_volumes(pod)
    assert [(v.kind, v.claim_name) for v in vols] == [("persistentVolumeClaim", "c"), ("ephemeral", "p-e"), ("rbd", "")]
    assert vols[2].rbd_pool == "rbd"
    assert pod_volumes(pod) is vols


def test_controllers_provision_and_bind_immediate_claims_at_start() -> None:
    async def run() -> None:
        api = InMemoryAPI()
        api.load("StorageClass", storage_class("imm", "ebs.csi.aws.com", "Immediate", topologies=[{ZONE: ["z1"]}]))
        api.load("PersistentVolumeClaim", _claim("c", "imm"))
        vc = VolumeControllers(api)
        await vc.start()
        claim = await api.get("PersistentVolumeClaim", "default", "c")
        assert claim["status"]["phase"] == "Bound"
        vol = await api.get("PersistentVolume", "", claim["spec"]["volumeName"])
        assert vol["status"]["phase"] == "Bound" and vol["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        assert vol["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] == [
            {"key": ZONE, "operator": "In", "values": ["z1"]}
        ]
        await vc.stop()
        assert vc.watch not in api.watchers

    asyncio.run(run())
