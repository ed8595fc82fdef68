"""Room ``simulate``: the offline world of ``dra-scheduler simulate``.

``simulation`` loads YAML objects into an in-memory API server (``memapi``), plays the controllers a real
cluster would run (``claimcontroller``: ResourceClaims from templates; ``volumes``: PersistentVolume binding
and provisioning), runs the loop on a fake clock and reports (``report``, ``progress``).

May import: every room below it (``api``, ``config``, ``cache``, ``framework``, ``gang``, ``loop``); not
``kube``.
"""
