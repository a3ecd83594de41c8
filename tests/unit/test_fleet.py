"""Several topics in one ``parka ingest`` (``consumer/_fleet.py``): the per-topic settings file,
the templates, and which lanes start when."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from parka.consumer._fleet import Fleet, LaneEnd, check_templates, read_topics_config, topic_settings
from parka.consumer._settings import IngestSettings

from parka.errors import ConfigError


def base(**kw: object) -> IngestSettings:
    return IngestSettings(topic="{topic}", table_uri="/lake/{topic}", kafka_conf={"bootstrap.servers": "k:9092"}, **kw)  # type: ignore[arg-type]


def make_fleet(
    settings: IngestSettings,
    run_lane: Callable[[IngestSettings], LaneEnd],
    *,
    topics: tuple[str, ...] = (),
    pattern: str | None = None,
    list_topics: Callable[[], list[str]] = list,
    overrides: dict[str, dict[str, Any]] | None = None,
    stop_lane: Callable[[str], None] = lambda topic: None,
    restart_s: float = 0.01,
) -> Fleet:
    return Fleet(
        settings,
        topics=topics,
        pattern=None if pattern is None else re.compile(pattern),
        overrides=overrides or {},
        refresh_s=0.01,
        list_topics=list_topics,
        run_lane=run_lane,
        stop_lane=stop_lane,
        restart_s=restart_s,
    )


def test_a_topics_table_and_its_names_come_from_the_templates() -> None:
    s = base(dlq_table_uri="/lake/{topic}_dlq", app_id="app-{topic}")
    one = topic_settings(s, "orders", {"partition_by": ("day",), "allowed_latency_s": 5.0})
    assert (one.topic, one.table_uri, one.dlq_table_uri, one.app_id) == (
        "orders",
        "/lake/orders",
        "/lake/orders_dlq",
        "app-orders",
    )
    assert (one.partition_by, one.allowed_latency_s) == (("day",), 5.0)
    assert s.partition_by == ()  # the others keep the flags' values


@pytest.mark.parametrize(
    ("kw", "flag"),
    [
        ({"table_uri": "/lake/t"}, "TABLE_URI"),
        ({"dlq_table_uri": "/lake/dlq"}, "--dlq-table"),
        ({"app_id": "one"}, "--app-id"),
    ],
)
def test_a_name_every_topic_would_share_is_refused(kw: dict[str, str], flag: str) -> None:
    s = IngestSettings(**{"topic": "{topic}", "table_uri": "/lake/{topic}", "kafka_conf": {}, **kw})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(flag)):
        check_templates(s)


def test_a_shared_consumer_group_is_refused() -> None:
    with pytest.raises(ConfigError, match="--consumer-group"):
        check_templates(IngestSettings(topic="{topic}", table_uri="/l/{topic}", kafka_conf={"group.id": "g"}))


def test_the_file_reads_each_value_as_its_flag_does(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text(
        '[topics."a"]\npartition-by = ["day", "device"]\nallowed-latency = 5\nupsert = true\n'
        'key-columns = "id"\nstorage-option = {region = "eu"}\n[topics."b"]\n'
    )
    got = read_topics_config(str(f))
    assert got["a"] == {
        "partition_by": ("day", "device"),
        "allowed_latency_s": 5.0,
        "upsert": True,
        "key_columns": ("id",),
        "storage_options": {"region": "eu"},
    }
    assert got["b"] == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[topics."a"]\nallowed-latency = 0\n', "allowed-latency"),  # the flag's own check
        ('[topics."a"]\nkafka = "x:1"\n', "a flag of one topic's run"),  # the whole process's
        ('[topics."a"]\nstop-timeout = 3\n', "a flag of one topic's run"),
        ('[topics."a"]\nno-such-flag = 1\n', "no-such-flag"),
        ("[other]\n", "[topics."),
        ("[topics.a\n", "a readable TOML file"),
    ],
)
def test_a_wrong_file_names_what_is_wrong(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "t.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(words)):
        read_topics_config(str(f))


def test_a_daemon_starts_a_lane_for_each_matching_topic_as_it_appears_and_stops_them_all() -> None:
    listed = [["p-1", "q-1", "__consumer_offsets"]]
    started: list[str] = []
    stopped: list[str] = []
    release = threading.Event()
    second_listing = threading.Event()

    def list_topics() -> list[str]:
        if len(listed) == 1 and started:
            listed.append(["p-1", "p-2", "q-1"])
            second_listing.set()
        return listed[-1]

    def run_lane(s: IngestSettings) -> LaneEnd:
        started.append(s.topic)
        release.wait(10)
        return LaneEnd(s.topic, 0, {"status": "ok"})

    fleet = make_fleet(base(), run_lane, pattern=r"p-.*", list_topics=list_topics, stop_lane=stopped.append)
    runner = threading.Thread(target=lambda: setattr(fleet, "result", fleet.run()))
    runner.start()
    assert second_listing.wait(10)
    while len(started) < 2:
        release.wait(0.01)
    fleet.stop()
    release.set()
    runner.join(10)
    assert sorted(started) == ["p-1", "p-2"]  # each once, q-1 and Kafka's own never
    assert sorted(stopped) == ["p-1", "p-2"]
    assert [e.topic for e in fleet.result] == ["p-1", "p-2"]  # type: ignore[attr-defined]


def test_a_run_once_lists_the_topics_once_and_waits_for_every_lane() -> None:
    calls = []

    def list_topics() -> list[str]:
        calls.append(1)
        return ["p-1", "p-2"]

    run_lane = lambda s: LaneEnd(s.topic, 2 if s.allowed_latency_s == 9.0 else 0, {})  # noqa: E731
    overrides = {"p-2": {"allowed_latency_s": 9.0}}
    fleet = make_fleet(
        base(end_at_latest=True), run_lane, pattern=r"p-.*", list_topics=list_topics, overrides=overrides
    )
    assert [(e.topic, e.code) for e in fleet.run()] == [("p-1", 0), ("p-2", 2)]
    assert calls == [1]


def test_a_daemons_lane_that_an_error_ended_starts_again_and_a_run_onces_does_not() -> None:
    calls: list[str] = []
    again = threading.Event()

    def run_lane(s: IngestSettings) -> LaneEnd:
        calls.append(s.topic)
        if len(calls) == 1:
            return LaneEnd(s.topic, 1, {})  # e.g. its table unwritable for a while
        again.set()
        return LaneEnd(s.topic, 0, {"status": "ok"})  # stopped

    daemon = make_fleet(base(), run_lane, topics=("a",))
    runner = threading.Thread(target=daemon.run)
    runner.start()
    assert again.wait(10)
    daemon.stop()
    runner.join(10)
    assert calls == ["a", "a"] and daemon.ends["a"].code == 0
    calls.clear()
    assert [e.code for e in make_fleet(base(end_at_latest=True), run_lane, topics=("a",)).run()] == [1]
    assert calls == ["a"]


def test_a_lane_waiting_to_start_again_when_the_daemon_is_stopped_ends_as_stopped() -> None:
    failed = threading.Event()

    def run_lane(s: IngestSettings) -> LaneEnd:
        failed.set()
        return LaneEnd(s.topic, 1, {})

    fleet = make_fleet(base(), run_lane, topics=("a",), restart_s=60)
    runner = threading.Thread(target=fleet.run)
    runner.start()
    assert failed.wait(10)
    fleet.stop()  # during its 60 s pause
    runner.join(10)
    assert not runner.is_alive() and fleet.ends["a"].code == 0  # SIGTERM: a daemon exits 0


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--topics-regex", "x.*", "t", "/lake/{topic}"], "'TOPIC'"),  # a TOPIC beside the pattern
        (["a,b", "/lake/t"], "'TABLE_URI'"),  # two topics, one table
        (["a", "/lake/t", "--topics-config", "/etc/t.toml"], "--topics-config"),  # one topic
        (["--topics-regex", "x(", "/lake/{topic}"], "--topics-regex"),  # not a pattern
    ],
)
def test_the_command_line_of_several_topics_is_checked_at_start(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from parka.consumer._cli import main

    with pytest.raises(SystemExit) if "x(" in argv else contextlib.nullcontext():
        assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_a_thread_started_for_a_topic_carries_it_and_one_started_for_none_has_none() -> None:
    from parka import logtopic

    seen: list[str | None] = []

    def started_from(name: str | None) -> None:
        logtopic.set_topic(name)
        child = threading.Thread(target=logtopic.carried(lambda: seen.append(logtopic.topic())))
        child.start()
        child.join()

    for name in ("orders", None):
        parent = threading.Thread(target=started_from, args=(name,))
        parent.start()
        parent.join()
    assert seen == ["orders", None]


def test_a_topic_named_twice_gets_one_lane() -> None:
    ran: list[str] = []
    fleet = make_fleet(
        base(end_at_latest=True), lambda s: LaneEnd(s.topic, ran.append(s.topic) or 0, {}), topics=("a", "a")
    )
    assert [e.topic for e in fleet.run()] == ["a"] and ran == ["a"]
