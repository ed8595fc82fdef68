"""The single ledger of device use: allocated (API) + assumed (written by us) + in-flight (reserved).

Every device in use is recorded here, keyed by the claim (UID) that uses it, in two layers:

* ``api``: what the API server says (claim informer), overridden by what we wrote and the watch has
  not yet echoed (assumed). An informer update never replaces an assumed entry with an older
  resourceVersion.
* ``pending``: in-flight allocations reserved in memory in a scheduling cycle, not yet written. A
  pending entry shadows the API entry of the same claim until it is written (then assumed) or
  forgotten (rollback).

One revision counter covers both layers, and a per-node revision lets callers cache per-node results
(the node's revision changes whenever a device in a pool local to that node changes use; devices in
pools that are not node-local bump the ``shared`` revision instead). Admin-access results are not
counted as use, as upstream.

:class:`LedgerView` is a read-only view with some claims treated as unallocated (preemption's dry run frees
the devices of victims' claims that no surviving pod reserves); the ledger itself never sees a dry run.

The ledger is mutated only between scheduling cycles or in Reserve/Unreserve of the cycle itself, and
all of that runs on one thread (the event loop), so a cycle's reads see a consistent state; the
revision check in :meth:`DeviceLedger.check_revision` makes any violation loud instead of silent.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.api.dra import DeviceResult
from scheduler.api.quantity import Quantity

DeviceID = tuple[str, str, str]  # (driver, pool, device)
PoolID = tuple[str, str]  # (driver, pool)


@dataclass(frozen=True, slots=True)
class Use:
    """The devices one claim holds."""

    claim_uid: str
    claim_key: str
    results: tuple[DeviceResult, ...]
    resource_version: int = 0


class ConcurrentModification(RuntimeError):
    pass


def _rv(v: str) -> int:
    try:
        return int(v)
    except ValueError:
        return 0


class DeviceLedger:
    def __init__(self) -> None:
        self._api: dict[str, Use] = {}
        self._assumed: set[str] = set()
        self._pending: dict[str, Use] = {}
        # derived indexes over the effective uses
        self._exclusive: dict[DeviceID, set[str]] = {}
        self._shares: dict[DeviceID, dict[tuple[str, str], Mapping[str, Quantity]]] = {}
        self._pool_devices: dict[PoolID, dict[str, int]] = {}
        self._pool_rev: dict[PoolID, int] = {}
        self._pool_node: dict[PoolID, str] = {}
        self._node_rev: dict[str, int] = {}
        self.revision = 0
        self.shared_revision = 0
        # log of the nodes whose revision changed (node_changes_since): a new list when trimmed or reset
        self._log_id = next(_ledger_logs)
        self._node_log: list[str] = []
        self._node_log_base = 0

    # --- topology of pools (from the slice cache) -------------------------------------------------

    def set_pool_nodes(self, pool_node: Mapping[PoolID, str]) -> None:
        """Which node a pool is local to ("" or absent: shared by several nodes)."""
        self._pool_node = dict(pool_node)
        self.revision += 1
        self.shared_revision += 1
        self._node_log_base += len(self._node_log) + 1  # every earlier mark: "any node may have changed"
        self._node_log = []

    # --- reads ----------------------------------------------------------------------------------------

    def is_allocated(self, dev: DeviceID) -> bool:
        """Dedicated (exclusive) use by any claim."""
        return dev in self._exclusive

    def exclusive_users(self, dev: DeviceID) -> frozenset[str]:
        return frozenset(self._exclusive.get(dev, ()))

    def shared_consumption(self, dev: DeviceID) -> Mapping[tuple[str, str], Mapping[str, Quantity]] | None:
        return self._shares.get(dev)

    def has_shares(self, dev: DeviceID) -> bool:
        return dev in self._shares

    def in_use(self, dev: DeviceID) -> bool:
        return dev in self._exclusive or dev in self._shares

    def pool_devices_in_use(self, pool: PoolID) -> Mapping[str, int]:
        return self._pool_devices.get(pool, {})

    def pool_revision(self, pool: PoolID) -> int:
        return self._pool_rev.get(pool, 0)

    def node_revision(self, node: str) -> int:
        return self._node_rev.get(node, 0)

    def node_changes_since(self, mark: tuple[int, int] | None) -> tuple[tuple[int, int], list[str] | None]:
        """``(mark now, nodes)``: the nodes whose :meth:`node_revision` may have changed since ``mark`` (a
        superset), or None when that is not known (no mark, another ledger's, a log reset or trimmed since)."""
        base = self._node_log_base
        now = (self._log_id, base + len(self._node_log))
        if mark is None or mark[0] != self._log_id or not base <= mark[1] <= now[1]:
            return now, None
        return now, self._node_log[mark[1] - base :]

    def use_of(self, claim_uid: str) -> Use | None:
        return self._pending.get(claim_uid) or self._api.get(claim_uid)

    def is_pending(self, claim_uid: str) -> bool:
        return claim_uid in self._pending

    def pending_claims(self) -> Iterable[Use]:
        return self._pending.values()

    def check_revision(self, expected: int) -> None:
        if self.revision != expected:
            raise ConcurrentModification(
                f"device ledger changed during a scheduling cycle (revision {expected} -> {self.revision})"
            )

    # --- writes ----------------------------------------------------------------------------------------

    def observe_claim(self, claim_uid: str, claim_key: str, results: tuple[DeviceResult, ...] | None, rv: str) -> None:
        """Informer view of a claim (``results`` None = not allocated). Never rolls back an assumed write."""
        new_rv = _rv(rv)
        if claim_uid in self._assumed:
            cur = self._api.get(claim_uid)
            if cur is not None and new_rv < cur.resource_version:
                return
            self._assumed.discard(claim_uid)
        self._set_api(claim_uid, Use(claim_uid, claim_key, results, new_rv) if results is not None else None)

    def forget_claim(self, claim_uid: str) -> None:
        """The claim was deleted."""
        self._assumed.discard(claim_uid)
        self._set_api(claim_uid, None)

    def assume(self, claim_uid: str, claim_key: str, results: tuple[DeviceResult, ...] | None, rv: str) -> None:
        """We wrote this allocation (or deallocation); the watch has not echoed it yet."""
        self._assumed.add(claim_uid)
        self._set_api(claim_uid, Use(claim_uid, claim_key, results, _rv(rv)) if results is not None else None)
        self.unreserve(claim_uid)

    def reserve(self, claim_uid: str, claim_key: str, results: tuple[DeviceResult, ...]) -> None:
        """In-flight: chosen in a cycle, not yet written."""
        old = self.use_of(claim_uid)
        self._pending[claim_uid] = Use(claim_uid, claim_key, results)
        self._reindex(old, self._pending[claim_uid])

    def unreserve(self, claim_uid: str) -> None:
        old = self._pending.pop(claim_uid, None)
        if old is not None:
            self._reindex(old, self._api.get(claim_uid))

    def _set_api(self, claim_uid: str, use: Use | None) -> None:
        old_api = self._api.get(claim_uid)
        if use is None:
            self._api.pop(claim_uid, None)
        else:
            self._api[claim_uid] = use
        if claim_uid not in self._pending:
            self._reindex(old_api, use)

    def _reindex(self, old: Use | None, new: Use | None) -> None:
        if old is new:
            return
        touched: set[PoolID] = set()
        if old is not None:
            for r in old.results:
                if not r.admin_access:
                    self._remove(old, r)
                    touched.add((r.driver, r.pool))
        if new is not None:
            for r in new.results:
                if not r.admin_access:
                    self._add(new, r)
                    touched.add((r.driver, r.pool))
        self.revision += 1
        for pool in touched:
            self._pool_rev[pool] = self._pool_rev.get(pool, 0) + 1
            node = self._pool_node.get(pool, "")
            if node:
                self._node_rev[node] = self._node_rev.get(node, 0) + 1
                self._node_log.append(node)
            else:
                self.shared_revision += 1
        if len(self._node_log) > 4 * len(self._node_rev) + 4096:
            keep = len(self._node_log) // 2
            self._node_log_base += len(self._node_log) - keep
            self._node_log = self._node_log[-keep:]

    def _add(self, use: Use, r: DeviceResult) -> None:
        dev = (r.driver, r.pool, r.device)
        if r.share_id:
            self._shares.setdefault(dev, {})[(use.claim_uid, r.share_id)] = r.consumed_capacity
        else:
            self._exclusive.setdefault(dev, set()).add(use.claim_uid)
        counts = self._pool_devices.setdefault((r.driver, r.pool), {})
        counts[r.device] = counts.get(r.device, 0) + 1

    def _remove(self, use: Use, r: DeviceResult) -> None:
        dev = (r.driver, r.pool, r.device)
        if r.share_id:
            shares = self._shares.get(dev)
            if shares is not None:
                shares.pop((use.claim_uid, r.share_id), None)
                if not shares:
                    del self._shares[dev]
        else:
            users = self._exclusive.get(dev)
            if users is not None:
                users.discard(use.claim_uid)
                if not users:
                    del self._exclusive[dev]
        pool = (r.driver, r.pool)
        counts = self._pool_devices.get(pool)
        if counts is not None:
            n = counts.get(r.device, 0) - 1
            if n > 0:
                counts[r.device] = n
            else:
                counts.pop(r.device, None)
                if not counts:
                    del self._pool_devices[pool]


_view_ids = itertools.count(1)
_ledger_logs = itertools.count(1)


class LedgerView(DeviceLedger):
    """A read-only view of a ledger in which the given claims hold no devices (preemption's dry run: the claims
    of victims that no surviving pod reserves). The real ledger is not modified; writes to a view raise.

    Revisions of the pools and nodes the hidden claims touch are replaced by a number unique to this view (and
    negative, so never equal to a real revision): caches keyed by revision (the allocator's counter totals,
    DynamicResources' per-node results, GpuTopology's free masks) never serve a real result for the view or
    the other way round."""

    def __init__(self, base: DeviceLedger, hidden: Iterable[str]) -> None:
        super().__init__()
        self.base = base
        self.hidden = frozenset(u for u in hidden if base.use_of(u) is not None)
        self._token = -next(_view_ids)
        self._hidden_devices: set[DeviceID] = set()
        self._hidden_counts: dict[PoolID, dict[str, int]] = {}
        for uid in self.hidden:
            use = base.use_of(uid)
            assert use is not None
            for r in use.results:
                if r.admin_access:
                    continue
                self._hidden_devices.add((r.driver, r.pool, r.device))
                counts = self._hidden_counts.setdefault((r.driver, r.pool), {})
                counts[r.device] = counts.get(r.device, 0) + 1
        self._nodes = {base._pool_node.get(p, "") for p in self._hidden_counts}
        self._pool_node = base._pool_node
        self.revision = self._token
        self.shared_revision = self._token if "" in self._nodes else base.shared_revision

    def hides(self, dev: DeviceID) -> bool:
        return dev in self._hidden_devices

    # --- reads ----------------------------------------------------------------------------------------

    def is_allocated(self, dev: DeviceID) -> bool:
        if dev not in self._hidden_devices:
            return self.base.is_allocated(dev)
        return bool(self.base.exclusive_users(dev) - self.hidden)

    def exclusive_users(self, dev: DeviceID) -> frozenset[str]:
        users = self.base.exclusive_users(dev)
        return users - self.hidden if dev in self._hidden_devices else users

    def shared_consumption(self, dev: DeviceID) -> Mapping[tuple[str, str], Mapping[str, Quantity]] | None:
        shares = self.base.shared_consumption(dev)
        if shares is None or dev not in self._hidden_devices:
            return shares
        kept = {k: v for k, v in shares.items() if k[0] not in self.hidden}
        return kept or None

    def has_shares(self, dev: DeviceID) -> bool:
        return self.shared_consumption(dev) is not None

    def in_use(self, dev: DeviceID) -> bool:
        return self.is_allocated(dev) or self.has_shares(dev)

    def pool_devices_in_use(self, pool: PoolID) -> Mapping[str, int]:
        counts = self.base.pool_devices_in_use(pool)
        minus = self._hidden_counts.get(pool)
        if not minus:
            return counts
        out = dict(counts)
        for dev, n in minus.items():
            left = out.get(dev, 0) - n
            if left > 0:
                out[dev] = left
            else:
                out.pop(dev, None)
        return out

    def pool_revision(self, pool: PoolID) -> int:
        return self._token if pool in self._hidden_counts else self.base.pool_revision(pool)

    def node_revision(self, node: str) -> int:
        return self._token if node in self._nodes else self.base.node_revision(node)

    def node_changes_since(self, mark: tuple[int, int] | None) -> tuple[tuple[int, int], list[str] | None]:
        return (0, 0), None  # a dry run's view: nothing is known

    def use_of(self, claim_uid: str) -> Use | None:
        return None if claim_uid in self.hidden else self.base.use_of(claim_uid)

    def is_pending(self, claim_uid: str) -> bool:
        return claim_uid not in self.hidden and self.base.is_pending(claim_uid)

    def pending_claims(self) -> Iterable[Use]:
        return [u for u in self.base.pending_claims() if u.claim_uid not in self.hidden]

    def check_revision(self, expected: int) -> None:
        return None

    # --- writes: a view is read-only ----------------------------------------------------------------

    def set_pool_nodes(self, pool_node: Mapping[PoolID, str]) -> None:
        raise TypeError("LedgerView is read-only")

    def observe_claim(self, claim_uid: str, claim_key: str, results: tuple[DeviceResult, ...] | None, rv: str) -> None:
        raise TypeError("LedgerView is read-only")

    def forget_claim(self, claim_uid: str) -> None:
        raise TypeError("LedgerView is read-only")

    def assume(self, claim_uid: str, claim_key: str, results: tuple[DeviceResult, ...] | None, rv: str) -> None:
        raise TypeError("LedgerView is read-only")

    def reserve(self, claim_uid: str, claim_key: str, results: tuple[DeviceResult, ...]) -> None:
        raise TypeError("LedgerView is read-only")

    def unreserve(self, claim_uid: str) -> None:
        raise TypeError("LedgerView is read-only")
