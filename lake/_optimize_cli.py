"""``parka optimize TABLE_URI``: compact a Delta table's small files (optionally in Z-order),
VACUUM and checkpoint it, safely next to running ``parka ingest`` / ``parka spark-ingest``
(:func:`parka.lake._optimize.optimize_table`). Prints one JSON line with the result."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys

from parka._cli_util import add_shared_flags, columns, env, pairs, redacted, setup_logging, size_bytes, stopped
from parka._health import exit_code_for

from ._optimize import DEFAULT_TARGET_SIZE, optimize_table

_PROG = "parka optimize"
log = logging.getLogger("parka.optimize")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=_PROG,
        description="Compact a Delta table's small files into large ones (optionally in Z-order), VACUUM and "
        "checkpoint it; safe while parka ingest and parka spark-ingest write the same table. "
        "Each flag's environment variable is shown in brackets.",
    )
    p.add_argument("table_uri", nargs="?", default=env("TABLE_URI"), help="Delta table URI [PARKA_TABLE_URI]")
    p.add_argument(
        "--target-file-size",
        type=size_bytes,
        default=size_bytes(env("TARGET_FILE_SIZE", f"{DEFAULT_TARGET_SIZE // 1024 // 1024}MiB")),
        help="size a compacted file aims at, e.g. 128MiB, 1GiB [PARKA_TARGET_FILE_SIZE]",
    )
    p.add_argument(
        "--z-order",
        default=env("Z_ORDER", ""),
        help="comma-separated columns: rewrite each table partition sorted along their Z-order curve [PARKA_Z_ORDER]",
    )
    p.add_argument(
        "--vacuum-retention-hours",
        type=int,
        default=env("VACUUM_RETENTION_HOURS"),
        help="then VACUUM: delete files removed more than this many hours ago (at least the table's "
        "delta.deletedFileRetentionDuration); no VACUUM without it [PARKA_VACUUM_RETENTION_HOURS]",
    )
    p.add_argument(
        "--allow-short-retention",
        action="store_true",
        help="allow a VACUUM retention below the table's delta.deletedFileRetentionDuration: readers of "
        "versions older than it fail",
    )
    p.add_argument("--no-checkpoint", action="store_true", help="do not write a checkpoint afterwards")
    add_shared_flags(p, only=("storage_option", "quiet", "verbose", "log_format"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(quiet=args.quiet, log_format=args.log_format, verbose=args.verbose)
    if not args.table_uri:
        raise SystemExit(f"{_PROG}: TABLE_URI is required (or PARKA_TABLE_URI)")
    storage_options = pairs(args.storage_option, "--storage-option", _PROG)
    log.info("optimizing %s (storage options: %s)", args.table_uri, redacted(storage_options))
    try:
        result = optimize_table(
            args.table_uri,
            target_size=args.target_file_size,
            z_order=columns(args.z_order),
            vacuum_retention_hours=None if args.vacuum_retention_hours is None else int(args.vacuum_retention_hours),
            allow_short_retention=args.allow_short_retention,
            checkpoint=not args.no_checkpoint,
            storage_options=storage_options,
        )
    except Exception as exc:  # one line for the operator (docs/operating.md); the trace with --verbose
        stopped(log, exc)
        return exit_code_for(exc)
    print(json.dumps({"status": "ok", **dataclasses.asdict(result)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
