"""VolumeRestrictions: upstream's cases (kube-scheduler v1.37.2 ``volumerestrictions/volume_restrictions_test.go``
TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts,
TestAccessModeConflicts), plus read-only sharing and the RBD pool default."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    SPEC,
    VolumeRestrictions,
)
from scheduler.framework.interface import Code
from tests.volume_fixtures import Obj, World, claim_volume, make_pod, node, pod_raw, pvc

GCE = {"gcePersistentDisk": {"pdName": "foo"}}
GCE2 = {"gcePersistentDisk": {"pdName": "bar"}}
AWS = {"awsElasticBlockStore": {"volumeID": "foo"}}
AWS2 = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}}
ISCSI2 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}}


def _vol(src: dict[str, Any], read_only: bool = False, name: str = "v") -> Obj:
    kind, body = next(iter(src.items()))
    body = dict(body)
    if read_only:
        body["readOnly"] = True
    return {"name": name, kind: body}


def _run(pod_vols: list[Obj], existing: list[list[Obj]], *objs: Obj) -> tuple[Any, Any]:
    w = World(node("node-1"), *objs)
    for i, vols in enumerate(existing):
        w.add(pod_raw(f"existing-{i}", vols, node_name="node-1"))
    pl = VolumeRestrictions()
    state = w.state()
    pod = make_pod("pod", pod_vols)
    _, pre = pl.pre_filter(state, pod)
    if not pre.is_success:
        return pre, None
    return pre, pl.filter(state, pod, w.node_info(state, "node-1"))


@pytest.mark.parametrize(("same", "other"), [(GCE, GCE2), (AWS, AWS2), (RBD, RBD2), (ISCSI, ISCSI2)])
def test_disk_conflicts(same: dict[str, Any], other: dict[str, Any]) -> None:
    pre, _ = _run([], [])  # nothing
    assert pre.code == Code.SKIP
    pre, _ = _run([], [[_vol(same)]])  # one state: the pod has no volume
    assert pre.code == Code.SKIP
    pre, st = _run([_vol(same)], [[_vol(same)]])  # same state
    assert pre.is_success and st.code == Code.UNSCHEDULABLE and st.reasons == (ERR_REASON_DISK_CONFLICT,)
    pre, st = _run([_vol(other)], [[_vol(same)]])  # different state
    assert pre.is_success and st.is_success


def test_volume_without_restrictions_is_skipped() -> None:
    pre, _ = _run([{"name": "v", "hostPath": {"path": "/tmp"}}], [])
    assert pre.code == Code.SKIP


@pytest.mark.parametrize("src", [GCE, ISCSI, RBD])
def test_read_only_sharing_allowed_only_when_both_read_only(src: dict[str, Any]) -> None:
    _, st = _run([_vol(src, read_only=True)], [[_vol(src, read_only=True)]])
    assert st.is_success
    _, st = _run([_vol(src, read_only=True)], [[_vol(src)]])
    assert st.reasons == (ERR_REASON_DISK_CONFLICT,)
    _, st = _run([_vol(src)], [[_vol(src, read_only=True)]])
    assert st.reasons == (ERR_REASON_DISK_CONFLICT,)


def test_aws_conflicts_even_read_only() -> None:
    _, st = _run([_vol(AWS, read_only=True)], [[_vol(AWS, read_only=True)]])
    assert st.reasons == (ERR_REASON_DISK_CONFLICT,)


def test_rbd_needs_same_pool_and_pool_defaults_to_rbd() -> None:
    a = {"rbd": {"monitors": ["a"], "image": "img"}}
    b = {"rbd": {"monitors": ["a", "z"], "pool": "rbd", "image": "img"}}
    c = {"rbd": {"monitors": ["a"], "pool": "other", "image": "img"}}
    _, st = _run([_vol(a)], [[_vol(b)]])
    assert st.reasons == (ERR_REASON_DISK_CONFLICT,)
    _, st = _run([_vol(a)], [[_vol(c)]])
    assert st.is_success


def _rwop(name: str) -> Obj:
    return pvc(name, None, None, modes=["ReadWriteOncePod"])


def test_access_mode_conflicts() -> None:
    rwop1, rwop2, rwx = (
        _rwop("claim-with-rwop-1"),
        _rwop("claim-with-rwop-2"),
        pvc("claim-with-rwx", None, None, modes=["ReadWriteMany"]),
    )
    one = [claim_volume("claim-with-rwop-1")]
    # nothing
    pre, _ = _run([], [], rwop1, rwop2, rwx)
    assert pre.code == Code.SKIP
    # failed to get PVC
    pre, _ = _run(one, [])
    assert pre.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre.reasons == ('persistentvolumeclaim "claim-with-rwop-1" not found',)
    # no access mode conflict: nobody else uses the claim
    pre, _ = _run(one, [[claim_volume("claim-with-rwx")]], rwop1, rwop2, rwx)
    assert pre.code == Code.SKIP
    # access mode conflict, unschedulable (preemption may help)
    pre, st = _run(one, [one, [claim_volume("claim-with-rwx")]], rwop1, rwop2, rwx)
    assert pre.is_success and st.code == Code.UNSCHEDULABLE and st.reasons == (ERR_REASON_RWOP_CONFLICT,)
    # two conflicts
    two = [claim_volume("claim-with-rwop-1"), claim_volume("claim-with-rwop-2")]
    pre, st = _run(two, [two, [claim_volume("claim-with-rwx")]], rwop1, rwop2, rwx)
    assert st.reasons == (ERR_REASON_RWOP_CONFLICT,)


def test_rwop_claim_used_on_another_node_rejects_every_node() -> None:
    w = World(node("node-1"), node("node-2"), _rwop("c"))
    w.add(pod_raw("holder", [claim_volume("c")], node_name="node-2"))
    pl = VolumeRestrictions()
    state = w.state()
    pod = make_pod("pod", [claim_volume("c")])
    assert pl.pre_filter(state, pod)[1].is_success
    assert pl.filter(state, pod, w.node_info(state, "node-1")).reasons == (ERR_REASON_RWOP_CONFLICT,)
    # same claim name in another namespace is a different claim
    w2 = World(node("node-1"), _rwop("c"))
    w2.add(pod_raw("holder", [claim_volume("c")], node_name="node-1", ns="other"))
    assert VolumeRestrictions().pre_filter(w2.state(), pod)[1].code == Code.SKIP


def test_signature_and_events() -> None:
    pl = VolumeRestrictions()
    state = World(node("node-1")).state()
    assert pl.sign(state, make_pod("p", [claim_volume("c")])) is None
    assert pl.sign(state, make_pod("p", [_vol(GCE)])) != pl.sign(state, make_pod("p", [_vol(GCE2)]))
    assert pl.sign(state, make_pod("p", [_vol(GCE)])) == pl.sign(state, make_pod("q", [_vol(GCE)]))
    assert set(pl.events_to_register()) == {("Pod", "Delete"), ("Node", "Add"), ("PersistentVolumeClaim", "Add")}
    assert SPEC.points == frozenset({"preFilter", "filter"})


def test_prefilter_extensions_track_the_rwop_holder() -> None:
    """Preemption's dry run: removing the pod that holds the ReadWriteOncePod claim lifts the conflict;
    adding it back (or a pod of another namespace) behaves accordingly; the PreFilter state is not modified."""
    w = World(node("node-1"), _rwop("c"))
    w.add(pod_raw("holder", [claim_volume("c")], node_name="node-1"))
    pl = VolumeRestrictions()
    state = w.state()
    pod = make_pod("pod", [claim_volume("c")])
    assert pl.pre_filter(state, pod)[1].is_success
    original = state.read("VolumeRestrictions")
    ni = w.node_info(state, "node-1")
    holder = ni.pod_list[0]
    assert pl.remove_pod(state, pod, holder, ni).is_success
    assert pl.filter(state, pod, ni).is_success
    assert original.conflicting == 1  # a new state object was written
    other_ns = make_pod("holder", [claim_volume("c")], ns="other")
    assert pl.add_pod(state, pod, other_ns, ni).is_success
    assert pl.filter(state, pod, ni).is_success
    assert pl.add_pod(state, pod, holder, ni).is_success
    assert pl.filter(state, pod, ni).reasons == (ERR_REASON_RWOP_CONFLICT,)
    # a skipped PreFilter (no restrictions, no conflict): the extensions do nothing
    skipped = World(node("node-1")).state()
    assert pl.add_pod(skipped, make_pod("x"), holder, ni).is_success
