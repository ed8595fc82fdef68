"""Fixture generator: GPU nodes and the ResourceSlices the NVIDIA DRA driver publishes for them.

Everything here is a pure function returning raw Kubernetes JSON dicts (the shape ``kubectl get -o json``
prints), so the same fixtures feed unit tests, benchmarks and ``dra-scheduler simulate``.

    python -m bench.fleet demo                 # the demo fleet (manifests/examples/00-fleet.yaml)
    python -m bench.fleet scale 1000           # 1,000 x DGX H100 for benchmarks
    python -m bench.fleet scale 64 --sku l40s-pcie-8 -o json
    python -m bench.fleet dynamic-mig          # a DynamicMIG (partitionable devices) H100 node

Facts and where they come from (see also /work/shared/reference/driver-data.md):

* Driver ``gpu.nvidia.com``; one pool per node named after the node; classic mode = one slice per node;
  DynamicMIG on Kubernetes >= 1.35 = G+1 slices (slice 0 holds only ``sharedCounters``).
  Source: kubernetes-sigs/dra-driver-nvidia-gpu @95932046, cmd/gpu-kubelet-plugin/driver.go
  (``generateSplitResourceSlices``) and main.go.
* Device names ``gpu-<minor>`` and
  ``gpu-<parentMinor>-mig-<profile w/o dots, RFC1123>-<GI profile id>-<start>``:
  cmd/gpu-kubelet-plugin/deviceinfo.go (``CanonicalName``) and mig.go (``ToCanonicalName``).
* Attributes (``type, uuid, productName, brand, architecture, cudaComputeCapability, driverVersion,
  cudaDriverVersion, addressingMode`` + standard ``resource.kubernetes.io/{pciBusID,pcieRoot,numaNode}``),
  MIG attributes (``parentUUID, profile`` + the parent's), MIG capacities (``multiprocessors, copyEngines,
  decoders, encoders, jpegEngines, ofaEngines, memory, memorySlice<i>``): deviceinfo.go ``Attributes``,
  mig.go ``CommonAttributesMig``/``CommonCapacitiesMig``.
* DynamicMIG counters (``gpu-<minor>-counter-set``; ``multiprocessors, copy-engines, ..., memory,
  memory-slice-<i>``): cmd/gpu-kubelet-plugin/partitions.go.
* DeviceClasses: deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml (same commit).
* resource.k8s.io/v1 limits: k8s.io/api/resource/v1/types.go (ResourceSliceMaxDevices = 128,
  ResourceSliceMaxDevicesWithTaintsOrConsumesCounters = 64, ResourceSliceMaxAttributesAndCapacitiesPerDevice
  = 32, ResourceSliceMaxCounterSets = 8).
* Real PCI bus ids / NUMA placement: DGX H100 (NVIDIA/nccl#1264, vllm-project/vllm#13855), DGX A100
  (NVIDIA/nccl#1505), 4x T4 (NVIDIA/nvidia-docker#1446). PCIe root buses and the L40S layout are
  illustrative (marked [K] in driver-data.md): they follow the usual Intel/AMD root-bus numbering.
* MIG profile tables: NVIDIA MIG user guide, go-nvml mock tables, nvitop#8 (A100-80GB 2g.20gb = 19968Mi).
  H100 MIG sizes are typical ``nvidia-smi mig -lgip`` values, not checked against hardware.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import yaml

JSON = dict[str, Any]

DRIVER = "gpu.nvidia.com"
RESOURCE_API = "resource.k8s.io/v1"
TOPOLOGY_ANNOTATION = "dra-scheduler.io/device-topology"

# Node labels used for cross-node topology (outermost first). The zone label is the well-known one;
# block/rack follow the Kueue topology-aware-scheduling examples (there is no standard rack label).
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
BLOCK_LABEL = "cloud.provider.com/topology-block"
RACK_LABEL = "cloud.provider.com/topology-rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"

# resource.k8s.io/v1 limits (k8s.io/api/resource/v1/types.go).
MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_WITH_COUNTERS = 64
MAX_COUNTER_SETS_PER_SLICE = 8
MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32

STD = "resource.kubernetes.io"  # domain of the standard attributes (KEP-4381, KEP-6072)

_UUID_NS = uuid.UUID("6f1d3c2e-8a4b-4f5e-9c7d-2b1a0e9f8d7c")  # fixed namespace: deterministic UUIDs


# --------------------------------------------------------------------------------------------------
# SKU table
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile (``nvidia-smi mig -lgip`` row) of a MIG-capable GPU."""

    name: str  # "3g.40gb", "1g.10gb+me"
    gi_profile_id: int  # the ID column of -lgip: 19, 20, 15, 14, 9, 5, 0
    memory: str  # Quantity, MemorySizeMB * 2^20 bytes, e.g. "40192Mi"
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    slices: int  # memory slices occupied (placement size)
    placements: tuple[int, ...]  # possible placement starts (-lgipp)

    def capacity(self) -> dict[str, str]:
        return {
            "copyEngines": str(self.copy_engines),
            "decoders": str(self.decoders),
            "encoders": str(self.encoders),
            "jpegEngines": str(self.jpeg_engines),
            "memory": self.memory,
            "multiprocessors": str(self.multiprocessors),
            "ofaEngines": str(self.ofa_engines),
        }


