"""What parka's command lines share (``parka ingest``, ``parka spark-ingest``, ``parka optimize``),
defined once: the shared flags (each with its ``PARKA_*`` environment variable), their parsing, the masking
of secrets in what is logged, the logging set-up and the ``--metrics-port`` server. Standard library only
(``prometheus_client`` is imported when metrics are asked for), so the core stays free of the consumer and
Spark layers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import sys
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .partitioning import parse_partition_by

__all__ = [
    "SECRET_HINTS",
    "stopped",
    "JsonFormatter",
    "add_shared_flags",
    "columns",
    "env",
    "env_pairs",
    "pairs",
    "port_number",
    "redacted",
    "redacted_repr",
    "seek_offsets",
    "serve_metrics",
    "setup_logging",
    "size_bytes",
]

SECRET_HINTS = (
    "password",
    "secret",
    "token",
    "jaas",
    "key",
    "credential",
    "user.info",
    "oauthbearer.config",
    "connection_string",
    "connection.string",
)
"""A setting whose name contains one of these is never logged: its value shows as ``***``
(``sasl.password``, ``ssl.keystore.key``, ``ssl.key.password``, ``sasl.jaas.config``,
``sasl.oauthbearer.client.secret``, ``sasl.oauthbearer.config``,
``schema.registry.basic.auth.user.info``, ``AWS_SECRET_ACCESS_KEY``, ``azure_storage_account_key``,
``azure_storage_connection_string``, ...). This module is the one place that masks secrets:
log lines, reprs and error messages that show settings go through :func:`redacted`."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/:@\s]*):[^/@\s]*@")


def _masked(key: Any, value: Any) -> Any:
    if any(h in str(key).lower() for h in SECRET_HINTS):
        return "***"
    if isinstance(value, str):  # https://user:password@host in a URL setting
        return _URL_PASSWORD.sub(r"\g<head>:***@", value)
    return value


