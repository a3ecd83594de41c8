"""A rebalance served inside a poll, right after the worker found another worker's commits
further in the table: the new assignment's first messages, which the same poll returns, land."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from parka.consumer import _ingest
from parka.consumer._ingest import IngestionConsumer, IngestSettings

from reliability.procs import wait_for

from ._ingest_util import produce_events, run_ingest, table_ids

APP_ID = "shared"


def test_the_first_messages_after_a_rebalance_land_when_the_table_had_gone_further(
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The worker holds segments 0-3 of its partition, uncommitted, when another worker with
    its app id (another consumer group, or a worker its group took for dead) lands them. A
    rebalance then takes the partition and gives it back: the revocation's commit finds its
    segments in the table and moves the partition past them, the assignment seeks it to the
    table's offset, and the poll that served both (as librdkafka serves rebalances inside a
    poll) returns the first messages after it, segments 4-7 produced meanwhile. Each of them
    lands once: none is taken for one fetched before the seek."""
    topic = new_topic(partitions=1)
    table = tmp_path / "t"
    assert produce_events(bootstrap, topic, 0, 400, batch=100) == 4
    moves: list[str] = []

    class Rebalanced(_ingest.ParquetConsumer):
        """The daemon's client, with a rebalance served in the poll after segment 3 came."""

        def subscribe(self, topics: list[str], *, on_assign: Any, on_revoke: Any) -> None:
            self.on_assign, self.on_revoke, self.held_last = on_assign, on_revoke, False
            super().subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)

        def _poll_messages(self, timeout: float | None, max_messages: int) -> list[Any]:
            if self.held_last and not moves:
                moves.append("rebalance")
                other = run_ingest(topic, table, bootstrap, "-a", APP_ID, "-g", f"other-{topic}", "--end-at-latest")
                assert other.returncode == 0, other.stderr[-3000:]
                assert sorted(table_ids(table)) == list(range(400))
                assert produce_events(bootstrap, topic, 400, 400, batch=100) == 4  # offsets 4-7
                self.on_revoke(self, [TopicPartition(topic, 0)])
                self.on_assign(self, [TopicPartition(topic, 0)])
            msgs = super()._poll_messages(timeout, max_messages)
            self.held_last = self.held_last or any(m.offset() == 3 for m in msgs)
            if any(m.offset() == 7 for m in msgs):
                moves.append("segment 7 came")
            return msgs

    monkeypatch.setattr(_ingest, "ParquetConsumer", Rebalanced)
    settings = IngestSettings(
        topic=topic,
        table_uri=str(table),
        kafka_conf={"bootstrap.servers": bootstrap, "group.id": f"worker-{topic}"},
        app_id=APP_ID,
        allowed_latency_s=600.0,  # nothing is committed before the rebalance, or before the stop
        compact_min_files=0,
    )
    daemon = IngestionConsumer(settings)
    with caplog.at_level(logging.INFO, logger="parka"):
        worker = threading.Thread(target=daemon.run)
        worker.start()
        try:
            wait_for(lambda: "segment 7 came" in moves, "the daemon to poll segment 7", 120)
        finally:
            daemon.stop()  # commits what is buffered
            worker.join(60)
    assert not worker.is_alive()
    assert moves == ["rebalance", "segment 7 came"]
    assert "partition 0: the table already holds it up to offset 3; continuing there" in caplog.text
    assert "partition 0 assigned; starting at offset 4 (txn version 3)" in caplog.text
    assert sorted(table_ids(table)) == list(range(800))
    assert (daemon.stats.segments, daemon.stats.records) == (4, 400)
