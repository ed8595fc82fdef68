"""Room ``cache``: what the scheduler knows about the cluster (upstream ``pkg/scheduler/internal/cache``).

:class:`~scheduler.cache.cache.Cache` is fed by the informers (live) or the in-memory API (offline) and hands
each cycle an immutable :class:`~scheduler.cache.cache.Snapshot` of :class:`~scheduler.cache.cache.NodeInfo`;
the :mod:`~scheduler.cache.ledger` keeps which devices are allocated, to whom, and which are in flight;
:mod:`~scheduler.cache.coexistence` notices devices allocated twice by two schedulers side by side and holds
this scheduler's device partition (read by the loop and by the DynamicResources plugin, so it sits here, below
both, although it matters most to the live process).

May import: ``scheduler.api``, ``scheduler.config``.
"""
