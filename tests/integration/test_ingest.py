"""`parka ingest` on a real broker into real Delta tables: raw files, exactly once, bad input."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from deltalake import DeltaTable
from parka.lake import FileName

from parka.crash import HANG_AT_ENV
from parka.segment import encode_segment

from ._ingest_util import (
    EVENTS,
    EVENTS_AVRO,
    app_id_of,
    assert_no_orphans,
    assert_segments_stored_byte_for_byte,
    data_files_on_disk,
    events,
    last_json,
    log_has,
    message_values,
    produce_events,
    produce_json,
    race_two_workers,
    referenced_files,
    row_group_bytes,
    run_ingest,
    sha256,
    start_ingest,
    table_ids,
    wait_for,
    wait_for_rows,
)


def test_segments_are_stitched_into_one_file_per_partition_and_commit_row_groups_byte_for_byte(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=3)
    segments = produce_events(bootstrap, topic, 0, 3000, batch=100)
    table = tmp_path / "events"
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest"))
    assert (result["segments"], result["records"], result["stitch_fallbacks"]) == (segments, 3000, 0)
    assert result["files"] <= 3 * result["commits"] < segments  # one file per Kafka partition and commit
    assert result["stitched_segments"] == segments  # every segment shares its file with others

    # the files' row groups are the segments' row groups, byte for byte, in offset order per partition
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, table)
    assert all(FileName.parse(p).last is not None for p in referenced_files(table))  # type: ignore[union-attr]
    rows = DeltaTable(str(table)).to_pyarrow_table().select(EVENTS.names).sort_by("id")
    assert rows.cast(EVENTS).equals(events(0, 3000))


def test_data_files_are_the_kafka_values_byte_for_byte(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """With a target file size below a segment's size, each segment is a file of its own: its
    Kafka value, unchanged."""
    topic = new_topic(partitions=3)
    segments = produce_events(bootstrap, topic, 0, 3000, batch=250)
    table = tmp_path / "events"
    result = last_json(
        run_ingest(
            topic, table, bootstrap, "--end-at-latest", "--max-segments-per-commit", "5", "--target-file-size", "1"
        )
    )
    assert result["segments"] == segments
    assert result["records"] == 3000
    assert result["split_segments"] == 0

    values = message_values(bootstrap, topic, segments)
    assert len(values) == segments
    dt = DeltaTable(str(table))
    file_hashes = sorted(sha256(Path(uri.removeprefix("file://")).read_bytes()) for uri in dt.file_uris())
    assert file_hashes == sorted(sha256(m.value()) for m in values)

    rows = dt.to_pyarrow_table().select(EVENTS.names).sort_by("id")
    assert rows.cast(EVENTS).equals(events(0, 3000))
    # Kafka coordinates travel with each file: name and add-action tags
    names = sorted(referenced_files(table))
    assert all(n.startswith(f"{topic}-p") for n in names)
    # advisory Kafka offsets: lag tools see the group at the end of every partition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id_of(topic, table)})
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    highs = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)]
    consumer.close()
    assert [tp.offset for tp in committed] == highs


def test_end_at_latest_twice_adds_nothing_and_a_checkpoint_is_written(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 1000, batch=100)
    table = tmp_path / "t"
    run_ingest(
        topic, table, bootstrap, "--end-at-latest", "--max-segments-per-commit", "3", "--checkpoint-interval", "2"
    )
    again = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest"))
    assert again["records"] == 0
    produce_events(bootstrap, topic, 1000, 500, batch=100)
    run_ingest(topic, table, bootstrap, "--end-at-latest")
    assert sorted(table_ids(table)) == list(range(1500))
    assert list((table / "_delta_log").glob("*.checkpoint.parquet"))


def test_quiet_topic_is_flushed_by_allowed_latency(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 10, batch=100)
    proc = start_ingest(topic, table, bootstrap, "--allowed-latency", "2", log=tmp_path / "log")
    try:
        # one small segment, no further messages: only the latency bound can commit it
        assert wait_for_rows(table, 10, timeout_s=30) == 10
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (tmp_path / "log").read_text()[-3000:]
    assert sorted(table_ids(table)) == list(range(10))


def test_sigterm_commits_what_is_buffered(bootstrap: str, new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic = new_topic()
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 400, batch=100)
    log = tmp_path / "log"
    proc = start_ingest(topic, table, bootstrap, "--allowed-latency", "600", log=log)
    # consumed to the end (the progress line's lag), while the latency bound is far away
    wait_for(lambda: log_has(log, "lag p0:0"), "the worker to consume all 4 segments")
    assert not (table / "_delta_log" / "00000000000000000001.json").exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, (tmp_path / "log").read_text()[-3000:]
    assert sorted(table_ids(table)) == list(range(400))


def test_a_stop_that_hangs_ends_within_the_stop_timeout_and_the_next_run_loses_nothing(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The commit thread blocks for good in the middle of a commit (a hang point: as a native call
    that never returns), so the graceful stop cannot finish: SIGTERM still ends the process
    within --stop-timeout, with exit 143 and a line saying where its main thread was."""
    topic = new_topic()
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 400, batch=100)
    log = tmp_path / "log"
    hang = {HANG_AT_ENV: "after-write"}
    proc = start_ingest(topic, table, bootstrap, "-l", "0.5", "--stop-timeout", "3", log=log, env=hang)
    wait_for(lambda: log_has(log, "hang point after-write: blocking"), "the commit to hang")
    stopping = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143, log.read_text()[-3000:]
    took = time.monotonic() - stopping
    assert 3 <= took < 3 + 10, f"{took:.1f} s"
    text = log.read_text()
    assert "parka ingest: stopping (SIGTERM); at most 3 s, then at once" in text
    assert "stopped at once (the stop took over 3 s) while the main thread was in " in text
    run_ingest(topic, table, bootstrap, "--end-at-latest")  # the next run: every record, once
    assert sorted(table_ids(table)) == list(range(400))


