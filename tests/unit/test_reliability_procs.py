"""The fault suite's process handle: a worker that will not exit is aborted with every thread's
stack in its log (a hang's only evidence), then killed."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from reliability.procs import Proc, wait_for

HANGS = """
import threading
stuck = threading.Lock()
stuck.acquire()
def side_job():
    threading.Event().wait()
threading.Thread(target=side_job, name="side").start()
print("progress:", "stuck", flush=True)  # not the command line, which the log starts with
stuck.acquire()  # the main thread never returns from here
"""


def test_a_hung_worker_is_aborted_with_every_threads_stack_in_its_log(tmp_path: Path) -> None:
    proc = Proc.start("hung", [sys.executable, "-c", HANGS], tmp_path / "hung.log")
    try:
        wait_for(lambda: proc.has("progress: stuck"), "the worker to start", 30)
        proc.abort_with_stacks()
        assert proc.wait_exit(30) == -signal.SIGABRT
        log = proc.text()
        assert "Fatal Python error: Aborted" in log
        assert 'File "<string>", line 9 in <module>' in log  # the main thread, at its stuck acquire
        assert "in side_job" in log  # and the other thread
    finally:
        proc.kill_group()
