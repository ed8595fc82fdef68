"""NodeVolumeLimits (CSI): upstream's cases (kube-scheduler v1.37.2 ``nodevolumelimits/csi_test.go``
TestCSILimits, without the VolumeAttachment ones: VolumeAttachments are not watched), plus the
VolumeLimitScaling driver check and the per-NodeInfo memo."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, SPEC, NodeVolumeLimits
from scheduler.framework.interface import Code
from tests.volume_fixtures import (
    Obj,
    World,
    claim_volume,
    csidriver,
    csinode,
    make_pod,
    node,
    pod_raw,
    pvc,
    storage_class,
)

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
NS = "test"


def _csi_pv(name: str, driver: str, handle: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "csi": {"driver": driver, "volumeHandle": handle}},
        "status": {"phase": "Bound"},
    }


def _intree_pv(name: str, volume_id: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "awsElasticBlockStore": {"volumeID": volume_id}},
        "status": {"phase": "Bound"},
    }


def _objects() -> list[Obj]:
    """PVCs ``<kind>-<n>`` bound to PVs ``<kind>-<n>-pv`` (handle ``<kind>-<n>``), unbound claims of a
    CSI class and of an in-tree class, a claim whose PV is missing, one with no class."""
    objs: list[Obj] = [
        storage_class("csi-sc", EBS, "Immediate"),
        storage_class("intree-sc", "kubernetes.io/aws-ebs", "Immediate"),
        storage_class("hostpath-sc", "kubernetes.io/no-provisioner", "Immediate"),
    ]
    for kind, driver in (("csi-ebs", EBS), ("csi-gce", GCE)):
        for i in range(4):
            objs.append(_csi_pv(f"{kind}-{i}-pv", driver, f"{kind}-{i}"))
            objs.append(pvc(f"{kind}-{i}", "1Gi", None, volume_name=f"{kind}-{i}-pv", bound=True, ns=NS))
    for i in range(4):
        objs.append(_intree_pv(f"intree-{i}-pv", f"aws-intree-{i}"))
        objs.append(pvc(f"intree-{i}", "1Gi", None, volume_name=f"intree-{i}-pv", bound=True, ns=NS))
    hostpath = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "hostpath-pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/tmp"}},
    }
    objs += [
        hostpath,
        pvc("hostpath", "1Gi", "hostpath-sc", volume_name="hostpath-pv", bound=True, ns=NS),
        pvc("csi-unbound-0", "1Gi", "csi-sc", ns=NS),
        pvc("csi-unbound-1", "1Gi", "csi-sc", ns=NS),
        pvc("intree-unbound", "1Gi", "intree-sc", ns=NS),
        pvc("missing-pv", "1Gi", "csi-sc", volume_name="nope", ns=NS),
        pvc("no-sc", "1Gi", None, ns=NS),
    ]
    return objs


def _claims(*names: str) -> list[Obj]:
    return [claim_volume(n, name=f"v{i}") for i, n in enumerate(names)]


def _inline_ebs(volume_id: str) -> Obj:
    return {"name": f"inline-{volume_id}", "awsElasticBlockStore": {"volumeID": volume_id}}


PODS: dict[str, list[Obj]] = {
    "csiEBSOneVol": _claims("csi-ebs-0"),
    "csiEBSTwoVol": _claims("csi-ebs-1", "csi-ebs-2"),
    "running": _claims("csi-ebs-3"),
    "pendingVolume": _claims("csi-unbound-0"),
    "unboundPVC2": _claims("csi-unbound-0"),  # another pod, the same unbound claim: counted once
    "missingPV": _claims("missing-pv"),
    "noSCPVC": _claims("no-sc"),
    "gceTwoVol": _claims("csi-gce-1", "csi-gce-2"),
    "inTreeOneVol": _claims("intree-0"),
    "inTreeTwoVol": _claims("intree-1", "intree-2"),
    "inTreeInline": [_inline_ebs("aws-inline-1")],
    "inTreeInlineSameID": [_inline_ebs("csi-ebs-1")],  # translates to the handle of a CSI volume on the node
    "inTreeNonMigratable": _claims("hostpath"),
    "inTreePending": _claims("intree-unbound"),
}


def _run(new: str | list[Obj], existing: list[str], limits: dict[str, int | None] | None, *extra: Obj) -> Any:
    w = World(node("node-1"), *_objects(), *extra)
    if limits is not None:
        w.add(csinode("node-1", limits))
    for i, name in enumerate(existing):
        w.add(pod_raw(f"existing-{i}", PODS[name], ns=NS, node_name="node-1"))
    pod_vols = PODS[new] if isinstance(new, str) else new
    p = make_pod("abc", pod_vols, ns=NS, uid="uid-abc")
    pl = NodeVolumeLimits()
    state = w.state()
    _, pre = pl.pre_filter(state, p)
    if pre.code == Code.SKIP:
        return pre
    return pl.filter(state, p, w.node_info(state, "node-1"))


CASES: list[tuple[str, str, list[str], dict[str, int | None] | None, bool]] = [
    ("fits when node volume limit >= new pods CSI volume", "csiEBSOneVol", ["running", "csiEBSTwoVol"], {EBS: 4}, True),
    ("doesn't when node volume limit <= pods CSI volume", "csiEBSOneVol", ["running", "csiEBSTwoVol"], {EBS: 2}, False),
    (
        "should when driver does not support volume limits",
        "csiEBSOneVol",
        ["running", "csiEBSTwoVol"],
        {EBS: None},
        True,
    ),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        "csiEBSOneVol",
        ["pendingVolume", "csiEBSTwoVol"],
        {EBS: 2},
        False,
    ),
    (
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        "csiEBSOneVol",
        ["pendingVolume", "unboundPVC2", "csiEBSTwoVol"],
        {EBS: 4},
        True,
    ),
    (
        "should count PVCs with invalid PV name but valid SC",
        "csiEBSOneVol",
        ["missingPV", "csiEBSTwoVol"],
        {EBS: 2},
        False,
    ),
    ("don't count pvcs with missing SC towards volume limit", "csiEBSOneVol", ["running", "noSCPVC"], {EBS: 2}, True),
    (
        "count pvcs with the same type towards volume limit",
        "csiEBSOneVol",
        ["gceTwoVol", "csiEBSTwoVol"],
        {EBS: 2, GCE: 2},
        False,
    ),
    (
        "don't count pvcs with different type towards volume limit",
        "gceTwoVol",
        ["csiEBSTwoVol", "running"],
        {EBS: 2, GCE: 2},
        True,
    ),
    ("should count in-tree volumes if migration is enabled", "inTreeOneVol", ["inTreeTwoVol"], {EBS: 2}, False),
    ("nil csi node", "inTreeInline", ["inTreeTwoVol"], None, True),
    (
        "should count unbound in-tree volumes if migration is enabled",
        "inTreePending",
        ["inTreeTwoVol"],
        {EBS: 2},
        False,
    ),
    ("should not limit pod if volume used does not report limits", "inTreeOneVol", ["inTreeTwoVol"], {EBS: None}, True),
    ("should not count non-migratable in-tree volumes", "inTreeNonMigratable", ["csiEBSTwoVol"], {EBS: 2}, True),
    ("should count in-tree inline volumes if migration is enabled", "inTreeInline", ["inTreeTwoVol"], {EBS: 2}, False),
    ("in-tree and csi volumes (scheduling in-tree volumes)", "inTreeOneVol", ["csiEBSTwoVol"], {EBS: 2}, False),
    ("in-tree, inline and csi volumes", "inTreeInline", ["csiEBSTwoVol", "inTreeOneVol"], {EBS: 3}, False),
    (
        "inline volume with the same CSI volume ID not counted",
        "inTreeInlineSameID",
        ["csiEBSTwoVol", "inTreeOneVol"],
        {EBS: 3},
        True,
    ),
    ("in-tree and csi volumes (scheduling csi volumes)", "csiEBSOneVol", ["inTreeTwoVol"], {EBS: 2}, False),
    (
        "a volume already on the node is not attached again",
        "csiEBSOneVol",
        ["csiEBSOneVol", "csiEBSTwoVol"],
        {EBS: 3},
        True,
    ),
    ("one more volume is", "running", ["csiEBSOneVol", "csiEBSTwoVol"], {EBS: 3}, False),
]


@pytest.mark.parametrize(("name", "new", "existing", "limits", "fits"), CASES, ids=[c[0] for c in CASES])
def test_csi_limits(name: str, new: str, existing: list[str], limits: dict[str, int | None] | None, fits: bool) -> None:
    st = _run(new, existing, limits)
    if fits:
        assert st.is_success, st
    else:
        assert st.code == Code.UNSCHEDULABLE and st.reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)


EPH = [{"name": "xyz", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "csi-sc"}}}}]


def _eph_claim(name: str, owned: bool, pod: str = "abc", uid: str = "uid-abc") -> Obj:
    return pvc(name, "1Gi", "csi-sc", ns=NS, owner=(pod, uid) if owned else None)


def test_ephemeral_volumes() -> None:
    st = _run(EPH, [], {EBS: None})
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',)
    st = _run(EPH, [], {EBS: None}, _eph_claim("abc-xyz", owned=False))
    assert st.code == Code.ERROR and st.reasons == (
        "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",
    )
    assert _run(EPH, [], {EBS: None}, _eph_claim("abc-xyz", owned=True)).is_success  # unbound
    st = _run(EPH, ["running", "csiEBSTwoVol"], {EBS: 2}, _eph_claim("abc-xyz", owned=True))
    assert st.reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)


def test_existing_pods_ephemeral_volumes_count() -> None:
    w = World(node("node-1"), *_objects(), csinode("node-1", {EBS: 2}))
    for name in ("x", "y"):
        w.add(_eph_claim(f"other-{name}", owned=True, pod="other", uid="uid-other"))
    eph = [{"name": n, "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "csi-sc"}}}} for n in "xy"]
    w.add(pod_raw("other", eph, ns=NS, node_name="node-1", uid="uid-other"))
    pod = make_pod("abc", PODS["csiEBSOneVol"], ns=NS)
    pl = NodeVolumeLimits()
    state = w.state()
    assert pl.pre_filter(state, pod)[1].is_success
    assert pl.filter(state, pod, w.node_info(state, "node-1")).reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)


def test_prefilter_skips_pods_without_counted_volumes() -> None:
    only_cm = [{"name": "cm", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "y"}}]
    assert _run(only_cm, [], {EBS: 2}).code == Code.SKIP
    assert _run([*only_cm, *PODS["csiEBSOneVol"]], [], {EBS: 2}).is_success  # don't skip with pvcs
    assert _run([{"name": "c", "csi": {"driver": EBS}}], [], {EBS: 0}).code == Code.SKIP  # CSI inline: not counted


def test_new_pod_missing_claim_is_unresolvable() -> None:
    st = _run(_claims("nope"), [], {EBS: 2})
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ('looking up PVC test/nope: persistentvolumeclaim "nope" not found',)
    # an existing pod's missing claim is not counted
    assert _run("csiEBSOneVol", ["missingPV"], {EBS: 1}, storage_class("x", EBS)).code != Code.ERROR


def test_driver_not_installed_when_csidriver_requires_it() -> None:
    st = _run("csiEBSOneVol", [], {GCE: 5}, csidriver(EBS, prevent_if_missing=True))
    assert st.code == Code.UNSCHEDULABLE and st.reasons == (f"{EBS} CSI driver is not installed on the node",)
    assert _run("csiEBSOneVol", [], None, csidriver(EBS, prevent_if_missing=True)).reasons == (
        f"{EBS} CSI driver is not installed on the node",
    )
    assert _run("csiEBSOneVol", [], {EBS: None}, csidriver(EBS, prevent_if_missing=True)).is_success
    assert _run("csiEBSOneVol", [], {GCE: 5}, csidriver(EBS)).is_success  # not opted in


def test_attached_volumes_memo_follows_new_objects() -> None:
    """The node's counted volumes are memoised per NodeInfo; a storage change that leaves the NodeInfo as
    it is (a claim of a pod on the node gets bound) or a changed CSINode must recompute them."""
    w = World(node("node-1"), *_objects(), csinode("node-1", {EBS: 1}))
    w.add(pod_raw("existing", _claims("no-sc"), ns=NS, node_name="node-1"))  # no class: not counted
    pod = make_pod("abc", PODS["csiEBSOneVol"], ns=NS)
    pl = NodeVolumeLimits()
    state = w.state()
    before = w.node_info(state, "node-1")
    assert pl.filter(state, pod, before).is_success  # 0 attached + 1 new <= 1
    w.update(pvc("no-sc", "1Gi", None, volume_name="csi-ebs-3-pv", bound=True, ns=NS))
    state = w.state()
    assert w.node_info(state, "node-1") is before
    assert pl.filter(state, pod, before).reasons == (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,)
    w.add(csinode("node-1", {EBS: 2}), event="MODIFIED")
    state = w.state()
    assert pl.filter(state, pod, w.node_info(state, "node-1")).is_success


def test_signature_and_events() -> None:
    pl = NodeVolumeLimits()
    state = World(node("node-1")).state()
    assert pl.sign(state, make_pod("p", PODS["csiEBSOneVol"])) is None
    assert pl.sign(state, make_pod("p", PODS["inTreeInline"])) is None
    assert pl.sign(state, make_pod("p")) == ()
    assert set(pl.events_to_register()) == {
        ("CSINode", "Add"),
        ("CSINode", "Update"),
        ("Pod", "Delete"),
        ("PersistentVolumeClaim", "Add"),
    }
    assert SPEC.points == frozenset({"preFilter", "filter"})