def test_a_second_sigterm_stops_at_once(bootstrap: str, new_topic: Callable[..., str], tmp_path: Path) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 100, batch=100)
    log = tmp_path / "log"
    hang = {HANG_AT_ENV: "after-write"}
    proc = start_ingest(topic, tmp_path / "t", bootstrap, "-l", "0.5", log=log, env=hang)  # a 30 s bound
    wait_for(lambda: log_has(log, "hang point after-write: blocking"), "the commit to hang")
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: log_has(log, "stopping (SIGTERM); at most 30 s"), "the stop to begin")
    stopping = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143, log.read_text()[-3000:]
    assert time.monotonic() - stopping < 10
    assert "stopped at once (a second SIGTERM)" in log.read_text()


@pytest.mark.parametrize(
    ("point", "after"),
    [("before-write", 4), ("mid-write", 4), ("after-write", 4), ("after-delta-commit", 2)],
)
def test_kill_9_then_restart_is_exactly_once_without_orphans(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, point: str, after: int
) -> None:
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 2000, batch=100)
    table = tmp_path / "t"
    crashed = run_ingest(
        topic,
        table,
        bootstrap,
        "--end-at-latest",
        "--max-segments-per-commit",
        "3",
        env={"PARKA_TEST_CRASH_AT": point, "PARKA_TEST_CRASH_AFTER": str(after)},
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    left = data_files_on_disk(table) - referenced_files(table)
    if point == "after-write":
        assert left  # the crash left a file behind
    if point == "mid-write":
        # a half-written temporary file, which the restarted daemon's cleanup must remove
        assert any(name.rsplit("/", 1)[-1].startswith(".") and name.endswith(".tmp") for name in left)
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--max-segments-per-commit", "3")
    ids = table_ids(table)
    assert len(ids) == 2000
    assert sorted(ids) == list(range(2000))
    assert data_files_on_disk(table) == referenced_files(table)


def test_kill_9_between_the_dead_letters_and_the_main_commit_duplicates_nothing(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 300, batch=100)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        plain.produce(topic, value=f'{{"plain": {i}}}'.encode())
    assert plain.flush(30) == 0
    produce_events(bootstrap, topic, 300, 300, batch=100)
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("--end-at-latest", "--dlq-table", str(dlq))
    crashed = run_ingest(
        topic, table, bootstrap, *flags, env={"PARKA_TEST_CRASH_AT": "after-dead-letters"}, check=False
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert DeltaTable(str(dlq)).to_pyarrow_table().num_rows == 3  # in before the crash
    run_ingest(topic, table, bootstrap, *flags)
    assert sorted(table_ids(table)) == list(range(600))
    dead = DeltaTable(str(dlq)).to_pyarrow_table().to_pylist()
    assert sorted(d["value"] for d in dead) == [f'{{"plain": {i}}}'.encode() for i in range(3)]  # once each
    assert data_files_on_disk(table) == referenced_files(table)


def test_an_existing_partitioned_table_keeps_its_partitioning_without_the_flag(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Without --partition-by, parka ingest into a partitioned table takes the table's partition
    columns, rather than writing unpartitioned files, failing its commit and leaving the files."""
    topic = new_topic()
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 300, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--partition-by", "day")
    produce_events(bootstrap, topic, 300, 300, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest")  # no --partition-by: the table's own
    assert sorted(table_ids(table)) == list(range(600))
    files = referenced_files(table)
    assert files and all(f.startswith("day=") for f in files)
    assert data_files_on_disk(table) == files
    other = run_ingest(topic, table, bootstrap, "--end-at-latest", "--partition-by", "device", check=False)
    assert other.returncode == 2  # bad configuration (docs/operating.md); 1 before the exit codes were split
    assert "'--partition-by'" in other.stderr and "the table's own partition columns (day)" in other.stderr


def test_rebalance_with_workers_joining_and_leaving_is_exactly_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=4)
    table = tmp_path / "t"
    # create the table first so that concurrent workers only ever append
    produce_events(bootstrap, topic, 0, 100, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest")
    flags = ("-g", f"grp-{topic}", "--allowed-latency", "1", "--max-segments-per-commit", "4")
    logs = [tmp_path / f"w{i}.log" for i in range(3)]
    a = start_ingest(topic, table, bootstrap, *flags, log=logs[0])
    b = start_ingest(topic, table, bootstrap, *flags, log=logs[1])
    produced = 100
    workers = [a, b]
    try:
        for step in range(12):
            produce_events(bootstrap, topic, produced, 300, batch=30)
            produced += 300
            if step == 3:
                workers.append(start_ingest(topic, table, bootstrap, *flags, log=logs[2]))  # a third joins
            if step == 7:
                a.send_signal(signal.SIGTERM)  # one leaves
                assert a.wait(timeout=60) == 0, logs[0].read_text()[-3000:]
            # the workers keep up between steps: each step's records are in before the next
            assert wait_for_rows(table, produced, timeout_s=90) >= produced
        assert wait_for_rows(table, produced, timeout_s=90) >= produced
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            w.wait(timeout=60)
    ids = table_ids(table)
    assert len(ids) == produced, f"{len(ids) - len(set(ids))} duplicates, {produced - len(set(ids))} missing"
    assert sorted(ids) == list(range(produced))
    # the rebalances really happened: the leaver gave partitions back, the joiner took some
    texts = [log.read_text() for log in logs]
    assert "revoked" in texts[0]
    assert "assigned" in texts[2]
    committers = {DeltaTable(str(table)).history()[i].get("parka.app_id") for i in range(3)}
    assert committers == {app_id_of(topic, table)}


def test_two_tables_of_one_topic_each_get_every_record(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two daemons land one topic into two tables at the same time: each table's default app id
    and consumer group name the table, so each worker holds every partition, and each group's
    Kafka commits name its table."""
    topic = new_topic(partitions=3)
    produce_events(bootstrap, topic, 0, 1500, batch=100)
    tables, logs = [tmp_path / "a", tmp_path / "b"], [tmp_path / "a.log", tmp_path / "b.log"]
    workers = [
        start_ingest(topic, t, bootstrap, "--allowed-latency", "1", log=log)
        for t, log in zip(tables, logs, strict=True)
    ]
    try:
        produce_events(bootstrap, topic, 1500, 1500, batch=100)  # while both run
        for t in tables:
            assert wait_for_rows(t, 3000, timeout_s=90) >= 3000
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w, log in zip(workers, logs, strict=True):
            assert w.wait(timeout=30) == 0, log.read_text()[-3000:]
    for t, log in zip(tables, logs, strict=True):
        assert sorted(table_ids(t)) == list(range(3000))
        text = log.read_text()
        # every partition, once: no rebalance between the two workers (two groups)
        assert [text.count(f"partition {p} assigned") for p in range(3)] == [1, 1, 1]
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id_of(topic, t)})
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        consumer.close()
        assert {tp.metadata for tp in committed} == {f"parka-table:{t}"}


def test_a_group_that_lands_into_another_table_is_refused_at_start(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """One consumer group given to two tables: the second worker stops before it consumes
    anything, exit 2, naming the group, both tables and the flag; nothing is written to its table."""
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 200, batch=50)
    a, b = tmp_path / "a", tmp_path / "b"
    group = f"shared-{topic}"
    run_ingest(topic, a, bootstrap, "--end-at-latest", "-g", group)
    refused = run_ingest(topic, b, bootstrap, "--end-at-latest", "-g", group, check=False)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"consumer group {group} already lands topic {topic} into {a}" in refused.stderr
    assert f"this worker's table is {b}" in refused.stderr
    assert "give --consumer-group" in refused.stderr
    assert not (b / "_delta_log").exists()
    # the same through an app id given to both (the group defaults to it)
    app = f"app-{topic}"
    run_ingest(topic, tmp_path / "c", bootstrap, "--end-at-latest", "--app-id", app)
    assert run_ingest(topic, b, bootstrap, "--end-at-latest", "--app-id", app, check=False).returncode == 2
    # a group of its own: b gets every record, a is as it was
    run_ingest(topic, b, bootstrap, "--end-at-latest", "-g", f"b-{topic}")
    assert sorted(table_ids(b)) == sorted(table_ids(a)) == list(range(200))
    # c, landed under an app id given, run without it: refused rather than landed into again
    again = run_ingest(topic, tmp_path / "c", bootstrap, "--end-at-latest", check=False)
    assert again.returncode == 2, again.stderr[-3000:]
    assert f"holds files of topic {topic} but no progress under {app_id_of(topic, tmp_path / 'c')}" in again.stderr
    assert sorted(table_ids(tmp_path / "c")) == list(range(200))


def test_a_table_landed_under_the_older_default_app_id_continues_where_it_was(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """An upgrade: a table whose progress is under ``parka-<topic>`` (the earlier releases' default
    app id and group) keeps that app id, and continues exactly after its ``txn``."""
    topic = new_topic(partitions=2)
    produce_events(bootstrap, topic, 0, 600, batch=100)
    table = tmp_path / "t"
    legacy = f"parka-{topic}"
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--app-id", legacy)  # as an earlier release did
    produce_events(bootstrap, topic, 600, 400, batch=100)
    upgraded = run_ingest(topic, table, bootstrap, "--end-at-latest", "-v")
    assert last_json(upgraded)["records"] == 400
    assert f"holds its progress under app id {legacy}" in upgraded.stderr
    assert sorted(table_ids(table)) == list(range(1000))  # nothing read again, nothing skipped
    dt = DeltaTable(str(table))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    highs = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(2)]
    consumer.close()
    assert [dt.transaction_version(f"{legacy}-{p}") for p in range(2)] == [h - 1 for h in highs]
    assert all(dt.transaction_version(f"{app_id_of(topic, table)}-{p}") is None for p in range(2))
    assert dt.history(1)[0]["parka.app_id"] == legacy


def test_partitioned_table_raw_when_aligned_split_when_not(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    aligned, mixed = new_topic(), new_topic()
    produce_events(bootstrap, aligned, 0, 600, batch=100, extra={"columnar.partition.by": "day"})
    produce_events(bootstrap, mixed, 0, 600, batch=100)
    t1, t2 = tmp_path / "aligned", tmp_path / "mixed"
    r1 = last_json(run_ingest(aligned, t1, bootstrap, "--end-at-latest", "--partition-by", "day"))
    r2 = last_json(run_ingest(mixed, t2, bootstrap, "--end-at-latest", "--partition-by", "day"))
    assert r1["split_segments"] == 0
    assert r2["split_segments"] > 0
    for t in (t1, t2):
        dt = DeltaTable(str(t))
        assert dt.metadata().partition_columns == ["day"]
        rows = dt.to_pyarrow_table().select(EVENTS.names).sort_by("id")
        assert rows.cast(EVENTS).equals(events(0, 600))
        assert {p.split("/")[0] for p in referenced_files(t)} == {"day=2024-01-01", "day=2024-01-02", "day=2024-01-03"}
    # aligned segments stayed raw: stitched per day, every row group is a Kafka message value's
    values = sorted(g for m in message_values(bootstrap, aligned, r1["segments"]) for g in row_group_bytes(m.value()))
    assert sorted(g for f in referenced_files(t1) for g in row_group_bytes((t1 / f).read_bytes())) == values
    assert len(referenced_files(t1)) == 3 < r1["segments"]


def _send(bootstrap: str, topic: str, items: list[tuple[bytes, list[tuple[str, bytes]] | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value, headers in items:
        producer.produce(topic, value=value, headers=headers)
    assert producer.flush(30) == 0


def _segment(table: pa.Table) -> tuple[bytes, list[tuple[str, bytes]]]:
    seg = encode_segment(table, codec="zstd", fingerprint="0" * 16)
    return seg.value, seg.headers


def test_bad_messages_go_to_the_dead_letter_table_and_nothing_is_lost(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    good1, good2, good3 = (_segment(events(i * 10, 10)) for i in range(3))
    corrupt = (b"PAR1 garbage", good1[1])
    plain = (b'{"id": 1}', None)
    wrong_type = _segment(events(100, 5).set_column(0, "id", pa.array([str(i) for i in range(5)])))
    new_column = _segment(events(200, 5).append_column("extra", pa.array([1] * 5, pa.int32())))
    unreadable = (b"PAR1 garbage", [(k, v) for k, v in good1[1] if k != "parka.crc32"])  # another producer's
    _send(bootstrap, topic, [good1, corrupt, good2, plain, wrong_type, new_column, good3, unreadable])
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest", "--dlq-table", str(dlq)))
    assert result["dead_letters"] == 5
    assert sorted(table_ids(table)) == list(range(30))
    dead = DeltaTable(str(dlq)).to_pyarrow_table().sort_by("offset").to_pylist()
    assert [d["offset"] for d in dead] == [1, 3, 4, 5, 7]
    assert [d["value"] for d in dead] == [corrupt[0], plain[0], wrong_type[0], new_column[0], unreadable[0]]
    assert "but 'parka.crc32' says" in dead[0]["error"]  # a good segment's headers on other bytes
    assert "not a parka segment" in dead[1]["error"]
    assert "column 'id' is string in the segment but int64 in the table" in dead[2]["error"]
    assert "--schema-evolution merge" in dead[3]["error"]
    assert "not a readable Parquet file" in dead[4]["error"]
    assert all(d["topic"] == topic and d["partition"] == 0 for d in dead)
    # a second run re-reads nothing and duplicates no dead letter
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--dlq-table", str(dlq))
    assert DeltaTable(str(dlq)).to_pyarrow_table().num_rows == 5


def test_without_dead_letter_table_a_bad_message_stops_with_progress_committed(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    _send(bootstrap, topic, [_segment(events(0, 10)), (b"not parquet", None), _segment(events(10, 10))])
    table = tmp_path / "t"
    proc = run_ingest(topic, table, bootstrap, "--end-at-latest", check=False)
    assert proc.returncode == 1
    assert f"not a parka segment (no parka.format header) at {topic}[0]@1" in proc.stderr
    assert sorted(table_ids(table)) == list(range(10))
    # the same stop again: still nothing after the bad message, nothing duplicated
    assert run_ingest(topic, table, bootstrap, "--end-at-latest", check=False).returncode == 1
    assert sorted(table_ids(table)) == list(range(10))


def test_schema_evolution_merge_adds_nullable_columns(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    extra = events(10, 10).append_column("extra", pa.array(list(range(10)), pa.int32()))
    _send(bootstrap, topic, [_segment(events(0, 10)), _segment(extra)])
    table = tmp_path / "t"
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest", "--schema-evolution", "merge"))
    assert result["schema_evolutions"] == 1
    rows = DeltaTable(str(table)).to_pyarrow_table().sort_by("id")
    assert rows["extra"].to_pylist() == [None] * 10 + list(range(10))


def test_a_schema_delta_cannot_store_is_a_clear_error(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    odd = pa.table({"id": [1, 2], "t": pa.array([1, 2], pa.time64("us"))})
    _send(bootstrap, topic, [_segment(odd)])
    proc = run_ingest(topic, tmp_path / "t", bootstrap, "--end-at-latest", check=False)
    assert proc.returncode == 1
    assert "field 't'" in proc.stderr
    assert "SchemaMismatchError" in proc.stderr


def test_every_flag_can_come_from_the_environment(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 50, batch=10)
    table = tmp_path / "t"
    env = {
        "PARKA_TOPIC": topic,
        "PARKA_TABLE_URI": str(table),
        "PARKA_KAFKA": bootstrap,
        "PARKA_END_AT_LATEST": "1",
        "PARKA_APP_ID": "from-env",
        "PARKA_QUIET": "1",
    }
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "parka.cli", "ingest"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(table_ids(table)) == list(range(50))
    assert DeltaTable(str(table)).transaction_version("from-env-0") is not None
    help_text = subprocess.run(
        [sys.executable, "-m", "parka.cli", "ingest", "--help"], capture_output=True, text=True
    ).stdout
    for var in ("PARKA_KAFKA", "PARKA_ALLOWED_LATENCY", "PARKA_DLQ_TABLE", "PARKA_SEEK_OFFSETS"):
        assert var in help_text


def test_two_workers_racing_on_the_same_partitions_commit_each_record_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    # Different consumer groups, same app id: both workers own every partition and race on the
    # same offsets. Only the txn check stands between them and duplicates.
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 100, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest", "-a", "racers")  # the table exists
    flags = ("-a", "racers", "--max-segments-per-commit", "3", "--allowed-latency", "0.2")
    # Both wait at the same offsets before any new record exists, so both ingest all of them:
    # every offset is committed by one and found already in the table by the other.
    logs = [tmp_path / "r1.log", tmp_path / "r2.log"]

    def produce() -> int:
        produce_events(bootstrap, topic, 100, 4000, batch=40)
        return 4100

    race_two_workers(topic, table, bootstrap, flags, logs, produce)
    ids = table_ids(table)
    assert len(ids) == 4100, f"{len(ids) - len(set(ids))} duplicates, {4100 - len(set(ids))} missing"
    assert sorted(ids) == list(range(4100))
    assert_no_orphans(table)  # both workers compact too, racing: what they removed, the log names


def test_seek_offsets_start_a_new_table_mid_topic_and_json_logs(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 1000, batch=100)  # offsets 0..9, 100 ids each
    table = tmp_path / "t"
    import json
    import os
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "parka.cli",
        "ingest",
        topic,
        str(table),
        "-k",
        bootstrap,
        "--end-at-latest",
        "--seek-offsets",
        '{"0": 7}',
        "--log-format",
        "json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert sorted(table_ids(table)) == list(range(700, 1000))
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert any("starting at offset 7" in rec["msg"] for rec in lines)
    assert all({"ts", "level", "logger", "msg"} <= rec.keys() for rec in lines)
    # once the table has a txn for the partition, it wins over --seek-offsets
    produce_events(bootstrap, topic, 1000, 100, batch=100)
    run_ingest(topic, table, bootstrap, "--end-at-latest", "--seek-offsets", '{"0": 0}')
    assert sorted(table_ids(table)) == list(range(700, 1100))


def test_a_worker_taking_over_a_crashed_partition_removes_its_orphans_while_running(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Orphan cleanup runs when a worker takes over a partition, not only at start and stop, so
    the worker that takes over a crashed worker's partition removes its orphans."""
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 100, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest")
    flags = ("-g", f"grp-{topic}", "--allowed-latency", "0.5", "--max-segments-per-commit", "2")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    crash = {"PARKA_TEST_CRASH_AT": "after-write", "PARKA_TEST_CRASH_AFTER": "5"}
    a = start_ingest(topic, table, bootstrap, *flags, log=logs[0], env=crash)
    wait_for(lambda: log_has(logs[0], "assigned"), "worker a to be assigned")
    b = start_ingest(topic, table, bootstrap, *flags, "--checkpoint-interval", "1", log=logs[1])
    try:
        wait_for(lambda: log_has(logs[1], "assigned") and log_has(logs[0], "revoked"), "the group to share")
        produce_events(bootstrap, topic, 100, 1000, batch=50)
        assert a.wait(timeout=60) == -signal.SIGKILL, logs[0].read_text()[-3000:]
        wait_for(lambda: bool(data_files_on_disk(table) - referenced_files(table)), "the crash's orphans", 5)
        # b takes a's partition over, commits past the orphans' offsets and removes them, running
        wait_for(
            lambda: len(table_ids(table)) >= 1100 and data_files_on_disk(table) == referenced_files(table),
            "all records in and no orphan left",
            120,
        )
        assert b.poll() is None, logs[1].read_text()[-3000:]
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        assert b.wait(timeout=60) == 0, logs[1].read_text()[-3000:]
    assert sorted(table_ids(table)) == list(range(1100))


@pytest.mark.parametrize("buffered", ["segments", "json-records"])
def test_kill_9_during_a_rebalance_is_exactly_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, buffered: str
) -> None:
    """Worker a buffers segments (or JSON row records, held undecoded: --value-format json) and
    is killed when its partitions are revoked; worker b lands everything once."""
    topic = new_topic(partitions=2)
    table = tmp_path / "t"
    produce_events(bootstrap, topic, 0, 100, batch=50)
    run_ingest(topic, table, bootstrap, "--end-at-latest")
    flags: tuple[str, ...] = ("-g", f"grp-{topic}", "--allowed-latency", "30", "--max-segments-per-commit", "1000")
    if buffered == "json-records":
        schema = tmp_path / "event.avsc"
        schema.write_text(json.dumps(EVENTS_AVRO))
        flags += ("--value-format", "json", "--value-schema", str(schema))
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    a = start_ingest(topic, table, bootstrap, *flags, log=logs[0], env={"PARKA_TEST_CRASH_AT": "on-revoke"})
    wait_for(lambda: log_has(logs[0], "partition 1 assigned"), "worker a to own both partitions")
    if buffered == "json-records":
        produce_json(bootstrap, topic, 100, 500)
    else:
        produce_events(bootstrap, topic, 100, 500, batch=50)
    wait_for(lambda: log_has(logs[0], "lag p0:0 p1:0"), "worker a to buffer every segment")
    b = start_ingest(topic, table, bootstrap, *flags, "--allowed-latency", "0.5", log=logs[1])
    try:
        # b joins: a is told its partitions are revoked, and dies there, its buffer uncommitted
        assert a.wait(timeout=60) == -signal.SIGKILL, logs[0].read_text()[-3000:]
        assert log_has(logs[0], "crash point on-revoke")
        produce_events(bootstrap, topic, 600, 200, batch=50)
        assert wait_for_rows(table, 800, timeout_s=120) >= 800
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        assert b.wait(timeout=60) == 0, logs[1].read_text()[-3000:]
    ids = table_ids(table)
    assert sorted(ids) == list(range(800)), f"{len(ids) - len(set(ids))} duplicates"
    assert data_files_on_disk(table) == referenced_files(table)


def test_segments_with_garbled_headers_go_to_the_dead_letter_table(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Found by the fault suite: a segment whose parka headers do not parse (a newer envelope
    version, a malformed record count) stopped `parka ingest --dlq-table` with exit 1 instead of
    going to the dead-letter table, so ingestion could never pass it."""
    topic = new_topic()
    good1, good2 = _segment(events(0, 10)), _segment(events(10, 10))
    newer = (good1[0], [(k, b"2" if k == "parka.version" else v) for k, v in good1[1]])
    garbled = (good1[0], [(k, b"many" if k == "parka.records" else v) for k, v in good1[1]])
    _send(bootstrap, topic, [good1, newer, garbled, good2])
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest", "--dlq-table", str(dlq)))
    assert result["dead_letters"] == 2
    assert sorted(table_ids(table)) == list(range(20))
    dead = DeltaTable(str(dlq)).to_pyarrow_table().sort_by("offset").to_pylist()
    assert [(d["topic"], d["partition"], d["offset"]) for d in dead] == [(topic, 0, 1), (topic, 0, 2)]
    assert dead[0]["error"].startswith("SegmentDecodeError: segment envelope version 2 is newer")
    assert dead[1]["error"].startswith("SegmentDecodeError: missing or malformed 'parka.records' header")
    assert [d["value"] for d in dead] == [good1[0], good1[0]]
    assert {"key": "parka.version", "value": b"2"} in dead[0]["headers"]
