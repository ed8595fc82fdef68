"""``dra-scheduler simulate`` for people and CI: progress on stderr for long runs only (a bar on a terminal,
a line every few seconds otherwise), ``--fail-on-pending`` (exit code 3), and pods of other schedulers
reported as "left to scheduler NAME" (kube-scheduler's ``responsibleForPod``: a scheduler only looks at
pods whose ``spec.schedulerName`` is one of its profiles; the API server defaults it to
``default-scheduler``)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml

from scheduler.cli import main
from scheduler.config.logging import configure_logging, write_line
from scheduler.simulate import progress
from scheduler.simulate.progress import Progress, reporting
from scheduler.simulate.report import left_to_other_schedulers, pending_exit_code
from scheduler.simulate.simulation import run_simulation, to_json, to_table


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


# --- progress --------------------------------------------------------------------------------------------------


def test_short_run_prints_nothing() -> None:
    clock, out = FakeClock(), Stream(tty=False)
    p = Progress(out, clock=clock)
    p.set_phase("scheduling", total=100)
    for i in range(100):
        clock.t += 0.019
        p.update(i + 1, i + 1)
    p.finish("100/100 pods scheduled")
    assert out.getvalue() == "" and p.renders == 0


def test_lines_are_throttled_when_not_a_terminal() -> None:
    clock, out = FakeClock(), Stream(tty=False)
    p = Progress(out, clock=clock)
    assert not p.tty and p.interval == 5.0
    p.set_phase("scheduling", total=1000)
    for i in range(800):  # 800 updates over 12.5 s: lines at 2 s, 7 s, 12 s only
        clock.t += 1 / 64
        p.update(i + 1, 2 * (i + 1))
    lines = out.getvalue().splitlines()
    assert lines == [
        "simulate: scheduling: 128/1,000 pods bound (13%), 256 attempts, 2.0s",
        "simulate: scheduling: 448/1,000 pods bound (45%), 896 attempts, 7.0s",
        "simulate: scheduling: 768/1,000 pods bound (77%), 1,536 attempts, 12.0s",
    ]
    p.finish("790/1000 pods scheduled")
    assert out.getvalue().splitlines()[-1] == "simulate: done in 12.5s: 790/1000 pods scheduled"


def test_bar_on_a_terminal_is_redrawn_in_place() -> None:
    clock, out = FakeClock(), Stream(tty=True)
    p = Progress(out, clock=clock)
    assert p.tty and p.interval == 0.2
    clock.t += 2.5
    assert p.poll()  # while loading: the phase and the time
    assert out.getvalue() == "\rsimulate: loading objects... 2.5s\033[K"
    p.set_phase("scheduling", total=8)
    p.update(2, 3)
    assert out.getvalue() == "\rsimulate: loading objects... 2.5s\033[K"  # < 0.2 s since the last draw
    clock.t += 0.2
    p.update(4, 5)
    assert out.getvalue().endswith("\rsimulate [############------------] 4/8 pods bound, 5 attempts, 2.7s\033[K")
    assert "\n" not in out.getvalue()
    p.finish("8/8 pods scheduled")
    assert out.getvalue().endswith("\rsimulate: done in 2.7s: 8/8 pods scheduled\033[K\n")


def test_module_calls_do_nothing_without_a_reporter() -> None:
    progress.set_phase("scheduling", 3)
    progress.update({"scheduled": 1})
    clock, out = FakeClock(), Stream(tty=False)
    p = Progress(out, clock=clock)
    with reporting(p, ticker=False):
        progress.set_phase("scheduling", 3)
        clock.t += 3
        progress.update({"scheduled": 2, "unschedulable": 3})
    assert out.getvalue() == (
        "simulate: scheduling: 2/3 pods bound (67%), 5 attempts, 3.0s\nsimulate: done in 3.0s: stopped\n"
    )
    clock.t += 10
    progress.update({"scheduled": 3})  # uninstalled: nothing more
    assert out.getvalue().count("\n") == 2


def test_ticker_draws_while_the_simulator_is_busy() -> None:
    out = Stream(tty=False)
    p = Progress(out, min_duration=0.0, interval=0.02)
    with reporting(p):
        time.sleep(0.3)  # no update from the simulator at all (e.g. loading a big input)
    assert out.getvalue().startswith("simulate: loading objects, ")
    n = out.getvalue().count("\n")
    time.sleep(0.1)
    assert out.getvalue().count("\n") == n  # the ticker stopped with the context


def test_a_failed_run_ends_the_bar_line() -> None:
    clock, out = FakeClock(), Stream(tty=True)
    p = Progress(out, clock=clock)
    with pytest.raises(RuntimeError), reporting(p, ticker=False):
        clock.t += 3
        progress.update({"scheduled": 1})
        raise RuntimeError("invalid input")
    assert out.getvalue().endswith("\rsimulate: done in 3.0s: stopped\033[K\n")


def test_closed_stream_does_not_break_the_run() -> None:
    clock, out = FakeClock(), Stream(tty=False)
    p = Progress(out, clock=clock)
    out.close()
    clock.t += 10
    p.update(1)
    p.finish()


# --- inputs ---------------------------------------------------------------------------------------------------


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str, cpu: str = "1", scheduler: str | None = "dra-scheduler", node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def write(tmp_path: Path, *objs: dict[str, Any]) -> str:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return str(path)


@pytest.fixture(autouse=True)
def quiet_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("scheduler.cli.configure_logging", lambda **kw: None)


def test_fail_on_pending_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, node("n1"), pod("fits"), pod("too-big", cpu="64"))
    assert main(["simulate", path, "--no-progress"]) == 0  # documented default: pending is not an error
    capsys.readouterr()
    assert main(["simulate", path, "--no-progress", "--fail-on-pending"]) == 3
    captured = capsys.readouterr()
    assert "default/too-big" in captured.out
    assert "--fail-on-pending: 1 of 2 pod(s) stayed pending" in captured.err
    ok = write(tmp_path, node("n1"), pod("fits"))
    assert main(["simulate", ok, "--no-progress", "--fail-on-pending", "-o", "json"]) == 0
    out = capsys.readouterr().out  # (structlog's default set-up, kept in tests, prints to stdout first)
    assert json.loads(out[out.index("{\n") :])["summary"]["unschedulable"] == 0


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--fail-on-pending" in text and "exit with code 3" in text
    assert "3 with --fail-on-pending: at least one pod of the configured profiles stayed pending" in text


def test_pods_of_other_schedulers_are_left_to_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        node("n1"),
        pod("ours"),
        pod("unset", scheduler=None),  # the API server's default: default-scheduler
        pod("theirs", scheduler="volcano"),
        pod("theirs-bound", scheduler="volcano", node_name="n1"),
    )
    result = run_simulation([path])
    assert result.summary["pods"] == 1 and result.summary["unschedulable"] == 0
    assert result.summary["leftToOtherSchedulers"] == {"default-scheduler": 1, "volcano": 1}
    rows = {line.split()[0]: line for line in to_table(result).splitlines() if line.startswith("default/")}
    assert rows["default/unset"].split()[1:3] == ["<other", "scheduler>"]
    assert rows["default/unset"].endswith("left to scheduler default-scheduler")
    assert rows["default/theirs"].endswith("left to scheduler volcano")
    assert "<pending>" not in to_table(result)
    assert rows["default/theirs-bound"].split()[1] == "n1" and "left to" not in rows["default/theirs-bound"]
    assert (
        to_table(result)
        .splitlines()[-1]
        .startswith(
            "1/1 pods scheduled, 0 unschedulable, 1 left to scheduler default-scheduler, 1 left to scheduler volcano, "
        )
    )
    assert json.loads(to_json(result))["summary"]["leftToOtherSchedulers"] == {"default-scheduler": 1, "volcano": 1}
    # not pending for us: --fail-on-pending does not fail on them
    assert main(["simulate", path, "--no-progress", "--fail-on-pending"]) == 0
    capsys.readouterr()


def test_no_other_scheduler_key_when_there_are_none(tmp_path: Path) -> None:
    result = run_simulation([write(tmp_path, node("n1"), pod("ours"))])
    assert "leftToOtherSchedulers" not in result.summary


def test_left_to_other_schedulers_helper() -> None:
    items = [pod("a", scheduler="x"), pod("b"), pod("c", scheduler=""), {"kind": "ResourceClaim"}]
    assert left_to_other_schedulers(items, {"dra-scheduler"}) == {"default/a": "x", "default/c": "default-scheduler"}
    assert pending_exit_code({"unschedulable": 0}) == 0 and pending_exit_code({"unschedulable": 2}) == 3


def test_progress_lines_through_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "MIN_DURATION", 0.0)
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    path = write(tmp_path, node("n1"), *(pod(f"p{i}") for i in range(3)))
    assert main(["simulate", path, "--log-format", "text"]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert "simulate: scheduling: 3/3 pods bound (100%), 3 attempts, " in "\n".join(err)
    assert err[-1].startswith("simulate: done in ") and err[-1].endswith(": 3/3 pods scheduled, 0 unschedulable")
    assert "simulate:" not in captured.out  # stdout keeps the result only
    # --log-format json (the default): the same lines as JSON records shaped like the log records
    assert main(["simulate", path]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.err.splitlines()]
    assert {"phase": "scheduling", "bound": 3, "pods": 3, "attempts": 3, "event": "simulate progress"}.items() <= (
        next(r for r in records if r.get("bound") == 3).items()
    )
    last = records[-1]
    assert (last["event"], last["result"], last["level"]) == (
        "simulate done",
        "3/3 pods scheduled, 0 unschedulable",
        "info",
    )
    assert last["timestamp"].endswith("Z") and isinstance(last["seconds"], float)
    assert "simulate" not in captured.out
    assert main(["simulate", path, "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_json_progress_records() -> None:
    clock, out = FakeClock(), Stream(tty=False)
    p = Progress(out, clock=clock, json_lines=True)
    clock.t += 2.5
    assert p.poll()
    p.set_phase("scheduling", total=4)
    clock.t += 5
    p.update(2, 3)
    p.finish("2/4 pods scheduled")
    recs = [json.loads(line) for line in out.getvalue().splitlines()]
    for r in recs:
        assert r.pop("level") == "info" and r.pop("timestamp").endswith("Z")
    assert recs == [
        {"phase": "loading objects", "seconds": 2.5, "event": "simulate progress"},
        {"phase": "scheduling", "bound": 2, "pods": 4, "attempts": 3, "seconds": 7.5, "event": "simulate progress"},
        {"seconds": 7.5, "result": "2/4 pods scheduled", "event": "simulate done"},
    ]


@pytest.fixture
def restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


class SwitchingStream(io.StringIO):
    """Where a log record is written: at the first write from this thread, another thread gets its turn (what a
    thread switch at the worst moment does) and the progress ticker writes its line, if it can within 0.3 s."""

    def __init__(self) -> None:
        super().__init__()
        self.ticker: threading.Thread | None = None
        self.poll: Any = None

    def write(self, text: str) -> int:
        n = super().write(text)
        if self.ticker is None and self.poll is not None and threading.current_thread() is threading.main_thread():
            self.ticker = threading.Thread(target=self.poll)
            self.ticker.start()
            self.ticker.join(0.3)
        return n


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_progress_line_from_the_ticker_never_lands_inside_a_log_record(fmt: str, restore_logging: None) -> None:
    """structlog's PrintLogger wrote a record, then its newline, in two writes: a progress line the ticker thread
    wrote in between was glued to the record (``{...}simulate: scheduling: ...``) and an empty line followed, so
    ``--log-format json`` could not be read line by line. Now a record is one write, and the loggers and the
    progress write under one lock."""
    out = SwitchingStream()
    configure_logging(level="info", fmt=fmt, stream=out)
    p = Progress(out, tty=False, min_duration=0.0, interval=0.0)  # text lines: also what the old code wrote
    out.poll = p.poll
    structlog.get_logger("t").info("pod bound", pod="default/p", node="n1")
    assert out.ticker is not None
    out.ticker.join()
    lines = out.getvalue().split("\n")
    assert lines[-1] == "" and len(lines) == 3, lines
    record, progress_line = lines[0], lines[1]
    assert progress_line.startswith("simulate: loading objects, "), lines
    if fmt == "json":
        assert json.loads(record)["event"] == "pod bound"
    else:
        assert record.endswith("pod bound                      pod=default/p node=n1"), record


def test_a_bar_on_the_terminal_is_erased_before_a_log_line(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(level="info", fmt="json")  # to sys.stderr, here pytest's capture
    clock = FakeClock()
    p = Progress(sys.stderr, tty=True, clock=clock)
    with reporting(p, ticker=False):
        clock.t += 3
        progress.update({"scheduled": 1})
        structlog.get_logger("t").warning("a warning while the bar is drawn")
        write_line("note: and a note")
    err = capsys.readouterr().err
    bar, rest = err.split("\r\033[K", 1)
    assert bar.startswith("\rsimulate: loading objects... 3.0s")
    lines = rest.split("\n")
    assert json.loads(lines[0])["event"] == "a warning while the bar is drawn"
    assert lines[1] == "note: and a note"
    assert lines[2].startswith("\rsimulate: done in 3.0s: stopped")


CHILD = """
import sys
sys.setswitchinterval(1e-6)  # thread switches everywhere: the ticker writes between any two writes
from scheduler.simulate import progress
progress.MIN_DURATION = 0.0  # progress from the start, a line every 0.5 ms: as a run of hours would print
progress.LINE_INTERVAL = 0.0005
from scheduler.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_stderr_is_json_lines_when_it_is_a_pipe(tmp_path: Path) -> None:
    """The reported run: ``simulate -v`` with stderr a pipe (CI), ``--log-format json``. Every stderr line must be
    one JSON object, log record or progress record. The child only shortens the progress thresholds (2 s, then
    every 5 s) so that a run of a few seconds prints thousands of progress lines among its log records."""
    objs = [node(f"n{i}") for i in range(10)] + [pod(f"p{i}") for i in range(300)]
    path = write(tmp_path, *objs)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "simulate", path, "-v", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["summary"]["scheduled"] == 40
    lines = proc.stderr.split("\n")
    assert lines[-1] == ""
    records = []
    for line in lines[:-1]:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
    events = Counter(r["event"] for r in records)
    assert events["pod bound"] == 40 and events["pod not scheduled"] == 260
    assert events["simulate progress"] > 10 and events["simulate done"] == 1


def test_the_result_is_never_formatted_on_the_way_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio.run's SIGINT restore reads the old handler (a partial holding the main task) as a signal enum and
    formats it with repr when that fails: a result returned by the main task would be printed into a string, all
    of its pods (1.2 s on the trace replay). run_simulation hands the result out through a box instead."""
    import scheduler.simulate.simulation as sim

    formatted: list[int] = []

    def counting_repr(self: object) -> str:
        formatted.append(1)
        return "SimulationResult(...)"

    monkeypatch.setattr(sim.SimulationResult, "__repr__", counting_repr)
    result = run_simulation([write(tmp_path, node("n1"), pod("ours"))])
    assert result.summary["scheduled"] == 1
    assert formatted == []
