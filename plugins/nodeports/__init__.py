"""NodePorts: the pod's host ports must be free on the node.

kube-scheduler v1.37.2 (``pkg/scheduler/framework/plugins/nodeports/node_ports.go``,
``pkg/scheduler/util/utils.go`` ``GetHostPorts``, ``k8s.io/kube-scheduler/framework/types.go``
``HostPortInfo``):

* The ports a pod wants (``GetHostPorts``): every ``ports[]`` entry with ``hostPort > 0`` of the regular
  containers and of the *restartable* init containers (sidecars, ``restartPolicy: Always``); a plain init
  container has finished before the pod runs, so its host ports are not counted. ``protocol`` defaults
  to ``TCP`` and ``hostIP`` to ``0.0.0.0``.
* ``spec.hostNetwork: true``: the API server's defaulting (``pkg/apis/core/v1/defaults.go``
  ``defaultHostNetworkPorts``) sets ``hostPort = containerPort`` on every container and init container
  port whose ``hostPort`` is 0; pods read from a file (``simulate``) may not have been defaulted, so the
  same is done here when parsing.
* The ports used on a node: the same list for every pod on it (``NodeInfo.UsedPorts``), cached per
  (immutable) NodeInfo in ``NodeInfo.memo``.
* Conflict (``HostPortInfo.CheckConflict``): a wanted ``(ip, protocol, port)`` conflicts when a used entry
  has the same protocol and port and either the same ip, or one of the two ips is ``0.0.0.0`` (binding
  to all addresses collides with every address).
* PreFilter: Skip when the pod wants no host port. Filter: ``Unschedulable`` (preemption may free the
  port) ``node(s) didn't have free ports for the requested pod ports``.
* Events that may make a rejected pod schedulable: an assigned pod deleted, a node added (pod updates
  cannot change ports). QueueingHint for the deletion (``isSchedulableAfterPodDeleted``): only a pod that was
  assigned or nominated and held a host port that conflicts with one the waiting pod wants; a node added always
  queues (no hint upstream).

Reuse between equal pods (upstream's ``SignPod`` with ``HostPortsSigner``): the result depends on the
pod's wanted ports and the node's pods, which are part of its NodeInfo, so the wanted ports are the
signature.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, PreFilterResult, QueueingHint, QueueingHintFn, Status
from scheduler.framework.nominator import status_nominated_node

if TYPE_CHECKING:
    from scheduler.api.model import Pod
    from scheduler.cache.cache import NodeInfo

NAME = "NodePorts"
_PRE_FILTER_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    ip: str
    protocol: str
    port: int


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _container_host_ports(c: Mapping[str, Any], host_network: bool) -> list[HostPort]:
    out = []
    for p in c.get("ports") or ():
        if not isinstance(p, Mapping):
            continue
        port = _int(p.get("hostPort"))
        if port == 0 and host_network:
            port = _int(p.get("containerPort"))
        if port <= 0:
            continue
        out.append(
            HostPort(str(p.get("hostIP") or DEFAULT_BIND_ALL_HOST_IP), str(p.get("protocol") or DEFAULT_PROTOCOL), port)
        )
    return out


def host_ports_of_spec(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """``GetHostPorts`` over a raw pod spec (sidecar init containers first, then containers)."""
    host_network = spec.get("hostNetwork") is True
    out: list[HostPort] = []
    for c in spec.get("initContainers") or ():
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            out += _container_host_ports(c, host_network)
    for c in spec.get("containers") or ():
        if isinstance(c, Mapping):
            out += _container_host_ports(c, host_network)
    return tuple(out)


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The pod's host ports, parsed once per Pod object."""
    ports: tuple[HostPort, ...] | None = pod.memo.get(NAME)
    if ports is None:
        spec = pod.raw.get("spec")
        ports = pod.memo[NAME] = host_ports_of_spec(spec if isinstance(spec, Mapping) else {})
    return ports


