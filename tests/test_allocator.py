"""Conformance cases for the structured DRA allocator (plugins/dra/allocator.py).

Each case is named after its line in the upstream test table (``dra-semantics.md`` §5.2,
``allocatortesting/allocator_testing.go``). A case lists the features it needs, like upstream; unless
marked ``only``, it is run twice: with exactly those features and with every feature on (the
expectations do not depend on the other features). Results are compared order-insensitively within a
claim; every run also checks that the allocator did not mutate its inputs (see ``dra_fixtures.run``).

Tests after the table cover the places where the allocator deliberately fixes an upstream bug
(§2.15, module docstring of the allocator): each would fail with the buggy behaviour.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from dra_fixtures import (
    ALL_FEATURES,
    ALL_NODES,
    CAP0,
    CAP1,
    CLAIM0,
    CLAIM1,
    CLASS_A,
    CLASS_B,
    CSET1,
    CSET2,
    DEV0,
    DEV1,
    DEV2,
    DEV3,
    DEV4,
    DRIVER_A,
    DRIVER_B,
    NO_FEATURES,
    NODE1,
    NODE2,
    PER_DEVICE,
    POOL1,
    POOL2,
    POOL3,
    POOL4,
    REGION1,
    REGION2,
    REQ0,
    REQ1,
    REQ2,
    SLICE1,
    SLICE2,
    SLICE3,
    SLICE4,
    SUB0,
    SUB1,
    Claim,
    Share,
    all_request,
    allocation,
    assert_allocations,
    cap_request,
    cel,
    claim,
    claim_config,
    class_with_config,
    config_entry,
    counter_set,
    device,
    distinct,
    features,
    first_available,
    klass,
    label_selector,
    local_selector,
    make_ledger,
    match,
    memory_at_least,
    node,
    opaque,
    policy_range,
    policy_values,
    pool,
    request,
    result,
    run,
    run_outcome,
    simple_claim,
    slice_counters,
    slice_many,
    slice_none,
    slice_one,
    slice_with,
    sub,
    taint,
    toleration,
    version,
    with_generation,
)

from plugins.dra.allocator import AllocationError, Allocator, ClaimAllocation, ClaimInput, FailedOnNode
from plugins.dra.cel import SelectorCache, get_engine
from plugins.dra.pools import Features, gather_pools
from scheduler.api.dra import DeviceResult, claim_spec_from, class_from, slice_from
from scheduler.api.model import node_from
from scheduler.cache.cache import build_slice_index

Raw = dict[str, Any]

NS1 = local_selector(NODE1)
NS2 = local_selector(NODE2)

NUMA = f"{DRIVER_A}/numa"
VERSION_ATTR = f"{DRIVER_A}/driverVersion"
STRING_ATTR = f"{DRIVER_A}/stringAttribute"
BOOL_ATTR = f"{DRIVER_A}/boolAttribute"
MISSING_ATTR = f"{DRIVER_A}/NonExistentAttribute"

TAINT_NO_SCHEDULE = taint("taint-key", "taint-value", "NoSchedule")
TAINT_NO_EXECUTE = taint("taint-key", "taint-value-2", "NoExecute")
TAINT_NONE = taint("taint-key", "taint-value", "None")
TOL_NO_SCHEDULE = toleration("taint-key", "Exists", effect="NoSchedule")
TOL_NO_EXECUTE = toleration("taint-key", "Equal", "taint-value-2", "NoExecute")

PARTITIONABLE = features(partitionable_devices=True)
PRIO = features(prioritized_list=True)
PRIO_PART = features(prioritized_list=True, partitionable_devices=True)
TAINTS = features(device_taints=True)
CONSUMABLE = features(consumable_capacity=True)
BINDING = features(binding_conditions=True)
ADMIN = features(admin_access=True)


@dataclass
class Case:
    claims: list[Claim]
    classes: list[Raw]
    slices: list[Raw]
    expect: list[Raw] | None = None
    node: Raw = field(default_factory=node)
    allocated: list[tuple[str, str, str]] = field(default_factory=list)
    shares: list[Share] = field(default_factory=list)
    features: Features = NO_FEATURES
    only: bool = False  # expectation depends on features being off: do not rerun with everything on
    error: str | None = None
    error_type: type[Exception] = AllocationError
    invocations: int | None = None  # expected number of search steps (allocateOne calls), as upstream
    max_invocations: int | None = None


CASES: dict[str, Case] = {}


def case(name: str, c: Case) -> None:
    assert name not in CASES, name
    CASES[name] = c


def A(*claims: Claim) -> list[Claim]:
    return list(claims)


CA = klass(CLASS_A, DRIVER_A)
CB = klass(CLASS_B, DRIVER_B)


def r(req: str, dev: str, pool_: str = POOL1, driver: str = DRIVER_A, **kw: Any) -> Raw:
    return result(req, driver, pool_, dev, **kw)


def mem_device(name: str, mem: str, **attrs: Any) -> Raw:
    return device(name, {"memory": mem}, attrs or None)


# ======================================================================================================
# A. Basics, pools, node selection
# ======================================================================================================

case("empty", Case([], [], [], expect=[]))
case(
    "simple",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "other-node",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_B), slice_one(SLICE2, NODE2, POOL2, DRIVER_A)],
        node=node(NODE2, REGION2),
        expect=[allocation(NS2, r(REQ0, DEV1, POOL2))],
    ),
)
_small_large_claim = claim(
    CLAIM0, request(REQ0, CLASS_A, 1, memory_at_least("1Gi")), request(REQ1, CLASS_A, 1, memory_at_least("2Gi"))
)
case(
    "small-and-large",
    Case(
        A(_small_large_claim),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, mem_device(DEV1, "1Gi"), mem_device(DEV2, "2Gi"))],
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ1, DEV2))],
    ),
)
case(
    "small-and-large-backtrack-requests",
    Case(
        A(_small_large_claim),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, mem_device(DEV2, "2Gi"), mem_device(DEV1, "1Gi"))],
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ1, DEV2))],
    ),
)
case(
    "small-and-large-backtrack-claims",
    Case(
        A(
            claim(CLAIM0, request(REQ0, CLASS_A, 1, memory_at_least("1Gi"))),
            claim(CLAIM1, request(REQ1, CLASS_A, 1, memory_at_least("2Gi"))),
        ),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, mem_device(DEV2, "2Gi"), mem_device(DEV1, "1Gi"))],
        expect=[allocation(NS1, r(REQ0, DEV1)), allocation(NS1, r(REQ1, DEV2))],
    ),
)
case(
    "devices-split-across-different-slices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE2, NODE1, POOL2, DRIVER_A)],
        expect=[allocation(NS1, r(REQ0, DEV1, POOL1), r(REQ0, DEV1, POOL2))],
    ),
)
case(
    "obsolete-slice",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with("slice-1-obsolete", NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1)),
            with_generation(slice_with("slice-1-obsolete", NODE1, pool(POOL1, 2), DRIVER_A, device(DEV2)), 2),
        ],
        expect=None,
    ),
)
_dup = slice_one(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A)
_dup2 = copy.deepcopy(_dup)
_dup2["metadata"]["name"] = SLICE1 + "-2"
case(
    "duplicate-slice",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [_dup, _dup2],
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)
case("no-slices", Case(A(simple_claim(CLAIM0, REQ0, CLASS_A)), [CA], [], expect=None))
case(
    "not-enough-suitable-devices",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A), simple_claim(CLAIM0, REQ1, CLASS_A)),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
)
case(
    "no-classes",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        error="could not retrieve device class class-a",
    ),
)
case(
    "unknown-class",
    Case(
        A(simple_claim(CLAIM0, REQ0, "unknown-class")),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        error="could not retrieve device class unknown-class",
    ),
)
case(
    "empty-class",
    Case(
        A(simple_claim(CLAIM0, REQ0, "")),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        error="claim claim-0, request req-0: missing device class name (unsupported request type?)",
    ),
)
case("no-claims-to-allocate", Case([], [CA], [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)], expect=[]))
case(
    "network-attached-device",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A)],
        expect=[allocation(label_selector("region", REGION1), r(REQ0, DEV1))],
    ),
)
case(
    "unsuccessful-allocation-network-attached-device",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A)],
        node=node(NODE2, REGION2),
        expect=None,
    ),
)
case(
    "many-network-attached-devices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 4))),
        [CA],
        [
            slice_one(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A),
            slice_one(SLICE1, ALL_NODES, POOL2, DRIVER_A),
            slice_one(SLICE1, label_selector("planet", "earth"), POOL3, DRIVER_A),
            slice_one(SLICE1, local_selector(NODE1), POOL4, DRIVER_A),
        ],
        expect=[
            allocation(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "region", "operator": "In", "values": [REGION1]},
                                {"key": "planet", "operator": "In", "values": ["earth"]},
                            ],
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE1]}],
                        }
                    ]
                },
                r(REQ0, DEV1, POOL1),
                r(REQ0, DEV1, POOL2),
                r(REQ0, DEV1, POOL3),
                r(REQ0, DEV1, POOL4),
            )
        ],
    ),
)
case(
    "local-and-network-attached-devices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_one(SLICE1, label_selector("region", REGION1), POOL1, DRIVER_A),
            slice_one(SLICE1, NODE1, POOL2, DRIVER_A),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1, POOL1), r(REQ0, DEV1, POOL2))],
    ),
)
case(
    "several-different-drivers",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A), simple_claim(CLAIM0, REQ0, CLASS_B)),
        [CA, CB],
        [
            slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2)),
            slice_one(SLICE1, NODE1, POOL1, DRIVER_B),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1)), allocation(NS1, r(REQ0, DEV1, driver=DRIVER_B))],
    ),
)
case(
    "already-allocated-devices",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        allocated=[(DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL1, DEV2)],
        expect=None,
    ),
)
case(
    "max-number-devices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 32))),
        [CA],
        [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 32)],
        expect=[allocation(NS1, *(r(REQ0, f"device-{i}") for i in range(32)))],
    ),
)
case(
    "too-many-devices-single-request",
    Case(A(claim(CLAIM0, request(REQ0, CLASS_A, 500))), [CA], [], error="exceeds the claim limit"),
)
case("many-devices-okay", Case(A(claim(CLAIM0, request(REQ0, CLASS_A, 32))), [CA], [], expect=None))
case(
    "too-many-devices-total",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 32), request(REQ1, CLASS_A, 1))),
        [CA],
        [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 33)],
        error="exceeds the claim limit",
    ),
)
case(
    "all-devices-invalid-CEL",
    Case(A(claim(CLAIM0, request(REQ0, CLASS_A, 500))), [CA], [], error="exceeds the claim limit"),
)
case(
    "different-resourceslices-in-pool-can-target-different-nodes",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE2, pool(POOL1, 2), DRIVER_A, device(DEV2)),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
_invalid_pool1 = [
    slice_one(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A),
    slice_one(SLICE2, NODE1, pool(POOL1, 2), DRIVER_A),
]
case(
    "invalid-pool-is-ok-if-devices-can-be-allocated-from-other",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [*_invalid_pool1, slice_one(SLICE3, NODE1, POOL2, DRIVER_A)],
        expect=[allocation(NS1, r(REQ0, DEV1, POOL2))],
    ),
)
case(
    "invalid-pool-is-error-if-no-other-device-can-be-allocated",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [*_invalid_pool1, slice_one(SLICE3, NODE1, POOL2, DRIVER_A)],
        allocated=[(DRIVER_A, POOL2, DEV1)],
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)
case(
    "no-allocation-from-incomplete-pools",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A)],
        expect=None,
    ),
)
case(
    "allocation-mode-all-with-multi-host-resource-pool",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE2, pool(POOL1, 2), DRIVER_A, device(DEV2)),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "multi-host-resource-pool-with-stale-slice-for-current-node",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2, 1), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE2, pool(POOL1, 2, 2), DRIVER_A, device(DEV2)),
        ],
        expect=None,
    ),
)
case(
    "multi-host-resource-pool-complete-update-from-node-1-to-node-2",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2, 1), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE1, pool(POOL1, 2, 1), DRIVER_A, device(DEV2)),
            slice_with(SLICE3, NODE2, pool(POOL1, 2, 2), DRIVER_A, device(DEV3)),
            slice_with(SLICE4, NODE2, pool(POOL1, 2, 2), DRIVER_A, device(DEV4)),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "multi-host-resource-pool-complete-update-from-node-2-to-node-1",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with(SLICE1, NODE2, pool(POOL1, 2, 1), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE2, pool(POOL1, 2, 1), DRIVER_A, device(DEV2)),
            slice_with(SLICE3, NODE1, pool(POOL1, 2, 2), DRIVER_A, device(DEV3)),
            slice_with(SLICE4, NODE1, pool(POOL1, 2, 2), DRIVER_A, device(DEV4)),
        ],
        expect=[allocation(NS1, r(REQ0, DEV3))],
    ),
)
case(
    "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2, 1), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE1, pool(POOL1, 2, 1), DRIVER_A, device(DEV2)),
            slice_with(SLICE3, NODE2, pool(POOL1, 2, 2), DRIVER_A, device(DEV3)),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [CA],
        [
            slice_with(SLICE1, NODE2, pool(POOL1, 2, 1), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE2, pool(POOL1, 2, 1), DRIVER_A, device(DEV2)),
            slice_with(SLICE3, NODE1, pool(POOL1, 2, 2), DRIVER_A, device(DEV3)),
        ],
        expect=None,
    ),
)

# ======================================================================================================
# B. allocationMode: All
# ======================================================================================================

case(
    "all-devices-single",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "all-devices-with-consumed-counters",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1, counters=[(CSET1, {"memory": "4Gi"})])),
            slice_counters(SLICE2, NODE1, pool(POOL1, 2), DRIVER_A, counter_set(CSET1, {"memory": "8Gi"})),
        ],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "all-devices-many",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE1, NODE1, POOL2, DRIVER_A)],
        expect=[allocation(NS1, r(REQ0, DEV1, POOL1), r(REQ0, DEV1, POOL2))],
    ),
)
case(
    "all-devices-of-the-incomplete-pool",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
        [CA],
        [slice_one(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A)],
        error="claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently "
        "being updated",
    ),
)
_all_a = claim(CLAIM0, all_request(REQ0, CLASS_A))
_one_b = claim(CLAIM1, request(REQ0, CLASS_B, 1))
case(
    "all-devices-plus-another",
    Case(
        A(_all_a, _one_b),
        [CA, CB],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[allocation(NS1, r(REQ0, DEV1)), allocation(NS1, r(REQ0, DEV1, driver=DRIVER_B))],
    ),
)
case(
    "all-devices-plus-another-reversed",
    Case(
        A(_one_b, _all_a),
        [CA, CB],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[allocation(NS1, r(REQ0, DEV1, driver=DRIVER_B)), allocation(NS1, r(REQ0, DEV1))],
    ),
)
_two_a = slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2))
case(
    "all-devices-many-plus-another",
    Case(
        A(_all_a, _one_b),
        [CA, CB],
        [_two_a, slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ0, DEV2)), allocation(NS1, r(REQ0, DEV1, driver=DRIVER_B))],
    ),
)
case(
    "all-devices-many-plus-another-reversed",
    Case(
        A(_one_b, _all_a),
        [CA, CB],
        [_two_a, slice_one(SLICE1, NODE1, POOL1, DRIVER_B)],
        expect=[allocation(NS1, r(REQ0, DEV1, driver=DRIVER_B)), allocation(NS1, r(REQ0, DEV1), r(REQ0, DEV2))],
    ),
)
case(
    "all-devices-no-solution",
    Case(
        A(claim(CLAIM1, request(REQ0, CLASS_A, 1)), _all_a),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
)
case(
    "all-devices-no-solution-reversed",
    Case(
        A(_all_a, claim(CLAIM1, request(REQ0, CLASS_A, 1))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
)
case(
    "all-devices-slice-without-devices",
    Case(A(_all_a), [CA], [slice_none(SLICE1, NODE1, POOL1, DRIVER_A)], expect=None),
)
case("all-devices-no-slices", Case(A(_all_a), [CA], [], expect=None))
case(
    "all-devices-some-allocated",
    Case(A(_all_a), [CA], [_two_a], allocated=[(DRIVER_A, POOL1, DEV1)], expect=None),
)

# ======================================================================================================
# C. Admin access
# ======================================================================================================

case(
    "all-devices-some-allocated-admin-access",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A, admin=True))),
        [CA],
        [_two_a],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=ADMIN,
        expect=[allocation(NS1, r(REQ0, DEV1, admin=True), r(REQ0, DEV2, admin=True))],
    ),
)
case(
    "all-devices-some-allocating-admin-access",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True), all_request(REQ1, CLASS_A, admin=True))),
        [CA],
        [_two_a],
        features=ADMIN,
        expect=None,
    ),
)
case(
    "count-devices-some-allocated-admin-access",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2, admin=True))),
        [CA],
        [_two_a],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=ADMIN,
        expect=[allocation(NS1, r(REQ0, DEV1, admin=True), r(REQ0, DEV2, admin=True))],
    ),
)
case(
    "separate-claims-share-device-admin-access",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True)), claim(CLAIM1, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        [_two_a],
        features=ADMIN,
        expect=[allocation(NS1, r(REQ0, DEV1, admin=True)), allocation(NS1, r(REQ0, DEV1, admin=True))],
    ),
)
case(
    "admin-access-claims-device-allocating-for-non-admin-access",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A), claim(CLAIM1, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        [_two_a],
        features=ADMIN,
        expect=[allocation(NS1, r(REQ0, DEV1)), allocation(NS1, r(REQ0, DEV1, admin=True))],
    ),
)
case(
    "admin-access-disabled",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        only=True,
        error="claim claim-0, request req-0: admin access is requested, but the feature is disabled",
    ),
)
case(
    "admin-access-enabled",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        allocated=[(DRIVER_A, POOL1, DEV1), (DRIVER_A, POOL1, DEV2)],
        features=ADMIN,
        expect=[allocation(NS1, r(REQ0, DEV1, admin=True))],
    ),
)

# ======================================================================================================
# D. matchAttribute constraints
# ======================================================================================================

_all_attrs = {
    "driverVersion": version("1.0.0"),
    "numa": 1,
    "stringAttribute": "stringAttributeValue",
    "boolAttribute": True,
}
case(
    "with-constraint",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                constraints=[match(NUMA), match(VERSION_ATTR), match(STRING_ATTR), match(BOOL_ATTR)],
            )
        ),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, None, _all_attrs), device(DEV2, None, _all_attrs))],
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ1, DEV2))],
    ),
)
case(
    "with-constraint-non-existent-attribute",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A, match(MISSING_ATTR))),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=None,
    ),
)


def _two_devices_attr(name: str, v1: Any, v2: Any) -> Raw:
    return slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, None, {name: v1}), device(DEV2, None, {name: v2}))


case(
    "with-constraint-not-matching-int-attribute",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(NUMA)])),
        [CA, CB],
        [_two_devices_attr("numa", 1, 2)],
        expect=None,
    ),
)
case(
    "with-constraint-not-matching-int-attribute-all-devices",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A), constraints=[match(NUMA)])),
        [CA, CB],
        [_two_devices_attr("numa", 1, 2)],
        error="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint "
        "would not be satisfied",
    ),
)
case(
    "with-constraint-not-matching-string-attribute",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(STRING_ATTR)])),
        [CA, CB],
        [_two_devices_attr("stringAttribute", "stringAttributeValue", "stringAttributeValue2")],
        expect=None,
    ),
)
case(
    "with-constraint-not-matching-bool-attribute",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(BOOL_ATTR)])),
        [CA, CB],
        [_two_devices_attr("boolAttribute", True, False)],
        expect=None,
    ),
)
case(
    "with-constraint-not-matching-version-attribute",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(VERSION_ATTR)])),
        [CA, CB],
        [_two_devices_attr("driverVersion", version("1.0.0"), version("2.0.0"))],
        expect=None,
    ),
)
case(
    "with-constraint-for-request",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1), constraints=[match(VERSION_ATTR, REQ0)])),
        [CA, CB],
        [_two_devices_attr("driverVersion", version("1.0.0"), version("2.0.0"))],
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ1, DEV2))],
    ),
)
case(
    "with-constraint-for-request-retry",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                constraints=[match(VERSION_ATTR, REQ0), match(STRING_ATTR)],
            )
        ),
        [CA, CB],
        [
            slice_with(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEV1, None, {"driverVersion": version("1.0.0"), "stringAttribute": "a"}),
                device(DEV2, None, {"driverVersion": version("2.0.0"), "stringAttribute": "b"}),
                device(DEV3, None, {"driverVersion": version("3.0.0"), "stringAttribute": "b"}),
            )
        ],
        expect=[allocation(NS1, r(REQ0, DEV2), r(REQ1, DEV3))],
    ),
)
case(
    # a fully qualified attribute of another domain is looked up verbatim (no short-name fallback)
    "with-constraint-fully-qualified-foreign-domain",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match("other.example.com/numa")])),
        [CA],
        [
            slice_with(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEV1, None, {"numa": 1}),
                device(DEV2, None, {"other.example.com/numa": 7}),
                device(DEV3, None, {"other.example.com/numa": 7}),
            )
        ],
        expect=[allocation(NS1, r(REQ0, DEV2), r(REQ0, DEV3))],
    ),
)

# ======================================================================================================
# E. Configuration in the result
# ======================================================================================================

case(
    "with-class-device-config",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[
            allocation(NS1, r(REQ0, DEV1), config=[config_entry("FromClass", None, opaque(DRIVER_A, "classAttribute"))])
        ],
    ),
)
case(
    "with-class-device-config-with-multiple-request-and-configs",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1), request(REQ2, CLASS_B, 1))),
        [
            class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
            class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 2), slice_one(SLICE2, NODE1, POOL1, DRIVER_B)],
        expect=[
            allocation(
                NS1,
                r(REQ0, DEV0),
                r(REQ1, DEV1),
                r(REQ2, DEV1, driver=DRIVER_B),
                config=[
                    config_entry("FromClass", [REQ0, REQ1], opaque(DRIVER_A, "classAttribute-A")),
                    config_entry("FromClass", [REQ2], opaque(DRIVER_B, "classAttribute-B")),
                ],
            )
        ],
    ),
)
case(
    "with-claim-config-for-two-requests",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_A, 1),
                config=[claim_config([REQ0, REQ1], opaque(DRIVER_A, "deviceAttribute"))],
            )
        ),
        [CA],
        [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 3)],
        expect=[
            allocation(
                NS1,
                r(REQ0, DEV0),
                r(REQ1, DEV1),
                r(REQ2, DEV2),
                config=[config_entry("FromClaim", [REQ0, REQ1], opaque(DRIVER_A, "deviceAttribute"))],
            )
        ],
    ),
)
case(
    "claim-with-device-config",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), config=[claim_config([], opaque(DRIVER_A, "deviceAttribute"))])),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
        expect=[
            allocation(
                NS1, r(REQ0, DEV1), config=[config_entry("FromClaim", None, opaque(DRIVER_A, "deviceAttribute"))]
            )
        ],
    ),
)
case(
    "prioritized-list-device-config",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(REQ0, sub(SUB0, CLASS_A, 1), sub(SUB1, CLASS_B, 2)),
                config=[
                    claim_config([f"{REQ0}/{SUB0}"], opaque(DRIVER_A, "foo")),
                    claim_config([f"{REQ0}/{SUB1}"], opaque(DRIVER_B, "bar")),
                ],
            )
        ),
        [CA, CB],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_B, device(DEV1), device(DEV2))],
        features=PRIO,
        expect=[
            allocation(
                NS1,
                r(f"{REQ0}/{SUB1}", DEV1, driver=DRIVER_B),
                r(f"{REQ0}/{SUB1}", DEV2, driver=DRIVER_B),
                config=[config_entry("FromClaim", None, opaque(DRIVER_B, "bar"))],
            )
        ],
    ),
)
case(
    "prioritized-list-class-config",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_B, 2)))),
        [class_with_config(CLASS_A, DRIVER_A, "foo"), class_with_config(CLASS_B, DRIVER_B, "bar")],
        [
            slice_with(SLICE1, NODE1, POOL1, DRIVER_B, device(DEV1), device(DEV2)),
            slice_with(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV3)),
        ],
        features=PRIO,
        expect=[
            allocation(
                NS1,
                r(f"{REQ0}/{SUB1}", DEV1, driver=DRIVER_B),
                r(f"{REQ0}/{SUB1}", DEV2, driver=DRIVER_B),
                config=[config_entry("FromClass", None, opaque(DRIVER_B, "bar"))],
            )
        ],
    ),
)
case(
    "claim-config-scoped-to-subrequests-of-one-request",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(REQ0, sub(SUB0, CLASS_A, 1), sub(SUB1, CLASS_A, 1)),
                request(REQ1, CLASS_A, 1),
                config=[claim_config([f"{REQ0}/{SUB0}", f"{REQ0}/{SUB1}"], opaque(DRIVER_A, "foo"))],
            )
        ),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2))],
        features=PRIO,
        expect=[
            allocation(
                NS1,
                r(f"{REQ0}/{SUB0}", DEV1),
                r(REQ1, DEV2),
                config=[config_entry("FromClaim", [f"{REQ0}/{SUB0}", f"{REQ0}/{SUB1}"], opaque(DRIVER_A, "foo"))],
            )
        ],
    ),
)
case(
    "claim-config-covering-all-requests-is-cleared",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(REQ0, sub(SUB0, CLASS_A, 1), sub(SUB1, CLASS_A, 1)),
                request(REQ1, CLASS_A, 1),
                config=[claim_config([f"{REQ0}/{SUB0}", REQ1], opaque(DRIVER_A, "foo"))],
            )
        ),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1), device(DEV2))],
        features=PRIO,
        expect=[
            allocation(
                NS1,
                r(f"{REQ0}/{SUB0}", DEV1),
                r(REQ1, DEV2),
                config=[config_entry("FromClaim", None, opaque(DRIVER_A, "foo"))],
            )
        ],
    ),
)

# ======================================================================================================
# F. Validation of unknown/invalid input
# ======================================================================================================

_one = [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)]
case(
    "unknown-selector",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, {}))),
        [CA],
        _one,
        error="CEL expression empty (unsupported selector type?)",
    ),
)
case(
    "unknown-allocation-mode",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, mode="future-mode"))),
        [CA],
        _one,
        error="unsupported count mode future-mode",
    ),
)
case(
    "unknown-constraint",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), constraints=[{}])),
        [CA],
        _one,
        error="empty constraint (unsupported constraint type?)",
    ),
)
case(
    "invalid-CEL-one-device",
    Case(A(claim(CLAIM0, request(REQ0, CLASS_A, 1, cel("noSuchVar")))), [CA], _one, error="undeclared reference"),
)
_bad_class = klass(CLASS_A, DRIVER_A)
_bad_class["spec"]["selectors"][0]["cel"]["expression"] = "noSuchVar"
case(
    "invalid-CEL-one-device-class",
    Case(A(simple_claim(CLAIM0, REQ0, CLASS_A)), [_bad_class], _one, error="undeclared reference"),
)
case(
    "invalid-CEL-all-devices",
    Case(A(claim(CLAIM0, all_request(REQ0, CLASS_A, cel("noSuchVar")))), [CA], _one, error="undeclared reference"),
)
case(
    # an empty selector in the class is an unknown selector type as well
    "unknown-selector-in-class",
    Case(
        A(simple_claim(CLAIM0, REQ0, CLASS_A)),
        [{"metadata": {"name": CLASS_A}, "spec": {"selectors": [{}]}}],
        _one,
        error="CEL expression empty (unsupported selector type?)",
    ),
)
case(
    # API defaulting: allocationMode "" -> ExactCount, count 0 -> 1
    "api-defaulting-of-allocation-mode-and-count",
    Case(
        A(claim(CLAIM0, {"name": REQ0, "exactly": {"deviceClassName": CLASS_A}})),
        [CA],
        [_two_a],
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)

# ======================================================================================================
# G. Prioritized list (firstAvailable)
# ======================================================================================================

R0S0, R0S1, R1S0, R1S1, R2S0, R2S1 = (f"{a}/{b}" for a in (REQ0, REQ1, REQ2) for b in (SUB0, SUB1))

case(
    "prioritized-list-first-unavailable",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B, 1), sub(SUB1, CLASS_A, 1)))),
        [CA, CB],
        _one,
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV1))],
    ),
)
case(
    "prioritized-list-non-available",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B, 2), sub(SUB1, CLASS_A, 2)))),
        [CA, CB],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
        features=PRIO,
        expect=None,
    ),
)
case(
    "prioritized-list-subrequests-with-expressions",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, memory_at_least("1Gi")),
                first_available(
                    REQ1, sub(SUB0, CLASS_A, 1, memory_at_least("4Gi")), sub(SUB1, CLASS_A, 2, memory_at_least("2Gi"))
                ),
            )
        ),
        [CA],
        [
            slice_with(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                mem_device(DEV1, "2Gi"),
                mem_device(DEV2, "2Gi"),
                mem_device(DEV3, "1Gi"),
            )
        ],
        features=PRIO,
        expect=[allocation(NS1, r(REQ0, DEV3), r(R1S1, DEV1), r(R1S1, DEV2))],
    ),
)
_v1 = {"driverVersion": version("1.0.0")}
_v2 = {"driverVersion": version("2.0.0")}
_prio_constraint_slices = [
    slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, {"memory": "8Gi"}, _v1)),
    slice_with(
        SLICE2, NODE1, POOL2, DRIVER_A, device(DEV2, {"memory": "2Gi"}, _v2), device(DEV3, {"memory": "1Gi"}, _v1)
    ),
]


def _prio_constraint_claim(*constraint_requests: str) -> Claim:
    return claim(
        CLAIM0,
        request(REQ0, CLASS_A, 1, memory_at_least("8Gi")),
        first_available(
            REQ1, sub(SUB0, CLASS_A, 1, memory_at_least("2Gi")), sub(SUB1, CLASS_A, 1, memory_at_least("1Gi"))
        ),
        constraints=[match(VERSION_ATTR, *constraint_requests)],
    )


case(
    "prioritized-list-subrequests-with-constraints-ref-parent-request",
    Case(
        A(_prio_constraint_claim(REQ0, REQ1)),
        [CA],
        _prio_constraint_slices,
        features=PRIO,
        expect=[allocation(NS1, r(REQ0, DEV1), r(R1S1, DEV3, POOL2))],
    ),
)
case(
    "prioritized-list-subrequests-with-constraints-ref-sub-request",
    Case(
        A(_prio_constraint_claim(REQ0, R1S0)),
        [CA],
        [
            _prio_constraint_slices[0],
            slice_with(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV2, {"memory": "2Gi"}, _v2)),
        ],
        features=PRIO,
        expect=[allocation(NS1, r(REQ0, DEV1), r(R1S1, DEV2, POOL2))],
    ),
)
case(
    "prioritized-list-subrequests-with-allocation-mode-all",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, mode="All"), sub(SUB1, CLASS_A, 1)))),
        [CA],
        [_two_a],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV2))],
    ),
)
case(
    "prioritized-list-allocation-mode-all-multiple-requests",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1),
                first_available(REQ1, sub(SUB0, CLASS_A, mode="All"), sub(SUB1, CLASS_A, 1)),
            )
        ),
        [CA],
        [_two_a],
        features=PRIO,
        expect=[allocation(NS1, r(REQ0, DEV1), r(R1S1, DEV2))],
    ),
)
case(
    "prioritized-list-disabled",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 1)))),
        [CA],
        _one,
        only=True,
        error="claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
    ),
)
_8g_4g = [
    slice_with(SLICE1, NODE1, POOL1, DRIVER_A, mem_device(DEV1, "8Gi")),
    slice_with(SLICE2, NODE1, POOL2, DRIVER_A, mem_device(DEV2, "4Gi")),
]
case(
    "prioritized-list-multi-request",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ1, CLASS_A, 1, memory_at_least("8Gi")),
                first_available(
                    REQ0, sub(SUB0, CLASS_A, 1, memory_at_least("8Gi")), sub(SUB1, CLASS_A, 1, memory_at_least("4Gi"))
                ),
            )
        ),
        [CA],
        _8g_4g,
        features=PRIO,
        expect=[allocation(NS1, r(REQ1, DEV1), r(R0S1, DEV2, POOL2))],
    ),
)
case(
    "prioritized-list-with-backtracking",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ0, sub(SUB0, CLASS_A, 1, memory_at_least("8Gi")), sub(SUB1, CLASS_A, 1, memory_at_least("4Gi"))
                ),
                request(REQ1, CLASS_A, 1, memory_at_least("8Gi")),
            )
        ),
        [CA],
        _8g_4g,
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV2, POOL2), r(REQ1, DEV1))],
    ),
)
case(
    "prioritized-list-too-many-in-first-subrequest",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B, 500), sub(SUB1, CLASS_A, 1)))),
        [CA, CB],
        _one,
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV1))],
    ),
)
case(
    "prioritized-list-allocation-mode-all",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, mode="All"), sub(SUB1, CLASS_B, 1)))),
        [CA, CB],
        [_two_a, slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
        allocated=[(DRIVER_A, POOL1, DEV2)],
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV1, POOL2, DRIVER_B))],
    ),
)
_type = f"{DRIVER_A}/type"
_typed = [
    slice_with(
        SLICE1,
        NODE1,
        POOL1,
        DRIVER_A,
        device(DEV1, None, {"type": "a"}),
        device(DEV2, None, {"type": "b"}),
        device(DEV3, None, {"type": "b"}),
    )
]
case(
    "prioritized-list-allocation-mode-all-with-selectors",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ0,
                    sub(SUB0, CLASS_A, 1, cel('device.attributes["driver-a"].type == "c"'), mode="All"),
                    sub(SUB1, CLASS_A, 1, cel('device.attributes["driver-a"].type == "b"'), mode="All"),
                ),
            )
        ),
        [CA],
        _typed,
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV2), r(R0S1, DEV3))],
    ),
)
case(
    "prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ0,
                    sub(SUB0, CLASS_A, 1, cel('device.attributes["driver-a"].type == "b"'), mode="All"),
                    sub(SUB1, CLASS_A, 1),
                ),
            )
        ),
        [CA],
        [*_typed, slice_with(SLICE2, NODE1, POOL2, DRIVER_A, device(DEV1, None, {"type": "b"}))],
        features=PRIO,
        expect=[allocation(NS1, r(R0S0, DEV2), r(R0S0, DEV3), r(R0S0, DEV1, POOL2))],
    ),
)
case(
    "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ0,
                    sub(SUB0, CLASS_A, 1, cel('device.attributes["driver-a"].type == "b"'), mode="All"),
                    sub(SUB1, CLASS_A, 1),
                ),
            )
        ),
        [CA],
        [*_typed, slice_with(SLICE2, NODE2, POOL2, DRIVER_A, device(DEV1, None, {"type": "b"}))],
        features=PRIO,
        expect=[allocation(NS1, r(R0S0, DEV2), r(R0S0, DEV3))],
    ),
)
case(
    "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, "class-b-only", 1, mode="All"), sub(SUB1, CLASS_A, 1)))),
        [CA, klass("class-b-only", DRIVER_A, 'device.attributes["driver-a"].type == "b"')],
        _typed,
        features=PRIO,
        expect=[allocation(NS1, r(R0S0, DEV2), r(R0S0, DEV3))],
    ),
)
case(
    "prioritized-list-max-allocation-limit-request",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(REQ0, sub(SUB0, CLASS_A, 32), sub(SUB1, CLASS_A, 16)),
                first_available(REQ1, sub(SUB0, CLASS_A, 32), sub(SUB1, CLASS_A, 16)),
            )
        ),
        [CA],
        [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 32)],
        features=PRIO,
        expect=[
            allocation(
                NS1, *(r(R0S1, f"device-{i}") for i in range(16)), *(r(R1S1, f"device-{i}") for i in range(16, 32))
            )
        ],
        invocations=75,
    ),
)
case(
    "prioritized-list-max-allocation-allocation-mode-all",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_B, 2),
                first_available(REQ1, sub(SUB0, CLASS_A, mode="All"), sub(SUB1, CLASS_A, 2)),
            )
        ),
        [CA, CB],
        [slice_many(SLICE1, NODE1, POOL1, DRIVER_A, 31), slice_many(SLICE1, NODE1, POOL1, DRIVER_B, 2)],
        features=PRIO,
        expect=[
            allocation(
                NS1,
                r(REQ0, DEV0, driver=DRIVER_B),
                r(REQ0, DEV1, driver=DRIVER_B),
                r(R1S1, DEV0),
                r(R1S1, DEV1),
            )
        ],
        max_invocations=42,  # upstream's exact fixture differs; 42 is its count
    ),
)
_all_then_b = claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, mode="All"), sub(SUB1, CLASS_B, 1)))
case(
    "all-devices-slice-without-devices-prioritized-list",
    Case(
        A(_all_then_b),
        [CA, CB],
        [slice_none(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV1, POOL2, DRIVER_B))],
    ),
)
case(
    "all-devices-no-slices-prioritized-list",
    Case(
        A(_all_then_b),
        [CA, CB],
        [slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV1, POOL2, DRIVER_B))],
    ),
)
case(
    "all-devices-some-allocated-prioritized-list",
    Case(
        A(_all_then_b),
        [CA, CB],
        [_two_a, slice_one(SLICE2, NODE1, POOL2, DRIVER_B)],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=PRIO,
        expect=[allocation(NS1, r(R0S1, DEV1, POOL2, DRIVER_B))],
    ),
)

# ======================================================================================================
# H. Partitionable devices / shared counters
# ======================================================================================================


def cdev(name: str, *consumes: tuple[str, dict[str, str]], **kw: Any) -> Raw:
    """A device consuming counters; its capacities mirror the counters (upstream ``fromCounters``)."""
    return device(name, counters=list(consumes), from_counters=True, **kw)


def mem(q: str, cset: str = CSET1) -> tuple[str, dict[str, str]]:
    return (cset, {"memory": q})


def counters_slice(name: str, *sets: Raw, node_sel: Any = NODE1, pool_: Any = None) -> Raw:
    return slice_counters(name, node_sel, pool_ or pool(POOL1, 2), DRIVER_A, *sets)


def devices_slice(name: str, *devs: Raw, node_sel: Any = NODE1, pool_: Any = None) -> Raw:
    return slice_with(name, node_sel, pool_ or pool(POOL1, 2), DRIVER_A, *devs)


_mem_8 = counters_slice(SLICE2, counter_set(CSET1, {"memory": "8Gi"}))
_d4_6_4 = devices_slice(SLICE1, cdev(DEV1, mem("4Gi")), cdev(DEV2, mem("6Gi")), cdev(DEV3, mem("4Gi")))
_prio_6_4 = first_available(
    REQ1, sub(SUB0, CLASS_A, 1, memory_at_least("6Gi")), sub(SUB1, CLASS_A, 1, memory_at_least("4Gi"))
)

case(
    "partitionable-devices-single-device",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi")])), _mem_8],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "partitionable-devices-prioritized-list",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), _prio_6_4)),
        [CA],
        [_d4_6_4, _mem_8],
        features=PRIO_PART,
        expect=[allocation(NS1, r(REQ0, DEV1), r(R1S1, DEV3))],
    ),
)
case(
    "partitionable-devices-multiple-devices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))),
        [CA],
        [_d4_6_4, _mem_8],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ1, DEV3))],
    ),
)
case(
    "partitionable-devices-multiple-capacity-pools",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), _prio_6_4)),
        [CA],
        [
            devices_slice(
                SLICE1,
                cdev(DEV1, mem("4Gi"), (CSET2, {"cpus": "4"})),
                cdev(DEV2, mem("6Gi"), (CSET2, {"cpus": "6"})),
                cdev(DEV3, mem("4Gi"), (CSET2, {"cpus": "4"})),
            ),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "18Gi"}), counter_set(CSET2, {"cpus": "8"})),
        ],
        features=PRIO_PART,
        expect=[allocation(NS1, r(REQ0, DEV1), r(R1S1, DEV3))],
    ),
)
case(
    "partitionable-devices-multiple-counters",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(
                    DEV1, counters=[(CSET1, {"memory": "4Gi", "cpus": "6"}), (CSET2, {"cpus": "4", "memory": "2Gi"})]
                ),
                device(
                    DEV2, counters=[(CSET1, {"memory": "6Gi", "cpus": "4"}), (CSET2, {"cpus": "6", "memory": "6Gi"})]
                ),
                device(
                    DEV3, counters=[(CSET1, {"memory": "4Gi", "cpus": "4"}), (CSET2, {"cpus": "4", "memory": "4Gi"})]
                ),
            ),
            counters_slice(
                SLICE2,
                counter_set(CSET1, {"cpus": "8", "memory": "18Gi"}),
                counter_set(CSET2, {"cpus": "12", "memory": "18Gi"}),
            ),
        ],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV2), r(REQ1, DEV3))],
    ),
)


def _cm(cpus: str, memory: str) -> tuple[str, dict[str, str]]:
    return (CSET1, {"cpus": cpus, "memory": memory})


case(
    "partitionable-devices-multiple-pools",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1))),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV1, counters=[_cm("6", "4Gi")]),
                device(DEV2, counters=[_cm("4", "6Gi")]),
                device(DEV3, counters=[_cm("4", "4Gi")]),
            ),
            counters_slice(SLICE2, counter_set(CSET1, {"cpus": "8", "memory": "18Gi"})),
            devices_slice(
                SLICE3,
                device(DEV1, counters=[_cm("6", "4Gi")]),
                device(DEV2, counters=[_cm("1", "7Gi")]),
                device(DEV3, counters=[_cm("1", "7Gi")]),
                pool_=pool(POOL2, 2),
            ),
            counters_slice(SLICE4, counter_set(CSET1, {"cpus": "8", "memory": "18Gi"}), pool_=pool(POOL2, 2)),
        ],
        allocated=[(DRIVER_A, POOL1, DEV2), (DRIVER_A, POOL1, DEV3), (DRIVER_A, POOL2, DEV1)],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV2, POOL2), r(REQ1, DEV3, POOL2))],
    ),
)
case(
    "partitionable-devices-unused-counters-in-counter-set",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV1, counters=[mem("5Gi")]),
                device(DEV2, counters=[mem("4Gi")]),
                device(DEV3, counters=[mem("4Gi")]),
            ),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "8Gi", "unused": "1Gi"})),
        ],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV2), r(REQ0, DEV3))],
    ),
)
_18 = counters_slice(SLICE2, counter_set(CSET1, {"memory": "18Gi"}))
case(
    "partitionable-devices-no-capacity-available",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [devices_slice(SLICE1, device(DEV1, counters=[mem("16Gi")]), device(DEV2, counters=[mem("4Gi")])), _18],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=PARTITIONABLE,
        expect=None,
    ),
)
case(
    "partitionable-devices-overallocated-capacity-pool",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [devices_slice(SLICE1, device(DEV1, counters=[mem("20Gi")]), device(DEV2, counters=[mem("1Gi")])), _18],
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=PARTITIONABLE,
        expect=None,
    ),
)
case(
    "partitionable-devices-disabled-device-consumes-counters",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, counters=[mem("4Gi")]))],
        only=True,
        expect=None,
    ),
)
case(
    "partitionable-devices-disabled-other-device-do-not-consume-counters",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, counters=[mem("4Gi")]), device(DEV2))],
        only=True,
        expect=[allocation(NS1, r(REQ0, DEV2))],
    ),
)
case(
    "partitionable-devices-disabled-per-device-node-selection",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [slice_with(SLICE1, PER_DEVICE, POOL1, DRIVER_A, device(DEV1, node_name=NODE1))],
        only=True,
        expect=None,
    ),
)
case(
    "partitionable-devices-per-device-node-selection-nodename",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_A, 1)))),
        [CA],
        [slice_with(SLICE1, PER_DEVICE, POOL1, DRIVER_A, device(DEV1, node_name=NODE1), device(DEV2, node_name=NODE2))],
        features=PRIO_PART,
        expect=[allocation(NS1, r(R0S1, DEV1))],
    ),
)
case(
    "partitionable-devices-per-device-node-selection-node-selector",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        [
            slice_with(
                SLICE1,
                PER_DEVICE,
                POOL1,
                DRIVER_A,
                device(DEV1, node_selector=label_selector("region", REGION2)),
                device(DEV2, node_selector=label_selector("region", REGION1)),
            )
        ],
        features=PARTITIONABLE,
        expect=[allocation(label_selector("region", REGION1), r(REQ0, DEV2))],
    ),
)
case(
    "partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 4))),
        [CA],
        [
            slice_with(
                SLICE1,
                PER_DEVICE,
                POOL1,
                DRIVER_A,
                device(DEV1, node_selector=label_selector("region", REGION1)),
                device(DEV2, node_name=NODE1),
                device(DEV3, all_nodes=True),
            ),
            slice_one(SLICE2, NODE1, POOL2, DRIVER_A),
        ],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ0, DEV2), r(REQ0, DEV3), r(REQ0, DEV1, POOL2))],
    ),
)
case(
    "partitionable-devices-with-attribute-selector",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 2),
                request(REQ1, CLASS_A, 1, cel('device.attributes["driver-a"].special == true')),
            )
        ),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV1, None, {"special": True}, counters=[(CSET1, {"cpu1": "1"})]),
                device(DEV2, None, {"special": False}, counters=[(CSET1, {"cpu2": "1"})]),
                device(DEV3, None, {"special": False}, counters=[(CSET1, {"cpu3": "1"})]),
            ),
            counters_slice(SLICE2, counter_set(CSET1, {"cpu1": "1", "cpu2": "1", "cpu3": "1"})),
        ],
        features=PARTITIONABLE,
        expect=[allocation(NS1, r(REQ0, DEV2), r(REQ0, DEV3), r(REQ1, DEV1))],
    ),
)
_simple_claim = A(claim(CLAIM0, request(REQ0, CLASS_A, 1)))
case(
    "partitionable-devices-same-counter-set-name-in-different-resource-slices",
    Case(
        _simple_claim,
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV1, counters=[mem("4Gi")])),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "8Gi"}), pool_=pool(POOL1, 3)),
            counters_slice(SLICE3, counter_set(CSET1, {"memory": "8Gi"}), pool_=pool(POOL1, 3)),
        ],
        features=PARTITIONABLE,
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)
case(
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set",
    Case(
        _simple_claim,
        [CA],
        [devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi", "no-such-set")])), _mem_8],
        features=PARTITIONABLE,
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)
case(
    "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
    Case(
        _simple_claim,
        [CA],
        [devices_slice(SLICE1, device(DEV1, counters=[(CSET1, {"no-such-counter": "1"})])), _mem_8],
        features=PARTITIONABLE,
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)
case(
    "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
    Case(
        _simple_claim,
        [CA],
        [
            slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, counters=[mem("4Gi")])),
            slice_counters(SLICE2, NODE1, POOL2, DRIVER_A, counter_set(CSET1, {"memory": "8Gi"})),
        ],
        features=PARTITIONABLE,
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)
_multi_node_pool = [
    devices_slice(SLICE1, cdev(DEV1, mem("6Gi")), cdev(DEV2, mem("2Gi")), pool_=pool(POOL1, 3)),
    devices_slice(SLICE2, cdev(DEV3, mem("6Gi")), cdev(DEV4, mem("2Gi")), node_sel=NODE2, pool_=pool(POOL1, 3)),
    counters_slice(SLICE3, counter_set(CSET1, {"memory": "8Gi"}), node_sel=ALL_NODES, pool_=pool(POOL1, 3)),
]
case(
    "partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ0, sub(SUB0, CLASS_A, 1, memory_at_least("6Gi")), sub(SUB1, CLASS_A, 1, memory_at_least("2Gi"))
                ),
            )
        ),
        [CA],
        _multi_node_pool,
        allocated=[(DRIVER_A, POOL1, DEV3)],
        features=PRIO_PART,
        expect=[allocation(NS1, r(R0S1, DEV2))],
    ),
)
case(
    "partitionable-devices-devices-consume-counter-set-in-different-nodes",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1))),
        [CA],
        _multi_node_pool,
        node=node(NODE2, REGION2),
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=PARTITIONABLE,
        expect=[allocation(NS2, r(REQ0, DEV4))],
    ),
)
case(
    "partitionable-devices-validation-error-on-non-targeting-slice",
    Case(
        _simple_claim,
        [CA],
        [
            devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi")]), pool_=pool(POOL1, 3)),
            devices_slice(
                SLICE2, device(DEV2, counters=[mem("4Gi", "no-such-set")]), node_sel=NODE2, pool_=pool(POOL1, 3)
            ),
            counters_slice(SLICE3, counter_set(CSET1, {"memory": "8Gi"}), pool_=pool(POOL1, 3)),
        ],
        features=PARTITIONABLE,
        error="invalid resource pools were encountered",
        error_type=FailedOnNode,
    ),
)

# ======================================================================================================
# I. Device taints
# ======================================================================================================

_tainted_two = slice_with(
    SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[TAINT_NO_SCHEDULE]), device(DEV2, taints=[TAINT_NO_EXECUTE])
)
_tainted_both = slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE]))
case("tainted-two-devices", Case(_simple_claim, [CA], [_tainted_two], features=TAINTS, expect=None))
case("tainted-one-device-two-taints", Case(_simple_claim, [CA], [_tainted_both], features=TAINTS, expect=None))
case(
    "tainted-two-devices-tolerated",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, tolerations=[TOL_NO_EXECUTE]))),
        [CA],
        [_tainted_two],
        features=TAINTS,
        expect=[allocation(NS1, r(REQ0, DEV2, tolerations=[TOL_NO_EXECUTE]))],
    ),
)
case(
    "tainted-two-devices-prioritized-list-tolerated",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(REQ0, sub(SUB0, CLASS_A, 1), sub(SUB1, CLASS_A, 1, tolerations=[TOL_NO_EXECUTE])),
            )
        ),
        [CA],
        [_tainted_two],
        features=features(device_taints=True, prioritized_list=True),
        expect=[allocation(NS1, r(R0S1, DEV2, tolerations=[TOL_NO_EXECUTE]))],
    ),
)
case(
    "tainted-no-effect",
    Case(
        _simple_claim,
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[TAINT_NONE]))],
        features=TAINTS,
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    # unknown (future) effects do not block either
    "tainted-unknown-effect",
    Case(
        _simple_claim,
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[taint(effect="FutureEffect")]))],
        features=TAINTS,
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    "tainted-one-device-two-taints-both-tolerated",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, tolerations=[TOL_NO_SCHEDULE, TOL_NO_EXECUTE]))),
        [CA],
        [_tainted_both],
        features=TAINTS,
        expect=[allocation(NS1, r(REQ0, DEV1, tolerations=[TOL_NO_SCHEDULE, TOL_NO_EXECUTE]))],
    ),
)
case(
    # toleration value must match for operator Equal (the API default)
    "tainted-toleration-value-mismatch",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, tolerations=[{"key": "taint-key", "value": "other"}]))),
        [CA],
        [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[TAINT_NO_SCHEDULE]))],
        features=TAINTS,
        expect=None,
    ),
)
case("tainted-disabled", Case(_simple_claim, [CA], [_tainted_both], only=True, expect=[allocation(NS1, r(REQ0, DEV1))]))
_tainted_one = [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, taints=[TAINT_NO_SCHEDULE]))]
_prio_b_then_a = A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_B, 1), sub(SUB1, CLASS_A, 1))))
case(
    "tainted-prioritized-list",
    Case(
        _prio_b_then_a,
        [CA, CB],
        _tainted_one,
        features=features(device_taints=True, prioritized_list=True),
        expect=None,
    ),
)
case(
    "tainted-prioritized-list-disabled",
    Case(_prio_b_then_a, [CA, CB], _tainted_one, features=PRIO, only=True, expect=[allocation(NS1, r(R0S1, DEV1))]),
)
case(
    "tainted-admin-access",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        _tainted_one,
        features=features(device_taints=True, admin_access=True),
        expect=None,
    ),
)
case(
    "tainted-admin-access-disabled",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        _tainted_one,
        features=ADMIN,
        only=True,
        expect=[allocation(NS1, r(REQ0, DEV1, admin=True))],
    ),
)
case(
    "tainted-all-devices-single",
    Case(A(claim(CLAIM0, all_request(REQ0, CLASS_A))), [CA], _tainted_one, features=TAINTS, expect=None),
)
case(
    "tainted-all-devices-single-disabled",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
        [CA],
        _tainted_one,
        only=True,
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)

# ======================================================================================================
# J. Binding conditions
# ======================================================================================================

_bc = ["condition"]
_bfc = ["failed"]
case(
    "device-binding-conditions",
    Case(
        _simple_claim,
        [CA],
        [
            slice_with(
                SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc)
            )
        ],
        features=BINDING,
        expect=[allocation(NS1, r(REQ0, DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc))],
    ),
)
case(
    "binding-conditions-multiple-devices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_with(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEV1, binding_conditions=["c1"], binding_failure_conditions=["f1"]),
                device(DEV2, binding_conditions=["c2"], binding_failure_conditions=["f2"]),
            )
        ],
        features=BINDING,
        expect=[
            allocation(
                NS1,
                r(REQ0, DEV1, binding_conditions=["c1"], binding_failure_conditions=["f1"]),
                r(REQ0, DEV2, binding_conditions=["c2"], binding_failure_conditions=["f2"]),
            )
        ],
    ),
)
case(
    "binding-conditions-with-and-without",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_with(
                SLICE1,
                NODE1,
                POOL1,
                DRIVER_A,
                device(DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc),
                device(DEV2),
            )
        ],
        features=BINDING,
        expect=[allocation(NS1, r(REQ0, DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc), r(REQ0, DEV2))],
    ),
)
case(
    "binding-conditions-without-feature-gate",
    Case(
        _simple_claim,
        [CA],
        [
            slice_with(
                SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc)
            )
        ],
        only=True,
        expect=None,
    ),
)
case(
    "node-restriction",
    Case(
        _simple_claim,
        [CA],
        [
            slice_with(
                SLICE1,
                label_selector("region", REGION1),
                POOL1,
                DRIVER_A,
                device(DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc, binds_to_node=True),
            )
        ],
        features=BINDING,
        expect=[allocation(NS1, r(REQ0, DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc))],
    ),
)
_bc_part = features(binding_conditions=True, partitionable_devices=True)
case(
    "partitionable-devices-with-binding-conditions",
    Case(
        _simple_claim,
        [CA],
        [
            devices_slice(SLICE1, cdev(DEV1, mem("4Gi"), binding_conditions=_bc, binding_failure_conditions=_bfc)),
            _mem_8,
        ],
        features=_bc_part,
        expect=[allocation(NS1, r(REQ0, DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc))],
    ),
)
case(
    "partitionable-devices-with-binding-conditions-some-devices-no-conditions",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 3))),
        [CA],
        [
            devices_slice(
                SLICE1,
                cdev(DEV1, mem("2Gi"), binding_conditions=_bc, binding_failure_conditions=_bfc),
                cdev(DEV2, mem("2Gi")),
                cdev(DEV3, mem("2Gi"), binding_conditions=_bc),
            ),
            _mem_8,
        ],
        features=_bc_part,
        expect=[
            allocation(
                NS1,
                r(REQ0, DEV1, binding_conditions=_bc, binding_failure_conditions=_bfc),
                r(REQ0, DEV2),
                r(REQ0, DEV3, binding_conditions=_bc),
            )
        ],
    ),
)
case(
    "partitionable-devices-with-binding-conditions-multi-slices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_with(SLICE4, NODE1, pool(POOL1, 4), DRIVER_A, cdev(DEV1, mem("2Gi"), binding_conditions=_bc)),
            slice_with(SLICE3, NODE1, pool(POOL1, 4), DRIVER_A, cdev(DEV3, mem("2Gi"), binding_conditions=_bc)),
            slice_with(SLICE2, NODE1, pool(POOL1, 4), DRIVER_A, cdev(DEV2, mem("2Gi"), binding_conditions=_bc)),
            counters_slice(SLICE1, counter_set(CSET1, {"memory": "8Gi"}), pool_=pool(POOL1, 4)),
        ],
        features=_bc_part,
        expect=[allocation(NS1, r(REQ0, DEV2, binding_conditions=_bc), r(REQ0, DEV3, binding_conditions=_bc))],
    ),
)
case(
    "partitionable-devices-with-binding-conditions-and-taints",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            devices_slice(
                SLICE1,
                cdev(DEV1, mem("2Gi"), binding_conditions=_bc),
                cdev(DEV2, mem("2Gi"), binding_conditions=_bc, taints=[TAINT_NO_SCHEDULE]),
            ),
            _mem_8,
        ],
        features=features(binding_conditions=True, partitionable_devices=True, device_taints=True),
        expect=None,
    ),
)
case(
    "partitionable-devices-with-binding-conditions-and-taints-tolerated",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2, tolerations=[TOL_NO_SCHEDULE]))),
        [CA],
        [
            devices_slice(
                SLICE1,
                cdev(DEV1, mem("2Gi"), binding_conditions=_bc),
                cdev(DEV2, mem("2Gi"), binding_conditions=_bc, taints=[TAINT_NO_SCHEDULE]),
            ),
            _mem_8,
        ],
        features=features(binding_conditions=True, partitionable_devices=True, device_taints=True),
        expect=[
            allocation(
                NS1,
                r(REQ0, DEV1, binding_conditions=_bc, tolerations=[TOL_NO_SCHEDULE]),
                r(REQ0, DEV2, binding_conditions=_bc, tolerations=[TOL_NO_SCHEDULE]),
            )
        ],
    ),
)

# ======================================================================================================
# K. Consumable capacity / allowMultipleAllocations
# ======================================================================================================

CA_MULTI = klass(CLASS_A, DRIVER_A, multi=True)
CA_DEDICATED = klass(CLASS_A, DRIVER_A, multi=False)


def mdev(name: str, capacity: dict[str, Any] | None = None, **kw: Any) -> Raw:
    return device(name, capacity, multi=True, **kw)


def one_slice(*devs: Raw) -> list[Raw]:
    return [slice_with(SLICE1, NODE1, POOL1, DRIVER_A, *devs)]


def creq(name: str, q: str | None, cls: str = CLASS_A, count: int = 1) -> Raw:
    return request(name, cls, count, capacity=cap_request(q) if q is not None else None)


def share(req: str, dev: str, consumed: dict[str, str] | None = None, pool_: str = POOL1) -> Raw:
    return r(req, dev, pool_, share=True, consumed=consumed)


case(
    "consumable-capacity-disabled-feature",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA],
        one_slice(mdev(DEV1, {CAP0: "2"})),
        only=True,
        error="has capacity requests, but the DRAConsumableCapacity feature is disabled",
    ),
)
case(
    "consumable-capacity-disabled-feature-with-prioritized-list",
    Case(
        A(claim(CLAIM0, first_available(REQ0, sub(SUB0, CLASS_A, 1, capacity=cap_request("1"))))),
        [CA],
        one_slice(mdev(DEV1, {CAP0: "2"})),
        features=PRIO,
        only=True,
        error="claim claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature is "
        "disabled",
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP1: "2"})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A, capacity=cap_request("1")))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP1: "2"})),
        features=CONSUMABLE,
        expect=None,
    ),
)
_two_claims = A(claim(CLAIM0, request(REQ0, CLASS_A, 1)), claim(CLAIM1, request(REQ0, CLASS_A, 1)))
case(
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
    Case(
        _two_claims,
        [CA_MULTI],
        one_slice(mdev(DEV1)),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1)), allocation(NS1, share(REQ0, DEV1))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
    Case(
        _two_claims,
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: "2"}), mdev(DEV2, {CAP0: "2"})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"})), allocation(NS1, share(REQ0, DEV2, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
    Case(_two_claims, [CA_MULTI], one_slice(mdev(DEV1, {CAP0: "2"})), features=CONSUMABLE, expect=None),
)
_two_claims_1 = A(claim(CLAIM0, creq(REQ0, "1")), claim(CLAIM1, creq(REQ0, "1")))
case(
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
    Case(
        _two_claims_1,
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: "2"})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "1"})), allocation(NS1, share(REQ0, DEV1, {CAP0: "1"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
    Case(
        _two_claims,
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("4")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"})), allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy",
    Case(
        _two_claims,
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_values("1", "0")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "0"})), allocation(NS1, share(REQ0, DEV1, {CAP0: "0"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_values("1", "0")})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
    Case(
        _two_claims_1,
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("4")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"})), allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-range-policy-step",
    Case(
        A(claim(CLAIM0, creq(REQ0, "3"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("4")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "4"}))],
    ),
)
case(
    # range + step with binary-suffixed quantities: 1500Mi -> min 1Gi + 2 * 256Mi = 1536Mi
    "consumable-capacity-range-policy-step-round-up-quantities",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1500Mi"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("8Gi", default="1Gi", min="1Gi", step="256Mi", max="4Gi")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "1536Mi"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_values("4", "1", "2")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_values("4", "1", "3")})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "3"}))],
    ),
)
case(
    # larger than every valid value -> the request itself, which violates the policy
    "consumable-capacity-valid-values-policy-larger-than-set",
    Case(
        A(claim(CLAIM0, creq(REQ0, "4"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_values("10", "1", "3")})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2")), claim(CLAIM1, creq(REQ0, "2"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: "2"})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
    Case(
        A(claim(CLAIM0, creq(REQ0, "6"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("10")})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("4")})),
        shares=[Share(DRIVER_A, POOL1, DEV1, {CAP0: "2"})],
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("2")}), mdev(DEV2, {CAP0: policy_range("2")})),
        shares=[Share(DRIVER_A, POOL1, DEV1, {CAP0: "2"})],
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV2, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-with-multi-allocatable-device-backtrack",
    Case(
        A(
            claim(CLAIM0, creq(REQ0, "2"), creq(REQ1, "2"), constraints=[match(STRING_ATTR)]),
            claim(CLAIM1, creq(REQ0, "2")),
        ),
        [CA],
        one_slice(
            mdev(DEV2, {CAP0: policy_range("2")}, attributes={"stringAttribute": "stringAttributeValue1"}),
            mdev(DEV1, {CAP0: policy_range("4")}, attributes={"stringAttribute": "stringAttributeValue2"}),
        ),
        features=CONSUMABLE,
        expect=[
            allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}), share(REQ1, DEV1, {CAP0: "2"})),
            allocation(NS1, share(REQ0, DEV2, {CAP0: "2"})),
        ],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-subrequest",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ0,
                    sub(SUB0, CLASS_A, 1, capacity=cap_request("4")),
                    sub(SUB1, CLASS_A, 1, capacity=cap_request("2")),
                ),
            )
        ),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("2")})),
        features=features(consumable_capacity=True, prioritized_list=True),
        expect=[allocation(NS1, share(R0S1, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("2")})),
        shares=[Share(DRIVER_A, POOL1, DEV1, {CAP0: "2"})],
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A, capacity=cap_request("2")))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: "2"}), mdev(DEV2)),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A, capacity=cap_request("2")))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: "2"}), mdev(DEV2, {CAP0: "1"})),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "2"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"), all_request(REQ1, CLASS_A, capacity=cap_request("1")))),
        [CA],
        one_slice(mdev(DEV1, {CAP0: "2"}), mdev(DEV2, {CAP0: "1"})),
        features=CONSUMABLE,
        expect=[
            allocation(
                NS1, share(REQ0, DEV1, {CAP0: "1"}), share(REQ1, DEV1, {CAP0: "1"}), share(REQ1, DEV2, {CAP0: "1"})
            )
        ],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A, capacity=cap_request("1")))),
        [CA],
        one_slice(mdev(DEV1, {CAP0: "2"}), mdev(DEV2, {CAP0: "1"})),
        shares=[Share(DRIVER_A, POOL1, DEV1, {CAP0: "1"})],
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1, {CAP0: "1"}), share(REQ0, DEV2, {CAP0: "1"}))],
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"), all_request(REQ1, CLASS_A, capacity=cap_request("1")))),
        [CA],
        one_slice(mdev(DEV1, {CAP0: "1"}), mdev(DEV2, {CAP0: "1"})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
    Case(
        A(claim(CLAIM0, all_request(REQ0, CLASS_A, capacity=cap_request("1")))),
        [CA],
        one_slice(mdev(DEV1, {CAP0: "1"}), mdev(DEV2, {CAP0: "1"})),
        shares=[Share(DRIVER_A, POOL1, DEV1, {CAP0: "1"})],
        features=CONSUMABLE,
        # v0.37.2 table: "device-1 capacity-exhausted but still matches; All fails, not device-2 only" (the
        # All list is built with static capacity; the remaining capacity is checked when a device is taken)
        expect=None,
    ),
)
case(
    "consumable-capacity-dedicated-device-with-consumable-capacity-request",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA_DEDICATED],
        one_slice(device(DEV1, {CAP0: "1"})),
        features=CONSUMABLE,
        expect=[allocation(NS1, r(REQ0, DEV1))],
    ),
)
case(
    # a dedicated device must still hold the requested amount
    "consumable-capacity-dedicated-device-with-too-large-capacity-request",
    Case(
        A(claim(CLAIM0, creq(REQ0, "2"))),
        [CA_DEDICATED],
        one_slice(device(DEV1, {CAP0: "1"})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
    Case(
        _two_claims_1,
        [CA_DEDICATED],
        one_slice(device(DEV1, {CAP0: policy_range("2")})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA_DEDICATED],
        one_slice(mdev(DEV1, {CAP0: "1"})),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA_MULTI],
        one_slice(mdev(DEV1, {CAP0: policy_range("2")})),
        allocated=[(DRIVER_A, POOL1, DEV1)],
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    # the device is no longer shareable, but consumption recorded for its earlier shares still counts
    "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
    Case(
        A(claim(CLAIM0, creq(REQ0, "1"))),
        [CA],
        one_slice(device(DEV1, {CAP0: "2"})),
        shares=[Share(DRIVER_A, POOL1, DEV1, {CAP0: "2"})],
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "allow-multiple-allocations-with-partitionable-device",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), _prio_6_4)),
        [CA],
        [
            devices_slice(
                SLICE1,
                cdev(DEV1, mem("4Gi"), multi=True),
                cdev(DEV2, mem("6Gi"), multi=True),
                cdev(DEV3, mem("4Gi"), multi=True),
            ),
            _mem_8,
        ],
        features=features(consumable_capacity=True, partitionable_devices=True, prioritized_list=True),
        expect=[allocation(NS1, share(REQ0, DEV1, {"memory": "4Gi"}), share(R1S1, DEV3, {"memory": "4Gi"}))],
    ),
)
case(
    "allow-multiple-allocations-with-shared-device-counter-cross-cycle",
    Case(
        _simple_claim,
        [CA],
        [
            devices_slice(SLICE1, cdev(DEV1, mem("4Gi"), multi=True), device(DEV2, counters=[mem("4Gi")])),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "4Gi"})),
        ],
        shares=[Share(DRIVER_A, POOL1, DEV1, {"memory": "4Gi"})],
        features=features(consumable_capacity=True, partitionable_devices=True),
        expect=None,
    ),
)
case(
    "consumable-capacity-with-partitionable-device-multiple-capacity-pools",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1, capacity={CAP0: "1", CAP1: "2"}),
                first_available(
                    REQ1,
                    sub(SUB0, CLASS_A, 1, cel('device.attributes["driver-a"].big == true')),
                    sub(SUB1, CLASS_A, 1, capacity={CAP0: "1", CAP1: "1"}),
                ),
                request(REQ2, CLASS_A, 1),
            )
        ),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV1, {CAP0: "2", CAP1: "4"}, {"big": False}, counters=[mem("4Gi")], multi=True),
                device(DEV2, {CAP0: "2", CAP1: "4"}, {"big": True}, counters=[mem("6Gi")], multi=True),
                device(DEV3, None, {"big": False}, counters=[mem("4Gi")]),
            ),
            _mem_8,
        ],
        features=features(consumable_capacity=True, partitionable_devices=True, prioritized_list=True),
        expect=[
            allocation(
                NS1,
                share(REQ0, DEV1, {CAP0: "1", CAP1: "2"}),
                share(R1S1, DEV1, {CAP0: "1", CAP1: "1"}),
                r(REQ2, DEV3),
            )
        ],
    ),
)

# ======================================================================================================
# L. distinctAttribute
# ======================================================================================================

ID_ATTR = f"{DRIVER_A}/id"


def ids(*values: int, multi: bool = True) -> list[Raw]:
    return one_slice(*(device(f"device-{i + 1}", None, {"id": v}, multi=multi) for i, v in enumerate(values)))


case(
    "with-distinct-constraints",
    Case(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_A, 1),
                constraints=[
                    distinct(ID_ATTR, REQ0, REQ1),
                    distinct(ID_ATTR, REQ1, REQ2),
                    distinct(ID_ATTR, REQ0, REQ2),
                ],
            )
        ),
        [CA],
        ids(1, 2, 3, 4),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1), share(REQ1, DEV2), share(REQ2, DEV3))],
    ),
)
case(
    "with-distinct-constraints-attribute-not-set",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), constraints=[distinct(f"{DRIVER_A}/missing")])),
        [CA],
        ids(1, 2),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "with-distinct-constraints-unknown-type-attribute",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), constraints=[distinct(ID_ATTR)])),
        [CA],
        one_slice(mdev(DEV1, attributes={"id": {}})),
        features=CONSUMABLE,
        error="unsupported attribute value",
    ),
)
case(
    "with-distinct-constraints-with-subrequests",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(REQ0, sub(SUB0, CLASS_A, 1)),
                first_available(
                    REQ1, sub(SUB0, CLASS_A, 1, cel('device.attributes["driver-a"].id == 1')), sub(SUB1, CLASS_A, 1)
                ),
                first_available(REQ2, sub(SUB0, CLASS_A, 1)),
                constraints=[distinct(ID_ATTR, REQ0, REQ1)],
            )
        ),
        [CA],
        ids(1, 2),
        features=features(consumable_capacity=True, prioritized_list=True),
        expect=[allocation(NS1, share(R0S0, DEV1), share(R1S1, DEV2), share(R2S0, DEV1))],
    ),
)
case(
    "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1), constraints=[distinct(ID_ATTR)])),
        [CA],
        ids(1),
        features=CONSUMABLE,
        expect=None,
    ),
)
case(
    "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1), constraints=[distinct(ID_ATTR)])),
        [CA],
        ids(1, 2),
        features=CONSUMABLE,
        expect=[allocation(NS1, share(REQ0, DEV1), share(REQ1, DEV2))],
    ),
)

# ======================================================================================================
# M. List-type attributes (DRAListTypeAttributes is not implemented: lists never satisfy constraints)
# ======================================================================================================

case(
    "list-attributes-disabled-match-constraint-with-lists",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[match(f"{DRIVER_A}/list")])),
        [CA],
        one_slice(
            device(DEV1, None, {"list": {"strings": ["a", "b"]}}), device(DEV2, None, {"list": {"strings": ["a"]}})
        ),
        expect=None,
    ),
)
case(
    "list-attributes-disabled-distinct-constraint-with-lists",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), constraints=[distinct(f"{DRIVER_A}/list")])),
        [CA],
        one_slice(device(DEV1, None, {"list": {"strings": ["a"]}}), device(DEV2, None, {"list": {"strings": ["b"]}})),
        features=CONSUMABLE,
        expect=None,
    ),
)

# ======================================================================================================
# N. Search efficiency
# ======================================================================================================

_four = [device(DEV1), device(DEV2), device(DEV3), device(DEV4)]
case(
    "check-combinations-within-single-request-single-pool-single-slice",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 5))),
        [CA],
        one_slice(*_four),
        expect=None,
        invocations=16,
    ),
)
case(
    "check-combinations-within-single-request-single-pool-multiple-slices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 5))),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1), device(DEV2)),
            slice_with(SLICE2, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV3), device(DEV4)),
        ],
        expect=None,
        invocations=16,
    ),
)
case(
    "check-combinations-within-single-request-multiple-pools-multiple-slices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 5))),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1)),
            slice_with(SLICE2, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV2)),
            slice_with(SLICE3, NODE1, POOL2, DRIVER_A, device(DEV3), device(DEV4)),
        ],
        expect=None,
        invocations=16,
    ),
)
case(
    "check-combinations-within-single-request-many-pools",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 5))),
        [CA],
        [slice_with(f"slice-{i}", NODE1, f"pool-{i}", DRIVER_A, device(f"device-{i}")) for i in range(1, 5)],
        expect=None,
        invocations=16,
    ),
)
_xy = [
    device(DEV1, None, {"type": "X"}),
    device(DEV2, None, {"type": "Y"}),
    device(DEV3, None, {"type": "Y"}),
]
_type_x = cel('device.attributes["driver-a"].type == "X"')
_x_claim = claim(CLAIM0, request(REQ1, CLASS_A, 2), request(REQ2, CLASS_A, 1, _type_x))
case(
    "check-combinations-with-backtracking",
    Case(
        A(_x_claim),
        [CA],
        one_slice(*_xy),
        expect=[allocation(NS1, r(REQ1, DEV2), r(REQ1, DEV3), r(REQ2, DEV1))],
        invocations=12,
    ),
)
_prepare = ["IsPrepare"]
case(
    "check-combinations-with-backtracking-across-slices-and-pools",
    Case(
        A(_x_claim),
        [CA],
        [
            slice_with(SLICE1, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV1, None, {"type": "X"})),
            slice_with(SLICE2, NODE1, pool(POOL1, 2), DRIVER_A, device(DEV2, None, {"type": "Y"})),
            slice_with(
                SLICE3,
                NODE1,
                POOL2,
                DRIVER_A,
                device(DEV3, None, {"type": "Y"}, binding_conditions=_prepare, binding_failure_conditions=[]),
            ),
        ],
        features=BINDING,
        expect=[allocation(NS1, r(REQ1, DEV2), r(REQ1, DEV3, POOL2, binding_conditions=_prepare), r(REQ2, DEV1))],
        invocations=12,
    ),
)
case(
    "check-combinations-with-prioritized-list",
    Case(
        A(
            claim(
                CLAIM0,
                first_available(
                    REQ1, sub(SUB0, CLASS_A, 3, cel('device.attributes["driver-a"].type == "Y"')), sub(SUB1, CLASS_A, 2)
                ),
                first_available(REQ2, sub(SUB0, CLASS_A, 2), sub(SUB1, CLASS_A, 1, _type_x)),
            )
        ),
        [CA],
        one_slice(*_xy),
        features=PRIO,
        expect=[allocation(NS1, r(R1S1, DEV2), r(R1S1, DEV3), r(R2S1, DEV1))],
        invocations=26,
    ),
)

# ======================================================================================================
# O. Ordering of pools and slices
# ======================================================================================================

case(
    "lexicographical-sorting-pools",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_one(SLICE3, NODE1, POOL3, DRIVER_A),
            slice_one(SLICE2, NODE1, POOL2, DRIVER_A),
            slice_one(SLICE1, NODE1, POOL1, DRIVER_A),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1, POOL1), r(REQ0, DEV1, POOL2))],
    ),
)
case(
    "lexicographical-sorting-pools-with-binding-conditions",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_one(SLICE3, NODE1, POOL3, DRIVER_A),
            slice_one(SLICE2, NODE1, POOL2, DRIVER_A),
            slice_with(SLICE1, NODE1, POOL1, DRIVER_A, device(DEV1, binding_conditions=_bc)),
        ],
        features=BINDING,
        expect=[allocation(NS1, r(REQ0, DEV1, POOL2), r(REQ0, DEV1, POOL3))],
    ),
)
case(
    "lexicographical-sorting-slices",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_with(SLICE3, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV3)),
            slice_with(SLICE2, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV2)),
            slice_with(SLICE1, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV1)),
        ],
        expect=[allocation(NS1, r(REQ0, DEV1), r(REQ0, DEV2))],
    ),
)
case(
    "lexicographical-sorting-slices-with-binding-conditions",
    Case(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [
            slice_with(SLICE3, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV3)),
            slice_with(SLICE2, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV2)),
            slice_with(SLICE1, NODE1, pool(POOL1, 3), DRIVER_A, device(DEV1, binding_conditions=_bc)),
        ],
        features=BINDING,
        expect=[allocation(NS1, r(REQ0, DEV1, binding_conditions=_bc), r(REQ0, DEV2))],
    ),
)
case(
    # pools are ordered by (driver, pool): driver-a/pool-2 before driver-b/pool-1
    "lexicographical-sorting-drivers-before-pools",
    Case(
        A(claim(CLAIM0, request(REQ0, "any", 1))),
        [{"metadata": {"name": "any"}, "spec": {"selectors": [cel("true")]}}],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_B), slice_one(SLICE2, NODE1, POOL2, DRIVER_A)],
        expect=[allocation(NS1, r(REQ0, DEV1, POOL2, DRIVER_A))],
    ),
)


# ======================================================================================================
# The runner
# ======================================================================================================


def _params() -> list[Any]:
    out = []
    for name, c in CASES.items():
        out.append(pytest.param(name, c.features, id=name))
        if not c.only and c.features != ALL_FEATURES:
            out.append(pytest.param(name, ALL_FEATURES, id=f"{name}[all-features]"))
    return out


@pytest.mark.parametrize(("name", "feats"), _params())
def test_allocator(name: str, feats: Features) -> None:
    c = CASES[name]
    kw: dict[str, Any] = {"allocated": c.allocated, "shares": c.shares, "features": feats}
    if c.error is not None:
        with pytest.raises(c.error_type) as exc:
            run_outcome(c.claims, c.classes, c.slices, c.node, **kw)
        assert c.error in str(exc.value)
        if c.error_type is AllocationError and "invalid resource pools" not in c.error:
            assert not isinstance(exc.value, FailedOnNode), "a fatal error must not be reported as per-node"
        return
    out = run_outcome(c.claims, c.classes, c.slices, c.node, **kw)
    assert_allocations(out.raw, c.expect)
    if c.invocations is not None:
        assert out.allocator.invocations == c.invocations
    if c.max_invocations is not None:
        assert out.allocator.invocations <= c.max_invocations


def test_case_count() -> None:
    assert len(CASES) >= 70


# ======================================================================================================
# Deliberate fixes of upstream bugs (dra-semantics.md §2.15): each test fails with the buggy behaviour
# ======================================================================================================


def test_counters_released_when_taint_rejects_candidate() -> None:
    """§2.15.1: upstream reserves device-1's counters, rejects it for its taint and leaks them, so
    device-2 (which needs the same counters) looks exhausted and nothing is allocated."""
    out = run(
        _simple_claim,
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV1, counters=[mem("8Gi")], taints=[TAINT_NO_SCHEDULE]),
                device(DEV2, counters=[mem("8Gi")]),
            ),
            _mem_8,
        ],
        features=ALL_FEATURES,
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV2))])


def test_counters_released_when_constraint_rejects_candidate() -> None:
    """§2.15.1, constraint variant: device-1 fails matchAttribute after its counters were reserved."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1), constraints=[match(NUMA)])),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV0, None, {"numa": 1}),
                device(DEV1, None, {"numa": 2}, counters=[mem("8Gi")]),
                device(DEV2, None, {"numa": 1}, counters=[mem("8Gi")]),
            ),
            _mem_8,
        ],
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV0), r(REQ1, DEV2))])


