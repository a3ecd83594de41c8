"""Before ``parka ingest`` consumes anything: can it? One probe of the table location (local:
created and written; object store: the bucket listed with the credentials given) and one Kafka
metadata request for the topic. Each answers ``None`` or a :class:`parka.errors.Blocker` whose
one line names the cause (the path, the bucket, the address, the topic); the daemon decides
what to do with it (a run-once stops, a daemon waits and says so: :mod:`parka.ops.health`).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from confluent_kafka import KafkaError, KafkaException
from parka.lake import list_log

from parka.errors import BlockedError, Blocker, CommitError, one_line

from .health import NO_BUCKET_WORDS, REFUSED_WORDS, Backoff, HealthLog, kafka_logger

__all__ = ["BrokerWatch", "kafka_blocker", "probe_until_ready", "table_blocker", "wait_until_ready"]

_AUTH_CODES = {
    KafkaError._AUTHENTICATION: "Kafka refused the credentials",
    KafkaError.SASL_AUTHENTICATION_FAILED: "Kafka refused the credentials",
    KafkaError._SSL: "the TLS handshake with Kafka failed",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "Kafka refused access to the topic (ACL)",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "Kafka refused access to the consumer group (ACL)",
}


_BROKER_PREFIX = re.compile(r"^\S+/(bootstrap|\d+): ")  # sasl_ssl://127.0.0.1:9094/bootstrap:
_IN_STATE = re.compile(r" \(after \d+ms in state \w+(, \d+ identical error\(s\) suppressed)?\)")


def _librdkafka_words(text: str) -> str:
    """``host:port/bootstrap: Connect to ... failed: Connection refused (after 0ms in state
    CONNECT)`` without the broker prefix and the state suffix: the address is in parka's line."""
    return _IN_STATE.sub("", _BROKER_PREFIX.sub("", one_line(text)))


