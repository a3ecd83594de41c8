"""The landing session both daemons use (parka.lake.LandingSession), against real delta-rs
tables in temporary folders: app ids, the start with a given schema (evolved to through the
committer, retrying a conflict), resume positions, and dead letters as data files committed
through the engine, whose leftovers the orphan cleanup removes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from parka.lake import (
    Committer,
    FileName,
    LandingSession,
    Refused,
    RsEngine,
    app_txn_id,
    dead_letter_txn_id,
    default_app_id,
    legacy_app_id,
    table_identity,
)

from parka.errors import CommitConflict, ConfigError, SegmentError

from ._tables import SCHEMA, committer, landed


def refused(partition: int, offset: int) -> Refused:
    err = SegmentError("not a parka segment", value=b"{}", headers=[], topic="t", partition=partition, offset=offset)
    return Refused(partition, offset, err, 1_700_000_000_000)


def test_app_and_txn_ids_are_named_in_one_place() -> None:
    assert (app_txn_id("a", 3), dead_letter_txn_id("a", 3), legacy_app_id("gps")) == ("a-3", "a-dlq-3", "parka-gps")
    c = Committer(RsEngine(), table_uri="/nowhere", topic="gps")
    assert (c.identity, c.app_id, c.app_id_given) == ("/nowhere", default_app_id("gps", "/nowhere"), False)
    assert c.app_txn(2) == f"{c.app_id}-2"
    assert Committer(RsEngine(), table_uri="/nowhere", topic="gps", app_id="mine").app_id_given


def test_the_default_app_id_names_the_table_however_its_address_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a = str(tmp_path / "lake" / "a")
    assert table_identity("lake/a") == table_identity(f"{a}/") == table_identity(f"file://{a}") == a
    assert table_identity("S3://bucket/t/") == table_identity("s3://bucket/t") == "s3://bucket/t"
    # Hadoop's names for an S3 URI are one address: Spark reaches the table parka ingest writes by them
    assert table_identity("s3a://bucket/t") == table_identity("s3n://bucket/t/") == "s3://bucket/t"
    assert table_identity("gs://bucket/t") != table_identity("s3://bucket/t")
    assert table_identity("db.t", "local") == "iceberg:local.db.t"
    app = default_app_id("gps", a)
    assert app.startswith("parka-gps-") and len(app) == len("parka-gps-") + 8
    assert app == default_app_id("gps", table_identity("lake/a"))  # stable: no clock, no randomness
    others = {default_app_id("gps", t) for t in (str(tmp_path / "lake" / "b"), "s3://bucket/t", "iceberg:local.db.t")}
    assert app not in others and len(others) == 3


def test_a_table_with_progress_under_the_older_default_keeps_that_app_id(tmp_path: Path) -> None:
    """An upgrade: a table landed under ``parka-<topic>`` continues under it, a new table and a
    given app id are left alone."""
    old = Committer(RsEngine(), table_uri=str(tmp_path / "old"), topic="t", app_id=legacy_app_id("t"))
    old.commit([landed(old, 1, 7, [1])])
    reopened = LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "old"), topic="t"))
    assert reopened.settle_app_id([0, 1, 2]) == "parka-t" == reopened.committer.app_txn(1).removesuffix("-1")
    assert reopened.resume([0, 1]) == {0: None, 1: 7}
    given = LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "old"), topic="t", app_id="mine"))
    assert given.settle_app_id([1]) == "mine"
    fresh = LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "new"), topic="t"))
    assert fresh.settle_app_id([0, 1]) == default_app_id("t", str(tmp_path / "new"))
    # a table with progress under its own default keeps it, even with older progress beside it
    new = fresh.committer
    new.commit([landed(new, 0, 3, [2])])
    legacy = Committer(RsEngine(), table_uri=str(tmp_path / "new"), topic="t", app_id="parka-t")
    legacy.commit([landed(legacy, 1, 9, [3])])
    both = LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "new"), topic="t"))
    assert both.settle_app_id([0, 1]) == new.app_id


def test_a_table_landed_under_another_app_id_is_refused_without_one(tmp_path: Path) -> None:
    """The topic's files in the table, but no progress under the table's default app id or the
    earlier one: it was landed under another app id (or another address); the default would
    land the topic again, so it is refused, naming the flag."""
    mine = Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t", app_id="mine")
    mine.commit([landed(mine, 0, 5, [1])])
    with pytest.raises(ConfigError, match=r"--app-id.*holds files of topic t but no progress under parka-t-"):
        LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t")).settle_app_id([0, 1])
    again = LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="t", app_id="mine"))
    assert again.settle_app_id([0, 1]) == "mine"
    # another topic's files say nothing about this one
    other = LandingSession(Committer(RsEngine(), table_uri=str(tmp_path / "t"), topic="u"))
    assert other.settle_app_id([0]) == default_app_id("u", str(tmp_path / "t"))


def test_a_missing_table_is_created_from_the_given_schema_with_the_reserved_columns(tmp_path: Path) -> None:
    session = LandingSession(committer(tmp_path / "t"))
    assert session.start(SCHEMA) == "given"
    names = DeltaTable(str(tmp_path / "t")).schema().to_arrow().names
    assert names[:2] == ["id", "day"] and all(n.startswith("__parka_") for n in names[2:])
    assert LandingSession(committer(tmp_path / "u")).start() == "first segment"


def test_resume_reads_the_txn_of_each_partition(tmp_path: Path) -> None:
    c = committer(tmp_path / "t")
    c.commit([landed(c, 0, 0, [1]), landed(c, 0, 4, [2])])
    session = LandingSession(committer(tmp_path / "t"))
    assert session.start() == "table"
    assert session.resume([0, 1]) == {0: 4, 1: None}


def test_a_given_schema_the_table_cannot_take_is_refused(tmp_path: Path) -> None:
    c = committer(tmp_path / "t")
    c.commit([landed(c, 0, 0, [1])])
    wrong = pa.schema([("id", pa.string()), ("day", pa.string())])
    with pytest.raises(ConfigError, match="the table cannot take the given schema") as info:
        LandingSession(committer(tmp_path / "t", merge=True)).start(wrong)
    assert "for '--schema'" in str(info.value), info.value
    assert str(info.value).endswith(
        f"a schema the table {tmp_path / 't'} can take; its columns: day: string, id: int64"
    )
    more = pa.schema([*SCHEMA, ("extra", pa.int32())])
    with pytest.raises(ConfigError, match="extra"):  # without merge, a new column is not added
        LandingSession(committer(tmp_path / "t")).start(more)


def test_a_given_schema_is_evolved_to_through_the_committer_and_a_conflict_retried(tmp_path: Path) -> None:
    """The committer's one retry: the table re-read after each conflict, a backoff through its
    ``sleep``, the conflicts and the evolution in its counters, and its give-up."""
    c = committer(tmp_path / "t")
    c.commit([landed(c, 0, 0, [1])])
    slept: list[float] = []
    session = LandingSession(committer(tmp_path / "t", merge=True, sleep=slept.append))
    table = session.committer.table
    assert table is not None
    real_add = table.add_columns
    calls: list[int] = []

    def add_once_conflicting(fields: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            c.commit([landed(c, 0, 1, [2])])  # another writer moves the table first
            raise CommitConflict("a concurrent commit won")
        real_add(fields)

    table.add_columns = add_once_conflicting  # type: ignore[method-assign]
    assert session.start(pa.schema([*SCHEMA, ("extra", pa.int32())])) == "table"
    assert len(calls) == 2 and slept == [0.05]
    stats = session.committer.stats
    assert (stats.conflicts, stats.schema_evolutions, stats.commits) == (1, 1, 0)
    assert "extra" in DeltaTable(str(tmp_path / "t")).schema().to_arrow().names
    assert session.evolve_to(pa.schema([*SCHEMA, ("extra", pa.int32())])) is False  # nothing left to do

    def always_conflicting(fields: Any) -> None:
        calls.append(1)
        raise CommitConflict("a concurrent commit won")

    table.add_columns = always_conflicting  # type: ignore[method-assign]
    with pytest.raises(CommitConflict) as info:
        session.evolve_to(pa.schema([*SCHEMA, ("extra", pa.int32()), ("more", pa.string())]))
    assert str(info.value) == f"gave up after 20 conflicting schema change attempts on {tmp_path / 't'}"
    assert (len(calls), stats.conflicts, stats.schema_evolutions, len(slept)) == (22, 21, 1, 20)


def test_dead_letters_are_one_data_file_per_partition_with_the_dead_letter_txn(tmp_path: Path) -> None:
    dlq = tmp_path / "dlq"
    c = committer(tmp_path / "t", dlq_table_uri=str(dlq))
    c.commit([landed(c, 0, 0, [1])], [refused(0, 1), refused(0, 2), refused(1, 5)])
    table = DeltaTable(str(dlq))
    names = sorted(FileName.parse(p) is not None for p in table.file_uris())
    assert names == [True, True]  # named as data files are, one per Kafka partition
    assert (table.transaction_version("app-dlq-0"), table.transaction_version("app-dlq-1")) == (2, 5)
    rows = sorted((d["partition"], d["offset"]) for d in table.to_pyarrow_table().to_pylist())
    assert rows == [(0, 1), (0, 2), (1, 5)]


def test_a_dead_letter_file_of_a_crashed_attempt_is_removed_once_the_txn_covers_it(tmp_path: Path) -> None:
    dlq = tmp_path / "dlq"
    c = committer(tmp_path / "t", dlq_table_uri=str(dlq))
    c.commit([landed(c, 0, 0, [1])], [refused(0, 1)])
    crashed = dlq / str(FileName.new("t", 0, 1))  # written, never committed, then the retry landed
    crashed.write_bytes(b"PAR1 not committed")
    above = dlq / str(FileName.new("t", 0, 9))  # above the dead-letter txn: may be a live writer's
    above.write_bytes(b"PAR1 not committed")
    assert LandingSession(c).remove_orphans() == 1
    assert not crashed.exists() and above.exists()
