"""Room ``loop``: the scheduling loop (upstream ``pkg/scheduler/scheduler.go``, ``schedule_one.go``).

``scheduler`` pops a pod from the ``queue`` (active, backoff and unschedulable sub-queues), runs it through
the framework's cycle (or hands its group to :mod:`scheduler.gang`), and binds asynchronously through the
:class:`~scheduler.api.clusterapi.ClusterAPI`.

May import: ``scheduler.api``, ``scheduler.config``, ``scheduler.cache``, ``scheduler.framework``,
``scheduler.gang``.
"""
