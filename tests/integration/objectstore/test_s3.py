"""`parka ingest` into a real S3-compatible server (s3proxy, filesystem backend): data files and
the Delta log through the same store and credentials, concurrent commits safe by default."""

from __future__ import annotations

import json
import multiprocessing
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import obstore as obs
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import TableNotFoundError
from parka.lake import DataFile, RsEngine, logged_files, object_store, optimize_table
from parka.lake import _orphans as lake_orphans
from parka.lake._storage import list_log, read_file, write_data_file
from parka.lake.delta._logscan import live_adds
from parka.lake.delta._rs import commit_row_deletions

from parka.config import storage_options_for
from parka.errors import CommitConflict
from reliability import forkserver

from ...unit._tables import committer, landed
from .._ingest_util import (
    assert_segments_stored_byte_for_byte,
    log_has,
    produce_events,
    referenced_files,
    run_ingest,
    start_ingest,
    table_ids,
    wait_for,
)
from .._objectstores import ObjectStoreServer

pytestmark = pytest.mark.integration


def _flags(options: dict[str, str]) -> list[str]:
    return [arg for key, value in options.items() for arg in ("--storage-option", f"{key}={value}")]


def _rows(uri: str, options: dict[str, str]) -> int:
    try:
        return len(table_ids(uri, options))
    except TableNotFoundError:
        return 0


def test_two_workers_into_s3_store_each_record_once_byte_for_byte(
    bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    uri = s3proxy.table_uri("two-workers")
    options = s3proxy.storage_options
    segments = produce_events(bootstrap, topic, 0, 200, batch=50)
    run_ingest(topic, uri, bootstrap, "--end-at-latest", "-a", "s3app", *_flags(options))  # creates the table
    # Same app id, same group: the workers split the partitions and commit to one table at once,
    # so their commits race for table versions (each loser refreshes and commits again).
    # (no background compaction: the segments are checked byte for byte in their own files below,
    # and the compaction at the end is parka optimize's)
    flags = ("-a", "s3app", "-g", f"g-{topic}", "--allowed-latency", "0.2", "--max-segments-per-commit", "2")
    flags += ("--compact-min-files", "0")
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [start_ingest(topic, uri, bootstrap, *flags, *_flags(options), log=log) for log in logs]
    try:
        for log in logs:
            wait_for(lambda log=log: log_has(log, "assigned; starting at offset"), f"{log.name} to get a partition")
        segments += produce_events(bootstrap, topic, 200, 1000, batch=40)
        wait_for(lambda: _rows(uri, options) >= 1200, "1200 rows in the S3 table", timeout_s=120)
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc, log in zip(workers, logs, strict=True):
            assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
    for log in logs:  # both workers committed (their closing JSON line), so commits really raced
        closing = json.loads([ln for ln in log.read_text().splitlines() if ln.startswith("{")][-1])
        assert closing["commits"] >= 1, log.read_text()[-3000:]
    ids = table_ids(uri, options)  # read back by deltalake through the same options
    assert len(ids) == 1200, f"{len(ids) - len(set(ids))} duplicates, {1200 - len(set(ids))} missing"
    assert sorted(ids) == list(range(1200))
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, uri, options)
    # The server's own files: the data files are objects of the same store as the log, nothing else.
    on_disk = s3proxy.data_dir() / uri.removeprefix("s3://")
    stored = {str(p.relative_to(on_disk)) for p in on_disk.rglob("*.parquet") if "_delta_log" not in p.parts}
    assert stored == referenced_files(uri, options)
    assert any(p.name.endswith(".json") for p in (on_disk / "_delta_log").iterdir())

    # Compaction reads footers (ranged GETs), reads, writes and commits through the same store;
    # VACUUM with no retention deletes the replaced objects.
    before = referenced_files(uri, options)
    result = optimize_table(uri, storage_options=options, vacuum_retention_hours=0, allow_short_retention=True)
    assert (result.files_removed, result.files_added, result.vacuumed) == (len(before), 1, len(before))  # unpartitioned
    assert sorted(table_ids(uri, options)) == list(range(1200))
    after = {str(p.relative_to(on_disk)) for p in on_disk.rglob("*.parquet") if "_delta_log" not in p.parts}
    assert after == referenced_files(uri, options) and not after & before


