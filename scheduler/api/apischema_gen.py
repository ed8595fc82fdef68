"""Generate ``scheduler/api/apischema.json``: the field types of the kinds ``simulate`` loads, from Kubernetes'
published OpenAPI v3 documents (``k8s.io/kubernetes@v1.37.2/api/openapi-spec/v3``, in the Go module cache
that ``e2e/build.sh`` fills).

    python -m scheduler.api.apischema_gen [SPEC_DIR] > scheduler/api/apischema.json

Only types survive (no descriptions); :mod:`scheduler.api.inputcheck` uses them to refuse, like the API server's
typed JSON decoding, an object whose field has the wrong type. Codes: ``s`` string, ``i`` int32, ``I`` int64,
``n`` number, ``b`` boolean, ``q`` Quantity, ``x`` IntOrString, ``*`` anything, ``["l", T]`` list,
``["m", T]`` map of string to T, ``{field: T}`` object, ``"#Name"`` a definition.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

SPEC_DIR = os.path.expanduser("~/.cache/dra-scheduler/go/mod/k8s.io/kubernetes@v1.37.2/api/openapi-spec/v3")

ROOTS = {
    ("v1", "Node"): ("api__v1", "io.k8s.api.core.v1.Node"),
    ("v1", "Pod"): ("api__v1", "io.k8s.api.core.v1.Pod"),
    ("v1", "Namespace"): ("api__v1", "io.k8s.api.core.v1.Namespace"),
    ("v1", "ConfigMap"): ("api__v1", "io.k8s.api.core.v1.ConfigMap"),
    ("v1", "PersistentVolume"): ("api__v1", "io.k8s.api.core.v1.PersistentVolume"),
    ("v1", "PersistentVolumeClaim"): ("api__v1", "io.k8s.api.core.v1.PersistentVolumeClaim"),
    ("v1", "Service"): ("api__v1", "io.k8s.api.core.v1.Service"),
    ("v1", "ReplicationController"): ("api__v1", "io.k8s.api.core.v1.ReplicationController"),
    ("apps/v1", "ReplicaSet"): ("apis__apps__v1", "io.k8s.api.apps.v1.ReplicaSet"),
    ("apps/v1", "StatefulSet"): ("apis__apps__v1", "io.k8s.api.apps.v1.StatefulSet"),
    ("storage.k8s.io/v1", "StorageClass"): ("apis__storage.k8s.io__v1", "io.k8s.api.storage.v1.StorageClass"),
    ("storage.k8s.io/v1", "CSINode"): ("apis__storage.k8s.io__v1", "io.k8s.api.storage.v1.CSINode"),
    ("storage.k8s.io/v1", "CSIDriver"): ("apis__storage.k8s.io__v1", "io.k8s.api.storage.v1.CSIDriver"),
    ("storage.k8s.io/v1", "CSIStorageCapacity"): (
        "apis__storage.k8s.io__v1",
        "io.k8s.api.storage.v1.CSIStorageCapacity",
    ),
    ("scheduling.k8s.io/v1", "PriorityClass"): (
        "apis__scheduling.k8s.io__v1",
        "io.k8s.api.scheduling.v1.PriorityClass",
    ),
    ("policy/v1", "PodDisruptionBudget"): ("apis__policy__v1", "io.k8s.api.policy.v1.PodDisruptionBudget"),
    ("resource.k8s.io/v1", "ResourceSlice"): ("apis__resource.k8s.io__v1", "io.k8s.api.resource.v1.ResourceSlice"),
    ("resource.k8s.io/v1", "DeviceClass"): ("apis__resource.k8s.io__v1", "io.k8s.api.resource.v1.DeviceClass"),
    ("resource.k8s.io/v1", "DeviceTaintRule"): ("apis__resource.k8s.io__v1", "io.k8s.api.resource.v1.DeviceTaintRule"),
    ("resource.k8s.io/v1", "ResourceClaim"): ("apis__resource.k8s.io__v1", "io.k8s.api.resource.v1.ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): (
        "apis__resource.k8s.io__v1",
        "io.k8s.api.resource.v1.ResourceClaimTemplate",
    ),
    ("scheduling.k8s.io/v1beta1", "PodGroup"): (
        "apis__scheduling.k8s.io__v1beta1",
        "io.k8s.api.scheduling.v1beta1.PodGroup",
    ),
}
SCALARS = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "q",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "x",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "s",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "s",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "*",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "*",
}


def _short(name: str) -> str:
    for prefix in ("io.k8s.api.", "io.k8s.apimachinery.pkg.apis.", "io.k8s.apimachinery.pkg."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def generate(spec_dir: str = SPEC_DIR) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    roots: dict[str, str] = {}
    schemas_by_file: dict[str, dict[str, Any]] = {}

    def schemas(file: str) -> dict[str, Any]:
        if file not in schemas_by_file:
            with open(os.path.join(spec_dir, f"{file}_openapi.json"), encoding="utf-8") as fh:
                schemas_by_file[file] = json.load(fh)["components"]["schemas"]
        return schemas_by_file[file]

    def ref(name: str, table: dict[str, Any]) -> Any:
        if name in SCALARS:
            return SCALARS[name]
        short = _short(name)
        if short not in defs:
            defs[short] = None  # recursion guard (JSONSchemaProps-like cycles)
            defs[short] = conv(table[name], table)
        return "#" + short

    def conv(s: dict[str, Any], table: dict[str, Any]) -> Any:
        if "$ref" in s:
            return ref(s["$ref"].rsplit("/", 1)[1], table)
        if "allOf" in s and len(s["allOf"]) == 1:
            return conv(s["allOf"][0], table)
        if s.get("x-kubernetes-int-or-string"):
            return "x"
        t = s.get("type")
        if t == "string":
            return "s"
        if t == "boolean":
            return "b"
        if t == "number":
            return "n"
        if t == "integer":
            return "i" if s.get("format") == "int32" else "I"
        if t == "array":
            return ["l", conv(s.get("items") or {}, table)]
        if t == "object" or "properties" in s or "additionalProperties" in s:
            if "properties" in s:
                return {k: conv(v, table) for k, v in sorted(s["properties"].items())}
            if isinstance(s.get("additionalProperties"), dict):
                return ["m", conv(s["additionalProperties"], table)]
            return "*"
        return "*"

    for (api, kind), (file, name) in sorted(ROOTS.items()):
        roots[f"{api} {kind}"] = ref(name, schemas(file))
    return {"source": "k8s.io/kubernetes@v1.37.2 api/openapi-spec/v3", "roots": roots, "defs": defs}


def main() -> None:
    out = generate(sys.argv[1] if len(sys.argv) > 1 else SPEC_DIR)
    json.dump(out, sys.stdout, sort_keys=True, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
