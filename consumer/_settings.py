"""``parka ingest``'s settings, declared once (:mod:`parka.ops.settings`): the shared ones and its own.
Its command line (``_cli.py``) is built from :data:`FLAGS`; :class:`IngestSettings` holds what the
ingestion needs and checks it where it enters."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from parka.lake import DEFAULT_COMPACT_MAX_REWRITES, DEFAULT_COMPACT_MIN_FILES, DEFAULT_TABLE_RETENTION_S, Debezium
from parka.ops import settings as s
from parka.ops.cli_util import integer, number
from parka.ops.settings import DaemonSettings, Setting, declared

from parka.config import storage_options_for

__all__ = ["FLAGS", "IngestSettings", "OffsetReset", "SchemaEvolution"]

OffsetReset = Literal["earliest", "latest"]
SchemaEvolution = Literal["none", "merge"]

MIN_BYTES_PER_COMMIT = Setting(
    "min_bytes_per_commit",
    ("--min-bytes-per-commit",),
    ("MIN_BYTES_PER_COMMIT",),
    "commit once this many bytes are buffered, and before a segment that would go past it",
    default_text="--target-file-size",
    parse=s.TARGET_FILE_SIZE.parse,
    check=s.at_least(1, "an integer >= 1"),
)
MAX_BUFFERED_BYTES = Setting(
    "max_buffered_bytes",
    ("--max-buffered-bytes",),
    ("MAX_BUFFERED_BYTES",),
    "segments held in memory at most, those of the next commit and those of the commit being written "
    "(the next waits for it)",
    default_text="twice --min-bytes-per-commit",
    parse=s.TARGET_FILE_SIZE.parse,
    check=s.at_least(1, "an integer >= 1"),
)
WRITE_THREADS = Setting(
    "write_threads",
    ("--write-threads",),
    ("WRITE_THREADS",),
    "data files of a commit written (or uploaded) at once",
    default=4,
    unit="threads",
    parse=integer,
    check=s.at_least(1, "a number of threads >= 1"),
)
OPTIMIZE_EVERY = Setting(
    "optimize_every",
    ("--optimize-every",),
    ("OPTIMIZE_EVERY",),
    "every N commits of this worker, compact the table's small files (parka optimize without VACUUM); 0 never",
    default=0,
    parse=integer,
    check=s.at_least(0, "a number of commits >= 0 (0: never)"),
)
COMPACT_MIN_FILES = Setting(
    "compact_min_files",
    ("--compact-min-files",),
    ("COMPACT_MIN_FILES",),
    "background compaction: once a table partition holds this many files below --target-file-size of "
    "one generation (files ingestion wrote, or compaction's own below --compact-max-rewrites), or such "
    "files adding up to it, a thread rewrites them into one file with large row groups, next to the "
    "commits; 0: no background compaction",
    default=DEFAULT_COMPACT_MIN_FILES,
    unit="files",
    parse=integer,
    check=lambda n: None if n == 0 or n >= 2 else "0 (off) or a number of files >= 2",
)
COMPACT_MAX_REWRITES = Setting(
    "compact_max_rewrites",
    ("--compact-max-rewrites",),
    ("COMPACT_MAX_REWRITES",),
    "background compaction's tiers: its files are compacted again, up to this many times per row, so the "
    "bytes written stay below about 1 + this times the bytes ingested; files the tiers leave below "
    "--target-file-size are merged once more into files of about that size, so the live files stay about "
    "the table's bytes over --target-file-size",
    default=DEFAULT_COMPACT_MAX_REWRITES,
    parse=integer,
    check=s.at_least(1, "a number of rewrites >= 1"),
)
VACUUM_EVERY = Setting(
    "vacuum_every_s",
    ("--vacuum-every",),
    ("VACUUM_EVERY",),
    "Delta tables: VACUUM the table this often, on the maintenance thread: the files removed (by "
    "compaction) longer ago than the table's delta.deletedFileRetentionDuration are deleted, never "
    "those a version inside it names; 0: never",
    default=600.0,
    unit="s",
    parse=number,
    check=s.at_least(0, "a number of seconds >= 0 (0: never)"),
)
TABLE_RETENTION = Setting(
    "table_retention_s",
    ("--table-retention",),
    ("TABLE_RETENTION",),
    "Delta tables: the deleted-file and log retention (delta.deletedFileRetentionDuration, "
    "delta.logRetentionDuration) of the tables it creates; a table with longer ones is warned about, "
    "and changed only with --set-table-retention",
    default=DEFAULT_TABLE_RETENTION_S,
    unit="s",
    parse=integer,
    check=s.at_least(1, "a number of seconds >= 1"),
)
SET_TABLE_RETENTION = Setting(
    "set_table_retention",
    ("--set-table-retention",),
    ("SET_TABLE_RETENTION",),
    "Delta tables: set an existing table's deleted-file and log retention to --table-retention at start "
    "(a commit of its properties) when they differ",
    default=False,
    kind="switch",
)

EXIT_CODE_WHEN_EMPTY = Setting(
    "exit_code_when_empty",
    ("--exit-code-when-empty",),
    ("EXIT_CODE_WHEN_EMPTY",),
    "with --end-at-latest: the exit code of a run that found nothing new to ingest (e.g. 99, the code "
    "Airflow's BashOperator marks as skipped)",
    default=0,
    parse=integer,
    check=lambda code: None if 0 <= code <= 255 else "an exit code, 0 to 255",
)


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None


TOPICS_REGEX = Setting(
    "topics_regex",
    ("--topics-regex",),
    ("TOPICS_REGEX",),
    "land every topic whose whole name matches this Python regular expression (names starting with __, "
    "Kafka's own, excepted), each into a table of its own: TOPIC is left out, and TABLE_URI (and --dlq-table, "
    "--app-id and --consumer-group, when given) hold {topic}; topics created later are picked up within "
    "--topics-refresh-interval (several topics can also be given as TOPIC, comma-separated)",
    parse=_regex,
    metavar="REGEX",
)
TOPICS_CONFIG = Setting(
    "topics_config",
    ("--topics-config",),
    ("TOPICS_CONFIG",),
    "with several topics: a TOML file of per-topic settings, a table per topic whose keys are flags without "
    'their dashes, e.g. [topics."orders"] partition-by = "day", allowed-latency = 5, upsert = true; '
    "they replace the flags' values for that topic",
    metavar="FILE",
)
TOPICS_REFRESH = Setting(
    "topics_refresh_s",
    ("--topics-refresh-interval",),
    ("TOPICS_REFRESH_INTERVAL",),
    "with --topics-regex: seconds between two listings of the broker's topics (a daemon's new topics start "
    "landing within this)",
    default=30.0,
    unit="s",
    parse=number,
    check=s.above(0, "a number of seconds > 0"),
)
FLEET_FLAGS: tuple[Setting, ...] = (TOPICS_REGEX, TOPICS_CONFIG, TOPICS_REFRESH)
"""The flags of several topics in one daemon (:mod:`._fleet`): not settings of one topic's run."""

