"""Column encryption without a broker: settings, the local KMS, segments, and what ingestion reads
of an encrypted footer (statistics, partitions, stitching)."""

from __future__ import annotations

import base64
import json
import os
import pickle
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from parka.lake import RsEngine
from parka.lake._files import check_segment, read_footer, read_segment
from parka.lake._stats import data_file_stats
from parka.lake._stitch import NotStitchable, Source, encrypted_columns, stitch
from parka.lake._stitch import read_footer as stitch_footer
from parka.spark_ext import SegmentDecoder

from parka.config import parse_producer_config
from parka.encryption import LocalKmsClient, parse_kms_config, spark_hadoop_conf
from parka.errors import ConfigError, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.schema import schema_fingerprint
from parka.segment import Segment, decode_segment, encode_segment

FOOTER_KEY = base64.b64encode(bytes(range(16))).decode()
COLUMN_KEY = base64.b64encode(bytes(range(100, 132))).decode()
KEYS = f"kf:{FOOTER_KEY}, kc:{COLUMN_KEY}"
CONF = {
    "columnar.encoding": "parquet",
    "columnar.encryption.columns": "kc:secret,nested.b",
    "columnar.encryption.footer.key": "kf",
    "columnar.encryption.kms.keys": KEYS,
}
TABLE = pa.table(
    {
        "id": pa.array([3, 1, 2], pa.int64()),
        "secret": ["s-a", "s-b", "s-c"],
        "nested": [{"a": 1, "b": 10}, {"a": 2, "b": 20}, {"a": 3, "b": 30}],
    }
)


def encrypted(table: pa.Table = TABLE, **extra: str) -> Segment:
    settings, _ = parse_producer_config({**CONF, **extra})
    return encode_segment(
        table, codec="zstd", fingerprint=schema_fingerprint(table.schema), encryption=settings.encryption
    )


def test_only_the_chosen_columns_are_encrypted_and_the_key_reads_them() -> None:
    seg = encrypted()
    # footer indexes: id 0, secret 1, nested.a 2, nested.b 3
    assert encrypted_columns(seg.value) == {1, 3}
    with pytest.raises(OSError, match="decrypt"):
        pq.read_table(pa.BufferReader(seg.value))
    assert pq.read_table(pa.BufferReader(seg.value), columns=["id"]).column("id").to_pylist() == [3, 1, 2]
    with pytest.raises(SegmentDecodeError, match=r"columnar\.encryption\.kms"):
        decode_segment(seg.value, seg.headers)
    kms = parse_kms_config({"columnar.encryption.kms.keys": KEYS})
    assert decode_segment(seg.value, seg.headers, kms=kms).equals(TABLE)
    plain = encode_segment(TABLE, codec="zstd", fingerprint=schema_fingerprint(TABLE.schema))
    assert encrypted_columns(plain.value) == frozenset()
    assert decode_segment(plain.value, plain.headers, kms=kms).equals(TABLE)  # plaintext still reads


def test_a_wrong_master_key_is_refused_by_name() -> None:
    seg = encrypted()
    other = base64.b64encode(os.urandom(32)).decode()
    wrong = parse_kms_config({"columnar.encryption.kms.keys": f"kf:{FOOTER_KEY},kc:{other}"})
    with pytest.raises(SegmentDecodeError, match="'kc' does not unwrap"):
        decode_segment(seg.value, seg.headers, kms=wrong)
    missing = parse_kms_config({"columnar.encryption.kms.keys": f"kf:{FOOTER_KEY}"})
    with pytest.raises(SegmentDecodeError, match="'kc' is not among"):
        decode_segment(seg.value, seg.headers, kms=missing)


def test_local_kms_wraps_like_parquet_mr_in_memory_kms() -> None:
    """base64(nonce 12 || AES-GCM ciphertext || tag 16), the master key id as AAD."""
    key = bytes(range(16))
    wrapped = LocalKmsClient({"k": key}).wrap_key(b"0123456789abcdef", "k")
    raw = base64.b64decode(wrapped)
    assert len(raw) == 12 + 16 + 16
    assert AESGCM(key).decrypt(raw[:12], raw[12:], b"k") == b"0123456789abcdef"


