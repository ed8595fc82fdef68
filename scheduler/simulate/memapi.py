"""An in-memory API server behind :class:`scheduler.api.clusterapi.ClusterAPI`, for ``simulate`` and tests.

It keeps raw objects per (kind, namespace, name), assigns UIDs (deterministic, from kind/namespace/name,
so the same input gives the same output) and a global resourceVersion counter, enforces optimistic
concurrency like the API server (stale resourceVersion => 409 Conflict; Binding with a wrong pod UID =>
409; binding an already bound pod => 409), and delivers a watch event to every subscriber synchronously
after each successful write.

Stored objects are never mutated in place (every write stores a new dict), so watchers receive the stored
object itself and must treat it as read-only; callers of the API methods get their own copies.
"""

from __future__ import annotations

import copy
import marshal
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from scheduler.api.clusterapi import Conflict, Invalid, NotFound, Obj

_T = TypeVar("_T")
Watcher = Callable[[str, str, Obj], None]  # (kind, ADDED|MODIFIED|DELETED, object)
UID_NAMESPACE = uuid.UUID("0d6c1f7a-2a3e-4c55-8a0f-6f2f3e1b9c11")
CLUSTER_SCOPED = {
    "Node",
    "ResourceSlice",
    "DeviceClass",
    "DeviceTaintRule",
    "Namespace",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "PriorityClass",
}
STATUS_KINDS = {"Pod", "ResourceClaim", "PodGroup", "Node", "PersistentVolume", "PersistentVolumeClaim"}


def _copy(obj: _T) -> _T:
    """A deep copy of JSON data: marshal's C round trip (about 4x ``copy.deepcopy``), else ``copy.deepcopy``
    for values marshal does not know."""
    try:
        out: _T = marshal.loads(marshal.dumps(obj))  # type: ignore[arg-type]
        return out
    except ValueError:
        return copy.deepcopy(obj)


