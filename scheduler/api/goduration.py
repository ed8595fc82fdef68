"""Go ``time.Duration`` text (the JSON form of ``metav1.Duration``): :func:`parse_go_duration` as Go's
``time.ParseDuration``, :func:`format_go_duration` as ``Duration.String`` for the values we print.

Used by the configuration (``leaderElection`` durations, DynamicResources ``bindingTimeout`` /
``filterTimeout``) and the CLI's duration flags."""

from __future__ import annotations

import json
import re

__all__ = ["format_go_duration", "parse_go_duration"]

_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Go ``time.ParseDuration`` (the JSON form of metav1.Duration), in seconds: ``600s``, ``10m``, ``1h30m``,
    ``1.5s``, ``-1s``, ``0``. Raises ValueError with Go's message."""
    s = text
    sign = 1.0
    if s[:1] in ("-", "+"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"time: invalid duration {json.dumps(text)}")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.group(1) in ("", "."):
            if re.fullmatch(r"[0-9.]+", s[pos:]):
                raise ValueError(f"time: missing unit in duration {json.dumps(text)}")
            raise ValueError(f"time: invalid duration {json.dumps(text)}")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not total * 1e9 < 2**63:  # Go: an int64 of nanoseconds (also catches inf/NaN)
        raise ValueError(f"time: invalid duration {json.dumps(text)}")
    return sign * total


def format_go_duration(seconds: float) -> str:
    """Go's ``Duration.String`` for whole and fractional seconds: ``10m0s``, ``1h0m0s``, ``30s``, ``1.5s``."""
    if seconds != int(seconds) or seconds < 60:
        return f"{seconds:g}s"
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m}m{sec}s" if h else f"{m}m{sec}s"
