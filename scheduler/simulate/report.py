"""What ``simulate`` says about pods it does not schedule, and its exit code for CI.

A pod is scheduled by the scheduler whose profile its ``spec.schedulerName`` names (``default-scheduler``
when unset, as the API server defaults it: ``pkg/apis/core/v1/defaults.go``); kube-scheduler and this
scheduler leave every other pod alone (``pkg/scheduler/eventhandlers.go`` ``responsibleForPod``). Such a
pod, not bound in the input, is reported as "left to scheduler NAME", never as a pending pod of ours, and
it does not count for ``--fail-on-pending``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from json.encoder import INFINITY as _INFINITY
from json.encoder import encode_basestring_ascii as _encode_str  # what json.dumps uses (ensure_ascii=True)
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


def dumps_indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2)``, the same text about 3x faster (the standard library formats indented JSON
    in Python, generically; this walks plain JSON data only: dict with str keys, list, tuple, str, int, float,
    bool, None). Anything else -- other key types, subclasses, a cycle -- is left to ``json.dumps``."""
    try:
        return _Indented().dumps(obj)
    except (TypeError, RecursionError):
        return json.dumps(obj, indent=2)


class _Indented:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[str] = []

    def dumps(self, obj: Any) -> str:
        self._walk(obj, "")
        return "".join(self.parts)

    def _walk(self, o: Any, indent: str) -> None:
        app = self.parts.append
        t = o.__class__
        if t is str:
            app(_encode_str(o))
        elif t is dict:
            if not o:
                app("{}")
                return
            inner = indent + "  "
            sep = ",\n" + inner
            app("{\n" + inner)
            first = True
            for k, v in o.items():
                if k.__class__ is not str:
                    raise TypeError("key")
                if first:
                    first = False
                else:
                    app(sep)
                app(_encode_str(k))
                app(": ")
                self._walk(v, inner)
            app("\n" + indent + "}")
        elif t is list or t is tuple:
            if not o:
                app("[]")
                return
            inner = indent + "  "
            sep = ",\n" + inner
            app("[\n" + inner)
            first = True
            for v in o:
                if first:
                    first = False
                else:
                    app(sep)
                self._walk(v, inner)
            app("\n" + indent + "]")
        elif o is None:
            app("null")
        elif o is True:
            app("true")
        elif o is False:
            app("false")
        elif t is int:
            app(int.__repr__(o))
        elif t is float:
            app(_float(o))
        else:
            raise TypeError(t.__name__)


def _float(f: float) -> str:
    if f != f:
        return "NaN"
    if f == _INFINITY:
        return "Infinity"
    if f == -_INFINITY:
        return "-Infinity"
    return float.__repr__(f)
