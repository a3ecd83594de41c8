"""``parka spark-ingest TOPIC TABLE_URI``: the ingestion on Spark. The flags ``parka ingest`` also
has mean the same thing and read the same ``PARKA_*`` environment variables (shown in
``--help``); Spark's own flags follow. Credentials belong in the environment or ``-K`` flags
and are never logged."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from parka._cli_util import (
    add_shared_flags,
    columns,
    env,
    env_pairs,
    pairs,
    seek_offsets,
    serve_metrics,
    setup_logging,
    stopped,
)
from parka._health import EXIT_OK, exit_code_for
from parka._progress import LogProgress, ProgressBar

__all__ = ["build_parser", "main", "settings_from_args"]

_PROG = "parka spark-ingest"
log = logging.getLogger("parka.spark_ingest")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="parka spark-ingest",
        description="Ingest a topic of parka Parquet segments into a Delta table with Spark Structured "
        "Streaming, exactly once. --mode raw (default) lands each segment unchanged as a data file and "
        "commits with parka ingest's per-partition txn; --mode decode decodes records and writes through "
        "delta-spark. Each flag's environment variable is shown in brackets.",
    )
    p.add_argument("topic", nargs="?", default=env("TOPIC"), help="Kafka topic [PARKA_TOPIC]")
    p.add_argument("table_uri", nargs="?", default=env("TABLE_URI"), help="Delta table URI [PARKA_TABLE_URI]")
    shared = p.add_argument_group("flags shared with parka ingest")
    add_shared_flags(
        shared,
        {
            "consumer_group": {
                "help": "Kafka group.id for the source's consumers (default: Spark's own, unique per query); "
                "offsets live in the checkpoint either way [PARKA_CONSUMER_GROUP]"
            },
            "app_id": {
                "help": "application id: the Delta txn actions' <app id>-<partition> (raw mode), the query name "
                "and the default checkpoint folder (default: parka-<topic>) [PARKA_APP_ID]"
            },
            "allowed_latency": {
                "help": "seconds between micro-batches when no --trigger is given (processing-time=<this>s) "
                "[PARKA_ALLOWED_LATENCY]"
            },
            "max_segments_per_commit": {
                "aliases": ["--max-offsets-per-trigger"],
                "default": env("MAX_OFFSETS_PER_TRIGGER", env("MAX_SEGMENTS_PER_COMMIT")),
                "help": "most Kafka messages (segments) per micro-batch, i.e. per Delta commit; no limit by "
                "default [PARKA_MAX_SEGMENTS_PER_COMMIT or PARKA_MAX_OFFSETS_PER_TRIGGER]",
            },
            "target_file_size": {
                "help": "raw mode: stitch each task's segments into data files of up to this size (e.g. 128MiB) "
                "[PARKA_TARGET_FILE_SIZE]"
            },
            "auto_offset_reset": {"help": "where a new query (no checkpoint yet) starts [PARKA_AUTO_OFFSET_RESET]"},
            "seek_offsets": {
                "help": 'JSON {"partition": offset} where a new query starts; Spark needs every partition listed '
                "[PARKA_SEEK_OFFSETS]"
            },
            "kafka_setting": {
                "help": "Kafka client setting, repeatable, passed as kafka.KEY (security.protocol, ssl.*, sasl.*; "
                "sasl.username/sasl.password become sasl.jaas.config); secrets are never logged "
                "[PARKA_KAFKA_SETTINGS, comma-separated]"
            },
            "end_at_latest": {
                "help": "same as --trigger available-now: ingest what is in the topic at start, then exit 0 "
                "[PARKA_END_AT_LATEST=1]"
            },
            "schema_evolution": {
                "help": "merge: the table takes new fields (raw mode: a segment's, at any depth, widenings where "
                "it has type widening; decode mode: --schema's, Delta mergeSchema) [PARKA_SCHEMA_EVOLUTION]"
            },
            "dlq_table": {
                "help": "raw mode: Delta table for messages that are not segments or that the table cannot take; "
                "without it such a message fails its micro-batch after what came before it in its partition "
                "is committed [PARKA_DLQ_TABLE]"
            },
            "storage_option": {
                "help": "object store option, repeatable: fs.* Hadoop settings or AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, AWS_REGION "
                "[PARKA_STORAGE_OPTIONS, comma-separated]"
            },
            "checkpoint_interval": {
                "help": "raw mode: every N commits, write a Delta checkpoint and remove orphan files; 0 never "
                "[PARKA_CHECKPOINT_INTERVAL]"
            },
        },
    )
    spark = p.add_argument_group("Spark flags")
    spark.add_argument(
        "--mode",
        choices=["raw", "decode"],
        default=env("SPARK_MODE", "raw"),
        help="raw: segments land unchanged, committed with a txn per Kafka partition (as parka ingest); "
        "decode: records decoded in Spark and written by delta-spark (needed for --reserved drop, "
        "--metadata) [PARKA_SPARK_MODE]",
    )
    spark.add_argument(
        "--commit-engine",
        choices=["delta-spark", "delta-rs"],
        default=env("COMMIT_ENGINE", "delta-spark"),
        help="raw mode: who commits the data files. delta-spark: delta-spark's transaction API in the JVM, "
        "which applies the table's features (row tracking, in-commit timestamps, liquid clustering...); "
        "delta-rs: deltalake on the driver, as parka ingest [PARKA_COMMIT_ENGINE]",
    )
    spark.add_argument(
        "--trigger",
        default=env("TRIGGER"),
        help="available-now, or processing-time=<n>[ms|s|m|h] (default: processing-time=<allowed latency>s) "
        "[PARKA_TRIGGER]",
    )
    spark.add_argument(
        "--checkpoint-location",
        default=env("CHECKPOINT_LOCATION"),
        help="Structured Streaming checkpoint (default: <table>/_parka_checkpoints/<app id>) "
        "[PARKA_CHECKPOINT_LOCATION]",
    )
    spark.add_argument(
        "--starting-offsets",
        default=env("STARTING_OFFSETS"),
        help="Kafka source startingOffsets (earliest, latest or Spark's JSON); overrides "
        "--auto-offset-reset [PARKA_STARTING_OFFSETS]",
    )
    spark.add_argument(
        "-O",
        "--source-option",
        action="append",
        default=env_pairs("SOURCE_OPTIONS"),
        metavar="KEY=VALUE",
        help="other Kafka source option, repeatable (failOnDataLoss, minPartitions...) "
        "[PARKA_SOURCE_OPTIONS, comma-separated]",
    )
    spark.add_argument(
        "--schema",
        default=env("SCHEMA"),
        help="the topic's Avro schema, a file or JSON text (default: the table's, else the first "
        "segment's) [PARKA_SCHEMA]",
    )
    spark.add_argument(
        "--reserved",
        choices=["keep", "drop"],
        default=env("RESERVED", "keep"),
        help="keep: the __parka_key/__parka_timestamp/__parka_headers columns go into the table "
        "(as parka ingest does); drop: they do not (decode mode) [PARKA_RESERVED]",
    )
    spark.add_argument(
        "--metadata",
        default=env("METADATA", ""),
        help="comma-separated Kafka metadata to add as kafka_<name> columns: topic, partition, offset, "
        "index, timestamp (decode mode) [PARKA_METADATA]",
    )
    spark.add_argument(
        "--master",
        default=env("SPARK_MASTER"),
        help="Spark master (default local[*]; an active session is reused) [PARKA_SPARK_MASTER]",
    )
    spark.add_argument(
        "-c",
        "--spark-conf",
        action="append",
        default=env_pairs("SPARK_CONF"),
        metavar="KEY=VALUE",
        help="Spark setting, repeatable [PARKA_SPARK_CONF, comma-separated]",
    )
    spark.add_argument(
        "--packages",
        default=env("SPARK_PACKAGES", ""),
        metavar="COORDS",
        help="more Maven coordinates (group:artifact:version, comma-separated) for the session's jars, "
        "besides delta-spark and the Kafka source; e.g. hadoop-aws for s3a:// [PARKA_SPARK_PACKAGES]",
    )
    return p


def _read_schema(text: str | None) -> str | None:
    if text is None or text.lstrip().startswith("{"):
        return text
    path = Path(text)
    if not path.is_file():
        raise SystemExit(f"parka spark-ingest: --schema is neither JSON nor a file: {text!r}")
    return path.read_text()


def settings_from_args(args: argparse.Namespace) -> Any:
    """The :class:`SparkIngestSettings` the flags describe.

    Raises:
        SystemExit: a malformed flag (argparse style).
        ConfigError: a value the settings reject.
    """
    from ._ingest import SparkIngestSettings

    if not args.topic or not args.table_uri:
        raise SystemExit("parka spark-ingest: TOPIC and TABLE_URI are required (or PARKA_TOPIC / PARKA_TABLE_URI)")
    if args.trigger and args.end_at_latest and args.trigger != "available-now":
        raise SystemExit(f"parka spark-ingest: --end-at-latest contradicts --trigger {args.trigger}")
    trigger = args.trigger or ("available-now" if args.end_at_latest else f"processing-time={args.allowed_latency}s")
    starting = args.starting_offsets or args.auto_offset_reset
    seek = seek_offsets(args.seek_offsets, _PROG)
    if seek:
        if args.starting_offsets:
            raise SystemExit("parka spark-ingest: give --seek-offsets or --starting-offsets, not both")
        starting = json.dumps({args.topic: {str(p): off for p, off in seek.items()}})
    kafka = pairs(args.kafka_setting, "-K", _PROG)
    if args.consumer_group:
        kafka.setdefault("group.id", args.consumer_group)
    return SparkIngestSettings(
        topic=args.topic,
        table_uri=args.table_uri,
        bootstrap_servers=kafka.pop("bootstrap.servers", args.kafka),
        kafka_conf=kafka,
        source_options=pairs(args.source_option, "--source-option", _PROG),
        app_id=args.app_id,
        checkpoint_location=args.checkpoint_location,
        trigger=trigger,
        starting_offsets=starting,
        max_offsets_per_trigger=None if args.max_segments_per_commit is None else int(args.max_segments_per_commit),
        partition_by=columns(args.partition_by),
        schema=_read_schema(args.schema),
        schema_evolution=args.schema_evolution,
        reserved=args.reserved,
        metadata=tuple(m.strip() for m in args.metadata.split(",") if m.strip()),
        storage_options=pairs(args.storage_option, "--storage-option", _PROG),
        mode=args.mode,
        dlq_table_uri=args.dlq_table,
        commit_engine=args.commit_engine if args.mode == "raw" else "delta-spark",
        checkpoint_interval=args.checkpoint_interval,
        target_file_size=args.target_file_size,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(quiet=args.quiet, log_format=args.log_format, verbose=args.verbose)
    from ._ingest import ingest, settings_summary
    from ._session import session

    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        settings = settings_from_args(args)
        log.info("%s", settings_summary(settings))
        if not _ready(settings, args, stop):
            return EXIT_OK  # stopped while waiting
        spark = session(
            args.master,
            f"parka spark-ingest {settings.app}",
            extra_conf=pairs(args.spark_conf, "-c", _PROG),
            extra_packages=[c.strip() for c in args.packages.split(",") if c.strip()],
        )
        bar: Any = None
        if not args.quiet and not sys.stderr.isatty():  # a log: a summary line every --progress-interval
            bar = LogProgress(log, interval_s=args.progress_interval)
        elif settings.trigger == "available-now" and not args.quiet:
            bar = ProgressBar(label="spark-ingest", unit="messages")
        with serve_metrics(args.metrics_port, topic=settings.topic, prog=_PROG) as metrics:
            try:
                stats = ingest(spark, settings, stop=stop, metrics=metrics, progress=bar)
            finally:
                if bar is not None:
                    bar.close()
    except Exception as exc:  # one line (docs/operating.md); the trace with --verbose, and in Spark's log
        stopped(log, exc)
        return exit_code_for(exc)
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)
    log.info("done: %s", stats)
    print(json.dumps({"status": "ok", **stats.__dict__}))
    return EXIT_OK


def _ready(settings: Any, args: argparse.Namespace, stop: threading.Event) -> bool:
    """Before a Spark session starts: the table location and the topic answer
    (:func:`parka.lake.probe_until_ready`), so that a run-once ends in seconds with
    a line naming the cause rather than in a JVM trace, and a daemon says what it waits for.
    Kafka is probed with librdkafka when the ``-K`` settings are ones it takes; an object store
    configured with Hadoop ``fs.*`` settings is left to Spark.

    Raises:
        BlockedError: a run-once and a cause that did not clear.
    """
    from parka.lake import probe_until_ready

    options = dict(settings.storage_options)
    local = "://" not in settings.table_uri or settings.table_uri.startswith("file:")
    return probe_until_ready(
        topic=settings.topic,
        table_uri=settings.table_uri,
        kafka_conf={**settings.kafka_conf, "bootstrap.servers": settings.bootstrap_servers},
        storage_options=options,
        run_once=settings.trigger == "available-now",
        timeout_s=args.broker_timeout,
        remind_s=args.retry_log_interval,
        stop=stop,
        log=log,
        check_table=local or not any(k.startswith("fs.") for k in options),
    )


if __name__ == "__main__":
    sys.exit(main())