def _mig(name: str, gid: int, mem: str, sm: int, ce: int, dec: int, enc: int, jpg: int, ofa: int,
         size: int, placements: tuple[int, ...]) -> MigProfile:
    return MigProfile(name, gid, mem, sm, ce, dec, enc, jpg, ofa, size, placements)


_P1 = (0, 1, 2, 3, 4, 5, 6)

# A100-SXM4-80GB / A100 80GB PCIe (driver-data.md §2.3: 98 SMs usable under MIG; memory from the go-nvml
# mock, 2g.20gb = 19968Mi confirmed on hardware in XuehaiPan/nvitop#8).
A100_80GB_MIG_PROFILES: tuple[MigProfile, ...] = (
    _mig("1g.10gb", 19, "9856Mi", 14, 1, 0, 0, 0, 0, 1, _P1),
    _mig("1g.10gb+me", 20, "9856Mi", 14, 1, 1, 0, 1, 1, 1, _P1),
    _mig("1g.20gb", 15, "19968Mi", 14, 1, 1, 0, 0, 0, 2, (0, 2, 4, 6)),
    _mig("2g.20gb", 14, "19968Mi", 28, 2, 1, 0, 0, 0, 2, (0, 2, 4)),
    _mig("3g.40gb", 9, "40192Mi", 42, 3, 2, 0, 0, 0, 4, (0, 4)),
    _mig("4g.40gb", 5, "40192Mi", 56, 4, 2, 0, 0, 0, 4, (0,)),
    _mig("7g.80gb", 0, "80384Mi", 98, 7, 5, 0, 1, 1, 8, (0,)),
)

# H100 80GB HBM3 (132 SMs; SM/engine counts as on the same-die H200, whose -lgip is in NVIDIA/mig-parted#120;
# memory sizes are the typical 9.75/19.62/39.5/79 GiB of -lgip output: approximate).
H100_80GB_MIG_PROFILES: tuple[MigProfile, ...] = (
    _mig("1g.10gb", 19, "9984Mi", 16, 1, 1, 0, 1, 0, 1, _P1),
    _mig("1g.10gb+me", 20, "9984Mi", 16, 1, 1, 0, 1, 1, 1, _P1),
    _mig("1g.20gb", 15, "20096Mi", 26, 1, 1, 0, 1, 0, 2, (0, 2, 4, 6)),
    _mig("2g.20gb", 14, "20096Mi", 32, 2, 2, 0, 2, 0, 2, (0, 2, 4)),
    _mig("3g.40gb", 9, "40448Mi", 60, 3, 3, 0, 3, 0, 4, (0, 4)),
    _mig("4g.40gb", 5, "40448Mi", 64, 4, 4, 0, 4, 0, 4, (0,)),
    _mig("7g.80gb", 0, "80896Mi", 132, 8, 7, 0, 7, 1, 8, (0,)),
)

MEMORY_SLICES = 8  # every MIG-capable GPU above has 8 memory slices


@dataclass(frozen=True)
class GpuModel:
    product_name: str  # NVML GetName(), copied verbatim into `productName`
    architecture: str  # go-nvlib names: "Hopper", "Ampere", "Ada Lovelace", "Turing"
    cuda_compute_capability: str  # semver-normalised: "9.0.0"
    memory: str  # NVML memory.total as a BinarySI quantity
    brand: str = "Nvidia"  # go-nvlib maps NVIDIA -> "Nvidia"
    addressing_mode: str | None = None  # "HMM" / "ATS" / "None"; omitted when NVML cannot tell
    nvlink: str | None = None  # topo code between NVLink peers (all-to-all), e.g. "NV18"
    mig_profiles: tuple[MigProfile, ...] = ()
    family: str = ""  # gpu-feature-discovery `nvidia.com/gpu.family`

    @property
    def gfd_product(self) -> str:
        """`nvidia.com/gpu.product` label value as gpu-feature-discovery writes it (spaces -> '-')."""
        return self.product_name.replace(" ", "-")

    def mig_profile(self, name: str) -> MigProfile:
        for p in self.mig_profiles:
            if p.name == name:
                return p
        raise KeyError(f"{self.product_name} has no MIG profile {name!r}")


