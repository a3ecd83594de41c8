"""Each daemon's settings, declared in one typed place.

A :class:`Setting` is one thing an operator can set: its field name on the settings object, its
flag(s), its ``PARKA_*`` environment variable(s), its help text, its default, how its text is read
and what values it allows. From that one declaration come

* the ``argparse`` flag (:meth:`SettingsParser.add_settings`), its help ending in its default and
  its environment variable's name (:meth:`Setting.help_text`);
* the environment: a flag not given on the command line takes its variable's value (an empty
  variable counts as unset), read as the flag's text would be, else the default; a repeatable
  ``KEY=VALUE`` flag takes the variable's comma-separated pairs and then the flags';
* the settings object's dataclass field (:func:`declared`) and its validation
  (:func:`validate`, called by the settings' ``__post_init__``; :class:`SettingsParser` runs the
  same checks on what it parsed). An error names the setting (field, flag, variable) and the bad
  value; a value that may hold a secret is masked (:func:`parka.ops.cli_util.redacted`).

The machinery is :mod:`parka.ops.setting`; the settings both daemons share are defined here once;
``parka.consumer._settings`` and ``parka.spark_ext._settings`` build their own on them, changing
a help text or default with :meth:`Setting.but` where a daemon means something more precise by
it. Their defaults that the lake also applies to a library caller (file size, checkpoint
interval) are :mod:`parka.lake`'s constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from parka.lake import CDC_FORMATS, DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_TARGET_FILE_SIZE, Debezium

from parka.partitioning import DELTA_ALLOWED, parse_partition_by

from .cli_util import columns, integer, number, port_number, seek_offsets_json, size_bytes
from .setting import DaemonSettings, Setting, SettingsParser, declared, validate

__all__ = [
    "DaemonSettings",
    "Setting",
    "SettingsParser",
    "declared",
    "validate",
    "TOPIC",
    "TABLE_URI",
    "BOOTSTRAP_SERVERS",
    "CONSUMER_GROUP",
    "APP_ID",
    "ALLOWED_LATENCY",
    "MAX_SEGMENTS_PER_COMMIT",
    "TARGET_FILE_SIZE",
    "AUTO_OFFSET_RESET",
    "SEEK_OFFSETS",
    "KAFKA_CONF",
    "END_AT_LATEST",
    "PARTITION_BY",
    "SCHEMA_EVOLUTION",
    "DLQ_TABLE",
    "STORAGE_OPTIONS",
    "CATALOG",
    "CATALOG_OPTIONS",
    "CHECKPOINT_INTERVAL",
    "METRICS_PORT",
    "METRICS_BIND_ADDRESS",
    "BROKER_TIMEOUT",
    "RETRY_LOG_INTERVAL",
    "PROGRESS_INTERVAL",
    "VERBOSE",
    "QUIET",
    "LOG_FORMAT",
    "SHARED",
]


# -- how texts are read and values checked -------------------------------------------------------


def at_least(low: float, allowed: str) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else allowed


def above(low: float, allowed: str) -> Callable[[Any], str | None]:
    return lambda value: None if value > low else allowed


def _offsets_check(value: Mapping[int, int]) -> str | None:
    bad = any(p < 0 or off < 0 for p, off in value.items())
    return "{partition: offset}, both >= 0" if bad else None


def _partition_specs(value: Sequence[str]) -> None:
    parse_partition_by(value, key="partition_by")  # raises ConfigError naming the spec
    return None


def _partition_by_text(text: str) -> tuple[str, ...]:
    return columns(text)


# -- the settings both daemons share ---------------------------------------------------------------

TOPIC = Setting("topic", env=("TOPIC",), kind="positional", help="the Kafka topic")
TABLE_URI = Setting(
    "table_uri",
    env=("TABLE_URI",),
    kind="positional",
    help="the table: a Delta table's URI (a folder, s3://, gs://, az://...), or with --catalog an Iceberg "
    "table's identifier, namespace.name",
)
BOOTSTRAP_SERVERS = Setting(
    "bootstrap_servers",
    ("-k", "--kafka"),
    ("KAFKA",),
    "Kafka bootstrap servers, host:port[,host:port...]",
    default="localhost:9092",
)
CONSUMER_GROUP = Setting(
    "consumer_group",
    ("-g", "--consumer-group"),
    ("CONSUMER_GROUP",),
    "Kafka consumer group, one per table",
    default_text="the app id given, else the table's default app id",
)
APP_ID = Setting(
    "app_id",
    ("-a", "--app-id"),
    ("APP_ID",),
    "application id: the table's offsets are kept per <app id>-<partition> (Delta txn actions, Iceberg "
    "snapshot properties)",
    default_text="parka-<topic>-<8 hex of the table>; a table holding progress under parka-<topic> keeps that",
)
ALLOWED_LATENCY = Setting(
    "allowed_latency_s",
    ("-l", "--allowed-latency"),
    ("ALLOWED_LATENCY",),
    "seconds a segment may wait before it is committed",
    default=30.0,
    unit="s",
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
MAX_SEGMENTS_PER_COMMIT = Setting(
    "max_segments_per_commit",
    ("--max-segments-per-commit",),
    ("MAX_SEGMENTS_PER_COMMIT",),
    "commit once this many segments are buffered",
    default=1000,
    unit="segments",
    parse=integer,
    check=at_least(1, "an integer >= 1"),
)
TARGET_FILE_SIZE = Setting(
    "target_file_size",
    ("--target-file-size",),
    ("TARGET_FILE_SIZE",),
    "stitch the segments of a commit into data files of up to this size (e.g. 128MiB); a commit is due "
    "once this much is buffered, or after --allowed-latency",
    default=DEFAULT_TARGET_FILE_SIZE,
    unit="bytes",
    parse=size_bytes,
    check=at_least(1, "a number of bytes >= 1"),
)
AUTO_OFFSET_RESET = Setting(
    "auto_offset_reset",
    ("--auto-offset-reset",),
    ("AUTO_OFFSET_RESET",),
    "where a partition the table has never seen starts",
    default="earliest",
    choices=("earliest", "latest"),
)
SEEK_OFFSETS = Setting(
    "seek_offsets",
    ("--seek-offsets",),
    ("SEEK_OFFSETS",),
    'JSON {"partition": offset} for partitions the table has never seen',
    default={},
    parse=seek_offsets_json,
    check=_offsets_check,
)
KAFKA_CONF = Setting(
    "kafka_conf",
    ("-K", "--kafka-setting"),
    ("KAFKA_SETTINGS",),
    "Kafka client setting, repeatable (TLS, SASL, ...); secrets are never logged",
    default={},
    kind="pairs",
)
END_AT_LATEST = Setting(
    "end_at_latest",
    ("--end-at-latest",),
    ("END_AT_LATEST",),
    "ingest what is in the topic at start, commit it and exit",
    default=False,
    kind="switch",
)
PARTITION_BY = Setting(
    "partition_by",
    ("--partition-by",),
    ("PARTITION_BY",),
    "comma-separated partition columns of a new table: column names, or derived ones: name=date(col) (UTC "
    "date), name=hour(col) (yyyy-MM-dd-HH), name=month(col) (yyyy-MM), name=year(col), name=truncate(col, N), "
    "name=bucket(col, N) (Iceberg tables only); an existing table's own win, and a different list is refused",
    default=(),
    parse=_partition_by_text,
    check=_partition_specs,
)


def check_delta_partitioning(partition_by: Sequence[str], catalog: str | None) -> None:
    """Refuse a partition spec a Delta table cannot have (``bucket``, Iceberg-only) when no
    ``catalog`` makes the table an Iceberg one: at start, before a segment is read.

    Raises:
        ConfigError: naming ``--partition-by`` and the spec, saying why.
    """
    if catalog is not None:
        return
    for spec in parse_partition_by(partition_by, key="partition_by"):
        problem = spec.delta_problem()
        if problem is not None:
            raise PARTITION_BY.error(str(spec), DELTA_ALLOWED, reason=problem)


SCHEMA_EVOLUTION = Setting(
    "schema_evolution",
    ("--schema-evolution",),
    ("SCHEMA_EVOLUTION",),
    "merge: the table takes new fields at any depth, widenings where it has type widening, relaxed "
    "nullability (docs/schema-evolution.md)",
    default="none",
    choices=("none", "merge"),
)
DLQ_TABLE = Setting(
    "dlq_table_uri",
    ("--dlq-table",),
    ("DLQ_TABLE",),
    "dead-letter table (a URI, or with --catalog namespace.name) for messages the table cannot take; without "
    "it such a message stops ingestion with an error, after what came before it is committed",
)
STORAGE_OPTIONS = Setting(
    "storage_options",
    ("--storage-option",),
    ("STORAGE_OPTIONS",),
    "object store option, repeatable",
    default={},
    kind="pairs",
)
CATALOG = Setting(
    "catalog",
    ("--catalog",),
    ("CATALOG",),
    "land in an Apache Iceberg table of this pyiceberg catalog (.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__*, "
    "or --catalog-option); TABLE_URI and --dlq-table are then identifiers, namespace.name; without it, a Delta "
    "table",
)
CATALOG_OPTIONS = Setting(
    "catalog_options",
    ("--catalog-option",),
    ("CATALOG_OPTIONS",),
    "Iceberg catalog property KEY=VALUE over its configuration, repeatable (uri=..., warehouse=DIR: the embedded "
    "SQLite catalog when no uri is given)",
    default={},
    kind="pairs",
)
CHECKPOINT_INTERVAL = Setting(
    "checkpoint_interval",
    ("--checkpoint-interval",),
    ("CHECKPOINT_INTERVAL",),
    "every N commits, write a Delta checkpoint (Iceberg: expire snapshots by the table's history.expire.* "
    "properties) and remove orphan files; 0 never",
    default=DEFAULT_CHECKPOINT_INTERVAL,
    unit="commits",
    parse=integer,
    check=at_least(0, "an integer >= 0 (0: never)"),
)
METRICS_PORT = Setting(
    "metrics_port",
    ("--metrics-port",),
    ("METRICS_PORT",),
    "serve Prometheus metrics (parka_*) on this port, 0 for a free one (the bound address is logged); "
    "needs parka[metrics]",
    parse=port_number,
)
METRICS_BIND_ADDRESS = Setting(
    "metrics_bind_address",
    ("--metrics-bind-address",),
    ("METRICS_BIND_ADDRESS",),
    "the address --metrics-port listens on (with the health endpoints /healthz and /readyz): 0.0.0.0 every "
    "IPv4 interface, 127.0.0.1 this host only, :: every IPv6 one",
    default="0.0.0.0",  # noqa: S104 (the metrics are meant to be scraped from elsewhere)
    check=lambda value: None if value.strip() else "a host name or IP address",
)
BROKER_TIMEOUT = Setting(
    "broker_timeout_s",
    ("--broker-timeout",),
    ("BROKER_TIMEOUT",),
    "with --end-at-latest: seconds to wait for a Kafka broker to answer before exiting 3; a daemon waits "
    "as long as it takes",
    default=20.0,
    unit="s",
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
RETRY_LOG_INTERVAL = Setting(
    "retry_log_interval_s",
    ("--retry-log-interval",),
    ("RETRY_LOG_INTERVAL",),
    "while a daemon waits on a cause (no broker, no topic, a table location it cannot use), seconds "
    "between two lines saying it still does",
    default=300.0,
    unit="s",
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
PROGRESS_INTERVAL = Setting(
    "progress_interval_s",
    ("--progress-interval",),
    ("PROGRESS_INTERVAL",),
    "seconds between two progress: summary lines when stderr is not a terminal (a terminal gets a progress bar)",
    default=60.0,
    unit="s",
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
VERBOSE = Setting(
    "verbose",
    ("-v", "--verbose"),
    ("VERBOSE",),
    "debug log: a line per commit, and the stack trace of an error that stops the run",
    default=False,
    kind="switch",
)
QUIET = Setting("quiet", ("-q", "--quiet"), ("QUIET",), "warnings and errors only", default=False, kind="switch")
LOG_FORMAT = Setting(
    "log_format",
    ("--log-format",),
    ("LOG_FORMAT",),
    "the log on stderr: text (time, level, logger, message) or json (one object a line: ts, level, logger, msg, "
    "and trace with --verbose)",
    default="text",
    choices=("text", "json"),
)

STOP_TIMEOUT = Setting(
    "stop_timeout_s",
    ("--stop-timeout",),
    ("STOP_TIMEOUT",),
    "seconds a stop (SIGTERM, SIGINT) may take: the commit in flight and what is buffered are committed, "
    "then the daemon exits; past this, or at a second signal, it exits at once with 143, logging what it "
    "was doing (nothing is lost: the next run resumes from the table)",
    default=30.0,
    unit="s",
    parse=number,
    check=above(0, "a number of seconds > 0"),
)


def _names_text(text: str) -> tuple[str, ...]:
    """Comma-separated names (columns, fields), blanks dropped."""
    return tuple(c.strip() for c in text.split(",") if c.strip())


UPSERT = Setting(
    "upsert",
    ("--upsert",),
    ("UPSERT",),
    "hold the latest row per record key (__parka_key), in Kafka offset order within a partition; a "
    "message with a key and no value (a tombstone) deletes its key. Superseded rows are deleted in the "
    "commit that lands their successors: by deletion vector in a Delta table (committed by delta-rs; a "
    "table created gets delta.enableDeletionVectors=true), by position-delete file in an Iceberg table "
    "(--catalog; format v2); partitioned or not",
    default=False,
    kind="switch",
)
KEY_COLUMNS = Setting(
    "key_columns",
    ("--key-columns",),
    ("KEY_COLUMNS",),
    "with --upsert: comma-separated top-level columns whose values are a row's key, instead of the "
    "record key; produce each record with a key made of them, so that all of a key's records go to "
    "one Kafka partition. Tombstones cannot name a row by these columns and are refused",
    default=(),
    parse=_names_text,
)
SEQUENCE_BY = Setting(
    "sequence_by",
    ("--sequence-by",),
    ("SEQUENCE_BY",),
    "with --upsert: an integer, timestamp or date column that orders a key's rows instead of the Kafka "
    "offset: a row whose value is lower than its key's live row's does not overwrite it (equal: the later "
    "one wins); a tombstone still deletes whatever is live",
    default=None,
)
UPSERT_MODES = ("merge-on-read", "copy-on-write")
UPSERT_MODE = Setting(
    "upsert_mode",
    ("--upsert-mode",),
    ("UPSERT_MODE",),
    "with --upsert: merge-on-read deletes superseded rows by deletion vector (readers must read them; "
    "a table created gets delta.enableDeletionVectors=true); copy-on-write rewrites the files that hold "
    "them instead, in the same commit, so that any Delta reader reads the latest row per key, at the cost "
    "of a rewrite of every file a commit touches",
    default="merge-on-read",
    choices=UPSERT_MODES,
)
CDC = Setting(
    "cdc",
    ("--cdc",),
    ("CDC",),
    "debezium: each row is a Debezium change event, as an envelope (op, before, after, source; landed as "
    "after's columns, or before's for a delete, with __op and the sequence column) or flattened by "
    "ExtractNewRecordState (__deleted); a d event deletes its key. Implies --upsert. Its order is "
    "source.lsn where the connector gives one, else ts_ms, unless --sequence-by names a column",
    default=None,
    choices=CDC_FORMATS,
)
CDC_FIELDS = Setting(
    "cdc_fields",
    ("--cdc-fields",),
    ("CDC_FIELDS",),
    "with --cdc debezium: comma-separated envelope fields kept as columns besides op and the sequence "
    "(op, ts_ms, source.<field>, transaction.<field>: source.ts_ms becomes __source_ts_ms)",
    default=(),
    parse=_names_text,
)


VALUE_FORMAT = Setting(
    "value_format",
    ("--value-format",),
    ("VALUE_FORMAT",),
    "how a message that is not a parka segment is read. segment: it is refused (dead-lettered, or the run "
    "stops at it); avro: Confluent-framed Avro, each value's writer schema from --schema-registry-url by "
    "the id in its frame; json: one JSON object per value, read against --value-schema, or else the table's "
    "schema, or else the one inferred from the first batch (a Confluent-framed value: against its JSON "
    "Schema in the registry); connect-json: Kafka Connect's JsonConverter with schemas.enable=true "
    "(Debezium's JSON), each value's schema in it; protobuf: Confluent-framed Protobuf, the schema from "
    "--schema-registry-url (the protobuf extra). A run of such records is landed as one data file; "
    "segments are taken in every format, in offset order with the records, so a topic moves to segments "
    "without a gap",
    default="segment",
    choices=("segment", "avro", "json", "connect-json", "protobuf"),
)
VALUE_SCHEMA = Setting(
    "value_schema_path",
    ("--value-schema",),
    ("VALUE_SCHEMA",),
    "--value-format json: a file holding the values' schema, an Avro schema or a JSON Schema document",
    metavar="PATH",
)
SCHEMA_REGISTRY_URL = Setting(
    "schema_registry_url",
    ("--schema-registry-url",),
    ("SCHEMA_REGISTRY_URL",),
    "the schema registry (Confluent's API) that Confluent-framed values' schema ids name",
)
SCHEMA_REGISTRY_OPTIONS = Setting(
    "schema_registry_options",
    ("--schema-registry-option",),
    ("SCHEMA_REGISTRY_OPTIONS",),
    "schema registry client setting KEY=VALUE, as confluent-kafka's SchemaRegistryClient takes it "
    "(basic.auth.user.info, ssl.ca.location...), repeatable",
    default={},
    kind="pairs",
)


class ValueFormatSettings(Protocol):
    """The row-record settings of a daemon's settings (both daemons')."""

    @property
    def value_format(self) -> str: ...
    @property
    def value_schema_path(self) -> str | None: ...
    @property
    def schema_registry_url(self) -> str | None: ...


def check_value_format(settings: ValueFormatSettings) -> None:
    """``--value-format`` and the settings it needs (both daemons).

    Raises:
        ConfigError: naming the setting, its flag and variable.
    """
    if settings.value_format in ("avro", "protobuf") and not settings.schema_registry_url:
        raise SCHEMA_REGISTRY_URL.error(
            None, f"a registry URL: --value-format {settings.value_format} reads each writer schema there"
        )
    if settings.value_schema_path is not None and settings.value_format != "json":
        raise VALUE_SCHEMA.error(settings.value_schema_path, "only with --value-format json")


def change_events(cdc: str | None, cdc_fields: Sequence[str]) -> Debezium | None:
    """What ``--cdc`` reads a topic's rows as (both daemons), ``None`` without it."""
    return Debezium(tuple(cdc_fields)) if cdc else None


