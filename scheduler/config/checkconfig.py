"""``dra-scheduler check-config F``: validate a scheduler configuration file without starting anything."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from scheduler.config.schedulerconfig import ConfigError, load_config_file

if TYPE_CHECKING:
    from scheduler.config.registry import PluginSpec


def check_config(path: str, registry: Mapping[str, PluginSpec] | None = None) -> tuple[int, str]:
    """(0, ``configuration OK: N profile(s): a, b``) or (1, every error on its own line)."""
    try:
        cfg = load_config_file(path, registry)
    except ConfigError as e:
        return 1, "\n".join(e.errors)
    names = ", ".join(p.scheduler_name for p in cfg.profiles)
    return 0, f"configuration OK: {len(cfg.profiles)} profile(s): {names}"