FLAGS: tuple[Setting, ...] = (
    s.TOPIC,
    s.TABLE_URI,
    *FLEET_FLAGS,
    *s.SHARED,
    MIN_BYTES_PER_COMMIT,
    MAX_BUFFERED_BYTES,
    WRITE_THREADS,
    COMPACT_MIN_FILES,
    COMPACT_MAX_REWRITES,
    OPTIMIZE_EVERY,
    VACUUM_EVERY,
    TABLE_RETENTION,
    SET_TABLE_RETENTION,
    EXIT_CODE_WHEN_EMPTY,
)
"""``parka ingest``'s command line, in ``--help`` order."""


@dataclass(frozen=True, repr=False)
class IngestSettings(DaemonSettings):
    """Everything ``parka ingest`` can be told; see the CLI for each flag's meaning.

    ``kafka_conf`` is the Kafka client's settings: the ``-K`` ones with ``bootstrap.servers``
    and ``group.id`` (the CLI adds them from ``--kafka`` and ``--consumer-group``). ``app_id``
    ``None``: the table's default (:func:`parka.lake.default_app_id`; a table holding progress
    under the older ``parka-<topic>`` keeps that); ``group.id`` missing: the app id given, else
    the table's default app id, so that two tables never share a group by default.

    Raises :class:`~parka.errors.ConfigError` naming the setting, its flag and variable, the
    value and what is allowed.
    """

    topic: str = declared(s.TOPIC, required=True)
    table_uri: str = declared(s.TABLE_URI, required=True)
    kafka_conf: dict[str, Any] = declared(s.KAFKA_CONF, required=True)
    app_id: str | None = declared(s.APP_ID)  # None: derived from the table at start
    allowed_latency_s: float = declared(s.ALLOWED_LATENCY)
    min_bytes_per_commit: int | None = declared(MIN_BYTES_PER_COMMIT)  # None: target_file_size
    target_file_size: int = declared(s.TARGET_FILE_SIZE)
    max_segments_per_commit: int = declared(s.MAX_SEGMENTS_PER_COMMIT)
    max_buffered_bytes: int | None = declared(MAX_BUFFERED_BYTES)  # None: 2 x bytes_per_commit
    write_threads: int = declared(WRITE_THREADS)
    auto_offset_reset: OffsetReset = declared(s.AUTO_OFFSET_RESET)
    seek_offsets: dict[int, int] = declared(s.SEEK_OFFSETS)
    end_at_latest: bool = declared(s.END_AT_LATEST)
    checkpoint_interval: int = declared(s.CHECKPOINT_INTERVAL)
    partition_by: tuple[str, ...] = declared(s.PARTITION_BY)
    schema_evolution: SchemaEvolution = declared(s.SCHEMA_EVOLUTION)
    dlq_table_uri: str | None = declared(s.DLQ_TABLE)
    storage_options: dict[str, str] = declared(s.STORAGE_OPTIONS)
    catalog: str | None = declared(s.CATALOG)  # an Iceberg table of this catalog; None: a Delta table
    catalog_options: dict[str, str] = declared(s.CATALOG_OPTIONS)
    compact_min_files: int = declared(COMPACT_MIN_FILES)  # 0: no background compaction
    compact_max_rewrites: int = declared(COMPACT_MAX_REWRITES)
    optimize_every: int = declared(OPTIMIZE_EVERY)
    vacuum_every_s: float = declared(VACUUM_EVERY)  # 0: no VACUUM
    table_retention_s: int = declared(TABLE_RETENTION)
    set_table_retention: bool = declared(SET_TABLE_RETENTION)
    broker_timeout_s: float = declared(s.BROKER_TIMEOUT)  # end_at_latest: give up on an unreachable broker
    retry_log_interval_s: float = declared(s.RETRY_LOG_INTERVAL)  # a cause waited on is logged again this often
    stop_timeout_s: float = declared(s.STOP_TIMEOUT)  # a stop that takes longer exits at once
    upsert: bool = declared(s.UPSERT)
    upsert_mode: str = declared(s.UPSERT_MODE)
    key_columns: tuple[str, ...] = declared(s.KEY_COLUMNS)
    sequence_by: str | None = declared(s.SEQUENCE_BY)
    cdc: str | None = declared(s.CDC)
    cdc_fields: tuple[str, ...] = declared(s.CDC_FIELDS)
    value_format: str = declared(s.VALUE_FORMAT)
    value_schema_path: str | None = declared(s.VALUE_SCHEMA)
    schema_registry_url: str | None = declared(s.SCHEMA_REGISTRY_URL)
    schema_registry_options: dict[str, str] = declared(s.SCHEMA_REGISTRY_OPTIONS)

    def __post_init__(self) -> None:
        super().__post_init__()
        s.check_delta_partitioning(self.partition_by, self.catalog)
        # delta-rs and the data files get the same options: S3 made safe, unsafe ones refused
        options = storage_options_for(self.table_uri, self.storage_options)
        if self.dlq_table_uri:
            options = storage_options_for(self.dlq_table_uri, options)
        object.__setattr__(self, "storage_options", options)
        upsert = s.check_upsert(self)
        object.__setattr__(self, "upsert", upsert)
        s.check_value_format(self)
        if self.max_buffered_bytes is not None and self.max_buffered_bytes < self.bytes_per_commit:
            raise MAX_BUFFERED_BYTES.error(
                self.max_buffered_bytes,
                f"at least the bytes per commit ({self.bytes_per_commit:,}: --min-bytes-per-commit, else "
                "--target-file-size)",
            )

    @property
    def change_events(self) -> Debezium | None:
        """What ``--cdc`` reads the rows as, ``None`` without it."""
        return s.change_events(self.cdc, self.cdc_fields)

    @property
    def bytes_per_commit(self) -> int:
        """Buffered bytes that make a commit due: ``min_bytes_per_commit``, else ``target_file_size``."""
        return self.min_bytes_per_commit or self.target_file_size

    @property
    def buffer_limit(self) -> int:
        """Segment bytes held in memory at most: ``max_buffered_bytes``, else two commits' worth."""
        return self.max_buffered_bytes or 2 * self.bytes_per_commit
