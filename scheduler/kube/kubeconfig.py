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

:func:`static_settings` turns the chosen configuration into connection settings without kubernetes-asyncio when
it needs no plugin (no ``exec``, no ``auth-provider``): server, TLS (``certificate-authority[-data]``,
``client-certificate[-data]``, ``client-key[-data]``, ``insecure-skip-tls-verify``, ``tls-server-name``) and a
``token``, ``tokenFile`` or ``username``/``password``, as client-go's ``DirectClientConfig.ClientConfig``
(``client_config.go``) reads them; the in-cluster service account likewise (``rest.InClusterConfig``). Importing
kubernetes-asyncio takes ~0.2 s of CPU (every API and model class of its client package): a fifth of the
scheduler's start-up (issue #16).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
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
class Merged:
    """client-go's merge of kubeconfig files, as plain data: for each section the winning entries, each with
    the file it came from (relative paths in it resolve against that file's directory)."""

    entries: dict[str, list[tuple[str, dict[str, Any]]]]  # section -> [(file, entry)]
    current_context: str = ""
    first_file: str | None = None

    def entry(self, section: str, name: str) -> tuple[str, dict[str, Any]] | None:
        for path, item in self.entries.get(section, []):
            if item.get("name") == name:
                return path, item
        return None


@dataclass
class Kubeconfig:
    """The merged configuration of the files in ``files`` and the context to use."""

    files: list[str]
    data: Merged
    context: str
    contexts: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"kubeconfig {os.pathsep.join(self.files)}"

    @cached_property
    def merged(self) -> Any:
        """The same as a kubernetes-asyncio ``ConfigNode`` tree (each entry remembering its file), for its
        ``KubeConfigLoader`` (exec and auth-provider plugins); imports kubernetes-asyncio."""
        from kubernetes_asyncio.config.kube_config import ConfigNode

        tree: dict[str, Any] = {
            section: [ConfigNode(f"{path}/{section}[name={item['name']}]", item, path) for path, item in entries]
            for section, entries in self.data.entries.items()
        }
        if self.data.current_context:
            tree["current-context"] = self.data.current_context
        return ConfigNode("kubeconfig", tree, self.data.first_file)


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


def merge_files(paths: list[str]) -> tuple[Merged, list[str], list[str]]:
    """client-go's merge of ``paths``: (merged configuration, files read, files missing)."""
    merged = Merged({s: [] for s in _SECTIONS})
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
                merged.entries[section].append((path, item))
        if not merged.current_context and doc.get("current-context"):
            merged.current_context = doc["current-context"]
    merged.first_file = read[0] if read else None
    return merged, read, missing


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
    names = [str(item["name"]) for _, item in merged.entries["contexts"]]
    chosen = context or str(merged.current_context or "")
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


# --------------------------------------------------------------------------------------------------------------
# connection settings without kubernetes-asyncio
# --------------------------------------------------------------------------------------------------------------

# a token file is read again at most this often (client-go transport.NewCachedFileTokenSource: one minute; the
# kubelet rotates projected service-account tokens well before they expire)
TOKEN_FILE_PERIOD = 60.0
# the fields static_settings reads; an entry with any other (exec, auth-provider, proxy-url, impersonation ...)
# goes through kubernetes-asyncio's loader as before
_STATIC_CLUSTER = frozenset(
    {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify", "tls-server-name"}
)
_STATIC_USER = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "username",
        "password",
    }
)
_temp_files: dict[bytes, str] = {}


def _temp_file(content: bytes) -> str:
    """A private file holding ``content`` (a ``*-data`` field: Python's TLS and kopf read certificates from
    files), removed at exit; one per distinct content."""
    name = _temp_files.get(content)
    if name is None:
        if not _temp_files:
            atexit.register(_remove_temp_files)
        fd, name = tempfile.mkstemp(prefix="dra-scheduler-kubeconfig-")
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        _temp_files[content] = name
    return name


def _remove_temp_files() -> None:
    for name in _temp_files.values():
        with contextlib.suppress(OSError):
            os.remove(name)
    _temp_files.clear()


def tls_context(
    source: str, ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool
) -> ssl.SSLContext:
    """A client TLS context: the CA (the system's when none is given), the client certificate, and no
    verification when ``verify`` is off (``insecure-skip-tls-verify``); a bad file is a KubeconfigError."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
        if cert_file:
            ctx.load_cert_chain(cert_file, keyfile=key_file)
    except (OSError, ssl.SSLError) as e:
        raise KubeconfigError(f"{source}: TLS settings: {e}") from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass
class StaticSettings:
    """How to reach and authenticate to the API server, for a configuration that needs no plugin."""

    host: str
    source: str
    context: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    token: str | None = None  # the Authorization header: "Bearer ..." or "Basic ..."
    token_file: str | None = None  # read again every TOKEN_FILE_PERIOD seconds ("Bearer " + its content)
    _read: tuple[float, str] | None = field(default=None, repr=False, compare=False)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of an ``https`` server (None for ``http``): the CA (the system's when none is given),
        the client certificate, no verification with ``insecure-skip-tls-verify``."""
        if not self.host.startswith("https"):
            return None
        return tls_context(self.source, self.ca_file, self.cert_file, self.key_file, self.verify)

    async def authorization(self) -> str | None:
        """The Authorization header's value (None: no credentials but the client certificate)."""
        if self.token is not None:
            return self.token
        if self.token_file is None:
            return None
        now = time.monotonic()
        if self._read is None or now - self._read[0] >= TOKEN_FILE_PERIOD:
            try:
                with open(self.token_file, encoding="utf-8") as f:
                    value = f.read().strip()
            except OSError:
                if self._read is not None:  # keep the last token while the file is being replaced
                    return self._read[1]
                raise
            self._read = (now, f"Bearer {value}")
        return self._read[1]

    async def login(self) -> dict[str, Any]:
        """The same endpoint and credentials as keyword arguments of ``kopf.ConnectionInfo``."""
        tok = await self.authorization() or ""
        scheme, value = tok.split(" ", 1) if " " in tok else ("Bearer", tok)
        return {
            "server": self.host,
            "ca_path": self.ca_file,
            "insecure": not self.verify or None,
            "certificate_path": self.cert_file,
            "private_key_path": self.key_file,
            "username": None,
            "password": None,
            "scheme": scheme if value else None,
            "token": value or None,
        }


