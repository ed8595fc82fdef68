"""Shared fixtures of the fast tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from tests.fake_apiserver import FakeAPIServer


@pytest.fixture
async def server() -> AsyncIterator[FakeAPIServer]:
    """An in-process fake API server, started for one test."""
    s = FakeAPIServer()
    await s.start()
    yield s
    await s.stop()


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Callable[[], Any]]:
    """The event loops a test runs on: the standard loop, and uvloop too for the modules that set
    ``EVENT_LOOPS = ("asyncio", "uvloop")`` -- the HTTP client and server code, which ``run`` drives on uvloop
    (scheduler.cli.event_loop_factory) and whose transports differ between the two loops."""
    factories: dict[str, Callable[[], Any]] = {"asyncio": asyncio.new_event_loop}
    module = getattr(item, "module", None)
    if "uvloop" in getattr(module, "EVENT_LOOPS", ()):
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories
