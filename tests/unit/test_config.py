from __future__ import annotations

import pytest

from parka.config import ParkaConfigWarning, parse_producer_config
from parka.errors import ConfigError


def test_defaults_follow_the_kip() -> None:
    settings, client = parse_producer_config({"bootstrap.servers": "x:1"})
    assert (settings.encoding, settings.compression) == ("none", "none")
    assert client == {"bootstrap.servers": "x:1"}
    assert not settings.columnar


def test_caller_dict_is_not_modified() -> None:
    conf = {
        "bootstrap.servers": "x:1",
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
    }
    before = dict(conf)
    _, client = parse_producer_config(conf)
    assert conf == before
    assert not any(k.startswith("columnar.") for k in client)


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("columnar.encoding", "orc", "none | parquet"),
        ("columnar.encoding.compression", "brotli", "none | snappy | gzip | lz4 | zstd"),
        ("columnar.batch.records", 0, "an integer >= 1"),
        ("columnar.batch.records", "many", "an integer >= 1"),
        ("columnar.batch.bytes", 10, "an integer >= 1024"),
        ("linger.ms", -1, "a number >= 0.0"),
        ("columnar.encoding.tuning", "fast", "auto | none"),
        ("columnar.encoding.tuning", None, "auto | none"),
        ("columnar.sort.by", 7, "comma-separated column names"),
        ("columnar.sort.by", "a,b,a", "distinct names of the schema's own columns"),
        ("columnar.sort.by", "__parka_key", "distinct names of the schema's own columns"),
        ("columnar.tombstone.order", "offset", "partition | key"),
    ],
)
def test_bad_values_name_key_value_and_allowed(key: str, value: object, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_producer_config({"columnar.encoding": "parquet", key: value})
    assert info.value.key == key
    assert repr(value) in str(info.value)
    assert allowed in str(info.value)


def test_unknown_columnar_key_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"'columnar\.encodnig'.*known keys: columnar.batch.bytes"):
        parse_producer_config({"columnar.encodnig": "parquet"})


def test_segment_limit_must_fit_message_max_bytes() -> None:
    with pytest.raises(ConfigError, match=r"columnar.batch.bytes.*message.max.bytes"):
        parse_producer_config(
            {
                "columnar.encoding": "parquet",
                "columnar.batch.bytes": 2_000_000,
                "message.max.bytes": 1_000_000,
            }
        )
    settings, _ = parse_producer_config({"columnar.encoding": "parquet", "message.max.bytes": 4_000_000})
    assert settings.batch_bytes == 4_000_000 - 16 * 1024


def test_columnar_compression_disables_kafka_compression() -> None:
    _, client = parse_producer_config({"columnar.encoding": "parquet", "columnar.encoding.compression": "zstd"})
    assert client["compression.type"] == "none"


def test_explicit_kafka_compression_is_respected_with_a_warning() -> None:
    with pytest.warns(ParkaConfigWarning, match="compression.type=lz4"):
        _, client = parse_producer_config(
            {
                "columnar.encoding": "parquet",
                "columnar.encoding.compression": "zstd",
                "compression.type": "lz4",
            }
        )
    assert client["compression.type"] == "lz4"


def test_kafka_compression_untouched_without_columnar_compression() -> None:
    _, client = parse_producer_config({"columnar.encoding": "parquet", "compression.type": "gzip"})
    assert client["compression.type"] == "gzip"


