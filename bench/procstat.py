"""Process figures the benchmarks report (no scheduler imports: the benchmark drivers stay light)."""

from __future__ import annotations


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak RSS since its exec (``VmHWM``; the child's ``ru_maxrss`` would also count the pages of
    the big process it was forked from), in MiB; None when /proc has no answer."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
