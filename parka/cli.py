"""The ``parka`` command. Subcommands live with their packages and are imported on use, so the
core never imports the consumer or Spark layers at import time (``parka --help`` imports none)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NamedTuple, NoReturn


class Command(NamedTuple):
    module: str  # imported only when the command runs; its main(argv) -> exit code
    summary: str  # the line ``parka --help`` shows


COMMANDS: dict[str, Command] = {
    "ingest": Command(
        "parka.consumer._cli",
        "land a topic's Parquet segments in a table (Delta, or Iceberg with --catalog) as data files, without "
        "decoding, exactly once",
    ),
    "spark-ingest": Command(
        "parka.spark_ext._cli",
        "the same ingestion on Spark Structured Streaming (raw or decode mode), into a Delta or Iceberg table",
    ),
    "optimize": Command(
        "parka.ops.optimize_cli",
        "compact a table's small files; a Delta table's optionally in Z-order, then VACUUM and checkpoint it",
    ),
}


def usage() -> str:
    """The text of ``parka --help``: the commands, one line each."""
    width = max(len(name) for name in COMMANDS)
    lines = [
        f"usage: parka {{{','.join(COMMANDS)}}} ...",
        "",
        "Kafka carrying Parquet segments (KIP-1008), landed in Delta Lake and Apache Iceberg tables without "
        "decoding them again.",
        "",
        "commands:",
        *(f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()),
        "",
        "parka COMMAND --help lists that command's flags.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if not args or args[0] not in COMMANDS:
        problem = "no command given" if not args else f"unknown command {args[0]!r}"
        print(f"{usage()}\n\nparka: error: {problem} (choose from {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    import importlib

    from .errors import MissingExtraError

    try:
        module = importlib.import_module(COMMANDS[args[0]].module)
    except MissingExtraError as exc:  # e.g. `parka ingest` without the lake extra
        print(f"parka {args[0]}: {exc}", file=sys.stderr)
        return 2
    code: int = module.main(args[1:])
    return code


def run() -> NoReturn:
    """The ``parka`` console script: :func:`main`, then the process ends without the interpreter's
    shutdown. At that shutdown deltalake's Rust runtime aborted finished runs on this stack
    ("terminate called without an active exception", SIGABRT: exit code 134, or -6 to a parent;
    delta-io/delta-rs#2184): a ``parka ingest`` that had committed everything and printed its
    result line was reported as crashed. What the shutdown does that matters here is done first:
    the log handlers flushed and closed, stdout and stderr flushed. ``PARKA_CLEAN_EXIT=0`` leaves
    the exit to the interpreter again."""
    code = main()
    if os.environ.get("PARKA_CLEAN_EXIT", "1") == "0":
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # a reader gone (a closed pipe) or a closed stream: nothing left to keep
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
