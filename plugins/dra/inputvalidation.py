"""What the API server refuses in DRA objects at creation that only the CEL library can tell.

``pkg/apis/resource/validation`` (validateSelector) compiles every CEL selector of a DeviceClass
(``spec.selectors``), a ResourceClaim (``spec.devices.requests[].exactly.selectors``,
``...firstAvailable[].selectors``) and a ResourceClaimTemplate (the same under ``spec.spec``) with the DRA CEL
environment and refuses the object when one does not compile: ``<path>.cel.expression: Invalid value: ...:
compilation failed: ...``. A common case in articles: ``device.capacity["gpu.nvidia.com"].memory >=
quantity("40Gi")``; Kubernetes' Quantity has no ordering operators (``compareTo``, ``isGreaterThan``,
``isLessThan`` instead). ``simulate`` plays the API server for its input, so such an object is not loaded (pods
using the class then find no class, as in a cluster where ``kubectl apply`` failed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.dra.cel import SelectorCache
from plugins.dra.cel_syntax import CELCompileError

__all__ = ["selector_compile_errors"]


def _selector_lists(obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(field path, ``selectors`` list) of a DeviceClass, ResourceClaim or ResourceClaimTemplate (v1 shape)."""
    kind, spec = obj.get("kind"), obj.get("spec")
    if not isinstance(spec, Mapping) or not str(obj.get("apiVersion", "")).startswith("resource.k8s.io/"):
        return []
    if kind == "DeviceClass":
        return [("spec.selectors", spec.get("selectors"))]
    if kind == "ResourceClaimTemplate":
        spec, path = spec.get("spec"), "spec.spec"
    elif kind == "ResourceClaim":
        path = "spec"
    else:
        return []
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    out: list[tuple[str, Any]] = []
    for i, r in enumerate(requests if isinstance(requests, list) else []):
        if not isinstance(r, Mapping):
            continue
        p = f"{path}.devices.requests[{i}]"
        if isinstance(r.get("exactly"), Mapping):
            out.append((f"{p}.exactly.selectors", r["exactly"].get("selectors")))
        subs = r.get("firstAvailable")
        for j, sub in enumerate(subs if isinstance(subs, list) else []):
            if isinstance(sub, Mapping):
                out.append((f"{p}.firstAvailable[{j}].selectors", sub.get("selectors")))
    return out


def selector_compile_errors(obj: Mapping[str, Any], cache: SelectorCache) -> list[str]:
    """``<field path>: <message>`` for each selector of ``obj`` that does not compile (compiled programs are
    kept in ``cache``, the allocator's, so a selector is compiled once for both)."""
    errors: list[str] = []
    for path, selectors in _selector_lists(obj):
        for k, sel in enumerate(selectors if isinstance(selectors, list) else []):
            expr = (sel.get("cel") or {}).get("expression") if isinstance(sel, Mapping) else None
            if not isinstance(expr, str):
                continue
            try:
                cache.compile(expr)
            except CELCompileError as e:
                errors.append(f"{path}[{k}].cel.expression: Invalid value: compilation failed: {e.detail}")
    return errors
