"""The Spark decoder's Arrow half (what runs in the Python workers), without Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from parka.spark_ext import SegmentDecoder, SparkIngestSettings
from parka.spark_ext._options import hadoop_storage_options, kafka_client_options, trigger_ms
from parka.spark_ext._session import translate

from parka.errors import ConfigError, SchemaError, SchemaMismatchError, SegmentDecodeError, SegmentError
from parka.schema import schema_fingerprint
from parka.segment import build_segment_table, encode_segment

SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("at", pa.timestamp("us", tz="UTC"))])
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def segment(table: pa.Table, **reserved: Any) -> tuple[bytes, list[tuple[str, bytes]]]:
    user = pa.schema([f for f in table.schema])
    full = build_segment_table(table, reserved.get("keys"), reserved.get("timestamps"), reserved.get("headers"))
    seg = encode_segment(full, codec="zstd", fingerprint=schema_fingerprint(user))
    return seg.value, seg.headers


def kafka_rows(*messages: tuple[bytes | None, list[tuple[str, bytes]]], first_offset: int = 10) -> pa.RecordBatch:
    n = len(messages)
    return pa.record_batch(
        {
            "value": pa.array([m[0] for m in messages], pa.binary()),
            "headers": pa.array([[{"key": k, "value": v} for k, v in m[1]] for m in messages], HEADERS_TYPE),
            "topic": pa.array(["gps"] * n),
            "partition": pa.array([3] * n, pa.int32()),
            "offset": pa.array(range(first_offset, first_offset + n), pa.int64()),
            "timestamp": pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="Etc/UTC")),
        }
    )


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"id": ids, "name": [f"n{i}" for i in ids], "at": pa.array([i * 1000 for i in ids], pa.timestamp("us", "UTC"))},
        schema=SCHEMA,
    )


def decode_all(decoder: SegmentDecoder, batch: pa.RecordBatch) -> pa.Table:
    return pa.Table.from_batches(list(decoder([batch])), schema=decoder.output_schema)


def test_segments_become_records_with_metadata() -> None:
    decoder = SegmentDecoder(SCHEMA, metadata=["topic", "partition", "offset", "index", "timestamp"])
    stamped = segment(rows(3, 2), timestamps=[5, None])
    out = decode_all(decoder, kafka_rows(segment(rows(0, 3), keys=[b"a", None, b"c"]), stamped))
    assert out.column("id").to_pylist() == [0, 1, 2, 3, 4]
    assert out.column("__parka_key").to_pylist() == [b"a", None, b"c", None, None]
    assert out.column("kafka_offset").to_pylist() == [10, 10, 10, 11, 11]
    assert out.column("kafka_index").to_pylist() == [0, 1, 2, 0, 1]
    assert set(out.column("kafka_topic").to_pylist()) == {"gps"}
    assert set(out.column("kafka_partition").to_pylist()) == {3}
    micros = [t.value for t in out.column("kafka_timestamp")]
    # the record's own timestamp (5 ms) when the producer set one, else the message's
    assert micros == [1_700_000_000_000_000] * 3 + [5000, 1_700_000_000_000_000]
    assert out.schema == decoder.output_schema


def test_reserved_dropped_and_older_segments_fill_new_nullable_columns() -> None:
    wider = SCHEMA.append(pa.field("extra", pa.float64()))
    decoder = SegmentDecoder(wider, reserved="drop")
    out = decode_all(decoder, kafka_rows(segment(rows(0, 2), keys=[b"a", b"b"])))
    assert out.column_names == ["id", "name", "at", "extra"]
    assert out.column("extra").null_count == 2


def test_not_a_segment_is_an_error_with_coordinates() -> None:
    with pytest.raises(SegmentError, match=r"not a parka segment .* at gps\[3\]@11") as info:
        list(SegmentDecoder(SCHEMA)([kafka_rows(segment(rows(0, 1)), (b"plain", []))]))
    assert info.value.value == b"plain"


def test_corrupt_segment_names_topic_partition_offset() -> None:
    value, headers = segment(rows(0, 5))
    broken = value[:40] + b"\x00" * 20 + value[60:]
    with pytest.raises(SegmentDecodeError, match=r"at gps\[3\]@10$") as info:
        list(SegmentDecoder(SCHEMA)([kafka_rows((broken, headers))]))
    assert (info.value.topic, info.value.partition, info.value.offset) == ("gps", 3, 10)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (pa.table({"id": [1], "name": ["x"], "at": [None], "more": [1]}), "column 'more' is not in the schema"),
        (pa.table({"id": ["1"], "name": ["x"]}), "column 'id' is string in the segment, int64 in the schema"),
        (pa.table({"name": ["x"]}), "non-nullable column 'id' is missing"),
        (pa.table({"id": pa.array([None], pa.int64()), "name": ["x"]}), "column 'id' holds nulls"),
    ],
)
def test_segments_that_do_not_fit_are_refused(table: pa.Table, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message):
        list(SegmentDecoder(SCHEMA)([kafka_rows(segment(table))]))


def test_schema_and_option_errors() -> None:
    with pytest.raises(SchemaError, match="time-of-day"):
        SegmentDecoder(pa.schema([("t", pa.time64("us"))]))
    with pytest.raises(SchemaError, match="metadata column"):
        SegmentDecoder(pa.schema([("kafka_offset", pa.int64())]), metadata=["offset"])
    with pytest.raises(ConfigError, match="'metadata'"):
        SegmentDecoder(SCHEMA, metadata=["key"])
    with pytest.raises(ConfigError, match="includeHeaders"):
        list(SegmentDecoder(SCHEMA)([kafka_rows(segment(rows(0, 1))).drop_columns(["headers"])]))


def test_ingest_settings_are_validated_where_they_enter() -> None:
    base = {"topic": "gps", "table_uri": "/t", "bootstrap_servers": "b:9092"}
    assert trigger_ms("processing-time=2s") == 2000
    assert trigger_ms("processing-time=250 milliseconds") == 250
    assert trigger_ms("processing-time=1.5m") == 90_000
    assert trigger_ms("available-now") is None
    with pytest.raises(ConfigError, match="'trigger'"):
        SparkIngestSettings(**base, trigger="every-now-and-then")
    with pytest.raises(ConfigError, match=r"'auto\.offset\.reset'"):
        SparkIngestSettings(**base, kafka_conf={"auto.offset.reset": "earliest"})
    with pytest.raises(ConfigError, match="'partition_by'"):
        SparkIngestSettings(**base, partition_by=("_parka",))
    with pytest.raises(ConfigError, match="storage option"):
        SparkIngestSettings(**base, storage_options={"azure_tenant": "x", "aws_acess_key_id": "typo"})
    assert hadoop_storage_options({"azure_storage_account_name": "a", "google_service_account": "s"}) == {}
    assert hadoop_storage_options({"AWS_REGION": "eu-west-1", "fs.s3a.path.style.access": "true"}) == {
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.path.style.access": "true",
    }
    # s3proxy's options as delta-rs takes them: s3a gets the endpoint path-style, as object_store
    # addresses it; the keys s3a has no setting for are not refused
    s3 = {"aws_endpoint_url": "http://127.0.0.1:19180", "aws_allow_http": "true", "aws_conditional_put": "etag"}
    assert hadoop_storage_options(s3) == {
        "fs.s3a.endpoint": "http://127.0.0.1:19180",
        "fs.s3a.path.style.access": "true",
    }
    assert hadoop_storage_options({**s3, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"})["fs.s3a.path.style.access"] == (
        "false"
    )
    assert hadoop_storage_options({**s3, "fs.s3a.path.style.access": "false"})["fs.s3a.path.style.access"] == "false"
    # raw mode's delta-spark commits on S3 would not be conditional: refused, naming the way out
    with pytest.raises(ConfigError, match=r"'commit_engine'.*conditional put.*allowed: delta-rs"):
        SparkIngestSettings(**{**base, "table_uri": "s3a://lake/t"})
    assert SparkIngestSettings(**{**base, "table_uri": "s3://lake/t"}, commit_engine="delta-rs").commit_engine
    settings = SparkIngestSettings(**base)
    assert settings.checkpoint == "/t/_parka_checkpoints/parka-gps"
    jaas = kafka_client_options({"sasl.username": "u", "sasl.password": 'p"w', "sasl.mechanisms": "SCRAM-SHA-512"})
    assert jaas["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert 'ScramLoginModule required username="u" password="p\\"w";' in jaas["kafka.sasl.jaas.config"]
    tls = kafka_client_options({"security.protocol": "SASL_SSL", "ssl.ca.location": "/ca.pem"})
    assert tls == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
    }
    own = {"ssl.ca.location": "/ca.pem", "ssl.truststore.location": "/ts.jks"}  # a Java trust store wins
    assert kafka_client_options(own) == {"kafka.ssl.truststore.location": "/ts.jks"}


def test_worker_errors_come_back_as_parka_errors() -> None:
    relayed = (
        "An exception was thrown from the Python worker.\nTraceback ...\n"
        "parka.errors.SchemaMismatchError: field 'id': the target schema cannot take this segment: "
        "column 'id' is string in the segment, int64 in the schema at my.topic[2]@41\n"
    )
    err = translate(RuntimeError(relayed))
    assert isinstance(err, SchemaMismatchError)
    assert (err.topic, err.partition, err.offset, err.field) == ("my.topic", 2, 41, "id")
    assert str(err).endswith("at my.topic[2]@41")
    assert translate(RuntimeError("something else")) is None


def test_spark_ingest_flags_mean_what_parka_ingest_flags_mean(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from parka.spark_ext._cli import build_parser, settings_from_args

    def settings(*argv: str) -> Any:
        return settings_from_args(build_parser().parse_args(["gps", "/lake/gps", *argv]))

    s = settings("-k", "b:1", "-g", "grp", "-K", "security.protocol=SSL", "--seek-offsets", '{"0": 5, "1": 7}')
    assert (s.bootstrap_servers, s.trigger) == ("b:1", "processing-time=30.0s")  # -l/--allowed-latency default
    assert s.kafka_conf == {"security.protocol": "SSL", "group.id": "grp"}
    assert s.starting_offsets == '{"gps": {"0": 5, "1": 7}}'
    assert settings("--end-at-latest").trigger == "available-now"
    assert settings("--max-segments-per-commit", "9").max_offsets_per_trigger == 9
    monkeypatch.setenv("PARKA_TRIGGER", "processing-time=5s")
    monkeypatch.setenv("PARKA_PARTITION_BY", "day,device")
    monkeypatch.setenv("PARKA_AUTO_OFFSET_RESET", "latest")
    s = settings()
    assert (s.trigger, s.partition_by, s.starting_offsets) == ("processing-time=5s", ("day", "device"), "latest")
    with pytest.raises(SystemExit) as exc:  # bad configuration: exit 2, argparse's usage error
        settings("--end-at-latest")
    assert exc.value.code == 2
    assert "--end-at-latest contradicts --trigger processing-time=5s" in capsys.readouterr().err
