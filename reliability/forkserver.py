"""``python -m parka.cli ...`` for the fault suite and the tests, forked from a server that has
imported parka and its dependencies once (:mod:`reliability._zygote`), instead of a new
interpreter importing them each time: most of a short daemon's CPU was its imports.

:func:`run` and :func:`popen` take what :func:`subprocess.run` and :class:`subprocess.Popen` take
for the cases the fault suite and the tests use, and return what they return; a command that is not ``[sys.executable,
"-m", "parka.cli", ...]`` goes to :mod:`subprocess` itself. The child is a process of its own,
not a child of this one: its exit status reaches this process from the server.
``PARKA_TEST_FORK_SERVER=0`` starts every command as a new interpreter again."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
_PARKA = [sys.executable, "-m", "parka.cli"]


class _Server:
    """This process's fork server, started at the first command; a reader thread takes its answers."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reliability._zygote", str(theirs.fileno())],
            cwd=REPO,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours
        self.ids = itertools.count()
        self.send_lock = threading.Lock()
        self.changed = threading.Condition()
        self.pids: dict[int, int] = {}
        self.returncodes: dict[int, int] = {}
        self.failure: str | None = None
        threading.Thread(target=self._read, name="fork-server", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError as exc:
                data, reason = b"", str(exc)
            else:
                reason = f"the fork server exited ({self.process.poll()})"
            with self.changed:
                if not data:
                    self.failure = reason
                    self.changed.notify_all()
                    return
                message = json.loads(data)
                if "pid" in message:
                    self.pids[message["id"]] = message["pid"]
                    # a reused pid (pid_max is 32,768 here, and a run starts thousands of
                    # processes): the exit status kept for the earlier process of that pid is
                    # not this one's; kept, it made a wait return it at once (an exit 0 for a
                    # command that had failed). The server answers a fork before it reaps it.
                    self.returncodes.pop(message["pid"], None)
                else:
                    self.returncodes[message["exited"]] = message["returncode"]
                self.changed.notify_all()

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, fds: Sequence[int], session: bool) -> int:
        request_id = next(self.ids)
        request = {"id": request_id, "argv": list(argv), "env": dict(env), "cwd": cwd, "session": session}
        with self.send_lock:
            socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds))
        with self.changed:
            self.changed.wait_for(lambda: request_id in self.pids or self.failure is not None, timeout=60)
            if request_id not in self.pids:
                raise RuntimeError(f"the fork server did not start {list(argv)}: {self.failure or 'no answer in 60 s'}")
            return self.pids.pop(request_id)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self.changed:
            self.changed.wait_for(lambda: pid in self.returncodes or self.failure is not None, timeout=timeout)
            if pid not in self.returncodes and self.failure is not None:
                raise RuntimeError(f"lost the exit status of process {pid}: {self.failure}")
            return self.returncodes.get(pid)


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or _server.failure is not None:
            _server = _Server()
        return _server


def _forked(args: Sequence[str]) -> bool:
    return list(args[:3]) == _PARKA and os.environ.get("PARKA_TEST_FORK_SERVER", "1") != "0"


def _fd(spec: Any, default: int, *, read: bool) -> tuple[int, Any]:
    """(the descriptor to pass, this side's end of a pipe or None) for a stdin/stdout/stderr argument."""
    if spec is None:
        return default, None
    if spec == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDONLY if read else os.O_WRONLY), None
    if spec == subprocess.PIPE:
        r, w = os.pipe()
        return (r, w) if read else (w, r)
    if isinstance(spec, int):
        return spec, None
    return spec.fileno(), None


class ForkedProcess:
    """What the tests use of :class:`subprocess.Popen`: ``pid``, ``returncode``, ``stdout``,
    ``stderr``, ``poll``, ``wait``, ``communicate``, ``send_signal``, ``terminate``, ``kill``, and
    ``with``. ``stderr=subprocess.STDOUT`` is taken; ``stdin`` only as None, DEVNULL or a file."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        text: bool = False,
        start_new_session: bool = False,
    ) -> None:
        self.args = list(args)
        self.returncode: int | None = None
        self._server = _the_server()
        passed: list[int] = []
        ends: list[Any] = []
        fds: list[int] = []
        for spec, default, read in ((stdin, 0, True), (stdout, 1, False), (stderr, 2, False)):
            if spec == subprocess.STDOUT:
                fds.append(fds[1])
                ends.append(None)
                continue
            fd, end = _fd(spec, default, read=read)
            if end is not None or spec == subprocess.DEVNULL:
                passed.append(fd)
            fds.append(fd)
            ends.append(end)
        try:
            environment = env if env is not None else os.environ
            self.pid = self._server.spawn(args[3:], environment, str(cwd or os.getcwd()), fds, start_new_session)
        finally:
            for fd in passed:
                os.close(fd)
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        for i, end in enumerate(ends):
            if end is not None:
                mode = ("w" if i == 0 else "r") + ("" if text else "b")
                setattr(self, ("stdin", "stdout", "stderr")[i], open(end, mode, closefd=True))  # noqa: SIM115 (closed by wait, communicate, with)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.wait(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.wait(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        if input is not None:
            raise ValueError("the fork server's processes take no input")
        out: dict[str, Any] = {}
        readers = [
            threading.Thread(target=lambda n=name, f=f: out.__setitem__(n, f.read()), daemon=True)
            for name, f in (("stdout", self.stdout), ("stderr", self.stderr))
            if f is not None
        ]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        return out.get("stdout"), out.get("stderr")

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                f.close()
        self.wait()


Process = ForkedProcess | subprocess.Popen[Any]


def popen(args: Sequence[str], **kwargs: Any) -> Process:
    """:class:`subprocess.Popen`, forked from the server for ``python -m parka.cli`` commands."""
    if not _forked(args):
        return subprocess.Popen(args, **kwargs)
    return ForkedProcess(args, **kwargs)


def run(
    args: Sequence[str],
    *,
    capture_output: bool = False,
    text: bool = False,
    timeout: float | None = None,
    check: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run`, forked from the server for ``python -m parka.cli`` commands."""
    if not _forked(args):
        return subprocess.run(
            args,
            capture_output=capture_output,
            text=text,
            timeout=timeout,
            check=check,
            env=env,
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
        )
    if capture_output:
        stdout = stderr = subprocess.PIPE
    proc = ForkedProcess(args, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd, text=text)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.__exit__()  # its pipes closed, its exit awaited
        raise
    assert proc.returncode is not None  # communicate waited for the exit
    result = subprocess.CompletedProcess(list(args), proc.returncode, out, err)
    if check:
        result.check_returncode()
    return result
