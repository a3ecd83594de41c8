"""The tests' fork server (:mod:`reliability.forkserver`) runs ``python -m parka.cli`` as a new
interpreter does: the same output, exit status, environment, working directory and signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from reliability import forkserver

from ._ingest_util import log_has, wait_for

PARKA = [sys.executable, "-m", "parka.cli"]


def test_a_forked_command_answers_as_a_new_interpreter_does(tmp_path: Path) -> None:
    """Help, a usage error, and a run that reads its settings from the environment and writes a
    relative table path under its working directory, each forked and as a new interpreter."""
    env = {**os.environ, "PARKA_KAFKA": "127.0.0.1:1", "PARKA_BROKER_TIMEOUT": "0.5"}
    commands = [
        ["ingest", "--help"],
        ["ingest", "--no-such-flag"],
        ["ingest", "events", "t", "--end-at-latest"],
    ]
    for args in commands:
        answers = []
        for fork in (True, False):
            cwd = tmp_path / ("forked" if fork else "new")
            cwd.mkdir(exist_ok=True)
            run = forkserver.run if fork else subprocess.run
            proc = run([*PARKA, *args], capture_output=True, text=True, timeout=60, env=env, cwd=str(cwd))
            # without the time, and without librdkafka's own lines (how many come is timing)
            stderr = [ln.split(" ", 2)[-1] for ln in proc.stderr.splitlines() if " parka.kafka: " not in ln]
            answers.append((proc.returncode, proc.stdout, stderr))
        assert answers[0] == answers[1], args
    assert answers[0][0] == 3 and any("no Kafka broker reachable at 127.0.0.1:1" in ln for ln in answers[0][2])
    assert "RuntimeWarning" not in "".join(answers[0][2])


def test_a_forked_daemon_stops_on_sigterm_and_dies_on_sigkill(bootstrap: str, tmp_path: Path) -> None:
    log = tmp_path / "log"
    cmd = [*PARKA, "ingest", "no-topic-yet", str(tmp_path / "t"), "-k", bootstrap, "--progress-interval", "1"]
    with open(log, "wb") as out:
        daemon = forkserver.popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    assert isinstance(daemon, forkserver.ForkedProcess) and daemon.pid != os.getpid()
    wait_for(lambda: log_has(log, "does not exist"), "the daemon to wait for its topic")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(60) == 0, log.read_text()[-2000:]
    with open(log, "wb") as out:
        daemon = forkserver.popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    daemon.kill()
    assert daemon.wait(60) == -signal.SIGKILL


def test_a_forked_command_in_a_session_of_its_own_is_its_groups_leader_when_its_pid_is_known(tmp_path: Path) -> None:
    """``start_new_session=True``, as :class:`subprocess.Popen` gives it: when ``popen`` returns,
    the child leads its own process group, so a group SIGKILL sent at once reaches it (before
    the server waited for the child's ``setsid``, ``os.killpg`` at once found no group in 196 of
    200 tries, and the child lived on)."""
    # a command that lives until killed: a run waiting for a broker that is not there
    env = {**os.environ, "PARKA_KAFKA": "127.0.0.1:1", "PARKA_BROKER_TIMEOUT": "600"}
    for _ in range(20):
        proc = forkserver.popen(
            [*PARKA, "ingest", "events", "t", "--end-at-latest"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path, start_new_session=True,
        )  # fmt: skip
        leads = os.getpgid(proc.pid) == proc.pid and os.getsid(proc.pid) == proc.pid
        os.killpg(proc.pid, signal.SIGKILL)
        assert leads and proc.wait(60) == -signal.SIGKILL
