"""What the daemons tell an operator, decided without I/O: the exit codes, the one line an error
becomes, when a cause that blocks a run is logged (once when it starts, then at a slow rhythm with
how long it has lasted, once when it clears), the backoff between attempts, and the rate limit on
librdkafka's own log. Pure classes fed an injected ``clock``; the daemons do the logging.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from parka.errors import BlockedError, Blocker, ConfigError, MissingExtraError, one_line

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "Backoff",
    "HealthLog",
    "RateLimitFilter",
    "RunStatus",
    "duration_text",
    "exit_code_for",
    "kafka_logger",
    "run_status",
]

EXIT_OK = 0
"""Done: everything there was at start is in the table (or, for a daemon, it was asked to stop)."""
EXIT_FAILED = 1
"""Stopped by the data or the table: a message the table refuses, a commit that failed; or a
run-once that dead-lettered every message it read (:func:`run_status`)."""
EXIT_CONFIG = 2
"""Bad configuration, a cause that will not go away on its own: a malformed flag, an unknown topic,
credentials or ACLs Kafka refuses, a table location that cannot be created or written, a bucket
that does not exist, object-store credentials that are refused."""
EXIT_UNREACHABLE = 3
"""Infrastructure unreachable: no Kafka broker answered within ``--broker-timeout``. Retry later."""


@dataclass(frozen=True)
class RunStatus:
    """How a finished run ends: the ``status`` of its JSON line, its exit code, and the ``error``
    line to log (``None`` for a success)."""

    status: str
    exit_code: int
    error: str | None = None


def run_status(
    *, segments: int, covered_files: int, dead_letters: int, dlq_table: str | None, run_once: bool
) -> RunStatus:
    """How a run that finished ends, from what became of the messages it read: ``segments``
    committed into the table, ``covered_files`` of segments another writer (same app id) had
    committed first, ``dead_letters`` committed into ``dlq_table``. ``dead-lettered`` when it
    dead-lettered messages and none of the others was read (a run whose every message was
    refused is no success, whatever the cause), with :data:`EXIT_FAILED` for a ``run_once``
    (``--end-at-latest``) and :data:`EXIT_OK` for a daemon, which was asked to stop; else ``ok``
    and :data:`EXIT_OK`, the counts beside it."""
    if dead_letters and not segments and not covered_files:
        error = (
            f"every message this run read was refused: {dead_letters} dead-lettered into {dlq_table}, none in "
            "the table (the reasons are in the dead-letter table's error column)"
        )
        return RunStatus("dead-lettered", EXIT_FAILED if run_once else EXIT_OK, error)
    return RunStatus("ok", EXIT_OK)


def duration_text(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``: how long a cause has lasted, for a log line."""
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class HealthLog:
    """When to say what about the causes a daemon is waiting on. :meth:`trouble` returns the
    line to log when a cause starts and then once every ``remind_s`` while it lasts (with how
    long), ``None`` in between; :meth:`clear` returns the ``recovered`` line once when it ends."""

    def __init__(self, *, remind_s: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.remind_s = remind_s
        self._clock = clock
        self._since: dict[str, float] = {}
        self._said_at: dict[str, float] = {}
        self._message: dict[str, str] = {}

    def active(self) -> dict[str, str]:
        """The causes that have started and not cleared: key -> message."""
        return dict(self._message)

    def trouble(self, blocker: Blocker) -> str | None:
        now = self._clock()
        key = blocker.key
        self._message[key] = blocker.message
        if key not in self._since:
            self._since[key] = self._said_at[key] = now
            return f"{blocker.message}; retrying"
        if now - self._said_at[key] >= self.remind_s:
            self._said_at[key] = now
            return f"{blocker.message}; still retrying after {duration_text(now - self._since[key])}"
        return None

    def clear(self, key: str) -> str | None:
        since = self._since.pop(key, None)
        self._said_at.pop(key, None)
        message = self._message.pop(key, None)
        if since is None:
            return None
        return f"recovered after {duration_text(self._clock() - since)}: {message}"

    def clear_all(self) -> list[str]:
        return [line for key in list(self._since) if (line := self.clear(key)) is not None]


class Backoff:
    """Exponential pauses between attempts: ``initial_s``, doubling up to ``max_s``; :meth:`reset`
    after a success."""

    def __init__(self, initial_s: float = 0.5, max_s: float = 30.0) -> None:
        if not 0 < initial_s <= max_s:
            raise ValueError(f"backoff needs 0 < initial_s <= max_s, got {initial_s}, {max_s}")
        self.initial_s, self.max_s = initial_s, max_s
        self._next = initial_s

    def next(self) -> float:
        pause = self._next
        self._next = min(self._next * 2, self.max_s)
        return pause

    def reset(self) -> None:
        self._next = self.initial_s


_NUMBERS = re.compile(r"\d+")


class RateLimitFilter(logging.Filter):
    """For librdkafka's log (confluent-kafka's ``logger`` setting, handed to a parka logger): a
    line passes the first time; the same line again (numbers aside: ``after 0ms``, ``3/3
    brokers``) is dropped for ``window_s`` and counted, and the next one after the window
    passes with ``(N more like it in the last ...)``. librdkafka's errors are its own view of a
    connection (it retries them itself): they come out as warnings; parka says what they mean
    for the run. Lines of the ``parka`` logger's other children pass untouched."""

    def __init__(self, *, window_s: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._seen: dict[str, tuple[float, int]] = {}  # key -> (passed at, dropped since)

    def filter(self, record: logging.LogRecord) -> bool:
        key = _NUMBERS.sub("#", record.getMessage())
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.window_s:
            self._seen[key] = (seen[0], seen[1] + 1)
            return False
        if len(self._seen) > 1000:  # a client that logs ever-new lines: forget the old ones
            self._seen.clear()
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} ({seen[1]} more like it in the last {duration_text(now - seen[0])})"
            record.args = None
        self._seen[key] = (now, 0)
        return True


def kafka_logger(window_s: float = 300.0) -> logging.Logger:
    """``parka.kafka``, the logger librdkafka's log goes through (confluent-kafka's ``logger``
    setting), with one :class:`RateLimitFilter` (made on the first call; ``window_s`` then)."""
    logger = logging.getLogger("parka.kafka")
    if not any(isinstance(f, RateLimitFilter) for f in logger.filters):
        logger.addFilter(RateLimitFilter(window_s=window_s))
    return logger


# The words object_store (S3, Azure, GCS), delta-rs, the JVM and librdkafka use for the causes
NO_BUCKET_WORDS = ("NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist")
REFUSED_WORDS = (
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "403 Forbidden",
    "401 Unauthorized",
    "Status Code: 403",
    "SASL authentication",
)
_CONFIG_WORDS = (*NO_BUCKET_WORDS, *REFUSED_WORDS, "no Delta table at", "Not a directory", "Permission denied")
_UNREACHABLE_WORDS = (
    "Connection refused",
    "tcp connect error",
    "dns error",
    "Name or service not known",
    "UnknownHostException",
    "ConnectException",
    "Timed out waiting for a node",
    "brokers are down",
)


def exit_code_for(exc: BaseException) -> int:
    """The exit code of a run that ``exc`` ended: a :class:`~parka.errors.BlockedError`'s own;
    :data:`EXIT_CONFIG` for a :class:`~parka.errors.ConfigError`, a
    :class:`~parka.errors.MissingExtraError` (an option that needs an extra, e.g. ``--catalog``
    without ``parka[iceberg]``) and for errors whose words say
    missing bucket or table, refused credentials, a path through a file; :data:`EXIT_UNREACHABLE`
    for a refused connection or an unknown host; else :data:`EXIT_FAILED`."""
    if isinstance(exc, BlockedError):
        return EXIT_CONFIG if exc.blocker.configuration else EXIT_UNREACHABLE
    if isinstance(exc, (ConfigError, MissingExtraError)):
        return EXIT_CONFIG
    text = one_line(f"{exc} {exc.__cause__ or ''}", limit=100_000)
    if any(word in text for word in _CONFIG_WORDS):
        return EXIT_CONFIG
    if any(word in text for word in _UNREACHABLE_WORDS):
        return EXIT_UNREACHABLE
    return EXIT_FAILED
