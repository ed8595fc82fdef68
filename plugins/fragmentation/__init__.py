"""DeviceFragmentation: fragmentation-aware placement of DRA devices (core.py: the pure measure; plugin.py: the
framework adapter)."""

from plugins.fragmentation.plugin import NAME, SPEC, DeviceFragmentation, validate_args

__all__ = ["NAME", "SPEC", "DeviceFragmentation", "validate_args"]
