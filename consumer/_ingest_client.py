"""``parka ingest``'s side of the Kafka client: errors librdkafka reports (``error_cb`` and
consume errors; the ones no retry fixes stop the daemon, naming them) and polling one raw
segment, a transient error logged and waited out. A base of :class:`._ingest.IngestionConsumer`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError
from parka.lake import BrokerWatch

from parka._health import Blocker
from parka.errors import KafkaClientError, SegmentError

from ._positions import Positions
from ._settings import IngestSettings
from ._shim import ParquetConsumer, RawSegment

__all__ = ["KafkaSide"]

log = logging.getLogger("parka.ingest")

# Errors librdkafka retries forever (reported through error_cb or as consume errors) that no
# retry can fix: a wrong password, mechanism, CA or ACL. The daemon stops on them, naming them.
_CREDENTIAL_ERRORS = {
    KafkaError._AUTHENTICATION: "Kafka authentication failed",
    KafkaError.SASL_AUTHENTICATION_FAILED: "Kafka authentication failed",
    KafkaError._SSL: "Kafka TLS failed",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "Kafka authorization failed",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "Kafka authorization failed",
}
_CREDENTIAL_HINT = "check sasl.username, sasl.password, sasl.mechanisms, security.protocol and ssl.ca.location"


class KafkaSide:
    """The client, where this worker is in each assigned partition, and what the client reported."""

    def __init__(self, settings: IngestSettings, watch: BrokerWatch) -> None:
        self.settings = settings
        self._watch = watch
        self._consumer: ParquetConsumer | None = None
        self._positions = Positions()  # where this worker is in each assigned partition
        self._credential_error: Any = None  # a KafkaError from _CREDENTIAL_ERRORS, set by error_cb
        self._client_error: Any = None  # the last error error_cb reported (the preflight names it)

    @property
    def _bootstrap(self) -> str:
        return str(self.settings.kafka_conf.get("bootstrap.servers", "?"))

    def _error_callback(self, user_cb: Callable[[Any], None] | None) -> Callable[[Any], None]:
        """librdkafka's ``error_cb`` (run inside ``poll``): notes an error no retry fixes, for
        :meth:`_poll` to raise; then calls the caller's own ``error_cb``, if any."""

        def on_error(err: Any) -> None:
            if err.code() in _CREDENTIAL_ERRORS and self._credential_error is None:
                self._credential_error = err
            if err.code() != KafkaError._ALL_BROKERS_DOWN:  # the transport error says more
                self._client_error = err
            elif self._consumer is not None and self._positions.assigned:
                self._watch.trouble(
                    Blocker("broker", f"lost the Kafka brokers at {self._bootstrap} ({err.str()})", False)
                )
            if user_cb is not None:
                user_cb(err)

        return on_error

    def _raise_credential_error(self, err: Any) -> NoReturn:
        raise KafkaClientError(
            f"{_CREDENTIAL_ERRORS[err.code()]}, stopping ({_CREDENTIAL_HINT}): {err.str()}", kafka_error=err
        )

    def _poll(self) -> RawSegment | None:
        """The next raw message; transient client errors (a broker away) are logged and retried.

        librdkafka reconnects by itself, and everything buffered stays buffered until a commit
        succeeds, so waiting loses nothing. A fatal error stops ingestion.
        """
        assert self._consumer is not None
        try:
            raw = self._consumer.poll_buffer(timeout=0.5)
        except SegmentError as exc:
            # Garbled parka headers: the shim raises before it builds the RawSegment, keeping the
            # raw message in the error. Hand it on as a message; _handle refuses it (dead letter,
            # or a stop after what came before is committed) like any other bad message.
            if exc.topic is None or exc.partition is None or exc.offset is None:
                raise
            return RawSegment(
                value=exc.value,
                headers=exc.headers,
                topic=exc.topic,
                partition=exc.partition,
                offset=exc.offset,
                timestamp=(TIMESTAMP_NOT_AVAILABLE, 0),
                info=None,
            )
        except KafkaClientError as exc:
            err = exc.kafka_error
            if err is not None and err.code() in _CREDENTIAL_ERRORS:
                self._raise_credential_error(err)
            if err is not None and not err.fatal():
                self._watch.trouble(Blocker("kafka", f"Kafka client: {err.str()} (buffered segments are kept)", False))
                return None
            raise
        if self._credential_error is not None:  # noted by error_cb during this poll
            self._raise_credential_error(self._credential_error)
        return raw