class UpsertSettings(Protocol):
    """The upsert settings of a daemon's settings (both daemons')."""

    @property
    def upsert(self) -> bool: ...
    @property
    def upsert_mode(self) -> str: ...
    @property
    def key_columns(self) -> tuple[str, ...]: ...
    @property
    def sequence_by(self) -> str | None: ...
    @property
    def cdc(self) -> str | None: ...
    @property
    def cdc_fields(self) -> tuple[str, ...]: ...
    @property
    def catalog(self) -> str | None: ...
    @property
    def partition_by(self) -> tuple[str, ...]: ...


def check_upsert(settings: UpsertSettings) -> bool:
    """What the upsert settings allow given each other and the table's (both daemons): returns
    whether the table is an upsert table (``--cdc`` implies ``--upsert``).

    Raises:
        ConfigError: naming the setting, its flag and variable.
    """
    upsert, upsert_mode, key_columns = settings.upsert, settings.upsert_mode, settings.key_columns
    sequence_by, cdc, cdc_fields = settings.sequence_by, settings.cdc, settings.cdc_fields
    catalog, partition_by = settings.catalog, settings.partition_by
    if cdc_fields and not cdc:
        raise CDC_FIELDS.error(",".join(cdc_fields), "nothing without --cdc (the envelope's fields)")
    if cdc:
        upsert = True  # a change stream lands as the latest row per key
        try:
            Debezium(tuple(cdc_fields))
        except ValueError:
            fields = "envelope fields: op, ts_ms, source.<field>, transaction.<field>"
            raise CDC_FIELDS.error(",".join(cdc_fields), fields) from None
    if upsert and catalog is not None and upsert_mode != "merge-on-read":
        iceberg = "merge-on-read with --catalog (Iceberg tables delete rows by position deletes)"
        raise UPSERT_MODE.error(upsert_mode, iceberg)
    if upsert_mode != "merge-on-read" and not upsert:
        raise UPSERT_MODE.error(upsert_mode, "merge-on-read without --upsert (how an upsert table deletes rows)")
    if key_columns and not upsert:
        raise KEY_COLUMNS.error(",".join(key_columns), "nothing without --upsert (the key of an upsert table)")
    if sequence_by and not upsert:
        raise SEQUENCE_BY.error(sequence_by, "nothing without --upsert (the order of an upsert table's rows)")
    if len(set(key_columns)) != len(key_columns):
        raise KEY_COLUMNS.error(",".join(key_columns), "distinct column names")
    if upsert and partition_by and catalog is None:
        # a Delta file that compaction or copy-on-write rewrote holds no partition column (its
        # value is in the log), so the key index could not read a key or sequence from it
        partitions = {spec.name.lower() for spec in parse_partition_by(partition_by, key="partition_by")}
        rewritten = "(rewritten files hold no partition column)"
        if any(column.lower() in partitions for column in key_columns):
            raise KEY_COLUMNS.error(",".join(key_columns), f"columns the Delta table is not partitioned by {rewritten}")
        if sequence_by is not None and sequence_by.lower() in partitions:
            raise SEQUENCE_BY.error(sequence_by, f"a column the Delta table is not partitioned by {rewritten}")
    return upsert