def test_encrypted_footer_is_opaque_without_keys_and_ingestion_says_why() -> None:
    seg = encrypted(**{"columnar.encryption.plaintext.footer": "false"})
    assert seg.value[-4:] == b"PARE"
    with pytest.raises(SegmentDecodeError, match=r"encrypted footer.*plaintext.footer=true"):
        read_footer(seg.value, 3)
    kms = parse_kms_config({"columnar.encryption.kms.keys": KEYS})
    assert decode_segment(seg.value, seg.headers, kms=kms).equals(TABLE)


def test_statistics_of_encrypted_columns_stay_out_of_the_log() -> None:
    seg = encrypted()
    read = read_segment(topic="t", partition=0, offset=7, value=seg.value, headers=seg.headers)
    # found through the fast path too (pyarrow's serialized_size leaves the footer's signature out)
    assert read.encrypted == encrypted_columns(seg.value, read.meta.serialized_size) == {1, 3}
    stats = json.loads(data_file_stats(read.meta, TABLE.schema, encrypted=read.encrypted))
    assert stats["numRecords"] == 3
    assert stats["minValues"] == {"id": 1, "nested": {"a": 1}}
    assert stats["maxValues"] == {"id": 3, "nested": {"a": 3}}
    assert stats["nullCount"] == {"id": 0, "nested": {"a": 0}}
    assert "s-a" not in json.dumps(stats)


def test_encrypted_files_are_not_stitched() -> None:
    """fastparquet's Thrift classes lack the encryption structs: asking for the fields raised
    KeyError('EncryptionAlgorithm') instead of NotStitchable before the field-id check."""
    a, b = encrypted(), encrypted()
    with pytest.raises(NotStitchable, match="encrypted"):
        stitch([Source(stitch_footer(a.value)), Source(stitch_footer(b.value))])


def test_partitioning_by_an_encrypted_column_is_refused() -> None:
    seg = encrypted()
    read = read_segment(topic="t", partition=0, offset=7, value=seg.value, headers=seg.headers)
    with pytest.raises(SegmentDecodeError, match="partition column 'secret' is encrypted"):
        check_segment(
            read, table_schema=TABLE.schema, partition_by=["secret"], merge=False, check_columns=RsEngine.check_columns
        )
    # a plaintext partition column spanning several values would need a split: refused too
    with pytest.raises(SchemaMismatchError, match="encrypted, so it cannot be split"):
        check_segment(
            read, table_schema=TABLE.schema, partition_by=["id"], merge=False, check_columns=RsEngine.check_columns
        )


