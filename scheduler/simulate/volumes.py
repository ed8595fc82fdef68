"""What kube-controller-manager's volume controllers do, for ``simulate``: PersistentVolumeClaims bound to
PersistentVolumes and dynamic provisioning (moved out of :mod:`scheduler.api.storage`, which keeps the storage
kinds and the volume helpers the plugins share).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from scheduler.api.clusterapi import ApiError
from scheduler.api.model import (
    ModelError,
)

if TYPE_CHECKING:
    from scheduler.api.clusterapi import Obj
from scheduler.api.storage import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_STORAGE_PROVISIONER,
    NOT_SUPPORTED_PROVISIONER,
    PV_AVAILABLE,
    PV_BOUND,
    PVC_BOUND,
    PVC_LOST,
    PVC_PENDING,
    MatchError,
    PersistentVolume,
    PersistentVolumeClaim,
    Raw,
    StorageClass,
    _map,
    check_access_modes,
    csinode_from,
    find_matching_volume,
    is_volume_bound_to_claim,
    pv_from,
    pvc_from,
    storageclass_from,
)
from scheduler.simulate.memapi import CLUSTER_SCOPED, InMemoryAPI

log = structlog.get_logger("dra_scheduler.storage")


def _claim_ref(pvc: Raw) -> dict[str, Any]:
    """``reference.GetReference`` of a claim (what a PV's spec.claimRef holds)."""
    m = pvc.get("metadata") or {}
    return {
        "kind": "PersistentVolumeClaim",
        "namespace": m.get("namespace", ""),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "apiVersion": "v1",
        "resourceVersion": m.get("resourceVersion", ""),
    }


class VolumeControllers:
    """For ``simulate`` only: what kube-controller-manager would do about volumes, on the in-memory API.

    * ephemeral-volume controller: a pod's generic ephemeral volume gets its PVC ``<pod>-<volume>`` from the
      ``volumeClaimTemplate``, controlled by the pod;
    * persistentvolume-binder (pkg/controller/volume/persistentvolume): new PVs become ``Available``; a
      claim without a class gets the default StorageClass (retroactive default class); a claim asking a
      PV by ``volumeName``, a PV pre-bound to a claim (``claimRef``, e.g. written by the scheduler's PreBind)
      and an ``Immediate`` claim with a matching Available PV are bound: PV ``claimRef`` (+
      ``bound-by-controller`` when the controller chose it), PV phase ``Bound``, PVC ``volumeName`` +
      ``bind-completed`` (+ ``bound-by-controller``), PVC phase ``Bound`` with the PV's access modes and
      capacity; a claim to provision (Immediate, or WaitForFirstConsumer once the scheduler set
      ``volume.kubernetes.io/selected-node``) gets the ``storage-provisioner`` annotations;
    * with ``provision=True`` (default) it also stands in for the StorageClass's external provisioner, which
      is not part of kube-controller-manager: it creates the PV ``pvc-<claim uid>`` (capacity = request,
      the claim's access and volume modes, ``claimRef`` to the claim, ``pv.kubernetes.io/provisioned-by``,
      a CSI source of the provisioner, node affinity = the selected node's values of the driver's CSINode
      topology keys, else of the class's ``allowedTopologies`` keys), which the binder then binds. Without
      it a pod whose claim needs provisioning waits in PreBind until ``bindTimeoutSeconds``.

    Use: ``vc = VolumeControllers(api); await vc.start()`` once every input object is loaded (before
    scheduling), ``await vc.stop()`` at the end. Between, it runs as a task woken by the API's watch events,
    as the real controllers run next to the scheduler; VolumeBinding's PreBind polls the API and yields, so
    a binding completes within PreBind's first look. A binding kube-controller-manager would never complete
    (a PV pre-bound by a user to a claim whose access modes it lacks) makes PreBind wait
    ``bindTimeoutSeconds`` of real time, as it would on a cluster.
    """

    def __init__(self, api: InMemoryAPI, *, provision: bool = True) -> None:
        self.api = api
        self.provision = provision
        self._dirty_claims: set[tuple[str, str]] = set()
        self._dirty_pods: set[tuple[str, str]] = set()
        self._resync_all = False
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self.api.watchers.append(self.watch)
        await self.sync_all()
        await self._process()  # what the first pass's own writes asked for (e.g. binding a provisioned PV)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await self._process()  # what the last writes asked for
        if self.watch in self.api.watchers:
            self.api.watchers.remove(self.watch)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def watch(self, kind: str, event: str, obj: Obj) -> None:
        m = obj.get("metadata") or {}
        if kind == "PersistentVolumeClaim" and event != "DELETED":
            self._dirty_claims.add((m.get("namespace", ""), m.get("name", "")))
        elif kind == "PersistentVolume" and event != "DELETED":
            ref = (obj.get("spec") or {}).get("claimRef")
            if isinstance(ref, Mapping):
                self._dirty_claims.add((str(ref.get("namespace", "")), str(ref.get("name", ""))))
            else:
                self._resync_all = True  # a new Available PV may satisfy an Immediate claim
        elif kind == "StorageClass":
            self._resync_all = True
        elif kind == "Pod" and event == "ADDED":
            self._dirty_pods.add((m.get("namespace", ""), m.get("name", "")))
        else:
            return
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._process()

    async def _process(self) -> None:
        try:
            await self._process_dirty()
        except ApiError as e:  # a lost race: the next event syncs again (the controllers retry)
            log.warning("volume controllers: write failed", error=str(e))
            self._resync_all = True

    async def _process_dirty(self) -> None:
        for _ in range(100):  # until quiet (each step writes at most what it observed)
            if self._resync_all:
                self._resync_all = False
                self._dirty_claims.clear()
                await self.sync_all()
                continue
            pods, self._dirty_pods = self._dirty_pods, set()
            claims, self._dirty_claims = self._dirty_claims, set()
            if not pods and not claims:
                return
            for ns, name in sorted(pods):
                obj = self._stored("Pod", ns, name)
                if obj is not None:
                    await self._ephemeral_claims(obj)
            for ns, name in sorted(claims):
                obj = self._stored("PersistentVolumeClaim", ns, name)
                if obj is not None:
                    await self._sync_claim(obj)

    async def sync_all(self) -> None:
        """One pass of every controller over every object (the informers' initial list)."""
        for kind, sync in (
            ("Pod", self._ephemeral_claims),
            ("PersistentVolume", self._init_volume),
            ("PersistentVolumeClaim", self._sync_claim),
        ):
            stored = self.api.stored(kind)
            keys = [((o.get("metadata") or {}).get("namespace", ""), o["metadata"]["name"]) for o in stored]
            for ns, name in keys:
                obj = self._stored(kind, ns, name)  # current: an earlier step may have written it
                if obj is not None:
                    await sync(obj)

    # --- helpers ------------------------------------------------------------------------------------

    def _stored(self, kind: str, ns: str, name: str) -> Obj | None:
        return self.api.objects.get((kind, "" if kind in CLUSTER_SCOPED else ns, name))

    def _classes(self) -> dict[str, StorageClass]:
        out = {}
        for o in self.api.stored("StorageClass"):
            try:
                sc = storageclass_from(o)
            except ModelError:
                continue
            out[sc.name] = sc
        return out

    def _volumes(self) -> list[PersistentVolume]:
        out = []
        for o in self.api.stored("PersistentVolume"):
            try:
                out.append(pv_from(o))
            except ModelError:
                continue
        return out

    # --- ephemeral-volume controller ------------------------------------------------------------------

    async def _ephemeral_claims(self, pod: Obj) -> None:
        m = pod.get("metadata") or {}
        ns, pod_name = m.get("namespace", "default"), m.get("name", "")
        for v in (pod.get("spec") or {}).get("volumes") or []:
            if not isinstance(v, Mapping) or not isinstance(v.get("ephemeral"), Mapping):
                continue
            tmpl = v["ephemeral"].get("volumeClaimTemplate") or {}
            name = f"{pod_name}-{v.get('name', '')}"
            if self._stored("PersistentVolumeClaim", ns, name) is not None:
                continue  # existing (ours, or a conflicting one the pod must not use)
            tm = tmpl.get("metadata") or {}
            claim: Obj = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": pod_name,
                            "uid": m.get("uid", ""),
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": copy.deepcopy(tmpl.get("spec") or {}),
            }
            if tm.get("labels"):
                claim["metadata"]["labels"] = dict(tm["labels"])
            if tm.get("annotations"):
                claim["metadata"]["annotations"] = dict(tm["annotations"])
            await self.api.create("PersistentVolumeClaim", claim)

    # --- persistentvolume-binder ----------------------------------------------------------------------

    async def _init_volume(self, raw: Obj) -> None:
        """A new PV (no phase yet) becomes Available (Bound when its claim is already bound to it)."""
        if (raw.get("status") or {}).get("phase"):
            return
        obj = copy.deepcopy(raw)
        obj["status"] = {**(obj.get("status") or {}), "phase": PV_AVAILABLE}
        ref = (obj.get("spec") or {}).get("claimRef")
        if isinstance(ref, Mapping):
            claim = self._stored("PersistentVolumeClaim", str(ref.get("namespace", "")), str(ref.get("name", "")))
            if claim is not None and (claim.get("spec") or {}).get("volumeName") == obj["metadata"]["name"]:
                obj["status"]["phase"] = PV_BOUND
        await self.api.update("PersistentVolume", obj, subresource="status")

    def _default_class(self, classes: Mapping[str, StorageClass]) -> StorageClass | None:
        defaults = [c for c in classes.values() if c.is_default]
        if not defaults:
            return None
        # the newest default wins (DefaultStorageClass admission), then the name
        return max(defaults, key=lambda c: (c.meta.creation_timestamp, c.name))

    async def _sync_claim(self, raw: Obj) -> None:
        try:
            pvc = pvc_from(raw)
        except ModelError:
            return
        if pvc.meta.deleting:
            return
        classes = self._classes()
        volumes = {pv.name: pv for pv in self._volumes()}
        if pvc.fully_bound:
            pv = volumes.get(pvc.volume_name)
            if pv is None:
                if pvc.phase != PVC_LOST:
                    await self._claim_status(raw, PVC_LOST, None)
            elif pvc.phase != PVC_BOUND and is_volume_bound_to_claim(pv, pvc):
                await self._claim_status(raw, PVC_BOUND, pv)
            return
        if pvc.volume_name:
            named = volumes.get(pvc.volume_name)
            if named is not None and (
                is_volume_bound_to_claim(named, pvc) or (named.claim_ref is None and self._satisfies(named, pvc))
            ):
                await self._bind(named, pvc)
                return
            await self._claim_status(raw, PVC_PENDING, None)
            return
        if not pvc.has_class:
            default = self._default_class(classes)
            if default is not None:
                obj = copy.deepcopy(raw)
                obj.setdefault("spec", {})["storageClassName"] = default.name
                await self.api.update("PersistentVolumeClaim", obj)
                return  # the update event syncs the claim again
        klass = classes.get(pvc.storage_class) if pvc.storage_class else None
        delay = klass is not None and klass.wait_for_first_consumer
        try:
            pv = self._best_match(pvc, volumes.values(), delay)
        except MatchError:
            pv = None
        if pv is not None:
            await self._bind(pv, pvc)
            return
        if (
            klass is not None
            and (not delay or pvc.selected_node is not None)
            and klass.provisioner
            and klass.provisioner != NOT_SUPPORTED_PROVISIONER
        ):
            await self._provision(raw, pvc, klass)
            return
        if pvc.phase != PVC_PENDING:
            await self._claim_status(raw, PVC_PENDING, None)

    @staticmethod
    def _satisfies(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
        """``checkVolumeSatisfyClaim`` for a claim that names an unclaimed PV."""
        if pv.meta.deleting:
            return False
        if (pv.capacity.int_value() if pv.capacity else 0) < pvc.request_bytes:
            return False
        if pv.storage_class != pvc.storage_class or pv.volume_attributes_class != pvc.volume_attributes_class:
            return False
        return pv.volume_mode == pvc.volume_mode and check_access_modes(pvc, pv)

    @staticmethod
    def _best_match(
        pvc: PersistentVolumeClaim, volumes: Iterable[PersistentVolume], delay: bool
    ) -> PersistentVolume | None:
        """``findBestMatchForClaim``: PVs grouped by access-mode set, the sets holding every requested mode
        tried from the fewest modes up, ``FindMatchingVolume`` with no node in each."""
        groups: dict[frozenset[str], list[PersistentVolume]] = {}
        for pv in sorted(volumes, key=lambda p: p.name):
            groups.setdefault(frozenset(pv.access_modes), []).append(pv)
        wanted = set(pvc.access_modes)
        for modes in sorted(groups, key=lambda s: (len(s), sorted(s))):
            if not wanted <= modes:
                continue
            found = find_matching_volume(pvc, groups[modes], None, None, delay)
            if found is not None:
                return found
        return None

    async def _bind(self, pv: PersistentVolume, pvc: PersistentVolumeClaim) -> None:
        """``bind``: the PV first (claimRef, phase), then the claim (volumeName, annotations, phase)."""
        pv_obj = copy.deepcopy(dict(pv.raw))
        pvc_obj = copy.deepcopy(dict(pvc.raw))
        spec = pv_obj.setdefault("spec", {})
        ref = spec.get("claimRef")
        if not is_volume_bound_to_claim(pv, pvc) or not isinstance(ref, Mapping) or ref.get("uid") != pvc.meta.uid:
            if not is_volume_bound_to_claim(pv, pvc):
                anns = pv_obj["metadata"].setdefault("annotations", {})
                anns.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            spec["claimRef"] = _claim_ref(pvc_obj)
            pv_obj = await self.api.update("PersistentVolume", pv_obj)
        if (pv_obj.get("status") or {}).get("phase") != PV_BOUND:
            pv_obj["status"] = {**(pv_obj.get("status") or {}), "phase": PV_BOUND}
            pv_obj = await self.api.update("PersistentVolume", pv_obj, subresource="status")
        anns = pvc_obj.setdefault("metadata", {}).setdefault("annotations", {})
        dirty = False
        if (pvc_obj.get("spec") or {}).get("volumeName") != pv.name:
            pvc_obj.setdefault("spec", {})["volumeName"] = pv.name
            anns.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            dirty = True
        if ANN_BIND_COMPLETED not in anns:
            anns[ANN_BIND_COMPLETED] = "yes"
            dirty = True
        if dirty:
            pvc_obj = await self.api.update("PersistentVolumeClaim", pvc_obj)
        await self._claim_status(pvc_obj, PVC_BOUND, pv_from(pv_obj))

    async def _claim_status(self, raw: Mapping[str, Any], phase: str, pv: PersistentVolume | None) -> None:
        """``updateClaimStatus``: the phase, and the bound PV's access modes and capacity (or none)."""
        obj = copy.deepcopy(dict(raw))
        old = obj.get("status") or {}
        status = dict(old)
        status["phase"] = phase
        if pv is None:
            status.pop("accessModes", None)
            status.pop("capacity", None)
        else:
            status["accessModes"] = list(pv.access_modes)
            if old.get("phase") != phase:
                cap = (_map(pv.raw, "spec").get("capacity") or {}).get("storage")
                if cap is not None:
                    status["capacity"] = {"storage": cap}
        if status == old:
            return
        obj["status"] = status
        await self.api.update("PersistentVolumeClaim", obj, subresource="status")

    async def _provision(self, raw: Obj, pvc: PersistentVolumeClaim, klass: StorageClass) -> None:
        """``provisionClaimOperationExternal`` (annotations), then, with ``provision``, the external
        provisioner's PV."""
        anns = pvc.meta.annotations
        if anns.get(ANN_STORAGE_PROVISIONER) != klass.provisioner or (
            anns.get(ANN_BETA_STORAGE_PROVISIONER) != klass.provisioner
        ):
            obj = copy.deepcopy(raw)
            a = obj.setdefault("metadata", {}).setdefault("annotations", {})
            a[ANN_STORAGE_PROVISIONER] = klass.provisioner
            a[ANN_BETA_STORAGE_PROVISIONER] = klass.provisioner
            raw = await self.api.update("PersistentVolumeClaim", obj)
        if pvc.phase != PVC_PENDING:
            await self._claim_status(raw, PVC_PENDING, None)
            raw = self._stored("PersistentVolumeClaim", pvc.namespace, pvc.name) or raw
        if not self.provision:
            return
        name = f"pvc-{pvc.meta.uid}"
        if self._stored("PersistentVolume", "", name) is not None:
            return
        spec: dict[str, Any] = {
            "capacity": {"storage": str(_map(_map(raw.get("spec"), "resources"), "requests").get("storage", "0"))},
            "accessModes": list(pvc.access_modes),
            "persistentVolumeReclaimPolicy": klass.reclaim_policy,
            "storageClassName": klass.name,
            "volumeMode": pvc.volume_mode,
            "claimRef": _claim_ref(raw),
            "csi": {"driver": klass.provisioner, "volumeHandle": name},
        }
        affinity = self._provisioned_affinity(klass, pvc.selected_node)
        if affinity:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": affinity}]}}
        if pvc.volume_attributes_class:
            spec["volumeAttributesClassName"] = pvc.volume_attributes_class
        mount = klass.raw.get("mountOptions")
        if isinstance(mount, list) and mount:
            spec["mountOptions"] = list(mount)
        pv: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_DYNAMICALLY_PROVISIONED: klass.provisioner}},
            "spec": spec,
        }
        created = await self.api.create("PersistentVolume", pv)
        await self._init_volume(created)

    def _provisioned_affinity(self, klass: StorageClass, node_name: str | None) -> list[dict[str, Any]]:
        """The accessible topology of the new volume: the selected node's values of the topology keys the
        driver reports in that node's CSINode, else of the keys of ``allowedTopologies``; for an Immediate
        claim (no node) the first allowed topology term."""
        if node_name is None:
            if not klass.allowed_topologies:
                return []
            return [
                {"key": k, "operator": "In", "values": sorted(v)} for k, v in klass.allowed_topologies[0].requirements
            ]
        node = self._stored("Node", "", node_name)
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        keys: list[str] = []
        csinode = self._stored("CSINode", "", node_name)
        if csinode is not None:
            try:
                d = csinode_from(csinode).driver(klass.provisioner)
            except ModelError:
                d = None
            if d is not None:
                keys = list(d.topology_keys)
        if not keys:
            keys = sorted({k for t in klass.allowed_topologies for k, _ in t.requirements})
        return [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]
