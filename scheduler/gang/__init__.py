"""Room ``gang``: the group cycle, which places a PodGroup's members all at once or none of them.

The cycle is built in layers, each importing only the ones before it:

* ``state``: tunables and the values a search passes around; ``host``: :class:`~scheduler.gang.host.GroupHost`,
  the scheduling loop as the cycle sees it (the loop is above this room);
* ``capacity`` (member classes, per-node bounds before the search), ``pack`` (counts of equal members onto nodes),
  ``workload`` (scores of a Workload's placements): pure helpers;
* ``placement`` (:class:`~scheduler.gang.placement.GroupPlacer`: place, unplace, revalidate, commit) <
  ``search`` (:class:`~scheduler.gang.search.GroupSearcher`: domains, composite trees, restarts) <
  ``cycle`` (:class:`~scheduler.gang.cycle.GangScheduler`: quorum, failure, preemption, conditions; the entry);
* ``status``: a PodGroup's status and phase as the scheduler writes them.

May import: ``scheduler.api``, ``scheduler.config``, ``scheduler.cache``, ``scheduler.framework``.
"""
