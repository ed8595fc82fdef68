"""Shared fixtures of the fast tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fake_apiserver import FakeAPIServer


@pytest.fixture
async def server() -> AsyncIterator[FakeAPIServer]:
    """An in-process fake API server, started for one test."""
    s = FakeAPIServer()
    await s.start()
    yield s
    await s.stop()
