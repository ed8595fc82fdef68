"""Where the API server connection comes from: kubectl's (client-go's) loading rules.

client-go ``tools/clientcmd`` v0.37.2 (``loader.go`` ``NewDefaultClientConfigLoadingRules`` / ``Load``,
``merged_client_builder.go`` ``DeferredLoadingClientConfig.ClientConfig``, ``merge.go``), in order:

1. ``--kubeconfig F``: that file alone; a missing file is an error (no fallback).
2. else ``$KUBECONFIG``: a ``:``-separated list (duplicates dropped, empty entries and missing files skipped),
   merged: for clusters, users and contexts the first file naming an entry wins (the whole entry; later
   files' entries of the same name are ignored), and ``current-context`` comes from the first file that
   sets it. A file that exists but cannot be read or parsed is an error.
3. else ``~/.kube/config`` (when ``$KUBECONFIG`` is unset or empty).
4. when the merged configuration selects no context (no files, or no ``current-context`` and no
   ``--context``): the in-cluster service account, if ``KUBERNETES_SERVICE_HOST`` and
   ``KUBERNETES_SERVICE_PORT`` are set and the token file exists.

``--context NAME`` replaces ``current-context``; a context that is not in the merged configuration is an
error. Relative file paths in an entry (certificate-authority, client-certificate, client-key, tokenFile)
resolve against the directory of the file the entry came from (``ResolveLocalPaths``).

Nothing configured is a :class:`NoClusterConfigured` whose message (one line) says what was tried.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"
KUBECONFIG_ENV = "KUBECONFIG"
_SECTIONS = ("clusters", "users", "contexts")


class KubeconfigError(Exception):
    """A kubeconfig that exists but cannot be used (unreadable, invalid, unknown context)."""


class NoClusterConfigured(KubeconfigError):
    """Neither a kubeconfig selecting a context nor an in-cluster service account."""


@dataclass
class Kubeconfig:
    """The merged configuration of the files in ``files`` (a kubernetes-asyncio ``ConfigNode`` tree in
    ``merged``, each entry remembering its file), and the context to use."""

    files: list[str]
    merged: Any  # kubernetes_asyncio ConfigNode
    context: str
    contexts: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"kubeconfig {os.pathsep.join(self.files)}"


@dataclass
class InCluster:
    host: str
    token_file: str
    ca_file: str

    @property
    def source(self) -> str:
        return f"in-cluster service account ({self.host})"


def precedence(explicit: str | None, env: Mapping[str, str]) -> tuple[list[str], str]:
    """The files to read, in priority order, and how they were chosen (for messages)."""
    if explicit:
        return [os.path.expanduser(explicit)], f"--kubeconfig {explicit}"
    value = env.get(KUBECONFIG_ENV, "")
    if value:
        out: list[str] = []
        for p in value.split(os.pathsep):
            p = os.path.expanduser(p)
            if p and p not in out:
                out.append(p)
        return out, f"${KUBECONFIG_ENV}={value}"
    home = os.path.join(os.path.expanduser("~"), ".kube", "config")
    return [home], home


def _read(path: str) -> dict[str, Any] | None:
    """One kubeconfig file as a mapping; None when it does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise KubeconfigError(f"kubeconfig {path}: cannot read: {e}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or type(e).__name__
        raise KubeconfigError(f"kubeconfig {path}: invalid YAML{where}: {problem}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path}: expected a mapping (kind: Config), got {type(doc).__name__}")
    for section in _SECTIONS:
        items = doc.get(section)
        if items is None:
            continue
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("name"), str) for i in items
        ):
            raise KubeconfigError(f"kubeconfig {path}: {section}: expected a list of entries with a name")
    cc = doc.get("current-context")
    if cc is not None and not isinstance(cc, str):
        raise KubeconfigError(f"kubeconfig {path}: current-context: expected a string")
    return doc


def merge_files(paths: list[str]) -> tuple[Any, list[str], list[str]]:
    """client-go's merge of ``paths``: (merged ConfigNode, files read, files missing)."""
    from kubernetes_asyncio.config.kube_config import ConfigNode

    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {s: set() for s in _SECTIONS}
    read: list[str] = []
    missing: list[str] = []
    for path in paths:
        doc = _read(path)
        if doc is None:
            missing.append(path)
            continue
        read.append(path)
        for section in _SECTIONS:
            for item in doc.get(section) or []:
                if item["name"] in seen[section]:
                    continue  # the first file naming it wins, whole
                seen[section].add(item["name"])
                # the entry keeps its file: relative paths in it resolve against that file's directory
                merged[section].append(ConfigNode(f"{path}/{section}[name={item['name']}]", item, path))
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
    return ConfigNode("kubeconfig", merged, read[0] if read else None), read, missing


def in_cluster(env: Mapping[str, str], sa_dir: str | None = None) -> tuple[InCluster | None, str]:
    """The in-cluster settings, or None and why not (client-go ``inClusterClientConfig.Possible``)."""
    sa = sa_dir or SERVICE_ACCOUNT_DIR
    host, port = env.get(HOST_ENV, ""), env.get(PORT_ENV, "")
    if not host or not port:
        return None, f"{HOST_ENV}/{PORT_ENV} not set"
    token, ca = os.path.join(sa, "token"), os.path.join(sa, "ca.crt")
    if not os.path.isfile(token):
        return None, f"{token}: no such file"
    if not os.path.isfile(ca):
        return None, f"{ca}: no such file"
    hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return InCluster(f"https://{hostport}", token, ca), ""


def resolve(
    explicit: str | None = None,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
    sa_dir: str | None = None,
) -> Kubeconfig | InCluster:
    """Which configuration to use (no network). Raises :class:`KubeconfigError` /
    :class:`NoClusterConfigured` with a one-line message."""
    env = os.environ if env is None else env
    paths, how = precedence(explicit, env)
    if explicit and not os.path.exists(paths[0]):
        raise NoClusterConfigured(f"--kubeconfig {explicit}: no such file")
    merged, read, missing = merge_files(paths)
    names = [str(c["name"]) for c in merged.value["contexts"]]
    chosen = context or str(merged.value.get("current-context") or "")
    if read and chosen:
        if chosen not in names:
            flag = "--context" if context else "current-context"
            known = ", ".join(names) or "none"
            raise KubeconfigError(
                f"{flag} {chosen!r}: no such context in kubeconfig {os.pathsep.join(read)} (contexts: {known})"
            )
        return Kubeconfig(read, merged, chosen, names)
    if context:
        where = f"kubeconfig {os.pathsep.join(read)}" if read else _tried_files(how, explicit, missing)
        raise NoClusterConfigured(f"--context {context!r}: no such context ({where} has no contexts)")
    ic, why_not = in_cluster(env, sa_dir)
    if ic is not None:
        return ic
    if read:
        tried = f"kubeconfig {os.pathsep.join(read)}: no current-context set and no --context given"
    else:
        tried = _tried_files(how, explicit, missing)
    raise NoClusterConfigured(f"no cluster configured: tried {tried}; in-cluster: {why_not}")


def _tried_files(how: str, explicit: str | None, missing: list[str]) -> str:
    if explicit:
        return how
    if how.startswith("$"):
        return f"{how} (no such file{'s' if len(missing) > 1 else ''})"
    return f"--kubeconfig (not given), ${KUBECONFIG_ENV} (not set), {how} (no such file)"