def test_counters_released_when_shared_device_is_undone() -> None:
    """§2.15.1: the undo of a multi-allocation device must release its counters. req-0 first takes the
    shareable device-1 (4Gi of 4Gi); req-1 cannot match its numa, so req-0 backtracks onto device-2,
    which needs the same 4Gi."""
    out = run(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1, cel('device.attributes["driver-a"].numa == 2')),
                constraints=[match(NUMA)],
            )
        ),
        [CA],
        [
            devices_slice(
                SLICE1,
                device(DEV1, None, {"numa": 1}, counters=[mem("4Gi")], multi=True),
                device(DEV2, None, {"numa": 2}, counters=[mem("4Gi")]),
                device(DEV3, None, {"numa": 2}),
            ),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "4Gi"})),
        ],
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV2), r(REQ1, DEV3))])


def test_admin_access_does_not_consume_counters() -> None:
    """§2.15.2 (kubernetes#140729): an admin-access pick of an allocated device whose pool counters are
    exhausted must not be rejected for counters it does not consume."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True))),
        [CA],
        [devices_slice(SLICE1, device(DEV1, counters=[mem("8Gi")])), _mem_8],
        allocated=[(DRIVER_A, POOL1, DEV1)],
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV1, admin=True))])


def test_admin_access_in_same_call_does_not_block_counters_of_other_claims() -> None:
    """§2.15.2: an admin pick in the same call does not reserve counters a later claim needs (it does
    take the device itself, §2.7)."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True)), claim(CLAIM1, request(REQ0, CLASS_A, 1))),
        [CA],
        [
            devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi")]), device(DEV2, counters=[mem("4Gi")])),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "4Gi"})),
        ],
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV1, admin=True)), allocation(NS1, r(REQ0, DEV2))])


