"""Room ``cache``: what the scheduler knows about the cluster (upstream ``pkg/scheduler/internal/cache``).

:class:`~scheduler.cache.cache.Cache` is fed by the informers (live) or the in-memory API (offline) and hands
each cycle an immutable :class:`~scheduler.cache.cache.Snapshot` of :class:`~scheduler.cache.cache.NodeInfo`;
the :mod:`~scheduler.cache.ledger` keeps which devices are allocated, to whom, and which are in flight.

May import: ``scheduler.api``, ``scheduler.config``.
"""