UsedPorts = Mapping[str, frozenset[tuple[str, int]]]  # host ip -> {(protocol, port)}


def used_ports_of(pods: Sequence[Pod]) -> UsedPorts:
    used: dict[str, set[tuple[str, int]]] = {}
    for p in pods:
        for hp in host_ports(p):
            used.setdefault(hp.ip, set()).add((hp.protocol, hp.port))
    return {ip: frozenset(s) for ip, s in used.items()}


def used_ports(node: NodeInfo) -> UsedPorts:
    """``NodeInfo.UsedPorts``, computed once per NodeInfo (which is immutable)."""
    used: UsedPorts | None = node.memo.get(NAME)
    if used is None:
        used = node.memo[NAME] = used_ports_of(node.pod_list)
    return used


def conflicts(want: HostPort, used: UsedPorts) -> bool:
    """``HostPortInfo.CheckConflict``."""
    pp = (want.protocol, want.port)
    if want.ip == DEFAULT_BIND_ALL_HOST_IP:
        return any(pp in s for s in used.values())
    for ip in (DEFAULT_BIND_ALL_HOST_IP, want.ip):
        s = used.get(ip)
        if s is not None and pp in s:
            return True
    return False


def fits_ports(want: Sequence[HostPort], used: UsedPorts) -> bool:
    return not any(conflicts(w, used) for w in want)


def fits(pod: Pod, node: NodeInfo) -> bool:
    """Upstream ``nodeports.Fits``: no host port of ``pod`` is in use on ``node``."""
    want = host_ports(pod)
    return not want or fits_ports(want, used_ports(node))


class NodePorts:
    name: ClassVar[str] = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        del args

    def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        want = host_ports(pod)
        if not want:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, want)
        return None, Status.ok()

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        want: tuple[HostPort, ...] | None = state.read(_PRE_FILTER_KEY)
        if want is None:  # PreFilter not run (a config enabling only Filter): same answer from the pod
            want = host_ports(pod)
        if not want or fits_ports(want, used_ports(node)):
            return Status.ok()
        return Status.unschedulable(ERR_REASON)

    def sign(self, state: CycleState, pod: Pod) -> Hashable:
        return tuple(sorted(set(host_ports(pod))))

    def events_to_register(self) -> Sequence[tuple[str, str]]:
        # An assigned pod deleted frees its ports; a new node has all ports free.
        return (("Pod", "Delete"), ("Node", "Add"))

    def queueing_hints(self) -> Mapping[tuple[str, str], QueueingHintFn]:
        return {("Pod", "Delete"): self.hint_pod_deleted}

    def hint_pod_deleted(self, pod: Pod, old: Pod | None, new: Pod | None) -> QueueingHint:
        """upstream ``isSchedulableAfterPodDeleted`` (node_ports.go): skip a deleted pod that was neither assigned
        nor nominated, one with no host port, and one none of whose ports conflicts with a port the waiting pod
        wants (``HostPortInfo.CheckConflict``); queue otherwise."""
        del new
        if old is None:
            return QueueingHint.QUEUE
        if not old.node_name and not status_nominated_node(old):
            return QueueingHint.SKIP
        freed = host_ports(old)
        if not freed:
            return QueueingHint.SKIP
        used = used_ports_of([old])
        return QueueingHint.QUEUE if any(conflicts(w, used) for w in host_ports(pod)) else QueueingHint.SKIP


SPEC = PluginSpec(
    name=NAME,
    factory=NodePorts,
    points=frozenset({"preFilter", "filter"}),
    validate_args=no_args,
)

__all__ = [
    "DEFAULT_BIND_ALL_HOST_IP",
    "ERR_REASON",
    "NAME",
    "SPEC",
    "HostPort",
    "NodePorts",
    "conflicts",
    "fits",
    "fits_ports",
    "host_ports",
    "host_ports_of_spec",
    "used_ports",
]
