"""``dra-scheduler run``'s connection settings: kubectl's loading rules (client-go v0.37.2
``tools/clientcmd/loader.go`` ``NewDefaultClientConfigLoadingRules``/``Load``, ``merged_client_builder.go``
``DeferredLoadingClientConfig.ClientConfig``: --kubeconfig, else $KUBECONFIG merged with the first file
winning, else ~/.kube/config, else in-cluster), ``--context``, and the one-line error when nothing is
configured."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import certifi
import pytest
import yaml

from scheduler.cli import main as cli_main
from scheduler.kube.client import KubeConnection, LiveAPI
from scheduler.kube.kubeconfig import (
    InCluster,
    Kubeconfig,
    KubeconfigError,
    NoClusterConfigured,
    resolve,
    static_settings,
)
from tests.fake_apiserver import FakeAPIServer


def kubeconfig(
    path: Path,
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, tuple[str, str]] | None = None,
    current: str | None = None,
) -> str:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": {"cluster": c, "user": u}} for n, (c, u) in (contexts or {}).items()],
    }
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def simple(path: Path, name: str, server: str = "https://x.example:6443", token: str = "t") -> str:
    return kubeconfig(
        path,
        clusters={name: {"server": server}},
        users={name: {"token": token}},
        contexts={name: (name, name)},
        current=name,
    )


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $KUBECONFIG, an empty home, no in-cluster service account."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setattr("scheduler.kube.kubeconfig.SERVICE_ACCOUNT_DIR", str(tmp_path / "no-sa"))
    return home


def service_account(tmp_path: Path, token: str = "sa-token") -> Path:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(token)
    shutil.copy(certifi.where(), sa / "ca.crt")
    return sa


# --- the order ---------------------------------------------------------------------------------------------


def test_home_kubeconfig_when_nothing_else_is_given(clean_env: Path) -> None:
    """The issue's case: a valid ~/.kube/config and no --kubeconfig (it used to fail with ConfigException:
    Service host/port is not set)."""
    simple(clean_env / ".kube" / "config", "home")
    found = resolve()
    assert isinstance(found, Kubeconfig)
    assert found.files == [str(clean_env / ".kube" / "config")] and found.context == "home"


def test_empty_kubeconfig_variable_means_home(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    simple(clean_env / ".kube" / "config", "home")
    monkeypatch.setenv("KUBECONFIG", "")
    found = resolve()
    assert isinstance(found, Kubeconfig) and found.context == "home"


def test_kubeconfig_variable_wins_over_home(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    simple(clean_env / ".kube" / "config", "home")
    monkeypatch.setenv("KUBECONFIG", simple(tmp_path / "env.yaml", "env"))
    found = resolve()
    assert isinstance(found, Kubeconfig) and found.context == "env"
    assert found.files == [str(tmp_path / "env.yaml")]


def test_explicit_flag_wins_over_variable_and_home(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simple(clean_env / ".kube" / "config", "home")
    monkeypatch.setenv("KUBECONFIG", simple(tmp_path / "env.yaml", "env"))
    found = resolve(simple(tmp_path / "flag.yaml", "flag"))
    assert isinstance(found, Kubeconfig) and found.context == "flag" and found.files == [str(tmp_path / "flag.yaml")]


def test_explicit_missing_file_is_an_error_without_fallback(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simple(clean_env / ".kube" / "config", "home")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr("scheduler.kube.kubeconfig.SERVICE_ACCOUNT_DIR", str(service_account(tmp_path)))
    with pytest.raises(NoClusterConfigured, match=r"^--kubeconfig .*nope: no such file$"):
        resolve(str(tmp_path / "nope"))


def test_variable_list_merges_first_file_wins(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go: missing entries skipped; the first file naming a cluster/user/context wins, whole (even
    its unset fields are not filled from later files); current-context from the first file setting it."""
    a = kubeconfig(
        tmp_path / "a.yaml",
        clusters={"shared": {"server": "https://a.example"}},
        users={"u": {"token": "from-a"}},
        contexts={"ctx-a": ("shared", "u")},
    )  # no current-context
    b = kubeconfig(
        tmp_path / "b.yaml",
        clusters={"shared": {"server": "https://b.example", "insecure-skip-tls-verify": True}, "b-only": {}},
        users={"u": {"token": "from-b"}},
        contexts={"ctx-b": ("shared", "u")},
        current="ctx-b",
    )
    c = simple(tmp_path / "c.yaml", "ctx-c")  # sets current-context too, but after b
    missing = str(tmp_path / "missing.yaml")
    monkeypatch.setenv("KUBECONFIG", ":".join([missing, a, "", b, a, c]))
    found = resolve()
    assert isinstance(found, Kubeconfig)
    assert found.files == [a, b, c]  # missing skipped, duplicates dropped
    assert found.context == "ctx-b"
    clusters = {x["name"]: x for x in found.merged.value["clusters"]}
    assert clusters["shared"].value["cluster"] == {"server": "https://a.example"}  # a's whole entry
    assert "b-only" in clusters
    users = {x["name"]: x for x in found.merged.value["users"]}
    assert users["u"].value["user"]["token"] == "from-a"
    assert set(found.contexts) == {"ctx-a", "ctx-b", "ctx-c"}


