"""``parka ingest TOPIC TABLE_URI``: the ingestion daemon. Every flag can also come from an
environment variable (shown in ``--help``); credentials belong there or in ``-K`` flags, and
are never logged."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from parka._cli_util import JsonFormatter, env, env_pairs, pairs
from parka.errors import ParkaError

from ._ingest import IngestionConsumer, IngestSettings

_PROG = "parka ingest"
log = logging.getLogger("parka.ingest")

_SECRET_HINTS = ("password", "secret", "token", "key")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="parka ingest",
        description="Ingest a topic of parka Parquet segments into a Delta table, exactly once. "
        "Each flag's environment variable is shown in brackets.",
    )
    p.add_argument("topic", nargs="?", default=env("TOPIC"), help="Kafka topic [PARKA_TOPIC]")
    p.add_argument("table_uri", nargs="?", default=env("TABLE_URI"), help="Delta table URI [PARKA_TABLE_URI]")
    p.add_argument("-k", "--kafka", default=env("KAFKA", "localhost:9092"), help="bootstrap servers [PARKA_KAFKA]")
    p.add_argument(
        "-g",
        "--consumer-group",
        default=env("CONSUMER_GROUP"),
        help="consumer group (default: the app id) [PARKA_CONSUMER_GROUP]",
    )
    p.add_argument(
        "-a",
        "--app-id",
        default=env("APP_ID"),
        help="application id for the Delta txn actions (default: parka-<topic>) [PARKA_APP_ID]",
    )
    p.add_argument(
        "-l",
        "--allowed-latency",
        type=float,
        default=float(env("ALLOWED_LATENCY", 30)),
        help="seconds a segment may wait before it is committed [PARKA_ALLOWED_LATENCY]",
    )
    p.add_argument(
        "--min-bytes-per-commit",
        type=int,
        default=int(env("MIN_BYTES_PER_COMMIT", 64 * 1024 * 1024)),
        help="commit once this many bytes are buffered [PARKA_MIN_BYTES_PER_COMMIT]",
    )
    p.add_argument(
        "--max-segments-per-commit",
        type=int,
        default=int(env("MAX_SEGMENTS_PER_COMMIT", 1000)),
        help="commit once this many segments are buffered [PARKA_MAX_SEGMENTS_PER_COMMIT]",
    )
    p.add_argument(
        "--auto-offset-reset",
        choices=["earliest", "latest"],
        default=env("AUTO_OFFSET_RESET", "earliest"),
        help="where a partition the table has never seen starts [PARKA_AUTO_OFFSET_RESET]",
    )
    p.add_argument(
        "--seek-offsets",
        default=env("SEEK_OFFSETS"),
        help='JSON {"partition": offset} for partitions the table has never seen [PARKA_SEEK_OFFSETS]',
    )
    p.add_argument(
        "-K",
        "--kafka-setting",
        action="append",
        default=env_pairs("KAFKA_SETTINGS"),
        metavar="KEY=VALUE",
        help="librdkafka setting, repeatable (TLS, SASL, ...) [PARKA_KAFKA_SETTINGS, comma-separated]",
    )
    p.add_argument(
        "--end-at-latest",
        action="store_true",
        default=env("END_AT_LATEST", "") in ("1", "true"),
        help="ingest what is in the topic at start, commit and exit 0 [PARKA_END_AT_LATEST=1]",
    )
    p.add_argument(
        "--checkpoint-interval",
        type=int,
        default=int(env("CHECKPOINT_INTERVAL", 10)),
        help="write a Delta checkpoint every N commits, 0 never [PARKA_CHECKPOINT_INTERVAL]",
    )
    p.add_argument(
        "--partition-by",
        default=env("PARTITION_BY", ""),
        help="comma-separated table partition columns, for a new table [PARKA_PARTITION_BY]",
    )
    p.add_argument(
        "--schema-evolution",
        choices=["none", "merge"],
        default=env("SCHEMA_EVOLUTION", "none"),
        help="merge: add new nullable columns to the table [PARKA_SCHEMA_EVOLUTION]",
    )
    p.add_argument(
        "--dlq-table",
        default=env("DLQ_TABLE"),
        help="Delta table URI for messages the table cannot take; without it such a message "
        "stops ingestion with an error [PARKA_DLQ_TABLE]",
    )
    p.add_argument(
        "--storage-option",
        action="append",
        default=env_pairs("STORAGE_OPTIONS"),
        metavar="KEY=VALUE",
        help="object store option for deltalake, repeatable [PARKA_STORAGE_OPTIONS, comma-separated]",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=env("QUIET", "") in ("1", "true"),
        help="no progress line, warnings and errors only [PARKA_QUIET=1]",
    )
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=env("LOG_FORMAT", "text"),
        help="log line format [PARKA_LOG_FORMAT]",
    )
    return p


class ProgressLine:
    """Records/s, MB/s and lag per partition, redrawn in place on a terminal at most once a second."""

    def __init__(self, stream: Any = sys.stderr) -> None:
        self.stream = stream
        self.started = time.monotonic()
        self.last = 0.0
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def __call__(self, ingest: IngestionConsumer) -> None:
        now = time.monotonic()
        if now - self.last < 1.0:
            return
        self.last = now
        st = ingest.stats
        elapsed = max(now - self.started, 1e-9)
        lag = ingest.lag()
        lag_text = " ".join(f"p{p}:{n}" for p, n in lag.items()) or "-"
        line = (
            f"{st.records:,} records ({st.records / elapsed:,.0f}/s, {st.bytes / elapsed / 1e6:.1f} MB/s) "
            f"in {st.commits} commits; lag {lag_text}"
        )
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
            self.stream.flush()
        else:
            log.info("progress: %s", line)


def settings_from_args(args: argparse.Namespace) -> IngestSettings:
    if not args.topic or not args.table_uri:
        raise SystemExit("parka ingest: TOPIC and TABLE_URI are required (or PARKA_TOPIC / PARKA_TABLE_URI)")
    app_id = args.app_id or f"parka-{args.topic}"
    kafka = pairs(args.kafka_setting, "-K", _PROG)
    kafka.setdefault("bootstrap.servers", args.kafka)
    kafka.setdefault("group.id", args.consumer_group or app_id)
    try:
        seek = {int(k): int(v) for k, v in json.loads(args.seek_offsets).items()} if args.seek_offsets else {}
    except (ValueError, AttributeError) as exc:
        raise SystemExit(f'parka ingest: --seek-offsets must be JSON like {{"0": 123}}: {exc}') from None
    return IngestSettings(
        topic=args.topic,
        table_uri=args.table_uri,
        kafka_conf=kafka,
        app_id=app_id,
        allowed_latency_s=args.allowed_latency,
        min_bytes_per_commit=args.min_bytes_per_commit,
        max_segments_per_commit=args.max_segments_per_commit,
        auto_offset_reset=args.auto_offset_reset,
        seek_offsets=seek,
        end_at_latest=args.end_at_latest,
        checkpoint_interval=args.checkpoint_interval,
        partition_by=tuple(c.strip() for c in args.partition_by.split(",") if c.strip()),
        schema_evolution=args.schema_evolution,
        dlq_table_uri=args.dlq_table,
        storage_options=pairs(args.storage_option, "--storage-option", _PROG),
    )


def _redacted(conf: dict[str, Any]) -> dict[str, Any]:
    return {k: ("***" if any(h in k.lower() for h in _SECRET_HINTS) else v) for k, v in conf.items()}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    if args.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("parka")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if args.quiet else logging.INFO)
    settings = settings_from_args(args)
    log.info(
        "ingesting %s into %s as app %s (kafka settings: %s)",
        settings.topic,
        settings.table_uri,
        settings.app_id,
        _redacted(settings.kafka_conf),
    )
    progress = None if args.quiet else ProgressLine()
    ingest = IngestionConsumer(settings, progress=progress)
    ingest.install_signal_handlers()
    try:
        stats = ingest.run()
    except ParkaError as exc:
        if progress is not None and progress.tty:
            sys.stderr.write("\n")
        log.error("stopped: %s: %s", type(exc).__name__, exc)
        return 1
    if progress is not None and progress.tty:
        sys.stderr.write("\n")
    log.info("done: %s", stats)
    print(json.dumps({"status": "ok", **stats.__dict__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
