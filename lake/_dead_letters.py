"""Dead letters (messages a table cannot take) into the dead-letter table, through the same
table-format engine as the data (:class:`parka.lake.LogEngine`): delta-rs for ``parka
ingest``, delta-spark for Spark raw mode's default, and the next engine without a change here.

Exactly once, like the data: each Kafka partition's refused messages are one Parquet data file
named as a data file is (``<topic>-p<partition>-o<first>-to<last>-<id>.parquet``), and one
commit adds the files with, per partition, ``txn`` ``<app_id>-dlq-<partition>`` = its highest
refused offset. A message at or below that ``txn`` is in already (an earlier attempt that
crashed after its commit) and is skipped. A crash before the commit leaves files no log entry
names, at or below the ``txn`` once a later attempt commits: the orphan cleanup removes them
(:meth:`parka.lake.LandingSession.remove_orphans`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ._files import DLQ_SCHEMA, _tags
from ._log import DataFile, LogEngine, TableLog
from ._plan import FileName, Refused, dead_letter_txn_id
from ._stats import data_file_stats
from ._storage import make_durable, write_data_file

__all__ = ["append_dead_letters", "dead_letter_row"]

log = logging.getLogger("parka.ingest")


def append_dead_letters(
    engine: LogEngine,
    dlq_table_uri: str,
    *,
    topic: str,
    app_id: str,
    refused: Sequence[Refused],
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Commit the ``refused`` messages not yet in the dead-letter table (its ``txn`` per
    partition says which are) through ``engine``, each as a row of
    :data:`parka.lake.DLQ_SCHEMA` (:func:`dead_letter_row`); returns how many were committed. The
    table is created (unpartitioned) when missing.

    Raises:
        CommitConflict: another commit won, or another writer created the table first: re-read
            and retry (the ``txn`` makes a retry skip what landed).
        SchemaMismatchError, CommitError: the write or the commit failed.
    """
    options = dict(storage_options or {})
    now = pa.scalar(time.time_ns() // 1000, pa.timestamp("us", tz="UTC")).as_py()
    dead = [dead_letter_row(r, app_id, now) for r in refused]
    dlq: TableLog | None = engine.open(dlq_table_uri, options)
    by_partition: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for partition, offset, row in dead:
        by_partition.setdefault(partition, []).append((offset, row))
    todo: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for partition, rows in by_partition.items():
        done = dlq.txn_version(dead_letter_txn_id(app_id, partition)) if dlq is not None else None
        fresh = sorted((r for r in rows if done is None or r[0] > done), key=lambda r: r[0])
        if fresh:
            todo[partition] = fresh
    if not todo:
        return 0
    if dlq is None:
        dlq = engine.create(dlq_table_uri, DLQ_SCHEMA, partition_by=(), storage_options=options)
    files = [_write(dlq.uri, topic, partition, rows, options) for partition, rows in sorted(todo.items())]
    make_durable(dlq.uri, options)
    dlq.commit_add_files(
        files,
        txns={dead_letter_txn_id(app_id, p): rows[-1][0] for p, rows in todo.items()},
        commit_info={"parka.app_id": app_id, "parka.topic": topic, "parka.dead_letters": True},
    )
    return sum(len(rows) for rows in todo.values())


def _write(
    uri: str, topic: str, partition: int, rows: Sequence[tuple[int, dict[str, Any]]], options: Mapping[str, str]
) -> DataFile:
    """One Kafka partition's dead letters as one Parquet data file under the table root."""
    first, last = rows[0][0], rows[-1][0]
    name = str(FileName.new(topic, partition, first, last=last if last != first else None))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([r for _, r in rows], schema=DLQ_SCHEMA), sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    size = write_data_file(uri, name, data, options)
    tags = _tags(topic, partition, first, last if last != first else None)
    return DataFile(path=name, size=size, stats=data_file_stats(data, DLQ_SCHEMA), tags=tags)


def dead_letter_row(r: Refused, app_id: str, now: Any) -> tuple[int, int, dict[str, Any]]:
    """A refused message as ``(partition, offset, row)`` of :data:`parka.lake.DLQ_SCHEMA`."""
    err = r.error
    return (
        r.partition,
        r.offset,
        {
            "topic": err.topic,
            "partition": r.partition,
            "offset": r.offset,
            "error": f"{type(err).__name__}: {err}",
            "value": err.value,
            "headers": [{"key": k, "value": v} for k, v in (err.headers or [])],
            "kafka_timestamp_ms": r.timestamp_ms,
            "ingested_at": now,
            "app_id": app_id,
        },
    )
