"""Selector evaluation throughput of every available CEL engine (plain script, prints evals/s).

    .venv/bin/python bench/bench_cel.py [--devices N] [--repeat R]

Compiles the typical 3-clause DRA selector once, pre-builds one DeviceInput per device (what the
scheduler caches per ResourceSlice generation), warms the engine activations, then times evaluating the
selector against every device (best of R runs). Also reports the cost of building the activations and
of a SelectorCache hit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from plugins.dra.cel import SelectorCache, available_engines, get_engine
from plugins.dra.cel_engine import DeviceInput, device_input
from scheduler.api.quantity import parse_quantity
from scheduler.api.semver import parse as parse_semver

SELECTOR = (
    'device.driver == "gpu.nvidia.com" && '
    'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB" && '
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
)
PRODUCTS = [
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA L4",
    "NVIDIA T4",
]
MEMORY = ["80Gi", "40Gi", "80Gi", "24Gi", "16Gi"]


def make_devices(n: int) -> list[DeviceInput]:
    devices = []
    for i in range(n):
        k = i % len(PRODUCTS)
        driver = "other.example.com" if i % 50 == 49 else "gpu.nvidia.com"
        devices.append(
            device_input(
                driver,
                {
                    "productName": PRODUCTS[k],
                    "index": i % 8,
                    "uuid": f"GPU-{i:08d}",
                    "driverVersion": parse_semver("550.54.15"),
                    "resource.kubernetes.io/pcieRoot": f"pci0000:{i % 4:02x}",
                },
                {"memory": parse_quantity(MEMORY[k]), "multiprocessors": parse_quantity("108")},
            )
        )
    return devices


def bench_engine(name: str, n: int, repeat: int) -> None:
    engine = get_engine(name)
    program = engine.compile(SELECTOR)
    devices = make_devices(n)
    t0 = time.perf_counter()
    matched = sum(program.matches(d) for d in devices)  # first pass also builds the activations
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for d in devices:
            program.matches(d)
        best = min(best, time.perf_counter() - t0)
    print(
        f"{name:16s} {n / best:12,.0f} evals/s  ({best * 1e6 / n:6.2f} us/eval; first pass incl. activation "
        f"build {first * 1e6 / n:7.2f} us/device; matched {matched}/{n})"
    )
    cache = SelectorCache(engine)
    keys = [(f"slice-{i // 8}", 1, f"gpu-{i % 8}") for i in range(n)]
    for key, d in zip(keys, devices, strict=True):
        cache.matches(SELECTOR, key, d)
    t0 = time.perf_counter()
    for key, d in zip(keys, devices, strict=True):
        cache.matches(SELECTOR, key, d)
    hit = time.perf_counter() - t0
    print(f"{'':16s} {n / hit:12,.0f} cache hits/s (SelectorCache, stats {cache.stats})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"selector: {SELECTOR}")
    for name in available_engines():
        n = args.devices if name == "cel-expr-python" else max(1, args.devices // 10)
        bench_engine(name, n, args.repeat)


if __name__ == "__main__":
    main()
