"""Small hooks through which the engine talks to plugins outside the scheduling cycle's extension points.

Like the extension points of :mod:`scheduler.framework.interface`, each hook is a runtime-checkable protocol
that the engine discovers with ``isinstance`` over a profile's plugin instances (``Framework.instances``), so
the engine never names a plugin class (ARCHITECTURE.md §2: nothing in scheduler/ imports plugins/). They have
no counterpart in upstream's ``pkg/scheduler/framework/interface.go``: they serve ``simulate``.

* :class:`BindingClockAware`: a plugin whose binding cycle waits on time (DynamicResources' PreBind wait for
  device binding conditions, KEP-5007) reads its clock from ``binding_clock``; ``simulate`` gives it the
  fake clock (:func:`use_binding_clock`, :func:`fake_binding_clock`), live runs keep :data:`REAL_CLOCK`.
* :class:`DeviceExplainer`: a plugin that can say how a set of devices on a node is connected
  (GpuTopology: ``gpu-0..3 NV18 all-pairs, NUMA 0``), for ``simulate``'s placement table.
* :class:`InputValidator`: a plugin that knows why the API server would refuse an object at creation, where
  only the plugin's library can tell (DynamicResources: a CEL selector that does not compile), for
  ``simulate``, which plays the API server for its input (:func:`input_validators`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scheduler.cache.cache import Snapshot
    from scheduler.framework.runtime import Framework

# (driver, pool, device), as in a claim's ``status.allocation.devices.results``
DeviceID = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class BindingClock:
    """Time for a binding cycle's waits: ``monotonic`` for a wait's own deadline, ``wall`` (seconds since the
    epoch) for timestamps written to the API (``allocationTimestamp``) and timeouts counted from them,
    ``sleep`` between polls."""

    monotonic: Callable[[], float]
    wall: Callable[[], float]
    sleep: Callable[[float], Awaitable[None]]


REAL_CLOCK = BindingClock(time.monotonic, time.time, asyncio.sleep)


class ManualClock(Protocol):
    """A clock a test or ``simulate`` moves by hand (``scheduler.simulate.simulation.FakeClock``)."""

    def now(self) -> float: ...

    def advance(self, seconds: float) -> None: ...


def fake_binding_clock(clock: ManualClock, epoch: float) -> BindingClock:
    """A clock a test or ``simulate`` moves: sleeping advances ``clock`` and yields once to the event loop
    (so tasks playing a DRA driver can write in between); the wall clock is ``epoch + clock.now()``."""

    async def sleep(seconds: float) -> None:
        clock.advance(max(0.0, seconds))
        await asyncio.sleep(0)

    return BindingClock(clock.now, lambda: epoch + clock.now(), sleep)


@runtime_checkable
class BindingClockAware(Protocol):
    """A plugin whose binding cycle reads time from ``binding_clock`` (implemented by DynamicResources)."""

    binding_clock: BindingClock


class Profiles(Protocol):
    """What the hooks read of a scheduler (:class:`scheduler.loop.scheduler.Scheduler`): its frameworks by
    scheduler name."""

    @property
    def profiles(self) -> Mapping[str, Framework]: ...


def use_binding_clock(scheduler: Profiles, clock: BindingClock) -> None:
    """Give every plugin of every profile of ``scheduler`` that reads a binding clock this one (``simulate``:
    its fake clock)."""
    for fw in scheduler.profiles.values():
        for inst in fw.instances.values():
            if isinstance(inst, BindingClockAware):
                inst.binding_clock = clock


@runtime_checkable
class DeviceExplainer(Protocol):
    """A plugin that describes how ``devices`` of ``node`` are connected, or ``""`` when it has nothing to say
    (implemented by GpuTopology)."""

    def explain_devices(self, snap: Snapshot, node: str, devices: Sequence[DeviceID]) -> str: ...


def device_explainers(scheduler: Profiles) -> dict[str, list[DeviceExplainer]]:
    """Scheduler name -> the plugins of that profile that explain devices, in the profile's order."""
    out: dict[str, list[DeviceExplainer]] = {}
    for name, fw in scheduler.profiles.items():
        found = [inst for inst in fw.instances.values() if isinstance(inst, DeviceExplainer)]
        if found:
            out[name] = found
    return out


@runtime_checkable
class InputValidator(Protocol):
    """A plugin that refuses an object as the API server's validation would at creation: each problem as
    ``<field path>: <message>``, ``[]`` for an object it has nothing against (any kind may be passed)."""

    def validate_input(self, obj: Mapping[str, Any]) -> list[str]: ...


def input_validators(scheduler: Profiles) -> list[InputValidator]:
    """The plugins of all profiles that validate input, one per plugin class (profiles configure the same
    plugin alike for what the API server would refuse)."""
    out: dict[type, InputValidator] = {}
    for fw in scheduler.profiles.values():
        for inst in fw.instances.values():
            if isinstance(inst, InputValidator):
                out.setdefault(type(inst), inst)
    return list(out.values())
