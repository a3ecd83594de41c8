"""Produce a topic of encrypted segments with the local KMS, for the encryption tests (this
folder's and ``tests/integration/spark/test_spark_encryption.py``)."""

from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic
from parka.producer import ParquetProducer

from parka.encryption import KmsSettings, parse_kms_config

from .._ingest_util import EVENTS, events

# device and value are encrypted with one key, at with another; id and day stay plaintext
COLUMN_KEYS = "kd:device,value;kt:at"
ENCRYPTED = ("device", "value", "at")
ROWS, BATCH, PARTITIONS = 600, 100, 2


@dataclass(frozen=True)
class EncryptedTopic:
    topic: str
    segments: int
    rows: pa.Table  # what was produced, sorted by id
    keys: str = field(repr=False)  # the local KMS key list, 'id:base64,...'

    @property
    def reader_conf(self) -> dict[str, str]:
        return {"columnar.encryption.kms.keys": self.keys}

    @property
    def kms(self) -> KmsSettings:
        kms = parse_kms_config(self.reader_conf)
        assert kms is not None
        return kms


def make_encrypted_topic(bootstrap: str) -> EncryptedTopic:
    keys = ",".join(f"{kid}:{base64.b64encode(os.urandom(16)).decode()}" for kid in ("kf", "kd", "kt"))
    topic = f"t-encrypted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=30)[topic].result(timeout=30)
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": BATCH,
        "columnar.encryption.columns": COLUMN_KEYS,
        "columnar.encryption.footer.key": "kf",
        "columnar.encryption.kms.keys": keys,
    }
    producer = ParquetProducer(conf)
    producer.set_schema(topic, EVENTS)
    table = events(0, ROWS)
    failed: list[Any] = []
    segments = 0
    half = ROWS // PARTITIONS
    for p in range(PARTITIONS):
        segments += producer.produce_batch(
            topic,
            table.slice(p * half, half),
            partition=p,
            on_delivery=lambda err, _msg, _n: failed.append(err) if err else None,
        )
    assert producer.flush(60) == 0
    assert failed == []
    return EncryptedTopic(topic, segments, table, keys)
