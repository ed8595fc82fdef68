"""Services, workload controllers, PriorityClasses and PodDisruptionBudgets, as the scheduler reads them.

Placeholder converters: the plugins that read these kinds replace them with typed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def service_from(raw: Mapping[str, Any]) -> Any:
    return raw


def replicationcontroller_from(raw: Mapping[str, Any]) -> Any:
    return raw


def replicaset_from(raw: Mapping[str, Any]) -> Any:
    return raw


def statefulset_from(raw: Mapping[str, Any]) -> Any:
    return raw


def priorityclass_from(raw: Mapping[str, Any]) -> Any:
    return raw


def pdb_from(raw: Mapping[str, Any]) -> Any:
    return raw