def _key(kind: str, namespace: str, name: str) -> tuple[str, str, str]:
    return (kind, "" if kind in CLUSTER_SCOPED else namespace, name)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return _copy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class InMemoryAPI:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.rv = 0
        self.watchers: list[Watcher] = []
        self.events: list[Obj] = []
        self.writes: list[tuple[str, str, str]] = []  # (verb, kind, "ns/name") — for tests
        self.fail_next: dict[tuple[str, str], list[Exception]] = {}  # (verb, kind) -> errors to raise
        # Graceful deletion of bound pods (simulate): the DELETE first records deletionTimestamp and
        # deletionGracePeriodSeconds (a MODIFIED event), then termination completes at once and the pod is
        # removed. Off: a DELETE removes at once, as before.
        self.graceful_pod_deletion = False
        self.now: Callable[[], str] = lambda: "2026-01-01T00:00:00Z"  # RFC 3339, for deletionTimestamp

    # --- helpers ----------------------------------------------------------------------------------

    def _maybe_fail(self, verb: str, kind: str) -> None:
        errs = self.fail_next.get((verb, kind))
        if errs:
            raise errs.pop(0)

    def _store(self, kind: str, obj: Obj, event: str) -> Obj:
        self.rv += 1
        m = obj["metadata"] = {**obj["metadata"], "resourceVersion": str(self.rv)}
        self.objects[_key(kind, m.get("namespace", ""), m["name"])] = obj
        self.writes.append((event, kind, f"{m.get('namespace', '')}/{m['name']}"))
        for w in list(self.watchers):
            w(kind, event, obj)
        return obj

    def load(self, kind: str, obj: Obj, owned: bool = False) -> Obj:
        """Create without failure injection (initial objects). ``owned``: the caller hands ``obj`` over
        and will not touch it again, so it is stored without a copy."""
        return _copy(self._load(kind, obj if owned else _copy(obj)))

    def load_shared(self, kind: str, obj: Obj) -> None:
        """Create from an object whose caller will not modify it again: only its metadata is copied."""
        self._load(kind, {**obj, "metadata": dict(obj.get("metadata") or {})})

    def _load(self, kind: str, obj: Obj) -> Obj:
        m = obj.setdefault("metadata", {})
        if kind not in CLUSTER_SCOPED:
            m.setdefault("namespace", "default")
        else:
            m.pop("namespace", None)
        if _key(kind, m.get("namespace", ""), m.get("name", "")) in self.objects:
            raise Conflict(f'{kind} "{m.get("name")}" already exists')
        if not m.get("name"):
            raise Invalid(f"{kind}: metadata.name is required")
        m.setdefault("uid", str(uuid.uuid5(UID_NAMESPACE, f"{kind}/{m.get('namespace', '')}/{m['name']}")))
        m.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        m.setdefault("generation", 1)
        obj.setdefault("kind", kind)
        return self._store(kind, obj, "ADDED")

    def list(self, kind: str) -> Iterable[Obj]:
        return [_copy(o) for o in self.stored(kind)]

    def stored(self, kind: str) -> Sequence[Obj]:
        """The stored objects themselves, sorted by namespace/name: read-only."""
        return [o for _, o in sorted((key, o) for key, o in self.objects.items() if key[0] == kind)]

    # --- ClusterAPI -------------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        obj = self.objects.get(_key(kind, namespace, name))
        if obj is None:
            raise NotFound(f'{kind.lower()} "{name}" not found')
        return _copy(obj)

    async def create(self, kind: str, obj: Obj) -> Obj:
        self._maybe_fail("create", kind)
        obj = _copy(obj)
        m = obj.setdefault("metadata", {})
        if not m.get("name") and m.get("generateName"):
            # deterministic: generateName + a suffix derived from the object count
            base = m["generateName"]
            n = 0
            while True:
                cand = f"{base}{_suffix(f'{base}{n}')}"
                if _key(kind, m.get("namespace", ""), cand) not in self.objects:
                    m["name"] = cand
                    break
                n += 1
        return _copy(self._load(kind, obj))

    async def update(self, kind: str, obj: Obj, subresource: str = "") -> Obj:
        self._maybe_fail(f"update{'/' + subresource if subresource else ''}", kind)
        m = obj.get("metadata") or {}
        cur = self.objects.get(_key(kind, m.get("namespace", ""), m.get("name", "")))
        if cur is None:
            raise NotFound(f'{kind.lower()} "{m.get("name")}" not found')
        if m.get("resourceVersion") != cur["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on {kind.lower()} "{m.get("name")}": the object has been modified; '
                "please apply your changes to the latest version and try again"
            )
        if m.get("uid") and m.get("uid") != cur["metadata"].get("uid"):
            raise Conflict(f'{kind.lower()} "{m.get("name")}": UID precondition failed')
        # Stored objects are never mutated, so the new version may share untouched parts with the old one.
        if subresource == "status":
            new = {**cur, "metadata": dict(cur["metadata"]), "status": _copy(obj.get("status") or {})}
        else:
            new = _copy(obj)
            new["status"] = cur.get("status") or {}
            new["metadata"]["uid"] = cur["metadata"]["uid"]
            if new.get("spec") != cur.get("spec"):
                new["metadata"]["generation"] = cur["metadata"].get("generation", 1) + 1
        if kind == "ResourceClaim" and subresource == "status":
            self._validate_claim_status(new, cur)
        return _copy(self._store(kind, new, "MODIFIED"))

    def _validate_claim_status(self, new: Obj, cur: Obj) -> None:
        old_alloc = (cur.get("status") or {}).get("allocation")
        new_alloc = (new.get("status") or {}).get("allocation")
        if old_alloc and new_alloc and old_alloc != new_alloc:
            raise Invalid("status.allocation: field is immutable once set")
        reserved = (new.get("status") or {}).get("reservedFor") or []
        if len(reserved) > 256:
            raise Invalid("status.reservedFor: Too many: must have at most 256 items")
        if reserved and not new_alloc:
            raise Invalid("status.reservedFor: may not be set when allocation is not set")
        if new_alloc and "resource.kubernetes.io/delete-protection" not in (new["metadata"].get("finalizers") or []):
            raise Invalid("status.allocation: the claim must have the delete-protection finalizer")

    async def patch(self, kind: str, namespace: str, name: str, patch: Obj, subresource: str = "") -> Obj:
        self._maybe_fail(f"patch{'/' + subresource if subresource else ''}", kind)
        cur = self.objects.get(_key(kind, namespace, name))
        if cur is None:
            raise NotFound(f'{kind.lower()} "{name}" not found')
        pm = patch.get("metadata") or {}
        if pm.get("uid") and pm["uid"] != cur["metadata"].get("uid"):
            raise Conflict(f'{kind.lower()} "{name}": UID precondition failed')
        if pm.get("resourceVersion") and pm["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            raise Conflict(f'{kind.lower()} "{name}": the object has been modified')
        if subresource == "status":
            new = {**cur, "metadata": dict(cur["metadata"])}
            new["status"] = merge_patch(cur.get("status") or {}, patch.get("status") or {})
        else:
            new = merge_patch(cur, {k: v for k, v in patch.items() if k != "status"})
        return _copy(self._store(kind, new, "MODIFIED"))

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        key = _key(kind, namespace, name)
        cur = self.objects.get(key)
        if (
            cur is not None
            and kind == "Pod"
            and self.graceful_pod_deletion
            and (cur.get("spec") or {}).get("nodeName")
            and not cur["metadata"].get("deletionTimestamp")
        ):
            grace = (cur.get("spec") or {}).get("terminationGracePeriodSeconds")
            meta = {
                **cur["metadata"],
                "deletionTimestamp": self.now(),
                "deletionGracePeriodSeconds": grace if isinstance(grace, int) else 30,
            }
            self._store(kind, {**cur, "metadata": meta}, "MODIFIED")
        obj = self.objects.pop(key, None)
        if obj is None:
            raise NotFound(f'{kind.lower()} "{name}" not found')
        self.rv += 1
        self.writes.append(("DELETED", kind, f"{namespace}/{name}"))
        for w in list(self.watchers):
            w(kind, "DELETED", obj)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self._maybe_fail("bind", "Pod")
        cur = self.objects.get(_key("Pod", namespace, name))
        if cur is None:
            raise NotFound(f'pods "{name}" not found')
        if cur["metadata"].get("uid") != uid:
            raise Conflict(f'Operation cannot be fulfilled on pods/binding "{name}": UID precondition failed')
        if (cur.get("spec") or {}).get("nodeName"):
            raise Conflict(
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned '
                f"to node {cur['spec']['nodeName']!r}"
            )
        conds = [c for c in ((cur.get("status") or {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
        conds.append({"type": "PodScheduled", "status": "True"})
        status = {**(cur.get("status") or {}), "conditions": conds}
        # ClearingNominatedNodeNameAfterBinding (beta, on since 1.35): the binding clears the nomination
        status.pop("nominatedNodeName", None)
        new = {
            **cur,
            "metadata": dict(cur["metadata"]),
            "spec": {**(cur.get("spec") or {}), "nodeName": node},
            "status": status,
        }
        self._store("Pod", new, "MODIFIED")

    async def event(self, obj: Obj, event_type: str, reason: str, message: str, action: str) -> None:
        m = obj.get("metadata") or {}
        self.events.append(
            {
                "type": event_type,
                "reason": reason,
                "message": message,
                "action": action,
                "involvedObject": {
                    "kind": obj.get("kind", ""),
                    "namespace": m.get("namespace", ""),
                    "name": m.get("name", ""),
                    "uid": m.get("uid", ""),
                },
            }
        )


def _suffix(seed: str) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet
    h = uuid.uuid5(UID_NAMESPACE, seed).int
    out = []
    for _ in range(5):
        h, r = divmod(h, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)
