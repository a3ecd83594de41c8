"""``parka ingest``'s side of the Kafka client: errors librdkafka reports (``error_cb`` and
consume errors; the ones no retry fixes stop the daemon, naming them), polling one raw
segment, a transient error logged and waited out, and the consumer group's table: every offset
commit names the table in its metadata (:func:`table_metadata`), and a group whose commits
name another table stops the worker before it consumes anything. A base of
:class:`._ingest.IngestionConsumer`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from parka.ops.preflight import BrokerWatch

from parka.errors import Blocker, ConfigError, KafkaClientError

from ._positions import Positions
from ._settings import IngestSettings
from ._shim import ParquetConsumer

__all__ = ["KafkaSide", "table_metadata"]

log = logging.getLogger("parka.ingest")

# Errors librdkafka retries forever (reported through error_cb or as consume errors) that no
# retry can fix: a wrong password, mechanism, CA or ACL. The daemon stops on them, naming them.
POLL_MESSAGES = 500  # messages one poll of the daemon's loop takes at most

_CREDENTIAL_ERRORS = {
    KafkaError._AUTHENTICATION: "Kafka authentication failed",
    KafkaError.SASL_AUTHENTICATION_FAILED: "Kafka authentication failed",
    KafkaError._SSL: "Kafka TLS failed",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "Kafka authorization failed",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "Kafka authorization failed",
}
_CREDENTIAL_HINT = "check sasl.username, sasl.password, sasl.mechanisms, security.protocol and ssl.ca.location"

TABLE_METADATA_PREFIX = "parka-table:"
_METADATA_CHARS = 1000  # well below the broker's offset.metadata.max.bytes (4096 by default)


def table_metadata(identity: str) -> str:
    """The metadata of ``parka ingest``'s Kafka offset commits: ``parka-table:<table identity>``
    (:func:`parka.lake.table_identity`), cut to 1,000 characters. Not ``ParquetConsumer``'s
    record positions (``parka:1:<offset>:<index>``), which it never resumes from."""
    return f"{TABLE_METADATA_PREFIX}{identity}"[:_METADATA_CHARS]


class KafkaSide:
    """The client, where this worker is in each assigned partition, and what the client reported."""

    def __init__(self, settings: IngestSettings, watch: BrokerWatch) -> None:
        self.settings = settings
        self._watch = watch
        self._positions = Positions()  # where this worker is in each assigned partition
        self._credential_error: Any = None  # a KafkaError from _CREDENTIAL_ERRORS, set by error_cb
        self._client_error: Any = None  # the last error error_cb reported (the preflight names it)
        self._group = ""  # the consumer group, once the client is made

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
            elif self._positions.assigned:
                self._watch.trouble(
                    Blocker("broker", f"lost the Kafka brokers at {self._bootstrap} ({err.str()})", False)
                )
            if user_cb is not None:
                user_cb(err)

        return on_error

    def _check_group(self, consumer: ParquetConsumer, identity: str, partitions: list[int]) -> None:
        """Before anything is consumed: refuse a consumer group whose committed offsets name
        another table than ``identity`` (a worker of it lands there, or did: sharing the group
        would split the topic's partitions between the two tables). Offsets without parka's
        metadata (another application's, an earlier release's) say nothing and pass; a group
        whose offsets cannot be read is logged and not checked.

        Raises:
            ConfigError: the group lands into another table (exit 2), naming both tables.
        """
        s = self.settings
        group = self._group
        try:
            committed = consumer.committed([TopicPartition(s.topic, p) for p in partitions], timeout=10)
        except KafkaException as exc:
            log.warning("consumer group %s: its committed offsets cannot be read, so not checked (%s)", group, exc)
            return
        ours = table_metadata(identity)
        others = sorted(
            {
                tp.metadata.removeprefix(TABLE_METADATA_PREFIX)
                for tp in committed
                if tp.metadata and tp.metadata.startswith(TABLE_METADATA_PREFIX) and tp.metadata != ours
            }
        )
        if others:
            raise ConfigError(
                "--consumer-group",
                group,
                "a group of its own for this table: give --consumer-group (the table holds its progress, so a new "
                "group reads nothing again and skips nothing)",
                reason=f"consumer group {group} already lands topic {s.topic} into {', '.join(others)}, and this "
                f"worker's table is {identity}: the two would split the topic's partitions between them",
            )

    def _raise_credential_error(self, err: Any) -> NoReturn:
        raise KafkaClientError(
            f"{_CREDENTIAL_ERRORS[err.code()]}, stopping ({_CREDENTIAL_HINT}): {err.str()}", kafka_error=err
        )

    def _poll(self, consumer: ParquetConsumer) -> list[Any]:
        """The client's next messages, those it holds already, up to :data:`POLL_MESSAGES`, as
        it gives them (a topic of row records has a message per row: a call, or an object made,
        per message cost more than decoding them); transient client errors (a broker away) are
        logged and retried.

        librdkafka reconnects by itself, and everything buffered stays buffered until a commit
        succeeds, so waiting loses nothing. A fatal error stops ingestion. A message with
        garbled parka headers comes as it is: ``_handle`` refuses it (dead letter, or a stop
        after what came before is committed) like any other bad message.
        """
        try:
            raws = consumer._poll_messages(timeout=0.5, max_messages=POLL_MESSAGES)
        except KafkaClientError as exc:
            err = exc.kafka_error
            if err is not None and err.code() in _CREDENTIAL_ERRORS:
                self._raise_credential_error(err)
            if err is not None and not err.fatal():
                self._watch.trouble(Blocker("kafka", f"Kafka client: {err.str()} (buffered segments are kept)", False))
                return []
            raise
        if self._credential_error is not None:  # noted by error_cb during this poll
            self._raise_credential_error(self._credential_error)
        return raws
