"""Room ``config``: how a scheduler process is set up (upstream ``pkg/scheduler/apis/config``).

The ``KubeSchedulerConfiguration`` (types, defaults, parsing, validation: ``schedulerconfig``), the plugin
registry the configuration is validated against (``registry``: found through the ``dra_scheduler.registries``
entry points, never by importing ``plugins``), ``check-config``, the generator of docs/configuration.md
(``configref``) and the logging set-up.

May import: ``scheduler.api``.
"""
