"""``dra-scheduler`` flags: ``--version``, ``--log-level``/``--log-format``, leader election as kube-scheduler
(component-base ``config/options/leaderelectionconfig.go`` flag names and ``RecommendedDefaultLeaderElection
Configuration`` defaults 15s/10s/2s; client-go ``leaderelection.NewLeaderElector`` timing checks;
component-base ``ValidateLeaderElectionConfiguration`` for the ``leaderElection`` block), and the merge of
flags with the configuration file (kube-scheduler ``options.ApplyLeaderElectionTo``: flags given win)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from scheduler.cli import build_parser, go_duration, main, run_options, version_text
from scheduler.config.logging import configure_logging
from scheduler.config.schedulerconfig import ConfigError, LeaderElectionConfig, parse_config, validate_timing
from scheduler.kube.leader import LeaderElector
from scheduler.kube.run import RunOptions, apply_leader_election

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def opts(*argv: str) -> RunOptions:
    return run_options(build_parser().parse_args(["run", *argv]))


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 2
    return capsys.readouterr().err


# --- --version ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--version"], ["run", "--version"]])
def test_version(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == version_text()
    assert out.startswith("dra-scheduler 0.") and "Kubernetes v1.37.2" in out


# --- leader election flags ---------------------------------------------------------------------------------------


def test_leader_election_defaults_are_upstreams() -> None:
    o = opts()
    assert (o.leader_elect, o.lease_duration, o.renew_deadline, o.retry_period) == (False, 15.0, 10.0, 2.0)
    assert (o.resource_lock, o.lease_name, o.lease_namespace) == ("leases", "dra-scheduler", "kube-system")
    assert o.explicit == frozenset() and o.connect_timeout == 60.0 and o.context is None


def test_leader_election_flags_parse_go_durations_and_are_explicit() -> None:
    o = opts(
        "--leader-elect",
        "--leader-elect-lease-duration=1m30s",
        "--leader-elect-renew-deadline",
        "45s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-name=mine",
        "--leader-elect-resource-namespace",
        "sched",
        "--connect-timeout=2m",
        "--context=prod",
    )
    assert (o.leader_elect, o.lease_duration, o.renew_deadline, o.retry_period) == (True, 90.0, 45.0, 0.5)
    assert (o.lease_name, o.lease_namespace, o.connect_timeout, o.context) == ("mine", "sched", 120.0, "prod")
    assert o.explicit == {
        "leader_elect",
        "lease_duration",
        "renew_deadline",
        "retry_period",
        "lease_name",
        "lease_namespace",
    }


def test_bool_flag_and_old_names() -> None:
    assert opts("--leader-elect=false").leader_elect is False
    assert opts("--leader-elect=false").explicit == {"leader_elect"}
    assert opts("--leader-elect=true").leader_elect is True
    o = opts("--lease-name", "old", "--lease-namespace", "ns")  # the flags of earlier versions still work
    assert (o.lease_name, o.lease_namespace) == ("old", "ns")


def test_go_duration() -> None:
    assert go_duration("15s") == 15.0 and go_duration("1h") == 3600.0 and go_duration("0") == 0.0
    with pytest.raises(Exception, match="missing unit"):
        go_duration("15")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--leader-elect-lease-duration", "15"], 'time: missing unit in duration "15"'),
        (["--leader-elect-lease-duration", "abc"], "invalid duration"),
        (["--leader-elect=maybe"], "invalid boolean value 'maybe'"),
        (["--leader-elect-resource-lock", "endpoints"], "invalid choice: 'endpoints'"),
        (["--log-level", "verbose"], "invalid choice: 'verbose'"),
        (["--log-format", "xml"], "invalid choice: 'xml'"),
        (
            ["--leader-elect", "--leader-elect-renew-deadline=20s"],
            "--leader-elect-lease-duration: must be greater than --leader-elect-renew-deadline (15s <= 20s)",
        ),
        (
            ["--leader-elect", "--leader-elect-retry-period=9s"],
            "--leader-elect-renew-deadline: must be greater than --leader-elect-retry-period × 1.2 (10s <= 10.8s)",
        ),
        (
            ["--leader-elect", "--leader-elect-retry-period=0s"],
            "--leader-elect-retry-period: must be greater than zero",
        ),
        (["--leader-elect", "--leader-elect-resource-name="], "--leader-elect-resource-name: required"),
    ],
)
def test_invalid_flags_are_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert message in usage_error(["run", *argv], capsys)


def test_timings_are_only_checked_with_leader_election_on() -> None:
    """component-base validates leaderElection only when leaderElect is true."""
    assert apply_leader_election(opts("--leader-elect-renew-deadline=20s"), None) == []


def test_validate_timing_as_client_go() -> None:
    assert validate_timing(15, 10, 2) == []
    assert validate_timing(10, 10, 2) == ["leaseDuration: must be greater than renewDeadline (10s <= 10s)"]
    assert validate_timing(15, 2.4, 2) == ["renewDeadline: must be greater than retryPeriod × 1.2 (2.4s <= 2.4s)"]
    assert validate_timing(15, 2.41, 2) == []
    with pytest.raises(ValueError, match="renewDeadline: must be greater than retryPeriod"):
        LeaderElector(None, lease_duration=15, renew_deadline=2.3, retry_period=2)  # type: ignore[arg-type]


# --- the leaderElection block of the configuration ------------------------------------------------------------


def le_errors(block: Any) -> list[str]:
    with pytest.raises(ConfigError) as ei:
        parse_config({**HEAD, "leaderElection": block})
    return ei.value.errors


def test_leader_election_block_is_supported() -> None:
    cfg = parse_config(
        {
            **HEAD,
            "leaderElection": {
                "leaderElect": True,
                "leaseDuration": "30s",
                "renewDeadline": "20s",
                "retryPeriod": "5s",
                "resourceLock": "leases",
                "resourceName": "sched",
                "resourceNamespace": "ops",
            },
        }
    )
    assert cfg.leader_election == LeaderElectionConfig(
        True,
        30.0,
        20.0,
        5.0,
        "leases",
        "sched",
        "ops",
        named=frozenset(
            {
                "leader_elect",
                "lease_duration",
                "renew_deadline",
                "retry_period",
                "resource_lock",
                "resource_name",
                "resource_namespace",
            }
        ),
    )
    assert parse_config(HEAD).leader_election is None
    partial = parse_config({**HEAD, "leaderElection": {"leaseDuration": "20s"}}).leader_election
    assert partial is not None and partial.named == {"lease_duration"} and partial.renew_deadline == 10.0


def test_leader_election_block_errors_name_the_field() -> None:
    assert le_errors({"leaseDuration": "15", "renewDeadline": 10, "bogus": 1, "leaderElect": "yes"}) == [
        "leaderElection.bogus: unknown field",
        "leaderElection.leaderElect: must be true or false",
        """leaderElection.leaseDuration: invalid value '15': time: missing unit in duration "15\"""",
        'leaderElection.renewDeadline: must be a duration string such as "15s"',
    ]
    assert le_errors({"retryPeriod": "0s"}) == ["leaderElection.retryPeriod: must be greater than zero"]
    assert le_errors({"renewDeadline": "20s"}) == [
        "leaderElection.leaseDuration: must be greater than renewDeadline (15s <= 20s)"
    ]
    assert le_errors({"retryPeriod": "9s"}) == [
        "leaderElection.renewDeadline: must be greater than retryPeriod × 1.2 (10s <= 10.8s)"
    ]
    assert le_errors({"resourceLock": "endpoints", "resourceName": "", "resourceNamespace": ""}) == [
        "leaderElection.resourceLock: Unsupported value: 'endpoints': supported values: \"leases\"",
        "leaderElection.resourceName: Required value",
        "leaderElection.resourceNamespace: Required value",
    ]
    assert le_errors("yes") == ["leaderElection: must be a mapping"]