def test_shared_device_counters_charged_once_without_consumed_capacity() -> None:
    """§2.15.3 (kubernetes#134100): an existing share of device-1 persisted without consumedCapacity
    already accounts for its counters; a new share must not be charged again."""
    out = run(
        _simple_claim,
        [CA],
        [
            devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi")], multi=True)),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "4Gi"})),
        ],
        shares=[Share(DRIVER_A, POOL1, DEV1, None)],
    )
    assert_allocations(out, [allocation(NS1, share(REQ0, DEV1))])


def test_shared_device_counters_charged_once_within_one_call() -> None:
    """Two shares of one counter-consuming device in one call are charged once."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1)), claim(CLAIM1, request(REQ0, CLASS_A, 1))),
        [CA],
        [
            devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi")], multi=True)),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "4Gi"})),
        ],
    )
    assert_allocations(out, [allocation(NS1, share(REQ0, DEV1)), allocation(NS1, share(REQ0, DEV1))])


def test_admin_share_does_not_count_as_charging_the_device() -> None:
    """Found by the property tests: an admin-access share (which consumes no counters) chosen earlier in
    the same call must not make a later non-admin share of the device skip its counter charge. The pool's
    counters are exhausted by device-2, so req-1 cannot share device-1."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True), request(REQ1, CLASS_A, 1))),
        [CA_MULTI],
        [
            devices_slice(SLICE1, device(DEV1, counters=[mem("4Gi")], multi=True), device(DEV2, counters=[mem("4Gi")])),
            counters_slice(SLICE2, counter_set(CSET1, {"memory": "4Gi"})),
        ],
        allocated=[(DRIVER_A, POOL1, DEV2)],
    )
    assert out is None


