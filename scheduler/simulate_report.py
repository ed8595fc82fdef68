"""What ``simulate`` says about pods it does not schedule, and its exit code for CI.

A pod is scheduled by the scheduler whose profile its ``spec.schedulerName`` names (``default-scheduler``
when unset, as the API server defaults it: ``pkg/apis/core/v1/defaults.go``); kube-scheduler and this
scheduler leave every other pod alone (``pkg/scheduler/eventhandlers.go`` ``responsibleForPod``). Such a
pod, not bound in the input, is reported as "left to scheduler NAME", never as a pending pod of ours, and
it does not count for ``--fail-on-pending``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

DEFAULT_SCHEDULER_NAME = "default-scheduler"
EXIT_PENDING = 3  # simulate --fail-on-pending: some pod of ours stayed pending


def scheduler_name(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and name else DEFAULT_SCHEDULER_NAME


def left_to_other_schedulers(items: Iterable[Mapping[str, Any]], profiles: Collection[str]) -> dict[str, str]:
    """``namespace/name`` -> scheduler name, for the unbound pods none of ``profiles`` schedules."""
    out: dict[str, str] = {}
    for o in items:
        if o.get("kind") != "Pod":
            continue
        spec = o.get("spec")
        if isinstance(spec, Mapping) and spec.get("nodeName"):
            continue
        name = scheduler_name(o)
        if name in profiles:
            continue
        meta = o.get("metadata") or {}
        out[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = name
    return out


def summary_counts(left: Mapping[str, str]) -> dict[str, Any]:
    """The JSON summary's addition: ``{"leftToOtherSchedulers": {name: count}}``, empty when none."""
    if not left:
        return {}
    return {"leftToOtherSchedulers": dict(sorted(Counter(left.values()).items()))}


def reason(name: str) -> str:
    return f"left to scheduler {name}"


def summary_note(left: Mapping[str, str]) -> str:
    """``, 2 left to scheduler default-scheduler`` for the table's last line ("" when none)."""
    counts = Counter(left.values())
    return "".join(f", {n} left to scheduler {name}" for name, n in sorted(counts.items()))


def pending_exit_code(summary: Mapping[str, Any]) -> int:
    """``--fail-on-pending``: 3 when a pod of ours stayed pending (unschedulable, gated, out of attempts)."""
    return EXIT_PENDING if int(summary.get("unschedulable") or 0) > 0 else 0
