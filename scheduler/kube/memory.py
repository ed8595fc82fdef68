"""Process memory figures for the live scheduler's SIGUSR2 report and its periodic trim (issue 24).

Python's objects live in pymalloc's 1 MiB arenas (objects up to 512 bytes) and in the C library's heap (larger
ones: big strings, bytes of API answers, dict and list tables). The RSS of a long-running process can climb
while the live objects do not: pymalloc keeps an arena while one block in it is used, and glibc's malloc keeps
freed chunks inside its heaps instead of giving the pages back. These helpers tell the three apart:

* :func:`rss_kib` - the resident set from ``/proc/self/status``;
* :func:`pymalloc_stats` - arenas held and bytes in used / free blocks, parsed from ``sys._debugmallocstats``
  (CPython's own allocator statistics, written to the C stderr, captured here through a pipe);
* :func:`malloc_trim` - glibc's ``malloc_trim(0)``: give every free page inside malloc's heaps back to the
  kernel (``madvise(MADV_DONTNEED)``; documented in malloc_trim(3) since glibc 2.8). A no-op returning None
  where the C library is not glibc.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import sys
import tempfile
from functools import cache
from typing import Any


def rss_kib() -> int | None:
    """The process's resident set size in KiB (``VmRSS``), None where /proc is missing."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


_STAT_LINES = {
    "arenas_current": re.compile(r"^# arenas allocated current\s*=\s*([\d,]+)", re.M),
    "arenas_highwater": re.compile(r"^# arenas highwater mark\s*=\s*([\d,]+)", re.M),
    "used_bytes": re.compile(r"^# bytes in allocated blocks\s*=\s*([\d,]+)", re.M),
    "free_block_bytes": re.compile(r"^# bytes in available blocks\s*=\s*([\d,]+)", re.M),
    "free_pool_bytes": re.compile(r"^\d+ unused pools \* \d+ bytes\s*=\s*([\d,]+)", re.M),
}


def parse_mallocstats(text: str) -> dict[str, int]:
    """The figures of ``sys._debugmallocstats``'s text this report uses (absent lines are left out)."""
    out = {}
    for key, rx in _STAT_LINES.items():
        m = rx.search(text)
        if m:
            out[key] = int(m.group(1).replace(",", ""))
    return out


def pymalloc_stats() -> dict[str, int]:
    """pymalloc's arenas and block bytes now. ``sys._debugmallocstats`` writes to file descriptor 2; it is
    pointed at a temporary file for the call (a few ms) and put back."""
    fn: Any = getattr(sys, "_debugmallocstats", None)
    if fn is None:
        return {}
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return parse_mallocstats(tmp.read().decode("ascii", "replace"))


@cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return libc


def can_trim() -> bool:
    """Whether :func:`malloc_trim` can do anything here (the C library is glibc)."""
    return _libc() is not None


def malloc_trim() -> bool | None:
    """glibc's ``malloc_trim(0)``: True if memory was given back, False if none could be, None without glibc."""
    libc = _libc()
    if libc is None:
        return None
    return bool(libc.malloc_trim(0))
