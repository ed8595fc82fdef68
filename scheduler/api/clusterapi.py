"""The one interface through which the scheduler writes to (and re-reads from) the API server.

Objects travel as raw dicts (Kubernetes JSON). Two implementations: the live client (kubernetes-asyncio,
``scheduler/kube/``) and :class:`scheduler.simulate.memapi.InMemoryAPI` used by ``simulate`` and the tests. Both
enforce optimistic concurrency: an ``update`` carrying a stale ``metadata.resourceVersion`` raises
:class:`Conflict`, and a Binding whose pod UID precondition does not match raises :class:`Conflict`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Protocol

Obj = dict[str, Any]


class ApiError(Exception):
    status = 500

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class Conflict(ApiError):
    status = 409


class NotFound(ApiError):
    status = 404


class Invalid(ApiError):
    status = 422


class ClusterAPI(Protocol):
    async def get(self, kind: str, namespace: str, name: str) -> Obj: ...

    async def create(self, kind: str, obj: Obj) -> Obj: ...

    async def update(self, kind: str, obj: Obj, subresource: str = "") -> Obj:
        """PUT ``obj``; its metadata.resourceVersion must be current (else Conflict)."""
        ...

    async def patch(self, kind: str, namespace: str, name: str, patch: Obj, subresource: str = "") -> Obj:
        """JSON merge patch (RFC 7386). ``metadata.uid`` / ``metadata.resourceVersion`` in the patch act
        as preconditions, as on the API server."""
        ...

    async def delete(self, kind: str, namespace: str, name: str) -> None: ...

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/binding with the pod UID as precondition."""
        ...

    async def event(self, obj: Obj, event_type: str, reason: str, message: str, action: str) -> None:
        """Record a core/v1 Event about ``obj`` (best effort)."""
        ...


# --- the order of the binding cycles' writes (used by the live client's rate limiter) --------------------

_WRITE_SEQUENCE: ContextVar[int | None] = ContextVar("dra_scheduler_write_sequence", default=None)
_sequence = itertools.count(1)


@contextlib.contextmanager
def pod_writes() -> Iterator[int]:
    """Mark the API requests made in this context, and in the tasks created in it, as the writes of one
    binding cycle (a pod's, or a pod group's commit) that started after every earlier one: each ``with``
    takes the next number of one process-wide sequence. The live client's rate limiter serves waiting
    requests of older binding cycles first (``scheduler.kube.flowcontrol.TokenBucket``), so that a pod's writes
    go out before the writes of pods scheduled after it. :class:`~scheduler.simulate.memapi.InMemoryAPI` ignores it.

    ``asyncio.create_task`` copies the current context: wrapping the ``create_task`` of a binding cycle
    (or its body) in ``with pod_writes():`` is all a caller does."""
    seq = next(_sequence)
    token = _WRITE_SEQUENCE.set(seq)
    try:
        yield seq
    finally:
        _WRITE_SEQUENCE.reset(token)


def write_sequence() -> int | None:
    """The binding cycle the current request belongs to (its :func:`pod_writes` number), None outside one."""
    return _WRITE_SEQUENCE.get()