ROUNDS = 3


def _racer(uri: str, options: dict[str, str], me: int, barrier: Any, results: Any) -> None:
    """One writer, ROUNDS times: read the table version, write a data file, wait for the other
    writer, commit at exactly the version read + 1 (no retry)."""
    log = RsEngine().open(uri, options)
    assert log is not None
    data = b"not parquet: never read, only referenced"
    for round_ in range(1, ROUNDS + 1):
        read_version = log.refresh()
        name = f"r{round_}-{me}.bin"
        write_data_file(uri, name, data, options)
        barrier.wait(timeout=60)  # both have read the same version and are ready to commit
        try:
            results.put((round_, name, "won", log.commit_add_files([DataFile(name, len(data), "{}")], txns={})))
        except CommitConflict:
            results.put((round_, name, "lost", read_version + 1))
        barrier.wait(timeout=60)  # both are done before either reads the next version


def test_two_writers_racing_for_one_version_exactly_one_wins(s3proxy: ObjectStoreServer) -> None:
    uri = s3proxy.table_uri("race")
    options = storage_options_for(uri, s3proxy.storage_options)  # what parka gives delta-rs
    assert options["aws_conditional_put"] == "etag"
    write_deltalake(uri, pa.table({"x": pa.array([], pa.int64())}), storage_options=options)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    racers = [ctx.Process(target=_racer, args=(uri, options, me, barrier, results)) for me in range(2)]
    for racer in racers:
        racer.start()
    try:
        outcomes = sorted(results.get(timeout=120) for _ in range(2 * ROUNDS))
    finally:
        for racer in racers:
            racer.join(timeout=60)
    assert [racer.exitcode for racer in racers] == [0, 0]
    winners = set()
    for round_ in range(1, ROUNDS + 1):
        mine = [o for o in outcomes if o[0] == round_]
        assert sorted(o[2] for o in mine) == ["lost", "won"], mine  # exactly one commit per race
        assert {o[3] for o in mine} == {round_}, mine  # both went for the same version
        winners |= {o[1] for o in mine if o[2] == "won"}
    table = DeltaTable(uri, storage_options=options)
    assert table.version() == ROUNDS  # the losers wrote nothing to the log
    assert referenced_files(uri, options) == winners


def test_an_unsafe_s3_configuration_is_refused_naming_the_option(s3proxy: ObjectStoreServer) -> None:
    uri = s3proxy.table_uri("unsafe")
    # (the other refusals: tests/unit/test_delta.py)
    cmd = [sys.executable, "-m", "parka.cli", "ingest", "topic", uri, "-k", "127.0.0.1:1"]
    cmd += [*_flags(s3proxy.storage_options), "--storage-option", "aws_s3_allow_unsafe_rename=true"]
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "'aws_s3_allow_unsafe_rename'" in proc.stderr
    assert s3proxy.storage_options["aws_secret_access_key"] not in proc.stderr + proc.stdout


def test_a_file_larger_than_one_put_goes_up_from_its_parts_whole_and_in_order(s3proxy: ObjectStoreServer) -> None:
    # write_data_file hands obstore the parts of a file above one 5 MiB chunk (no join): the
    # object must be the parts, in order (and a small file, which goes up joined, too)
    uri = s3proxy.table_uri("parts")
    parts = [bytes([i]) * (700_000 + i) for i in range(10)]  # 7 MB in uneven parts
    small = [b"PAR1", b"x" * 1000, b"PAR1"]
    assert write_data_file(uri, "big.parquet", parts, s3proxy.storage_options) == sum(map(len, parts))
    assert write_data_file(uri, "small.parquet", small, s3proxy.storage_options) == 1008
    assert read_file(uri, "big.parquet", s3proxy.storage_options) == b"".join(parts)
    assert read_file(uri, "small.parquet", s3proxy.storage_options) == b"".join(small)


