"""An in-process fake kube-apiserver (aiohttp) for the live-side tests.

It speaks the parts of the Kubernetes REST API the scheduler uses, with the same JSON shapes:

* list with ``metadata.resourceVersion`` and pagination (``limit`` + ``continue``; items carry no
  apiVersion/kind, as on the real server), field selectors (``a.b=x``, ``a.b!=x``);
* watch streaming JSON lines from a resourceVersion (history replayed), ``BOOKMARK`` events, server-side
  ``timeoutSeconds``; ``expire()`` (compaction: open watches get a 410 ``Expired`` ERROR event, and so does any
  watch from an older resourceVersion), ``disconnect()`` (abort every watch stream mid-flight);
* create (``generateName`` too), GET, PUT with resourceVersion check (409), PATCH merge / strategic merge
  (conditions merge by type; 415 for strategic merge on custom resources) with ``metadata.uid`` /
  ``metadata.resourceVersion`` preconditions, DELETE, the ``status`` subresource;
* ``pods/{name}/binding`` answering 201 with a ``Status`` (UID precondition → 409, already bound → 409);
* discovery documents for the groups it serves (PodGroup CRD optional);
* failure injection (``fail(method, path_suffix, status)``) and a request log.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from scheduler.simulate.memapi import merge_patch

Obj = dict[str, Any]
ResId = tuple[str, str, str]  # (group, version, plural)

KINDS: dict[ResId, tuple[str, bool]] = {  # -> (kind, namespaced)
    ("", "v1", "pods"): ("Pod", True),
    ("", "v1", "nodes"): ("Node", False),
    ("", "v1", "namespaces"): ("Namespace", False),
    ("", "v1", "configmaps"): ("ConfigMap", True),
    ("", "v1", "events"): ("Event", True),
    ("coordination.k8s.io", "v1", "leases"): ("Lease", True),
    ("resource.k8s.io", "v1", "resourceclaims"): ("ResourceClaim", True),
    ("resource.k8s.io", "v1", "resourceclaimtemplates"): ("ResourceClaimTemplate", True),
    ("resource.k8s.io", "v1", "resourceslices"): ("ResourceSlice", False),
    ("resource.k8s.io", "v1", "deviceclasses"): ("DeviceClass", False),
    ("resource.k8s.io", "v1", "devicetaintrules"): ("DeviceTaintRule", False),
    ("scheduling.x-k8s.io", "v1alpha1", "podgroups"): ("PodGroup", True),
    ("scheduling.k8s.io", "v1beta1", "podgroups"): ("PodGroup", True),
    ("", "v1", "persistentvolumes"): ("PersistentVolume", False),
    ("", "v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True),
    ("", "v1", "services"): ("Service", True),
    ("", "v1", "replicationcontrollers"): ("ReplicationController", True),
    ("apps", "v1", "replicasets"): ("ReplicaSet", True),
    ("apps", "v1", "statefulsets"): ("StatefulSet", True),
    ("storage.k8s.io", "v1", "storageclasses"): ("StorageClass", False),
    ("storage.k8s.io", "v1", "csinodes"): ("CSINode", False),
    ("storage.k8s.io", "v1", "csidrivers"): ("CSIDriver", False),
    ("storage.k8s.io", "v1", "csistoragecapacities"): ("CSIStorageCapacity", True),
    ("scheduling.k8s.io", "v1", "priorityclasses"): ("PriorityClass", False),
    ("policy", "v1", "poddisruptionbudgets"): ("PodDisruptionBudget", True),
}
BY_KIND: dict[str, ResId] = {}
for _rid, (_kind, _ns) in KINDS.items():
    BY_KIND.setdefault(_kind, _rid)


def api_version(rid: ResId) -> str:
    return f"{rid[0]}/{rid[1]}" if rid[0] else rid[1]


def status_body(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }


def error(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_body(code, reason, message), status=code)


MERGE_KEYS = {"conditions": "type", "resourceClaimStatuses": "name", "reservedFor": "uid"}


def strategic_merge(target: Any, patch: Any) -> Any:
    """Enough of strategic merge patch for the tests: lists with a merge key merge by it."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif k in MERGE_KEYS and isinstance(v, list) and isinstance(out.get(k), list):
            mk = MERGE_KEYS[k]
            merged = [dict(x) for x in out[k]]
            for item in v:
                if isinstance(item, dict) and item.get("$patch") == "delete":
                    merged = [x for x in merged if x.get(mk) != item.get(mk)]
                    continue
                for i, x in enumerate(merged):
                    if x.get(mk) == item.get(mk):
                        merged[i] = strategic_merge(x, item)
                        break
                else:
                    merged.append(copy.deepcopy(item))
            out[k] = merged
        else:
            out[k] = strategic_merge(out.get(k), v)
    return out