SHARED: tuple[Setting, ...] = (
    BOOTSTRAP_SERVERS,
    CONSUMER_GROUP,
    APP_ID,
    ALLOWED_LATENCY,
    MAX_SEGMENTS_PER_COMMIT,
    TARGET_FILE_SIZE,
    AUTO_OFFSET_RESET,
    SEEK_OFFSETS,
    KAFKA_CONF,
    END_AT_LATEST,
    PARTITION_BY,
    SCHEMA_EVOLUTION,
    DLQ_TABLE,
    STORAGE_OPTIONS,
    CATALOG,
    CATALOG_OPTIONS,
    CHECKPOINT_INTERVAL,
    UPSERT,
    UPSERT_MODE,
    KEY_COLUMNS,
    SEQUENCE_BY,
    CDC,
    CDC_FIELDS,
    VALUE_FORMAT,
    VALUE_SCHEMA,
    SCHEMA_REGISTRY_URL,
    SCHEMA_REGISTRY_OPTIONS,
    METRICS_PORT,
    METRICS_BIND_ADDRESS,
    BROKER_TIMEOUT,
    RETRY_LOG_INTERVAL,
    PROGRESS_INTERVAL,
    VERBOSE,
    QUIET,
    LOG_FORMAT,
    STOP_TIMEOUT,
)
"""The flags both daemons take, in ``--help`` order (after ``TOPIC`` and ``TABLE_URI``)."""
