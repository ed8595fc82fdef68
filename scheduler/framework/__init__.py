"""Room ``framework``: the scheduling framework (upstream ``pkg/scheduler/framework``).

``interface`` defines the extension points (PreEnqueue ... PostBind, the group points) and the values a
cycle passes (``Status``, ``CycleState``, ``QueuedPodInfo``); ``runtime`` runs a profile's plugins at each
point (``batch`` scores many nodes at once); ``nominator``, ``capacity``, ``domains``, ``memo``, ``helpers``
and ``hooks`` are what plugins and the engine share beyond the extension points. Plugins (``plugins/``)
implement these protocols; the framework never names a plugin.

May import: ``scheduler.api``, ``scheduler.config``, ``scheduler.cache``.
"""
