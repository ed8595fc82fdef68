"""Room ``gang``: the group cycle, which places a PodGroup's members all at once or none of them.

``cycle`` runs a group's cycle (quorum, topology domains, search with backtracking, commit), on a host
given as the :class:`~scheduler.gang.host.GroupHost` protocol (the loop); ``capacity`` bounds how many
members fit per node before the search, ``pack`` packs member classes into nodes, ``workload`` scores
placements of a Workload's groups, ``status`` computes a PodGroup's status.

May import: ``scheduler.api``, ``scheduler.config``, ``scheduler.cache``, ``scheduler.framework``.
"""
