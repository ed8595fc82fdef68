"""Storage kinds (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver).

Placeholder converters: the volume plugins replace these with typed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pv_from(raw: Mapping[str, Any]) -> Any:
    return raw


def pvc_from(raw: Mapping[str, Any]) -> Any:
    return raw


def storageclass_from(raw: Mapping[str, Any]) -> Any:
    return raw


def csinode_from(raw: Mapping[str, Any]) -> Any:
    return raw


def csidriver_from(raw: Mapping[str, Any]) -> Any:
    return raw