def redacted(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` with the value of every setting that may hold a secret replaced by ``***``, and
    the password of a ``scheme://user:password@host`` URL masked."""
    return {k: _masked(k, v) for k, v in conf.items()}


def redacted_repr(obj: Any) -> str:
    """A dataclass's repr with every mapping field passed through :func:`redacted`: the
    ``__repr__`` of settings objects that hold Kafka client settings or storage options."""
    parts = []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, Mapping):
            value = redacted(value)
        parts.append(f"{f.name}={value!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"


def env(name: str, default: Any = None) -> Any:
    """The value of ``PARKA_<name>``, or ``default``."""
    return os.environ.get(f"PARKA_{name}", default)


def env_pairs(name: str) -> list[str]:
    """``PARKA_<name>`` split at commas: the default of a repeatable ``key=value`` flag."""
    raw = env(name)
    return [p for p in raw.split(",") if p] if raw else []


def pairs(values: list[str], flag: str, prog: str) -> dict[str, str]:
    """``key=value`` strings as a dict; exits naming ``prog`` and ``flag`` on a malformed one."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            # the text may be a secret typed without its key: name it by position, never echo it
            what = "no '='" if not sep else "no key before '='"
            raise SystemExit(f"{prog}: {flag} expects key=value; its value number {len(out) + 1} has {what}")
        out[key.strip()] = value
    return out


def seek_offsets(text: str | None, prog: str) -> dict[int, int]:
    """``--seek-offsets`` JSON (``{"0": 123}``) as partition -> offset; exits naming ``prog`` when
    it is not that."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
        out = {int(k): int(v) for k, v in parsed.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise SystemExit(f'{prog}: --seek-offsets must be JSON like {{"0": 123}}: {exc}') from None
    bad = [p for p, off in out.items() if p < 0 or off < 0]
    if bad:
        raise SystemExit(f"{prog}: --seek-offsets: partition {bad[0]} has a negative partition or offset")
    return out


def columns(text: str) -> tuple[str, ...]:
    """``--partition-by``'s comma-separated specs (``day=date(ts),country``), one string each.

    Raises:
        ConfigError: a malformed spec (see :mod:`parka.partitioning`).
    """
    return tuple(str(s) for s in parse_partition_by(text))


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def size_bytes(text: str) -> int:
    """A size such as ``134217728``, ``128MiB`` or ``64MB`` in bytes (``--target-file-size``).

    Raises:
        argparse.ArgumentTypeError: not a positive size with a known unit.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (a number of bytes, or with B, KB, MB, GB, KiB, MiB, GiB)"
        )
    return int(float(m.group(1)) * _UNITS[unit])


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (``--metrics-port``).

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535; 0 picks a free one)")
    return port


@contextmanager
def serve_metrics(port: int | None, *, topic: str, prog: str) -> Iterator[Any]:
    """With a ``port``, an :class:`parka.metrics.IngestMetrics` in a registry of its own, served
    over HTTP until the block ends; ``None`` without. Exits naming ``prog`` when
    ``prometheus_client`` is missing or the port cannot be bound."""
    if port is None:
        yield None
        return
    try:
        from prometheus_client import CollectorRegistry

        from .metrics import IngestMetrics, serve
    except ImportError as exc:
        raise SystemExit(
            f"{prog}: --metrics-port needs prometheus_client: pip install 'parka[metrics]' ({exc})"
        ) from None
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry, topic=topic)
    try:
        server = serve(port, registry)
    except OSError as exc:
        raise SystemExit(f"{prog}: --metrics-port {port}: {exc}") from None
    try:
        yield metrics
    finally:
        server.shutdown()
        server.server_close()


def _flags(overrides: Mapping[str, Mapping[str, Any]]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    flags: list[tuple[tuple[str, ...], dict[str, Any]]] = [
        (("-k", "--kafka"), {"default": env("KAFKA", "localhost:9092"), "help": "bootstrap servers [PARKA_KAFKA]"}),
        (
            ("-g", "--consumer-group"),
            {"default": env("CONSUMER_GROUP"), "help": "consumer group (default: the app id) [PARKA_CONSUMER_GROUP]"},
        ),
        (
            ("-a", "--app-id"),
            {
                "default": env("APP_ID"),
                "help": "application id: the Delta txn actions' <app id>-<partition> (default: parka-<topic>) "
                "[PARKA_APP_ID]",
            },
        ),
        (
            ("-l", "--allowed-latency"),
            {
                "type": float,
                "default": float(env("ALLOWED_LATENCY", 30)),
                "help": "seconds a segment may wait before it is committed [PARKA_ALLOWED_LATENCY]",
            },
        ),
        (
            ("--max-segments-per-commit",),
            {
                "type": int,
                "default": int(env("MAX_SEGMENTS_PER_COMMIT", 1000)),
                "help": "commit once this many segments are buffered [PARKA_MAX_SEGMENTS_PER_COMMIT]",
            },
        ),
        (
            ("--target-file-size",),
            {
                "type": size_bytes,
                "default": size_bytes(env("TARGET_FILE_SIZE", "128MiB")),
                "help": "stitch the segments of a commit into data files of up to this size (e.g. 128MiB); a "
                "commit is due once this much is buffered, or after --allowed-latency [PARKA_TARGET_FILE_SIZE]",
            },
        ),
        (
            ("--auto-offset-reset",),
            {
                "choices": ["earliest", "latest"],
                "default": env("AUTO_OFFSET_RESET", "earliest"),
                "help": "where a partition the table has never seen starts [PARKA_AUTO_OFFSET_RESET]",
            },
        ),
        (
            ("--seek-offsets",),
            {
                "default": env("SEEK_OFFSETS"),
                "help": 'JSON {"partition": offset} for partitions the table has never seen [PARKA_SEEK_OFFSETS]',
            },
        ),
        (
            ("-K", "--kafka-setting"),
            {
                "action": "append",
                "default": env_pairs("KAFKA_SETTINGS"),
                "metavar": "KEY=VALUE",
                "help": "Kafka client setting, repeatable (TLS, SASL, ...); secrets are never logged "
                "[PARKA_KAFKA_SETTINGS, comma-separated]",
            },
        ),
        (
            ("--end-at-latest",),
            {
                "action": "store_true",
                "default": env("END_AT_LATEST", "") in ("1", "true"),
                "help": "ingest what is in the topic at start, commit and exit 0 [PARKA_END_AT_LATEST=1]",
            },
        ),
        (
            ("--partition-by",),
            {
                "default": env("PARTITION_BY", ""),
                "help": "comma-separated partition columns of a new table: column names, or derived ones: "
                "name=date(col) (UTC date), name=hour(col) (yyyy-MM-dd-HH), name=truncate(col, N); an existing "
                "table's own win, and a different list is refused [PARKA_PARTITION_BY]",
            },
        ),
        (
            ("--schema-evolution",),
            {
                "choices": ["none", "merge"],
                "default": env("SCHEMA_EVOLUTION", "none"),
                "help": "merge: the table takes new fields at any depth, widenings where it has type widening, "
                "relaxed nullability (README: Schema evolution) [PARKA_SCHEMA_EVOLUTION]",
            },
        ),
        (
            ("--dlq-table",),
            {
                "default": env("DLQ_TABLE"),
                "help": "Delta table URI for messages the table cannot take; without it such a message stops "
                "ingestion with an error, after what came before it is committed [PARKA_DLQ_TABLE]",
            },
        ),
        (
            ("--storage-option",),
            {
                "action": "append",
                "default": env_pairs("STORAGE_OPTIONS"),
                "metavar": "KEY=VALUE",
                "help": "object store option, repeatable [PARKA_STORAGE_OPTIONS, comma-separated]",
            },
        ),
        (
            ("--checkpoint-interval",),
            {
                "type": int,
                "default": int(env("CHECKPOINT_INTERVAL", 10)),
                "help": "every N commits, write a Delta checkpoint and remove orphan files; 0 never "
                "[PARKA_CHECKPOINT_INTERVAL]",
            },
        ),
        (
            ("--metrics-port",),
            {
                "type": port_number,
                "default": port_number(env("METRICS_PORT")) if env("METRICS_PORT") else None,
                "help": "serve Prometheus metrics (parka_*) on this port, 0 for a free one (the bound address is "
                "logged); needs parka[metrics] [PARKA_METRICS_PORT]",
            },
        ),
        (
            ("--broker-timeout",),
            {
                "type": float,
                "default": float(env("BROKER_TIMEOUT", 20)),
                "help": "with --end-at-latest: seconds to wait for a Kafka broker to answer before exiting 3; a "
                "daemon waits as long as it takes [PARKA_BROKER_TIMEOUT]",
            },
        ),
        (
            ("--retry-log-interval",),
            {
                "type": float,
                "default": float(env("RETRY_LOG_INTERVAL", 300)),
                "help": "while a daemon waits on a cause (no broker, no topic, a table location it cannot use), "
                "seconds between two lines saying it still does [PARKA_RETRY_LOG_INTERVAL]",
            },
        ),
        (
            ("--progress-interval",),
            {
                "type": float,
                "default": float(env("PROGRESS_INTERVAL", 60)),
                "help": "seconds between two progress: summary lines when stderr is not a terminal (a terminal "
                "gets a progress bar) [PARKA_PROGRESS_INTERVAL]",
            },
        ),
        (
            ("-v", "--verbose"),
            {
                "action": "store_true",
                "default": env("VERBOSE", "") in ("1", "true"),
                "help": "debug log: a line per commit, and the stack trace of an error that stops the run "
                "[PARKA_VERBOSE=1]",
            },
        ),
        (
            ("-q", "--quiet"),
            {
                "action": "store_true",
                "default": env("QUIET", "") in ("1", "true"),
                "help": "warnings and errors only [PARKA_QUIET=1]",
            },
        ),
        (
            ("--log-format",),
            {"choices": ["text", "json"], "default": env("LOG_FORMAT", "text"), "help": "[PARKA_LOG_FORMAT]"},
        ),
    ]
    out = []
    for names, kwargs in flags:
        dest = names[-1].lstrip("-").replace("-", "_")
        change = dict(overrides.get(dest, {}))
        aliases = tuple(change.pop("aliases", ()))
        out.append(((*names, *aliases), {"dest": dest, **kwargs, **change}))
    return out


def add_shared_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    overrides: Mapping[str, Mapping[str, Any]] = {},
    *,
    only: Collection[str] | None = None,
) -> None:
    """Add the flags both daemons take, with their help, defaults and ``PARKA_*`` variables.
    ``overrides`` changes a flag's ``help`` or ``default`` (keyed by its ``dest``) or adds
    ``aliases``, where a command means something more precise by it; ``only`` (``dest``s)
    picks some of them, for a command that is not a daemon (``parka optimize``)."""
    for names, kwargs in _flags(overrides):
        if only is None or kwargs["dest"] in only:
            parser.add_argument(*names, **kwargs)


def setup_logging(*, quiet: bool, log_format: str, verbose: bool = False) -> None:
    """parka's loggers to stderr: text or one JSON object per line; warnings only when ``quiet``,
    debug lines too when ``verbose``. librdkafka's log comes through ``parka.kafka``
    (:func:`parka._health.kafka_logger`)."""
    handler = _LineClearingHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("parka")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)


class _LineClearingHandler(logging.StreamHandler):
    """On a terminal, clears the line first: a progress bar drawn there (:mod:`parka._progress`)
    is overwritten by the log line instead of running into it, and redrawn below it. Elsewhere
    (a file, a pipe, a log collector) no line carries ANSI codes: delta-rs colours its errors."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if not getattr(self.stream, "isatty", lambda: False)():
            text = _ANSI.sub("", text)
        return text

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if getattr(self.stream, "isatty", lambda: False)():
                self.stream.write("\r\x1b[2K")
        except Exception:  # a closed stream: logging never raises into the caller (StreamHandler's rule)
            self.handleError(record)
            return
        super().emit(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: ``ts`` (UTC), ``level``, ``logger``, ``msg``, and ``trace``
    when the line carries an exception's (``--verbose``)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            line["trace"] = self.formatException(record.exc_info)
        return json.dumps(line)


def stopped(log: logging.Logger, exc: BaseException) -> None:
    """Log the error that ends a run as one line (``stopped: <kind>: <what>``: no ANSI codes, no
    continuation lines); its stack trace only at debug level (``--verbose``)."""
    from ._health import one_line

    if type(exc).__name__ == "BlockedError":  # its message names the cause; the class adds nothing
        log.error("stopped: %s", one_line(exc))
    else:
        log.error("stopped: %s: %s", type(exc).__name__, one_line(exc))
    log.debug("the error's trace", exc_info=exc)
