"""Room ``api``: the Kubernetes API as the scheduler reads and writes it. The bottom room.

Typed, frozen values converted from raw JSON (pods, nodes, DRA kinds, storage kinds, workloads, PodGroups,
DeviceTaintRules), the value types they use (quantities, semver, Go durations, label selectors, name
validation), the checks of untrusted input (``inputcheck``, ``yamlload``, the API schema ``apischema.json``)
and :class:`~scheduler.api.clusterapi.ClusterAPI`, the one interface through which the scheduler writes.

May import: the standard library and third-party packages only; nothing else of ``scheduler`` (and never
``plugins``). Pure: no I/O apart from reading files it is given.
"""