def test_every_librdkafka_partitioner_is_accepted_and_the_default_is_librdkafkas() -> None:
    for name in ("random", "consistent", "consistent_random", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"):
        settings, _ = parse_producer_config({"columnar.encoding": "parquet", "partitioner": name})
        assert settings.partitioner == name
    settings, _ = parse_producer_config({"columnar.encoding": "parquet"})
    assert settings.partitioner == "consistent_random"
    with pytest.raises(ConfigError, match="'partitioner'"):
        parse_producer_config({"columnar.encoding": "parquet", "partitioner": "murmur3"})
    _, client = parse_producer_config({"partitioner": "fnv1a"})
    assert client["partitioner"] == "fnv1a"


def test_security_settings_pass_through_untouched() -> None:
    conf = {
        "columnar.encoding": "parquet",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "secret",
        "ssl.ca.location": "/etc/ca.pem",
    }
    _, client = parse_producer_config(conf)
    for key in ("security.protocol", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location"):
        assert client[key] == conf[key]


def test_ingest_settings_refuse_what_they_cannot_do() -> None:
    from parka.consumer import IngestSettings

    base = {"topic": "t", "table_uri": "/tmp/t", "kafka_conf": {}, "app_id": "a"}
    # a near-miss such as "merged" is refused, not taken as "none"
    with pytest.raises(ConfigError, match=r"'merged' for 'schema_evolution'.*none \| merge"):
        IngestSettings(**base, schema_evolution="merged")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'auto_offset_reset'"):
        IngestSettings(**base, auto_offset_reset="newest")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'allowed_latency_s'"):
        IngestSettings(**base, allowed_latency_s=0)
    with pytest.raises(ConfigError, match="'checkpoint_interval'"):
        IngestSettings(**base, checkpoint_interval=-1)
    with pytest.raises(ConfigError, match="'seek_offsets'"):
        IngestSettings(**base, seek_offsets={0: -5})
    assert IngestSettings(**base, schema_evolution="merge").schema_evolution == "merge"
    assert IngestSettings(**base, upsert=True, catalog="c").upsert  # Iceberg: by position deletes
    with pytest.raises(ConfigError, match=r"'upsert_mode'.*merge-on-read with --catalog"):
        IngestSettings(**base, upsert=True, upsert_mode="copy-on-write", catalog="c")
    assert IngestSettings(**base, upsert=True, partition_by=("day",)).partition_by == ("day",)
    with pytest.raises(ConfigError, match=r"'key_columns'.*not partitioned by"):
        IngestSettings(**base, upsert=True, partition_by=("Region",), key_columns=("region", "id"))
    with pytest.raises(ConfigError, match=r"'sequence_by'.*not partitioned by"):
        IngestSettings(**base, upsert=True, partition_by=("day=date(ts)",), sequence_by="day")
    assert IngestSettings(**base, upsert=True, partition_by=("region",), key_columns=("region", "id"), catalog="c")
    assert IngestSettings(**base, upsert=True).upsert
    with pytest.raises(ConfigError, match=r"'key_columns'.*nothing without --upsert"):
        IngestSettings(**base, key_columns=("id",))
    with pytest.raises(ConfigError, match=r"'key_columns'.*distinct column names"):
        IngestSettings(**base, upsert=True, key_columns=("id", "id"))
    assert IngestSettings(**base, upsert=True, key_columns=("id",)).key_columns == ("id",)
    cdc = IngestSettings(**base, cdc="debezium", cdc_fields=("source.db",))
    assert cdc.upsert and cdc.change_events is not None and cdc.change_events.fields == ("source.db",)
    assert IngestSettings(**base, upsert=True, upsert_mode="copy-on-write").upsert_mode == "copy-on-write"
    with pytest.raises(ConfigError, match=r"'upsert_mode'.*merge-on-read without --upsert"):
        IngestSettings(**base, upsert_mode="copy-on-write")
    with pytest.raises(ConfigError, match=r"'upsert_mode'"):
        IngestSettings(**base, upsert=True, upsert_mode="both")
    with pytest.raises(ConfigError, match=r"'cdc'"):
        IngestSettings(**base, cdc="maxwell")
    with pytest.raises(ConfigError, match=r"'cdc_fields'.*nothing without --cdc"):
        IngestSettings(**base, cdc_fields=("op",))
    with pytest.raises(ConfigError, match=r"'cdc_fields'.*envelope fields: op, ts_ms"):
        IngestSettings(**base, cdc="debezium", cdc_fields=("after.id",))


def test_both_commands_mask_the_same_secrets() -> None:
    from parka.ops.cli_util import redacted
    from parka.spark_ext._ingest import SparkIngestSettings, settings_summary

    conf = {
        "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",
        "ssl.key.password": "pw1",
        "sasl.password": "pw2",
        "sasl.jaas.config": "... password='pw3';",
        "sasl.oauthbearer.client.secret": "pw4",
        "security.protocol": "SASL_SSL",
    }
    masked = redacted(conf)
    assert masked["security.protocol"] == "SASL_SSL"
    assert all(masked[k] == "***" for k in conf if k != "security.protocol")
    # spark-ingest's summary masks ssl.keystore.key too (every key naming a secret, "key" included)
    line = settings_summary(SparkIngestSettings(topic="t", table_uri="/t", bootstrap_servers="b:9092", kafka_conf=conf))
    assert not any(secret in line for secret in ("PRIVATE KEY", "pw1", "pw2", "pw3", "pw4"))
    assert "SASL_SSL" in line


def test_settings_reprs_and_urls_mask_secrets_too(capsys: pytest.CaptureFixture[str]) -> None:
    from parka.consumer._cli import build_parser
    from parka.consumer._ingest import IngestSettings
    from parka.ops.cli_util import redacted
    from parka.spark_ext._ingest import SparkIngestSettings

    secrets = {
        "sasl.password": "pw1",
        "ssl.key.password": "pw2",
        "sasl.oauthbearer.client.secret": "pw3",
        "sasl.oauthbearer.config": "clientSecret=pw4",
        "schema.registry.basic.auth.user.info": "user:pw5",
    }
    storage = {
        "aws_secret_access_key": "pw6",
        "azure_storage_account_key": "pw7",
        "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=pw8",
        "google_service_account_key": "pw9",
    }
    masked = redacted({**secrets, **storage, "schema.registry.url": "https://u:pw10@registry:8081/x"})
    assert masked["schema.registry.url"] == "https://u:***@registry:8081/x"
    assert all(masked[k] == "***" for k in {**secrets, **storage})
    conf = {**secrets, "security.protocol": "SASL_SSL"}
    ingest = IngestSettings(topic="t", table_uri="/t", kafka_conf=conf, app_id="a", storage_options=storage)
    spark = SparkIngestSettings(
        topic="t",
        table_uri="/t",
        bootstrap_servers="b:9092",
        kafka_conf=conf,
        storage_options={"aws_secret_access_key": "pw6", "fs.azure.account.key.a.dfs.core.windows.net": "pw7"},
    )
    for text in (repr(ingest), str(ingest), repr(spark), f"{spark}"):
        assert "SASL_SSL" in text and "'sasl.password': '***'" in text
        assert not any(f"pw{i}" in text for i in range(1, 10)), text
    # a -K value without its key may be the secret itself: the error does not echo it
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["t", "/t", "-K", "security.protocol=SASL_SSL", "-K", "hunter2"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "hunter2" not in err and "--kafka-setting" in err
    assert "number 2 has no '='" in err


def test_encoding_tuning_is_auto_unless_set_to_none() -> None:
    settings, client = parse_producer_config({"columnar.encoding": "parquet"})
    assert (settings.tuning, settings.sort_by) == ("auto", ())
    settings, client = parse_producer_config(
        {"columnar.encoding": "parquet", "columnar.encoding.tuning": "NONE", "columnar.sort.by": " deviceId, ts "}
    )
    assert (settings.tuning, settings.sort_by) == ("none", ("deviceId", "ts"))
    assert not any(k.startswith("columnar.") for k in client)


def test_sort_by_without_parquet_segments_is_a_contradiction() -> None:
    with pytest.raises(ConfigError, match=r"columnar\.encoding is none") as info:
        parse_producer_config({"columnar.sort.by": "deviceId"})
    assert info.value.key == "columnar.sort.by"


def test_ingest_notes_credential_errors_from_error_cb_and_calls_the_callers_own() -> None:
    from confluent_kafka import KafkaError
    from parka.consumer._ingest import IngestionConsumer, IngestSettings

    from parka.errors import KafkaClientError

    seen: list[KafkaError] = []
    ingest = IngestionConsumer(IngestSettings(topic="t", table_uri="/t", kafka_conf={}, app_id="a"))
    on_error = ingest._error_callback(seen.append)
    on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))  # transient: retried, as before
    assert ingest._credential_error is None
    wrong = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials")
    on_error(wrong)
    on_error(KafkaError(KafkaError._SSL, "later"))  # the first failure is the one reported
    assert ingest._credential_error is wrong and len(seen) == 3
    with pytest.raises(KafkaClientError, match=r"Kafka authentication failed, stopping .*invalid credentials"):
        ingest._raise_credential_error(wrong)
