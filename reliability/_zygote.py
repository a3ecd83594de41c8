"""A fork server for the ``python -m parka.cli`` processes of the fault suite and the tests
(:mod:`reliability.forkserver` is its client).

The test suite starts some 200 ``parka ingest`` daemons, the quick fault suite some 60 more, and
each spent most of its CPU (about 0.9 of a median 1.1 CPU-s) importing pyarrow, pandas, deltalake
and confluent-kafka before it did anything. This server imports them once, and forks a child per
command: the child is a process of its own (its own pid, file descriptors, environment, working
directory, signals and exit status) that then runs ``parka.cli`` as ``__main__`` with
:func:`runpy.run_module`, as ``python -m parka.cli`` does, and ends as that interpreter ends
(atexit handlers, non-daemon threads joined). The same technique as :mod:`multiprocessing`'s
``forkserver`` start method with preloaded modules.

The server stays single-threaded in Python and never opens a Kafka client, a table or a thread
pool: a child must not inherit anything but imported modules. Protocol, over a ``SOCK_SEQPACKET``
socket whose descriptor is the argument: the client sends ``{"id", "argv", "env", "cwd", "session"}`` as JSON
with the child's stdin, stdout and stderr descriptors; the server answers ``{"id", "pid"}``, and
``{"exited": pid, "returncode": rc}`` when the child ends (``rc`` as :attr:`subprocess.Popen.returncode`
says it: negative for a signal). The server exits when the client closes its end."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import runpy
import select
import signal
import socket
import sys
from typing import Any

_MAX_MESSAGE = 1 << 20
# How long the server waits for a forked child to take its own session before it answers anyway
_SETTLE_S = 30.0


# What the commands import only when a run needs it, each an extra that may not be installed:
# the Iceberg engine with pyiceberg's SQL and REST catalogs, the SQLite dialect and the file IO
# that load_catalog imports by name, Kafka's admin client, the metrics server, the registry's
# client, decryption's AES-GCM. A `parka ingest --catalog` child imported some 350 modules of
# these (pyiceberg, SQLAlchemy, pydantic) before it did anything: 0.8 of its 0.95 CPU-s
# (benchmarks/results/2026-11-30-fork-server-preload/).
_LAZY = (
    "parka.lake.iceberg",
    "pyiceberg.catalog.sql",
    "pyiceberg.catalog.rest",
    "pyiceberg.io.pyarrow",
    "pyiceberg.avro.decoder_fast",
    "sqlalchemy.dialects.sqlite.pysqlite",
    "sqlite3",
    "confluent_kafka.admin",
    "parka.metrics",
    "confluent_kafka.schema_registry",
    "cryptography.hazmat.primitives.ciphers.aead",
)


def _preload() -> None:
    """What parka's commands import (each command's module, as ``parka.cli`` names them, and
    :data:`_LAZY`), loaded before the first fork; and pandas, which pyarrow imports at the first
    table it builds when pandas is installed."""
    import importlib

    import pyarrow as pa

    from parka.cli import COMMANDS

    for command in COMMANDS.values():
        importlib.import_module(command.module)
    for name in _LAZY:
        with contextlib.suppress(ImportError):  # an extra not installed: the child's own import says so
            importlib.import_module(name)
    pa.table({"x": [0]})


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        message = {"exited": pid, "returncode": os.waitstatus_to_exitcode(status)}
        sock.send(json.dumps(message).encode())


def _serve(sock: socket.socket) -> dict[str, Any] | None:
    """Answer requests until the client goes (None), or, in a forked child, return its request."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through the wakeup fd
    while True:
        try:
            ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock)
        if sock.fileno() not in ready:
            continue
        data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 3)
        if not data:
            return None
        request = json.loads(data)
        settled_r, settled_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            if request["session"]:
                os.setsid()
            os.close(settled_w)  # the parent's read ends: the child is in its own session
            os.close(settled_r)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            sock.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            return dict(request)
        for fd in fds:
            os.close(fd)
        # The pid goes out only once the child has its own session: a client that signals the
        # child's process group at once (os.killpg(pid, ...)) must reach it, and before setsid
        # there is no such group (killpg raised ProcessLookupError, and the child lived on).
        os.close(settled_w)
        select.select([settled_r], [], [], _SETTLE_S)
        os.close(settled_r)
        sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())


def _run(request: dict[str, Any]) -> None:
    """In the child: become ``python -m parka.cli ARGS`` in the request's directory and environment."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if os.environ.get("PYTHONFAULTHANDLER"):  # what the interpreter does with it at its start
        faulthandler.enable()
    sys.argv = ["-m", *request["argv"]]
    sys.modules.pop("parka.cli", None)  # as in ``python -m``: the module runs as __main__ only
    runpy.run_module("parka.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _preload()
    child = _serve(socket.socket(fileno=int(sys.argv[1])))
    if child is not None:
        _run(child)
