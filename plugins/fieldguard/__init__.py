"""UnsupportedFields: a pod that asks for something this scheduler does not implement is Unschedulable,
with a message naming the field, instead of being placed as if the field were not there.

kube-scheduler has no such plugin: it implements every field of its own API version. dra-scheduler replaces
kube-scheduler for whole workloads (``spec.schedulerName``), so a constraint it would silently drop is the
worst kind of bug: a wrong placement nobody is told about. The guard is a PreFilter (it runs first) that
rejects with ``UnschedulableAndUnresolvable`` (preemption cannot help) when

* the pod spec holds a field that is not in ``k8s.io/api`` v0.37.2 ``core/v1.PodSpec`` (a newer API server
  may serve fields we do not know: refuse rather than guess), or an affinity kind that is not in
  ``core/v1.Affinity``;
* the pod's ``scheduling.k8s.io/v1beta1`` PodGroup uses a field whose semantics are not implemented yet
  (``UNSUPPORTED_PODGROUP_FIELDS``).

Fields that do not influence scheduling (probes, env, security context, ...) are accepted as they are.
The lists are data: when a feature lands, its entry goes away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, PreFilterResult, Status

if TYPE_CHECKING:
    from scheduler.api.model import Pod

NAME = "UnsupportedFields"

# k8s.io/api v0.37.2 core/v1 PodSpec JSON fields (types.go, `type PodSpec struct`).
POD_SPEC_FIELDS = frozenset(
    (
        "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
        "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
        "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName", "hostNetwork",
        "hostPID", "hostIPC", "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname",
        "subdomain", "affinity", "schedulerName", "tolerations", "hostAliases", "priorityClassName",
        "priority", "dnsConfig", "readinessGates", "runtimeClassName", "enableServiceLinks",
        "preemptionPolicy", "overhead", "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers",
        "schedulingGates", "resourceClaims", "resources", "hostnameOverride", "schedulingGroup",
        "evictionResponders",
    )
)
AFFINITY_FIELDS = frozenset(("nodeAffinity", "podAffinity", "podAntiAffinity"))

# scheduling.k8s.io/v1beta1 PodGroupSpec fields whose semantics are not implemented yet: field -> why.
# Empty since issue #11: schedulingConstraints (topology), resourceClaims (DRAWorkloadResourceClaims) and
# parentCompositePodGroupName (CompositePodGroup minGroupCount) are honoured by the group cycle
# (scheduler/gang/cycle.py).
UNSUPPORTED_PODGROUP_FIELDS: Mapping[str, str] = {}


def unsupported(pod: Pod, podgroups: Mapping[str, Any]) -> str | None:
    """The first unsupported field of ``pod`` (with its path and why), or None."""
    cached = pod.memo.get(NAME, _UNSET)
    if cached is _UNSET:
        cached = pod.memo[NAME] = _pod_fields(pod)
    if cached:
        return str(cached)
    if pod.pod_group:
        pg = podgroups.get(f"{pod.namespace}/{pod.pod_group}")
        if pg is not None and str(getattr(pg, "api_version", "")).startswith("scheduling.k8s.io/"):
            spec = (getattr(pg, "raw", None) or {}).get("spec") or {}
            for f, what in UNSUPPORTED_PODGROUP_FIELDS.items():
                if spec.get(f) not in (None, [], {}, ""):
                    return (
                        f"PodGroup {pod.namespace}/{pod.pod_group}: spec.{f} ({what}) is not supported by "
                        "dra-scheduler yet; refusing to place the group without it"
                    )
    return None


_UNSET: Any = object()


def _pod_fields(pod: Pod) -> str:
    spec = pod.raw.get("spec") or {}
    for k in spec:
        if k not in POD_SPEC_FIELDS:
            return (
                f"spec.{k} is not a field of the Kubernetes 1.37.2 Pod API known to dra-scheduler; "
                "refusing to schedule the pod rather than ignore it"
            )
    aff = spec.get("affinity") or {}
    if isinstance(aff, Mapping):
        for k in aff:
            if k not in AFFINITY_FIELDS:
                return (
                    f"spec.affinity.{k} is not known to dra-scheduler; refusing to schedule the pod rather than "
                    "ignore it"
                )
    return ""


class UnsupportedFields:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        why = unsupported(pod, state.snapshot.podgroups)
        if why:
            return None, Status.unresolvable(why)
        return None, Status.skip()


SPEC = PluginSpec(name=NAME, factory=UnsupportedFields, points=frozenset({"preFilter"}), validate_args=no_args)

__all__ = ["NAME", "SPEC", "UnsupportedFields", "unsupported"]
