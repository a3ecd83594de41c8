"""The ``parka`` command. Subcommands live with their packages and are imported on use, so the
core never imports the consumer or Spark layers at import time."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "ingest": "parka.consumer._cli",
        "spark-ingest": "parka.spark_ext._cli",
        "optimize": "parka.lake._optimize_cli",
    }
    if not args or args[0] in ("-h", "--help") or args[0] not in commands:
        print("usage: parka {ingest,spark-ingest,optimize} ... (parka COMMAND --help for its flags)", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    import importlib

    module = importlib.import_module(commands[args[0]])
    code: int = module.main(args[1:])
    return code


if __name__ == "__main__":
    sys.exit(main())
