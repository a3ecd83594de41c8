"""A daemon's stop that always ends: SIGTERM and SIGINT ask it to stop gracefully, and it exits
within a bound whatever its threads are doing.

Python runs a signal's handler in the main thread, between two bytecodes: a main thread blocked
in a native call (delta-rs, pyiceberg, librdkafka) or waiting for a thread that is runs it late,
or never. :class:`StopGuard` does not depend on it. The C-level handler writes each signal's
number to a pipe (``signal.set_wakeup_fd``) whatever the main thread does, and a thread of the
guard's reads it: the first SIGTERM or SIGINT calls ``stop`` (the daemon's graceful stop: the
commit in flight and what is buffered committed, then exit) and arms a timer of ``bound_s``;
when the timer fires, or at a second signal, the process logs what its main thread was doing
and exits at once with :data:`FORCED_EXIT` (128 + SIGTERM, what a supervisor expects of a
process that ended on SIGTERM). A forced exit loses nothing: what was not committed is consumed
again from the table's offsets by the next run, as after a SIGKILL.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import sysconfig
import threading
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

__all__ = ["FORCED_EXIT", "StopGuard"]

FORCED_EXIT = 128 + signal.SIGTERM
"""The exit code of a stop forced by its bound or a second signal."""

log = logging.getLogger("parka")


class StopGuard:
    """SIGTERM/SIGINT handling for a daemon: ``stop`` at the first signal, an exit within
    ``bound_s`` seconds or at the second (see the module docstring). :meth:`install` from the
    main thread, once."""

    def __init__(self, stop: Callable[[], None], *, bound_s: float, name: str) -> None:
        self._stop = stop
        self._bound_s = bound_s
        self._name = name
        self._stopping = False  # the watcher thread's alone
        self._previous: dict[signal.Signals, Any] = {}
        self._previous_fd = -1
        self._write = -1
        self._timer: threading.Timer | None = None

    def install(self) -> None:
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        self._write = write
        for sig in (signal.SIGINT, signal.SIGTERM):
            # the Python-level handler: without one the default kills the process; the stop
            # itself is the watcher's (the handler may run late, or not at all)
            self._previous[sig] = signal.signal(sig, lambda *_: None)
        threading.Thread(target=self._watch, args=(read,), name="parka-stop", daemon=True).start()

    def uninstall(self) -> None:
        """Undo :meth:`install` for a caller that goes on after the daemon returned (a test, an
        embedding program): the handlers and wakeup descriptor it found, and the watcher ends. A
        stop that began is over once the daemon returned: its bound is disarmed."""
        if self._timer is not None:
            self._timer.cancel()
        signal.set_wakeup_fd(self._previous_fd)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        os.close(self._write)  # the watcher reads the end of the pipe and returns

    def _watch(self, read: int) -> None:
        while True:
            got = os.read(read, 64)
            if not got:
                os.close(read)
                return
            for number in got:
                if number not in (signal.SIGINT, signal.SIGTERM):
                    continue
                what = signal.Signals(number).name
                if self._stopping:
                    self._force(f"a second {what}")
                log.info("%s: stopping (%s); at most %.0f s, then at once", self._name, what, self._bound_s)
                self._stopping = True
                timer = threading.Timer(self._bound_s, self._force, args=(f"the stop took over {self._bound_s:g} s",))
                timer.daemon = True
                self._timer = timer
                timer.start()
                self._stop()

    def _force(self, why: str) -> NoReturn:
        log.error(
            "%s: stopped at once (%s) while %s; exit %d; the other threads: %s",
            self._name,
            why,
            _main_thread_at(),
            FORCED_EXIT,
            _threads_at(),
        )
        for handler in logging.getLogger().handlers + logging.getLogger("parka").handlers:
            handler.flush()
        os._exit(FORCED_EXIT)


def _main_thread_at() -> str:
    """Where the main thread is (:func:`_where`)."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    if frame is None:
        return "the main thread had ended"
    return f"the main thread was in {_where(frame)}"


def _threads_at() -> str:
    """Each other thread's name and where it is (the guard's own left out)."""
    frames = sys._current_frames()
    main, me = threading.main_thread().ident, threading.get_ident()
    parts = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if frame is None or thread.ident in (main, me) or thread.name == "parka-stop":
            continue
        parts.append(f"{thread.name} in {_where(frame)}")
    return "; ".join(parts) or "none"


_STDLIB = sysconfig.get_paths()["stdlib"]


def _where(frame: FrameType) -> str:
    """A thread's innermost frame and its innermost two outside the standard library (what it
    waits in, and for what), innermost first: ``file:line in function <- ...``."""
    stack = traceback.extract_stack(frame)
    own = [f for f in stack if not f.filename.startswith(_STDLIB)][-2:]
    shown = [stack[-1], *(f for f in reversed(own) if f is not stack[-1])]
    return " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in shown)
