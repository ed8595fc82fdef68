"""Nothing silently ignored (issue #9 item 3, ARCHITECTURE §1 "A pod field the scheduler cannot honour makes
the pod Unschedulable with a message naming the field").

* a pod spec field outside k8s.io/api v0.37.2 core/v1.PodSpec, or a v1beta1 PodGroup field whose semantics
  are not implemented, rejects the pod (UnschedulableAndUnresolvable) with the field's path in the message;
* the per-node filter result reused between pods with equal signatures (upstream's opportunistic batching)
  must not put another pod's objects (its generated claim's name) into a pod's Unschedulable message;
* every pod left pending carries PodScheduled=False with a reason and a message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.fleet import scale_fleet
from scheduler.simulate.simulation import simulate

Obj = dict[str, Any]


def _node(name: str, **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def _pod(name: str, spec: Obj | None = None, labels: Obj | None = None, ns: str = "default") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"schedulerName": "dra-scheduler", "containers": [{"name": "c", "image": "busybox"}], **(spec or {})},
    }


def _run(objs: list[Obj]) -> dict[str, Obj]:
    res = asyncio.run(simulate(objs))
    return {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}


def _condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def test_unknown_pod_spec_field_is_named_and_pod_not_placed() -> None:
    pods = _run([_node("n1"), _pod("future", {"fancyPlacement": {"mode": "strict"}}), _pod("plain")])
    assert not pods["future"]["spec"].get("nodeName")
    cond = _condition(pods["future"])
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "spec.fancyPlacement" in cond["message"]
    assert pods["plain"]["spec"]["nodeName"] == "n1"  # the guard rejects only what it must


def test_unknown_affinity_kind_is_named() -> None:
    pods = _run([_node("n1"), _pod("p", {"affinity": {"gpuAffinity": {}}})])
    cond = _condition(pods["p"])
    assert cond is not None and "spec.affinity.gpuAffinity" in cond["message"]


def test_every_known_field_is_accepted() -> None:
    """Fields that do not influence placement are accepted (a guard that rejects them would be wrong too)."""
    spec = {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "securityContext": {"runAsNonRoot": True},
        "enableServiceLinks": False,
        "hostname": "h",
        "readinessGates": [],
        "os": {"name": "linux"},
        "terminationGracePeriodSeconds": 5,
        "evictionResponders": [],
    }
    pods = _run([_node("n1"), _pod("p", spec)])
    assert pods["p"]["spec"]["nodeName"] == "n1"


def _v1beta1_group(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec},
    }


def test_unimplemented_podgroup_field_is_named_for_every_member(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard stays for PodGroup fields not implemented yet (the list is data; issue #11 emptied it)."""
    import plugins.fieldguard as fieldguard

    monkeypatch.setattr(fieldguard, "UNSUPPORTED_PODGROUP_FIELDS", {"futureField": "a future feature"})
    group = _v1beta1_group("g", futureField={"x": 1})
    members = [_pod(f"m{i}", {"schedulingGroup": {"podGroupName": "g"}}) for i in range(2)]
    pods = _run([_node("n1"), _node("n2"), group, *members])
    for name in ("m0", "m1"):
        assert not pods[name]["spec"].get("nodeName"), name
        cond = _condition(pods[name])
        assert cond is not None and cond["status"] == "False", name
        assert "spec.futureField" in cond["message"], cond


def test_podgroup_fields_of_issue_11_are_honoured_not_refused() -> None:
    """schedulingConstraints, resourceClaims and parentCompositePodGroupName are implemented now: the guard no
    longer refuses them, and the topology key is honoured (both members on the only node with the rack label)."""
    import plugins.fieldguard as fieldguard

    assert not {"schedulingConstraints", "resourceClaims", "parentCompositePodGroupName"} & set(
        fieldguard.UNSUPPORTED_PODGROUP_FIELDS
    )
    group = _v1beta1_group("g", schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]})
    members = [_pod(f"m{i}", {"schedulingGroup": {"podGroupName": "g"}}) for i in range(2)]
    pods = _run([_node("n1", **{"topology.kubernetes.io/rack": "r1"}), _node("n2"), group, *members])
    assert {pods[n]["spec"].get("nodeName") for n in ("m0", "m1")} == {"n1"}


