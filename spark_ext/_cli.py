"""``parka spark-ingest TOPIC TABLE_URI``: the ingestion on Spark. The flags ``parka ingest`` also
has mean the same thing and read the same ``PARKA_*`` environment variables (shown in
``--help``); Spark's own flags follow. Credentials belong in the environment or ``-K`` flags
and are never logged."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import threading
from typing import Any

from parka.ops.cli_util import serve_metrics, setup_logging, stopped
from parka.ops.health import EXIT_OK, exit_code_for, run_status
from parka.ops.progress import LogProgress, ProgressBar
from parka.ops.settings import TABLE_URI, TOPIC, SettingsParser
from parka.ops.stopping import StopGuard

from parka.errors import ConfigError

from ._settings import SHARED_FLAGS, SPARK_FLAGS, SparkIngestSettings

__all__ = ["build_parser", "main", "settings_from_args"]

_PROG = "parka spark-ingest"
log = logging.getLogger("parka.spark_ingest")


def build_parser() -> SettingsParser:
    """``parka spark-ingest``'s flags, from :mod:`._settings`: each one's value is the flag's, else
    its ``PARKA_*`` variable's, else its default, and is checked (exit 2 naming both)."""
    p = SettingsParser(
        prog=_PROG,
        description="Ingest a topic of parka Parquet segments into a Delta table (or, with --catalog, an Iceberg "
        "table) with Spark Structured Streaming, exactly once. --mode raw (default) lands each segment unchanged "
        "as a data file and commits with parka ingest's per-partition txn; --mode decode decodes records and "
        "writes through delta-spark (Iceberg: Iceberg's Spark writer).",
    )
    p.add_settings((TOPIC, TABLE_URI))
    p.add_settings(SHARED_FLAGS, title="flags shared with parka ingest")
    p.add_settings(SPARK_FLAGS, title="Spark flags")
    return p