def test_context_flag_overrides_current_context(clean_env: Path, tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "k.yaml",
        clusters={"one": {"server": "https://one"}, "two": {"server": "https://two"}},
        contexts={"one": ("one", ""), "two": ("two", "")},
        current="one",
    )
    found = resolve(path, "two")
    assert isinstance(found, Kubeconfig) and found.context == "two"


def test_unknown_context_names_the_known_ones(clean_env: Path, tmp_path: Path) -> None:
    path = simple(tmp_path / "k.yaml", "real")
    with pytest.raises(KubeconfigError, match=r"--context 'nope': no such context in kubeconfig .*\(contexts: real\)"):
        resolve(path, "nope")
    bad_current = kubeconfig(tmp_path / "b.yaml", clusters={"c": {}}, contexts={"c": ("c", "")}, current="gone")
    with pytest.raises(KubeconfigError, match=r"current-context 'gone': no such context"):
        resolve(bad_current)


def test_in_cluster_when_no_kubeconfig(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    sa = service_account(tmp_path)
    found = resolve(sa_dir=str(sa))
    assert isinstance(found, InCluster)
    assert found.host == "https://10.96.0.1:443" and found.token_file == str(sa / "token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    found = resolve(sa_dir=str(sa))
    assert isinstance(found, InCluster) and found.host == "https://[fd00::1]:443"


def test_in_cluster_also_when_the_kubeconfig_selects_no_context(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go: an empty merged config (here: no current-context, no --context) falls back to in-cluster."""
    kubeconfig(clean_env / ".kube" / "config", clusters={"c": {"server": "https://c"}}, contexts={"c": ("c", "")})
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert isinstance(resolve(sa_dir=str(service_account(tmp_path))), InCluster)


def test_all_listed_files_missing_falls_back_to_in_cluster(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "a") + ":" + str(tmp_path / "b"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert isinstance(resolve(sa_dir=str(service_account(tmp_path))), InCluster)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(NoClusterConfigured) as ei:
        resolve(sa_dir=str(tmp_path / "sa"))
    assert "$KUBECONFIG=" in str(ei.value) and "no such files" in str(ei.value)
    assert "in-cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT not set" in str(ei.value)


def test_nothing_configured_one_line_naming_what_was_tried(clean_env: Path) -> None:
    with pytest.raises(NoClusterConfigured) as ei:
        resolve()
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith("no cluster configured: tried --kubeconfig (not given), $KUBECONFIG (not set), ")
    assert str(clean_env / ".kube" / "config") + " (no such file)" in msg
    assert msg.endswith("in-cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT not set")


def test_in_cluster_without_token_file_says_so(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(NoClusterConfigured, match=r"in-cluster: .*no-sa/token: no such file"):
        resolve()


def test_no_current_context_and_no_in_cluster(clean_env: Path) -> None:
    kubeconfig(clean_env / ".kube" / "config", clusters={"c": {}}, contexts={"c": ("c", "")})
    with pytest.raises(NoClusterConfigured, match="no current-context set and no --context given"):
        resolve()


def test_unreadable_or_invalid_file_is_an_error(clean_env: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [unclosed\n")
    with pytest.raises(KubeconfigError, match=r"kubeconfig .*bad.yaml: invalid YAML at line 2"):
        resolve(str(bad))
    bad.write_text("- a list\n")
    with pytest.raises(KubeconfigError, match="expected a mapping"):
        resolve(str(bad))
    bad.write_text("clusters: {a: 1}\n")
    with pytest.raises(KubeconfigError, match="clusters: expected a list of entries with a name"):
        resolve(str(bad))


# --- the connection made from it -----------------------------------------------------------------------------


async def test_merged_variable_connects_with_the_first_files_credentials(
    server: FakeAPIServer, clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = simple(tmp_path / "first.yaml", "fake", server.url, token="first-token")
    second = simple(tmp_path / "second.yaml", "fake", "https://elsewhere.invalid", token="second-token")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    conn = await KubeConnection.from_kubeconfig()
    try:
        assert conn.host == server.url
        server.add("Node", {"metadata": {"name": "n1"}})
        assert (await LiveAPI(conn).get("Node", "", "n1"))["metadata"]["name"] == "n1"
        assert server.headers[-1]["Authorization"] == "Bearer first-token"
        assert conn.login is not None
        info = await conn.login()
        assert info["server"] == server.url and info["token"] == "first-token" and info["scheme"] == "Bearer"
    finally:
        await conn.close()


async def test_context_flag_selects_the_cluster(server: FakeAPIServer, clean_env: Path, tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "k.yaml",
        clusters={"prod": {"server": "https://prod.invalid"}, "dev": {"server": server.url}},
        users={"me": {"token": "dev-token"}},
        contexts={"prod": ("prod", "me"), "dev": ("dev", "me")},
        current="prod",
    )
    conn = await KubeConnection.from_kubeconfig(path, context="dev")
    try:
        assert conn.host == server.url
    finally:
        await conn.close()


async def test_relative_paths_resolve_against_the_entrys_own_file(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go ResolveLocalPaths: a cluster's certificate-authority is relative to the file it came from,
    not to the first file of the list."""
    other = tmp_path / "other"
    certs = tmp_path / "certs"
    simple(other / "k.yaml", "unused")
    shutil.copy(certifi.where(), (certs.mkdir() or certs) / "ca.pem")
    withca = kubeconfig(
        certs / "k.yaml",
        clusters={"c": {"server": "https://c.invalid:6443", "certificate-authority": "ca.pem"}},
        users={"u": {"token": "x"}},
        contexts={"c": ("c", "u")},
        current="c",
    )
    monkeypatch.setenv("KUBECONFIG", f"{other / 'k.yaml'}:{withca}")
    conn = await KubeConnection.from_kubeconfig(context="c")
    try:
        assert conn.login is not None
        assert (await conn.login())["ca_path"] == str(certs / "ca.pem")
    finally:
        await conn.close()


async def test_in_cluster_connection_uses_the_service_account(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    sa = service_account(tmp_path, token="sa-token")
    conn = await KubeConnection.from_kubeconfig(service_account_dir=str(sa))
    try:
        assert conn.host == "https://10.96.0.1:443" and conn.source.startswith("in-cluster")
        assert (await conn._headers(None))["Authorization"] == "Bearer sa-token"
        assert conn.login is not None
        info = await conn.login()
        assert info["ca_path"] == str(sa / "ca.crt") and info["token"] == "sa-token"
    finally:
        await conn.close()


def test_cli_run_with_nothing_configured_fails_in_one_line(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's symptom was 'ConfigException: Service host/port is not set.' and exit code 0 logged."""
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: None)
    assert cli_main(["run", "--metrics-port", "0"]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dra-scheduler run:")]
    assert len(err) == 1
    assert err[0].startswith("dra-scheduler run: no cluster configured: tried --kubeconfig (not given)")
    assert "ConfigException" not in err[0]


def test_cli_run_with_an_unknown_context(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: None)
    simple(clean_env / ".kube" / "config", "home")
    assert cli_main(["run", "--context", "other", "--metrics-port", "0"]) == 1
    assert "dra-scheduler run: --context 'other': no such context" in capsys.readouterr().err


# --- the settings read without kubernetes-asyncio (kubeconfig.static_settings) ---------------------------------


def test_static_settings_read_tls_and_token_as_client_go(clean_env: Path, tmp_path: Path) -> None:
    """certificate-authority-data wins over the file and lands in a private file; relative paths resolve against
    the entry's own file; insecure-skip-tls-verify and tls-server-name are kept."""
    import base64

    ca_pem = Path(certifi.where()).read_bytes()
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "client.crt").write_text("cert")
    (tmp_path / "certs" / "client.key").write_text("key")
    path = kubeconfig(
        tmp_path / "certs" / "k.yaml",
        clusters={
            "c": {
                "server": "https://c.example:6443/",
                "certificate-authority": "nowhere.pem",
                "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                "tls-server-name": "kubernetes.default",
                "insecure-skip-tls-verify": False,
            }
        },
        users={"u": {"token": "tok", "client-certificate": "client.crt", "client-key": "client.key"}},
        contexts={"c": ("c", "u")},
        current="c",
    )
    found = resolve(path)
    assert isinstance(found, Kubeconfig)
    s = static_settings(found)
    assert s is not None
    assert s.host == "https://c.example:6443" and s.context == "c" and s.verify
    assert s.tls_server_name == "kubernetes.default"
    assert s.ca_file is not None and Path(s.ca_file).read_bytes() == ca_pem
    assert s.cert_file == str(tmp_path / "certs" / "client.crt")
    assert s.key_file == str(tmp_path / "certs" / "client.key")
    assert s.token == "Bearer tok"


async def test_static_settings_token_file_is_read_again(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """client-go's cached file token source: the token file is read again (trimmed) once its period is over."""
    (tmp_path / "token").write_text("one\n")
    path = kubeconfig(
        tmp_path / "k.yaml",
        clusters={"c": {"server": "http://127.0.0.1:1"}},
        users={"u": {"tokenFile": "token"}},
        contexts={"c": ("c", "u")},
        current="c",
    )
    found = resolve(path)
    assert isinstance(found, Kubeconfig)
    s = static_settings(found)
    assert s is not None and s.token_file == str(tmp_path / "token")
    assert s.ssl_context() is None  # http
    assert await s.authorization() == "Bearer one"
    (tmp_path / "token").write_text("two")
    assert await s.authorization() == "Bearer one"  # within the period
    monkeypatch.setattr("scheduler.kube.kubeconfig.TOKEN_FILE_PERIOD", 0.0)
    assert await s.authorization() == "Bearer two"
    assert (await s.login())["token"] == "two"


def test_static_settings_basic_auth_and_insecure(clean_env: Path, tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "k.yaml",
        clusters={"c": {"server": "https://c.example", "insecure-skip-tls-verify": True}},
        users={"u": {"username": "admin", "password": "secret"}},
        contexts={"c": ("c", "u")},
        current="c",
    )
    found = resolve(path)
    assert isinstance(found, Kubeconfig)
    s = static_settings(found)
    assert s is not None and s.token == "Basic YWRtaW46c2VjcmV0" and not s.verify
    ctx = s.ssl_context()
    assert ctx is not None and not ctx.check_hostname


@pytest.mark.parametrize(
    "user,cluster",
    [
        ({"exec": {"command": "get-token", "apiVersion": "client.authentication.k8s.io/v1"}}, {}),
        ({"auth-provider": {"name": "oidc", "config": {}}}, {}),
        ({"token": "t"}, {"proxy-url": "http://proxy:3128"}),
    ],
)
def test_static_settings_leave_plugins_to_kubernetes_asyncio(
    clean_env: Path, tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any]
) -> None:
    path = kubeconfig(
        tmp_path / "k.yaml",
        clusters={"c": {"server": "https://c.example", **cluster}},
        users={"u": user},
        contexts={"c": ("c", "u")},
        current="c",
    )
    found = resolve(path)
    assert isinstance(found, Kubeconfig)
    assert static_settings(found) is None
    assert found.merged.value["users"][0].value["user"] == user  # the ConfigNode tree for its loader


def test_static_settings_missing_file_is_one_line(clean_env: Path, tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "k.yaml",
        clusters={"c": {"server": "https://c.example", "certificate-authority": "ca.pem"}},
        contexts={"c": ("c", "")},
        current="c",
    )
    found = resolve(path)
    assert isinstance(found, Kubeconfig)
    with pytest.raises(KubeconfigError, match=r"context c: certificate-authority .*/ca\.pem: no such file"):
        static_settings(found)


async def test_static_settings_in_cluster_token_rotates(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    sa = service_account(tmp_path, token="sa-token\n")
    found = resolve(sa_dir=str(sa))
    assert isinstance(found, InCluster)
    s = static_settings(found)
    assert s is not None and s.host == "https://10.96.0.1:443" and s.ca_file == str(sa / "ca.crt")
    assert await s.authorization() == "Bearer sa-token"
    (sa / "token").write_text("rotated")
    monkeypatch.setattr("scheduler.kube.kubeconfig.TOKEN_FILE_PERIOD", 0.0)
    assert await s.authorization() == "Bearer rotated"
    info = await s.login()
    assert info["ca_path"] == str(sa / "ca.crt") and info["token"] == "rotated" and info["scheme"] == "Bearer"


async def test_static_settings_connect(server: FakeAPIServer, clean_env: Path, tmp_path: Path) -> None:
    """A connection made from the settings (as KubeConnection.from_kubeconfig can) sends their token."""
    path = simple(tmp_path / "k.yaml", "fake", server.url, token="static-token")
    found = resolve(path)
    assert isinstance(found, Kubeconfig)
    s = static_settings(found)
    assert s is not None
    conn = KubeConnection(s.host, ssl_context=s.ssl_context(), token=s.authorization, source=s.source)
    try:
        server.add("Node", {"metadata": {"name": "n1"}})
        assert (await LiveAPI(conn).get("Node", "", "n1"))["metadata"]["name"] == "n1"
        assert server.headers[-1]["Authorization"] == "Bearer static-token"
    finally:
        await conn.close()


def test_resolving_and_static_settings_import_no_kubernetes_asyncio(clean_env: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = simple(tmp_path / "k.yaml", "c", token="t")
    code = (
        "import sys\n"
        "from scheduler.kube.kubeconfig import resolve, static_settings\n"
        f"s = static_settings(resolve({path!r}))\n"
        "assert s is not None and s.token == 'Bearer t'\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes_asyncio')))\n"
    )
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