H100_SXM5_80GB = GpuModel(
    product_name="NVIDIA H100 80GB HBM3", architecture="Hopper", cuda_compute_capability="9.0.0",
    memory="81559Mi", addressing_mode="HMM", nvlink="NV18", mig_profiles=H100_80GB_MIG_PROFILES,
    family="hopper",
)
A100_SXM4_80GB = GpuModel(
    product_name="NVIDIA A100-SXM4-80GB", architecture="Ampere", cuda_compute_capability="8.0.0",
    memory="80Gi", addressing_mode="None", nvlink="NV12", mig_profiles=A100_80GB_MIG_PROFILES,
    family="ampere",
)
L40S_PCIE = GpuModel(
    product_name="NVIDIA L40S", architecture="Ada Lovelace", cuda_compute_capability="8.9.0",
    memory="46068Mi", addressing_mode="HMM", family="ada-lovelace",
)
T4_PCIE = GpuModel(
    product_name="Tesla T4", architecture="Turing", cuda_compute_capability="7.5.0",
    memory="15Gi", addressing_mode="None", family="turing",
)


@dataclass(frozen=True)
class GpuSlot:
    """Where one physical GPU sits in the host: PCI address, root complex, PCIe switch, NUMA node."""

    pci_bus_id: str  # "0000:18:00.0" (lower-case extended BDF)
    pcie_root: str  # "pci0000:15"
    numa_node: int
    switch: str  # PCIe switch id; GPUs behind the same switch are PIX to each other


MigLayout = tuple[tuple[str, int], ...]  # ((profile name, placement start), ...)


@dataclass(frozen=True)
class Sku:
    name: str
    description: str
    gpu: GpuModel
    slots: tuple[GpuSlot, ...]
    cpu: str = "128"
    memory: str = "1Ti"
    pods: str = "110"
    driver_version: str = "580.95.5"  # semver-normalised "580.95.05"
    cuda_driver_version: str = "13.0.0"
    # Static MIG: GPU index -> the MIG devices created on it. Those GPUs are published only as MIG devices.
    mig_layout: tuple[tuple[int, MigLayout], ...] = ()
    # DynamicMIG (KEP-4815 partitionable devices, 1.35+ split layout): every GPU is published as the full
    # GPU plus every (profile x placement), all consuming from a per-GPU counter set.
    dynamic_mig: bool = False
    extra_labels: tuple[tuple[str, str], ...] = field(default=())

    @property
    def gpu_count(self) -> int:
        return len(self.slots)

    def mig_devices_of(self, gpu_index: int) -> MigLayout | None:
        for idx, layout in self.mig_layout:
            if idx == gpu_index:
                return layout
        return None

    def with_gpu_count(self, n: int) -> Sku:
        """The same SKU with `n` GPUs (extra slots are synthesised, evenly over two NUMA nodes)."""
        if n < 1:
            raise ValueError("a GPU node needs at least one GPU")
        if n == self.gpu_count:
            return self
        slots = list(self.slots[:n])
        for i in range(len(slots), n):
            domain, bus = divmod(0x10 + i * 0x10, 0x100)
            numa = 0 if i < n // 2 else 1
            slots.append(GpuSlot(f"{domain:04x}:{bus:02x}:00.0", f"pci{domain:04x}:{bus:02x}", numa,
                                 f"sw{i}"))
        layout = tuple((i, lay) for i, lay in self.mig_layout if i < n)
        return replace(self, name=f"{self.name}-x{n}", slots=tuple(slots), mig_layout=layout)


# DGX H100: GPU BDFs and NUMA affinity are real (nccl#1264, vllm#13855); each GPU has its own PCIe switch
# (shared with one CX-7) on its own root bus; the root bus numbers are illustrative Sapphire Rapids ones.
DGX_H100 = Sku(
    name="dgx-h100",
    description="NVIDIA DGX H100: 8x H100 SXM5 80GB, NV18 all-to-all via 4 NVSwitches, 2 NUMA nodes",
    gpu=H100_SXM5_80GB,
    slots=(
        GpuSlot("0000:18:00.0", "pci0000:15", 0, "sw0"),
        GpuSlot("0000:2a:00.0", "pci0000:26", 0, "sw1"),
        GpuSlot("0000:3a:00.0", "pci0000:37", 0, "sw2"),
        GpuSlot("0000:5d:00.0", "pci0000:59", 0, "sw3"),
        GpuSlot("0000:9a:00.0", "pci0000:97", 1, "sw4"),
        GpuSlot("0000:ab:00.0", "pci0000:a7", 1, "sw5"),
        GpuSlot("0000:ba:00.0", "pci0000:b7", 1, "sw6"),
        GpuSlot("0000:db:00.0", "pci0000:d7", 1, "sw7"),
    ),
    cpu="224", memory="2Ti",
)

