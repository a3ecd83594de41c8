"""The jar files a session's resolution gave, remembered for the next JVM start that asks for the
same packages with the same resolver settings (``parka.spark_ext._session``), without Spark: a
stand-in for the running session's configuration."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from parka.spark_ext._session import _remember_jars, remembered_jars


def running(jars: str) -> SimpleNamespace:
    """What ``_remember_jars`` reads of a session: its ``spark.jars`` after Ivy's resolution."""
    return SimpleNamespace(sparkContext=SimpleNamespace(getConf=lambda: {"spark.jars": jars}))


@pytest.fixture
def resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PARKA_SPARK_REMEMBER_JARS", raising=False)
    files = [tmp_path / "ivy" / "jars" / name for name in ("io.delta_delta-spark.jar", "org.apache.kafka_kafka.jar")]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"PK")
    return [f"file://{f}" for f in files]


CONF = {"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0", "spark.jars": "/opt/kms.jar"}


def test_a_resolution_is_remembered_without_the_jars_the_session_was_given(resolved: list[str]) -> None:
    assert remembered_jars(CONF) is None
    _remember_jars(CONF, running(",".join(["file:/opt/kms.jar", *resolved])))
    assert remembered_jars(CONF) == resolved
    assert remembered_jars({**CONF, "spark.jars": ""}) == resolved  # the session's own jars are no key


def test_other_packages_or_resolver_settings_resolve_again(resolved: list[str]) -> None:
    _remember_jars(CONF, running(",".join(resolved)))
    assert remembered_jars({**CONF, "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.1"}) is None
    for key in ("spark.jars.excludes", "spark.jars.repositories", "spark.jars.ivy", "spark.jars.ivySettings"):
        assert remembered_jars({**CONF, key: "x"}) is None, key


def test_a_missing_file_or_the_variable_resolves_again(resolved: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _remember_jars(CONF, running(",".join(resolved)))
    monkeypatch.setenv("PARKA_SPARK_REMEMBER_JARS", "0")
    assert remembered_jars(CONF) is None
    monkeypatch.delenv("PARKA_SPARK_REMEMBER_JARS")
    assert remembered_jars(CONF) == resolved
    Path(resolved[1].removeprefix("file://")).unlink()
    assert remembered_jars(CONF) is None


def test_snapshots_and_sessions_without_packages_are_not_remembered(resolved: list[str]) -> None:
    snapshot = {"spark.jars.packages": "com.example:lib:1.0-SNAPSHOT"}
    _remember_jars(snapshot, running(",".join(resolved)))
    assert remembered_jars(snapshot) is None
    _remember_jars({}, running(",".join(resolved)))
    assert remembered_jars({}) is None
    assert not (Path(resolved[0].removeprefix("file://")).parents[2] / "cache").exists()