def test_reused_filter_status_names_the_pods_own_claim() -> None:
    """Two equal template-claim pods that do not fit: the second reuses the first's per-node rejections,
    but its message must name its own generated claim, never the first pod's."""
    objs: list[Obj] = scale_fleet(2, 8)
    objs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "sixteen", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 16}}]
                    }
                }
            },
        }
    )
    for name in ("big-a", "big-b"):
        objs.append(_pod(name, {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "sixteen"}]}))
    res = asyncio.run(simulate(objs))
    pods = {o["metadata"]["name"]: o for o in res.items if o["kind"] == "Pod"}
    for name, other in (("big-a", "big-b"), ("big-b", "big-a")):
        cond = _condition(pods[name])
        assert cond is not None and cond["reason"] == "Unschedulable", name
        own = pods[name]["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        theirs = pods[other]["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert own in cond["message"], cond["message"]
        assert theirs not in cond["message"], cond["message"]


def test_every_pending_pod_has_a_podscheduled_condition() -> None:
    objs = [
        _node("n1"),
        _pod("fits"),
        _pod("too-big", {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100"}}}]}),
        _pod("selector", {"nodeSelector": {"nowhere": "true"}}),
        _pod("future", {"fancyPlacement": {}}),
        _pod("missing-claim", {"resourceClaims": [{"name": "c", "resourceClaimName": "does-not-exist"}]}),
    ]
    pods = _run(objs)
    assert pods["fits"]["spec"]["nodeName"] == "n1"
    for name, pod in pods.items():
        if pod["spec"].get("nodeName"):
            continue
        cond = _condition(pod)
        assert cond is not None, f"{name} pending without PodScheduled condition"
        assert cond["status"] == "False" and cond["reason"] in ("Unschedulable", "SchedulerError"), name
        assert cond["message"], name


# --- admission in simulate: PriorityClass -> spec.priority (ARCHITECTURE §3.2) ---------------------------------


def _pc(name: str, value: int, **extra: Any) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **extra}


def test_priority_class_resolved_as_admission_does() -> None:
    """plugin/pkg/admission/priority: the class's value and preemptionPolicy; globalDefault for pods
    without a class; the built-in system classes; an unknown class is refused like the API server does."""
    import pytest

    from scheduler.simulate.simulation import InputError, admit_priorities

    objs = [
        _pc("high", 1000, preemptionPolicy="Never"),
        _pc("default-prio", 7, globalDefault=True),
        _pod("a", {"priorityClassName": "high"}),
        _pod("b"),
        _pod("c", {"priorityClassName": "system-node-critical"}),
    ]
    admit_priorities(objs)
    specs = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Pod"}
    assert (specs["a"]["priority"], specs["a"]["preemptionPolicy"]) == (1000, "Never")
    assert (specs["b"]["priority"], specs["b"]["priorityClassName"]) == (7, "default-prio")
    assert specs["c"]["priority"] == 2_000_001_000
    with pytest.raises(InputError, match="no PriorityClass with name missing"):
        admit_priorities([_pod("d", {"priorityClassName": "missing"})])
    with pytest.raises(InputError, match="must not be provided"):
        admit_priorities([_pc("high", 1000), _pod("e", {"priorityClassName": "high", "priority": 5})])


def test_higher_priority_pod_is_scheduled_first() -> None:
    """PrioritySort: with room for one pod, the pod of the higher PriorityClass gets it."""
    big = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "6"}}}]}
    pods = _run([
        _node("n1"),
        _pc("high", 1000),
        _pod("low", dict(big)),
        _pod("high", {**big, "priorityClassName": "high"}),
    ])
    assert pods["high"]["spec"].get("nodeName") == "n1"
    assert not pods["low"]["spec"].get("nodeName")


# --- gangs: members left pending say why (issue #9 item 3) -------------------------------------------------


def _xk8s_group(name: str, min_member: int) -> Obj:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


def _cpu_pod(name: str, cpu: str, group: str) -> Obj:
    return _pod(name, {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
                labels={"scheduling.x-k8s.io/pod-group": group})


def test_members_beyond_min_member_that_do_not_fit_say_why() -> None:
    """minMember 2 of 4 members, room for 3: the group is placed (3 bound) and the 4th member, left over,
    carries PodScheduled=False with a reason instead of nothing."""
    pods = _run([_node("n1"), _xk8s_group("g", 2), *[_cpu_pod(f"m{i}", "2500m", "g") for i in range(4)]])
    bound = [n for n, p in pods.items() if p["spec"].get("nodeName")]
    assert len(bound) == 3, bound
    for name, pod in pods.items():
        if pod["spec"].get("nodeName"):
            continue
        cond = _condition(pod)
        assert cond is not None and cond["status"] == "False", f"{name}: {pod.get('status')}"
        assert cond["reason"] == "Unschedulable" and "cpu" in cond["message"], cond


def test_gang_that_cannot_be_placed_marks_every_member() -> None:
    pods = _run([_node("n1"), _xk8s_group("g", 3), *[_cpu_pod(f"m{i}", "3", "g") for i in range(3)]])
    for name, pod in pods.items():
        assert not pod["spec"].get("nodeName"), name
        cond = _condition(pod)
        assert cond is not None and cond["status"] == "False" and cond["message"], f"{name}: {pod.get('status')}"