def test_distinct_attribute_remembers_every_device_of_a_request() -> None:
    """§2.15.5: upstream keeps only the last value per request, so req-1 could take device-3 whose id
    equals that of req-0's first device. Correct: req-1 gets device-4."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A, 1), constraints=[distinct(ID_ATTR)])),
        [CA],
        ids(1, 2, 1, 3, multi=False),
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV1), r(REQ0, DEV2), r(REQ1, DEV4))])


def test_distinct_attribute_remove_keeps_other_values_of_request() -> None:
    """§2.15.5: on backtracking, removing one device of a request must not forget the request's other
    devices (upstream deletes the request's whole entry)."""
    out = run(
        A(
            claim(
                CLAIM0,
                request(REQ0, CLASS_A, 2),
                request(REQ1, CLASS_A, 1, cel('device.attributes["driver-a"].id != 3')),
                constraints=[distinct(ID_ATTR)],
            )
        ),
        [CA],
        # req-0 tries {1,2}: req-1 needs id not in {1,2} and != 3 -> device-4 (id 1) rejected, device-5 (id 3)
        # rejected by selector -> backtrack to {1,3}: req-1 device-2 (id 2)
        ids(1, 2, 3, 1, 3, multi=False),
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV1), r(REQ0, DEV3), r(REQ1, DEV2))])