@pytest.mark.parametrize(
    ("extra", "key", "match"),
    [
        ({"columnar.encryption.columns": "secret"}, "columnar.encryption.columns", "not 'key:columns'"),
        ({"columnar.encryption.columns": "kc:a;kf:a"}, "columnar.encryption.columns", "two keys"),
        ({"columnar.encryption.footer.key": ""}, "columnar.encryption.footer.key", "footer key"),
        ({"columnar.encryption.footer.key": "nope"}, "columnar.encryption.footer.key", "ids of the local KMS"),
        ({"columnar.encryption.plaintext.footer": "maybe"}, "columnar.encryption.plaintext.footer", "true"),
        ({"columnar.encryption.colums": "kc:a"}, "columnar.encryption.colums", "known keys"),
        ({"columnar.encoding": "none"}, "columnar.encryption.columns", "columnar.encoding is none"),
        ({"columnar.encryption.kms.client": "no such thing"}, "columnar.encryption.kms.client", "module:Class"),
        ({"columnar.encryption.cache.lifetime.s": "0"}, "columnar.encryption.cache.lifetime.s", "> 0"),
    ],
)
def test_bad_settings_name_the_key(extra: dict[str, str], key: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        parse_producer_config({**CONF, **extra})
    assert info.value.key == key


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        (f"kf{FOOTER_KEY}", "no 'id:'"),
        ("kf:not base64!", "not base64"),
        (f"kf:{base64.b64encode(b'short').decode()}", "has 5 bytes"),
        (f"kf:{FOOTER_KEY},kf:{COLUMN_KEY}", "given twice"),
    ],
)
def test_bad_master_keys_are_refused_without_showing_them(keys: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        parse_kms_config({"columnar.encryption.kms.keys": keys})
    assert FOOTER_KEY not in str(info.value) and COLUMN_KEY not in str(info.value)
    assert FOOTER_KEY[:8] not in str(info.value)


def test_keys_come_from_the_environment_and_never_show_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARKA_KMS_KEYS", KEYS)
    settings, client = parse_producer_config({k: v for k, v in CONF.items() if k != "columnar.encryption.kms.keys"})
    assert settings.encryption is not None
    assert dict(settings.encryption.kms.master_keys)["kc"] == bytes(range(100, 132))
    assert not any(k.startswith("columnar.") for k in client)
    for text in (repr(settings), str(settings)):
        assert FOOTER_KEY not in text and "kf:" not in text and repr(bytes(range(16))) not in text
    monkeypatch.delenv("PARKA_KMS_KEYS")
    with pytest.raises(ConfigError, match="the local KMS has no keys"):
        parse_kms_config({"columnar.encryption.kms.client": "local"})


def test_readers_refuse_writer_keys_and_a_missing_column_is_named() -> None:
    with pytest.raises(ConfigError, match="known keys"):
        parse_kms_config(CONF)
    with pytest.raises(SegmentError, match="names nope, not a column"):
        encrypted(**{"columnar.encryption.columns": "kc:nope"})


def test_a_kms_client_class_path_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    kms = parse_kms_config(
        {"columnar.encryption.kms.client": f"{__name__}:ReversingKms", "columnar.encryption.kms.conf.x": "1"}
    )
    assert kms is not None and kms.master_keys == ()
    settings, _ = parse_producer_config(
        {
            "columnar.encoding": "parquet",
            "columnar.encryption.columns": "a:secret",
            "columnar.encryption.footer.key": "f",
            "columnar.encryption.kms.client": f"{__name__}:ReversingKms",
            "columnar.encryption.kms.conf.x": "1",
        }
    )
    seg = encode_segment(
        TABLE, codec="none", fingerprint=schema_fingerprint(TABLE.schema), encryption=settings.encryption
    )
    assert ReversingKms.seen == {"x": "1"}
    assert decode_segment(seg.value, seg.headers, kms=kms).equals(TABLE)
    with pytest.raises(ConfigError, match="local"):
        spark_hadoop_conf(kms)


class ReversingKms(LocalKmsClient):
    """A stand-in for a user's KMS client class: built from the connection config."""

    seen: ClassVar[dict[str, str]] = {}

    def __init__(self, config: object) -> None:
        ReversingKms.seen = dict(config.custom_kms_conf)  # type: ignore[attr-defined]
        super().__init__({"f": bytes(16), "a": bytes(range(16))})


def test_spark_decoder_decrypts_with_kms_settings_shipped_to_executors() -> None:
    """``SegmentDecoder`` is pickled to Spark's executors with its ``kms``; each builds its own
    key cache there (the Spark tests cover parquet-mr; this is the Python decoder's path)."""
    from .test_spark_decoder import decode_all, kafka_rows

    seg = encrypted()
    kms = parse_kms_config({"columnar.encryption.kms.keys": KEYS})
    assert pickle.loads(pickle.dumps(kms)) == kms
    decoder = pickle.loads(pickle.dumps(SegmentDecoder(TABLE.schema, reserved="drop", kms=kms)))
    got = decode_all(decoder, kafka_rows((seg.value, seg.headers)))
    assert got.to_pylist() == TABLE.to_pylist()
    with pytest.raises(SegmentDecodeError, match=r"columnar\.encryption\.kms"):
        decode_all(SegmentDecoder(TABLE.schema, reserved="drop"), kafka_rows((seg.value, seg.headers)))
