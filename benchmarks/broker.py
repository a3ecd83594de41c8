"""The broker as the benchmarks see it: topics, and the bytes it stores for them.

Bytes on disk are read from the broker's log dir (``scripts/kafka-local.sh data-dir`` for the
local broker): a topic partition is the folder ``<topic>-<partition>`` and its records are the
``.log`` segment files. Their size right after the producer's ``flush`` (acks=all) is what the
broker stores, record-batch framing and compression included; indexes are not counted. The
``.log`` files are also parsed (the v2 record-batch header) to count batches and the records in
each, which shows how many records a "batch" really held.
"""

from __future__ import annotations

import glob
import os
import re
import struct
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

__all__ = ["Broker", "LogStats"]

_BATCH_HEADER = 61  # bytes of a v2 record-batch header
_RECORDS_COUNT_AT = 57


@dataclass(frozen=True)
class LogStats:
    """What the broker's ``.log`` files hold for one topic."""

    bytes: int
    batches: int
    records: int
    max_records_per_batch: int

    @property
    def records_per_batch(self) -> float:
        return self.records / self.batches if self.batches else 0.0


class Broker:
    """A Kafka broker reached at ``bootstrap`` whose log dir is ``data_dir`` (on this machine)."""

    def __init__(self, bootstrap: str, data_dir: str) -> None:
        if not os.path.isdir(data_dir):
            raise FileNotFoundError(f"broker log dir {data_dir!r} does not exist (scripts/kafka-local.sh data-dir)")
        self.bootstrap = bootstrap
        self.data_dir = data_dir
        # log_level 4: no notice per deleted topic ("partition count changed from 1 to 0"). No
        # auto-creation: a metadata refresh naming a deleted topic must not bring it back.
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4, "allow.auto.create.topics": False})
        self._max_message_bytes: int | None = None

    def create_topic(self, name: str, partitions: int = 1) -> None:
        futures = self._admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
        futures[name].result(timeout=60)
        # Wait until metadata shows every partition led: a producer that starts earlier parks its
        # records until the leader is known and then cuts them into odd batches.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = self._admin.list_topics(name, timeout=10).topics.get(name)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
            ):
                return
            time.sleep(0.02)
        raise TimeoutError(f"topic {name} has no leader after 30 s")

    def delete_topics(self, names: list[str]) -> None:
        if not names:
            return
        futures = self._admin.delete_topics(names, operation_timeout=30)
        for future in futures.values():
            future.result(timeout=60)

    def topics_with_prefix(self, prefix: str) -> list[str]:
        return sorted(t for t in self._admin.list_topics(timeout=30).topics if t.startswith(prefix))

    def max_message_bytes(self, topic: str) -> int:
        """The topic's ``max.message.bytes`` (the broker's ``message.max.bytes`` unless overridden)."""
        resource = ConfigResource(ResourceType.TOPIC, topic)
        configs = self._admin.describe_configs([resource])[resource].result(timeout=30)
        return int(configs["max.message.bytes"].value)

    def max_message_bytes_cached(self) -> int:
        """The broker's default ``max.message.bytes``, read once from a probe topic."""
        if self._max_message_bytes is None:
            probe = f"parka-bench-probe-{os.getpid()}-{time.monotonic_ns()}"
            self.create_topic(probe)
            try:
                self._max_message_bytes = self.max_message_bytes(probe)
            finally:
                self.delete_topics([probe])
        return self._max_message_bytes

    def kafka_version(self) -> str:
        """The broker's version from the local broker's jar names, or ``unknown``."""
        libs = os.path.join(os.path.dirname(os.path.abspath(self.data_dir)), "libs")
        for jar in glob.glob(os.path.join(libs, "kafka_2.13-*.jar")):
            match = re.search(r"kafka_2\.13-([0-9][^-]*)\.jar$", jar)
            if match:
                return match.group(1)
        return "unknown"

    def end_offsets(self, topic: str) -> dict[int, int]:
        """High watermark per partition."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "parka-bench-watermarks", "log_level": 4})
        try:
            meta = consumer.list_topics(topic, timeout=30).topics[topic]
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in meta.partitions}
        finally:
            consumer.close()

    def log_stats(self, topic: str) -> LogStats:
        """Bytes, record batches and records in ``topic``'s ``.log`` files (all partitions)."""
        total = batches = records = biggest = 0
        for folder in glob.glob(os.path.join(self.data_dir, glob.escape(topic) + "-*")):
            if not re.fullmatch(re.escape(topic) + r"-\d+", os.path.basename(folder)):
                continue
            for path in sorted(glob.glob(os.path.join(folder, "*.log"))):
                with open(path, "rb") as f:
                    data = f.read()
                total += len(data)
                pos = 0
                while pos + _BATCH_HEADER <= len(data):
                    (length,) = struct.unpack_from(">i", data, pos + 8)
                    (count,) = struct.unpack_from(">i", data, pos + _RECORDS_COUNT_AT)
                    batches += 1
                    records += count
                    biggest = max(biggest, count)
                    pos += 12 + length
        return LogStats(bytes=total, batches=batches, records=records, max_records_per_batch=biggest)