def test_counter_availability_keyed_by_driver_and_pool() -> None:
    """§2.15.7: two drivers with a pool of the same name have separate counter sets. driver-a/pool-1's
    counters are exhausted; driver-b/pool-1's are free (upstream caches by pool name only)."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1)), claim(CLAIM1, request(REQ0, CLASS_B, 1))),
        [CA, CB],
        [
            slice_with(
                SLICE1,
                NODE1,
                pool(POOL1, 2),
                DRIVER_A,
                device(DEV1, counters=[mem("8Gi")]),
                device(DEV2, counters=[mem("0")]),
            ),
            slice_counters(SLICE2, NODE1, pool(POOL1, 2), DRIVER_A, counter_set(CSET1, {"memory": "8Gi"})),
            # device-0 (no counters, allocated) gives driver-b/pool-1 the same use revision as driver-a/pool-1
            slice_with(SLICE3, NODE1, pool(POOL1, 2), DRIVER_B, device(DEV0), device(DEV1, counters=[mem("8Gi")])),
            slice_counters(SLICE4, NODE1, pool(POOL1, 2), DRIVER_B, counter_set(CSET1, {"memory": "8Gi"})),
        ],
        allocated=[(DRIVER_A, POOL1, DEV1), (DRIVER_B, POOL1, DEV0)],
    )
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV2)), allocation(NS1, r(REQ0, DEV1, driver=DRIVER_B))])


# ======================================================================================================
# Other behaviour of §2
# ======================================================================================================


def test_all_request_fails_on_unrelated_incomplete_pool() -> None:
    """§2.15.8 (kept as upstream): an All request errors if any pool on the node is incomplete."""
    with pytest.raises(AllocationError, match="driver-b/pool-9 is currently being updated"):
        run(
            A(claim(CLAIM0, all_request(REQ0, CLASS_A))),
            [CA, CB],
            [slice_one(SLICE1, NODE1, POOL1, DRIVER_A), slice_one(SLICE2, NODE1, pool("pool-9", 2), DRIVER_B)],
        )


def test_all_request_fails_on_invalid_pool() -> None:
    with pytest.raises(AllocationError, match="driver-a/pool-1 is currently invalid"):
        run(A(claim(CLAIM0, all_request(REQ0, CLASS_A))), [CA], _invalid_pool1)


def test_admin_pick_blocks_later_non_admin_claim_in_same_call() -> None:
    """§2.7: an admin-access pick enters allocatingDevices, so a later non-admin claim cannot take it."""
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 1, admin=True)), simple_claim(CLAIM1, REQ0, CLASS_A)),
        [CA],
        [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)],
    )
    assert out is None


def test_admin_results_do_not_count_as_allocated_in_ledger() -> None:
    """Admin-access results recorded in the ledger never block other claims."""
    ledger = make_ledger()
    admin = DeviceResult(REQ0, DRIVER_A, POOL1, DEV1, admin_access=True, share_id="", consumed_capacity={})
    ledger.observe_claim("admin", "default/admin", (admin,), "1")
    out = run(_simple_claim, [CA], [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)], ledger=ledger)
    assert_allocations(out, [allocation(NS1, r(REQ0, DEV1))])


def test_share_ids_are_distinct_and_stable() -> None:
    c = A(claim(CLAIM0, request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)))
    a = run(c, [CA_MULTI], one_slice(mdev(DEV1)))
    b = run(c, [CA_MULTI], one_slice(mdev(DEV1)))
    assert a is not None and b is not None
    got = [x["shareID"] for x in a[0]["devices"]["results"]]
    assert len(set(got)) == 2 and all(got)
    assert got == [x["shareID"] for x in b[0]["devices"]["results"]]


def test_zero_requests_claim_gets_empty_result() -> None:
    out = run(A(claim(CLAIM0)), [CA], [slice_one(SLICE1, NODE1, POOL1, DRIVER_A)])
    assert out == [{"devices": {"results": []}}]


def test_node_selector_deduplicates_identical_requirements() -> None:
    sel = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": [REGION1, "region-x"]}]}
        ]
    }
    sel_reordered = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-x", REGION1]}]}
        ]
    }
    out = run(
        A(claim(CLAIM0, request(REQ0, CLASS_A, 2))),
        [CA],
        [slice_one(SLICE1, sel, POOL1, DRIVER_A), slice_one(SLICE2, sel_reordered, POOL2, DRIVER_A)],
    )
    assert out is not None
    terms = out[0]["nodeSelector"]["nodeSelectorTerms"]
    assert len(terms) == 1 and len(terms[0]["matchExpressions"]) == 1


def test_slice_with_multi_term_node_selector_is_not_used() -> None:
    """API validation requires exactly one term; a slice with two is ignored for the node, not fatal."""
    two_terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": [REGION1]}]},
            {"matchExpressions": [{"key": "planet", "operator": "In", "values": ["earth"]}]},
        ]
    }
    assert run(_simple_claim, [CA], [slice_one(SLICE1, two_terms, POOL1, DRIVER_A)]) is None


def test_allocator_is_reusable_across_nodes_and_calls() -> None:
    """One Allocator per cycle, allocate() once per node: no state leaks between calls."""
    idx = build_slice_index({"s": slice_from(slice_one(SLICE1, NODE1, POOL1, DRIVER_A))}, 1)
    alloc = Allocator(ALL_FEATURES, make_ledger(), {CLASS_A: class_from(CA)}, SelectorCache(get_engine()))

    def go(name: str, count: int) -> list[ClaimAllocation] | None:
        n = node_from(node(name))
        claims = [ClaimInput(CLAIM0, "uid", claim_spec_from(claim(CLAIM0, request(REQ0, CLASS_A, count)).spec))]
        return alloc.allocate(n, claims, gather_pools(n, idx.for_node(name), idx.by_pool, ALL_FEATURES))

    for _ in range(2):
        assert go(NODE1, 2) is None
        assert go(NODE2, 1) is None
    got = go(NODE1, 1)
    assert got is not None and [x.device for x in got[0].results] == [DEV1]


@pytest.mark.skip(
    reason="context cancellation (upstream 'interrupt' cases) has no equivalent: allocate() is synchronous"
)
def test_interrupt() -> None:  # pragma: no cover
    pass
