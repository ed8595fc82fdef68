"""The device ledger: API view, assumed writes and in-flight reservations in one structure."""

from __future__ import annotations

from scheduler.api.dra import DeviceResult
from scheduler.cache.ledger import DeviceLedger


def res(dev: str, pool: str = "node-1", share: str = "", admin: bool = False) -> DeviceResult:
    return DeviceResult("gpu", "gpu.example.com", pool, dev, admin, share, {})


def test_reserve_then_assume_then_echo() -> None:
    led = DeviceLedger()
    led.set_pool_nodes({("gpu.example.com", "node-1"): "node-1"})
    rev0 = led.node_revision("node-1")
    led.reserve("c1", "ns/c1", (res("gpu-0"),))
    assert led.is_allocated(("gpu.example.com", "node-1", "gpu-0"))
    assert led.is_pending("c1")
    assert led.node_revision("node-1") > rev0
    led.assume("c1", "ns/c1", (res("gpu-0"),), "10")
    assert not led.is_pending("c1")
    assert led.is_allocated(("gpu.example.com", "node-1", "gpu-0"))
    # an older informer copy (before our write) must not roll the assumed allocation back
    led.observe_claim("c1", "ns/c1", None, "9")
    assert led.is_allocated(("gpu.example.com", "node-1", "gpu-0"))
    # the echo of our write (or anything newer) replaces it
    led.observe_claim("c1", "ns/c1", None, "11")
    assert not led.is_allocated(("gpu.example.com", "node-1", "gpu-0"))


def test_unreserve_restores_api_view() -> None:
    led = DeviceLedger()
    led.observe_claim("c1", "ns/c1", (res("gpu-0"),), "5")
    led.reserve("c2", "ns/c2", (res("gpu-1"),))
    led.unreserve("c2")
    assert led.is_allocated(("gpu.example.com", "node-1", "gpu-0"))
    assert not led.is_allocated(("gpu.example.com", "node-1", "gpu-1"))


def test_admin_access_results_do_not_count() -> None:
    led = DeviceLedger()
    led.observe_claim("c1", "ns/c1", (res("gpu-0", admin=True),), "5")
    assert not led.in_use(("gpu.example.com", "node-1", "gpu-0"))


def test_shares_are_tracked_per_share_id() -> None:
    led = DeviceLedger()
    dev = ("gpu.example.com", "node-1", "gpu-0")
    led.observe_claim("c1", "ns/c1", (res("gpu-0", share="a"),), "5")
    led.observe_claim("c2", "ns/c2", (res("gpu-0", share="b"),), "6")
    assert not led.is_allocated(dev) and led.has_shares(dev)
    shares = led.shared_consumption(dev)
    assert shares is not None and len(shares) == 2
    led.forget_claim("c1")
    led.forget_claim("c2")
    assert not led.in_use(dev)
    assert led.pool_devices_in_use(("gpu.example.com", "node-1")) == {}


def test_non_local_pool_bumps_shared_revision() -> None:
    led = DeviceLedger()
    led.set_pool_nodes({("net.example.com", "fabric"): ""})
    before = led.shared_revision
    led.reserve("c1", "ns/c1", (DeviceResult("x", "net.example.com", "fabric", "d0", False, "", {}),))
    assert led.shared_revision > before
