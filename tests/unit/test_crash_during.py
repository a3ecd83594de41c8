"""The test hook's spans (``parka.crash.crash_during``): the kill lands while the span runs, from
another thread, so inside a call that holds no Python point; a span that ends first is not
counted. Each case runs in a child interpreter, which the hook kills."""

from __future__ import annotations

import signal
import subprocess
import sys

PROGRAM = """
import logging, sys, time
from parka.crash import crash_during
logging.basicConfig(stream=sys.stdout, format="%(message)s")
for i, seconds in enumerate(float(s) for s in sys.argv[1:]):
    print(f"span {i} starts", flush=True)
    with crash_during("during-vacuum"):
        time.sleep(seconds)  # the GIL is released, as in a native call
    print(f"span {i} ended", flush=True)
"""


def run(*spans: float, delay_ms: str, after: str = "1") -> subprocess.CompletedProcess[str]:
    env = {"PARKA_TEST_CRASH_AT": "during-vacuum", "PARKA_TEST_CRASH_AFTER": after}
    env["PARKA_TEST_CRASH_DELAY_MS"] = delay_ms
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *map(str, spans)], capture_output=True, text=True, timeout=60, env=env
    )


def test_the_kill_lands_inside_the_span_after_the_delay() -> None:
    done = run(5.0, delay_ms="50")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.splitlines() == ["span 0 starts", "crash point during-vacuum: SIGKILL"]


def test_a_span_that_ends_before_the_kill_is_not_counted_and_the_next_one_is_killed() -> None:
    done = run(0.0, 5.0, delay_ms="500")
    assert done.returncode == -signal.SIGKILL
    lines = done.stdout.splitlines()
    assert lines == ["span 0 starts", "span 0 ended", "span 1 starts", "crash point during-vacuum: SIGKILL"]


def test_spans_before_the_nth_run_untouched() -> None:
    done = run(0.2, 0.2, 5.0, delay_ms="50", after="3")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.splitlines()[-2:] == ["span 2 starts", "crash point during-vacuum: SIGKILL"]
    assert "span 1 ended" in done.stdout


def test_unarmed_spans_run_to_their_end() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, "0.01"], capture_output=True, text=True, timeout=60, env={"PATH": ""}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["span 0 starts", "span 0 ended"]
