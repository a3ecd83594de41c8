"""parka ingest's per-partition bookkeeping (parka.consumer._positions) and the watermarks it
starts from, without a broker."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from parka.consumer._positions import Positions


def test_lag_progress_and_the_end_follow_what_was_consumed_and_committed() -> None:
    pos = Positions()
    pos.assign(0, start=10, high=20, in_table=9)
    pos.assign(1, start=0, high=5, in_table=None)
    highs = {0: 25, 1: 5}
    assert pos.lag(highs.get) == {0: 15, 1: 5}
    assert pos.progress() == (0, 15)
    assert not pos.caught_up(lambda p: -1)
    pos.consumed.update({0: 19, 1: 2})
    assert pos.lag(highs.get) == {0: 5, 1: 2}
    assert pos.lag(highs.get, committed=True) == {0: 15, 1: 5}
    pos.in_table({0: 19})
    assert pos.lag(highs.get, committed=True) == {0: 5, 1: 5}
    assert pos.progress() == (13, 15)
    assert not pos.caught_up(lambda p: -1)
    assert pos.caught_up(lambda p: 5 if p == 1 else -1)  # the client's position says partition 1 is done
    assert pos.lag(lambda p: None) == {}  # no watermark in the client's cache: no number


def test_a_skip_and_a_revocation() -> None:
    pos = Positions()
    pos.assign(3, start=0, high=100, in_table=None)
    pos.skip_to(3, 40)  # another worker committed up to 39
    assert (pos.consumed[3], pos.committed[3], pos.start[3]) == (39, 39, 40)
    assert pos.progress() == (0, 60)
    pos.revoke(3)
    assert (pos.assigned, pos.consumed, pos.committed) == (set(), {}, {})
    assert not pos.caught_up(lambda p: 0)  # nothing assigned: not the end


def test_the_messages_taken_are_those_after_the_last_taken_or_the_assignments_start() -> None:
    """What ``parka ingest``'s loop takes of the messages a poll returns: a message fetched
    before a seek or a rebalance that moved its partition is dropped, the first ones after it
    are taken, and a second delivery of one taken is not."""
    pos = Positions()
    assert not pos.wants(0, 0)  # not assigned
    pos.assign(0, start=4, high=8, in_table=3)
    assert not pos.wants(0, 3) and pos.wants(0, 4) and pos.wants(0, 6)  # an offset may skip (a marker)
    pos.consumed[0] = 5
    assert not pos.wants(0, 5) and pos.wants(0, 6)
    pos.skip_to(0, 10)  # another worker's commits went further: the partition sought to 10
    assert not pos.wants(0, 9) and pos.wants(0, 10)
    pos.revoke(0)
    assert not pos.wants(0, 10)  # held from before the revocation
    pos.consumed[0] = 12  # (never so: a revoked partition's messages are not taken)
    pos.assign(0, start=10, high=20, in_table=9)  # given back: it starts again where the table ends
    assert pos.wants(0, 10) and not pos.wants(0, 9)


def test_an_assignment_while_no_broker_answers_asks_for_its_watermarks_again(caplog: pytest.LogCaptureFixture) -> None:
    """The brokers lost during a rebalance: the daemon asks for an assigned partition's
    watermarks again, logging a lost broker, as long as it takes; a stop ends the wait; with
    ``--end-at-latest`` ``--broker-timeout`` ends it, an unreachable broker's exit 3."""
    import threading

    from confluent_kafka import KafkaError, KafkaException
    from parka.consumer._ingest import IngestionConsumer, IngestSettings
    from parka.ops.health import EXIT_UNREACHABLE, exit_code_for

    from parka.errors import BlockedError

    down = KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN, "All broker connections are down"))
    now = [0.0]
    waited: list[float] = []

    class Waits(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waited.append(timeout or 0.0)
            now[0] += timeout or 0.0
            return self.is_set()

    class Client:
        def __init__(self, *answers: Any) -> None:
            self.answers = list(answers)

        def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer  # type: ignore[no-any-return]

    def daemon(**settings: Any) -> IngestionConsumer:
        conf = {"bootstrap.servers": "b:9092"}
        ingest = IngestionConsumer(
            IngestSettings(topic="t", table_uri="/t", kafka_conf=conf, app_id="a", **settings), clock=lambda: now[0]
        )
        ingest._stop = Waits()
        return ingest

    ingest = daemon()
    with caplog.at_level(logging.WARNING, logger="parka.ingest"):
        assert ingest._watermarks(Client(down, down, (3, 9)), 2) == (3, 9)  # type: ignore[arg-type]
    assert waited == [0.5, 1.0]
    assert "lost the Kafka brokers at b:9092: partition 2 assigned, but its offsets cannot be read" in caplog.text
    assert "recovered" in caplog.text

    ingest = daemon()
    client = Client(down, down, down)
    ingest._stop.wait = lambda timeout=None: ingest._stop.set() or True  # type: ignore[method-assign]
    assert ingest._watermarks(client, 0) is None  # type: ignore[arg-type]
    assert len(client.answers) == 1  # asked twice: before the stop, and once after

    waited.clear()
    ingest = daemon(end_at_latest=True, broker_timeout_s=3.0)
    with pytest.raises(BlockedError, match="partition 1 assigned, but its offsets cannot be read") as info:
        ingest._watermarks(Client(*[down] * 10), 1)  # type: ignore[arg-type]
    assert exit_code_for(info.value) == EXIT_UNREACHABLE and sum(waited) >= 3.0
