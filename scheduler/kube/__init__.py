"""Room ``kube``: the live process, ``dra-scheduler run``.

The connection to the API server (``client``, ``http``, ``kubeconfig``, ``resources``: JSON dicts over
asyncio and httptools; kubernetes-asyncio is used only to read a kubeconfig or the in-cluster service account),
the ``informer``\\ s that feed the cache, Events (``events``), leader election (``leader``), the configuration
watch (``configwatch``), the PodGroup status controller, metrics, health endpoints, memory reports, and
``run``, which wires them around the loop.

May import: every room below it (``api``, ``config``, ``cache``, ``framework``, ``gang``, ``loop``); not
``simulate``.
"""
