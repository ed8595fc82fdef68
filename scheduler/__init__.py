"""dra-scheduler: a secondary Kubernetes scheduler (DRA devices, topology, gangs) on asyncio.

The package is a house of rooms, each importing only rooms below it (docs/architecture.md;
tests/test_layering.py enforces the order)::

    api < config < cache < framework < gang < loop < {simulate, kube} < cli

``cli`` is this package's own modules: ``cli.py`` (the ``dra-scheduler`` command) and ``__main__.py``
(``python -m scheduler``). Plugins live outside, in ``plugins/``, and are found through entry points.
"""
