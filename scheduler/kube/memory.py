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
import itertools
import os
import re
import sys
import tempfile
from collections.abc import Iterator
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


def _edge_label(parent: Any, child: Any) -> str:
    """How ``parent`` refers to ``child``, for a cycle's description: a dict key, a list index, an attribute
    (through ``__dict__`` or a slot), a closure cell, or nothing known."""
    if isinstance(parent, dict):
        for k, v in parent.items():
            if v is child:
                return f"[{k!r}]"[:60]
            if k is child:
                return "(key)"
    elif isinstance(parent, (list, tuple)):
        for i, v in enumerate(parent):
            if v is child:
                return f"[{i}]"
    else:
        attrs = getattr(parent, "__dict__", None)
        if attrs is child:
            return ".__dict__"
        if isinstance(attrs, dict):  # an inline (managed) __dict__: the referents are its values
            for k, v in attrs.items():
                if v is child:
                    return f".{k}"
        for klass in type(parent).__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if isinstance(slot, str) and getattr(parent, slot, None) is child:
                    return f".{slot}"
        for name in ("cell_contents", "__closure__", "__self__", "__func__", "f_locals", "tb_frame", "tb_next"):
            with contextlib.suppress(Exception):
                if getattr(parent, name) is child:
                    return f".{name}"
    return ""


@contextlib.contextmanager
def saving_garbage() -> Iterator[list[Any]]:
    """Inside the block, what a collection finds unreachable is kept in the yielded list (``gc.garbage`` under
    ``gc.DEBUG_SAVEALL``) instead of freed, to count or :func:`describe_cycles`; on leaving, the list is emptied
    and one more collection frees those objects."""
    import gc

    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()


def describe_cycles(garbage: list[Any], samples_per_type: int = 1, types: int = 8) -> list[str]:
    """For the most numerous types in ``garbage`` (what a ``DEBUG_SAVEALL`` collection kept), the shortest
    reference cycle through one sample object, written ``Type.attr -> Type[key] -> ...``: which references
    make that garbage cyclic, so the cycle can be broken in the code (issue 24's live leader). Walks only
    references among the garbage objects (``gc.get_referents``)."""
    import gc
    from collections import Counter, deque

    ids = {id(o) for o in garbage}
    by_type: dict[str, list[Any]] = {}
    for o in garbage:
        by_type.setdefault(type(o).__qualname__, []).append(o)
    out: list[str] = []
    seen_shapes: set[str] = set()
    for name, _ in Counter({k: len(v) for k, v in by_type.items()}).most_common(types):
        for start in by_type[name][:samples_per_type]:
            prev: dict[int, Any] = {id(start): None}
            objs = {id(start): start}
            q = deque([start])
            found = None
            while q and found is None and len(prev) < 200_000:
                cur = q.popleft()
                for ref in gc.get_referents(cur):
                    if ref is start:
                        found = cur
                        break
                    if id(ref) in ids and id(ref) not in prev:
                        prev[id(ref)] = cur
                        objs[id(ref)] = ref
                        q.append(ref)
            if found is None:
                continue
            chain = [found]
            while chain[-1] is not start:
                chain.append(prev[id(chain[-1])])
            chain.reverse()  # start ... found, and found refers to start
            chain.append(start)
            hops = [type(chain[0]).__qualname__]
            for parent, child in itertools.pairwise(chain):
                hops.append(f"{_edge_label(parent, child)} -> {type(child).__qualname__}")
            shape = "".join(hops)
            if shape not in seen_shapes:
                seen_shapes.add(shape)
                out.append(shape)
    return out


def collect_and_trim(full_collection: bool = True) -> dict[str, Any]:
    """One round of the live process's memory upkeep: a full cyclic collection (``gc.collect()``, when asked),
    then glibc's ``malloc_trim(0)``. Returns what it did: ``unreachable`` (objects the collection found),
    ``collect_ms``, ``rss_before_kib``/``rss_kib`` around the trim, ``trimmed`` (:func:`malloc_trim`'s answer)."""
    import gc
    import time

    out: dict[str, Any] = {}
    if full_collection:
        t0 = time.perf_counter()
        out["unreachable"] = gc.collect()
        out["collect_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    out["rss_before_kib"] = rss_kib()
    out["trimmed"] = malloc_trim()
    out["rss_kib"] = rss_kib()
    return out
