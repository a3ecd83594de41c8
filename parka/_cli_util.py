"""Pieces both daemons' command lines share (``parka ingest``, ``parka spark-ingest``): flag
defaults from ``PARKA_*`` environment variables, ``key=value`` flags, JSON log lines.
Standard library only, so the core stays free of the consumer and Spark layers."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

__all__ = ["JsonFormatter", "env", "env_pairs", "pairs"]


def env(name: str, default: Any = None) -> Any:
    """The value of ``PARKA_<name>``, or ``default``."""
    return os.environ.get(f"PARKA_{name}", default)


def env_pairs(name: str) -> list[str]:
    """``PARKA_<name>`` split at commas: the default of a repeatable ``key=value`` flag."""
    raw = env(name)
    return [p for p in raw.split(",") if p] if raw else []


def pairs(values: list[str], flag: str, prog: str) -> dict[str, str]:
    """``key=value`` strings as a dict; exits naming ``prog`` and ``flag`` on a malformed one."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"{prog}: {flag} expects key=value, got {item!r}")
        out[key.strip()] = value
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: ``ts`` (UTC), ``level``, ``logger``, ``msg``."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname.lower(),
                "logger": record.name,
                "msg": record.getMessage(),
            }
        )
