"""The start-up probe's decisions (:mod:`parka.ops.preflight`) on a local disk and a stand-in
consumer that answers metadata requests as librdkafka does (no broker, no network)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from parka.ops.health import HealthLog, exit_code_for
from parka.ops.preflight import table_blocker, wait_until_ready

from parka.errors import BlockedError


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Stop(threading.Event):
    """``wait`` moves the fake clock instead of sleeping; set after ``budget_s`` of waiting."""

    def __init__(self, clock: FakeClock, budget_s: float = 1e9) -> None:
        super().__init__()
        self.clock, self.budget_s = clock, budget_s

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.now += timeout or 0.0
        if self.clock.now >= self.budget_s:
            self.set()
        return self.is_set()


class Topic:
    def __init__(self, error: Any = None) -> None:
        self.error = error


class Metadata:
    def __init__(self, topics: dict[str, Topic]) -> None:
        self.topics = topics


class Consumer:
    """Answers ``list_topics`` from ``answers`` in turn (the last one repeats): a ``Metadata``, or
    ``None`` for no broker (librdkafka's transport failure, after the request's timeout)."""

    def __init__(self, clock: FakeClock, *answers: Metadata | None) -> None:
        self.clock, self.answers = clock, list(answers)

    def list_topics(self, topic: str, timeout: float) -> Metadata:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer is None:
            self.clock.now += timeout
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
        return answer


REFUSED = KafkaError(KafkaError._TRANSPORT, "h:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused")


def _wait(consumer: Consumer, clock: FakeClock, tmp_path: Path, *, run_once: bool, stop: Stop, **kw: Any) -> bool:
    return wait_until_ready(
        consumer,
        topic="events",
        bootstrap="h:1",
        table_uri=str(tmp_path / "t"),
        storage_options={},
        run_once=run_once,
        timeout_s=kw.pop("timeout_s", 20.0),
        health=kw.pop("health", HealthLog(remind_s=60, clock=clock)),
        stop=stop,
        client_error=lambda: REFUSED,
        log=logging.getLogger("parka.test"),
        clock=clock,
    )


def test_a_table_path_through_a_file_or_without_rights_is_named(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    blocker = table_blocker(str(tmp_path / "afile" / "t"))
    assert blocker is not None and blocker.configuration
    assert blocker.message == f"table location {tmp_path / 'afile' / 't'} cannot be created or written: Not a directory"
    assert table_blocker(str(tmp_path / "new" / "t")) is None
    assert [p.name for p in (tmp_path / "new" / "t").iterdir()] == []  # the probe file is gone


def test_run_once_stops_at_once_on_an_unknown_topic(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = Consumer(clock, Metadata({"events": Topic(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))}))
    with pytest.raises(BlockedError) as raised:
        _wait(consumer, clock, tmp_path, run_once=True, stop=Stop(clock))
    assert exit_code_for(raised.value) == 2  # configuration: only a change clears it
    assert str(raised.value) == "topic 'events' does not exist on the Kafka cluster at h:1"
    assert clock.now == 0.0


def test_run_once_gives_up_on_an_unreachable_broker_after_its_timeout(tmp_path: Path) -> None:
    clock = FakeClock()
    with pytest.raises(BlockedError) as raised:
        _wait(Consumer(clock, None), clock, tmp_path, run_once=True, stop=Stop(clock), timeout_s=20.0)
    assert exit_code_for(raised.value) == 3  # an outage
    assert str(raised.value) == (
        "no Kafka broker reachable at h:1 (Connect to ipv4#127.0.0.1:1 failed: Connection refused); gave up after 20 s"
    )
    assert 20.0 <= clock.now <= 21.0


def test_a_daemon_waits_says_it_once_then_slowly_then_recovered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    metadata = Metadata({"events": Topic()})
    consumer = Consumer(clock, *([None] * 60), metadata)  # 60 attempts: some 14 minutes without a broker
    caplog.set_level(logging.INFO, logger="parka.test")
    assert _wait(consumer, clock, tmp_path, run_once=False, stop=Stop(clock))
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("no Kafka broker reachable at h:1 (") and said[0].endswith("; retrying")
    reminders = [line for line in said if "still retrying after" in line]
    assert abs(len(reminders) - clock.now // 60) <= 1  # one a minute (remind_s), never one per attempt
    assert said[-1].startswith("recovered after ") and said[-1].endswith("Connection refused)")
    assert len(said) == 2 + len(reminders)


def test_a_daemon_stopped_while_waiting_returns_false(tmp_path: Path) -> None:
    clock = FakeClock()
    assert not _wait(Consumer(clock, None), clock, tmp_path, run_once=False, stop=Stop(clock, budget_s=30))