def _get_path(obj: Obj, dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def matches(obj: Obj | None, selector: str) -> bool:
    if obj is None:
        return False
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _get_path(obj, k) == v:
                return False
        else:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            if _get_path(obj, k) != v:
                return False
    return True


@dataclass
class Watch:
    rid: ResId
    namespace: str
    selector: str
    bookmarks: bool
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)


@dataclass
class Change:
    rv: int
    rid: ResId
    type: str
    obj: Obj
    old: Obj | None


class FakeAPIServer:
    def __init__(self, served: Iterable[ResId] | None = None) -> None:
        self.served: set[ResId] = (
            set(served)
            if served is not None
            else {r for r in KINDS if r != ("scheduling.k8s.io", "v1beta1", "podgroups")}
        )
        self.objects: dict[ResId, dict[tuple[str, str], Obj]] = {r: {} for r in KINDS}
        self.rv = 1000
        self.compacted = 0
        self.history: list[Change] = []
        self.watches: list[Watch] = []
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.headers: list[dict[str, str]] = []
        self._fail: list[list[Any]] = []  # [method, path suffix, status, times]
        self.delays: dict[tuple[str, str], float] = {}  # (method, path suffix) -> seconds before it is handled
        self.handled: list[tuple[str, str]] = []  # (method, path) of every request, in the order it was acted on
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # --- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> str:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        for w in self.watches:
            w.queue.put_nowait(("close", None))
        if self._runner is not None:
            await self._runner.cleanup()

    def kubeconfig(self, path: str) -> str:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        return path

    # --- test controls ---------------------------------------------------------------------------------------

    def fail(self, method: str, path_suffix: str, status: int, times: int = 1) -> None:
        self._fail.append([method, path_suffix, status, times])

    def add(self, kind: str, obj: Obj, *, silent: bool = False, rid: ResId | None = None) -> Obj:
        rid = rid or BY_KIND[kind]
        obj = copy.deepcopy(obj)
        m = obj.setdefault("metadata", {})
        if KINDS[rid][1]:
            m.setdefault("namespace", "default")
        m.setdefault("uid", str(uuid.uuid4()))
        m.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        obj["apiVersion"], obj["kind"] = api_version(rid), KINDS[rid][0]
        return self._write(rid, obj, "ADDED", silent=silent)

    def modify(self, kind: str, obj: Obj, *, silent: bool = False) -> Obj:
        rid = BY_KIND[kind]
        return self._write(rid, copy.deepcopy(obj), "MODIFIED", silent=silent)

    def remove(self, kind: str, namespace: str, name: str, *, silent: bool = False) -> None:
        rid = BY_KIND[kind]
        self._delete(rid, namespace if KINDS[rid][1] else "", name, silent=silent)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        rid = BY_KIND[kind]
        o = self.objects[rid].get((namespace if KINDS[rid][1] else "", name))
        return copy.deepcopy(o) if o is not None else None

    def list(self, kind: str) -> list[Obj]:
        return [copy.deepcopy(o) for o in self.objects[BY_KIND[kind]].values()]

    def expire(self) -> None:
        """Compact history: open watches end with 410 Expired, older resourceVersions are refused."""
        self.compacted = self.rv
        self.history.clear()
        for w in list(self.watches):
            w.queue.put_nowait(("event", {"type": "ERROR", "object": status_body(410, "Expired", "too old")}))
            w.queue.put_nowait(("close", None))

    def disconnect(self) -> None:
        for w in list(self.watches):
            w.queue.put_nowait(("abort", None))

    def bookmark(self) -> None:
        for w in list(self.watches):
            if w.bookmarks:
                kind = KINDS[w.rid][0]
                ev = {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": kind,
                        "apiVersion": api_version(w.rid),
                        "metadata": {"resourceVersion": str(self.rv)},
                    },
                }
                w.queue.put_nowait(("event", ev))

    def count(self, method: str, path_part: str) -> int:
        return sum(1 for m, p, _, _ in self.requests if m == method and path_part in p)

    # --- storage ---------------------------------------------------------------------------------------------

    def _write(self, rid: ResId, obj: Obj, typ: str, *, silent: bool = False) -> Obj:
        m = obj["metadata"]
        key = (m.get("namespace", "") if KINDS[rid][1] else "", m["name"])
        old = self.objects[rid].get(key)
        self.rv += 1
        m["resourceVersion"] = str(self.rv)
        obj.setdefault("apiVersion", api_version(rid))
        obj.setdefault("kind", KINDS[rid][0])
        self.objects[rid][key] = obj
        if not silent:
            self._notify(Change(self.rv, rid, typ if old is not None or typ == "ADDED" else "ADDED", obj, old))
        return copy.deepcopy(obj)

    def _delete(self, rid: ResId, ns: str, name: str, *, silent: bool = False) -> Obj | None:
        old = self.objects[rid].pop((ns, name), None)
        if old is None:
            return None
        self.rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        if not silent:
            self._notify(Change(self.rv, rid, "DELETED", gone, old))
        return gone

    def _notify(self, ch: Change) -> None:
        self.history.append(ch)
        for w in list(self.watches):
            ev = self._event_for(w, ch)
            if ev is not None:
                w.queue.put_nowait(("event", ev))

    def _event_for(self, w: Watch, ch: Change) -> Obj | None:
        if w.rid != ch.rid:
            return None
        ns = (ch.obj.get("metadata") or {}).get("namespace", "")
        if w.namespace and ns != w.namespace:
            return None
        new_ok = ch.type != "DELETED" and matches(ch.obj, w.selector)
        old_ok = ch.old is not None and matches(ch.old, w.selector)
        if ch.type == "DELETED":
            typ = "DELETED" if old_ok else None
        elif new_ok and old_ok:
            typ = "MODIFIED"
        elif new_ok:
            typ = "ADDED"
        elif old_ok:
            typ = "DELETED"
        else:
            typ = None
        return None if typ is None else {"type": typ, "object": copy.deepcopy(ch.obj)}

    # --- HTTP ------------------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw else None
        self.requests.append((request.method, path, dict(request.query), body))
        self.headers.append(dict(request.headers))
        delay = next((d for (m, suffix), d in self.delays.items() if m == request.method and path.endswith(suffix)), 0)
        if delay:
            await asyncio.sleep(delay)  # handled later, even if the client gives up on it meanwhile
        self.handled.append((request.method, path))
        for f in self._fail:
            if f[3] > 0 and f[0] == request.method and path.endswith(f[1]):
                f[3] -= 1
                return error(f[2], "Injected", f"injected failure {f[2]}")
        parts = [p for p in path.split("/") if p]
        if len(parts) < 2 or parts[0] not in ("api", "apis"):
            return error(404, "NotFound", "the server could not find the requested resource")
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) < 3:
                return error(404, "NotFound", "no such group")
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            return self._discovery(group, version)
        ns = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        rid = (group, version, rest[0])
        if rid not in KINDS or rid not in self.served:
            return error(404, "NotFound", f"the server could not find the requested resource {path}")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        namespaced = KINDS[rid][1]
        if not namespaced:
            ns = ""
        m = request.method
        if not name:
            if m == "GET":
                if request.query.get("watch") in ("1", "true"):
                    return await self._watch(request, rid, ns)
                return self._list(request, rid, ns)
            if m == "POST":
                return self._create(rid, ns, body)
            return error(405, "MethodNotAllowed", m)
        key = (ns, name)
        if sub == "binding" and m == "POST" and rid == ("", "v1", "pods"):
            return self._bind(key, body)
        if m == "GET":
            o = self.objects[rid].get(key)
            if o is None:
                return error(404, "NotFound", f'{rest[0]} "{name}" not found')
            return web.json_response(o)
        if m == "PUT":
            return self._put(rid, key, body, sub)
        if m == "PATCH":
            return self._patch(rid, key, body, sub, request.headers.get("Content-Type", ""))
        if m == "DELETE":
            gone = self._delete(rid, *key)
            if gone is None:
                return error(404, "NotFound", f'{rest[0]} "{name}" not found')
            return web.json_response(gone)
        return error(405, "MethodNotAllowed", m)

    def _discovery(self, group: str, version: str) -> web.Response:
        res = [
            {"name": r[2], "namespaced": KINDS[r][1], "kind": KINDS[r][0]}
            for r in self.served
            if r[0] == group and r[1] == version
        ]
        if not res:
            return error(404, "NotFound", "the server could not find the requested resource")
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": api_version((group, version, "")),
                "resources": res,
            }
        )

    def _selected(self, rid: ResId, ns: str, selector: str) -> list[Obj]:
        out = []
        for (ons, _), o in sorted(self.objects[rid].items()):
            if ns and ons != ns:
                continue
            if matches(o, selector):
                out.append(o)
        return out

    def _list(self, request: web.Request, rid: ResId, ns: str) -> web.Response:
        items = self._selected(rid, ns, request.query.get("fieldSelector", ""))
        limit = int(request.query.get("limit", "0") or 0)
        cont = request.query.get("continue", "")
        rv, offset = self.rv, 0
        if cont:
            crv, _, off = cont.partition(":")
            if int(crv) < self.compacted:
                return error(410, "Expired", "The provided continue parameter is too old")
            rv, offset = int(crv), int(off)
        page = items[offset : offset + limit] if limit else items[offset:]
        meta: Obj = {"resourceVersion": str(rv)}
        if limit and offset + limit < len(items):
            meta["continue"] = f"{rv}:{offset + limit}"
        stripped = []
        for o in page:
            o = copy.deepcopy(o)
            o.pop("apiVersion", None)
            o.pop("kind", None)
            stripped.append(o)
        return web.json_response(
            {"kind": KINDS[rid][0] + "List", "apiVersion": api_version(rid), "metadata": meta, "items": stripped}
        )

    async def _watch(self, request: web.Request, rid: ResId, ns: str) -> web.StreamResponse:
        q = request.query
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        since = int(q.get("resourceVersion") or 0)
        if since and since < self.compacted:
            line = {"type": "ERROR", "object": status_body(410, "Expired", f"too old resource version: {since}")}
            await resp.write(json.dumps(line).encode() + b"\n")
            await resp.write_eof()
            return resp
        w = Watch(rid, ns, q.get("fieldSelector", ""), q.get("allowWatchBookmarks") == "true")
        for ch in self.history:
            if ch.rv > since:
                ev = self._event_for(w, ch)
                if ev is not None:
                    w.queue.put_nowait(("event", ev))
        self.watches.append(w)
        timeout = float(q.get("timeoutSeconds") or 3600)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    what, ev = await asyncio.wait_for(w.queue.get(), min(remaining, 0.05))
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break  # the client went away (aiohttp does not cancel the handler): the watch ends
                    continue
                if what == "close":
                    break
                if what == "abort":
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
                await resp.write(json.dumps(ev).encode() + b"\n")
            await resp.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass
        finally:
            self.watches.remove(w)
        return resp

    def _create(self, rid: ResId, ns: str, body: Obj) -> web.Response:
        m = body.setdefault("metadata", {})
        if KINDS[rid][1]:
            m["namespace"] = ns or m.get("namespace") or "default"
        if not m.get("name") and m.get("generateName"):
            m["name"] = m["generateName"] + uuid.uuid4().hex[:5]
        if not m.get("name"):
            return error(422, "Invalid", "metadata.name: Required value")
        if (m.get("namespace", "") if KINDS[rid][1] else "", m["name"]) in self.objects[rid]:
            return error(409, "AlreadyExists", f'{rid[2]} "{m["name"]}" already exists')
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = "2026-01-01T00:00:00Z"
        body["apiVersion"], body["kind"] = api_version(rid), KINDS[rid][0]
        return web.json_response(self._write(rid, body, "ADDED"), status=201)

    def _put(self, rid: ResId, key: tuple[str, str], body: Obj, sub: str) -> web.Response:
        cur = self.objects[rid].get(key)
        if cur is None:
            return error(404, "NotFound", f'{rid[2]} "{key[1]}" not found')
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            return error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rid[2]} "{key[1]}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        if sub == "status":
            new = copy.deepcopy(cur)
            new["status"] = copy.deepcopy(body.get("status") or {})
        else:
            new = copy.deepcopy(body)
            if "status" in cur:
                new["status"] = copy.deepcopy(cur["status"])
            new["metadata"]["uid"] = cur["metadata"]["uid"]
            new["metadata"]["namespace"] = cur["metadata"].get("namespace")
            if new["metadata"]["namespace"] is None:
                new["metadata"].pop("namespace")
        return web.json_response(self._write(rid, new, "MODIFIED"))

    def _patch(self, rid: ResId, key: tuple[str, str], body: Obj, sub: str, ctype: str) -> web.Response:
        cur = self.objects[rid].get(key)
        if cur is None:
            return error(404, "NotFound", f'{rid[2]} "{key[1]}" not found')
        strategic = "strategic-merge-patch" in ctype
        if strategic and rid[0].endswith(".x-k8s.io"):
            return error(415, "UnsupportedMediaType", "strategic merge patch is not supported for custom resources")
        pm = body.get("metadata") or {}
        if pm.get("uid") and pm["uid"] != cur["metadata"]["uid"]:
            return error(409, "Conflict", "Precondition failed: UID in precondition does not match")
        if pm.get("resourceVersion") and pm["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            return error(409, "Conflict", "the object has been modified")
        fn = strategic_merge if strategic else merge_patch
        if sub == "status":
            new = copy.deepcopy(cur)
            new["status"] = fn(cur.get("status") or {}, body.get("status") or {})
        else:
            new = fn(copy.deepcopy(cur), {k: v for k, v in body.items() if k != "status"})
        return web.json_response(self._write(rid, new, "MODIFIED"))

    def _bind(self, key: tuple[str, str], body: Obj) -> web.Response:
        rid = ("", "v1", "pods")
        cur = self.objects[rid].get(key)
        if cur is None:
            return error(404, "NotFound", f'pods "{key[1]}" not found')
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != cur["metadata"]["uid"]:
            return error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{key[1]}": StorageError: invalid object, '
                f"Code: 4, Key: /registry/pods/{key[0]}/{key[1]}, Precondition failed: UID in precondition: {uid}",
            )
        if (cur.get("spec") or {}).get("nodeName"):
            return error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{key[1]}": pod {key[1]} is already assigned to '
                f'node "{cur["spec"]["nodeName"]}"',
            )
        new = copy.deepcopy(cur)
        new.setdefault("spec", {})["nodeName"] = body["target"]["name"]
        conds = [c for c in (new.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
        new["status"]["conditions"] = [*conds, {"type": "PodScheduled", "status": "True"}]
        self._write(rid, new, "MODIFIED")
        return web.json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201
        )


async def eventually(cond: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> None:
    """Poll ``cond`` until it is true; AssertionError after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(interval)
