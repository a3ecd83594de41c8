"""The operator-facing decisions of :mod:`parka.ops.health`, on a fake clock."""

from __future__ import annotations

import logging

import pytest
from parka.ops.health import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    Backoff,
    HealthLog,
    RateLimitFilter,
    RunStatus,
    duration_text,
    exit_code_for,
    run_status,
)

from parka.errors import BlockedError, Blocker, CommitError, ConfigError, one_line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


NO_BROKER = Blocker("broker", "no Kafka broker reachable at localhost:9999", False)


def test_a_cause_is_said_once_then_at_the_rhythm_with_its_duration_then_recovered() -> None:
    clock = Clock()
    health = HealthLog(remind_s=60, clock=clock)
    assert health.trouble(NO_BROKER) == "no Kafka broker reachable at localhost:9999; retrying"
    said = []
    for _ in range(300):  # five minutes of attempts, one a second
        clock.now += 1
        said.append(health.trouble(NO_BROKER))
    reminders = [line for line in said if line is not None]
    assert len(reminders) == 5
    assert reminders[0] == "no Kafka broker reachable at localhost:9999; still retrying after 1 min 0 s"
    assert reminders[-1].endswith("still retrying after 5 min 0 s")
    assert health.active() == {"broker": NO_BROKER.message}
    clock.now += 5
    assert health.clear("broker") == "recovered after 5 min 5 s: no Kafka broker reachable at localhost:9999"
    assert health.clear("broker") is None  # once
    assert health.active() == {}
    assert health.trouble(NO_BROKER) is not None  # a new outage is said again


def test_clear_all_recovers_every_open_cause() -> None:
    clock = Clock()
    health = HealthLog(clock=clock)
    health.trouble(NO_BROKER)
    health.trouble(Blocker("table", "table location /x cannot be created or written", True))
    clock.now += 3
    assert sorted(health.clear_all()) == [
        "recovered after 3 s: no Kafka broker reachable at localhost:9999",
        "recovered after 3 s: table location /x cannot be created or written",
    ]


def test_backoff_doubles_to_its_ceiling_and_resets() -> None:
    b = Backoff(0.5, 4.0)
    assert [b.next() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    b.reset()
    assert b.next() == 0.5
    with pytest.raises(ValueError, match="initial_s"):
        Backoff(0, 1)


def test_one_line_drops_colours_java_frames_and_line_breaks() -> None:
    chain = "Generic S3 error:\n  \x1b[31m↳ Error performing GET\x1b[0m\n   ↳ 404 Not Found"
    assert one_line(chain) == "Generic S3 error: ↳ Error performing GET: ↳ 404 Not Found"
    java = (
        "An error occurred while calling o45.start.\n: org.apache.kafka.common.KafkaException: Failed\n"
        "\tat org.apache.kafka.Foo.bar(Foo.java:12)\nCaused by: java.net.ConnectException: Connection refused\n"
        "\t... 12 more"
    )
    assert one_line(java) == (
        "An error occurred while calling o45.start.: org.apache.kafka.common.KafkaException: Failed: "
        "Caused by: java.net.ConnectException: Connection refused"
    )
    assert len(one_line("x" * 5000)) == 600


def test_durations_read_as_an_operator_says_them() -> None:
    assert [duration_text(s) for s in (0, 59, 61, 3599, 7260)] == [
        "0 s",
        "59 s",
        "1 min 1 s",
        "59 min 59 s",
        "2 h 1 min",
    ]


def test_exit_codes_follow_the_cause() -> None:
    assert exit_code_for(BlockedError(NO_BROKER)) == EXIT_UNREACHABLE
    assert exit_code_for(BlockedError(Blocker("topic", "topic 'x' does not exist", True))) == EXIT_CONFIG
    assert exit_code_for(ConfigError("k", 1, "2")) == EXIT_CONFIG
    assert exit_code_for(CommitError("cannot open: <Code>NoSuchBucket</Code>")) == EXIT_CONFIG
    assert exit_code_for(CommitError("cannot open: \x1b[1mtcp connect error\x1b[0m")) == EXIT_UNREACHABLE
    assert exit_code_for(CommitError("a commit conflicted 20 times")) == EXIT_FAILED


def _record(msg: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("parka.kafka", level, __file__, 1, "%s [%s] %s", ("FAIL", "rdkafka#consumer-1", msg), None)


def test_librdkafka_lines_pass_once_per_window_counting_the_rest() -> None:
    clock = Clock()
    limit = RateLimitFilter(window_s=60, clock=clock)
    first = _record("Connect to ipv4#127.0.0.1:9999 failed: Connection refused (after 0ms in state CONNECT)")
    assert limit.filter(first) and first.levelno == logging.WARNING  # librdkafka retries it: not parka's error
    passed = 0
    for i in range(1100):  # one every 50 ms for 55 s, the delay in the line changing
        clock.now += 0.05
        line = f"Connect to ipv4#127.0.0.1:9999 failed: Connection refused (after {i}ms in state CONNECT)"
        passed += limit.filter(_record(line))
    assert passed == 0  # numbers aside, the same line
    clock.now += 10.5
    later = _record("Connect to ipv4#127.0.0.1:9999 failed: Connection refused (after 7ms in state CONNECT)")
    assert limit.filter(later)
    assert later.getMessage().endswith("(1100 more like it in the last 1 min 5 s)")
    other = _record("Metadata request failed: broker down", logging.INFO)
    assert limit.filter(other) and other.levelno == logging.INFO


def test_a_run_that_dead_lettered_everything_it_read_is_no_success() -> None:
    everything = run_status(segments=0, covered_files=0, dead_letters=13, dlq_table="/lake/dlq", run_once=True)
    assert (everything.status, everything.exit_code) == ("dead-lettered", EXIT_FAILED)
    assert everything.error is not None and "13 dead-lettered into /lake/dlq, none in the table" in everything.error
    # a daemon was asked to stop: it says so, and exits 0 as a stopped daemon does
    stopped = run_status(segments=0, covered_files=0, dead_letters=13, dlq_table="/lake/dlq", run_once=False)
    assert (stopped.status, stopped.exit_code, stopped.error) == ("dead-lettered", EXIT_OK, everything.error)
    # some landed, or another writer had landed them first, or nothing was there: as before
    for segments, covered, dead in [(12, 0, 1), (0, 2, 1), (5, 0, 0), (0, 0, 0)]:
        for run_once in (True, False):
            got = run_status(
                segments=segments, covered_files=covered, dead_letters=dead, dlq_table="/lake/dlq", run_once=run_once
            )
            assert got == RunStatus("ok", EXIT_OK)