def static_settings(found: Kubeconfig | InCluster) -> StaticSettings | None:
    """The connection settings of ``found`` read without kubernetes-asyncio, or None when they need its loader
    (an ``exec`` or ``auth-provider`` user, a field not read here, a cluster without an http(s) server).
    Raises :class:`KubeconfigError` for a file that is missing or empty."""
    if isinstance(found, InCluster):
        return _in_cluster_settings(found)
    data = found.data
    ctx = data.entry("contexts", found.context)
    context = (ctx[1].get("context") if ctx else None) or {}
    if not isinstance(context, Mapping):
        return None
    cluster_entry = data.entry("clusters", str(context.get("cluster") or ""))
    if cluster_entry is None:
        return None
    cluster_path, cluster_item = cluster_entry
    cluster = cluster_item.get("cluster") or {}
    user_path: str = ""
    user: Any = {}
    if context.get("user"):
        user_entry = data.entry("users", str(context["user"]))
        if user_entry is not None:
            user_path, user = user_entry[0], user_entry[1].get("user") or {}
    if not isinstance(cluster, Mapping) or not isinstance(user, Mapping):
        return None
    if set(cluster) - _STATIC_CLUSTER or set(user) - _STATIC_USER:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("http://", "https://")):
        return None
    where = f"{found.source}, context {found.context}"
    out = StaticSettings(host=server.rstrip("/"), source=found.source, context=found.context)
    if out.host.startswith("https"):
        out.ca_file = _file_or_data(cluster, "certificate-authority", cluster_path, where)
        out.cert_file = _file_or_data(user, "client-certificate", user_path, where)
        out.key_file = _file_or_data(user, "client-key", user_path, where)
    if "insecure-skip-tls-verify" in cluster:
        out.verify = not cluster["insecure-skip-tls-verify"]
    if cluster.get("tls-server-name"):
        out.tls_server_name = str(cluster["tls-server-name"])
    if user.get("token"):
        out.token = f"Bearer {user['token']}"
    elif user.get("tokenFile"):
        out.token_file = _local_path(str(user["tokenFile"]), user_path)
        if not os.path.isfile(out.token_file):
            raise KubeconfigError(f"{where}: tokenFile {out.token_file}: no such file")
    elif "username" in user and "password" in user:
        basic = f"{user['username']}:{user['password']}".encode()
        out.token = "Basic " + base64.b64encode(basic).decode()
    return out


def _in_cluster_settings(ic: InCluster) -> StaticSettings:
    """client-go ``rest.InClusterConfig``: the service account's token (read again as it rotates) and CA."""
    try:
        with open(ic.token_file, encoding="utf-8") as f:
            token = f.read().strip()
        with open(ic.ca_file, "rb") as f:
            ca = f.read()
    except OSError as e:
        raise KubeconfigError(f"{ic.source}: {e}") from None
    if not token:
        raise KubeconfigError(f"{ic.source}: token file {ic.token_file} is empty")
    if not ca:
        raise KubeconfigError(f"{ic.source}: CA file {ic.ca_file} is empty")
    out = StaticSettings(host=ic.host, source=ic.source, ca_file=ic.ca_file, token_file=ic.token_file)
    out._read = (time.monotonic(), f"Bearer {token}")
    return out


def _local_path(value: str, entry_file: str) -> str:
    """client-go ``ResolveLocalPaths``: relative to the directory of the file the entry came from."""
    base = os.path.dirname(os.path.abspath(entry_file)) if entry_file else ""
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def _file_or_data(entry: Mapping[str, Any], key: str, entry_file: str, where: str) -> str | None:
    """``key``'s file, or ``key-data`` (base64, wins over the file) written to a private file."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            content = base64.standard_b64decode(data if isinstance(data, bytes | str) else str(data))
        except ValueError as e:
            raise KubeconfigError(f"{where}: {key}-data: invalid base64: {e}") from None
        return _temp_file(content)
    value = entry.get(key)
    if not value:
        return None
    path = _local_path(str(value), entry_file)
    if not os.path.isfile(path):
        raise KubeconfigError(f"{where}: {key} {path}: no such file")
    return path