# HGX A100 80GB 8-GPU, laid out like a DGX A100 (2x EPYC 7742 in NPS4 -> 8 NUMA nodes; two GPUs per PEX88096
# switch, one switch per root quadrant; real topology in nccl#1505). NV12 all-to-all via 6 NVSwitches.
_A100_SLOTS = (
    GpuSlot("0000:07:00.0", "pci0000:00", 3, "sw0"),
    GpuSlot("0000:0f:00.0", "pci0000:00", 3, "sw0"),
    GpuSlot("0000:47:00.0", "pci0000:40", 1, "sw1"),
    GpuSlot("0000:4e:00.0", "pci0000:40", 1, "sw1"),
    GpuSlot("0000:87:00.0", "pci0000:80", 7, "sw2"),
    GpuSlot("0000:90:00.0", "pci0000:80", 7, "sw2"),
    GpuSlot("0000:b7:00.0", "pci0000:a0", 5, "sw3"),
    GpuSlot("0000:bd:00.0", "pci0000:a0", 5, "sw3"),
)
HGX_A100_80GB = Sku(
    name="hgx-a100-80gb",
    description="HGX A100 8-GPU: 8x A100-SXM4-80GB, NV12 all-to-all via 6 NVSwitches, NPS4 (8 NUMA nodes)",
    gpu=A100_SXM4_80GB,
    slots=_A100_SLOTS,
    cpu="256", memory="2Ti",
)

