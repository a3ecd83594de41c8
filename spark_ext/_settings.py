"""``parka spark-ingest``'s settings, declared once (:mod:`parka.ops.settings`): the flags it shares
with ``parka ingest`` (same flag, same variable, same check; a help text of its own where Spark
means something more precise) and Spark's own. Its command line (``_cli.py``) is built from
:data:`SHARED_FLAGS` and :data:`SPARK_FLAGS`; :class:`SparkIngestSettings` holds what the
ingestion needs and checks it where it enters. No pyspark import here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from parka.lake import Debezium, default_app_id, legacy_app_id, table_identity
from parka.ops import settings as s
from parka.ops.cli_util import redacted
from parka.ops.settings import DaemonSettings, Setting, declared

from parka.config import is_s3
from parka.errors import ConfigError
from parka.partitioning import parse_partition_by

from ._arrow import METADATA_COLUMNS, RESERVED_MODES
from ._options import HADOOP_CHECKPOINT, hadoop_storage_options, hadoop_uri, trigger_ms

if TYPE_CHECKING:
    from ._reader import SchemaInput

__all__ = ["CHECKPOINTS_DIR", "COMMIT_ENGINES", "MODES", "SHARED_FLAGS", "SPARK_FLAGS", "SparkIngestSettings"]

CHECKPOINTS_DIR = "_parka_checkpoints"
MODES = ("raw", "decode")
COMMIT_ENGINES = ("delta-spark", "delta-rs")

# Kafka consumer settings the Spark Kafka source manages itself and refuses, with what to use instead.
_SPARK_OWNED = {
    "auto.offset.reset": "--auto-offset-reset / --starting-offsets",
    "enable.auto.commit": "nothing (the checkpoint holds the offsets)",
    "key.deserializer": "nothing (values are segments)",
    "value.deserializer": "nothing (values are segments)",
    "interceptor.classes": "nothing (not supported by Spark's Kafka source)",
}


def _metadata_names(text: str) -> tuple[str, ...]:
    return tuple(m.strip() for m in text.split(",") if m.strip())


def _metadata_check(names: tuple[str, ...]) -> str | None:
    return None if all(n in METADATA_COLUMNS for n in names) else " | ".join(METADATA_COLUMNS)


def _schema_text(text: str) -> str:
    """``--schema``: JSON text, or a file holding it.

    Raises:
        ValueError: neither.
    """
    if text.lstrip().startswith("{"):
        return text
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"neither JSON nor a file: {text!r}")
    return path.read_text()


def _spark_owned(conf: Mapping[str, str]) -> None:
    for key in conf:
        if key in _SPARK_OWNED:
            shown = redacted({key: conf[key]})[key]
            raise ConfigError(key, shown, f"not set here; use {_SPARK_OWNED[key]}", reason="set by -K")


def _trigger_check(trigger: str) -> None:

    trigger_ms(trigger)


# -- the shared flags, as Spark reads them ---------------------------------------------------------

CONSUMER_GROUP = s.CONSUMER_GROUP.but(
    help="Kafka group.id for the source's consumers; offsets live in the checkpoint either way",
    default_text="Spark's own, unique per query",
)
APP_ID = s.APP_ID.but(
    help="application id: the table's offsets are kept per <app id>-<partition> (raw mode); also the query's "
    "name; without --checkpoint-location the checkpoint folder is parka-<topic>, as it always was",
    default_text="parka-<topic>-<8 hex of the table>; a table holding progress under parka-<topic> keeps that",
)
ALLOWED_LATENCY = s.ALLOWED_LATENCY.but(
    help="seconds between micro-batches when no --trigger is given (processing-time=<this>s)"
)
MAX_OFFSETS_PER_TRIGGER = s.MAX_SEGMENTS_PER_COMMIT.but(
    name="max_offsets_per_trigger",
    flags=("--max-segments-per-commit", "--max-offsets-per-trigger"),
    env=("MAX_OFFSETS_PER_TRIGGER", "MAX_SEGMENTS_PER_COMMIT"),
    default=None,
    default_text="no limit",
    help="most Kafka messages (segments) per micro-batch, i.e. per table commit",
)
TARGET_FILE_SIZE = s.TARGET_FILE_SIZE.but(
    help="raw mode: stitch each task's segments into data files of up to this size (e.g. 128MiB)"
)
AUTO_OFFSET_RESET = s.AUTO_OFFSET_RESET.but(help="where a new query (no checkpoint yet) starts")
SEEK_OFFSETS = s.SEEK_OFFSETS.but(
    help='JSON {"partition": offset} where a new query starts; Spark needs every partition listed'
)
KAFKA_CONF = s.KAFKA_CONF.but(
    help="Kafka client setting, repeatable, passed as kafka.KEY (security.protocol, ssl.*, sasl.*; "
    "sasl.username/sasl.password become sasl.jaas.config); secrets are never logged",
    check=_spark_owned,
)
END_AT_LATEST = s.END_AT_LATEST.but(
    help="same as --trigger available-now: ingest what is in the topic at start, then exit 0"
)
SCHEMA_EVOLUTION = s.SCHEMA_EVOLUTION.but(
    help="merge: the table takes new fields (raw mode: a segment's, at any depth, widenings where it has "
    "type widening; decode mode: --schema's new columns, Delta mergeSchema, or added to an Iceberg table "
    "before the query starts)"
)
DLQ_TABLE = s.DLQ_TABLE.but(
    help="raw mode: dead-letter table (a URI, or with --catalog namespace.name) for messages that are not "
    "segments or that the table cannot take; without it such a message fails its micro-batch after what came "
    "before it in its partition is committed"
)
STORAGE_OPTIONS = s.STORAGE_OPTIONS.but(
    help="object store option, repeatable: fs.* Hadoop settings or AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
    "AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, AWS_REGION"
)
CATALOG = s.CATALOG.but(
    help="land in an Apache Iceberg table of this pyiceberg catalog (.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__*, "
    "or --catalog-option); TABLE_URI and --dlq-table are then identifiers, namespace.name, and "
    "--checkpoint-location is required. Raw mode commits with pyiceberg on the driver; decode mode writes with "
    "Iceberg's Spark runtime through a Spark catalog of this name (a REST catalog, or the SQL one on SQLite). "
    "Without it, a Delta table"
)
BROKER_TIMEOUT = s.BROKER_TIMEOUT.but(
    help="with --end-at-latest or --trigger available-now: seconds to wait for a Kafka broker to answer before "
    "exiting 3; a streaming query waits as long as it takes"
)
CHECKPOINT_INTERVAL = s.CHECKPOINT_INTERVAL.but(
    help="raw mode: every N commits, write a Delta checkpoint (Iceberg: expire snapshots by the table's "
    "history.expire.* properties) and remove orphan files; 0 never"
)

UPSERT = s.UPSERT.but(
    help="raw mode with --commit-engine delta-rs: the table holds the latest row per record key "
    "(__parka_key), in Kafka offset order within a partition; a message with a key and no value (a "
    "tombstone) deletes its key. Superseded rows are deleted by deletion vector in the commit that lands "
    "their successors; a table created gets delta.enableDeletionVectors=true. An unpartitioned Delta table"
)

VALUE_FORMAT = s.VALUE_FORMAT.but(
    help=f"raw mode: {s.VALUE_FORMAT.help}. The executors decode the records; a table that does not exist "
    "yet is made from the first records of a micro-batch that decode, read on the driver"
)

SHARED_FLAGS: tuple[Setting, ...] = (
    s.BOOTSTRAP_SERVERS,
    CONSUMER_GROUP,
    APP_ID,
    ALLOWED_LATENCY,
    MAX_OFFSETS_PER_TRIGGER,
    TARGET_FILE_SIZE,
    AUTO_OFFSET_RESET,
    SEEK_OFFSETS,
    KAFKA_CONF,
    END_AT_LATEST,
    s.PARTITION_BY,
    SCHEMA_EVOLUTION,
    DLQ_TABLE,
    STORAGE_OPTIONS,
    CATALOG,
    s.CATALOG_OPTIONS,
    CHECKPOINT_INTERVAL,
    UPSERT,
    s.UPSERT_MODE,
    s.KEY_COLUMNS,
    s.SEQUENCE_BY,
    s.CDC,
    s.CDC_FIELDS,
    VALUE_FORMAT,
    s.VALUE_SCHEMA,
    s.SCHEMA_REGISTRY_URL,
    s.SCHEMA_REGISTRY_OPTIONS,
    s.METRICS_PORT,
    s.METRICS_BIND_ADDRESS,
    BROKER_TIMEOUT,
    s.RETRY_LOG_INTERVAL,
    s.PROGRESS_INTERVAL,
    s.VERBOSE,
    s.QUIET,
    s.LOG_FORMAT,
    s.STOP_TIMEOUT,
)
"""The flags of ``parka ingest`` that ``parka spark-ingest`` takes too, in ``--help`` order."""

# -- Spark's own -----------------------------------------------------------------------------------

MODE = Setting(
    "mode",
    ("--mode",),
    ("SPARK_MODE",),
    "raw: segments land unchanged, committed with a txn per Kafka partition (as parka ingest); decode: "
    "records decoded in Spark and written by delta-spark, or with --catalog by Iceberg's Spark writer with "
    "the same per-partition offsets as raw mode (needed for --reserved drop, --metadata)",
    default="raw",
    choices=MODES,
)
COMMIT_ENGINE = Setting(
    "commit_engine",
    ("--commit-engine",),
    ("COMMIT_ENGINE",),
    "raw mode: who commits the data files. delta-spark: delta-spark's transaction API in the JVM, which "
    "applies the table's features (row tracking, in-commit timestamps, liquid clustering...); delta-rs: "
    "deltalake on the driver, as parka ingest",
    default="delta-spark",
    choices=COMMIT_ENGINES,
)
TRIGGER = Setting(
    "trigger",
    ("--trigger",),
    ("TRIGGER",),
    "available-now, or processing-time=<n>[ms|s|m|h]",
    default_text="processing-time=<allowed latency>s; available-now with --end-at-latest",
    check=_trigger_check,
)
CHECKPOINT_LOCATION = Setting(
    "checkpoint_location",
    ("--checkpoint-location",),
    ("CHECKPOINT_LOCATION",),
    "Structured Streaming checkpoint, written through Hadoop: a local path, s3a:// (s3:// means the same), "
    "abfss://, gs://, hdfs://; for an s3:// table it is written as s3a://, with the s3a jars added; "
    "required for an az:// table",
    default_text="<table>/_parka_checkpoints/<app id>",
)
STARTING_OFFSETS = Setting(
    "starting_offsets",
    ("--starting-offsets",),
    ("STARTING_OFFSETS",),
    "Kafka source startingOffsets (earliest, latest or Spark's JSON); overrides --auto-offset-reset",
    default_text="--auto-offset-reset",
)
SOURCE_OPTIONS = Setting(
    "source_options",
    ("-O", "--source-option"),
    ("SOURCE_OPTIONS",),
    "other Kafka source option, repeatable (failOnDataLoss, minPartitions...)",
    default={},
    kind="pairs",
)
SCHEMA = Setting(
    "schema",
    ("--schema",),
    ("SCHEMA",),
    "the topic's Avro schema, a file or JSON text",
    default_text="the table's, else the union of the topic's segments' at start",
    parse=_schema_text,
)
RESERVED = Setting(
    "reserved",
    ("--reserved",),
    ("RESERVED",),
    "keep: the __parka_key/__parka_timestamp/__parka_headers columns go into the table (as parka ingest "
    "does); drop: they do not (decode mode)",
    default="keep",
    choices=RESERVED_MODES,
)
METADATA = Setting(
    "metadata",
    ("--metadata",),
    ("METADATA",),
    "comma-separated Kafka metadata to add as kafka_<name> columns: topic, partition, offset, index, "
    "timestamp (decode mode)",
    default=(),
    parse=_metadata_names,
    check=_metadata_check,
)
MASTER = Setting(
    "master",
    ("--master",),
    ("SPARK_MASTER",),
    "Spark master URL; an active session is reused",
    default_text="local[*]",
)
SPARK_CONF = Setting(
    "spark_conf", ("-c", "--spark-conf"), ("SPARK_CONF",), "Spark setting, repeatable", default={}, kind="pairs"
)
PACKAGES = Setting(
    "packages",
    ("--packages",),
    ("SPARK_PACKAGES",),
    "more Maven coordinates (group:artifact:version, comma-separated) for the session's jars, besides "
    "delta-spark, the Kafka source and (decode mode with --catalog) Iceberg's Spark runtime; e.g. hadoop-aws "
    "for s3a://",
    default=(),
    parse=_metadata_names,
    metavar="COORDS",
)

SPARK_FLAGS: tuple[Setting, ...] = (
    MODE,
    COMMIT_ENGINE,
    TRIGGER,
    CHECKPOINT_LOCATION,
    STARTING_OFFSETS,
    SOURCE_OPTIONS,
    SCHEMA,
    RESERVED,
    METADATA,
    MASTER,
    SPARK_CONF,
    PACKAGES,
)
"""``parka spark-ingest``'s own flags, in ``--help`` order."""


