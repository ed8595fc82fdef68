"""DefaultBinder: POST the pod's Binding with the pod UID as precondition (pods/binding)."""

from __future__ import annotations

from typing import Any, ClassVar

from scheduler.api.clusterapi import ApiError, ClusterAPI
from scheduler.api.model import Pod
from scheduler.config.registry import PluginSpec, no_args
from scheduler.framework.interface import CycleState, Status


class DefaultBinder:
    name: ClassVar[str] = "DefaultBinder"

    def __init__(self, args: Any) -> None:
        del args

    async def bind(self, state: CycleState, pod: Pod, node: str, api: ClusterAPI) -> Status:
        try:
            await api.bind(pod.namespace, pod.name, pod.uid, node)
        except ApiError as e:
            return Status.error(f"binding rejected: {e}")
        return Status.ok()


SPEC = PluginSpec(name="DefaultBinder", factory=DefaultBinder, points=frozenset({"bind"}), validate_args=no_args)
