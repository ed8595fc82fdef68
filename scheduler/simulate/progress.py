"""Progress of a long ``simulate`` run, on stderr (stdout keeps the result).

* Nothing at all for runs shorter than ``min_duration`` (2 s): short runs stay quiet.
* On a terminal: one bar redrawn in place (``\\r``) at most every ``interval`` (0.2 s), erased-and-finished
  with a newline at the end.
* Otherwise (CI logs, files): one line every ``interval`` (5 s), and a last line when done; with
  ``json_lines`` (``--log-format json``, the default) each is a JSON record shaped like the log records
  (``{"phase": ..., "bound": ..., "pods": ..., "attempts": ..., "seconds": ..., "event": "simulate progress",
  "level": "info", "timestamp": ...}``, then ``"event": "simulate done"`` with ``seconds`` and ``result``), so
  stderr stays one JSON object a line.
* Every write is one whole line under the loggers' lock (scheduler/config/logging.py ``OUTPUT_LOCK``): a log
  record written meanwhile by the simulator never shares a line with a progress line. A bar on the
  terminal is erased before a log line is written and redrawn at the next tick.

The simulator reports through module-level calls (:func:`phase`, :func:`update`), which do nothing unless a
reporter is installed with :func:`reporting` (the command line does). Updates only store numbers and look
at the clock; a background ticker thread also redraws while the simulator is busy elsewhere (loading the
input, a long gang search), so the display never freezes for long.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from scheduler.config.logging import OUTPUT_LOCK, set_before_line

BAR_WIDTH = 24
TTY_INTERVAL = 0.2
LINE_INTERVAL = 5.0
MIN_DURATION = 2.0


class Progress:
    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_duration: float | None = None,
        interval: float | None = None,
        label: str = "simulate",
        json_lines: bool = False,
    ) -> None:
        self.stream = stream
        self.tty = bool(stream.isatty()) if tty is None else tty
        self.clock = clock
        self.min_duration = MIN_DURATION if min_duration is None else min_duration
        self.interval = interval if interval is not None else (TTY_INTERVAL if self.tty else LINE_INTERVAL)
        self.label = label
        self.json_lines = json_lines  # lines (not a bar) as JSON records
        self.start = clock()
        self.phase = "loading objects"
        self.total: int | None = None
        self.done = 0
        self.attempts = 0
        self.shown = False  # something was written
        self.renders = 0
        self._last = -1e18
        self._lock = threading.Lock()
        self._finished = False
        self._bar_open = False  # a bar is on the terminal's last line, without its newline

    # --- what the simulator reports -----------------------------------------------------------------------

    def set_phase(self, name: str, total: int | None = None) -> None:
        with self._lock:
            self.phase, self.total, self.done, self.attempts = name, total, 0, 0
        self.poll()

    def update(self, done: int, attempts: int = 0) -> None:
        self.done, self.attempts = done, attempts
        self.poll()

    # --- rendering -------------------------------------------------------------------------------------------

    def poll(self) -> bool:
        """Render if due (the run is older than ``min_duration`` and the last render older than ``interval``);
        True when something was written."""
        now = self.clock()
        if now - self.start < self.min_duration or now - self._last < self.interval:
            return False
        with self._lock:
            if self._finished or now - self._last < self.interval:
                return False
            self._last = now
            self._write(now, final=False)
        return True

    def finish(self, note: str = "") -> None:
        """The last state (only if something was shown: a short run stays silent)."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            if self.shown:
                self._write(self.clock(), final=True, note=note)

    def text(self, now: float, final: bool = False, note: str = "") -> str:
        elapsed = now - self.start
        what = self.phase
        if self.total is not None:
            pct = 100.0 * self.done / self.total if self.total else 100.0
            what += f": {self.done:,}/{self.total:,} pods bound ({pct:.0f}%)"
            if self.attempts:
                what += f", {self.attempts:,} attempts"
        if final:
            return f"{self.label}: done in {elapsed:.1f}s" + (f": {note}" if note else "")
        return f"{self.label}: {what}, {elapsed:.1f}s"

    def record(self, now: float, final: bool = False, note: str = "") -> dict[str, Any]:
        """The JSON form of :meth:`text`, shaped like a log record (scheduler/config/logging.py)."""
        rec: dict[str, Any] = {}
        if final:
            rec["seconds"] = round(now - self.start, 1)
            if note:
                rec["result"] = note
        else:
            rec["phase"] = self.phase
            if self.total is not None:
                rec.update(bound=self.done, pods=self.total, attempts=self.attempts)
            rec["seconds"] = round(now - self.start, 1)
        rec["event"] = f"{self.label} {'done' if final else 'progress'}"
        rec["level"] = "info"
        rec["timestamp"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        return rec

    def bar(self, now: float) -> str:
        elapsed = now - self.start
        if self.total:
            filled = min(BAR_WIDTH, BAR_WIDTH * self.done // self.total)
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            tail = f"{self.done:,}/{self.total:,} pods bound"
            if self.attempts:
                tail += f", {self.attempts:,} attempts"
            return f"{self.label} [{bar}] {tail}, {elapsed:.1f}s"
        return f"{self.label}: {self.phase}... {elapsed:.1f}s"

    def _write(self, now: float, final: bool, note: str = "") -> None:
        self.renders += 1
        if self.tty:
            line = "\r" + self.bar(now) + "\033[K"
            if final:
                line = "\r" + self.text(now, final=True, note=note) + "\033[K\n"
        elif self.json_lines:
            line = json.dumps(self.record(now, final=final, note=note)) + "\n"
        else:
            line = self.text(now, final=final, note=note) + "\n"
        with OUTPUT_LOCK:
            try:
                self.stream.write(line)
                self.stream.flush()
            except (OSError, ValueError):  # a closed pipe must not stop the simulation
                self._finished = True
            self._bar_open = self.tty and not final
        self.shown = True

    def interrupt(self) -> None:
        """Before another line is written (called under ``OUTPUT_LOCK``): erase a bar left on the terminal's
        last line; it is drawn again at the next ``interval``."""
        if self._bar_open:
            self._bar_open = False
            with contextlib.suppress(OSError, ValueError):
                self.stream.write("\r\033[K")


_current: Progress | None = None


def set_phase(name: str, total: int | None = None) -> None:
    if _current is not None:
        _current.set_phase(name, total)


def update(attempts: Mapping[str, int]) -> None:
    """From the scheduler's ``attempts`` counter (result -> count): pods bound, attempts made."""
    if _current is not None:
        _current.update(attempts.get("scheduled", 0), sum(attempts.values()))


@contextlib.contextmanager
def reporting(progress: Progress | None, ticker: bool = True) -> Iterator[Progress | None]:
    """Install ``progress`` (None: nothing) for the simulator's reports; a ticker thread polls it."""
    global _current
    if progress is None:
        yield None
        return
    previous, _current = _current, progress
    previous_hook = set_before_line(progress.interrupt) if progress.tty else None
    stop = threading.Event()
    thread = None
    if ticker:

        def tick() -> None:
            while not stop.wait(min(progress.interval, 0.5)):
                progress.poll()

        thread = threading.Thread(target=tick, name="simulate-progress", daemon=True)
        thread.start()
    try:
        yield progress
    finally:
        stop.set()
        if thread is not None:
            thread.join(timeout=2)
        _current = previous
        if progress.tty:
            set_before_line(previous_hook)
        progress.finish("stopped")  # no-op after the caller's own finish(); ends a drawn bar with a newline