def kafka_blocker(
    consumer: Any, *, topic: str, bootstrap: str, timeout_s: float, client_error: Callable[[], Any] = lambda: None
) -> Blocker | None:
    """One metadata request for ``topic`` through ``consumer`` (a confluent-kafka consumer or
    the shim), waiting up to ``timeout_s``. ``client_error`` serves the client's callbacks and
    returns the last error librdkafka reported through ``error_cb`` (a refused connection,
    refused credentials): it says more than the request's own timeout."""
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        noted = client_error()
        if noted is not None and noted.code() in _AUTH_CODES:
            return Blocker(
                "kafka-auth",
                f"{_AUTH_CODES[noted.code()]} at {bootstrap}: {_librdkafka_words(noted.str())} (check sasl.username, "
                "sasl.password, "
                "sasl.mechanisms, security.protocol, ssl.ca.location)",
                True,
            )
        err = exc.args[0] if exc.args else None
        detail = noted.str() if noted is not None else (err.str() if err is not None else str(exc))
        detail = _librdkafka_words(detail)
        return Blocker("broker", f"no Kafka broker reachable at {bootstrap} ({detail})", False)
    found = metadata.topics.get(topic)
    err = None if found is None else found.error
    if found is None or (err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return Blocker("topic", f"topic '{topic}' does not exist on the Kafka cluster at {bootstrap}", True)
    if err is not None and err.code() in _AUTH_CODES:
        return Blocker("kafka-auth", f"{_AUTH_CODES[err.code()]} '{topic}' at {bootstrap}: {err.str()}", True)
    if err is not None:  # LEADER_NOT_AVAILABLE and the like: the cluster is electing, wait
        return Blocker("topic", f"topic '{topic}' at {bootstrap} is not available: {err.str()}", False)
    return None


def table_blocker(table_uri: str, storage_options: Mapping[str, str] | None = None) -> Blocker | None:
    """Whether the table location can be used: a local directory is created (with its parents)
    and a probe file written and removed in it; an object store's table prefix is listed with
    the storage options (a missing bucket, refused credentials). Nothing is left behind but the
    directory itself."""
    parsed = urlparse(table_uri)
    if len(parsed.scheme) <= 1 or parsed.scheme == "file":
        path = os.path.abspath(parsed.path if parsed.scheme == "file" else table_uri)
        probe = os.path.join(path, f".parka-probe-{uuid.uuid4().hex}")
        try:
            os.makedirs(path, exist_ok=True)
            with open(probe, "wb"):
                pass
            os.remove(probe)
        except OSError as exc:
            return Blocker("table", f"table location {path} cannot be created or written: {exc.strerror or exc}", True)
        return None
    try:
        list_log(table_uri, storage_options)
    except CommitError as exc:
        text = one_line(exc.__cause__ or exc)
        bucket = parsed.netloc
        if any(word in text for word in NO_BUCKET_WORDS):
            return Blocker("table", f"bucket '{bucket}' of {table_uri} does not exist", True)
        if any(word in text for word in REFUSED_WORDS):
            code = re.search(r"<Code>([^<]+)</Code>", text)
            why = code.group(1) if code else text[:200]
            return Blocker("table", f"the object store refused the credentials for {table_uri} ({why})", True)
        return Blocker("table", f"table location {table_uri} cannot be reached: {text}", False)
    return None


_ORDER = ("table", "broker", "kafka-auth", "topic")  # the order of the probes


def wait_until_ready(
    consumer: Any,
    *,
    topic: str,
    bootstrap: str,
    table_uri: str,
    storage_options: Mapping[str, str],
    run_once: bool,
    timeout_s: float,
    health: HealthLog,
    stop: threading.Event,
    client_error: Callable[[], Any],
    log: logging.Logger,
    clock: Callable[[], float] = time.monotonic,
    check_table: bool = True,
    table_probe: Callable[[], Blocker | None] | None = None,
) -> bool:
    """Probe the table location (``table_probe`` when given: an Iceberg catalog) and the topic
    until both answer; ``True`` then, ``False`` when
    ``stop`` is set first. A run-once (``run_once``) gives up at once on a configuration cause
    and after ``timeout_s`` on an unreachable one, raising :class:`BlockedError`; a daemon waits
    with backoff, logging each cause when it starts, every ``health.remind_s`` while it lasts
    and when it clears.

    ``client_error`` serves the client's callbacks and returns the last error it reported.

    Raises:
        BlockedError: ``run_once`` and a cause that did not clear (its ``blocker`` says which).
    """
    deadline = clock() + timeout_s
    backoff = Backoff(0.5, 10.0)
    while not stop.is_set():
        if not check_table:
            blocker = None
        elif table_probe is not None:
            blocker = table_probe()
        else:
            blocker = table_blocker(table_uri, storage_options)
        if blocker is None and consumer is not None:
            wait_s = max(0.5, min(5.0, deadline - clock())) if run_once else 5.0
            blocker = kafka_blocker(
                consumer, topic=topic, bootstrap=bootstrap, timeout_s=wait_s, client_error=client_error
            )
        if blocker is None:
            for recovered in health.clear_all():
                log.warning("%s", recovered)
            return True
        for key in _ORDER[: _ORDER.index(blocker.key)] if blocker.key in _ORDER else ():
            passed = health.clear(key)  # probed before this one, and passed
            if passed is not None:
                log.warning("%s", passed)
        if run_once and blocker.configuration:
            raise BlockedError(blocker)
        if run_once and clock() >= deadline:
            raise BlockedError(Blocker(blocker.key, f"{blocker.message}; gave up after {timeout_s:g} s", False))
        said = health.trouble(blocker)
        if said is not None:
            log.log(logging.INFO if run_once else logging.WARNING, "%s", said)
        pause = backoff.next()
        if run_once:
            pause = max(0.0, min(pause, deadline - clock()))
        stop.wait(pause)
    return False


def probe_until_ready(
    *,
    topic: str,
    table_uri: str,
    kafka_conf: Mapping[str, Any],
    storage_options: Mapping[str, str],
    run_once: bool,
    timeout_s: float,
    remind_s: float,
    stop: threading.Event,
    log: logging.Logger,
    check_table: bool = True,
    table_probe: Callable[[], Blocker | None] | None = None,
) -> bool:
    """:func:`wait_until_ready` with a client of its own, for a driver that reads Kafka through
    another client (``parka spark-ingest``: Spark's Java one, whose failures surface late and as
    JVM traces). ``kafka_conf`` holds librdkafka settings (``bootstrap.servers`` included); a
    setting librdkafka does not take skips the Kafka probe rather than guess.

    Raises:
        BlockedError: ``run_once`` and a cause that did not clear.
    """
    from confluent_kafka import Consumer

    noted: list[Any] = []
    conf = {**kafka_conf, "group.id": "parka-probe", "error_cb": noted.append, "logger": kafka_logger()}
    try:
        consumer = Consumer(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        log.debug("no Kafka probe (%s)", exc)
        consumer = None

    def client_error() -> Any:
        if consumer is not None:
            consumer.poll(0)
        auth = [e for e in noted if e.code() in _AUTH_CODES]
        other = [e for e in noted if e.code() != KafkaError._ALL_BROKERS_DOWN]
        return (auth or other or [None])[-1]

    try:
        return wait_until_ready(
            consumer,
            topic=topic,
            bootstrap=str(kafka_conf.get("bootstrap.servers", "?")),
            table_uri=table_uri,
            storage_options=storage_options,
            run_once=run_once,
            timeout_s=timeout_s,
            health=HealthLog(remind_s=remind_s),
            stop=stop,
            client_error=client_error,
            log=log,
            check_table=check_table,
            table_probe=table_probe,
        )
    finally:
        if consumer is not None:
            consumer.close()


class BrokerWatch:
    """A running daemon's view of its broker: a lost broker or a client error (:meth:`trouble`)
    is logged once, then every ``health.remind_s``; :meth:`tick` asks for the topic's metadata
    every ``probe_s`` while one is open (a quiet topic brings no message to say it is over);
    :meth:`recovered` (a message arrived, or the probe answered) logs the recovery once."""

    def __init__(
        self,
        health: HealthLog,
        log: logging.Logger,
        *,
        probe_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._health, self._log, self._probe_s, self._clock = health, log, probe_s, clock
        self._probed_at = float("-inf")

    def trouble(self, blocker: Blocker) -> None:
        line = self._health.trouble(blocker)
        if line is not None:
            self._log.warning("%s", line)

    def recovered(self) -> None:
        for key in ("broker", "kafka"):
            line = self._health.clear(key)
            if line is not None:
                self._log.warning("%s", line)

    def tick(self, consumer: Any, topic: str) -> None:
        active = self._health.active()
        if "broker" not in active and "kafka" not in active:
            return
        now = self._clock()
        if now - self._probed_at < self._probe_s:
            return
        self._probed_at = now
        try:
            consumer.list_topics(topic, timeout=1.0)
        except KafkaException:
            return
        self.recovered()
