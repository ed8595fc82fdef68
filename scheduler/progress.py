"""Progress of a long ``simulate`` run, on stderr (stdout keeps the result).

* Nothing at all for runs shorter than ``min_duration`` (2 s): short runs stay quiet.
* On a terminal: one bar redrawn in place (``\\r``) at most every ``interval`` (0.2 s), erased-and-finished
  with a newline at the end.
* Otherwise (CI logs, files): one line every ``interval`` (5 s), and a last line when done.

The simulator reports through module-level calls (:func:`phase`, :func:`update`), which do nothing unless a
reporter is installed with :func:`reporting` (the command line does). Updates only store numbers and look
at the clock; a background ticker thread also redraws while the simulator is busy elsewhere (loading the
input, a long gang search), so the display never freezes for long.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TextIO

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
    ) -> None:
        self.stream = stream
        self.tty = bool(stream.isatty()) if tty is None else tty
        self.clock = clock
        self.min_duration = MIN_DURATION if min_duration is None else min_duration
        self.interval = interval if interval is not None else (TTY_INTERVAL if self.tty else LINE_INTERVAL)
        self.label = label
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
        else:
            line = self.text(now, final=final, note=note) + "\n"
        try:
            self.stream.write(line)
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not stop the simulation
            self._finished = True
        self.shown = True


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
        progress.finish("stopped")  # no-op after the caller's own finish(); ends a drawn bar with a newline