# The same board with static MIG on GPUs 4-7 (GPUs 0-3 have MIG disabled and are published whole).
# gpu-4, gpu-5: mig-parted "all-balanced" for A100-80GB (1x 3g.40gb, 1x 2g.20gb, 2x 1g.10gb);
# gpu-6: "all-1g.10gb"; gpu-7: 4g.40gb + 1g.20gb + 1g.10gb+me.
_BALANCED: MigLayout = (("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4))
HGX_A100_80GB_MIG = replace(
    HGX_A100_80GB,
    name="hgx-a100-80gb-mig",
    description="HGX A100 8-GPU 80GB with static MIG on gpu-4..gpu-7 (gpu-0..gpu-3 whole)",
    mig_layout=(
        (4, _BALANCED),
        (5, _BALANCED),
        (6, tuple(("1g.10gb", s) for s in _P1)),
        (7, (("4g.40gb", 0), ("1g.20gb", 4), ("1g.10gb+me", 6))),
    ),
)

# 8x L40S in a 4U dual-socket PCIe server: two GPUs per PCIe switch, one switch per root port, two switches
# per socket (layout per driver-data.md §3.4e; bus ids are illustrative). No NVLink.
L40S_PCIE_8 = Sku(
    name="l40s-pcie-8",
    description="8x L40S PCIe (no NVLink): 2 GPUs per PCIe switch, 2 switches per socket, 2 NUMA nodes",
    gpu=L40S_PCIE,
    slots=(
        GpuSlot("0000:17:00.0", "pci0000:16", 0, "sw0"),
        GpuSlot("0000:18:00.0", "pci0000:16", 0, "sw0"),
        GpuSlot("0000:31:00.0", "pci0000:30", 0, "sw1"),
        GpuSlot("0000:32:00.0", "pci0000:30", 0, "sw1"),
        GpuSlot("0000:b1:00.0", "pci0000:b0", 1, "sw2"),
        GpuSlot("0000:b2:00.0", "pci0000:b0", 1, "sw2"),
        GpuSlot("0000:ca:00.0", "pci0000:c9", 1, "sw3"),
        GpuSlot("0000:cb:00.0", "pci0000:c9", 1, "sw3"),
    ),
    cpu="128", memory="1Ti",
)

# 4x Tesla T4 in an older 2-socket Intel (Skylake) server: BDFs 3b/86/af/d8 are real (nvidia-docker#1446);
# each GPU on its own root port (Skylake IIO stacks 3a/85/ae/d7); buses >= 0x80 belong to socket 1.
T4_PCIE_4 = Sku(
    name="t4-pcie-4",
    description="4x Tesla T4 16GB PCIe (no NVLink), each on its own root port, 2 NUMA nodes",
    gpu=T4_PCIE,
    slots=(
        GpuSlot("0000:3b:00.0", "pci0000:3a", 0, "rp0"),
        GpuSlot("0000:86:00.0", "pci0000:85", 1, "rp1"),
        GpuSlot("0000:af:00.0", "pci0000:ae", 1, "rp2"),
        GpuSlot("0000:d8:00.0", "pci0000:d7", 1, "rp3"),
    ),
    cpu="80", memory="384Gi",
    driver_version="570.124.6", cuda_driver_version="12.8.0",  # an older node: clusters mix driver builds
)

# DGX H100 with the driver's DynamicMIG gate: partitionable devices, counter sets in a dedicated slice.
DGX_H100_DYNAMIC_MIG = replace(
    DGX_H100,
    name="dgx-h100-dynamic-mig",
    description="DGX H100 with DynamicMIG (KEP-4815 partitionable devices, Kubernetes >= 1.35 slice layout)",
    dynamic_mig=True,
)

SKUS: dict[str, Sku] = {
    s.name: s for s in (DGX_H100, HGX_A100_80GB, HGX_A100_80GB_MIG, L40S_PCIE_8, T4_PCIE_4,
                        DGX_H100_DYNAMIC_MIG)
}


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(_UUID_NS, "/".join(parts)))


def gpu_uuid(node_name: str, index: int) -> str:
    """Deterministic NVML-style UUID of physical GPU `index` on `node_name`."""
    return "GPU-" + _uuid(node_name, "gpu", str(index))


def _suffix(*parts: str) -> str:
    """5 lower-case alphanumerics, like the apiserver's generateName suffix, but deterministic."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's alphabet (k8s.io/apimachinery rand)
    h = int.from_bytes(hashlib.sha1("/".join(parts).encode()).digest()[:8], "big")
    out = []
    for _ in range(5):
        h, r = divmod(h, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)


def _s(v: str) -> JSON:
    return {"string": v}


def _v(v: str) -> JSON:
    return {"version": v}


def _i(v: int) -> JSON:
    return {"int": v}


def mig_device_name(parent_index: int, profile: MigProfile, start: int) -> str:
    """gpu-<parentMinor>-mig-<profile, dots removed, RFC1123>-<GI profile id>-<placement start>."""
    pname = profile.name.replace(".", "").lower()
    pname = "".join(c if (c.isalnum() or c == "-") else "-" for c in pname).strip("-")
    return f"gpu-{parent_index}-mig-{pname}-{profile.gi_profile_id}-{start}"


def _common_attributes(sku: Sku, slot: GpuSlot) -> JSON:
    """Attributes a full GPU and its MIG devices share (the parent's identity and placement)."""
    g = sku.gpu
    attrs: JSON = {
        "architecture": _s(g.architecture),
        "brand": _s(g.brand),
        "cudaComputeCapability": _v(g.cuda_compute_capability),
        "cudaDriverVersion": _v(sku.cuda_driver_version),
        "driverVersion": _v(sku.driver_version),
        "productName": _s(g.product_name),
        f"{STD}/numaNode": _i(slot.numa_node),
        f"{STD}/pciBusID": _s(slot.pci_bus_id),
        f"{STD}/pcieRoot": _s(slot.pcie_root),
    }
    if g.addressing_mode is not None:
        attrs["addressingMode"] = _s(g.addressing_mode)
    return attrs


def _gpu_device(node_name: str, sku: Sku, index: int) -> JSON:
    attrs = _common_attributes(sku, sku.slots[index])
    attrs["type"] = _s("gpu")
    attrs["uuid"] = _s(gpu_uuid(node_name, index))
    return {
        "name": f"gpu-{index}",
        "attributes": dict(sorted(attrs.items())),
        "capacity": {"memory": {"value": sku.gpu.memory}},
    }


def _mig_attributes(node_name: str, sku: Sku, index: int, profile: MigProfile) -> JSON:
    attrs = _common_attributes(sku, sku.slots[index])
    attrs["type"] = _s("mig")
    attrs["parentUUID"] = _s(gpu_uuid(node_name, index))
    attrs["profile"] = _s(profile.name)
    return attrs


def _static_mig_device(node_name: str, sku: Sku, index: int, profile: MigProfile, start: int) -> JSON:
    name = mig_device_name(index, profile, start)
    attrs = _mig_attributes(node_name, sku, index, profile)
    attrs["uuid"] = _s("MIG-" + _uuid(node_name, name))
    capacity: JSON = {k: {"value": v} for k, v in profile.capacity().items()}
    for i in range(start, start + profile.slices):
        capacity[f"memorySlice{i}"] = {"value": "1"}
    return {"name": name, "attributes": dict(sorted(attrs.items())),
            "capacity": dict(sorted(capacity.items()))}


def _camel_to_dns(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0:
            out.append("-")
        out.append(c.lower())
    return "".join(out)


def _max_capacity(profiles: Sequence[MigProfile]) -> dict[str, str]:
    """Per-dimension maximum over all profiles: the full GPU's capacity in DynamicMIG mode."""
    best: dict[str, tuple[int, str]] = {}
    for p in profiles:
        for k, v in p.capacity().items():
            n = _quantity_to_int(v)
            if k not in best or n > best[k][0]:
                best[k] = (n, v)
    return {k: v for k, (_, v) in sorted(best.items())}


def _quantity_to_int(q: str) -> int:
    for suffix, mult in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40)):
        if q.endswith(suffix):
            return int(q[: -len(suffix)]) * mult
    return int(q)


def _counters(capacity: Mapping[str, str], start: int, size: int) -> JSON:
    counters: JSON = {_camel_to_dns(k): {"value": v} for k, v in capacity.items()}
    for i in range(start, start + size):
        counters[f"memory-slice-{i}"] = {"value": "1"}
    return counters


def counter_set_name(index: int) -> str:
    return f"gpu-{index}-counter-set"


def _dynamic_mig_devices(node_name: str, sku: Sku, index: int) -> list[JSON]:
    """Full GPU + every (profile x placement) of GPU `index`, sorted by name as the driver does."""
    profiles = sku.gpu.mig_profiles
    full_cap = _max_capacity(profiles)
    full = _gpu_device(node_name, sku, index)
    full["capacity"] = {k: {"value": v} for k, v in full_cap.items()}
    full["consumesCounters"] = [
        {"counterSet": counter_set_name(index), "counters": _counters(full_cap, 0, MEMORY_SLICES)}
    ]
    devices = [full]
    for p in profiles:
        for start in p.placements:
            attrs = _mig_attributes(node_name, sku, index, p)  # no uuid: the MIG device does not exist yet
            devices.append({
                "name": mig_device_name(index, p, start),
                "attributes": dict(sorted(attrs.items())),
                "capacity": {k: {"value": v} for k, v in p.capacity().items()},
                "consumesCounters": [
                    {"counterSet": counter_set_name(index),
                     "counters": _counters(p.capacity(), start, p.slices)}
                ],
            })
    devices.sort(key=lambda d: str(d["name"]))
    return devices


def _counter_set(sku: Sku, index: int) -> JSON:
    return {"name": counter_set_name(index),
            "counters": _counters(_max_capacity(sku.gpu.mig_profiles), 0, MEMORY_SLICES)}


def _chunks(items: Sequence[JSON], size: int) -> list[list[JSON]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)] or [[]]


