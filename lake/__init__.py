"""Landing raw segments in tables: parka's one implementation of "these Kafka segments are now
in the table, exactly once", whichever daemon reads Kafka (``parka ingest`` in
:mod:`parka.consumer`, Spark raw mode in :mod:`parka.spark_ext`) and whichever engine commits.

* Files: :func:`read_segment` and :func:`check_segment` (headers, CRC, footer schema against
  the table, its table partition), :func:`write_segments` (stitched data files, statistics),
  :func:`make_durable`; :func:`read_file` and :func:`object_store` (the client parka's files go
  through on an object store).
* The exactly-once commit: :class:`Committer` over a :class:`TableLog` (the table-format
  interface), fed :class:`LandedSegment` and :class:`Refused` (dead letters).
* Engines, one wing per table format beside the format-neutral modules: :mod:`parka.lake.delta`
  (:class:`RsEngine`, delta-rs in this process; the pure Delta rules delta-spark's engine in
  ``parka.spark_ext`` builds on) and :mod:`parka.lake.iceberg`
  (:class:`IcebergEngine`, Apache Iceberg through pyiceberg, with the ``iceberg`` extra;
  imported when first used). Each implements :class:`LogEngine`.
* :class:`LandingSession`: what every daemon does around the committer (orphan cleanup, the
  table created, positions resumed from its ``txn``, a given schema evolved to, dead letters,
  app ids).
* Table maintenance (:func:`optimize_table`, ``parka optimize``; background compaction,
  :func:`compact_table` by its policy, :class:`CompactionPolicy`) and the defaults the daemons'
  flags take (:data:`DEFAULT_TARGET_FILE_SIZE`, :data:`DEFAULT_CHECKPOINT_INTERVAL`, ...). The
  daemons' runtime around it (``parka optimize``'s command line, the probe before consuming) is
  :mod:`parka.ops`'.

Errors are :mod:`parka.errors`' (``CommitError``, ``CommitConflict``, ``SchemaMismatchError``).
"""

# ruff: noqa: E402  (the extra is checked before anything imports deltalake, obstore or fastparquet)
from parka.extras import require

require(("deltalake", "fastparquet", "obstore"), "lake", "parka.lake (parka ingest, parka optimize, Spark raw mode)")

from typing import TYPE_CHECKING

from ._cdc import CDC_FORMATS, Debezium
from ._committer import DEFAULT_CHECKPOINT_INTERVAL, MAX_COMMIT_ATTEMPTS, CommitResult, CommitStats, Committer
from ._compaction import (
    DEFAULT_COMPACT_MAX_REWRITES,
    DEFAULT_COMPACT_MIN_FILES,
    CommitTurn,
    CompactedName,
    CompactionPolicy,
    OnRewrite,
    OptimizeResult,
)
from ._files import (
    DEFAULT_TARGET_FILE_SIZE,
    DLQ_SCHEMA,
    CheckedSegment,
    SegmentRead,
    check_keyed,
    check_segment,
    is_tombstone,
    read_segment,
    segment_of_rows,
    tombstone_refusal,
    unwrap_segment,
    write_segments,
)
from ._landing import LandingSession, given_schema_refused
from ._log import FILE_TAGS_KEY, DataFile, LogEngine, TableLog
from ._plan import (
    CommitPolicy,
    FileName,
    LandedSegment,
    Refused,
    Tombstone,
    app_txn_id,
    check_partitioning,
    dead_letter_txn_id,
    default_app_id,
    fit_segment,
    legacy_app_id,
    table_identity,
)
from ._stats import DEFAULT_STATS, StatsConfig
from ._stitch import row_groups
from ._storage import list_log, make_durable, object_store, read_file
from .delta import (
    DEFAULT_TABLE_RETENTION_S,
    ENABLE_DELETION_VECTORS,
    Retention,
    RsEngine,
    RsTableLog,
    commits_per_s,
    compact_table,
    logged_files,
    optimize_table,
    retention_properties,
    table_retention,
    vacuum_by_table_retention,
)

if TYPE_CHECKING:
    from .iceberg import IcebergEngine, IcebergTableLog, compact_iceberg, optimize_iceberg

_ICEBERG = ("IcebergEngine", "IcebergTableLog", "compact_iceberg", "optimize_iceberg")


def __getattr__(name: str) -> object:
    """The Iceberg wing's names, imported when first asked for (it needs the ``iceberg`` extra)."""
    if name in _ICEBERG:
        from . import iceberg

        return getattr(iceberg, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CDC_FORMATS",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "ENABLE_DELETION_VECTORS",
    "DEFAULT_COMPACT_MAX_REWRITES",
    "DEFAULT_COMPACT_MIN_FILES",
    "DEFAULT_STATS",
    "DEFAULT_TABLE_RETENTION_S",
    "DEFAULT_TARGET_FILE_SIZE",
    "DLQ_SCHEMA",
    "FILE_TAGS_KEY",
    "MAX_COMMIT_ATTEMPTS",
    "CheckedSegment",
    "SegmentRead",
    "CommitPolicy",
    "CommitResult",
    "CommitStats",
    "Committer",
    "CompactedName",
    "CommitTurn",
    "CompactionPolicy",
    "DataFile",
    "Debezium",
    "FileName",
    "IcebergEngine",
    "IcebergTableLog",
    "LandedSegment",
    "LandingSession",
    "LogEngine",
    "OnRewrite",
    "OptimizeResult",
    "Refused",
    "Tombstone",
    "Retention",
    "RsEngine",
    "RsTableLog",
    "StatsConfig",
    "TableLog",
    "app_txn_id",
    "check_partitioning",
    "check_keyed",
    "check_segment",
    "commits_per_s",
    "compact_iceberg",
    "compact_table",
    "dead_letter_txn_id",
    "default_app_id",
    "fit_segment",
    "given_schema_refused",
    "legacy_app_id",
    "list_log",
    "logged_files",
    "make_durable",
    "object_store",
    "optimize_iceberg",
    "optimize_table",
    "read_file",
    "read_segment",
    "retention_properties",
    "row_groups",
    "segment_of_rows",
    "table_identity",
    "table_retention",
    "vacuum_by_table_retention",
    "is_tombstone",
    "tombstone_refusal",
    "unwrap_segment",
    "write_segments",
]
