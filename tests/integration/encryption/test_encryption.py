"""Column encryption end to end on a real broker: encrypted segments are unreadable without the
key and equal with it, through the raw bytes, the shim and ``parka ingest`` (whose data files
stay encrypted, byte for byte, with no encrypted value in the Delta log)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from parka.consumer import ParquetConsumer
from parka.lake import optimize_table

from parka.encryption import decryption_properties
from parka.errors import SegmentDecodeError

from .._ingest_util import EVENTS, last_json, message_values, run_ingest, sha256
from ._crypt import ENCRYPTED, EncryptedTopic

PLAIN = [n for n in EVENTS.names if n not in ENCRYPTED]


def test_segments_are_unreadable_without_the_key_and_equal_with_it(
    bootstrap: str, encrypted_topic: EncryptedTopic
) -> None:
    values = [m.value() for m in message_values(bootstrap, encrypted_topic.topic, encrypted_topic.segments)]
    assert len(values) == encrypted_topic.segments
    props = decryption_properties(encrypted_topic.kms)
    parts = []
    for value in values:
        for column in ENCRYPTED:
            with pytest.raises(OSError, match="decrypt"):
                pq.read_table(pa.BufferReader(value), columns=[column])
        # the footer is plaintext: schema and the plaintext columns need no key
        assert pq.read_table(pa.BufferReader(value), columns=PLAIN).num_rows == 100
        parts.append(pq.read_table(pa.BufferReader(value), decryption_properties=props))
    got = pa.concat_tables(parts).select(EVENTS.names).sort_by("id").cast(EVENTS)
    assert got.equals(encrypted_topic.rows)


def _consume(conf: dict[str, Any], topic: str, expected: int, timeout_s: float = 60) -> list[Any]:
    out: list[Any] = []
    with ParquetConsumer(conf) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.consume(1000, timeout=1.0))
    return out


def test_the_shim_decrypts_with_the_kms_settings(bootstrap: str, encrypted_topic: EncryptedTopic) -> None:
    base = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    records = _consume(
        {**base, "group.id": f"g-{uuid.uuid4().hex[:8]}", **encrypted_topic.reader_conf},
        encrypted_topic.topic,
        len(encrypted_topic.rows),
    )
    assert all(m.error() is None for m in records)
    got = sorted((m.value() for m in records), key=lambda r: r["id"])
    assert got == encrypted_topic.rows.to_pylist()

    with pytest.raises(SegmentDecodeError, match=r"decrypt.*configure its KMS with columnar\.encryption\.kms"):
        _consume({**base, "group.id": f"g-{uuid.uuid4().hex[:8]}"}, encrypted_topic.topic, 1)


def test_ingest_lands_the_encrypted_segments_byte_for_byte(
    bootstrap: str, encrypted_topic: EncryptedTopic, tmp_path: Path
) -> None:
    table = tmp_path / "encrypted"
    result = last_json(run_ingest(encrypted_topic.topic, table, bootstrap, "--end-at-latest"))
    segments = encrypted_topic.segments
    assert (result["segments"], result["records"]) == (segments, len(encrypted_topic.rows))
    # each Kafka partition's segments were due in one commit, and encrypted files are not stitched
    assert result["stitch_fallbacks"] == segments and result["stitched_segments"] == 0

    dt = DeltaTable(str(table))
    paths = [Path(uri.removeprefix("file://")) for uri in dt.file_uris()]
    values = message_values(bootstrap, encrypted_topic.topic, segments)
    assert sorted(sha256(p.read_bytes()) for p in paths) == sorted(sha256(m.value()) for m in values)

    # the log describes the plaintext columns only: no encrypted value, nor its null count
    for log in sorted((table / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            add = json.loads(line).get("add")
            if add is None:
                continue
            stats = json.loads(add["stats"])
            assert stats["numRecords"] == 100
            assert set(stats["minValues"]) == set(stats["maxValues"]) == {"id", "day"}
            assert set(stats["nullCount"]) == {"id", "day"}

    # delta-rs reads the plaintext columns without keys, never the encrypted ones
    assert sorted(dt.to_pyarrow_table(columns=["id"]).column("id").to_pylist()) == list(
        range(len(encrypted_topic.rows))
    )
    with pytest.raises(OSError, match="decrypt"):
        dt.to_pyarrow_table(columns=["device"])
    props = decryption_properties(encrypted_topic.kms)
    files = [pq.read_table(p, decryption_properties=props) for p in paths]
    got = pa.concat_tables(files).select(EVENTS.names).sort_by("id").cast(EVENTS)
    assert got.equals(encrypted_topic.rows)

    # parka optimize has no keys: it leaves the small encrypted files as they are (never decrypted
    # into plaintext ones), and the table is unchanged
    version = dt.version()
    optimized = optimize_table(str(table))
    assert (optimized.files_removed, optimized.encrypted_files) == (0, len(paths))
    assert DeltaTable(str(table)).version() == version