def node_uid(node_name: str) -> str:
    return _uuid(node_name, "node")


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def resource_slices(node_name: str, sku: Sku, generation: int = 1) -> list[JSON]:
    """The ResourceSlices the NVIDIA DRA driver publishes for `node_name` (resource.k8s.io/v1).

    Classic/static-MIG mode: one slice holding every device (split only if it would exceed 128 devices).
    DynamicMIG mode (Kubernetes >= 1.35 layout): one slice with all counter sets (at most 8 per slice),
    then one devices-only slice per physical GPU.
    """
    specs: list[JSON] = []
    if sku.dynamic_mig:
        if not sku.gpu.mig_profiles:
            raise ValueError(f"{sku.name}: DynamicMIG needs a MIG-capable GPU")
        sets = [_counter_set(sku, i) for i in range(sku.gpu_count)]
        for chunk in _chunks(sets, MAX_COUNTER_SETS_PER_SLICE):
            specs.append({"sharedCounters": chunk})
        for i in range(sku.gpu_count):
            for devs in _chunks(_dynamic_mig_devices(node_name, sku, i), MAX_DEVICES_PER_SLICE_WITH_COUNTERS):
                specs.append({"devices": devs})
    else:
        devices: list[JSON] = []
        for i in range(sku.gpu_count):
            layout = sku.mig_devices_of(i)
            if layout is None:
                devices.append(_gpu_device(node_name, sku, i))
                continue
            migs = [
                _static_mig_device(node_name, sku, i, sku.gpu.mig_profile(pname), start)
                for pname, start in layout
            ]
            devices.extend(sorted(migs, key=lambda d: str(d["name"])))
        for devs in _chunks(devices, MAX_DEVICES_PER_SLICE):
            specs.append({"devices": devs})

    count = len(specs)
    owner = {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid(node_name),
             "controller": True}
    slices: list[JSON] = []
    for n, extra in enumerate(specs):
        prefix = f"{node_name}-{DRIVER}-"
        spec: JSON = {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": count},
        }
        spec.update(extra)
        slices.append({
            "apiVersion": RESOURCE_API,
            "kind": "ResourceSlice",
            "metadata": {
                "name": prefix + _suffix(node_name, str(generation), str(n)),
                "generateName": prefix,
                "ownerReferences": [dict(owner)],
            },
            "spec": spec,
        })
    return slices


