"""``parka ingest`` of several topics in one process (``consumer/_fleet.py``): a table per topic
from TABLE_URI's ``{topic}``, the topics named (``a,b``) or matched by ``--topics-regex`` (a
topic created while the daemon runs included), per-topic settings from ``--topics-config``, one
topic's table refusing while the others land, and two daemons splitting the topics' partitions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable
from parka.ops.health import EXIT_CONFIG

from reliability import forkserver
from reliability.procs import FAST_GROUP, wait_for

from ._ingest_util import assert_no_orphans, create_topic, log_has, produce_events, table_ids
from .metrics._scrape import bound_port, health, scrape, value

pytestmark = pytest.mark.long(60)


def fleet_command(bootstrap: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "parka.cli", "ingest", *args, "-k", bootstrap, *FAST_GROUP]


def closing_lines(stdout: str) -> dict[str, dict[str, Any]]:
    """Each topic's closing JSON line, by topic."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return {line["topic"]: line for line in lines}


def counts(topics: list[str], late: str) -> list[tuple[str, int]]:
    return [*((t, 200 + 100 * i) for i, t in enumerate(topics)), (late, 150)]


def scraped(port: int, topic: str, records: int) -> bool:
    return value(scrape(port)[1], "parka_records_total", topic=topic) == records


def has_rows(table: Path, n: int) -> bool:
    return any((table / "_delta_log").glob("[0-9]*.json")) and len(table_ids(table)) >= n


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    return f"f-{request.node.name[:24]}-{uuid.uuid4().hex[:6]}"


def test_a_pattern_lands_each_topic_into_its_own_table_and_picks_up_a_topic_created_later(
    bootstrap: str, admin: AdminClient, prefix: str, tmp_path: Path
) -> None:
    topics = [create_topic(admin, f"{prefix}-{i}", 2) for i in range(2)]
    other = create_topic(admin, f"x{prefix}-0", 1)  # matches no pattern's whole name
    for i, topic in enumerate(topics):
        produce_events(bootstrap, topic, 0, 200 + 100 * i, batch=50)
    produce_events(bootstrap, other, 0, 50, batch=50)
    lake = tmp_path / "lake"
    log = tmp_path / "log"
    command = fleet_command(bootstrap, "--topics-regex", f"{prefix}-.*", f"{lake}/{{topic}}")
    command += ["-l", "0.5", "--topics-refresh-interval", "1", "--metrics-port", "0"]
    with log.open("ab") as handle:
        proc = forkserver.popen(command, stdout=subprocess.PIPE, stderr=handle, text=True)
    try:
        for i, topic in enumerate(topics):
            wait_for(lambda t=topic, n=200 + 100 * i: has_rows(lake / t, n), f"{topic}'s table", 120)
        late = create_topic(admin, f"{prefix}-late", 3)  # the daemon lists the topics again every second
        produce_events(bootstrap, late, 0, 150, batch=50)
        wait_for(lambda: has_rows(lake / late, 150), "the topic created later to land", 120)
        # one endpoint: each topic's samples under its label, and the health of every topic
        port = bound_port(log)
        assert port is not None
        wait_for(lambda: all(scraped(port, t, n) for t, n in counts(topics, late)), "every topic's metrics", 60)
        status, body = health(port, "/readyz")
        assert status == 200 and set(body["topics"]) == {*topics, late}, body
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert proc.returncode == 0, text[-4000:]
    for i, topic in enumerate(topics):
        assert sorted(table_ids(lake / topic)) == list(range(200 + 100 * i))
        assert_no_orphans(lake / topic)
    assert sorted(table_ids(lake / late)) == list(range(150))
    assert not (lake / other).exists()
    ends = closing_lines(stdout)
    assert set(ends) == {*topics, late} and all(e["status"] == "ok" for e in ends.values()), ends
    assert f"topic {late}: partition 2 assigned" in text  # each lane's lines carry its topic,
    for topic in (*topics, late):  # its threads' too (the VACUUM at its start)
        assert f"topic {topic}: VACUUM deleted" in text, text[-3000:]


def test_per_topic_settings_apply_and_a_refusing_table_stalls_no_other_topic(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """TOPIC names three topics: the file partitions one topic's table by day; another's table
    lies under a file, so its lane stops with exit 2, while the other two land everything."""
    partitioned, plain, refused = (new_topic(partitions=2) for _ in range(3))
    for topic in (partitioned, plain, refused):
        produce_events(bootstrap, topic, 0, 300, batch=50)
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / refused).write_text("a file where a folder should be")
    config = tmp_path / "topics.toml"
    config.write_text(f'[topics."{partitioned}"]\npartition-by = ["day"]\nallowed-latency = 0.5\n')
    command = fleet_command(bootstrap, f"{partitioned},{plain},{refused}", f"{lake}/{{topic}}/t", "--end-at-latest")
    run = forkserver.run([*command, "--topics-config", str(config)], capture_output=True, text=True, timeout=180)
    assert run.returncode == EXIT_CONFIG, run.stderr[-4000:]  # the worst lane's code
    ends = closing_lines(run.stdout)
    assert ends[partitioned]["status"] == ends[plain]["status"] == "ok", ends
    assert ends[refused]["status"] == "stopped by an error", ends
    assert f"topic {refused}: stopped: table location" in run.stderr, run.stderr[-4000:]
    for topic in (partitioned, plain):
        assert sorted(table_ids(lake / topic / "t")) == list(range(300))
    assert DeltaTable(str(lake / partitioned / "t")).metadata().partition_columns == ["day"]
    assert DeltaTable(str(lake / plain / "t")).metadata().partition_columns == []


def test_two_daemons_split_the_topics_partitions_and_land_each_record_once(
    bootstrap: str, admin: AdminClient, prefix: str, tmp_path: Path
) -> None:
    topics = [create_topic(admin, f"{prefix}-{i}", 4) for i in range(2)]
    lake = tmp_path / "lake"
    command = fleet_command(bootstrap, ",".join(topics), f"{lake}/{{topic}}", "-l", "0.5", "--progress-interval", "1")
    logs = [tmp_path / f"log{n}" for n in range(2)]
    procs = []
    try:
        for log in logs:
            with log.open("ab") as handle:
                procs.append(forkserver.popen(command, stdout=subprocess.DEVNULL, stderr=handle))
        # each daemon holds partitions of each topic before the data comes: each topic's group
        # split its partitions between them
        for log in logs:
            for topic in topics:
                held = lambda lg=log, t=topic: log_has(lg, f"topic {t}: partition")  # noqa: E731
                wait_for(held, f"{log.name} to hold partitions of {topic}", 120)
        for i, topic in enumerate(topics):
            produce_events(bootstrap, topic, 0, 400 + 200 * i, batch=25)
        for i, topic in enumerate(topics):
            wait_for(lambda t=topic, n=400 + 200 * i: has_rows(lake / t, n), f"{topic}'s table", 120)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert codes == [0, 0], [log.read_text()[-3000:] for log in logs]
    for i, topic in enumerate(topics):
        assert sorted(table_ids(lake / topic)) == list(range(400 + 200 * i))  # each record once
        assert_no_orphans(lake / topic)
