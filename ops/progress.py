"""A progress bar on a terminal, in a few lines of our own: ``parka ingest --end-at-latest``,
``parka spark-ingest --end-at-latest`` and the benchmarks' long loops draw it. It draws only when
its stream is a TTY; in a pipe or a log file it writes nothing at all."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["LogProgress", "ProgressBar", "bar_text"]

_WIDTH = 28


def bar_text(done: int, total: int, *, label: str = "", unit: str = "", elapsed_s: float = 0.0, extra: str = "") -> str:
    """One line: ``label [#####.....]  45% 1,234/2,742 unit, 12 s, eta 15 s extra``. A
    ``total`` of 0 (nothing to do, or not known yet) shows no bar."""
    parts = [label] if label else []
    if total > 0:
        share = min(max(done / total, 0.0), 1.0)
        filled = round(share * _WIDTH)
        parts.append(f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {share * 100:3.0f}%")
        parts.append(f"{done:,}/{total:,}{' ' + unit if unit else ''}")
    else:
        parts.append(f"{done:,}{' ' + unit if unit else ''}")
    if elapsed_s > 0:
        timing = f"{elapsed_s:.0f} s"
        if total > 0 and 0 < done < total:
            timing += f", eta {elapsed_s * (total - done) / done:.0f} s"
        parts.append(timing)
    if extra:
        parts.append(extra)
    return " ".join(parts)


class ProgressBar:
    """Redraws :func:`bar_text` in place at most every ``interval_s``; :meth:`close` draws the
    last state and ends the line. Nothing at all when ``stream`` (default ``sys.stderr``) is
    not a terminal."""

    def __init__(
        self,
        total: int = 0,
        *,
        label: str = "",
        unit: str = "",
        stream: TextIO | None = None,
        interval_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream: Any = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.label, self.unit = total, label, unit
        self.done = 0
        self._interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._drawn_at = float("-inf")
        self._drawn = False
        self._extra = ""

    def update(self, done: int, *, total: int | None = None, extra: str = "") -> None:
        """Set the progress to ``done`` (of ``total``, when it changed)."""
        self.done, self._extra = done, extra
        if total is not None:
            self.total = total
        now = self._clock()
        if now - self._drawn_at >= self._interval_s:
            self._drawn_at = now
            self._draw(now)

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n, extra=self._extra)

    def close(self) -> None:
        if self.tty and self._drawn:
            self._draw(self._clock())
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _draw(self, now: float) -> None:
        if not self.tty:
            return
        line = bar_text(
            self.done, self.total, label=self.label, unit=self.unit, elapsed_s=now - self._started, extra=self._extra
        )
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()
        self._drawn = True


class LogProgress:
    """:class:`ProgressBar`'s interface for a stream that is not a terminal: one ``progress:``
    line to ``logger`` at most every ``interval_s`` (``--progress-interval``), none at
    :meth:`close`. ``parka spark-ingest`` hands it to its loop where a terminal gets the bar."""

    def __init__(
        self,
        logger: Any,
        *,
        unit: str = "messages",
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger, self.unit, self.interval_s, self._clock = logger, unit, interval_s, clock
        self.done, self.total = 0, 0
        self._said_at = clock()

    def update(self, done: int, *, total: int | None = None, extra: str = "") -> None:
        self.done = done
        if total is not None:
            self.total = total
        now = self._clock()
        if now - self._said_at >= self.interval_s:
            self._said_at = now
            lag = max(self.total - self.done, 0)
            self.logger.info("progress: %s %s committed; lag %s%s", f"{done:,}", self.unit, f"{lag:,}", extra)

    def close(self) -> None:
        pass
