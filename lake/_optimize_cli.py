"""``parka optimize TABLE_URI``: compact a Delta table's small files (optionally in Z-order),
VACUUM and checkpoint it, safely next to running ``parka ingest`` / ``parka spark-ingest``
(:func:`parka.lake.delta.optimize_table`); with ``--catalog``, an Iceberg table's
(:func:`parka.lake.iceberg.optimize_iceberg`: compaction, and snapshot expiry for
``--vacuum-retention-hours``). Prints one JSON line with the result."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from typing import Any

from parka import _settings as s
from parka._cli_util import columns, integer, redacted, setup_logging, stopped
from parka._health import exit_code_for
from parka._settings import Setting, SettingsParser
from parka.errors import ConfigError

from ._compaction import DEFAULT_TARGET_SIZE
from .delta import optimize_table

_PROG = "parka optimize"
log = logging.getLogger("parka.optimize")

FLAGS: tuple[Setting, ...] = (
    s.TABLE_URI,
    s.TARGET_FILE_SIZE.but(default=DEFAULT_TARGET_SIZE, help="size a compacted file aims at, e.g. 128MiB, 1GiB"),
    Setting(
        "z_order",
        ("--z-order",),
        ("Z_ORDER",),
        "comma-separated columns: rewrite each table partition sorted along their Z-order curve (Delta tables)",
        default=(),
        parse=columns,
    ),
    Setting(
        "vacuum_retention_hours",
        ("--vacuum-retention-hours",),
        ("VACUUM_RETENTION_HOURS",),
        "then VACUUM: delete files removed more than this many hours ago (at least the table's "
        "delta.deletedFileRetentionDuration); with --catalog, expire the Iceberg snapshots older than this and "
        "their files",
        default_text="no VACUUM, no expiry",
        parse=integer,
    ),
    Setting(
        "allow_short_retention",
        ("--allow-short-retention",),
        ("ALLOW_SHORT_RETENTION",),
        help="allow a VACUUM retention below the table's delta.deletedFileRetentionDuration: readers of "
        "versions older than it fail (Delta tables)",
        default=False,
        kind="switch",
    ),
    Setting(
        "no_checkpoint",
        ("--no-checkpoint",),
        ("NO_CHECKPOINT",),
        help="do not write a checkpoint afterwards (Delta tables)",
        default=False,
        kind="switch",
    ),
    s.STORAGE_OPTIONS,
    s.CATALOG.but(
        help="the table is an Apache Iceberg table of this pyiceberg catalog (.pyiceberg.yaml, "
        "PYICEBERG_CATALOG__<NAME>__*, or --catalog-option), TABLE_URI its identifier, namespace.name; without "
        "it, a Delta table"
    ),
    s.CATALOG_OPTIONS,
    s.QUIET,
    s.VERBOSE,
    s.LOG_FORMAT,
)
"""``parka optimize``'s command line, in ``--help`` order (the storage and log flags are the
daemons')."""


def build_parser() -> SettingsParser:
    p = SettingsParser(
        prog=_PROG,
        description="Compact a table's small files into large ones: a Delta table's (optionally in Z-order), then "
        "VACUUM and checkpoint it; with --catalog an Iceberg table's, then expire its old snapshots. Safe while "
        "parka ingest and parka spark-ingest write the same table.",
    )
    p.add_settings(FLAGS)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(quiet=args.quiet, log_format=args.log_format, verbose=args.verbose)
    if not args.table_uri:
        parser.error("TABLE_URI is required (or PARKA_TABLE_URI)")
    storage_options = args.storage_options
    log.info("optimizing %s (storage options: %s)", args.table_uri, redacted(storage_options))
    try:
        if args.catalog is not None:
            return _optimize_iceberg(args)
        result = optimize_table(
            args.table_uri,
            target_size=args.target_file_size,
            z_order=args.z_order,
            vacuum_retention_hours=args.vacuum_retention_hours,
            allow_short_retention=args.allow_short_retention,
            checkpoint=not args.no_checkpoint,
            storage_options=storage_options,
        )
    except Exception as exc:  # one line for the operator (docs/operating.md); the trace with --verbose
        stopped(log, exc)
        return exit_code_for(exc)
    print(json.dumps({"status": "ok", **dataclasses.asdict(result)}))
    return 0


def _optimize_iceberg(args: Any) -> int:
    """``--catalog``: the Iceberg table ``TABLE`` (``namespace.name``): compaction, and with
    ``--vacuum-retention-hours`` the expiry of older snapshots and their files."""
    if args.z_order:
        raise ConfigError("--z-order", ",".join(args.z_order), "nothing", reason="not built for Iceberg tables")
    from .iceberg import IcebergEngine, optimize_iceberg

    result = optimize_iceberg(
        IcebergEngine(args.catalog, args.catalog_options, args.storage_options),
        args.table_uri,
        target_size=args.target_file_size,
        expire_older_than_hours=args.vacuum_retention_hours,
        storage_options=args.storage_options,
    )
    print(json.dumps({"status": "ok", **dataclasses.asdict(result)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
