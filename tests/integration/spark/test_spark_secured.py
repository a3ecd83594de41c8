"""``parka spark-ingest`` against the SASL_SSL broker of tests/integration/secured (one broker for
both directories): the same ``-K`` settings as ``parka ingest`` (librdkafka's names, from the
environment) reach Spark's Kafka source, and the password shows neither in the command's output
nor in the JVM's own log (Spark's and the Kafka Java client's, at INFO for this test). A wrong
password fails the command within seconds, naming the authentication failure."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parka.producer import ParquetProducer
from parka.spark_ext._cli import main

from .._ingest_util import EVENTS, events, table_ids
from .._secured import SecuredBroker
from ._util import SPARK

pytestmark = SPARK


def _jvm_log_to(spark: Any, path: Path) -> Callable[[], None]:
    """Every JVM log line at INFO and above also goes to ``path`` (a log4j2 file appender on
    the root logger); returns what undoes it."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    ctx = log4j.core.LoggerContext.getContext(False)
    config = ctx.getConfiguration()
    appender = (
        log4j.core.appender.FileAppender.newBuilder()
        .withFileName(str(path))
        .setName("parka-secured-test")
        .setLayout(log4j.core.layout.PatternLayout.createDefaultLayout(config))
        .setConfiguration(config)
        .build()
    )
    appender.start()
    root = config.getRootLogger()
    level_before = root.getLevel()
    root.addAppender(appender, log4j.Level.INFO, None)
    root.setLevel(log4j.Level.INFO)
    ctx.updateLoggers()

    def undo() -> None:
        root.removeAppender("parka-secured-test")
        root.setLevel(level_before)
        ctx.updateLoggers()
        appender.stop()

    return undo


def test_spark_ingest_over_sasl_ssl_logs_no_secret(
    spark: Any,
    secured_broker: SecuredBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = secured_broker.new_topic(partitions=2)
    conf = secured_broker.client(**{"columnar.encoding": "parquet", "columnar.batch.records": 50})
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, EVENTS)
        producer.produce_batch(topic, events(0, 200), key_column="device")
        assert producer.flush(30) == 0
    monkeypatch.setenv("PARKA_KAFKA_SETTINGS", secured_broker.settings_env())
    table = tmp_path / "events"
    caplog.set_level(logging.INFO, logger="parka")
    jvm_log = tmp_path / "jvm.log"
    undo = _jvm_log_to(spark, jvm_log)
    try:
        assert main([topic, str(table), "-k", secured_broker.bootstrap, "--end-at-latest"]) == 0
    finally:
        undo()
    out, err = capfd.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert (result["status"], result["records"]) == ("ok", 200)
    assert sorted(table_ids(table)) == list(range(200))
    logged = out + err + caplog.text
    assert "'sasl.password': '***'" in logged, logged[-2000:]  # the settings were logged, masked
    assert secured_broker.password not in logged
    jvm = jvm_log.read_text()
    # the Kafka Java client logged its settings (SASL_SSL, the PEM trust store), the JAAS hidden
    assert "security.protocol = SASL_SSL" in jvm and "sasl.jaas.config = [hidden]" in jvm, jvm[-3000:]
    assert "ssl.truststore.type = PEM" in jvm
    assert secured_broker.password not in jvm


def test_spark_ingest_with_a_wrong_password_fails_naming_it(
    spark: Any,
    secured_broker: SecuredBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = secured_broker.new_topic()
    wrong = "not-the-" + secured_broker.password[:8]
    monkeypatch.setenv("PARKA_KAFKA_SETTINGS", secured_broker.settings_env(**{"sasl.password": wrong}))
    caplog.set_level(logging.INFO, logger="parka")
    started = time.monotonic()
    # exit 2, bad configuration (docs/operating.md): the probe before the Spark session names it in
    # librdkafka's words; before that probe, Spark's query failed with the Java client's exception (exit 1)
    assert main([topic, str(tmp_path / "t"), "-k", secured_broker.bootstrap, "--end-at-latest"]) == 2
    elapsed = time.monotonic() - started
    out, err = capfd.readouterr()
    failure = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    said = f"stopped: Kafka refused the credentials at {secured_broker.bootstrap}: SASL authentication error"
    assert len(failure) == 1 and failure[0].startswith(said), failure
    assert "invalid credentials" in failure[-1]
    assert elapsed < 60, f"parka spark-ingest took {elapsed:.0f} s to give up"
    assert wrong not in out + err + caplog.text
