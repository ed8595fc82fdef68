"""The live side: connection to the API server, informers, leader election, configuration watch.

Everything here talks JSON dicts over HTTP (:mod:`scheduler.kube.http`: asyncio and httptools); kubernetes-asyncio is
used only to read a kubeconfig or the in-cluster service account. No generated models on the hot path.
"""