def settings_from_args(args: argparse.Namespace) -> SparkIngestSettings:
    """The :class:`SparkIngestSettings` the parsed flags describe: each field with a flag of its
    own name takes its value; the trigger and the starting offsets follow from ``--trigger``,
    ``--end-at-latest``, ``--allowed-latency``, ``--starting-offsets``, ``--seek-offsets`` and
    ``--auto-offset-reset``.

    Raises:
        SystemExit: no topic or table, or flags that contradict each other (exit 2).
        ConfigError: a value the settings reject.
    """
    parser = build_parser()
    if not args.topic or not args.table_uri:
        parser.error("TOPIC and TABLE_URI are required (or PARKA_TOPIC / PARKA_TABLE_URI)")
    if args.trigger and args.end_at_latest and args.trigger != "available-now":
        parser.error(f"--end-at-latest contradicts --trigger {args.trigger}")
    trigger = args.trigger or ("available-now" if args.end_at_latest else f"processing-time={args.allowed_latency_s}s")
    starting = args.starting_offsets or args.auto_offset_reset
    if args.seek_offsets:
        if args.starting_offsets:
            parser.error("give --seek-offsets or --starting-offsets, not both")
        starting = json.dumps({args.topic: {str(p): off for p, off in args.seek_offsets.items()}})
    kafka = dict(args.kafka_conf)
    if args.consumer_group:
        kafka.setdefault("group.id", args.consumer_group)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(SparkIngestSettings) if hasattr(args, f.name)}
    return SparkIngestSettings(
        **{
            **given,
            "bootstrap_servers": kafka.pop("bootstrap.servers", args.bootstrap_servers),
            "kafka_conf": kafka,
            "trigger": trigger,
            "starting_offsets": starting,
            "commit_engine": args.commit_engine if args.mode == "raw" else "delta-spark",
        }
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(quiet=args.quiet, log_format=args.log_format, verbose=args.verbose)
    from ._ingest import ingest, settings_summary
    from ._session import session

    stop = threading.Event()
    guard: StopGuard | None = None
    try:
        settings = settings_from_args(args)
        if threading.current_thread() is threading.main_thread():
            # the first SIGTERM/SIGINT stops the query after its micro-batch; past
            # --stop-timeout, or at a second signal, the driver exits at once (143)
            guard = StopGuard(stop.set, bound_s=settings.stop_timeout_s, name=_PROG)
            guard.install()
        log.info("%s", settings_summary(settings))
        if not _ready(settings, args, stop):
            return EXIT_OK  # stopped while waiting
        s3a, s3a_conf = _s3a_jars(settings, args.packages, args.spark_conf)
        spark = session(
            args.master,
            f"parka spark-ingest {settings.app}",
            extra_conf={**s3a_conf, **args.spark_conf},
            extra_packages=[*args.packages, *_iceberg_packages(settings, args.spark_conf), *s3a],
        )
        bar: Any = None
        if not args.quiet and not sys.stderr.isatty():  # a log: a summary line every --progress-interval
            bar = LogProgress(log, interval_s=args.progress_interval_s)
        elif settings.trigger == "available-now" and not args.quiet:
            bar = ProgressBar(label="spark-ingest", unit="messages")
        with serve_metrics(
            args.metrics_port, topic=settings.topic, prog=_PROG, addr=args.metrics_bind_address
        ) as metrics:
            try:
                stats = ingest(spark, settings, stop=stop, metrics=metrics, progress=bar)
            finally:
                if bar is not None:
                    bar.close()
    except Exception as exc:  # one line (docs/operating.md); the trace with --verbose, and in Spark's log
        stopped(log, exc)
        return exit_code_for(exc)
    finally:
        if guard is not None:
            guard.uninstall()
    log.info("done: %s", stats)
    end = run_status(
        segments=stats.segments,
        covered_files=stats.covered_files,
        dead_letters=stats.dead_letters,
        dlq_table=settings.dlq_table_uri,
        run_once=settings.trigger == "available-now",
    )
    print(json.dumps({"status": end.status, **stats.__dict__}))
    if end.error is not None:
        log.error("%s", end.error)
    return end.exit_code


def _iceberg_packages(settings: SparkIngestSettings, spark_conf: dict[str, str]) -> list[str]:
    """The jars decode mode into Iceberg writes with (Iceberg's Spark runtime, and what its catalog
    needs: :func:`._session.iceberg_packages`); none for the other modes.

    Raises:
        ConfigError: a catalog decode mode cannot give Spark, unless ``spark_conf`` (``-c``)
            configures the Spark catalog of that name.
    """
    if settings.catalog is None or settings.mode != "decode":
        return []
    from parka.lake import IcebergEngine

    from ._options import iceberg_catalog_conf
    from ._session import iceberg_packages

    engine = IcebergEngine(settings.catalog, settings.catalog_options, settings.storage_options)
    try:
        conf = iceberg_catalog_conf(settings.catalog, engine.properties)
    except ConfigError:
        if f"spark.sql.catalog.{settings.catalog}" not in spark_conf:
            raise
        conf = {}  # the Spark catalog is configured with -c: only the runtime
    return iceberg_packages(conf)


def _s3a_jars(
    settings: SparkIngestSettings, given: list[str], spark_conf: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The jars and settings of s3a (:func:`._session.s3a_jars`) when the checkpoint is in S3 (an
    ``s3://`` table's default one is): Spark writes it through Hadoop's s3a FileSystem, which
    pyspark does not ship. None otherwise."""
    if not settings.checkpoint.startswith("s3a://"):
        return [], {}
    from ._session import s3a_jars

    return s3a_jars(given, spark_conf)


def _ready(settings: SparkIngestSettings, args: argparse.Namespace, stop: threading.Event) -> bool:
    """Before a Spark session starts: the table location and the topic answer
    (:func:`parka.ops.preflight.probe_until_ready`), so that a run-once ends in seconds with
    a line naming the cause rather than in a JVM trace, and a daemon says what it waits for.
    Kafka is probed with librdkafka when the ``-K`` settings are ones it takes; an object store
    configured with Hadoop ``fs.*`` settings is left to Spark.

    Raises:
        BlockedError: a run-once and a cause that did not clear.
    """
    from parka.ops.preflight import probe_until_ready

    options = dict(settings.storage_options)
    local = "://" not in settings.table_uri or settings.table_uri.startswith("file:")
    probe = None
    if settings.catalog is not None:
        from parka.lake import IcebergEngine

        probe = IcebergEngine(settings.catalog, settings.catalog_options, options).blocker
    return probe_until_ready(
        topic=settings.topic,
        table_uri=settings.table_uri,
        kafka_conf={**settings.kafka_conf, "bootstrap.servers": settings.bootstrap_servers},
        storage_options=options,
        run_once=settings.trigger == "available-now",
        timeout_s=args.broker_timeout_s,
        remind_s=args.retry_log_interval_s,
        stop=stop,
        log=log,
        check_table=local or not any(k.startswith("fs.") for k in options),
        table_probe=probe,
    )


if __name__ == "__main__":
    sys.exit(main())