def test_leader_election_off_skips_the_timing_checks() -> None:
    cfg = parse_config({**HEAD, "leaderElection": {"leaderElect": False, "renewDeadline": "20s"}})
    assert cfg.leader_election is not None and cfg.leader_election.leader_elect is False


def test_file_fills_what_the_flags_did_not_give() -> None:
    le = parse_config(
        {**HEAD, "leaderElection": {"leaderElect": True, "leaseDuration": "40s", "resourceName": "file"}}
    ).leader_election
    o = opts("--leader-elect-resource-name=flag")
    assert apply_leader_election(o, le) == []
    assert (o.leader_elect, o.lease_duration, o.renew_deadline, o.lease_name) == (True, 40.0, 10.0, "flag")
    o = opts("--leader-elect=false")
    apply_leader_election(o, le)
    assert o.leader_elect is False and o.lease_duration == 40.0


# --- logging -------------------------------------------------------------------------------------------------------


@pytest.fixture
def restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


def test_log_format_json(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging(level="info", fmt="json", stream=out)
    log = structlog.get_logger("t1")
    log.debug("hidden")
    log.info("pod scheduled", pod="default/p", node="n1")
    logging.getLogger("kopf.test").warning("from %s", "stdlib")
    logging.getLogger("kopf.test").info("stdlib info is below warning: hidden")
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["event"] for x in lines] == ["pod scheduled", "from stdlib"]
    assert lines[0]["level"] == "info" and lines[0]["pod"] == "default/p" and lines[0]["timestamp"].endswith("Z")
    assert lines[1]["logger"] == "kopf.test" and lines[1]["level"] == "warning"


