"""What parka's command lines share (``parka ingest``, ``parka spark-ingest``, ``parka optimize``),
defined once: how their values' texts are read (sizes, ports, ``key=value`` pairs, partition specs), the
masking of secrets in what is logged, the logging set-up and the ``--metrics-port`` server. The flags
themselves are declared in :mod:`parka.ops.settings`. Standard library only
(``prometheus_client`` is imported when metrics are asked for).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from parka import logtopic
from parka.partitioning import parse_partition_by

__all__ = [
    "SECRET_HINTS",
    "stopped",
    "JsonFormatter",
    "columns",
    "parse_pairs",
    "port_number",
    "redacted",
    "redacted_repr",
    "serve_metrics",
    "setup_logging",
    "size_bytes",
    "size_text",
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


def parse_pairs(values: Iterable[str]) -> dict[str, str]:
    """``key=value`` strings as a dict (a repeatable flag such as ``-K``).

    Raises:
        ValueError: a string without ``=`` or key; it is named by its position, never shown (it
            may be a secret typed without its key).
    """
    out: dict[str, str] = {}
    for number, item in enumerate(values, 1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            what = "no '='" if not sep else "no key before '='"
            raise ValueError(f"expects key=value; its value number {number} has {what}")
        out[key.strip()] = value
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


def size_text(size: int) -> str:
    """A number of bytes as :func:`size_bytes` reads it, in the largest binary unit that divides it
    (``134217728`` is ``128MiB``; ``1000`` stays ``1000B``)."""
    for unit in ("GiB", "MiB", "KiB"):
        factor = _UNITS[unit.lower()]
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


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
def serve_metrics(port: int | None, *, topic: str | None, prog: str, addr: str = "0.0.0.0") -> Iterator[Any]:  # noqa: S104
    """With a ``port``, an :class:`parka.metrics.IngestMetrics` of ``topic`` (``None``: a
    :class:`parka.metrics.FleetMetrics` of several topics) in a registry of its own, served over
    HTTP on ``addr`` until the block ends, with its health checks on ``/healthz`` and
    ``/readyz``; ``None`` without. Exits naming ``prog`` when ``prometheus_client`` is missing or
    the address cannot be bound."""
    if port is None:
        yield None
        return
    try:
        from prometheus_client import CollectorRegistry

        from parka.metrics import FleetMetrics, IngestMetrics, serve
    except ImportError as exc:
        from parka.extras import install_command

        raise SystemExit(
            f"{prog}: --metrics-port needs prometheus_client ({exc}), parka's 'metrics' extra: "
            + install_command("metrics")
        ) from None
    registry = CollectorRegistry()
    metrics = FleetMetrics(registry) if topic is None else IngestMetrics(registry, topic=topic)
    try:
        server = serve(port, registry, addr=addr, checks={"/healthz": metrics.live, "/readyz": metrics.ready})
    except OSError as exc:
        raise SystemExit(f"{prog}: --metrics-port {port} --metrics-bind-address {addr}: {exc}") from None
    try:
        yield metrics
    finally:
        server.shutdown()
        server.server_close()


def setup_logging(*, quiet: bool, log_format: str, verbose: bool = False) -> None:
    """parka's loggers to stderr: text or one JSON object per line; warnings only when ``quiet``,
    debug lines too when ``verbose``. librdkafka's log comes through ``parka.kafka``
    (:func:`parka.ops.health.kafka_logger`)."""
    handler = _LineClearingHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_topic_of_thread)
    root = logging.getLogger("parka")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)


def _topic_of_thread(record: logging.LogRecord) -> bool:
    """A line logged by a thread working for one topic of several carries it
    (:mod:`parka.logtopic`): ``topic T:`` before the text, or the JSON line's ``topic``."""
    topic = logtopic.topic()
    if topic is not None and not hasattr(record, "topic"):
        record.topic = topic
    return True


class _TextFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        topic = getattr(record, "topic", None)
        if topic is not None:
            record.message = f"topic {topic}: {record.message}"
        return super().formatMessage(record)


class _LineClearingHandler(logging.StreamHandler):
    """On a terminal, clears the line first: a progress bar drawn there (:mod:`parka.ops.progress`)
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
        topic = getattr(record, "topic", None)
        if topic is not None:
            line["topic"] = topic
        if record.exc_info:
            line["trace"] = self.formatException(record.exc_info)
        return json.dumps(line)


def stopped(log: logging.Logger, exc: BaseException) -> None:
    """Log the error that ends a run as one line (``stopped: <kind>: <what>``: no ANSI codes, no
    continuation lines); its stack trace only at debug level (``--verbose``)."""
    from parka.errors import one_line

    if type(exc).__name__ == "BlockedError":  # its message names the cause; the class adds nothing
        log.error("stopped: %s", one_line(exc))
    else:
        log.error("stopped: %s: %s", type(exc).__name__, one_line(exc))
    log.debug("the error's trace", exc_info=exc)


def number(text: str) -> float:
    """A number (``--allowed-latency 2.5``).

    Raises:
        ValueError: anything else.
    """
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def integer(text: str) -> int:
    """A whole number (``--checkpoint-interval 10``).

    Raises:
        ValueError: anything else.
    """
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None


def seek_offsets_json(text: str) -> dict[int, int]:
    """``--seek-offsets`` JSON (``{"0": 123}``) as partition -> offset.

    Raises:
        ValueError: not that JSON.
    """
    if not text:
        return {}
    try:
        parsed = json.loads(text)
        return {int(k): int(v) for k, v in parsed.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f'must be JSON like {{"0": 123}}: {exc}') from None