def test_the_log_is_listed_from_the_last_checkpoint_on_and_reads_the_same(s3proxy: ObjectStoreServer) -> None:
    """The orphan cleanup's reading of the log (``logged_files``) lists ``_delta_log/`` from the
    checkpoint ``_last_checkpoint`` names (a LIST with a start offset), and finds what a reading
    of every file finds."""
    uri = s3proxy.table_uri("listing")
    options = storage_options_for(uri, s3proxy.storage_options)
    for i in range(6):
        write_deltalake(uri, pa.table({"x": [i]}), mode="append", storage_options=options)
    DeltaTable(uri, storage_options=options).create_checkpoint()  # version 5
    for i in range(6, 8):
        write_deltalake(uri, pa.table({"x": [i]}), mode="append", storage_options=options)

    every = list_log(uri, options)
    later = list_log(uri, options, from_version=5)
    assert "00000000000000000000.json" in every and "00000000000000000005.checkpoint.parquet" in every
    versions = [f"{v:020d}.json" for v in (5, 6, 7)]
    assert later == sorted([*versions, "00000000000000000005.checkpoint.parquet", "_last_checkpoint"])
    assert logged_files(uri, options) == referenced_files(uri, options)  # appends only: every file is live


def test_between_listings_the_orphan_cleanup_looks_up_its_pending_files_by_name(
    s3proxy: ObjectStoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On S3 the periodic cleanup finds the files the last listing left pending with a HEAD each,
    and deletes those the ``txn`` now covers: no LIST of the table. One another worker deleted
    meanwhile is not counted."""
    uri = s3proxy.table_uri("pending")
    c = committer(uri, storage_options=storage_options_for(uri, s3proxy.storage_options), checkpoint_interval=1)  # type: ignore[arg-type]
    c.commit([landed(c, 0, 0, [1])])
    crashed, gone = landed(c, 0, 1, [2]), landed(c, 1, 0, [9])  # a crashed worker's, above the txn
    assert c.remove_orphans() == 0  # the listing of an assignment: both pending
    store = object_store(uri, c.storage_options)
    obs.delete(store, gone.files[0].path)  # another worker's cleanup, or VACUUM, got there first
    monkeypatch.setattr(lake_orphans, "list_files", lambda *a, **k: pytest.fail("the table was listed"))
    c.commit([landed(c, 0, 1, [2]), landed(c, 1, 0, [9])])  # the periodic cleanup after it: by name
    assert c.stats.orphans_removed == 1
    left = {o["path"] for page in obs.list(store) for o in page}
    assert crashed.files[0].path not in left
    assert sorted(table_ids(uri, c.storage_options)) == [1, 2, 9]


def test_rows_deleted_by_vector_in_s3_and_a_second_commit_of_the_version_loses(s3proxy: ObjectStoreServer) -> None:
    """parka's own Delta commit (rows deleted by deletion vector, ``lake/delta/_dv_commit.py``)
    through the store: its vector file and its log entry go up with the table's credentials, the
    log entry by a conditional PUT, so a second writer of the same version loses and the first
    one's entry stays."""
    uri = s3proxy.table_uri("vectors")
    options = storage_options_for(uri, s3proxy.storage_options)
    keys = pa.table({"k": pa.array(range(20_000), pa.int64())})
    write_deltalake(uri, keys, storage_options=options, configuration={"delta.enableDeletionVectors": "true"})
    (path,) = live_adds(uri, options)
    first, second = DeltaTable(uri, storage_options=options), DeltaTable(uri, storage_options=options)
    assert commit_row_deletions(first, {path: range(0, 20_000, 2)}, storage_options=options) == 1
    vector = live_adds(uri, options)[path]["deletionVector"]
    assert vector["storageType"] == "u" and vector["cardinality"] == 10_000  # a file of its own
    entry = read_file(uri, f"_delta_log/{1:020d}.json", options)
    with pytest.raises(CommitConflict):
        commit_row_deletions(second, {path: [1]}, storage_options=options)
    assert read_file(uri, f"_delta_log/{1:020d}.json", options) == entry
    reader = QueryBuilder().register("t", DeltaTable(uri, storage_options=options)).execute("select k from t")
    assert sorted(pa.table(reader.read_all()).column("k").to_pylist()) == list(range(1, 20_000, 2))