@dataclass(frozen=True, repr=False)
class SparkIngestSettings(DaemonSettings):
    """Everything ``parka spark-ingest`` can be told; see its ``--help`` for each flag.

    ``kafka_conf`` holds Kafka client settings without the ``kafka.`` prefix (as ``-K`` takes
    them); ``source_options`` other Kafka source options (``failOnDataLoss``...).
    ``storage_options`` are ``fs.*`` Hadoop settings or the delta-rs keys
    :func:`~._options.hadoop_storage_options` translates.

    ``mode``: ``raw`` lands segments unchanged with parka's own commits; ``decode`` decodes
    them and writes through delta-spark, or Iceberg's Spark writer with a ``catalog``
    (``reserved``, ``metadata`` and transforms need it).
    ``dlq_table_uri`` (raw mode): bad segments go there instead of failing the batch.
    ``commit_engine`` (raw mode): ``delta-spark`` commits through delta-spark's transaction
    API in the JVM (table features such as row tracking, in-commit timestamps and liquid
    clustering are applied by delta-spark); ``delta-rs`` through deltalake on the driver (what
    ``parka ingest`` uses; refuses tables with features delta-rs cannot write).
    ``catalog``: the table is ``namespace.name`` in this Iceberg catalog (pyiceberg, with
    ``catalog_options``), committed by pyiceberg on the driver (raw mode) or by Iceberg's Spark
    writer through a Spark catalog of the same name (decode mode); ``checkpoint_location`` is
    then required.

    Raises (on construction):
        ConfigError: a value that is out of range, unknown or contradicts another, naming the
            setting, its flag and variable.
    """

    topic: str = declared(s.TOPIC, required=True)
    table_uri: str = declared(s.TABLE_URI, required=True)
    bootstrap_servers: str = declared(s.BOOTSTRAP_SERVERS, required=True)
    kafka_conf: Mapping[str, str] = declared(KAFKA_CONF)
    source_options: Mapping[str, str] = declared(SOURCE_OPTIONS)
    app_id: str | None = declared(APP_ID)
    checkpoint_location: str | None = declared(CHECKPOINT_LOCATION)
    # the command line's default is computed (from --end-at-latest and --allowed-latency)
    trigger: str = declared(TRIGGER.but(default="available-now"))
    starting_offsets: str = declared(STARTING_OFFSETS.but(default="earliest"))
    max_offsets_per_trigger: int | None = declared(MAX_OFFSETS_PER_TRIGGER)
    partition_by: tuple[str, ...] = declared(s.PARTITION_BY)
    schema: SchemaInput | None = declared(SCHEMA)
    schema_evolution: str = declared(SCHEMA_EVOLUTION)
    reserved: str = declared(RESERVED)
    metadata: tuple[str, ...] = declared(METADATA)
    storage_options: Mapping[str, str] = declared(STORAGE_OPTIONS)
    mode: str = declared(MODE)
    dlq_table_uri: str | None = declared(DLQ_TABLE)
    commit_engine: str = declared(COMMIT_ENGINE)  # Delta tables; with a catalog, pyiceberg commits
    catalog: str | None = declared(CATALOG)  # an Iceberg table of this catalog; None: a Delta table
    catalog_options: Mapping[str, str] = declared(s.CATALOG_OPTIONS)
    checkpoint_interval: int = declared(CHECKPOINT_INTERVAL)
    target_file_size: int = declared(TARGET_FILE_SIZE)
    stop_timeout_s: float = declared(s.STOP_TIMEOUT)  # a stop that takes longer exits at once
    upsert: bool = declared(UPSERT)
    upsert_mode: str = declared(s.UPSERT_MODE)
    key_columns: tuple[str, ...] = declared(s.KEY_COLUMNS)
    sequence_by: str | None = declared(s.SEQUENCE_BY)
    cdc: str | None = declared(s.CDC)
    cdc_fields: tuple[str, ...] = declared(s.CDC_FIELDS)
    value_format: str = declared(VALUE_FORMAT)
    value_schema_path: str | None = declared(s.VALUE_SCHEMA)
    schema_registry_url: str | None = declared(s.SCHEMA_REGISTRY_URL)
    schema_registry_options: Mapping[str, str] = declared(s.SCHEMA_REGISTRY_OPTIONS)

    def __post_init__(self) -> None:
        super().__post_init__()
        upsert = s.check_upsert(self)
        object.__setattr__(self, "upsert", upsert)
        s.check_value_format(self)
        if self.value_format != "segment" and self.mode != "raw":
            raise MODE.error(self.mode, "raw", reason="--value-format lands row records as files (raw mode)")
        if upsert and self.mode != "raw":
            raise MODE.error(self.mode, "raw", reason="an upsert table lands segments as they are (raw mode)")
        if upsert and self.catalog is None and self.commit_engine != "delta-rs":
            raise COMMIT_ENGINE.error(
                self.commit_engine,
                "delta-rs",
                reason="an upsert commit deletes rows by deletion vector, which parka writes into delta-rs' log",
            )  # an Iceberg table's commits are pyiceberg's whatever the flag says
        # what one setting allows depends on another
        if self.mode == "raw":
            # raw mode lands segments as they are: it cannot drop or add columns
            if self.reserved != "keep":
                raise RESERVED.error(self.reserved, "keep", reason="raw mode keeps segments whole; use mode decode")
            if self.metadata:
                raise METADATA.error(
                    ",".join(self.metadata), "none", reason="raw mode adds no columns; use mode decode"
                )
        elif self.dlq_table_uri is not None:
            raise DLQ_TABLE.error(self.dlq_table_uri, "none", reason="a dead-letter table needs mode raw")
        elif self.commit_engine != "delta-spark":
            raise COMMIT_ENGINE.error(
                self.commit_engine,
                "delta-spark",
                reason="decode mode writes with delta-spark (or Iceberg's Spark writer)",
            )
        if self.catalog is not None and self.checkpoint_location is None:
            raise CHECKPOINT_LOCATION.error(
                "(none)", "a folder", reason="an Iceberg table has no location before it exists: give the checkpoint's"
            )
        if (
            self.mode == "raw"
            and self.catalog is None
            and self.commit_engine == "delta-spark"
            and is_s3(self.table_uri)
        ):
            raise COMMIT_ENGINE.error(
                self.commit_engine,
                "delta-rs",
                reason="on S3, parka's writers commit with a conditional put (If-None-Match) so that two "
                "writers can never both write one table version; delta-spark 4.0 commits to S3 without "
                "one (its S3 log store assumes a single writer), so its commits could overwrite parka "
                "ingest's",
            )
        s.check_delta_partitioning(self.partition_by, self.catalog)
        specs = parse_partition_by(self.partition_by, key="partition_by")
        derived = [str(spec) for spec in specs if spec.derived]
        if derived and self.mode != "raw":
            raise s.PARTITION_BY.error(
                derived[0], "columns of the data", reason="a derived partition column needs mode raw"
            )
        if self.checkpoint_location is None:
            clash = [spec.name for spec in specs if CHECKPOINTS_DIR.startswith(spec.name)]
            if clash:  # delta-rs VACUUM treats '<partition column>...' directories as data
                raise s.PARTITION_BY.error(
                    clash[0], "a name that does not prefix '_parka_checkpoints'",
                    reason="or give a checkpoint location outside the table",
                )  # fmt: skip

        if hadoop_uri(self.checkpoint) is None:
            scheme = self.checkpoint.split("://", 1)[0]
            reason = f"Spark writes its checkpoint through Hadoop, which has no FileSystem for {scheme}://"
            if self.checkpoint_location is None:
                reason += f"; the default, {self.checkpoint}, is inside the table: give the checkpoint's location"
            raise CHECKPOINT_LOCATION.error(self.checkpoint_location or "(none)", HADOOP_CHECKPOINT, reason=reason)
        hadoop_storage_options(self.storage_options)

    @property
    def change_events(self) -> Debezium | None:
        """What ``--cdc`` reads the rows as, ``None`` without it."""
        return s.change_events(self.cdc, self.cdc_fields)

    @property
    def app(self) -> str:
        """The application id: the query name, and the ``txn`` app ids of a new table (an
        existing table keeps its own: :meth:`parka.lake.LandingSession.settle_app_id`)."""
        return self.app_id or default_app_id(self.topic, table_identity(self.table_uri, self.catalog))

    @property
    def checkpoint(self) -> str:
        """Where the streaming query's checkpoint is, as Hadoop names it (:func:`._options.hadoop_uri`:
        an ``s3://`` location is ``s3a://``): ``checkpoint_location``, else
        ``<table>/_parka_checkpoints/<app id>`` (``parka-<topic>`` when no app id is given: where a default
        checkpoint always was)."""
        folder = self.app_id or legacy_app_id(self.topic)
        given = self.checkpoint_location or f"{self.table_uri.rstrip('/')}/{CHECKPOINTS_DIR}/{folder}"
        return hadoop_uri(given) or given