def test_log_format_text_and_levels(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging(level="debug", fmt="text", stream=out)
    structlog.get_logger("t2").debug("looking", node="n1")
    text = out.getvalue()
    assert "[debug" in text and "looking" in text and "node=n1" in text and not text.lstrip().startswith("{")
    out = io.StringIO()
    configure_logging(level="error", fmt="text", stream=out)
    log = structlog.get_logger("t3")
    log.warning("not shown")
    log.error("shown")
    assert "not shown" not in out.getvalue() and "shown" in out.getvalue()
    with pytest.raises(ValueError):
        configure_logging(level="loud")


def test_run_passes_the_log_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: seen.append(kw))
    missing = str(tmp_path / "missing")
    assert main(["run", "--kubeconfig", missing, "--log-level", "debug", "--log-format", "text"]) == 1
    assert seen == [{"level": "debug", "fmt": "text"}]
    seen.clear()
    assert main(["run", "--kubeconfig", missing]) == 1
    assert seen == [{"level": "info", "fmt": "json"}]


# --- --max-inflight ----------------------------------------------------------------------------------------------


def test_max_inflight_flag_reaches_both_connections(tmp_path: Any) -> None:
    """``--max-inflight`` (default DEFAULT_MAX_INFLIGHT) caps the main connection's requests in flight and the
    Events connection's (``sibling``); the CLI's literal default is the client's constant."""
    import asyncio

    from scheduler.kube.client import DEFAULT_MAX_INFLIGHT, KubeConnection

    assert opts().max_inflight == DEFAULT_MAX_INFLIGHT == RunOptions().max_inflight
    assert opts("--max-inflight", "8").max_inflight == 8
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": ""}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )

    async def limits(**kw: Any) -> tuple[int, int]:
        conn = await KubeConnection.from_kubeconfig(str(kubeconfig), env={}, **kw)
        events = conn.sibling()
        try:
            return conn.inflight.limit, events.inflight.limit
        finally:
            await events.close()
            await conn.close()

    assert asyncio.run(limits(max_inflight=8)) == (8, 8)
    assert asyncio.run(limits()) == (DEFAULT_MAX_INFLIGHT, DEFAULT_MAX_INFLIGHT)


# --- open files ----------------------------------------------------------------------------------------------------


def test_run_raises_the_open_files_soft_limit_to_the_hard_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """As Go's runtime for kube-scheduler (Go src/syscall/rlimit.go): ``run`` lifts the soft RLIMIT_NOFILE to the
    hard limit before it opens its connections (one per request in flight). In a child interpreter, since the
    limit is the process's: a soft limit of 256 under a hard one of 1,024 becomes 1,024; equal limits stay."""
    import subprocess
    import sys

    resource = pytest.importorskip("resource")  # POSIX only; the function returns None on Windows
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.fail(f"this machine's hard open-files limit is {hard}, below the 1,024 the test needs")
    code = (
        "import resource\n"
        "from scheduler.cli import raise_open_files_limit\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 1024))\n"
        "first = raise_open_files_limit()\n"
        "print(first, resource.getrlimit(resource.RLIMIT_NOFILE), raise_open_files_limit())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(256, 1024) (1024, 1024) None"
    called: list[bool] = []
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: None)  # leave the process's logging alone
    monkeypatch.setattr("scheduler.cli.raise_open_files_limit", lambda: called.append(True))
    assert main(["run", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert called == [True]