def topology_matrix(sku: Sku) -> list[list[str]]:
    """`nvidia-smi topo -m` GPU x GPU block for the SKU: NV<n> between NVLink peers, otherwise PIX (same
    PCIe switch), PXB (same root complex), NODE (same NUMA node) or SYS."""
    slots = sku.slots
    rows: list[list[str]] = []
    for i, a in enumerate(slots):
        row: list[str] = []
        for j, b in enumerate(slots):
            if i == j:
                row.append("X")
            elif sku.gpu.nvlink:
                row.append(sku.gpu.nvlink)
            elif a.switch == b.switch:
                row.append("PIX")
            elif a.pcie_root == b.pcie_root:
                row.append("PXB")
            elif a.numa_node == b.numa_node:
                row.append("NODE")
            else:
                row.append("SYS")
        rows.append(row)
    return rows


@lru_cache(maxsize=64)
def topology_annotation(sku: Sku) -> str:
    """Value of the node annotation `dra-scheduler.io/device-topology` (ARCHITECTURE.md §3.4).

    Rows are physical GPUs by DRA device name (`gpu-<minor>`), also for GPUs in MIG mode: their MIG devices
    (`gpu-<minor>-mig-...`, attribute parentUUID) sit where their parent sits.
    """
    doc = {
        "driver": DRIVER,
        "devices": [f"gpu-{i}" for i in range(sku.gpu_count)],
        "matrix": topology_matrix(sku),
    }
    return json.dumps(doc, separators=(",", ":"))


def node(
    name: str,
    sku: Sku,
    labels: Mapping[str, str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    pods: str | None = None,
) -> JSON:
    """A schedulable, Ready Node with GPU-feature-discovery-style labels and the topology annotation.

    No `nvidia.com/gpu` extended resource: on DRA nodes the device plugin does not run (and a non-zero
    allocatable would make the scheduler leave extended-resource requests to NodeResourcesFit).
    """
    g = sku.gpu
    all_labels: dict[str, str] = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        HOSTNAME_LABEL: name,
        "node.kubernetes.io/instance-type": sku.name,
        "nvidia.com/gpu.count": str(sku.gpu_count),
        "nvidia.com/gpu.dra": "true",
        "nvidia.com/gpu.family": g.family,
        "nvidia.com/gpu.memory": str(_quantity_to_int(g.memory) >> 20),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": g.gfd_product,
        "nvidia.com/mig.capable": "true" if g.mig_profiles else "false",
    }
    all_labels.update(sku.extra_labels)
    if labels:
        all_labels.update(labels)
    resources = {
        "cpu": cpu or sku.cpu,
        "ephemeral-storage": "1Ti",
        "memory": memory or sku.memory,
        "pods": pods or sku.pods,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": node_uid(name),
            "labels": dict(sorted(all_labels.items())),
            "annotations": {TOPOLOGY_ANNOTATION: topology_annotation(sku)},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"},
            ],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.35.0"},
        },
    }


def device_classes() -> list[JSON]:
    """The DeviceClasses the NVIDIA chart ships (dra-driver-nvidia-gpu templates/deviceclass-*.yaml)."""

    def dc(name: str, expression: str, extra: JSON | None = None) -> JSON:
        spec: JSON = {"selectors": [{"cel": {"expression": expression}}]}
        if extra:
            spec.update(extra)
        return {"apiVersion": RESOURCE_API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}

    gpu = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == "
    cd = ("device.driver == 'compute-domain.nvidia.com' && "
          "device.attributes['compute-domain.nvidia.com'].type == ")
    return [
        dc("gpu.nvidia.com", gpu + "'gpu'", {"extendedResourceName": "nvidia.com/gpu"}),
        dc("mig.nvidia.com", gpu + "'mig'"),
        dc("vfio.gpu.nvidia.com", gpu + "'vfio'"),
        dc("compute-domain-daemon.nvidia.com", cd + "'daemon'"),
        dc("compute-domain-default-channel.nvidia.com",
           cd + "'channel' && device.attributes['compute-domain.nvidia.com'].id == 0"),
    ]


def gpu_node_objects(name: str, sku: Sku, labels: Mapping[str, str] | None = None,
                     generation: int = 1) -> list[JSON]:
    """A Node followed by its ResourceSlices."""
    return [node(name, sku, labels=labels), *resource_slices(name, sku, generation=generation)]


# (node name, SKU, rack) of the demo fleet: one zone, three racks.
DEMO_NODES: tuple[tuple[str, Sku, str], ...] = (
    ("dgx-h100-01", DGX_H100, "rack-1"),
    ("hgx-a100-01", HGX_A100_80GB, "rack-1"),
    ("a100-mig-01", HGX_A100_80GB_MIG, "rack-2"),
    ("l40s-01", L40S_PCIE_8, "rack-2"),
    ("t4-01", T4_PCIE_4, "rack-3"),
)


