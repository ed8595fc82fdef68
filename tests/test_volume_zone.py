"""VolumeZone: upstream's cases (kube-scheduler v1.37.2 ``volumezone/volume_zone_test.go`` TestSingleZone,
TestMultiZone, TestWithBinding)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.volumezone import ERR_REASON_CONFLICT, SPEC, VolumeZone
from scheduler.framework.interface import Code
from tests.volume_fixtures import Obj, World, claim_volume, make_pod, node, pv, pvc, storage_class

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def _pv(name: str, labels: dict[str, str]) -> Obj:
    return pv(name, None, labels=labels)


def _single_zone_objects() -> list[Obj]:
    return [
        _pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
        _pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
        _pv("Vol_3", {BETA_REGION: "us-west1"}),
        _pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
        _pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
        _pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
        pvc("PVC_1", None, None, volume_name="Vol_1"),
        pvc("PVC_2", None, None, volume_name="Vol_2"),
        pvc("PVC_3", None, None, volume_name="Vol_3"),
        pvc("PVC_4", None, None, volume_name="Vol_not_exist"),
        pvc("PVC_Stable_1", None, None, volume_name="Vol_Stable_1"),
        pvc("PVC_Stable_2", None, None, volume_name="Vol_Stable_2"),
        pvc("PVC_Stable_3", None, None, volume_name="Vol_Stable_3"),
    ]


def _run(objs: list[Obj], claim: str | None, labels: dict[str, str]) -> tuple[Any, Any]:
    w = World(node("host1", labels), *objs)
    pl = VolumeZone()
    state = w.state()
    pod = make_pod("pod_1", [claim_volume(claim)] if claim else [])
    _, pre = pl.pre_filter(state, pod)
    return pre, pl.filter(state, pod, w.node_info(state, "host1"))


SINGLE_ZONE: list[tuple[str, str | None, dict[str, str], bool]] = [
    ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, True),
    ("node without labels", "PVC_1", {}, True),
    ("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
    ("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, True),
    ("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"}, False),
    ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, False),
    ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, True),
    ("region label matched", "PVC_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}, True),
    ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1", "uselessLabel": "none"}, False),
    ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a", "uselessLabel": "none"}, False),
    ("pv with zone and region, node with only zone", "PVC_Stable_3", {ZONE: "us-west1-a"}, False),
    ("pv with zone,node with beta zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, False),
    ("pv with beta label,node with ga label, matched", "PVC_1", {ZONE: "us-west1-a"}, True),
    ("pv with beta label,node with ga label, don't match", "PVC_1", {ZONE: "us-west1-b"}, False),
]


@pytest.mark.parametrize(("name", "claim", "labels", "fits"), SINGLE_ZONE, ids=[c[0] for c in SINGLE_ZONE])
def test_single_zone(name: str, claim: str | None, labels: dict[str, str], fits: bool) -> None:
    pre, st = _run(_single_zone_objects(), claim, labels)
    if claim is None:
        assert pre.code == Code.SKIP
    if fits:
        assert st.is_success
    else:
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == (ERR_REASON_CONFLICT,)


def test_pv_missing_is_unresolvable() -> None:
    pre, _ = _run(_single_zone_objects(), "PVC_4", {ZONE: "a"})
    assert pre.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert pre.reasons == ('persistentvolume "Vol_not_exist" not found',)
    pre, _ = _run(_single_zone_objects(), "PVC_missing", {ZONE: "a"})
    assert pre.reasons == ('persistentvolumeclaim "PVC_missing" not found',)


def _multi_zone_objects() -> list[Obj]:
    return [
        _pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
        _pv("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
        _pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
        _pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
        _pv("Vol_Stable_2", {ZONE: "us-west1-c__us-west1-a"}),
        pvc("PVC_1", None, None, volume_name="Vol_1"),
        pvc("PVC_2", None, None, volume_name="Vol_2"),
        pvc("PVC_3", None, None, volume_name="Vol_3"),
        pvc("PVC_Stable_1", None, None, volume_name="Vol_Stable_1"),
        pvc("PVC_Stable_2", None, None, volume_name="Vol_Stable_2"),
    ]


@pytest.mark.parametrize(
    ("claim", "labels", "fits"),
    [
        ("PVC_3", {}, True),  # node without labels
        ("PVC_3", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, True),
        ("PVC_1", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}, False),
        ("PVC_Stable_2", {ZONE: "us-west1-a", "uselessLabel": "none"}, True),
        ("PVC_Stable_1", {ZONE: "us-west1-b", "uselessLabel": "none"}, False),
    ],
)
def test_multi_zone(claim: str, labels: dict[str, str], fits: bool) -> None:
    _, st = _run(_multi_zone_objects(), claim, labels)
    assert st.is_success if fits else st.reasons == (ERR_REASON_CONFLICT,)


def test_invalid_multi_zone_value_is_ignored() -> None:
    objs = [_pv("v", {ZONE: "us-west1-a__"}), pvc("c", None, None, volume_name="v")]
    pre, st = _run(objs, "c", {ZONE: "elsewhere"})
    assert pre.code == Code.SKIP and st.is_success


def _binding_objects() -> list[Obj]:
    return [
        storage_class("Class_Wait", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"),
        storage_class("Class_Immediate", "kubernetes.io/no-provisioner", "Immediate"),
        _pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
        pvc("PVC_1", None, None, volume_name="Vol_1"),
        pvc("PVC_EmptySC", None, None),
        pvc("PVC_NoSC", None, "Class_0"),
        pvc("PVC_WaitSC", None, "Class_Wait"),
        pvc("PVC_ImmediateSC", None, "Class_Immediate"),
    ]


@pytest.mark.parametrize(
    ("claim", "pre_code", "message"),
    [
        ("PVC_1", Code.SUCCESS, ""),
        (
            "PVC_EmptySC",
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "PersistentVolumeClaim had no pv name and storageClass name",
        ),
        ("PVC_NoSC", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'storageclass.storage.k8s.io "Class_0" not found'),
        # upstream's fixture class has no binding mode ("VolumeBindingMode not set"); the API server defaults
        # it to Immediate, which is what a stored class has
        ("PVC_ImmediateSC", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolume had no name"),
        ("PVC_WaitSC", Code.SKIP, ""),
    ],
)
def test_with_binding(claim: str, pre_code: Code, message: str) -> None:
    pre, st = _run(_binding_objects(), claim, {BETA_ZONE: "us-west1-a", "uselessLabel": "none"})
    assert pre.code == pre_code
    if message:
        assert pre.reasons == (message,)
        assert st.reasons == (message,)  # Filter recomputes when PreFilter did not run
    else:
        assert st.is_success


def test_wait_for_first_consumer_unbound_skipped_but_bound_one_checked() -> None:
    objs = _binding_objects()
    w = World(node("host1", {BETA_ZONE: "us-west1-b"}), *objs)
    pod = make_pod("p", [claim_volume("PVC_WaitSC"), claim_volume("PVC_1")])
    pl = VolumeZone()
    state = w.state()
    assert pl.pre_filter(state, pod)[1].is_success
    assert pl.filter(state, pod, w.node_info(state, "host1")).reasons == (ERR_REASON_CONFLICT,)


def test_ephemeral_volumes_are_not_looked_at() -> None:
    w = World(node("host1", {ZONE: "z"}))
    pod = make_pod("p", [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}])
    assert VolumeZone().pre_filter(w.state(), pod)[1].code == Code.SKIP


def test_signature_and_events() -> None:
    pl = VolumeZone()
    state = World(node("host1")).state()
    assert pl.sign(state, make_pod("p", [claim_volume("c")])) is None
    assert pl.sign(state, make_pod("p")) == ()
    assert set(pl.events_to_register()) == {
        ("StorageClass", "Add"),
        ("Node", "Add"),
        ("Node", "Update"),
        ("PersistentVolumeClaim", "Add"),
        ("PersistentVolumeClaim", "Update"),
        ("PersistentVolume", "Add"),
        ("PersistentVolume", "Update"),
    }
    assert SPEC.points == frozenset({"preFilter", "filter"})
