"""Encrypted segments on Spark: delta-spark (parquet-mr) decrypts the files ``parka ingest`` landed
with parquet-mr's ``InMemoryKMS`` and the same key list as parka's local KMS, and Spark's Parquet
writer and pyarrow read each other's encrypted files (``parka.spark_ext``'s own decoder with KMS
settings is tested in ``tests/unit/test_encryption.py``). The KMS client class comes from parquet-mr's tests jar
(``scripts/parquet-kms-jar.sh``), on the shared session's ``spark.jars`` (conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from parka.spark_ext import encryption_conf

from parka.encryption import decryption_properties

from .._ingest_util import EVENTS, last_json, run_ingest
from ..encryption._crypt import EncryptedTopic, make_encrypted_topic
from ._util import SPARK, rows_via_spark

pytestmark = SPARK


@pytest.fixture(scope="module")
def encrypted_topic(bootstrap: str) -> EncryptedTopic:
    return make_encrypted_topic(bootstrap)


@pytest.fixture
def decrypting(spark: Any, encrypted_topic: EncryptedTopic) -> Iterator[dict[str, str]]:
    """The session reads with the topic's keys (Spark copies SQL settings into the Hadoop conf
    parquet-mr reads); unset afterwards, as the session is shared."""
    conf = {
        k.removeprefix("spark.hadoop."): v
        for k, v in encryption_conf(encrypted_topic.kms).items()
        if k.startswith("spark.hadoop.")
    }
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield conf
    finally:
        for key in conf:
            spark.conf.unset(key)


def test_delta_spark_reads_the_ingested_encrypted_files_with_the_keys_only(
    spark: Any, bootstrap: str, encrypted_topic: EncryptedTopic, tmp_path: Path
) -> None:
    table = tmp_path / "encrypted"
    result = last_json(run_ingest(encrypted_topic.topic, table, bootstrap, "--end-at-latest"))
    assert result["records"] == len(encrypted_topic.rows)

    with pytest.raises(Exception, match=r"FAILED_READ_FILE|ParquetCryptoRuntimeException|decrypt"):
        spark.read.format("delta").load(str(table)).select("device").collect()

    conf = {k.removeprefix("spark.hadoop."): v for k, v in encryption_conf(encrypted_topic.kms).items()}
    keys = ("parquet.crypto.factory.class", "parquet.encryption.kms.client.class", "parquet.encryption.key.list")
    for key in keys:
        spark.conf.set(key, conf[key])
    try:
        got = rows_via_spark(spark, table, EVENTS.names)
    finally:
        for key in keys:
            spark.conf.unset(key)
    assert got == encrypted_topic.rows.to_pylist()


def test_spark_and_pyarrow_read_each_others_encrypted_files(
    spark: Any, decrypting: dict[str, str], encrypted_topic: EncryptedTopic, tmp_path: Path
) -> None:
    out = tmp_path / "by-spark"
    df = spark.createDataFrame(encrypted_topic.rows.slice(0, 50).select(["id", "device"]).to_pandas())
    (
        df.coalesce(1)
        .write.option("parquet.encryption.column.keys", "kd:device")
        .option("parquet.encryption.footer.key", "kf")
        .parquet(str(out))
    )
    [written] = list(out.glob("*.parquet"))
    assert written.read_bytes()[-4:] == b"PARE"  # parquet-mr's default: an encrypted footer
    with pytest.raises(OSError, match="encrypted"):
        pq.read_table(written)
    got = pq.read_table(written, decryption_properties=decryption_properties(encrypted_topic.kms))
    assert (
        got.select(["id", "device"]).to_pylist()
        == encrypted_topic.rows.slice(0, 50).select(["id", "device"]).to_pylist()
    )