def _placement_labels(zone: str, block: str, rack: str) -> dict[str, str]:
    return {REGION_LABEL: "region-1", ZONE_LABEL: zone, BLOCK_LABEL: block, RACK_LABEL: rack}


def demo_fleet() -> list[JSON]:
    """DeviceClasses, then each demo node followed by its slices."""
    objs = device_classes()
    for name, sku, rack in DEMO_NODES:
        objs.extend(gpu_node_objects(name, sku, labels=_placement_labels("zone-a", "block-1", rack)))
    return objs


def dynamic_mig_fleet(name: str = "dgx-h100-dmig-01") -> list[JSON]:
    """DeviceClasses plus one DynamicMIG DGX H100 node (9 slices: counters + one per GPU)."""
    return [*device_classes(),
            *gpu_node_objects(name, DGX_H100_DYNAMIC_MIG,
                              labels=_placement_labels("zone-a", "block-1", "rack-1"))]


def scale_fleet(nodes: int, gpus_per_node: int = 8, sku: Sku = DGX_H100,
                nodes_per_rack: int = 8, racks_per_block: int = 8, blocks_per_zone: int = 4) -> list[JSON]:
    """DeviceClasses + `nodes` identical GPU nodes (Node + slices each) for benchmarks.

    Nodes are `<sku>-00000`, ... spread over racks/blocks/zones by index.
    """
    if nodes < 0:
        raise ValueError("nodes must be >= 0")
    s = sku.with_gpu_count(gpus_per_node)
    width = max(5, len(str(max(nodes - 1, 0))))
    objs = device_classes()
    for i in range(nodes):
        rack = i // nodes_per_rack
        block = rack // racks_per_block
        zone = block // blocks_per_zone
        labels = _placement_labels(f"zone-{zone}", f"block-{block}", f"rack-{rack}")
        objs.extend(gpu_node_objects(f"{sku.name}-{i:0{width}d}", s, labels=labels))
    return objs


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------

DEMO_HEADER = (
    "# Demo fleet for `dra-scheduler simulate manifests/examples/`.\n"
    "# GENERATED FILE, do not edit: python -m bench.fleet demo > manifests/examples/00-fleet.yaml\n"
    "# (tests/test_fleet.py fails when it differs from bench.fleet.demo_fleet()).\n"
    "# Nodes: dgx-h100-01 (8x H100 80GB HBM3, NV18), hgx-a100-01 (8x A100-SXM4-80GB, NV12),\n"
    "# a100-mig-01 (8x A100-SXM4-80GB: gpu-0..3 whole, gpu-4..7 static MIG), l40s-01 (8x L40S PCIe),\n"
    "# t4-01 (4x Tesla T4); ResourceSlices as the NVIDIA DRA driver (gpu.nvidia.com) publishes them;\n"
    "# DeviceClasses of the NVIDIA chart.\n"
)


def to_yaml(objs: Iterable[JSON], header: str = "") -> str:
    """Multi-document YAML, documents separated by `---` (pure-Python dumper: byte-stable output)."""
    body = yaml.dump_all(list(objs), Dumper=yaml.SafeDumper, sort_keys=False, explicit_start=True,
                         default_flow_style=False, width=120)
    return header + body


def _fast_yaml(objs: list[JSON]) -> str:
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    out: str = yaml.dump_all(objs, Dumper=dumper, sort_keys=False, explicit_start=True,
                             default_flow_style=False, width=120)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet",
                                     description=(__doc__ or "").splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml",
                        help="multi-document YAML (default) or one JSON `kind: List`")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", parents=[common], help="the demo fleet")
    sub.add_parser("dynamic-mig", parents=[common], help="one DynamicMIG DGX H100 node")
    sc = sub.add_parser("scale", parents=[common], help="N identical GPU nodes for benchmarks")
    sc.add_argument("nodes", type=int)
    sc.add_argument("--gpus-per-node", type=int, default=8)
    sc.add_argument("--sku", choices=sorted(SKUS), default=DGX_H100.name)
    args = parser.parse_args(argv)

    if args.command == "demo":
        objs = demo_fleet()
        header = DEMO_HEADER
    elif args.command == "dynamic-mig":
        objs, header = dynamic_mig_fleet(), "# python -m bench.fleet dynamic-mig\n"
    else:
        objs = scale_fleet(args.nodes, args.gpus_per_node, SKUS[args.sku])
        header = f"# python -m bench.fleet scale {args.nodes} --gpus-per-node {args.gpus_per_node}" \
                 f" --sku {args.sku}\n"
    if args.output == "json":
        json.dump({"apiVersion": "v1", "kind": "List", "items": objs}, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    elif args.command == "demo":
        sys.stdout.write(to_yaml(objs, header))
    else:
        sys.stdout.write(header + _fast_yaml(objs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
